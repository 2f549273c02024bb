// Elementwise unary and binary ops with StableHLO/XLA:CPU semantics. MLX's
// raw behaviour differs for integer division and remainder (SIGFPE on x/0 and
// INT_MIN/-1), shifts by >= the bit width (x86 masks the count), float
// remainder (MLX's is Python's mod), sign(NaN), and integer power with a
// negative exponent; the lowerings below emit the guards.
#include "backend/mlx/ops/common.h"

namespace pjrtx::backend {

namespace {

using compiler::Opcode;
using namespace ops;

DType elem(LowerCtx& ctx) { return ctx.in(0).dtype; }

// ---- unary ----------------------------------------------------------------

template <mx::array (*F)(const mx::array&, mx::StreamOrDevice)>
Kernel lower_float_unary(LowerCtx& ctx) {
  DType t = elem(ctx);
  if (!compiler::is_float(t) && !compiler::is_complex(t))
    ctx.fail("expects a floating-point or complex operand, got ", ctx.in(0).str());
  return unary([](const mx::array& x) { return F(x, {}); });
}

Kernel lower_abs(LowerCtx& ctx) {
  mx::Dtype out = to_mlx(ctx.out(0).dtype);
  return unary([out](const mx::array& x) {
    mx::array r = mx::abs(x);
    return r.dtype() == out ? r : mx::astype(r, out);
  });
}

Kernel lower_negate(LowerCtx& ctx) {
  return unary([](const mx::array& x) { return mx::negative(x); });
}

Kernel lower_not(LowerCtx& ctx) {
  if (elem(ctx) == DType::kPred)
    return unary([](const mx::array& x) { return mx::logical_not(x); });
  if (!compiler::is_integer(elem(ctx))) ctx.fail("expects bool or integer operand");
  return unary([](const mx::array& x) { return mx::bitwise_invert(x); });
}

Kernel lower_sign(LowerCtx& ctx) {
  DType t = elem(ctx);
  if (compiler::is_float(t)) {
    // sign(NaN) = NaN and sign(+-0) = +-0 in XLA; MLX gives 0 for NaN.
    return unary([](const mx::array& x) {
      mx::array s = mx::sign(x);
      return mx::where(mx::logical_or(mx::isnan(x), mx::equal(x, mx::zeros_like(x))), x, s);
    });
  }
  if (compiler::is_complex(t)) {
    return unary([](const mx::array& x) {
      mx::array mag = mx::abs(x);
      mx::array z = mx::equal(mag, mx::zeros_like(mag));
      mx::array safe = mx::where(z, mx::ones_like(mag), mag);
      return mx::where(z, x, mx::divide(x, mx::astype(safe, mx::complex64)));
    });
  }
  return unary([](const mx::array& x) { return mx::sign(x); });
}

Kernel lower_is_finite(LowerCtx& ctx) {
  return unary([](const mx::array& x) { return mx::isfinite(x); });
}

Kernel lower_logistic(LowerCtx& ctx) {
  return unary([](const mx::array& x) { return mx::sigmoid(x); });
}

Kernel lower_round_even(LowerCtx& ctx) {
  return unary([](const mx::array& x) { return mx::round(x, 0); });
}

mx::array trunc_toward_zero(const mx::array& x) {
  return mx::where(mx::less(x, mx::zeros_like(x)), mx::ceil(x), mx::floor(x));
}

// Round half away from zero: |x - trunc(x)| is exact, so compare it with 0.5
// instead of computing floor(|x| + 0.5), which rounds 0.49999997f up.
Kernel lower_round_afz(LowerCtx& ctx) {
  return unary([](const mx::array& x) {
    mx::array t = trunc_toward_zero(x);
    mx::array frac = mx::abs(mx::subtract(x, t));
    mx::array half = mx::astype(mx::array(0.5f), x.dtype());
    mx::array away = mx::add(t, mx::sign(x));
    return mx::where(mx::greater_equal(frac, half), away, t);
  });
}

Kernel lower_real(LowerCtx& ctx) {
  if (!compiler::is_complex(elem(ctx)))
    return unary([](const mx::array& x) { return x; });
  return unary([](const mx::array& x) { return mx::real(x); });
}

Kernel lower_imag(LowerCtx& ctx) {
  if (!compiler::is_complex(elem(ctx)))
    return unary([](const mx::array& x) { return mx::zeros_like(x); });
  return unary([](const mx::array& x) { return mx::imag(x); });
}

// ---- binary ---------------------------------------------------------------

template <mx::array (*F)(const mx::array&, const mx::array&, mx::StreamOrDevice),
          mx::array (*B)(const mx::array&, const mx::array&, mx::StreamOrDevice)>
Kernel lower_arith(LowerCtx& ctx) {
  // B is the op on booleans (XLA's add on PRED is OR, multiply is AND).
  if (elem(ctx) == DType::kPred)
    return binary([](const mx::array& a, const mx::array& b) { return B(a, b, {}); });
  return binary([](const mx::array& a, const mx::array& b) { return F(a, b, {}); });
}

mx::array subtract_pred(const mx::array& a, const mx::array& b, mx::StreamOrDevice s) {
  return mx::not_equal(a, b, s);
}

// Truncating integer division with XLA's answers for the cases that trap in
// C: x / 0 = -1 (all ones for unsigned) and INT_MIN / -1 = INT_MIN.
struct IntDivision {
  mx::array quotient;
  mx::array divisor_is_zero;
  mx::array safe_divisor;
};

IntDivision int_divide(const mx::array& x, const mx::array& y, DType t) {
  mx::Dtype dt = x.dtype();
  mx::array zero = mx::zeros_like(y);
  mx::array is_zero = mx::equal(y, zero);
  mx::array bad = is_zero;
  if (compiler::is_signed_int(t)) {
    mx::array overflow = mx::logical_and(mx::equal(x, int_scalar(signed_min(t), dt)),
                                         mx::equal(y, int_scalar(-1, dt)));
    bad = mx::logical_or(bad, overflow);
  }
  mx::array ys = mx::where(bad, int_scalar(1, dt), y);
  mx::array q = mx::floor_divide(x, ys);
  if (compiler::is_signed_int(t)) {
    // Whether MLX floors or truncates here, turn it into truncation: a floored
    // quotient leaves a remainder whose sign differs from the dividend's.
    mx::array r = mx::subtract(x, mx::multiply(q, ys));
    mx::array fix = mx::logical_and(mx::not_equal(r, mx::zeros_like(r)),
                                    mx::not_equal(mx::less(r, mx::zeros_like(r)),
                                                  mx::less(x, mx::zeros_like(x))));
    q = mx::where(fix, mx::add(q, int_scalar(1, dt)), q);
  }
  return {q, is_zero, ys};
}

Kernel lower_divide(LowerCtx& ctx) {
  DType t = elem(ctx);
  if (compiler::is_integer(t)) {
    return binary([t](const mx::array& x, const mx::array& y) {
      IntDivision d = int_divide(x, y, t);
      return mx::where(d.divisor_is_zero, all_ones(x.dtype()), d.quotient);
    });
  }
  if (t == DType::kPred) ctx.fail("does not take bool operands");
  return binary([](const mx::array& x, const mx::array& y) { return mx::divide(x, y); });
}

Kernel lower_remainder(LowerCtx& ctx) {
  DType t = elem(ctx);
  if (compiler::is_integer(t)) {
    // x % 0 = x; INT_MIN % -1 = 0; the sign follows the dividend.
    return binary([t](const mx::array& x, const mx::array& y) {
      IntDivision d = int_divide(x, y, t);
      mx::array r = mx::subtract(x, mx::multiply(d.quotient, d.safe_divisor));
      return mx::where(d.divisor_is_zero, x, r);
    });
  }
  if (!compiler::is_float(t)) ctx.fail("expects integer or float operands");
  // C fmod: on magnitudes MLX's Python-style mod equals fmod exactly; the
  // result then takes the dividend's sign (including -0).
  return binary([t](const mx::array& x, const mx::array& y) {
    mx::array r = mx::remainder(mx::abs(x), mx::abs(y));
    return mx::where(sign_bit(x, t), mx::negative(r), r);
  });
}

Kernel lower_power(LowerCtx& ctx) {
  DType t = elem(ctx);
  if (compiler::is_integer(t)) {
    // XLA: a negative exponent gives 1 for base 1, +-1 for base -1, else 0.
    // MLX's integer power loops on the exponent's bits, so never give it a
    // negative one.
    bool is_signed = compiler::is_signed_int(t);
    return binary([is_signed](const mx::array& x, const mx::array& y) {
      mx::Dtype dt = x.dtype();
      if (!is_signed) return mx::power(x, y);
      mx::array zero = mx::zeros_like(y);
      mx::array neg = mx::less(y, zero);
      mx::array p = mx::power(x, mx::where(neg, zero, y));
      mx::array one = int_scalar(1, dt);
      mx::array minus_one = int_scalar(-1, dt);
      mx::array odd = mx::not_equal(mx::bitwise_and(y, one), mx::zeros_like(y));
      mx::array neg_result =
          mx::where(mx::equal(x, one), one,
                    mx::where(mx::equal(x, minus_one),
                              mx::where(odd, minus_one, one), mx::zeros_like(x)));
      return mx::where(neg, neg_result, p);
    });
  }
  return binary([](const mx::array& x, const mx::array& y) { return mx::power(x, y); });
}

Kernel lower_atan2(LowerCtx& ctx) {
  return binary([](const mx::array& y, const mx::array& x) { return mx::arctan2(y, x); });
}

Kernel lower_max(LowerCtx& ctx) {
  if (elem(ctx) == DType::kPred)
    return binary([](const mx::array& a, const mx::array& b) { return mx::logical_or(a, b); });
  return binary([](const mx::array& a, const mx::array& b) { return mx::maximum(a, b); });
}

Kernel lower_min(LowerCtx& ctx) {
  if (elem(ctx) == DType::kPred)
    return binary([](const mx::array& a, const mx::array& b) { return mx::logical_and(a, b); });
  return binary([](const mx::array& a, const mx::array& b) { return mx::minimum(a, b); });
}

template <mx::array (*Logical)(const mx::array&, const mx::array&, mx::StreamOrDevice),
          mx::array (*Bitwise)(const mx::array&, const mx::array&, mx::StreamOrDevice)>
Kernel lower_bitwise(LowerCtx& ctx) {
  if (elem(ctx) == DType::kPred)
    return binary([](const mx::array& a, const mx::array& b) { return Logical(a, b, {}); });
  if (!compiler::is_integer(elem(ctx))) ctx.fail("expects bool or integer operands");
  return binary([](const mx::array& a, const mx::array& b) { return Bitwise(a, b, {}); });
}

mx::array xor_pred(const mx::array& a, const mx::array& b, mx::StreamOrDevice s) {
  return mx::not_equal(a, b, s);
}

// Shifts: a count outside [0, bits) gives 0 (logical) or the sign fill
// (arithmetic) in StableHLO; x86 would mask the count instead.
enum class Shift { kLeft, kRightLogical, kRightArithmetic };

template <Shift S>
Kernel lower_shift(LowerCtx& ctx) {
  DType t = elem(ctx);
  if (!compiler::is_integer(t)) ctx.fail("expects integer operands, got ", ctx.in(0).str());
  const int bits = compiler::dtype_bits(t);
  const bool is_signed = compiler::is_signed_int(t);
  return binary([bits, is_signed](const mx::array& x, const mx::array& y) {
    mx::Dtype dt = x.dtype();
    mx::Dtype ut = unsigned_of_width(bits);
    mx::Dtype st = signed_of_width(bits);
    // Out of range <=> the count viewed as unsigned is >= bits.
    mx::array yu = mx::astype(y, ut);
    mx::array oob = mx::greater_equal(yu, mx::array(bits, ut));
    mx::array ys = mx::where(oob, mx::zeros_like(yu), yu);
    if constexpr (S == Shift::kLeft) {
      mx::array r = mx::left_shift(mx::astype(x, ut), ys);
      return mx::where(oob, mx::zeros_like(x), mx::astype(r, dt));
    } else if constexpr (S == Shift::kRightLogical) {
      mx::array r = mx::right_shift(mx::astype(x, ut), ys);
      return mx::where(oob, mx::zeros_like(x), mx::astype(r, dt));
    } else {
      mx::array xs = mx::astype(x, st);
      mx::array r = mx::right_shift(xs, mx::astype(ys, st));
      mx::array fill = mx::where(mx::less(xs, mx::zeros_like(xs)),
                                 mx::full_like(xs, -1), mx::zeros_like(xs));
      return mx::astype(mx::where(oob, fill, r), dt);
    }
  });
}

Kernel lower_complex(LowerCtx& ctx) {
  if (ctx.out(0).dtype != DType::kC64) ctx.fail("supports complex<f32> only");
  return binary([](const mx::array& re, const mx::array& im) {
    mx::array i = mx::multiply(mx::astype(im, mx::complex64),
                               mx::array(std::complex<float>(0.0f, 1.0f)));
    return mx::add(mx::astype(re, mx::complex64), i);
  });
}

}  // namespace

void register_elementwise_ops(Registry& r) {
  using compiler::Opcode;
  r.add(Opcode::abs, lower_abs);
  r.add(Opcode::negate, lower_negate);
  r.add(Opcode::not_, lower_not);
  r.add(Opcode::sign, lower_sign);
  r.add(Opcode::is_finite, lower_is_finite);
  r.add(Opcode::logistic, lower_logistic);
  r.add(Opcode::round_nearest_even, lower_round_even);
  r.add(Opcode::round_nearest_afz, lower_round_afz);
  r.add(Opcode::real, lower_real);
  r.add(Opcode::imag, lower_imag);
  r.add(Opcode::ceil, lower_float_unary<mx::ceil>);
  r.add(Opcode::floor, lower_float_unary<mx::floor>);
  r.add(Opcode::cosine, lower_float_unary<mx::cos>);
  r.add(Opcode::sine, lower_float_unary<mx::sin>);
  r.add(Opcode::tan, lower_float_unary<mx::tan>);
  r.add(Opcode::tanh, lower_float_unary<mx::tanh>);
  r.add(Opcode::exponential, lower_float_unary<mx::exp>);
  r.add(Opcode::exponential_minus_one, lower_float_unary<mx::expm1>);
  r.add(Opcode::log, lower_float_unary<mx::log>);
  r.add(Opcode::log_plus_one, lower_float_unary<mx::log1p>);
  r.add(Opcode::sqrt, lower_float_unary<mx::sqrt>);
  r.add(Opcode::rsqrt, lower_float_unary<mx::rsqrt>);

  r.add(Opcode::add, lower_arith<mx::add, mx::logical_or>);
  r.add(Opcode::subtract, lower_arith<mx::subtract, subtract_pred>);
  r.add(Opcode::multiply, lower_arith<mx::multiply, mx::logical_and>);
  r.add(Opcode::divide, lower_divide);
  r.add(Opcode::remainder, lower_remainder);
  r.add(Opcode::power, lower_power);
  r.add(Opcode::atan2, lower_atan2);
  r.add(Opcode::maximum, lower_max);
  r.add(Opcode::minimum, lower_min);
  r.add(Opcode::and_, lower_bitwise<mx::logical_and, mx::bitwise_and>);
  r.add(Opcode::or_, lower_bitwise<mx::logical_or, mx::bitwise_or>);
  r.add(Opcode::xor_, lower_bitwise<xor_pred, mx::bitwise_xor>);
  r.add(Opcode::shift_left, lower_shift<Shift::kLeft>);
  r.add(Opcode::shift_right_logical, lower_shift<Shift::kRightLogical>);
  r.add(Opcode::shift_right_arithmetic, lower_shift<Shift::kRightArithmetic>);
  r.add(Opcode::complex, lower_complex);
}

}  // namespace pjrtx::backend
