// stablehlo.compare, select and clamp. FLOAT compares follow IEEE (NaN is
// unordered); TOTALORDER maps floats to integers whose order is
// -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN.
#include "backend/mlx/ops/common.h"

#include <cstdint>

namespace pjrtx::backend {

namespace {

using namespace ops;

mx::array total_order_key(const mx::array& x, DType t) {
  int bits = compiler::dtype_bits(t);
  mx::Dtype st = signed_of_width(bits);
  mx::array k = mx::view(x, st);
  mx::array max_int = mx::astype(mx::array(int64_t{-1}, mx::int64), unsigned_of_width(bits));
  max_int = mx::astype(mx::right_shift(max_int, mx::array(1, unsigned_of_width(bits))), st);
  return mx::where(mx::less(k, mx::zeros_like(k)), mx::bitwise_xor(k, max_int), k);
}

using CompareFn = mx::array (*)(const mx::array&, const mx::array&, mx::StreamOrDevice);

Kernel lower_compare(LowerCtx& ctx) {
  const std::string& dir = ctx.inst().attr_str("comparison_direction");
  DType t = ctx.in(0).dtype;
  std::string type = ctx.inst().attr_str("compare_type", "");
  CompareFn fn = nullptr;
  if (dir == "EQ") fn = mx::equal;
  else if (dir == "NE") fn = mx::not_equal;
  else if (dir == "GE") fn = mx::greater_equal;
  else if (dir == "GT") fn = mx::greater;
  else if (dir == "LE") fn = mx::less_equal;
  else if (dir == "LT") fn = mx::less;
  else ctx.fail("unknown comparison_direction ", dir);

  if (compiler::is_complex(t) && dir != "EQ" && dir != "NE")
    ctx.fail("complex operands support only EQ and NE, got ", dir);
  if (type == "TOTALORDER" && compiler::is_float(t)) {
    return binary([fn, t](const mx::array& a, const mx::array& b) {
      return fn(total_order_key(a, t), total_order_key(b, t), {});
    });
  }
  if (t == DType::kPred && dir != "EQ" && dir != "NE") {
    // Order false < true through uint8.
    return binary([fn](const mx::array& a, const mx::array& b) {
      return fn(mx::astype(a, mx::uint8), mx::astype(b, mx::uint8), {});
    });
  }
  return binary([fn](const mx::array& a, const mx::array& b) { return fn(a, b, {}); });
}

Kernel lower_select(LowerCtx& ctx) {
  return nary([](const Arrays& in) { return mx::where(in[0], in[1], in[2]); });
}

// clamp(min, x, max) = min(max(x, lo), hi); lo/hi may be scalars. Floats use
// XLA's max/min (NaN propagates, -0 < +0), as XLA:CPU's clamp does.
Kernel lower_clamp(LowerCtx& ctx) {
  DType t = ctx.in(1).dtype;
  if (t == DType::kPred)
    return nary([](const Arrays& in) {
      return mx::logical_and(mx::logical_or(in[1], in[0]), in[2]);
    });
  return nary([t](const Arrays& in) {
    return ieee_minimum(ieee_maximum(in[1], in[0], t), in[2], t);
  });
}

}  // namespace

void register_compare_ops(Registry& r) {
  using compiler::Opcode;
  r.add(Opcode::compare, lower_compare);
  r.add(Opcode::select, lower_select);
  r.add(Opcode::clamp, lower_clamp);
}

}  // namespace pjrtx::backend
