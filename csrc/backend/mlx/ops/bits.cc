// Bit-level elementwise ops MLX has no kernel for: popcnt and
// count_leading_zeros on integers, reduce_precision on floats. Each is
// composed from shifts, masks and adds on the unsigned view of the operand's
// width, with shift counts fixed at lowering time and always in [1, width)
// (MLX passes shift counts to C++ as is; >= width is undefined there).
#include "backend/mlx/ops/common.h"

#include <cstdint>

namespace pjrtx::backend {

namespace {

using namespace ops;

// An unsigned constant of the array's (unsigned) dtype, so that no op
// promotes the operand to a wider type.
mx::array ucst(uint64_t v, mx::Dtype dt) { return mx::array(v, dt); }

// `byte` repeated over a `bits`-wide word: 0x55 -> 0x5555 for 16 bits.
uint64_t repeat_byte(uint8_t byte, int bits) {
  uint64_t v = 0;
  for (int i = 0; i < bits; i += 8) v |= uint64_t{byte} << i;
  return v;
}

// Population count of an unsigned array of `bits` (8..64) width (SWAR):
// 2-bit fields hold counts of 0..2, 4-bit fields 0..4, bytes 0..8; then the
// bytes are summed by shifts (no multiply: MLX multiplies u8/u16 in int and
// 0xffff * 0xffff overflows int). The total (<= 64) sits in the low byte.
mx::array popcount_unsigned(mx::array x, int bits) {
  mx::Dtype dt = x.dtype();
  auto shr = [&](const mx::array& v, int s) { return mx::right_shift(v, ucst(s, dt)); };
  auto mask = [&](uint8_t b) { return ucst(repeat_byte(b, bits), dt); };
  x = mx::subtract(x, mx::bitwise_and(shr(x, 1), mask(0x55)));
  x = mx::add(mx::bitwise_and(x, mask(0x33)), mx::bitwise_and(shr(x, 2), mask(0x33)));
  x = mx::bitwise_and(mx::add(x, shr(x, 4)), mask(0x0f));
  for (int s = 8; s < bits; s *= 2) x = mx::add(x, shr(x, s));
  return mx::bitwise_and(x, ucst(0x7f, dt));
}

void require_integer(LowerCtx& ctx) {
  if (!compiler::is_integer(ctx.in(0).dtype))
    ctx.fail("expects an integer operand, got ", ctx.in(0).str());
}

// XLA:CPU counts an s4 in its sign-extended byte: popcnt(s4 -8) is 5 and
// popcnt(s4 -1) is 8, which wraps to -8. The storage here is that byte, so
// the same count comes out. An s2 it counts in its two value bits only
// (popcnt(s2 -2) is 1), so those are masked first.
Kernel lower_popcnt(LowerCtx& ctx) {
  require_integer(ctx);
  const int bits = compiler::dtype_bits(ctx.in(0).dtype);
  return unary([bits](const mx::array& x) {
    mx::Dtype ut = unsigned_of_width(bits);
    mx::array u = mx::view(x, ut);
    if (bits == 2) u = mx::bitwise_and(u, ucst(0x03, ut));
    return mx::view(popcount_unsigned(u, bits), x.dtype());
  });
}

// clz(x) = bits - popcount(x smeared right): or-ing x >> 1, 2, 4, ... sets
// every bit below the leading one, so clz(0) = bits.
Kernel lower_clz(LowerCtx& ctx) {
  require_integer(ctx);
  const int bits = compiler::dtype_bits(ctx.in(0).dtype);
  return unary([bits](const mx::array& x) {
    mx::Dtype ut = unsigned_of_width(bits);
    mx::array u = mx::view(x, ut);
    // Only the 4 value bits of s4/u4 count: clz(s4 -1) is 0, not 4 - 8.
    if (bits < 8) u = mx::bitwise_and(u, ucst((1 << bits) - 1, ut));
    for (int s = 1; s < bits; s *= 2) u = mx::bitwise_or(u, mx::right_shift(u, ucst(s, ut)));
    mx::array n = mx::subtract(ucst(bits, ut), popcount_unsigned(u, bits));
    return mx::view(n, x.dtype());
  });
}

// ---- reduce_precision ---------------------------------------------------------
// XLA:CPU's semantics (the mhlo reducePrecision helper its fusion emitter
// uses), on the bits u of x:
//  - mantissa: round to nearest even at the kept width by adding
//    0111..1 + (last kept bit) below it, then clearing the dropped bits; a
//    carry out of the mantissa bumps the exponent (which is right).
//  - exponent: a (rounded) biased exponent above bias + (2^(e-1) - 1)
//    becomes +-inf; one at or below bias - (2^(e-1) - 1) becomes +-0. So
//    values that would be denormal in the reduced format flush to zero
//    (f32 -> e5m10: |x| < 2^-14 gives 0), and e = 1 leaves only 0 and inf.
//  - NaN: x itself, bits unchanged, even for mantissa_bits = 0 (XLA:CPU's
//    fusion emitter; its older LLVM emitter gave +inf there). bf16 is the
//    exception: XLA:CPU computes bf16 in f32 and its f32 -> bf16 convert
//    drops NaN payloads, so a bf16 NaN comes back as sign | 0x7fc0 (unless
//    the f32 op is a no-op, e >= 8 and m >= 23, which XLA removes).
// Widths at or above the source's leave that part alone; when both are,
// the op is the identity.

struct FloatLayout {
  int mantissa_bits;
  int exponent_bits;
};

FloatLayout layout_of(DType t) {
  switch (t) {
    case DType::kF16: return {10, 5};
    case DType::kBF16: return {7, 8};
    case DType::kF32: return {23, 8};
    default: return {52, 11};  // f64
  }
}

Kernel lower_reduce_precision(LowerCtx& ctx) {
  DType t = ctx.in(0).dtype;
  if (!compiler::is_float(t))
    ctx.fail("expects a floating-point operand, got ", ctx.in(0).str());
  const int64_t e = ctx.inst().attr_int("exponent_bits");
  const int64_t m = ctx.inst().attr_int("mantissa_bits");
  if (e < 1 || m < 0)
    ctx.fail("needs exponent_bits >= 1 and mantissa_bits >= 0, got ", e, " and ", m);
  const int bits = compiler::dtype_bits(t);
  const FloatLayout src = layout_of(t);
  const uint64_t sign_mask = uint64_t{1} << (bits - 1);
  const uint64_t exp_mask = ((uint64_t{1} << src.exponent_bits) - 1) << src.mantissa_bits;
  const bool round_mantissa = m < src.mantissa_bits;
  const bool clamp_exponent = e < src.exponent_bits;
  const int drop = round_mantissa ? src.mantissa_bits - static_cast<int>(m) : 0;
  const uint64_t bias = (uint64_t{1} << (src.exponent_bits - 1)) - 1;
  const uint64_t reduced_bias = clamp_exponent ? (uint64_t{1} << (e - 1)) - 1 : 0;
  const uint64_t max_exp = (bias + reduced_bias) << src.mantissa_bits;
  const uint64_t min_exp = (bias - reduced_bias) << src.mantissa_bits;
  // bf16 runs in f32 on XLA:CPU, so only f32's widths make the op (and its
  // NaN canonicalization) vanish there: bf16 with (8, 7) still maps NaNs.
  const bool canonical_nan = t == DType::kBF16;
  const bool identity = canonical_nan ? e >= 8 && m >= 23 : !round_mantissa && !clamp_exponent;
  if (identity) return unary([](const mx::array& x) { return x; });
  return unary([=](const mx::array& x) {
    mx::Dtype ut = unsigned_of_width(bits);
    mx::array u = mx::view(x, ut);
    mx::array is_nan = mx::greater(mx::bitwise_and(u, ucst(~sign_mask, ut)), ucst(exp_mask, ut));
    if (round_mantissa) {
      const uint64_t last = uint64_t{1} << drop;
      mx::array last_bit = mx::bitwise_and(mx::right_shift(u, ucst(drop, ut)), ucst(1, ut));
      mx::array rounded = mx::add(u, mx::add(last_bit, ucst((last >> 1) - 1, ut)));
      u = mx::bitwise_and(rounded, ucst(~(last - 1), ut));
    }
    if (clamp_exponent) {
      mx::array exponent = mx::bitwise_and(u, ucst(exp_mask, ut));
      mx::array signed_zero = mx::bitwise_and(u, ucst(sign_mask, ut));
      mx::array signed_inf = mx::bitwise_or(signed_zero, ucst(exp_mask, ut));
      u = mx::where(mx::greater(exponent, ucst(max_exp, ut)), signed_inf, u);
      u = mx::where(mx::less_equal(exponent, ucst(min_exp, ut)), signed_zero, u);
    }
    mx::array x_bits = mx::view(x, ut);
    if (canonical_nan)
      x_bits = mx::bitwise_or(mx::bitwise_and(x_bits, ucst(sign_mask, ut)), ucst(0x7fc0, ut));
    return mx::view(mx::where(is_nan, x_bits, u), x.dtype());
  });
}

}  // namespace

void register_bit_ops(Registry& r) {
  using compiler::Opcode;
  r.add(Opcode::popcnt, lower_popcnt);
  r.add(Opcode::count_leading_zeros, lower_clz);
  r.add(Opcode::reduce_precision, lower_reduce_precision);
}

}  // namespace pjrtx::backend
