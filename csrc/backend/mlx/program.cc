#include "backend/mlx/program.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <mlx/ops.h>
#include <mlx/transforms.h>

#include "backend/mlx/complex128.h"
#include "backend/mlx/dtype.h"
#include "backend/mlx/f64_scope.h"
#include "backend/mlx/constant_products.h"
#include "backend/mlx/fma_contract.h"
#include "backend/mlx/host_callback.h"
#include "backend/mlx/host/host_small.h"
#include "backend/mlx/loops/loop_stats.h"
#include "backend/mlx/widen.h"
#include "common/cpu_features.h"
#include "common/error.h"

namespace pjrtx::backend {

using compiler::Instruction;
using compiler::Opcode;
using compiler::Region;

namespace {

std::string shape_str(const mx::array& a) {
  compiler::TensorType t{from_mlx(a.dtype()), {}};
  for (auto d : a.shape()) t.shape.push_back(d);
  return t.str();
}

[[noreturn]] void rethrow_with_context(const Instruction& inst) {
  try {
    throw;
  } catch (const Error& e) {
    std::string msg = e.what();
    // Already names its op (and maybe location): keep it as it is.
    if (!msg.empty() && (msg[0] == '[' || msg.rfind("pjrtx: unsupported op", 0) == 0)) throw;
    throw Error(e.code(), "[" + inst.where() + "] " + msg);
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInternal, "[" + inst.where() + "] " + e.what());
  }
}

// Any operand or result of type t.
bool touches(const compiler::Plan& plan, const Instruction& inst, compiler::DType t) {
  for (auto v : inst.operands) if (plan.type(v).dtype == t) return true;
  for (auto v : inst.results) if (plan.type(v).dtype == t) return true;
  return false;
}

}  // namespace

Arrays RegionProgram::run(RunState& st, const Arrays& args) const {
  if (args.size() != params.size())
    throw Error(ErrorCode::kInternal, "pjrtx: region expects " +
                                          std::to_string(params.size()) +
                                          " arguments, got " +
                                          std::to_string(args.size()));
  for (size_t i = 0; i < params.size(); ++i) st.slots[params[i]] = args[i];
  for (const Segment& seg : segments) run_segment(st, seg);
  Arrays result;
  result.reserve(returns.size());
  for (compiler::ValueId v : returns) {
    if (!st.slots[v]) throw Error(ErrorCode::kInternal, "pjrtx: region returns an unset value");
    result.push_back(*st.slots[v]);
  }
  return result;
}

void RegionProgram::run_step(RunState& st, size_t s, bool host, Arrays& ins) const {
  const Step& step = steps[s];
  const Instruction& inst = *step.inst;
  ins.clear();
  for (compiler::ValueId v : inst.operands) {
    if (!st.slots[v])
      throw Error(ErrorCode::kInternal, "[" + inst.where() + "] operand %" + std::to_string(v) +
                                            " has no value (a region read a value it cannot see)");
    ins.push_back(*st.slots[v]);
  }
  Arrays outs;
  try {
    if (host && step.host && !st.batched && step.host(ins, outs))
      record_host_step();
    else
      outs = step.kernel(st, ins);
  } catch (...) {
    rethrow_with_context(inst);
  }
  if (outs.size() != inst.results.size())
    throw Error(ErrorCode::kInternal,
                "[" + inst.where() + "] lowering produced " +
                    std::to_string(outs.size()) + " results, expected " +
                    std::to_string(inst.results.size()));
  for (size_t i = 0; i < outs.size(); ++i) st.slots[inst.results[i]] = std::move(outs[i]);
}

void RegionProgram::run_steps(RunState& st, size_t begin, size_t end) const {
  Arrays ins;
  for (size_t s = begin; s < end; ++s) {
    const Instruction& inst = *steps[s].inst;
    if (st.skip != nullptr && !inst.results.empty() && (*st.skip)[inst.results[0]]) continue;
    run_step(st, s, st.host_small, ins);
  }
}

void RegionProgram::run_list(RunState& st, const std::vector<size_t>& list, bool host) const {
  Arrays ins;
  for (size_t s : list) run_step(st, s, host, ins);
}

Arrays RegionProgram::run_batched(RunState& st, const Arrays& args) const {
  struct Restore {
    RunState& st;
    bool was;
    ~Restore() { st.batched = was; }
  } restore{st, st.batched};
  st.batched = true;
  return run(st, args);
}

