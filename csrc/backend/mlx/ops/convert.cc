// stablehlo.convert. Float -> integer saturates to the target range with
// NaN -> 0 (XLA); a raw astype on x86 gives INT_MIN or garbage instead.
// complex -> real keeps the real part.
#include <cmath>

#include "backend/mlx/ops/common.h"

namespace pjrtx::backend {

namespace {

using namespace ops;

// 2^(bits-1) for signed, 2^bits for unsigned: the first value that no longer
// fits. Exact in any float type (a power of two).
double upper_bound(DType t) {
  int bits = compiler::dtype_bits(t);
  return std::ldexp(1.0, compiler::is_signed_int(t) ? bits - 1 : bits);
}

Kernel lower_convert(LowerCtx& ctx) {
  DType from = ctx.in(0).dtype;
  DType to = ctx.out(0).dtype;
  mx::Dtype dt = to_mlx(to);
  if (from == to) return unary([](const mx::array& x) { return x; });

  if (compiler::is_complex(from) && !compiler::is_complex(to)) {
    return unary([dt, to](const mx::array& x) {
      mx::array re = mx::real(x);
      if (to == DType::kPred)
        return mx::logical_or(mx::not_equal(re, mx::zeros_like(re)),
                              mx::not_equal(mx::imag(x), mx::zeros_like(re)));
      return mx::astype(re, dt);
    });
  }

  if (compiler::is_float(from) && compiler::is_integer(to)) {
    // Compare in at least f32 so the bounds are representable.
    mx::Dtype wide = from == DType::kF64 ? mx::float64 : mx::float32;
    double hi = upper_bound(to);
    double lo = compiler::is_signed_int(to) ? -hi : 0.0;
    int64_t max_val = compiler::is_signed_int(to)
                          ? static_cast<int64_t>(std::ldexp(1.0, compiler::dtype_bits(to) - 1) - 1)
                          : -1;  // all ones, cast below
    bool is_signed = compiler::is_signed_int(to);
    int bits = compiler::dtype_bits(to);
    return unary([=](const mx::array& x0) {
      mx::array x = mx::astype(x0, wide);
      auto bound = [&](double v) {
        return wide == mx::float64 ? mx::array(v, mx::float64)
                                   : mx::array(static_cast<float>(v));
      };
      mx::array hi_a = bound(hi);
      mx::array lo_a = bound(lo);
      mx::array too_big = mx::greater_equal(x, hi_a);
      mx::array nan = mx::isnan(x);
      mx::array safe = mx::where(mx::logical_or(too_big, nan), mx::zeros_like(x),
                                 mx::maximum(x, lo_a));
      mx::array r = mx::astype(safe, dt);
      mx::array top = is_signed ? mx::array(max_val, dt)
                                : mx::astype(mx::array(int64_t{-1}, mx::int64), unsigned_of_width(bits));
      return mx::where(too_big, top, r);
    });
  }

  if (to == DType::kPred) {
    return unary([](const mx::array& x) { return mx::not_equal(x, mx::zeros_like(x)); });
  }
  return unary([dt](const mx::array& x) { return mx::astype(x, dt); });
}

}  // namespace

void register_convert_ops(Registry& r) {
  r.add(compiler::Opcode::convert, lower_convert);
}

}  // namespace pjrtx::backend
