// What a lowered program is made of: the per-run state (one slot per plan
// value, the device's collectives), kernels, lowered regions split into
// segments, and the compile tiers a segment climbs (mx::compile). The
// lowerings that produce kernels see a LowerCtx (lower_ctx.h) and register
// in the Registry (registry.h).
#pragma once

#include <cstdint>
#include <mlx/array.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend/mlx/arrays.h"
#include "compiler/plan.h"

namespace pjrtx::backend {

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
  // Some devices of the run belong to other processes (jax.distributed):
  // every collective then passes through one exchange between processes.
  bool spans_processes = false;
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
  // By ValueId, while tracing a block of counted-loop iterations: values
  // the host computed (loops/host_fold.h) and put in their slots; the
  // instructions that define them are skipped.
  const std::vector<uint8_t>* skip = nullptr;
  // Inside a general while loop whose predicate can be computed on the host
  // (ops/control.cc): steps with a host form run it when they can.
  bool host_small = false;
};

using Kernel = std::function<Arrays(RunState&, const Arrays& operands)>;
// An instruction's form on host values (host/host_small.h): computes the results
// into `out` and returns true, or returns false when the operands are not
// all computed and small (the kernel runs instead).
using HostForm = std::function<bool(const Arrays& operands, Arrays& out)>;

// Which ops on small computed values have host forms (PJRTX_HOST,
// host/host_small.h): none, the exact integer, pred and data-movement ones, or
// those and f32/f64 arithmetic with one IEEE answer.
enum class HostMode { kOff, kInt, kAll };

// Where a stablehlo.while runs (PJRTX_LOOPS, loops/host_loop.h): as compiled
// host code when its iterations are latency-bound (auto), always where the
// host engine takes it (host), or never (mlx).
enum class LoopMode { kAuto, kHost, kMlx };

// When straight-line segments run through mx::compile (PJRTX_COMPILE).
enum class CompileTier {
  kNever,   // every step builds its MLX ops on every run
  kAuto,    // replayed from a function's 3rd run, fused from its 65th
  kAlways,  // fused from the first run
};

// One traceable function (a segment, a block of loop iterations) and how
// far up the tiers it has gone. Tiers under kAuto:
// - runs 1-2, eager: a program run once never waits for any compilation;
// - from run 3, replay: mx::compile traces it once with fusion off
//   (CompileMode::no_fuse), and later runs replay the simplified graph
//   instead of calling our kernels (no kernel compiler involved);
// - from run kFuseAfterRuns + 1 (the 65th), fused: traced again with fusion on, so
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
    HostForm host;  // empty when the op has no host form
    // A call of a function whose every step has a host form (host/host_small.h's
    // host_function): its callee's segments run on the host when they can.
    bool host_call = false;
    // Folded at lowering (its operands are constants): it hands out the same
    // arrays every run, and a host lane treats it as a constant.
    bool folded = false;
  };
  // Consecutive steps [begin, end). A fusable segment has no host sync (no
  // control flow, custom call, host transfer or RNG state) and at least two
  // steps: its steps are a pure function of `inputs` (values defined before
  // it, including captured ones) to `outputs` (values read after it), which
  // mx::compile traces once and replays (fusing element-wise chains into
  // one kernel, dropping our per-step closures). Other steps run one by one.
  //
  // A segment's host lane: the steps with a host form (host/host_small.h) whose
  // operands are constants, values from outside the segment or results of
  // other lane steps; a random key's threefry rounds, a sampler's counters.
  // A lane step whose inputs are computed when the segment runs (every
  // value it reads from outside, down its lane producers) runs on the host,
  // and the other steps become MLX nodes through a traced function of
  // their own. Which lane steps can run depends on which of the lane's
  // outside reads are computed (a flag set by a float test is not), so
  // each such pattern gets its own split (`Variant`, made on first use, at
  // most kMaxLaneVariants; other patterns run the segment whole). The lane
  // never depends on the rest, so running it first keeps every step after
  // its operands.
  struct Variant {
    std::vector<size_t> host, rest;  // steps (and the constants each side reads), in order
    bool fusable = false;            // rest is traced (two or more steps)
    std::vector<compiler::ValueId> inputs, outputs;  // rest's
    TieredFunction tiers;
    std::function<Arrays(const Arrays&)> traced;  // rest on fresh values
  };
  struct Lane {
    static constexpr size_t kMaxLaneVariants = 8;
    // Values from outside the segment the lane reads; read i is bit
    // min(i, 63) of a pattern.
    std::vector<compiler::ValueId> reads;
    // Per step of the segment (index - begin): 0 other, 1 lane, 2 constant;
    // for lane steps, the read bits they need computed (their own reads and
    // their lane producers').
    std::vector<uint8_t> kind;
    std::vector<uint64_t> needs;
    // Per step: what it reads, and what it defines (results and the values
    // of its nested regions).
    std::vector<std::vector<compiler::ValueId>> uses, defs;
    std::set<compiler::ValueId> live_out;  // defined here, read after the segment
    mutable std::map<uint64_t, std::unique_ptr<Variant>> variants;  // executor thread only
  };
  struct Segment {
    size_t begin = 0, end = 0;
    bool fusable = false;
    bool host_steps = false;  // some step has a host form
    std::vector<compiler::ValueId> inputs, outputs;
    TieredFunction tiers;
    std::function<Arrays(const Arrays&)> traced;  // the steps on fresh values
    std::shared_ptr<Lane> lane;  // null when no step can run on the host
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
  // Runs steps[i] for each i of `list`; `host`: try each step's host form.
  void run_list(RunState& st, const std::vector<size_t>& list, bool host) const;
  void run_step(RunState& st, size_t s, bool host, Arrays& ins) const;
  // The split of `seg` for the lane reads computed now, or null when no
  // lane step can run on the host (then the segment runs whole).
  const Variant* lane_variant(const RunState& st, const Segment& seg) const;
  // Runs a traced function's current stage on `inputs`' slots into
  // `outputs`' slots (counting the run); false when it should run eagerly.
  bool run_traced(RunState& st, bool fusable, const TieredFunction& tiers,
                  const std::function<Arrays(const Arrays&)>& traced,
                  const std::vector<compiler::ValueId>& inputs,
                  const std::vector<compiler::ValueId>& outputs) const;
  void run_segment(RunState& st, const Segment& seg) const;
};

// Splits a lowered region's steps into segments (backend/mlx/segments.cc).
// `breaks[i]`: step i must run on its own.
// `own[i]`: step i runs on its own too, but does not make the region impure.
void plan_segments(RegionProgram& prog, const compiler::Region& region,
                   const std::vector<bool>& breaks, const std::vector<bool>& own = {});
// Whether an instruction may be part of a fusable segment: no host sync and
// no state outside its operands. `pure_callee` answers for called functions.
bool fusable_instruction(const compiler::Instruction& inst,
                         const std::function<bool(const std::string&)>& pure_callee);

}  // namespace pjrtx::backend
