// Plan -> MLX program. Lowering runs once per compile on the executor thread
// (constants become MLX arrays there); run() builds the lazy MLX graph for one
// execution and returns the output arrays unevaluated.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>

#include "backend/mlx/constant_pool.h"
#include "backend/mlx/registry.h"
#include "compiler/plan.h"

namespace pjrtx::backend {

// Per-client lowering choices, decided once by the runtime.
struct LowerOptions {
  // The program's default stream is a GPU's (Metal, CUDA): MLX has no f64
  // there ("float64 is not supported on the GPU" at graph build), so every
  // instruction with an f64 operand or result builds its MLX ops on the CPU
  // stream instead; MLX fences between the two streams itself.
  bool gpu = false;
  // PJRTX_F64=error: refuse every instruction with an f64 operand or result
  // at compile time, on any device (on a CPU device this checks that a
  // program would run on a GPU without the CPU detour).
  bool f64_error = false;
  // PJRTX_COMPILE: when straight-line segments run through mx::compile.
  CompileTier compile_tier = CompileTier::kAuto;
  // PJRTX_HOST: which ops on small computed values run on the host
  // (host/host_small.h).
  HostMode host = HostMode::kAll;
  // PJRTX_LOOPS: where while loops run (loops/host_loop.h).
  LoopMode loops = LoopMode::kAuto;
  // The device of the executable this lowering is for.
  DeviceContext device;
};

// The lowering of one plan; each instruction's lowering reaches it through
// LowerCtx as a ProgramLowering (lower_ctx.h).
class Lowerer final : public ProgramLowering {
 public:
  explicit Lowerer(const compiler::Plan& plan, LowerOptions options = {})
      : plan_(plan), options_(options) {}
  std::shared_ptr<const RegionProgram> lower_region(const compiler::Region& r) override;
  // The region with every instruction in the parts view (complex128.h): its
  // c128 values are single f64 parts. For the bodies of ops that act on
  // each part (sums, scatter-adds), whose instructions only add or subtract.
  std::shared_ptr<const RegionProgram> lower_region_parts(const compiler::Region& r) override;
  std::shared_ptr<const RegionProgram> lower_function(const std::string& name) override;
  const std::map<compiler::ValueId, mx::array>& constants() const override { return constants_; }
  const DeviceContext& device() const override { return options_.device; }
  LoopMode loop_mode() const override { return options_.loops; }
  bool on_gpu() const override { return options_.gpu; }
  const LowerOptions& options() const { return options_; }
  // After the whole program is lowered: drops the folded values that no
  // run reads (intermediates of constant chains), so they are not held.
  void release_unread_folds(const compiler::Plan& plan);

 private:
  // Computes an instruction whose operands are all constants once, at
  // compile time, records its results as constants and returns the kernel
  // that hands them out (see kFoldGrowth in program.cc for the size guard).
  std::optional<Kernel> fold(const compiler::Instruction& inst, const Kernel& kernel);
  struct FoldedCell {
    Arrays values;
    std::vector<std::shared_ptr<const PooledArray>> pooled;
  };
  struct Folded {
    const compiler::Instruction* inst;
    std::shared_ptr<FoldedCell> cell;
  };
  std::vector<Folded> folded_;
  // Whether function `name` only has instructions a fusable segment may hold.
  bool pure_function(const std::string& name);

  const compiler::Plan& plan_;
  LowerOptions options_;
  std::map<compiler::ValueId, mx::array> constants_;
  std::map<std::string, std::shared_ptr<const RegionProgram>> functions_;
  std::set<std::string> in_progress_;
  std::map<std::string, bool> pure_;
  // Whether a call's callee runs on the host (RegionProgram::Step::host_call).
  bool host_call(const compiler::Instruction& inst);
  std::map<std::string, bool> host_functions_;
  // Whether function `name` calls (at any depth) a function that runs on
  // the host: a call of it gets a segment of its own.
  bool host_work(const std::string& name, int depth = 0);
  // A native host form for a call the host runs step by step
  // (host/host_small.h's threefry2x32_call), once checked against those steps.
  HostForm native_host_call(const compiler::Instruction& inst);
  std::map<std::string, bool> native_checked_;
  std::map<std::string, bool> host_work_;
  bool parts_mode_ = false;  // lowering a region in the parts view
};

class Program {
 public:
  // Throws INVALID_ARGUMENT "pjrtx: unsupported op <name> at <loc>" for the
  // first instruction without a lowering.
  static std::shared_ptr<Program> lower(std::shared_ptr<const compiler::Plan> plan,
                                        const LowerOptions& options = {});

  // `effects` receives the run's side-effecting nodes, which the caller
  // evaluates together with the outputs (RunState::effects).
  // `collectives`: the execution's meeting point when it spans devices.
  Arrays run(const Arrays& args, Arrays* effects = nullptr,
             CollectiveRun* collectives = nullptr) const;
  const compiler::Plan& plan() const { return *plan_; }
  // Whether a run calls Python host callbacks (custom_call @pjrtx_callback).
  bool calls_host() const { return calls_host_; }

 private:
  std::shared_ptr<const compiler::Plan> plan_;
  std::shared_ptr<const RegionProgram> entry_;
  bool calls_host_ = false;
};

}  // namespace pjrtx::backend