std::shared_ptr<const RegionProgram> Lowerer::lower_region_parts(const Region& r) {
  for (const Instruction& inst : r.body)
    if (inst.op != Opcode::add && inst.op != Opcode::subtract)
      invalid_argument("[", inst.where(), "] pjrtx: only sums and differences run on the parts "
                       "of complex128 values in a region");
  const bool was = parts_mode_;
  parts_mode_ = true;
  struct Restore {
    bool& flag;
    bool value;
    ~Restore() { flag = value; }
  } restore{parts_mode_, was};
  return lower_region(r);
}

std::shared_ptr<const RegionProgram> Lowerer::lower_region(const Region& r) {
  auto prog = std::make_shared<RegionProgram>();
  prog->params = r.params;
  prog->returns = r.returns;
  prog->num_slots = plan_.values.size();
  prog->compile_tier = options_.compile_tier;
  std::vector<bool> breaks, own_segment;
  Registry& reg = Registry::get();
  // Float negations that a sum reads: the sum's lowering computes sum(-x)
  // as -sum(x), XLA's zero signs (ops/reduce.cc), by finding the negate
  // among the sum's MLX inputs, so these stay MLX nodes, not host values.
  std::set<compiler::ValueId> negated, summed_negations;
  for (const Instruction& inst : r.body) {
    if (inst.op == Opcode::negate && compiler::is_float(plan_.type(inst.results[0]).dtype))
      negated.insert(inst.results[0]);
    if (inst.op == Opcode::reduce && !inst.operands.empty() && negated.count(inst.operands[0]) &&
        inst.regions.size() == 1 && inst.regions[0].body.size() == 1 &&
        inst.regions[0].body[0].op == Opcode::add)
      summed_negations.insert(inst.operands[0]);
  }
  for (const Instruction& inst : r.body) {
    Lowering fn = reg.find(inst.op);
    reg.count_lowering(inst.op);
    if (fn == nullptr)
      invalid_argument("pjrtx: unsupported op ", compiler::opcode_name(inst.op),
                       inst.loc.empty() ? "" : " at ", inst.loc);
    LowerCtx ctx(*this, plan_, inst);
    // complex128 is computed in f64 parts (complex128.h), so it is f64 work.
    const bool c128 = touches(plan_, inst, compiler::DType::kC128);
    const bool f64 = c128 || touches(plan_, inst, compiler::DType::kF64);
    if (f64 && options_.f64_error)
      ctx.fail(c128 ? "complex128 (c128)" : "float64 (f64)",
               " values are refused by PJRTX_F64=error (MLX's GPU streams have "
               "no float64; unset it to run f64 work on the CPU stream)");
    if (parts_mode_) ctx.set_parts_view();
    Kernel k;
    try {
      k = c128 && !parts_mode_ ? lower_complex128(ctx, fn) : fn(ctx);
    } catch (...) {
      rethrow_with_context(inst);
    }
    // Kernels that switch streams stay out of compiled segments (a fused
    // kernel runs on one stream).
    breaks.push_back((f64 && options_.gpu) || !fusable_instruction(inst, [this](const std::string& f) {
                       return pure_function(f);
                     }));
    // A call whose callee computes part of its work on the host (a random
    // draw: threefry's rounds on the key, then float math on the bits)
    // runs by itself, so its body splits into its host lane and a traced
    // rest instead of becoming one trace here. The region stays pure. (A
    // call that is all host work too: when an operand is still an MLX
    // value, e.g. a uniform draw's bounds, it would otherwise be traced
    // whole here, threefry's rounds included.)
    own_segment.push_back(!parts_mode_ && inst.op == Opcode::call &&
                          host_work(inst.attr_str("callee", "")));
    if (f64 && options_.gpu) {
      k = [k = std::move(k)](RunState& st, const Arrays& in) {
        CpuScope scope;
        return k(st, in);
      };
    }
    // Check every kernel's result types once per run: a lowering bug must
    // surface as an error naming the op, not as a wrong answer later.
    std::vector<compiler::TensorType> want;
    for (size_t i = 0; i < inst.results.size(); ++i) want.push_back(ctx.out(i));
    Kernel checked = [k = std::move(k), want = std::move(want),
                      &inst](RunState& st, const Arrays& in) {
      Arrays out = k(st, in);
      for (size_t i = 0; i < out.size() && i < want.size(); ++i) {
        const auto& a = out[i];
        // Batched runs may add leading dims; the trailing dims must match.
        size_t rank = want[i].shape.size();
        size_t lead = a.ndim() >= rank ? a.ndim() - rank : 0;
        // A token is carried as a bool scalar (ops/collective.cc).
        compiler::DType dt = want[i].dtype == compiler::DType::kToken ? compiler::DType::kPred
                                                                      : want[i].dtype;
        // A c128 value is stored as f64 with a trailing dim of 2 (complex128.h).
        const bool pair = dt == compiler::DType::kC128;
        rank += pair;
        lead = a.ndim() >= rank ? a.ndim() - rank : 0;
        bool ok = (st.batched ? a.ndim() >= rank : a.ndim() == rank) &&
                  from_mlx(a.dtype()) == storage_dtype(dt);
        for (size_t d = 0; ok && d < rank; ++d)
          ok = a.shape(static_cast<int>(lead + d)) == (d < want[i].shape.size() ? want[i].shape[d] : 2);
        if (!ok)
          throw Error(ErrorCode::kInternal,
                      "[" + inst.where() + "] lowering produced " +
                          shape_str(a) + " but the plan says " + want[i].str());
        // The one place sub-byte results wrap: lowerings compute s2/u2/s4/u4
        // in their byte storage (7 + 1 = 8 there, -8 in s4).
        if (compiler::is_subbyte_int(dt)) out[i] = canonical_subbyte(a, dt);
      }
      return out;
    };
    // Every run hands out the values computed here once.
    bool is_folded = false;
    if (!parts_mode_)
      if (auto folded = fold(inst, checked)) {
        checked = std::move(*folded);
        is_folded = true;
      }
    // A folded step has no host form: its value was computed here, and its
    // operands may be released after lowering (release_unread_folds: only
    // folded readers, which ignore them, read them). A host form would
    // recompute it from those released placeholders, `false` for a pred
    // (jnp.all(a == b) over captured constants came out False).
    const bool hc = !parts_mode_ && !is_folded && host_call(inst);
    const bool keep_mlx = parts_mode_ || is_folded || options_.host == HostMode::kOff ||
                          (inst.op == Opcode::negate && summed_negations.count(inst.results[0]));
    HostForm host = keep_mlx ? HostForm{}
                    : hc ? native_host_call(inst)
                         : host_small_kernel(plan_, inst, options_.host == HostMode::kAll);
    prog->steps.push_back({std::move(checked), &inst, std::move(host), hc, is_folded});
  }
  plan_segments(*prog, r, breaks, own_segment);
  return prog;
}

