// The registry of lowerings: opcode -> function that turns one plan
// instruction into a Kernel at compile time. Attributes are parsed and
// checked once, in the lowering; the Kernel only builds MLX graph nodes.
//
// Adding an op: write `Kernel lower_foo(LowerCtx&)` in ops/<family>.cc and
// add one line to that family's register function.
#pragma once

#include <mlx/array.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/plan.h"

namespace pjrtx::backend {

namespace mx = mlx::core;
using Arrays = std::vector<mx::array>;

class CollectiveRun;

// Which of an executable's devices a program is lowered for: XLA's logical
// ids (replica, partition) in the compile options' device assignment. Each
// device gets its own lowering, so replica_id / partition_id are constants
// and a collective knows its group when it is lowered.
struct DeviceContext {
  int replica = 0, partition = 0;
  int num_replicas = 1, num_partitions = 1;
  int num_devices() const { return num_replicas * num_partitions; }
  // The device's index in the flattened assignment (replica-major), the
  // numbering use_global_device_ids groups speak.
  int logical() const { return replica * num_partitions + partition; }
};

// Per-run state: one slot per plan value (ValueIds are plan-wide, so nested
// regions and called functions share it).
struct RunState {
  std::vector<std::optional<mx::array>> slots;
  // Batched evaluation of a region (a comparator or reduction body run on
  // whole arrays of scalar pairs at once): values may carry extra leading
  // dims beyond the plan's types.
  bool batched = false;
  // Side-effecting nodes built but not evaluated yet (host callbacks that
  // may have no results, ops/callback.cc): whoever evaluates a run's values
  // evaluates these with them (the run's outputs, each while iteration).
  Arrays effects;
  // The execution's meeting point with the other devices (null on one
  // device), and how many collectives this run has passed so far.
  CollectiveRun* collectives = nullptr;
  int64_t collective_seq = 0;
};

using Kernel = std::function<Arrays(RunState&, const Arrays& operands)>;

// When straight-line segments run through mx::compile (PJRTX_COMPILE).
enum class CompileTier {
  kNever,   // every step builds its MLX ops on every run
  kAuto,    // replayed from a function's 3rd run, fused from its 64th
  kAlways,  // fused from the first run
};

// One traceable function (a segment, a block of loop iterations) and how
// far up the tiers it has gone. Tiers under kAuto:
// - runs 1-2, eager: a program run once never waits for any compilation;
// - from run 3, replay: mx::compile traces it once with fusion off
//   (CompileMode::no_fuse), and later runs replay the simplified graph
//   instead of calling our kernels (no kernel compiler involved);
// - from run kFuseAfterRuns, fused: traced again with fusion on, so
//   element-wise chains become one kernel. MLX's CPU back end compiles each
//   fused kernel with g++ (1.3 s for a 6-op kernel on this 2-core machine,
//   then cached on disk); a segment that saves ~50 us per run by fusing
//   pays that back only after thousands of runs, so fusing waits until a
//   function is clearly hot (Metal's and CUDA's runtime compilers are
//   cheaper, and the same threshold is still far below a training loop's
//   step count).
struct TieredFunction {
  static constexpr int64_t kReplayAfterRuns = 2;
  static constexpr int64_t kFuseAfterRuns = 64;
  enum class Stage { kEager, kReplay, kFused };

  // Executor thread only (every run is there).
  mutable int64_t runs = 0;
  mutable bool failed = false;  // tracing threw: eager from then on
  mutable std::function<Arrays(const Arrays&)> replay, fused;

