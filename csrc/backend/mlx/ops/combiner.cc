#include "backend/mlx/ops/combiner.h"

#include <cmath>

namespace pjrtx::backend::ops {

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
  using compiler::Opcode;
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

bool is_identity(Combiner c, const mx::array& value, DType t) {
  if (value.size() != 1) return false;
  mx::array v = mx::astype(mx::reshape(value, {}), mx::float64, mx::Device::cpu);
  v.eval();
  double x = v.item<double>();
  bool is_int = compiler::is_integer(t);
  switch (c) {
    case Combiner::kAdd: return x == 0;
    case Combiner::kMul: return x == 1;
    case Combiner::kOr: return x == 0;
    case Combiner::kAnd: return x != 0;
    case Combiner::kMax:
      if (is_int) return compiler::is_unsigned_int(t) ? x == 0 : x == static_cast<double>(signed_min(t));
      return std::isinf(x) && x < 0;
    case Combiner::kMin:
      if (is_int) {
        int bits = compiler::dtype_bits(t);
        double max = compiler::is_unsigned_int(t) ? std::ldexp(1.0, bits) - 1
                                                  : std::ldexp(1.0, bits - 1) - 1;
        return x == max;  // rounds alike for 64-bit types
      }
      return std::isinf(x) && x > 0;
  }
  return false;
}

}  // namespace pjrtx::backend::ops