bool Lowerer::host_call(const Instruction& inst) {
  if (inst.op != Opcode::call || options_.host == HostMode::kOff) return false;
  for (auto v : inst.operands)
    if (plan_.type(v).num_elements() > kHostSmallMaxElements) return false;
  for (auto v : inst.results)
    if (plan_.type(v).num_elements() > kHostSmallMaxElements) return false;
  const std::string& name = inst.attr_str("callee", "");
  if (auto it = host_functions_.find(name); it != host_functions_.end()) return it->second;
  return host_functions_[name] = host_function(plan_, name, options_.host == HostMode::kAll);
}

HostForm Lowerer::native_host_call(const Instruction& inst) {
  HostForm f = threefry2x32_call(plan_, inst);
  if (!f) return {};
  const std::string& callee = inst.attr_str("callee", "");
  auto known = native_checked_.find(callee);
  if (known != native_checked_.end()) return known->second ? f : HostForm{};
  // The callee's own steps (all with host forms) and the native form must
  // agree bit for bit on sample inputs (a fixed xorshift sequence), or the
  // call keeps running its steps.
  bool same = true;
  try {
    auto body = lower_function(callee);
    uint32_t seed = 0x9E3779B9u;
    auto next = [&seed] {
      seed ^= seed << 13;
      seed ^= seed >> 17;
      seed ^= seed << 5;
      return seed;
    };
    for (int trial = 0; trial < 3 && same; ++trial) {
      Arrays args;
      for (compiler::ValueId v : inst.operands) {
        std::vector<uint32_t> data(static_cast<size_t>(plan_.type(v).num_elements()));
        for (auto& x : data) x = next();
        args.push_back(mx::array(data.begin(), to_mlx_shape(plan_.type(v).shape), mx::uint32));
      }
      RunState st;
      st.slots.resize(plan_.values.size());
      Arrays want = body->run(st, args), got;
      same = f(args, got) && got.size() == want.size();
      for (size_t i = 0; same && i < got.size(); ++i)
        same = host_readable(want[i]) && want[i].dtype() == mx::uint32 &&
               want[i].size() == got[i].size() &&
               std::equal(got[i].data<uint32_t>(), got[i].data<uint32_t>() + got[i].size(),
                          want[i].data<uint32_t>());
    }
  } catch (const std::exception&) {
    same = false;
  }
  native_checked_[callee] = same;
  return same ? f : HostForm{};
}

