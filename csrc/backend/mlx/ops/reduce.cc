// stablehlo.reduce. A body that is one recognised binary op of its two
// parameters maps to MLX's reductions; the init value is then combined once
// (init is any value, not necessarily the identity). Reducing over an empty
// dimension returns the init value broadcast (MLX's max/min throw there).
#include "backend/mlx/ops/common.h"

namespace pjrtx::backend {

namespace {

using namespace ops;
using compiler::Opcode;

enum class Combiner { kAdd, kMul, kMax, kMin, kAnd, kOr };

// Recognises `return op(p0, p1)` (either operand order) in a reduce body.
std::optional<Combiner> match_combiner(const compiler::Region& body, DType t) {
  if (body.body.size() != 1 || body.params.size() != 2 || body.returns.size() != 1)
    return std::nullopt;
  const auto& inst = body.body[0];
  if (inst.results.size() != 1 || inst.results[0] != body.returns[0] ||
      inst.operands.size() != 2)
    return std::nullopt;
  auto a = inst.operands[0], b = inst.operands[1];
  auto p0 = body.params[0], p1 = body.params[1];
  if (!((a == p0 && b == p1) || (a == p1 && b == p0))) return std::nullopt;
  bool pred = t == DType::kPred;
  switch (inst.op) {
    case Opcode::add: return pred ? Combiner::kOr : Combiner::kAdd;
    case Opcode::multiply: return pred ? Combiner::kAnd : Combiner::kMul;
    case Opcode::maximum: return pred ? Combiner::kOr : Combiner::kMax;
    case Opcode::minimum: return pred ? Combiner::kAnd : Combiner::kMin;
    case Opcode::and_: if (pred) return Combiner::kAnd; break;
    case Opcode::or_: if (pred) return Combiner::kOr; break;
    default: break;
  }
  return std::nullopt;
}

// XLA's float max/min order -0 below +0; MLX's max/min reductions keep
// whichever zero they meet. A zero result is +0 for max iff some element is
// +0, and -0 for min iff some element is -0.
mx::array fix_zero_sign(Combiner c, const mx::array& x, const mx::array& r,
                        const std::vector<int>& axes, DType t) {
  mx::array zero = mx::zeros_like(r);
  mx::array neg = sign_bit(x, t);
  mx::array wanted = c == Combiner::kMax ? mx::logical_not(neg) : neg;
  mx::array present = mx::any(mx::logical_and(mx::equal(x, mx::zeros_like(x)), wanted), axes, false);
  mx::array pos_zero = zero, neg_zero = mx::negative(zero);
  mx::array signed_zero = c == Combiner::kMax ? mx::where(present, pos_zero, neg_zero)
                                              : mx::where(present, neg_zero, pos_zero);
  return mx::where(mx::equal(r, zero), signed_zero, r);
}

mx::array reduce_with(Combiner c, const mx::array& x, const std::vector<int>& axes, DType t) {
  bool is_float = compiler::is_float(t);
  switch (c) {
    case Combiner::kAdd: return mx::sum(x, axes, false);
    case Combiner::kMul: return mx::prod(x, axes, false);
    case Combiner::kMax: {
      mx::array r = mx::max(x, axes, false);
      return is_float ? fix_zero_sign(c, x, r, axes, t) : r;
    }
    case Combiner::kMin: {
      mx::array r = mx::min(x, axes, false);
      return is_float ? fix_zero_sign(c, x, r, axes, t) : r;
    }
    case Combiner::kAnd: return mx::all(x, axes, false);
    case Combiner::kOr: return mx::any(x, axes, false);
  }
  return x;
}

mx::array combine(Combiner c, const mx::array& a, const mx::array& b, DType t) {
  switch (c) {
    case Combiner::kAdd: return mx::add(a, b);
    case Combiner::kMul: return mx::multiply(a, b);
    case Combiner::kMax: return ieee_maximum(a, b, t);
    case Combiner::kMin: return ieee_minimum(a, b, t);
    case Combiner::kAnd: return mx::logical_and(a, b);
    case Combiner::kOr: return mx::logical_or(a, b);
  }
  return a;
}

Kernel lower_reduce(LowerCtx& ctx) {
  const auto& inst = ctx.inst();
  if (inst.operands.size() != 2 || inst.results.size() != 1)
    ctx.fail("reductions of ", inst.results.size(),
             " operands at once are not supported yet");
  const auto& in = ctx.in(0);
  const auto& out = ctx.out(0);
  auto combiner = match_combiner(inst.regions.at(0), in.dtype);
  if (!combiner)
    ctx.fail("reduction body is not a single add/multiply/maximum/minimum/and/or "
             "of its parameters (general bodies are not supported yet)");
  std::vector<int> axes = to_int_vector(inst.attr_ints("dimensions"));
  bool empty = false;
  for (int a : axes) {
    if (a < 0 || a >= in.rank()) ctx.fail("dimension ", a, " out of range for ", in.str());
    if (in.shape[a] == 0) empty = true;
  }
  mx::Dtype dt = to_mlx(out.dtype);
  mx::Shape out_shape = to_mlx_shape(out.shape);
  Combiner c = *combiner;
  if (empty) {
    return binary([out_shape](const mx::array&, const mx::array& init) {
      return mx::broadcast_to(init, out_shape);
    });
  }
  if (axes.empty()) {
    // No dimensions: XLA:CPU returns the operand unchanged, without applying
    // a non-identity init (its simplifier drops the reduce; XLA assumes the
    // init is the body's identity).
    return binary([](const mx::array& x, const mx::array&) { return x; });
  }
  DType t = in.dtype;
  return binary([c, axes, dt, t](const mx::array& x, const mx::array& init) {
    mx::array r = reduce_with(c, x, axes, t);
    // sum/prod of narrow ints and bools come back widened: cast back (the
    // wrapped result is the same as accumulating in the narrow type).
    if (r.dtype() != dt) r = mx::astype(r, dt);
    return combine(c, r, init, t);
  });
}

}  // namespace

void register_reduce_ops(Registry& r) {
  r.add(compiler::Opcode::reduce, lower_reduce);
}

}  // namespace pjrtx::backend
