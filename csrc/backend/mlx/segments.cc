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

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "backend/mlx/host/host_small.h"
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

// The segment's host lane (RegionProgram::Lane), or none. Lane steps are
// steps with a host form whose every read is a constant, a value from
// outside the segment or another lane step's result.
void plan_lane(RegionProgram& prog, RegionProgram::Segment& seg,
               const std::vector<std::set<ValueId>>& uses,
               const std::vector<std::set<ValueId>>& defs, const std::set<ValueId>& returned) {
  seg.lane.reset();
  const size_t n = seg.end - seg.begin;
  std::set<ValueId> seg_defs;
  for (size_t i = seg.begin; i < seg.end; ++i) seg_defs.insert(defs[i].begin(), defs[i].end());
  auto lane = std::make_shared<RegionProgram::Lane>();
  lane->kind.assign(n, 0);
  lane->needs.assign(n, 0);
  std::map<ValueId, uint64_t> lane_need;  // lane results: the read bits behind them
  std::set<ValueId> consts;
  std::map<ValueId, size_t> read_index;
  bool any = false;
  for (size_t i = seg.begin; i < seg.end; ++i) {
    const RegionProgram::Step& step = prog.steps[i];
    // A folded step is a constant too (-1/n from a mean's gradient, a
    // broadcast scalar): it runs on whichever side reads it. Computed on
    // the host and handed to the traced rest as an input, it would reach
    // the fused kernels as an input instead of a constant, and they come
    // out split (the bench's MLP step with float host forms: 49 -> 66
    // primitives).
    if (step.inst->op == Opcode::constant || step.folded) {
      lane->kind[i - seg.begin] = 2;
      consts.insert(step.inst->results.begin(), step.inst->results.end());
      continue;
    }
    if (!step.host && !step.host_call) continue;
    bool ok = true;
    uint64_t need = 0;
    for (ValueId v : uses[i]) {
      // (its own nested regions' values: a reduction body's parameters)
      if (consts.count(v) || defs[i].count(v)) continue;
      if (auto it = lane_need.find(v); it != lane_need.end()) {
        need |= it->second;
        continue;
      }
      if (seg_defs.count(v)) {
        ok = false;
        break;
      }
      auto [it, fresh] = read_index.emplace(v, read_index.size());
      need |= uint64_t{1} << std::min<size_t>(it->second, 63);
    }
    if (!ok) continue;
    lane->kind[i - seg.begin] = 1;
    lane->needs[i - seg.begin] = need;
    for (ValueId r : step.inst->results) lane_need[r] = need;
    any = true;
  }
  if (!any) return;
  lane->reads.resize(read_index.size());
  for (const auto& [v, i] : read_index) lane->reads[i] = v;
  for (size_t i = seg.begin; i < seg.end; ++i) {
    lane->uses.emplace_back(uses[i].begin(), uses[i].end());
    lane->defs.emplace_back(defs[i].begin(), defs[i].end());
  }
  std::set<ValueId> read_outside = returned;
  for (size_t i = 0; i < prog.steps.size(); ++i)
    if (i < seg.begin || i >= seg.end) read_outside.insert(uses[i].begin(), uses[i].end());
  for (ValueId v : seg_defs)
    if (read_outside.count(v)) lane->live_out.insert(v);
  seg.lane = std::move(lane);
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

void plan_segments(RegionProgram& prog, const Region& region, const std::vector<bool>& breaks,
                   const std::vector<bool>& own) {
  const size_t n = prog.steps.size();
  prog.segments.clear();
  auto alone = [&](size_t i) { return breaks[i] || (i < own.size() && own[i]); };
  for (size_t i = 0; i < n;) {
    RegionProgram::Segment seg;
    seg.begin = i;
    if (alone(i)) {
      seg.end = ++i;
    } else {
      while (i < n && !alone(i)) ++i;
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
  for (auto& seg : prog.segments) plan_lane(prog, seg, uses, defs, returned);
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

// The arrays each open mx::compile call was given (outermost first). MLX
// refuses a trace whose graph reaches one of them other than through its
// placeholder ("uncaptured inputs"; the segment then runs eagerly for good),
// and a constant's array can be one: a constant defined before the segment
// is an input of its trace while a folded step inside it that is the
// identity on that constant (a convert to the same type) hands the trace
// the very same array. trace_safe_constant gives such an array a new
// identity over the same bytes.
thread_local std::vector<const Arrays*> g_trace_inputs;
struct TraceInputs {
  explicit TraceInputs(const Arrays& ins) { g_trace_inputs.push_back(&ins); }
  ~TraceInputs() { g_trace_inputs.pop_back(); }
};

bool is_trace_input(const mx::array& a) {
  for (const Arrays* ins : g_trace_inputs)
    for (const mx::array& x : *ins)
      if (x.id() == a.id()) return true;
  return false;
}

// The same bytes under a new identity (the buffer kept alive by `a`); for
// evaluated arrays that own one dense block.
std::optional<mx::array> fresh_handle(const mx::array& a) {
  if (a.status() != mx::array::Status::available || !a.flags().row_contiguous ||
      a.offset() != 0 || a.data_size() != a.size())
    return std::nullopt;
  mx::allocator::Data data(a.buffer(), [keep = a](mx::allocator::Buffer) mutable {});
  return mx::array(std::move(data), a.shape(), a.dtype());
}

// MLX reads its compile mode when it traces; only the executor thread
// compiles, so switching the process-wide mode around one call is safe.
// Traces nest (a replayed segment holding a loop whose blocks replay): the
// inner scope must leave the mode as the outer one set it, or the outer
// trace, still open, fuses after all.
thread_local int g_fusion_off = 0;
struct FusionOff {
  bool on;
  explicit FusionOff(bool off) : on(off) {
    if (on && g_fusion_off++ == 0) mx::set_compile_mode(mx::CompileMode::no_fuse);
  }
  ~FusionOff() {
    if (on && --g_fusion_off == 0) mx::set_compile_mode(mx::CompileMode::enabled);
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
    TraceInputs originals(ins);
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
  if (is_trace_input(a))
    if (auto fresh = fresh_handle(a)) return trace_safe_constant(*fresh);
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
  // Inside a while loop whose bookkeeping runs on the host (host/host_small.h):
  // a traced segment would turn those steps back into graph nodes.
  if (st.host_small && seg.host_steps) return run_steps(st, seg.begin, seg.end);
  // The host lane, where what it reads is computed: on the host, then the
  // rest alone becomes MLX nodes.
  if (const Variant* v = seg.lane && !st.batched ? lane_variant(st, seg) : nullptr) {
    run_list(st, v->host, true);
    if (!run_traced(st, v->fusable, v->tiers, v->traced, v->inputs, v->outputs))
      run_list(st, v->rest, false);
    return;
  }
  if (!run_traced(st, seg.fusable, seg.tiers, seg.traced, seg.inputs, seg.outputs))
    run_steps(st, seg.begin, seg.end);
}

const RegionProgram::Variant* RegionProgram::lane_variant(const RunState& st,
                                                          const Segment& seg) const {
  if (tracing_segment()) return nullptr;
  const Lane& lane = *seg.lane;
  // Bit 63 stands for every read from the 64th on: set when all are computed.
  uint64_t ready = lane.reads.size() > 63 ? uint64_t{1} << 63 : 0;
  for (size_t i = 0; i < lane.reads.size(); ++i) {
    const bool ok = st.slots[lane.reads[i]] && host_readable(*st.slots[lane.reads[i]]);
    if (i < 63)
      ready |= ok ? uint64_t{1} << i : 0;
    else if (!ok)
      ready &= ~(uint64_t{1} << 63);
  }
  if (auto it = lane.variants.find(ready); it != lane.variants.end()) return it->second.get();
  if (lane.variants.size() >= Lane::kMaxLaneVariants) return nullptr;
  // A new pattern: the lane steps it lets run, the constants each side
  // reads, and the rest as a traced function of what it reads.
  auto v = std::make_unique<Variant>();
  const size_t n = seg.end - seg.begin;
  std::vector<uint8_t> host(n, 0);
  std::set<ValueId> host_reads, rest_reads(lane.live_out);
  for (size_t k = 0; k < n; ++k) {
    if (lane.kind[k] == 1 && (lane.needs[k] & ~ready) == 0) host[k] = 1;
    if (lane.kind[k] != 2) (host[k] ? host_reads : rest_reads).insert(lane.uses[k].begin(), lane.uses[k].end());
  }
  // Constants (folded steps too, which read other constants) run on each
  // side that reads them: last to first, so a folded step's operands go
  // where it goes.
  std::vector<uint8_t> const_host(n, 0), const_rest(n, 0);
  for (size_t k = n; k-- > 0;) {
    if (lane.kind[k] != 2) continue;
    for (ValueId x : steps[seg.begin + k].inst->results) {
      const_host[k] = const_host[k] || host_reads.count(x);
      const_rest[k] = const_rest[k] || rest_reads.count(x);
    }
    if (const_host[k]) host_reads.insert(lane.uses[k].begin(), lane.uses[k].end());
    if (const_rest[k]) rest_reads.insert(lane.uses[k].begin(), lane.uses[k].end());
  }
  std::set<ValueId> rest_defs;
  for (size_t k = 0; k < n; ++k) {
    if (lane.kind[k] == 2) {
      if (const_host[k]) v->host.push_back(seg.begin + k);
      if (!const_rest[k]) continue;
    } else if (host[k]) {
      v->host.push_back(seg.begin + k);
      continue;
    }
    v->rest.push_back(seg.begin + k);
    rest_defs.insert(lane.defs[k].begin(), lane.defs[k].end());
  }
  bool any = false;
  for (uint8_t h : host) any = any || h;
  if (any) {
    std::set<ValueId> inputs;
    for (size_t s : v->rest)
      for (ValueId x : lane.uses[s - seg.begin])
        if (!rest_defs.count(x)) inputs.insert(x);
    v->inputs.assign(inputs.begin(), inputs.end());
    for (size_t s : v->rest)
      for (ValueId x : steps[s].inst->results)
        if (lane.live_out.count(x)) v->outputs.push_back(x);
    v->fusable = seg.fusable && v->rest.size() >= 2 && !v->outputs.empty();
    if (v->fusable) {
      const Variant* vp = v.get();
      v->traced = [this, vp](const Arrays& args) {
        TracingSegment tracing;
        RunState trace;
        trace.slots.resize(num_slots);
        for (size_t i = 0; i < args.size(); ++i) trace.slots[vp->inputs[i]] = args[i];
        run_list(trace, vp->rest, false);
        Arrays outs;
        outs.reserve(vp->outputs.size());
        for (ValueId x : vp->outputs) outs.push_back(*trace.slots[x]);
        return outs;
      };
    }
  }
  const Variant* out = any ? v.get() : nullptr;
  if (!any) v.reset();  // remembered as "run whole"
  lane.variants.emplace(ready, std::move(v));
  return out;
}

bool RegionProgram::run_traced(RunState& st, bool fusable, const TieredFunction& tiers,
                               const std::function<Arrays(const Arrays&)>& traced,
                               const std::vector<ValueId>& inputs,
                               const std::vector<ValueId>& outputs) const {
  auto stage = fusable && !st.batched ? tiers.stage(compile_tier) : TieredFunction::Stage::kEager;
  ++tiers.runs;
  if (stage == TieredFunction::Stage::kEager) return false;
  Arrays ins;
  ins.reserve(inputs.size());
  for (ValueId v : inputs) {
    if (!st.slots[v]) return false;  // the eager path names the instruction that reads it
    ins.push_back(*st.slots[v]);
  }
  std::optional<Arrays> outs = tiers.call(stage, traced, ins);
  if (!outs) return false;
  for (size_t i = 0; i < outs->size(); ++i) st.slots[outputs[i]] = std::move((*outs)[i]);
  return true;
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