bool Lowerer::host_work(const std::string& name, int depth) {
  if (auto it = host_work_.find(name); it != host_work_.end()) return it->second;
  const compiler::Function* f = plan_.find_function(name);
  bool work = false;
  if (f != nullptr && depth < 8)
    for (const Instruction& inst : f->body.body)
      if (inst.op == Opcode::call &&
          (host_call(inst) || host_work(inst.attr_str("callee", ""), depth + 1))) {
        work = true;
        break;
      }
  return host_work_[name] = work;
}

bool Lowerer::pure_function(const std::string& name) {
  if (auto it = pure_.find(name); it != pure_.end()) return it->second;
  const compiler::Function* f = plan_.find_function(name);
  pure_[name] = false;  // a recursive call is not pure (and is refused anyway)
  bool pure = f != nullptr;
  if (pure)
    for (const Instruction& inst : f->body.body)
      if (!fusable_instruction(inst, [this](const std::string& g) { return pure_function(g); })) {
        pure = false;
        break;
      }
  pure_[name] = pure;
  return pure;
}

namespace {
// Ops that are not pure functions of their operands, or that carry regions
// or calls: never folded.
bool foldable(const Instruction& inst) {
  if (!inst.regions.empty()) return false;
  switch (inst.op) {
    case Opcode::call: case Opcode::composite: case Opcode::custom_call:
    case Opcode::infeed: case Opcode::outfeed: case Opcode::send: case Opcode::recv:
    case Opcode::rng: case Opcode::create_token: case Opcode::after_all:
    case Opcode::optimization_barrier: case Opcode::partition_id: case Opcode::replica_id:
    // Collectives meet the other devices at run time; folding one would
    // evaluate it at compile time with nobody to meet.
    case Opcode::all_reduce: case Opcode::all_gather: case Opcode::reduce_scatter:
    case Opcode::all_to_all: case Opcode::collective_permute:
    case Opcode::collective_broadcast:
      return false;
    default:
      return true;
  }
}

// Folding trades run time for memory held as long as the executable: a
// folded value is stored, a lazy one exists only during a run. Constant
// work of any size is folded when it cannot grow memory much: results up
// to kFoldGrowth x the bytes their constant operands actually hold (w.T and
// reshapes are views, 1x; f32 -> bf16 is 0.5x; f32 -> f64 is 2x), or up to
// kFoldAnyBytes whatever the inputs (iota, small tables). A scalar broadcast
// to f32[16384,16384] and then added to (1 GiB from 4 bytes) stays lazy.
constexpr int64_t kFoldGrowth = 2;
constexpr int64_t kFoldAnyBytes = int64_t{1} << 20;  // 1 MiB

int64_t held_bytes(const mx::array& a) {
  return static_cast<int64_t>(a.data_size() * a.itemsize());
}

int64_t plan_bytes(const compiler::TensorType& t) {
  int64_t n = compiler::dtype_size(t.dtype);
  for (int64_t d : t.shape) {
    if (d == 0) return 0;
    if (n > (int64_t{1} << 62) / d) return int64_t{1} << 62;
    n *= d;
  }
  return n;
}
}  // namespace

