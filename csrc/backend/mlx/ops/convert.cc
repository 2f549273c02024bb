// stablehlo.convert. Float -> integer saturates to the target range with
// NaN -> 0 (XLA); a raw astype on x86 gives INT_MIN or garbage instead.
// complex -> real keeps the real part. s4/u4 need nothing of their own:
// they convert as their storage bytes (-8..7 bounds for s4, 0..15 for u4)
// and program.cc keeps the low 4 bits of the result, so int -> s4 wraps
// (24 -> 8 -> -8) and float -> u4 saturates at 15 (all ones 0xff -> 15).
#include <cmath>
#include <cstdint>
#include <functional>

#include "backend/mlx/ops/common.h"
#include "backend/mlx/small_float.h"

namespace pjrtx::backend {

namespace {

using namespace ops;

// 2^(bits-1) for signed, 2^bits for unsigned: the first value that no longer
// fits. Exact in any float type (a power of two).
double upper_bound(DType t) {
  int bits = compiler::dtype_bits(t);
  return std::ldexp(1.0, compiler::is_signed_int(t) ? bits - 1 : bits);
}

using Convert = std::function<mx::array(const mx::array&)>;

Convert float_to_int(DType from, DType to) {
  mx::Dtype dt = to_mlx(to);
  // Compare in at least f32 so the bounds are representable.
  mx::Dtype wide = from == DType::kF64 ? mx::float64 : mx::float32;
  double hi = upper_bound(to);
  double lo = compiler::is_signed_int(to) ? -hi : 0.0;
  // In integer arithmetic: 2^63 - 1 is not a double (it rounds to 2^63,
  // and casting that back to int64 gives INT64_MIN).
  int64_t max_val = compiler::is_signed_int(to)
                        ? std::numeric_limits<int64_t>::max() >> (64 - compiler::dtype_bits(to))
                        : -1;  // all ones, cast below
  bool is_signed = compiler::is_signed_int(to);
  int bits = compiler::dtype_bits(to);
  return [=](const mx::array& x0) {
    mx::array x = mx::astype(x0, wide);
    auto bound = [&](double v) {
      return wide == mx::float64 ? mx::array(v, mx::float64) : mx::array(static_cast<float>(v));
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
  };
}

Convert real_convert(DType from, DType to) {
  if (from == to) return [](const mx::array& x) { return x; };
  if (compiler::is_float(from) && compiler::is_integer(to)) return float_to_int(from, to);
  if (to == DType::kPred)
    return [](const mx::array& x) { return mx::not_equal(x, mx::zeros_like(x)); };
  mx::Dtype dt = to_mlx(to);
  return [dt](const mx::array& x) { return mx::astype(x, dt); };
}

// Small floats (backend/mlx/widen.h inserts these converts around every op
// that computes on them): decode exactly to f32, or round once into the
// small type from f32, or from f64 directly (XLA:CPU rounds f64 -> f8 once:
// 1.0625 * (1 + 2^-30) becomes e4m3fn 1.125, not 1.0 as via f32).
Convert small_float_convert(DType from, DType to) {
  // e5m2 is f16's top byte, and XLA:CPU converts from f16, bf16 and the
  // other small floats through f16 by bits: every NaN becomes 0x7f. An f32
  // or f64 NaN keeps its sign (0x7e / 0xfe).
  const bool nan_7f = to == DType::kF8E5M2 && from != DType::kF32 && from != DType::kF64 &&
                      !compiler::is_complex(from) && !compiler::is_integer(from);
  auto encode = [to, nan_7f](const mx::array& x) {
    mx::array y = encode_small_float(x.dtype() == mx::float64 ? x : mx::astype(x, mx::float32), to);
    return nan_7f ? mx::where(mx::isnan(x), mx::array(0x7f, mx::uint8), y) : y;
  };
  if (compiler::is_small_float(from)) {
    if (compiler::is_small_float(to))
      return [from, encode](const mx::array& x) { return encode(decode_small_float(x, from)); };
    if (to == DType::kF16 || to == DType::kBF16) {
      mx::Dtype dt = to_mlx(to);
      return [from, dt](const mx::array& x) { return decode_small_float(x, from, dt); };
    }
    Convert rest = real_convert(DType::kF32, to);
    if (from == DType::kF4E2M1FN && compiler::is_integer(to))
      // XLA:CPU saturates f4e2m1fn's +-6 (its largest value, which stands in
      // for infinity) to the integer type's max / min, as it would +-inf.
      return [rest](const mx::array& x) {
        mx::array v = decode_small_float(x, DType::kF4E2M1FN);
        mx::array inf = mx::multiply(v, mx::array(INFINITY));
        return rest(mx::where(mx::equal(mx::abs(v), mx::array(6.0f)), inf, v));
      };
    return [from, rest](const mx::array& x) { return rest(decode_small_float(x, from)); };
  }
  if (compiler::is_complex(from))
    return [encode](const mx::array& x) { return encode(mx::real(x)); };
  return encode;
}

Kernel lower_convert(LowerCtx& ctx) {
  DType from = ctx.in(0).dtype;
  DType to = ctx.out(0).dtype;
  if (compiler::is_small_float(from) || compiler::is_small_float(to))
    return unary(small_float_convert(from, to));
  // complex -> real type drops the imaginary part first, then converts the
  // f32 real part like any f32 (XLA:CPU: saturating ints, bool = re != 0).
  if (compiler::is_complex(from) && !compiler::is_complex(to)) {
    Convert f = real_convert(DType::kF32, to);
    return unary([f](const mx::array& x) { return f(mx::real(x)); });
  }
  return unary(real_convert(from, to));
}

}  // namespace

void register_convert_ops(Registry& r) {
  r.add(compiler::Opcode::convert, lower_convert);
}

}  // namespace pjrtx::backend