  Stage stage(CompileTier tier) const;
  // Runs `ins` through the stage's compiled form of `fn` (traced on first
  // use); nullopt when tracing failed (`failed` is then set). Does not count.
  std::optional<Arrays> call(Stage stage, const std::function<Arrays(const Arrays&)>& fn,
                             const Arrays& ins) const;
};

// Whether this thread is inside one of our mx::compile traces (a lowering
// may then build a different, fusable graph for the same values).
bool tracing_segment();
// `a` as a traced segment may read it. mx::compile inlines a one-element
// array that is not an input of the traced function into the fused kernel's
// source, and MLX 0.32 prints a complex one as `complex64_t(re, im)` with 7
// significant digits and bare `nan`/`inf` tokens: bits lost, and a kernel
// that does not compile (jnp.unique on complex64 builds a complex NaN); a
// float -0 it prints as `-0`, an int literal that reads as +0. So complex
// one-element constants and negative zeros reach traces through a slice of
// a copy (not fusable), which MLX passes to the fused kernel as an input;
// other arrays come back as they are.
mx::array trace_safe_constant(const mx::array& a);
Arrays trace_safe_constants(const Arrays& as);
struct TracingSegment {
  TracingSegment();
  ~TracingSegment();
};

// Process-wide counts of traces, for tests (pjrtx._pjrtx.compile_stats).
struct CompileStats {
  int64_t replay_traces = 0;  // traced with fusion off
  int64_t fused_traces = 0;   // traced with fusion on
  int64_t failed_traces = 0;  // tracing threw; that function runs eagerly
};
CompileStats compile_stats();

// A lowered region: params in, returns out.
struct RegionProgram {
  struct Step {
    Kernel kernel;
    const compiler::Instruction* inst;
  };
  // Consecutive steps [begin, end). A fusable segment has no host sync (no
  // control flow, custom call, host transfer or RNG state) and at least two
  // steps: its steps are a pure function of `inputs` (values defined before
  // it, including captured ones) to `outputs` (values read after it), which
  // mx::compile traces once and replays (fusing element-wise chains into
  // one kernel, dropping our per-step closures). Other steps run one by one.
  struct Segment {
    size_t begin = 0, end = 0;
    bool fusable = false;
    std::vector<compiler::ValueId> inputs, outputs;
    TieredFunction tiers;
    std::function<Arrays(const Arrays&)> traced;  // the steps on fresh values
  };
  std::vector<compiler::ValueId> params;
  std::vector<Step> steps;
  std::vector<Segment> segments;  // cover `steps` in order
  // No step syncs the host or reads state beyond its operands: the whole
  // region may be traced (e.g. several iterations of a loop body at once).
  bool pure = false;
  // Values of enclosing scopes the region reads (not params, not its own).
  std::vector<compiler::ValueId> free_values;
  std::vector<compiler::ValueId> returns;
  size_t num_slots = 0;  // the plan's value count
  CompileTier compile_tier = CompileTier::kNever;

  Arrays run(RunState& st, const Arrays& args) const;
  // Runs the region batched: every param may have extra leading dims (MLX
  // broadcasting lines them up); for element-wise bodies. `st` supplies the
  // values the region captures from enclosing scopes.
  Arrays run_batched(RunState& st, const Arrays& args) const;

  // Builds each fusable segment's `traced` function (plan_segments calls it;
  // the functions point into this program, which must not move).
  void make_traced();

 private:
  void run_steps(RunState& st, size_t begin, size_t end) const;
  void run_segment(RunState& st, const Segment& seg) const;
};

// Splits a lowered region's steps into segments (backend/mlx/segments.cc).
// `breaks[i]`: step i must run on its own.
void plan_segments(RegionProgram& prog, const compiler::Region& region,
                   const std::vector<bool>& breaks);
// Whether an instruction may be part of a fusable segment: no host sync and
// no state outside its operands. `pure_callee` answers for called functions.
bool fusable_instruction(const compiler::Instruction& inst,
                         const std::function<bool(const std::string&)>& pure_callee);

class Lowerer;

// What a lowering sees: the instruction, its operand/result types, and a way
// to lower nested regions or called functions.
class LowerCtx {
 public:
  LowerCtx(Lowerer& lowerer, const compiler::Plan& plan,
           const compiler::Instruction& inst)
      : lowerer_(lowerer), plan_(plan), inst_(inst) {}

  const compiler::Instruction& inst() const { return inst_; }
  const compiler::Plan& plan() const { return plan_; }
  // The parts view (complex128.cc): c128 operand and result types read as
  // f64 of the same shape, the type of each part of a complex128 value, so
  // an op's own f64 lowering builds the kernel that runs on each part; a
  // c128 constant operand then reads as unknown (constant_value).
  // `c64_parts`: complex64 operands read as f64 too (a dot_general or
  // convolution of c64 operands with a c128 result widens their parts).
  void set_parts_view(bool c64_parts = false);
  bool parts_view() const { return !parts_.empty(); }
  const compiler::TensorType& in(size_t i) const;
  const compiler::TensorType& out(size_t i) const;
  size_t num_in() const { return inst_.operands.size(); }
  size_t num_out() const { return inst_.results.size(); }
  std::shared_ptr<const RegionProgram> lower_region(const compiler::Region& r);
  std::shared_ptr<const RegionProgram> lower_function(const std::string& name);
  // A run state holding the plan's constants lowered so far, for evaluating
  // a region at compile time (probes); other captured values stay unset.
  RunState constant_state() const;
  // The value of `v` when a constant instruction defines it.
  std::optional<mx::array> constant_value(compiler::ValueId v) const;
  // The device this program is lowered for.
  const DeviceContext& device() const;