std::optional<Kernel> Lowerer::fold(const Instruction& inst, const Kernel& kernel) {
  if (!foldable(inst)) return std::nullopt;
  Arrays args;
  int64_t in_bytes = 0;
  for (auto v : inst.operands) {
    auto it = constants_.find(v);
    if (it == constants_.end()) return std::nullopt;
    args.push_back(it->second);
    in_bytes += held_bytes(it->second);
  }
  // A stablehlo.constant's array is a view of the plan's bytes (or a
  // broadcast scalar): folding it stores nothing new.
  // A broadcast_in_dim is a zero-stride view of its operand, whatever its
  // shape: it is judged by the bytes it holds once evaluated, so relu's
  // max(x, broadcast 0) on a large x still sees its constant.
  const int64_t limit = std::max(kFoldAnyBytes, kFoldGrowth * in_bytes);
  const bool view = inst.op == Opcode::broadcast_in_dim;
  if (inst.op != Opcode::constant && !view) {
    int64_t out_bytes = 0;
    for (auto v : inst.results) out_bytes += plan_bytes(plan_.type(v));
    if (out_bytes > limit) return std::nullopt;
  }
  RunState st;
  st.slots.resize(plan_.values.size());
  Arrays values;
  try {
    values = kernel(st, args);
    mx::eval(values);
  } catch (const std::exception&) {
    return std::nullopt;  // the run reports it, with its context
  }
  if (view) {
    int64_t held = 0;
    for (const auto& v : values) held += held_bytes(v);
    if (held > limit) return std::nullopt;
  }
  // A broadcast evaluates to a view with zero strides: handed to a traced
  // segment it would reach compiled kernels as a strided input (indexed
  // per element), where the lazy broadcast of a scalar fuses into the
  // kernel as a constant. Adam over 40 f32[256,256] tensors (ten scalar
  // broadcasts each) took 31 ms fused with them folded, 17 ms lazy (native
  // MLX 13-15 ms). Eager runs keep the folded view (no primitive per run).
  bool broadcast = false;
  for (const auto& v : values) broadcast |= v.data_size() < v.size();
  // A small view (a broadcast, slice or transpose of a constant: threefry's
  // rotation counts) is stored dense, since eager runs hand it to host forms
  // and those read only contiguous arrays (host/host_small.h); at most 64
  // elements, so no memory to speak of. A large one stays a view.
  for (auto& v : values)
    if (v.size() <= static_cast<size_t>(kHostSmallMaxElements) &&
        !(v.flags().row_contiguous && v.data_size() == v.size())) {
      v = mx::contiguous(v);
      v.eval();
    }
  if (broadcast) {
    for (size_t i = 0; i < values.size(); ++i)
      constants_.insert_or_assign(inst.results[i], values[i]);
    // In a trace it is built again from its operands as the trace sees them:
    // an operand that is also an input of the trace (a constant from an
    // earlier segment that other steps read) is then its placeholder, where
    // the operand's own array would reach the traced graph beside it and
    // MLX refuses the trace ("uncaptured inputs", the segment then runs
    // eagerly).
    return Kernel([values, kernel](RunState& st, const Arrays& in) {
      if (!tracing_segment()) return values;
      Arrays ops;
      ops.reserve(in.size());
      for (const auto& a : in) ops.push_back(a.is_tracer() ? a : trace_safe_constant(a));
      return kernel(st, ops);
    });
  }
  args.clear();
  auto cell = std::make_shared<FoldedCell>();
  for (auto& v : values) {
    // Equal results in other executables (the same w.T of a shared weight)
    // are one array; views of an operand (transpose, reshape) already share
    // its storage and stay as they are.
    // (A constant's array is a view of the pooled plan bytes already.)
    auto pooled = inst.op == Opcode::constant ? nullptr : pool_folded(v);
    if (pooled) v = pooled->array;
    cell->pooled.push_back(std::move(pooled));
  }
  for (size_t i = 0; i < values.size(); ++i) constants_.insert_or_assign(inst.results[i], values[i]);
  cell->values = std::move(values);
  folded_.push_back({&inst, cell});
  return Kernel([cell](RunState&, const Arrays&) {
    return tracing_segment() ? trace_safe_constants(cell->values) : cell->values;
  });
}

