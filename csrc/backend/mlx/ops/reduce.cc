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

mx::array reduce_with(Combiner c, const mx::array& x, const std::vector<int>& axes) {
  switch (c) {
    case Combiner::kAdd: return mx::sum(x, axes, false);
    case Combiner::kMul: return mx::prod(x, axes, false);
    case Combiner::kMax: return mx::max(x, axes, false);
    case Combiner::kMin: return mx::min(x, axes, false);
    case Combiner::kAnd: return mx::all(x, axes, false);
    case Combiner::kOr: return mx::any(x, axes, false);
  }
  return x;
}

mx::array combine(Combiner c, const mx::array& a, const mx::array& b) {
  switch (c) {
    case Combiner::kAdd: return mx::add(a, b);
    case Combiner::kMul: return mx::multiply(a, b);
    case Combiner::kMax: return mx::maximum(a, b);
    case Combiner::kMin: return mx::minimum(a, b);
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
    return binary([c, out_shape](const mx::array& x, const mx::array& init) {
      return combine(c, x, mx::broadcast_to(init, out_shape));
    });
  }
  return binary([c, axes, dt](const mx::array& x, const mx::array& init) {
    mx::array r = reduce_with(c, x, axes);
    // sum/prod of narrow ints and bools come back widened: cast back (the
    // wrapped result is the same as accumulating in the narrow type).
    if (r.dtype() != dt) r = mx::astype(r, dt);
    return combine(c, r, init);
  });
}

}  // namespace

void register_reduce_ops(Registry& r) {
  r.add(compiler::Opcode::reduce, lower_reduce);
}

}  // namespace pjrtx::backend
