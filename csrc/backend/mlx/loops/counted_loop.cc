#include "backend/mlx/loops/counted_loop.h"

#include <cstdint>
#include <mlx/ops.h>

#include <map>

#include "backend/mlx/dtype.h"
#include "backend/mlx/async_eval.h"
#include "backend/mlx/graph_stats.h"

namespace pjrtx::backend {

using compiler::DType;
using compiler::Instruction;
using compiler::Opcode;
using compiler::Region;
using compiler::ValueId;

namespace {

int find_index(const std::vector<ValueId>& vs, ValueId v) {
  for (size_t i = 0; i < vs.size(); ++i)
    if (vs[i] == v) return static_cast<int>(i);
  return -1;
}

LoopDir flipped(LoopDir d) {
  switch (d) {
    case LoopDir::kLT: return LoopDir::kGT;
    case LoopDir::kLE: return LoopDir::kGE;
    case LoopDir::kGT: return LoopDir::kLT;
    case LoopDir::kGE: return LoopDir::kLE;
    default: return d;  // EQ, NE are symmetric
  }
}

std::optional<LoopDir> parse_dir(const std::string& s) {
  if (s == "LT") return LoopDir::kLT;
  if (s == "LE") return LoopDir::kLE;
  if (s == "GT") return LoopDir::kGT;
  if (s == "GE") return LoopDir::kGE;
  if (s == "EQ") return LoopDir::kEQ;
  if (s == "NE") return LoopDir::kNE;
  return std::nullopt;
}

bool counter_type(const compiler::TensorType& t) {
  // sub-byte types wrap through their byte storage (canonical_subbyte); not worth a
  // fast path.
  return t.shape.empty() && compiler::is_integer(t.dtype) && !compiler::is_subbyte_int(t.dtype);
}

void type_range(DType t, Int128& lo, Int128& hi) {
  int bits = compiler::dtype_bits(t);
  if (compiler::is_signed_int(t)) {
    hi = (Int128{1} << (bits - 1)) - 1;
    lo = -hi - 1;
  } else {
    lo = 0;
    hi = (Int128{1} << bits) - 1;
  }
}

// Scalar value of a constant in the plan, when `v` is one.
std::optional<Int128> constant_int(const LowerCtx& ctx, ValueId v) {
  const auto& t = ctx.plan().type(v);
  if (!counter_type(t)) return std::nullopt;
  auto c = ctx.constant_value(v);
  if (!c || c->ndim() != 0) return std::nullopt;
  return read_int(*c, t.dtype);
}

// The step of `ret` when it is `param + c`, `c + param` or `param - c` for
// a constant c, computed in `region` directly or in a function it calls with
// `param` (fori_loop's body is a func.call); nullopt otherwise.
std::optional<Int128> affine_step(const LowerCtx& ctx, const Region& region, ValueId ret,
                                  ValueId param, int depth = 0) {
  for (const Instruction& inst : region.body) {
    int r = find_index(inst.results, ret);
    if (r < 0) continue;
    if (inst.op == Opcode::call && depth < 4) {
      const compiler::Function* f = ctx.plan().find_function(inst.attr_str("callee", ""));
      if (f == nullptr || f->body.params.size() != inst.operands.size() ||
          f->body.returns.size() != inst.results.size())
        return std::nullopt;
      for (size_t p = 0; p < inst.operands.size(); ++p) {
        if (inst.operands[p] != param) continue;
        if (auto s = affine_step(ctx, f->body, f->body.returns[r], f->body.params[p], depth + 1))
          return s;
      }
      return std::nullopt;
    }
    if (inst.operands.size() != 2) return std::nullopt;
    ValueId a = inst.operands[0], b = inst.operands[1];
    if (inst.op == Opcode::add) {
      if (a == param && b != param) return constant_int(ctx, b);
      if (b == param && a != param) return constant_int(ctx, a);
    } else if (inst.op == Opcode::subtract && a == param && b != param) {
      auto c = constant_int(ctx, b);
      if (c) return -*c;
    }
    return std::nullopt;
  }
  return std::nullopt;  // returned unchanged, or defined in a nested region
}

std::optional<Int128> counter_step(const LowerCtx& ctx, const Region& body, size_t j) {
  if (!counter_type(ctx.plan().type(body.params[j]))) return std::nullopt;
  return affine_step(ctx, body, body.returns[j], body.params[j]);
}

}  // namespace

Int128 read_int(const mx::array& a, DType dtype) {
  if (compiler::is_unsigned_int(dtype)) {
    mx::array u = mx::astype(a, mx::uint64);
    eval_now({u});
    return static_cast<Int128>(u.item<uint64_t>());
  }
  mx::array s = mx::astype(a, mx::int64);
  eval_now({s});
  return static_cast<Int128>(s.item<int64_t>());
}

mx::array wrapped_scalar(Int128 v, DType dtype) {
  using U128 = unsigned __int128;
  int bits = compiler::dtype_bits(dtype);
  U128 u = static_cast<U128>(v);
  if (bits < 128) u &= (U128{1} << bits) - 1;
  mx::Dtype dt = to_mlx(dtype);
  if (compiler::is_unsigned_int(dtype)) return mx::array(static_cast<uint64_t>(u), dt);
  Int128 s = static_cast<Int128>(u);
  if (s >> (bits - 1)) s -= Int128{1} << bits;  // sign bit set
  return mx::array(static_cast<int64_t>(s), dt);
}

std::optional<CountedLoop> match_counted_loop(const LowerCtx& ctx) {
  const Instruction& w = ctx.inst();
  const compiler::Plan& plan = ctx.plan();
  if (w.regions.size() != 2) return std::nullopt;
  const Region& cond = w.regions[0];
  const Region& body = w.regions[1];
  size_t n = w.operands.size();
  if (cond.params.size() != n || body.params.size() != n || body.returns.size() != n ||
      cond.returns.size() != 1)
    return std::nullopt;

  // The condition holds constants, identity converts and one compare, and
  // nothing else: anything more could make the predicate depend on more
  // than the counter and its bound.
  std::map<ValueId, const Instruction*> def;
  for (const Instruction& inst : cond.body) {
    if (!inst.regions.empty()) return std::nullopt;
    if (inst.op == Opcode::convert) {
      if (plan.type(inst.operands.at(0)) != plan.type(inst.results.at(0))) return std::nullopt;
    } else if (inst.op != Opcode::constant && inst.op != Opcode::compare) {
      return std::nullopt;
    }
    for (ValueId r : inst.results) def[r] = &inst;
  }
  auto cmp_it = def.find(cond.returns[0]);
  if (cmp_it == def.end() || cmp_it->second->op != Opcode::compare) return std::nullopt;
  const Instruction& cmp = *cmp_it->second;
  if (cmp.operands.size() != 2) return std::nullopt;
  auto dir = parse_dir(cmp.attr_str("comparison_direction", ""));
  if (!dir) return std::nullopt;

  auto strip = [&](ValueId v) {
    for (;;) {
      auto d = def.find(v);
      if (d == def.end() || d->second->op != Opcode::convert) return v;
      v = d->second->operands[0];
    }
  };
  ValueId lhs = strip(cmp.operands[0]), rhs = strip(cmp.operands[1]);

  const compiler::TensorType& ct = plan.type(cmp.operands[0]);
  if (!counter_type(ct)) return std::nullopt;
  std::string ctype = cmp.attr_str("compare_type", "");
  bool is_signed = compiler::is_signed_int(ct.dtype);
  if (!ctype.empty() && ctype != (is_signed ? "SIGNED" : "UNSIGNED")) return std::nullopt;

  // Tries `counter_v DIR bound_v`.
  auto try_match = [&](ValueId counter_v, ValueId bound_v, LoopDir d) -> std::optional<CountedLoop> {
    int ci = find_index(cond.params, counter_v);
    if (ci < 0 || plan.type(w.operands[ci]) != ct) return std::nullopt;
    auto step = counter_step(ctx, body, ci);
    if (!step) return std::nullopt;
    CountedLoop loop;
    loop.counter = ci;
    loop.dtype = ct.dtype;
    loop.dir = d;
    loop.step = *step;
    if (plan.type(bound_v) != ct) return std::nullopt;
    if (int bi = find_index(cond.params, bound_v); bi >= 0) {
      // A carried bound must come back unchanged from the body.
      if (bi == ci || body.returns[bi] != body.params[bi]) return std::nullopt;
      loop.bound_kind = CountedLoop::Bound::kCarried;
      loop.bound_index = bi;
    } else if (auto c = constant_int(ctx, bound_v)) {
      loop.bound_kind = CountedLoop::Bound::kConstant;
      loop.bound_constant = *c;
    } else if (def.count(bound_v)) {
      return std::nullopt;  // computed in the condition
    } else {
      loop.bound_kind = CountedLoop::Bound::kCaptured;
      loop.bound_value = bound_v;
    }
    loop.init_constant = constant_int(ctx, w.operands[ci]);
    for (size_t j = 0; j < n; ++j) {
      auto s = j == static_cast<size_t>(ci) ? step : counter_step(ctx, body, j);
      if (!s) continue;
      loop.inductions.push_back({j, plan.type(w.operands[j]).dtype, *s,
                                 constant_int(ctx, w.operands[j])});
    }
    return loop;
  };
  if (auto m = try_match(lhs, rhs, *dir)) return m;
  return try_match(rhs, lhs, flipped(*dir));
}

std::optional<uint64_t> trip_count(LoopDir dir, Int128 init, Int128 bound, Int128 step,
                                   DType dtype) {
  Int128 n = 0;
  switch (dir) {
    case LoopDir::kLT:
      if (init >= bound) return 0;
      if (step <= 0) return std::nullopt;
      n = (bound - init + step - 1) / step;
      break;
    case LoopDir::kLE:
      if (init > bound) return 0;
      if (step <= 0) return std::nullopt;
      n = (bound - init) / step + 1;
      break;
    case LoopDir::kGT:
      if (init <= bound) return 0;
      if (step >= 0) return std::nullopt;
      n = (init - bound - step - 1) / -step;
      break;
    case LoopDir::kGE:
      if (init < bound) return 0;
      if (step >= 0) return std::nullopt;
      n = (init - bound) / -step + 1;
      break;
    case LoopDir::kEQ:
      if (init != bound) return 0;
      if (step == 0) return std::nullopt;
      n = 1;
      break;
    case LoopDir::kNE:
      if (init == bound) return 0;
      if (step == 0 || (bound - init) % step != 0 || (bound - init) / step < 0)
        return std::nullopt;
      n = (bound - init) / step;
      break;
  }
  // The counter moves monotonically from init to init + n * step; if both
  // ends fit the type, no iteration wrapped and the count is exact.
  Int128 lo, hi;
  type_range(dtype, lo, hi);
  Int128 last = init + n * step;
  if (last < lo || last > hi) return std::nullopt;
  return static_cast<uint64_t>(n);
}

}  // namespace pjrtx::backend