void Lowerer::release_unread_folds(const compiler::Plan& plan) {
  // Values some run reads: operands of instructions that run (not folded)
  // and the results of every region. A folded value read only by other
  // folded instructions (the f32 copy between w.T and its bf16 convert)
  // is not needed after lowering.
  std::set<const Instruction*> folded;
  for (const auto& f : folded_) folded.insert(f.inst);
  std::vector<bool> read(plan.values.size(), false);
  std::function<void(const Region&)> walk = [&](const Region& r) {
    for (auto v : r.returns) read[v] = true;
    for (const Instruction& inst : r.body) {
      if (!folded.count(&inst))
        for (auto v : inst.operands) read[v] = true;
      for (const Region& sub : inst.regions) walk(sub);
    }
  };
  for (const auto& f : plan.functions) walk(f.body);
  for (const auto& f : folded_) {
    bool needed = false;
    for (auto v : f.inst->results) needed |= read[v];
    if (needed) continue;
    // Runs still set the slots (a folded reader ignores its operands).
    for (auto& a : f.cell->values) a = mx::array(false);
    f.cell->pooled.clear();
  }
}

std::shared_ptr<const RegionProgram> Lowerer::lower_function(const std::string& name) {
  if (auto it = functions_.find(name); it != functions_.end()) return it->second;
  const compiler::Function* f = plan_.find_function(name);
  if (f == nullptr) invalid_argument("pjrtx: call to unknown function @", name);
  if (!in_progress_.insert(name).second)
    unimplemented("pjrtx: recursive call to @", name);
  auto prog = lower_region(f->body);
  in_progress_.erase(name);
  functions_[name] = prog;
  return prog;
}

namespace {
bool region_calls_host(const Region& r) {
  for (const Instruction& inst : r.body) {
    if (inst.op == Opcode::custom_call && inst.attr_str("call_target_name", "") == kCallbackTarget)
      return true;
    for (const Region& sub : inst.regions)
      if (region_calls_host(sub)) return true;
  }
  return false;
}
}  // namespace

std::shared_ptr<Program> Program::lower(std::shared_ptr<const compiler::Plan> plan,
                                        const LowerOptions& options) {
  auto p = std::make_shared<Program>();
  p->plan_ = widen_small_floats(std::move(plan));
  // (A * C1) * C2 as A * (C1 * C2), as XLA's simplifier (constant_products.h).
  p->plan_ = fold_constant_products(std::move(p->plan_));
  // float32 multiply-adds round once, as XLA:CPU's do (fma_contract.h). The
  // MLX lowering computes them through float64, which a GPU stream lacks.
  if (!options.gpu && !options.f64_error && host_has_fma())
    p->plan_ = contract_multiply_add(std::move(p->plan_));
  Lowerer lowerer(*p->plan_, options);
  p->entry_ = lowerer.lower_function(p->plan_->entry_function().name);
  lowerer.release_unread_folds(*p->plan_);
  for (const auto& f : p->plan_->functions) p->calls_host_ |= region_calls_host(f.body);
  return p;
}

Arrays Program::run(const Arrays& args, Arrays* effects, CollectiveRun* collectives) const {
  RunState st;
  st.slots.resize(plan_->values.size());
  st.collectives = collectives;
  // jaxlib passes a token argument as a pred[0] buffer; inside a run a
  // token is a bool scalar (ops/collective.cc), also where a branch or
  // loop hands the incoming token on.
  Arrays in = args;
  const auto& params = entry_->params;
  for (size_t i = 0; i < in.size() && i < params.size(); ++i)
    if (plan_->type(params[i]).dtype == compiler::DType::kToken) in[i] = mx::array(true);
  Arrays out = entry_->run(st, in);
  if (effects != nullptr) *effects = std::move(st.effects);
  return out;
}

// func.call: runs the callee's lowered body on the shared run state.
namespace {
Kernel lower_call(LowerCtx& ctx) {
  const std::string& callee = ctx.inst().attr_str("callee");
  auto body = ctx.lower_function(callee);
  return [body](RunState& st, const Arrays& in) { return body->run(st, in); };
}
// stablehlo.composite: run its decomposition function (fast paths for
// composites we know come first in their own lowerings).
Kernel lower_composite(LowerCtx& ctx) {
  const std::string& callee = ctx.inst().attr_str("decomposition");
  auto body = ctx.lower_function(callee);
  return [body](RunState& st, const Arrays& in) { return body->run(st, in); };
}
}  // namespace

void register_call_ops(Registry& r) {
  r.add(Opcode::call, lower_call);
  r.add(Opcode::composite, lower_composite);
}

}  // namespace pjrtx::backend
