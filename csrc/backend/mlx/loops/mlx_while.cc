#include "backend/mlx/loops/mlx_while.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <mlx/compile.h>
#include <mlx/transforms.h>

#include "backend/mlx/async_eval.h"
#include "backend/mlx/graph_stats.h"
#include "backend/mlx/host/host_small.h"
#include "backend/mlx/loops/counted_loop.h"
#include "backend/mlx/loops/host_fold.h"
#include "backend/mlx/loops/host_loop.h"

namespace pjrtx::backend::loops {

namespace {

// Host callbacks of the iterations so far run with the loop's own
// evaluations, in order, not all at the end of the run (a debug.print in a
// 10,000-step loop must neither wait for the loop nor keep 10,000 nodes).
void take_effects(RunState& st, Arrays& pending) {
  pending.insert(pending.end(), st.effects.begin(), st.effects.end());
  st.effects.clear();
}

bool host_step(const RegionProgram::Step& step) {
  return step.host || step.host_call || step.inst->op == compiler::Opcode::constant;
}

// Whether the predicate can come out of host kernels (host/host_small.h) every
// iteration: the condition holds constants and steps with a host form only,
// and so does everything in the body that computes the state it reads (its
// slice of the body, down to the loop's parameters and captured values). A
// loop whose predicate depends on MLX work (a float test) keeps the path
// that waits for it, and its body keeps its traced segments: running them
// step by step for the host's sake only costs fusion there (NumPyro's NUTS
// ran 2.6x the primitives).
bool host_predicate(const compiler::Plan& plan, const RegionProgram& cond,
                    const RegionProgram& body) {
  using compiler::Opcode;
  using compiler::ValueId;
  std::set<size_t> todo;
  for (const auto& step : cond.steps) {
    if (!host_step(step)) return false;
    for (ValueId v : step.inst->operands)
      for (size_t i = 0; i < cond.params.size(); ++i)
        if (cond.params[i] == v) todo.insert(i);
  }
  std::map<ValueId, const RegionProgram::Step*> def;
  for (const auto& step : body.steps)
    for (ValueId r : step.inst->results) def[r] = &step;
  std::map<ValueId, size_t> param_index;
  for (size_t i = 0; i < body.params.size(); ++i) param_index[body.params[i]] = i;
  std::set<size_t> done;
  std::set<ValueId> seen;
  std::vector<ValueId> values;
  while (!todo.empty()) {
    size_t i = *todo.begin();
    todo.erase(todo.begin());
    if (!done.insert(i).second || i >= body.returns.size()) continue;
    values.push_back(body.returns[i]);
    while (!values.empty()) {
      ValueId v = values.back();
      values.pop_back();
      if (!seen.insert(v).second) continue;
      if (auto p = param_index.find(v); p != param_index.end()) {
        todo.insert(p->second);
        continue;
      }
      auto d = def.find(v);
      if (d == def.end()) continue;  // captured from outside: fixed during the loop
      const RegionProgram::Step& step = *d->second;
      if (!host_step(step)) return false;
      for (ValueId o : step.inst->operands) values.push_back(o);
    }
  }
  return true;
}

constexpr int64_t kEvalEveryGeneral = 16;

// `host`: the condition can be computed on the host; then the loop's small
// values are (RunState::host_small), and while the predicate comes out
// computed, the state is evaluated every kEvalEveryGeneral iterations
// instead of every one (the graph stays bounded without a wait per
// iteration).
Arrays run_general_while(const RegionProgram& cond, const RegionProgram& body, RunState& st,
                         const Arrays& in, bool host = false) {
  struct Restore {
    RunState& st;
    bool was;
    ~Restore() { st.host_small = was; }
  } restore{st, st.host_small};
  if (host) st.host_small = true;
  Arrays state = in;
  int64_t iterations = 0, unevaluated = 0;
  for (;; ++iterations) {
    mx::array p = cond.run(st, state)[0];
    std::optional<int64_t> known = st.host_small ? computed_int(p) : std::nullopt;
    if (!known || ++unevaluated >= kEvalEveryGeneral) {
      Arrays pending = state;
      if (!known) pending.push_back(p);
      take_effects(st, pending);
      eval_now(pending);
      unevaluated = 0;
    }
    if (!(known ? *known != 0 : p.item<bool>())) break;
    state = body.run(st, state);
  }
  record_loop(false, iterations);
  return state;
}

// A counted loop evaluates its state every kEvalEvery iterations: the lazy
// graph stays bounded, and the per-op cost of building it is paid without a
// sync per iteration. CPU time of jax_smoke/bench_loop.py (10,000 steps of
// x * 0.999 + 0.001 on f32[16], CPU back end, median of 3 runs on a busy
// 2-core machine) for k = 1, 4, 16, 64, 256: mx::eval 392, 152, 98, 114,
// 107 ms; mx::async_eval 180, 160, 138, 159, 154 ms; 1,000 steps with eval:
// 16 is also fastest (8.9 ms vs 11.3 ms at 256, 18.4 ms at 64). The general
// path (predicate read every iteration) took 541 ms; mx.compile'd native
// MLX 60 ms.
constexpr uint64_t kEvalEvery = 16;

// One entry of a counted loop: its trip count and the entry values of the
// induction variables the host tracks.
struct Entry {
  uint64_t trips = 0;
  std::vector<std::pair<const Induction*, Int128>> inits;
};

// nullopt when the general path must run. `fixed`: the trip count when it
// was known at compile time; then nothing is read here (no host sync), and
// only the induction variables with constant entry values are tracked.
std::optional<Entry> enter(const CountedLoop& loop, std::optional<uint64_t> fixed,
                           const RunState& st, const Arrays& in) {
  Entry e;
  if (fixed) {
    e.trips = *fixed;
    for (const Induction& v : loop.inductions)
      if (v.init_constant) e.inits.emplace_back(&v, *v.init_constant);
    return e;
  }
  // Everything unknown is read with one evaluation: one host sync per entry.
  std::optional<mx::array> bound;
  if (loop.bound_kind == CountedLoop::Bound::kCarried) bound = in[loop.bound_index];
  if (loop.bound_kind == CountedLoop::Bound::kCaptured) {
    bound = st.slots.at(loop.bound_value);
    if (!bound) return std::nullopt;
  }
  Arrays read;
  if (bound) read.push_back(*bound);
  for (const Induction& v : loop.inductions)
    if (!v.init_constant) read.push_back(in[v.index]);
  eval_now(read);
  for (const Induction& v : loop.inductions)
    e.inits.emplace_back(&v, v.init_constant ? *v.init_constant : read_int(in[v.index], v.dtype));
  Int128 init = loop.init_constant ? *loop.init_constant : read_int(in[loop.counter], loop.dtype);
  Int128 b = bound ? read_int(*bound, loop.dtype) : loop.bound_constant;
  auto trips = trip_count(loop.dir, init, b, loop.step, loop.dtype);
  if (!trips) return std::nullopt;
  e.trips = *trips;
  return e;
}

// A pure body's iterations in blocks of kEvalEvery, each block one
// mx::compile'd function: one graph replay per block instead of one per
// iteration, and element-wise work fuses across iterations. The induction
// variables' host values for the block's iterations are inputs, so the
// traced graph holds no iteration number.
struct Blocks {
  std::shared_ptr<const RegionProgram> body;
  std::shared_ptr<const CountedLoop> loop;
  // The body's index arithmetic on induction variables, computed on the
  // host per iteration (null when none folds).
  std::shared_ptr<const HostFold> fold;
  // `tiers.runs` counts body iterations, however they ran. Executor only.
  TieredFunction tiers;
  mutable std::function<Arrays(const Arrays&)> traced;

