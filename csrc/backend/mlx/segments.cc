// Straight-line segments and their mx::compile tier (PJRTX_COMPILE).
//
// A region's steps are split at host syncs (while/case/if read a value on
// the host, custom calls run host kernels or Python callbacks, RNG reads a
// global key). Each run of two or more other steps is a segment: once it has
// run often enough, mx::compile traces it on placeholder inputs, simplifies
// the graph and fuses element-wise chains, and later runs replay that graph
// instead of calling our kernels. XLA's guard ops (e.g. ~6 MLX ops for a
// float `maximum`) then cost one kernel launch per fused chain on Metal,
// and no closure calls or result checks per step anywhere.
#include <cmath>
#include <cstdint>
#include <mlx/compile.h>
#include <mlx/ops.h>

#include <atomic>
#include <set>

#include "backend/mlx/registry.h"
#include "common/error.h"

namespace pjrtx::backend {

using compiler::Instruction;
using compiler::Opcode;
using compiler::Region;
using compiler::ValueId;

namespace {

// Ops that read or write state outside their operands, or sync the host.
bool breaks_segment(Opcode op) {
  switch (op) {
    case Opcode::while_: case Opcode::case_: case Opcode::if_:
    case Opcode::custom_call: case Opcode::infeed: case Opcode::outfeed:
    case Opcode::send: case Opcode::recv: case Opcode::rng:
    // A collective waits for the other devices with its operands evaluated
    // (backend/mlx/collective_run.h): a host sync, never inside a trace.
    case Opcode::all_reduce: case Opcode::all_gather: case Opcode::reduce_scatter:
    case Opcode::all_to_all: case Opcode::collective_permute:
    case Opcode::collective_broadcast:
      return true;
    default:
      return false;
  }
}

// Every value an instruction reads, including inside its nested regions
// (a region may read values of enclosing scopes), and every value defined
// inside those regions.
void collect(const Instruction& inst, std::set<ValueId>& uses, std::set<ValueId>& inner_defs) {
  uses.insert(inst.operands.begin(), inst.operands.end());
  for (const Region& r : inst.regions) {
    inner_defs.insert(r.params.begin(), r.params.end());
    uses.insert(r.returns.begin(), r.returns.end());
    for (const Instruction& sub : r.body) {
      inner_defs.insert(sub.results.begin(), sub.results.end());
      collect(sub, uses, inner_defs);
    }
  }
}

}  // namespace

bool fusable_instruction(const Instruction& inst,
                         const std::function<bool(const std::string&)>& pure_callee) {
  if (breaks_segment(inst.op)) return false;
  if (inst.op == Opcode::call) return pure_callee(inst.attr_str("callee", ""));
  if (inst.op == Opcode::composite) return pure_callee(inst.attr_str("decomposition", ""));
  for (const Region& r : inst.regions)
    for (const Instruction& sub : r.body)
      if (!fusable_instruction(sub, pure_callee)) return false;
  return true;
}

void plan_segments(RegionProgram& prog, const Region& region, const std::vector<bool>& breaks) {
  const size_t n = prog.steps.size();
  prog.segments.clear();
  for (size_t i = 0; i < n;) {
    RegionProgram::Segment seg;
    seg.begin = i;
    if (breaks[i]) {
      seg.end = ++i;
    } else {
      while (i < n && !breaks[i]) ++i;
      seg.end = i;
      seg.fusable = seg.end - seg.begin >= 2;
    }
    for (size_t k = seg.begin; k < seg.end; ++k) seg.host_steps = seg.host_steps || prog.steps[k].host;
    prog.segments.push_back(std::move(seg));
  }
  // Inputs: what a fusable segment reads but does not define. Outputs: what
  // it defines that any other step (or its nested regions) or the region's
  // returns read.
  std::vector<std::set<ValueId>> uses(n), defs(n);
  for (size_t i = 0; i < n; ++i) {
    std::set<ValueId> inner;
    collect(*prog.steps[i].inst, uses[i], inner);
    defs[i] = std::move(inner);
    defs[i].insert(prog.steps[i].inst->results.begin(), prog.steps[i].inst->results.end());
  }
  std::set<ValueId> returned(region.returns.begin(), region.returns.end());
  prog.pure = true;
  for (bool b : breaks) prog.pure &= !b;
  {
    std::set<ValueId> all_uses = returned, all_defs(region.params.begin(), region.params.end());
    for (size_t i = 0; i < n; ++i) {
      all_uses.insert(uses[i].begin(), uses[i].end());
      all_defs.insert(defs[i].begin(), defs[i].end());
    }
    for (ValueId v : all_uses)
      if (!all_defs.count(v)) prog.free_values.push_back(v);
  }
  for (auto& seg : prog.segments) {
    if (!seg.fusable) continue;
    std::set<ValueId> defined, read_outside = returned;
    for (size_t i = seg.begin; i < seg.end; ++i) defined.insert(defs[i].begin(), defs[i].end());
    std::set<ValueId> inputs;
    for (size_t i = seg.begin; i < seg.end; ++i)
      for (ValueId v : uses[i])
        if (!defined.count(v)) inputs.insert(v);
    for (size_t i = 0; i < n; ++i)
      if (i < seg.begin || i >= seg.end) read_outside.insert(uses[i].begin(), uses[i].end());
    for (size_t i = seg.begin; i < seg.end; ++i)
      for (ValueId v : prog.steps[i].inst->results)
        if (read_outside.count(v)) seg.outputs.push_back(v);
    seg.inputs.assign(inputs.begin(), inputs.end());
    // Nothing read afterwards (dead code the passes left): nothing to fuse.
    if (seg.outputs.empty()) seg.fusable = false;
  }
  prog.make_traced();
}

TieredFunction::Stage TieredFunction::stage(CompileTier tier) const {
  if (failed) return Stage::kEager;
  switch (tier) {
    case CompileTier::kNever: return Stage::kEager;
    case CompileTier::kAlways: return Stage::kFused;
    case CompileTier::kAuto:
      if (runs >= kFuseAfterRuns) return Stage::kFused;
      if (runs >= kReplayAfterRuns) return Stage::kReplay;
      return Stage::kEager;
  }
  return Stage::kEager;
}

namespace {
std::atomic<int64_t> g_replay{0}, g_fused{0}, g_failed{0};
thread_local int g_tracing = 0;

// MLX reads its compile mode when it traces; only the executor thread
// compiles, so switching the process-wide mode around one call is safe.
struct FusionOff {
  bool on;
  explicit FusionOff(bool off) : on(off) {
    if (on) mx::set_compile_mode(mx::CompileMode::no_fuse);
  }
  ~FusionOff() {
    if (on) mx::set_compile_mode(mx::CompileMode::enabled);
  }
};
}  // namespace

std::optional<Arrays> TieredFunction::call(Stage stage,
                                           const std::function<Arrays(const Arrays&)>& fn,
                                           const Arrays& ins) const {
  auto& slot = stage == Stage::kFused ? fused : replay;
  bool first = !slot;
  if (first) slot = mx::compile(fn);
  try {
    FusionOff scope(stage == Stage::kReplay);
    Arrays out = slot(ins);
    // Inputs that are placeholders (a trace of an enclosing function) only
    // call `fn`: count real traces only.
    bool traced = first && !(ins.size() > 0 && ins[0].is_tracer());
    if (traced) ++(stage == Stage::kFused ? g_fused : g_replay);
    // The fused graph supersedes the replayed one (dropping the wrapper
    // erases its MLX cache entry).
    if (stage == Stage::kFused) replay = nullptr;
    return out;
  } catch (const std::exception&) {
    // A kernel that reads a value on the host (e.g. scatter counting its
    // rounds of duplicate indices) cannot be traced: eager from now on, and
    // the eager run reports real errors.
    failed = true;
    ++g_failed;
    replay = fused = nullptr;
    return std::nullopt;
  }
}

bool tracing_segment() { return g_tracing > 0; }

namespace {
// A one-element float array holding -0: MLX 0.32 streams it into kernel
// source as `-0`, an int literal, so the fused kernel reads +0.
bool negative_zero(const mx::array& a) {
  if (a.size() != 1 || a.has_primitive() || !a.is_available()) return false;
  double v;
  switch (a.dtype()) {
    case mx::float32: v = a.data<float>()[0]; break;
    case mx::float64: v = a.data<double>()[0]; break;
    case mx::float16: v = static_cast<float>(a.data<mx::float16_t>()[0]); break;
    case mx::bfloat16: v = static_cast<float>(a.data<mx::bfloat16_t>()[0]); break;
    default: return false;
  }
  return v == 0 && std::signbit(v);
}
}  // namespace

mx::array trace_safe_constant(const mx::array& a) {
  if (a.size() != 1 || (a.dtype() != mx::complex64 && !negative_zero(a))) return a;
  mx::array flat = mx::reshape(a, {1});
  return mx::reshape(mx::slice(mx::concatenate({flat, flat}, 0), {0}, {1}), a.shape());
}

Arrays trace_safe_constants(const Arrays& as) {
  Arrays out;
  out.reserve(as.size());
  for (const auto& a : as) out.push_back(trace_safe_constant(a));
  return out;
}
TracingSegment::TracingSegment() { ++g_tracing; }
TracingSegment::~TracingSegment() { --g_tracing; }

CompileStats compile_stats() {
  return {g_replay.load(), g_fused.load(), g_failed.load()};
}

void RegionProgram::run_segment(RunState& st, const Segment& seg) const {
  // Inside a traced loop block with host-folded values: the block is one
  // trace, so the steps run (skipping the folded ones) into it.
  if (st.skip != nullptr) return run_steps(st, seg.begin, seg.end);
  // Inside a while loop whose bookkeeping runs on the host (host_small.h):
  // a traced segment would turn those steps back into graph nodes.
  if (st.host_small && seg.host_steps) return run_steps(st, seg.begin, seg.end);
  auto stage = seg.fusable && !st.batched ? seg.tiers.stage(compile_tier)
                                          : TieredFunction::Stage::kEager;
  ++seg.tiers.runs;
  Arrays ins;
  if (stage != TieredFunction::Stage::kEager) {
    ins.reserve(seg.inputs.size());
    for (ValueId v : seg.inputs) {
      if (!st.slots[v]) {  // the eager path names the instruction that reads it
        stage = TieredFunction::Stage::kEager;
        break;
      }
      ins.push_back(*st.slots[v]);
    }
  }
  std::optional<Arrays> outs;
  if (stage != TieredFunction::Stage::kEager) outs = seg.tiers.call(stage, seg.traced, ins);
  if (!outs) return run_steps(st, seg.begin, seg.end);
  for (size_t i = 0; i < outs->size(); ++i) st.slots[seg.outputs[i]] = std::move((*outs)[i]);
}

void RegionProgram::make_traced() {
  for (Segment& seg : segments) {
    if (!seg.fusable) continue;
    // The trace runs our kernels once on placeholders; a fresh run state
    // holds only the segment's own values (num_slots per trace, not per run).
    const Segment* sp = &seg;
    seg.traced = [this, sp](const Arrays& args) {
      TracingSegment tracing;
      RunState trace;
      trace.slots.resize(num_slots);
      for (size_t i = 0; i < args.size(); ++i) trace.slots[sp->inputs[i]] = args[i];
      run_steps(trace, sp->begin, sp->end);
      Arrays outs;
      outs.reserve(sp->outputs.size());
      for (ValueId v : sp->outputs) outs.push_back(*trace.slots[v]);
      return outs;
    };
  }
}

}  // namespace pjrtx::backend
