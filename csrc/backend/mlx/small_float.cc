#include "backend/mlx/small_float.h"

#include <cstdint>
#include <mlx/ops.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/error.h"

namespace pjrtx::backend {

using compiler::DType;

namespace {

// How a type spends its special encodings (ml_dtypes' naming):
//   kIEEE: exponent all ones is inf (mantissa 0) or NaN, overflow -> inf.
//   kFN:   no inf; S.1111.111 is NaN, overflow and inf -> NaN.
//   kFNUZ: no inf, no -0; 0x80 is the one NaN, overflow and inf -> 0x80.
//   kE8M0: no sign, no zero; 2^(e-127), 0xff is NaN; zero and negatives -> NaN.
//   kF4:   no inf, no NaN; overflow and inf saturate to +-6, NaN -> 0x8.
enum class Kind { kIEEE, kFN, kFNUZ, kE8M0, kF4 };

struct Format {
  int e, m, bias;
  Kind kind;
  int bits;  // storage bits of the value: 8, or 4 for f4e2m1fn
};

Format format_of(DType t) {
  switch (t) {
    case DType::kF8E4M3FN: return {4, 3, 7, Kind::kFN, 8};
    case DType::kF8E5M2: return {5, 2, 15, Kind::kIEEE, 8};
    case DType::kF8E4M3: return {4, 3, 7, Kind::kIEEE, 8};
    case DType::kF8E3M4: return {3, 4, 3, Kind::kIEEE, 8};
    case DType::kF8E4M3FNUZ: return {4, 3, 8, Kind::kFNUZ, 8};
    case DType::kF8E5M2FNUZ: return {5, 2, 16, Kind::kFNUZ, 8};
    case DType::kF8E4M3B11FNUZ: return {4, 3, 11, Kind::kFNUZ, 8};
    case DType::kF8E8M0FNU: return {8, 0, 127, Kind::kE8M0, 8};
    case DType::kF4E2M1FN: return {2, 1, 1, Kind::kF4, 4};
    default:
      throw_error(ErrorCode::kInternal, "pjrtx: ", compiler::dtype_name(t),
                  " is not a small float type");
  }
}

// The largest finite encoding (sign clear) and what overflow and NaN become.
int64_t max_finite(const Format& f) {
  switch (f.kind) {
    case Kind::kIEEE: return (((int64_t{1} << f.e) - 1) << f.m) - 1;  // e5m2: 0x7b
    case Kind::kFN: return 0x7e;
    case Kind::kFNUZ: return 0x7f;
    case Kind::kE8M0: return 0xfe;
    case Kind::kF4: return 0x7;
  }
  return 0;
}
int64_t overflow_code(const Format& f) {
  switch (f.kind) {
    case Kind::kIEEE: return ((int64_t{1} << f.e) - 1) << f.m;  // inf
    case Kind::kFN: return 0x7f;
    case Kind::kFNUZ: return 0x80;
    case Kind::kE8M0: return 0xff;
    case Kind::kF4: return 0x7;
  }
  return 0;
}
int64_t nan_code(const Format& f) {
  switch (f.kind) {
    case Kind::kIEEE: return (((int64_t{1} << f.e) - 1) << f.m) | (int64_t{1} << (f.m - 1));
    case Kind::kFN: return 0x7f;
    case Kind::kFNUZ: return 0x80;
    case Kind::kE8M0: return 0xff;
    case Kind::kF4: return 0x8;  // XLA:CPU writes -0 for any NaN
  }
  return 0;
}

mx::array i64(int64_t v) { return mx::array(v, mx::int64); }

}  // namespace

double small_float_value(uint8_t byte, DType t) {
  const Format f = format_of(t);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  unsigned b = f.bits == 4 ? byte & 0x0f : byte;
  if (f.kind == Kind::kE8M0) return b == 0xff ? nan : std::ldexp(1.0, int(b) - 127);
  if (f.kind == Kind::kFNUZ && b == 0x80) return nan;
  bool neg = (b >> (f.bits - 1)) & 1;
  unsigned e = (b >> f.m) & ((1u << f.e) - 1);
  unsigned m = b & ((1u << f.m) - 1);
  if (f.kind == Kind::kFN && (b & 0x7f) == 0x7f) return neg ? -nan : nan;
  if (f.kind == Kind::kIEEE && e == (1u << f.e) - 1) {
    double v = m == 0 ? std::numeric_limits<double>::infinity() : nan;
    return neg ? -v : v;
  }
  double v = e == 0 ? std::ldexp(double(m), 1 - f.bias - f.m)
                    : std::ldexp(1.0 + std::ldexp(double(m), -f.m), int(e) - f.bias);
  return neg ? -v : v;
}

namespace {
// The f16 bits of a value that f16 holds exactly (or a NaN / inf).
uint16_t exact_f16_bits(double v) {
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  double a = std::fabs(v);
  if (std::isnan(v)) return sign | 0x7e00;
  if (std::isinf(v)) return sign | 0x7c00;
  if (a == 0) return sign;
  int e = std::ilogb(a);
  if (e >= -14) return sign | uint16_t((e + 15) << 10) | uint16_t(std::ldexp(a, -e) * 1024 - 1024);
  return sign | uint16_t(std::ldexp(a, 24));
}
}  // namespace

mx::array decode_small_float(const mx::array& bytes, DType t, mx::Dtype to) {
  const Format f = format_of(t);
  if (to == mx::float16 && f.kind == Kind::kE8M0) {  // 2^-127..2^127: rounds in f16
    mx::array x = decode_small_float(bytes, t);
    // MLX's f32 -> f16 cast writes NaN as 0x7d00; XLA's is 0x7e00.
    return mx::where(mx::isnan(x), mx::view(mx::array(uint16_t{0x7e00}, mx::uint16), mx::float16),
                     mx::astype(x, mx::float16));
  }
  // A table of every encoding's bits, then one gather: exact, and the same
  // code for all nine types.
  const int n = 1 << f.bits;
  std::vector<uint32_t> table(n);
  for (int i = 0; i < n; ++i) {
    double v = small_float_value(static_cast<uint8_t>(i), t);
    uint32_t bits;
    if (std::isnan(v)) {
      bool neg = f.kind != Kind::kFNUZ && f.kind != Kind::kE8M0 && ((i >> (f.bits - 1)) & 1);
      bits = 0x7fc00000u | (neg ? 0x80000000u : 0u);
    } else {
      float fv = static_cast<float>(v);  // exact
      std::memcpy(&bits, &fv, 4);
    }
    if (to == mx::bfloat16) bits >>= 16;  // exact: at most 4 mantissa bits
    if (to == mx::float16) bits = std::isnan(v) ? (bits >> 16) & 0x8000 | 0x7e00 : exact_f16_bits(v);
    table[i] = bits;
  }
  mx::array idx = mx::astype(bytes, mx::uint32);
  if (to == mx::float32)
    return mx::take(mx::view(mx::array(table.begin(), {n}, mx::uint32), mx::float32), idx);
  std::vector<uint16_t> half(table.begin(), table.end());
  return mx::take(mx::view(mx::array(half.begin(), {n}, mx::uint16), to), idx);
}

mx::array encode_small_float(const mx::array& x0, DType t) {
  const Format f = format_of(t);
  const bool wide = x0.dtype() == mx::float64;
  mx::array x = wide ? x0 : mx::astype(x0, mx::float32);
  const int src_m = wide ? 52 : 23;
  const int64_t src_bias = wide ? 1023 : 127;
  // The source's bits as a non-negative int64 magnitude and a sign.
  mx::array bits = wide ? mx::view(x, mx::int64) : mx::astype(mx::view(x, mx::uint32), mx::int64);
  mx::array sign = wide ? mx::less(bits, i64(0)) : mx::greater_equal(bits, i64(int64_t{1} << 31));
  mx::array mag = mx::bitwise_and(bits, i64(wide ? std::numeric_limits<int64_t>::max() : 0x7fffffff));

  // Normal range of the target: rebias the exponent in place and round the
  // mantissa to f.m bits on the integer; a carry moves into the exponent,
  // so 1.9375 in e4m3 becomes 2.0. Round to nearest even, except E8M0,
  // which ml_dtypes and XLA round half up (3 -> 4, 12 -> 16).
  const int shift = src_m - f.m;
  mx::array r = mx::subtract(mag, i64((src_bias - f.bias) << src_m));
  mx::array q_norm =
      f.kind == Kind::kE8M0
          ? mx::right_shift(mx::add(r, i64(int64_t{1} << (shift - 1))), i64(shift))
          : mx::right_shift(
                mx::add(mx::add(r, i64((int64_t{1} << (shift - 1)) - 1)),
                        mx::bitwise_and(mx::right_shift(r, i64(shift)), i64(1))),
                i64(shift));
  mx::array normal = mx::greater_equal(r, i64(int64_t{1} << src_m));
  // Below the smallest normal: a multiple of 2^(1 - bias - m), found by an
  // exact power-of-two scaling and a round-half-even (2^m means the smallest
  // normal, whose encoding is exactly 2^m).
  mx::array scaled = mx::multiply(mx::abs(x), mx::array(std::ldexp(1.0, f.bias - 1 + f.m), x.dtype()));
  mx::array q_sub = mx::astype(mx::round(mx::where(normal, mx::zeros_like(scaled), scaled)), mx::int64);
  // e8m0 from f64 below 2^-126, as measured on XLA:CPU: 2^-127 is byte 0,
  // (2^-127, 2^-126) gives 2^-126 (byte 1), anything smaller NaN (from f32
  // it rounds as above).
  const bool e8m0_from_f64 = wide && f.kind == Kind::kE8M0;
  mx::array min_e8m0 = mx::array(std::ldexp(1.0, -127), x.dtype());
  mx::array underflow = mx::less(mx::abs(x), min_e8m0);
  if (e8m0_from_f64) q_sub = mx::where(mx::equal(mx::abs(x), min_e8m0), i64(0), i64(1));
  mx::array q = mx::where(normal, q_norm, q_sub);
  // Overflow and infinity (whose rebased bits round past the top) alike.
  q = mx::where(mx::greater(q, i64(max_finite(f))), i64(overflow_code(f)), q);

  const int64_t sbit = int64_t{1} << (f.bits - 1);
  mx::array nan = mx::isnan(x);
  switch (f.kind) {
    case Kind::kIEEE:
    case Kind::kFN:
      q = mx::where(nan, i64(nan_code(f)), q);
      q = mx::where(sign, mx::bitwise_or(q, i64(sbit)), q);
      break;
    case Kind::kF4:
      q = mx::where(sign, mx::bitwise_or(q, i64(sbit)), q);
      q = mx::where(nan, i64(nan_code(f)), q);
      break;
    case Kind::kFNUZ:
      // No -0: a negative value that rounds to zero is +0.
      q = mx::where(mx::logical_and(sign, mx::not_equal(q, i64(0))), mx::bitwise_or(q, i64(sbit)), q);
      q = mx::where(nan, i64(nan_code(f)), q);
      break;
    case Kind::kE8M0:
      q = mx::where(mx::logical_or(nan, mx::logical_or(sign, mx::equal(mag, i64(0)))),
                    i64(nan_code(f)), q);
      if (e8m0_from_f64) q = mx::where(underflow, i64(nan_code(f)), q);
      break;
  }
  return mx::astype(q, mx::uint8);
}

}  // namespace pjrtx::backend