  TieredFunction::Stage stage(const RunState& st) const {
    if (st.batched || !body->pure) return TieredFunction::Stage::kEager;
    return tiers.stage(body->compile_tier);
  }

  // Runs iterations [i, i + kEvalEvery); nullopt when tracing failed (the
  // caller then runs them one by one).
  std::optional<Arrays> run(TieredFunction::Stage stage, RunState& st, const Arrays& state,
                            const Entry& e) const {
    const size_t n = state.size(), m = body->free_values.size();
    Arrays ins = state;
    for (compiler::ValueId v : body->free_values) {
      if (!st.slots[v]) return std::nullopt;
      ins.push_back(*st.slots[v]);
    }
    for (uint64_t j = 1; j <= kEvalEvery; ++j)
      for (const auto& [v, value] : e.inits)
        ins.push_back(wrapped_scalar(value + v->step * static_cast<Int128>(j), v->dtype));
    if (fold) {
      std::vector<Int128> ivs(e.inits.size());
      for (uint64_t j = 0; j < kEvalEvery; ++j) {
        for (size_t k = 0; k < ivs.size(); ++k)
          ivs[k] = e.inits[k].second + e.inits[k].first->step * static_cast<Int128>(j);
        for (mx::array& a : fold->evaluate(ivs)) ins.push_back(std::move(a));
      }
    }
    if (!traced) {
      // Which inductions the host tracks is fixed per loop (lower_while).
      std::vector<size_t> tracked;
      for (const auto& iv : e.inits) tracked.push_back(iv.first->index);
      const RegionProgram* b = body.get();
      const HostFold* f = fold.get();
      traced = [b, n, m, tracked, f](const Arrays& args) {
        TracingSegment tracing;
        RunState trace;
        trace.slots.resize(b->num_slots);
        for (size_t i = 0; i < m; ++i) trace.slots[b->free_values[i]] = args[n + i];
        Arrays s(args.begin(), args.begin() + n);
        size_t k = n + m;
        size_t folded = k + kEvalEvery * tracked.size();
        if (f != nullptr) trace.skip = &f->skip();
        HostClampedStarts starts;
        for (uint64_t j = 0; j < kEvalEvery; ++j) {
          if (f != nullptr) {
            for (compiler::ValueId v : f->inputs()) trace.slots[v] = args[folded++];
            starts.set(*f, trace.slots, args.begin() + static_cast<std::ptrdiff_t>(folded));
            folded += f->starts().size();
          }
          s = b->run(trace, s);
          for (size_t index : tracked) s[index] = args[k++];
        }
        return s;
      };
    }
    return tiers.call(stage, traced, ins);
  }
};

Arrays run_counted_while(const RegionProgram& body, RunState& st, const Arrays& in,
                         Entry& e, const Blocks* blocks) {
  Arrays state = in;
  for (uint64_t i = 1; i <= e.trips;) {
    auto stage = blocks ? blocks->stage(st) : TieredFunction::Stage::kEager;
    if (stage != TieredFunction::Stage::kEager && i + kEvalEvery - 1 <= e.trips) {
      if (auto out = blocks->run(stage, st, state, e)) {
        state = std::move(*out);
        for (auto& [v, value] : e.inits) value += v->step * static_cast<Int128>(kEvalEvery);
        i += kEvalEvery;
        blocks->tiers.runs += kEvalEvery;
        if (blocks->fold) record_folded(kEvalEvery);
        if (i <= e.trips) {
          Arrays pending = state;
          eval_now(pending);
        }
        continue;
      }
    }
    state = body.run(st, state);
    if (blocks) ++blocks->tiers.runs;
    // The body's add for an induction variable is left unevaluated (MLX
    // frees it unread); the host knows the value.
    for (auto& [v, value] : e.inits) {
      value += v->step;
      state[v->index] = wrapped_scalar(value, v->dtype);
    }
    if (i % kEvalEvery == 0 && i < e.trips) {
      Arrays pending = state;
      take_effects(st, pending);
      eval_now(pending);
    }
    ++i;
  }
  record_loop(true, static_cast<int64_t>(e.trips));
  return state;
}

}  // namespace

Kernel lower_while(LowerCtx& ctx) {
  if (std::optional<Kernel> host = loops::place_while(ctx)) return *host;
  const auto& inst = ctx.inst();
  auto cond = ctx.lower_region(inst.regions.at(0));
  auto body = ctx.lower_region(inst.regions.at(1));
  if (cond->returns.size() != 1) ctx.fail("condition must return one value");
  if (body->returns.size() != ctx.num_in()) ctx.fail("body must return the loop state");
  std::optional<CountedLoop> counted = match_counted_loop(ctx);
  const bool host = host_predicate(ctx.plan(), *cond, *body);
  if (!counted)
    return [cond, body, host](RunState& st, const Arrays& in) {
      return run_general_while(*cond, *body, st, in, host);
    };
  // Both ends constant (fori_loop and scan with static bounds): the count is
  // known now.
  std::optional<uint64_t> fixed;
  if (counted->init_constant && counted->bound_kind == CountedLoop::Bound::kConstant) {
    fixed = trip_count(counted->dir, *counted->init_constant, counted->bound_constant,
                       counted->step, counted->dtype);
    // A constant loop that wraps runs the general path every time.
    if (!fixed)
      return [cond, body](RunState& st, const Arrays& in) {
        return run_general_while(*cond, *body, st, in);
      };
  }
  // shared_ptr: Kernel is a copyable std::function.
  auto loop = std::make_shared<const CountedLoop>(std::move(*counted));
  std::shared_ptr<const Blocks> blocks;
  if (body->pure && body->compile_tier != CompileTier::kNever) {
    // The inductions enter() tracks: with a fixed count, those with a
    // constant entry value; else all.
    std::vector<size_t> tracked;
    for (const Induction& v : loop->inductions)
      if (!fixed || v.init_constant) tracked.push_back(v.index);
    blocks = std::make_shared<const Blocks>(
        Blocks{body, loop, HostFold::analyze(ctx, ctx.inst().regions.at(1), tracked)});
  }
  return [cond, body, loop, fixed, blocks](RunState& st, const Arrays& in) {
    // A batched region run carries extra leading dims: no scalar counter.
    if (st.batched) return run_general_while(*cond, *body, st, in);
    std::optional<Entry> e = enter(*loop, fixed, st, in);
    if (!e) return run_general_while(*cond, *body, st, in);
    return run_counted_while(*body, st, in, *e, blocks.get());
  };
}

}  // namespace pjrtx::backend::loops