  // Throws INVALID_ARGUMENT "[<op>] <message> at <loc>".
  template <typename... Args>
  [[noreturn]] void fail(const Args&... args) const;
  [[noreturn]] void fail_message(const std::string& msg) const;

 private:
  Lowerer& lowerer_;
  const compiler::Plan& plan_;
  const compiler::Instruction& inst_;
  std::vector<compiler::TensorType> parts_;  // operands then results, when set
};

using Lowering = Kernel (*)(LowerCtx&);

class Registry {
 public:
  static Registry& get();
  void add(compiler::Opcode op, Lowering fn);
  Lowering find(compiler::Opcode op) const;
  // stablehlo.custom_call targets (call_target_name -> lowering): library
  // calls JAX emits (@Qr, ...) and pjrtx's own (linalg, host callbacks).
  void add_target(const std::string& name, Lowering fn);
  Lowering find_target(const std::string& name) const;
  // Ops with a lowering, then custom_call targets as "custom_call @name".
  std::vector<std::string> supported_ops() const;

  // How often each op was lowered in this process (for tests that check
  // every registered lowering is exercised).
  void count_lowering(compiler::Opcode op);
  void count_target(const std::string& name);
  std::vector<std::pair<std::string, int64_t>> lowering_counts() const;

 private:
  Registry();
  std::vector<Lowering> table_;
  std::unique_ptr<std::atomic<int64_t>[]> counts_;
  // Targets are registered before any compile (the constructor) and only
  // read afterwards; their counts are atomics for concurrent compiles.
  std::map<std::string, std::pair<Lowering, std::unique_ptr<std::atomic<int64_t>>>> targets_;
};

// Kernel helpers for the common shapes of lowering.
template <typename F>
Kernel unary(F f) {
  return [f](RunState&, const Arrays& in) { return Arrays{f(in[0])}; };
}
template <typename F>
Kernel binary(F f) {
  return [f](RunState&, const Arrays& in) { return Arrays{f(in[0], in[1])}; };
}
template <typename F>
Kernel nary(F f) {
  return [f](RunState&, const Arrays& in) { return Arrays{f(in)}; };
}

// Family registration (one function per ops/<family>.cc).
void register_constant_ops(Registry& r);
void register_elementwise_ops(Registry& r);
void register_compare_ops(Registry& r);
void register_convert_ops(Registry& r);
void register_structural_ops(Registry& r);
void register_dot_ops(Registry& r);
void register_reduce_ops(Registry& r);
void register_call_ops(Registry& r);
void register_indexing_ops(Registry& r);
void register_pad_ops(Registry& r);
void register_bitcast_ops(Registry& r);
void register_sort_ops(Registry& r);
void register_approx_top_k_ops(Registry& r);
void register_control_ops(Registry& r);
void register_reduce_window_ops(Registry& r);
void register_convolution_ops(Registry& r);
void register_select_and_scatter_ops(Registry& r);
void register_custom_call_ops(Registry& r);
void register_collective_ops(Registry& r);
void register_bit_ops(Registry& r);
void register_rng_ops(Registry& r);
void register_fft_ops(Registry& r);
void register_linalg_factor_ops(Registry& r);
void register_callback_ops(Registry& r);
void register_linalg_eig_ops(Registry& r);
void register_linalg_reduce_ops(Registry& r);
void register_linalg_schur_ops(Registry& r);
void register_linalg_tridiagonal_solve_ops(Registry& r);

template <typename... Args>
void LowerCtx::fail(const Args&... args) const {
  std::ostringstream os;
  (os << ... << args);
  fail_message(os.str());
}

}  // namespace pjrtx::backend
