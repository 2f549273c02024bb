// complex128 lowered to f64 pairs (see complex128.h). How each op is done:
// - ops that treat the real and imaginary parts alike and separately
//   (moves, slices, gathers, selects, pads, scatters that replace or add,
//   add-reductions, add, subtract, negate) run the op's own f64 lowering
//   once on the real parts and once on the imaginary parts
//   (LowerCtx::set_parts_view);
// - dot_general and convolution run it four times: the complex product;
// - arithmetic and transcendentals are formulas on the parts, with XLA's
//   special cases (a division by zero, exp of an infinite real part, ...);
// - ops that only carry values (control flow, calls, tuples, custom calls)
//   use their own lowering on the stored pairs: the linalg and FFT host
//   kernels read them as std::complex<double>;
// anything else (sort with complex keys, complex max, ...) fails at compile
// time naming the op, as before.
#include "backend/mlx/complex128.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "backend/mlx/ops/common.h"
#include "backend/mlx/transfer.h"

namespace pjrtx::backend {

namespace {

using compiler::Instruction;
using compiler::Opcode;
using compiler::Region;
using namespace ops;

constexpr double kInf = std::numeric_limits<double>::infinity();

bool is_c128(const compiler::TensorType& t) { return t.dtype == DType::kC128; }

struct Cx {
  mx::array re, im;
};

mx::array re_of(const mx::array& x) { return c128_part(x, 0); }
mx::array im_of(const mx::array& x) { return c128_part(x, 1); }
Cx split(const mx::array& x) { return {re_of(x), im_of(x)}; }
mx::array pack(const mx::array& re, const mx::array& im) {
  // The parts may broadcast against each other (a scalar part).
  auto both = mx::broadcast_arrays({re, im});
  return mx::stack(both, -1);
}
mx::array pack(const Cx& z) { return pack(z.re, z.im); }
mx::array c(double v) { return mx::array(v, mx::float64); }

// ---- real helpers -------------------------------------------------------

mx::array exp_r(const mx::array& x) { return exp_f64(x); }
mx::array sin_r(const mx::array& x) { return sin_f64(x); }
mx::array cos_r(const mx::array& x) { return cos_f64(x); }
mx::array cosh_r(const mx::array& x) {
  mx::array e = exp_r(mx::abs(x));
  // (e + 1/e) / 2 with e = exp(|x|) >= 1: no cancellation.
  return mx::multiply(mx::add(e, mx::divide(c(1.0), e)), c(0.5));
}
mx::array sinh_r(const mx::array& x) {
  // (expm1(x) - expm1(-x)) / 2 keeps small |x| accurate and is exact in
  // sign; expm1 is std::expm1 in MLX.
  return mx::multiply(mx::subtract(mx::expm1(x), mx::expm1(mx::negative(x))), c(0.5));
}
mx::array copysign_r(const mx::array& mag, const mx::array& sgn) {
  mx::array neg = mx::less(mx::view(sgn, mx::int64), mx::array(int64_t{0}, mx::int64));
  mx::array a = mx::abs(mag);
  return mx::where(neg, mx::negative(a), a);
}

// |z| = max * sqrt(1 + (min/max)^2): no overflow or underflow in between,
// 0 for 0, inf when either part is infinite (even with a NaN other part).
mx::array abs_c(const Cx& z) {
  mx::array a = mx::abs(z.re), b = mx::abs(z.im);
  mx::array hi = mx::maximum(a, b), lo = mx::minimum(a, b);
  mx::array safe = mx::where(mx::equal(hi, c(0.0)), c(1.0), hi);
  mx::array r = mx::divide(lo, safe);
  mx::array m = mx::multiply(hi, mx::sqrt(mx::add(c(1.0), mx::multiply(r, r))));
  m = mx::where(mx::equal(hi, c(0.0)), c(0.0), m);
  // inf when a part is infinite, NaN when a part is NaN (XLA:CPU gives NaN
  // for |inf + nan i|, where C's hypot gives inf).
  mx::array inf = mx::logical_or(mx::isinf(a), mx::isinf(b));
  mx::array nan = mx::logical_or(mx::isnan(a), mx::isnan(b));
  return mx::where(nan, c(std::numeric_limits<double>::quiet_NaN()), mx::where(inf, c(kInf), m));
}

// ---- complex arithmetic -------------------------------------------------

Cx add_c(const Cx& x, const Cx& y) { return {mx::add(x.re, y.re), mx::add(x.im, y.im)}; }
Cx mul_c(const Cx& x, const Cx& y) {
  return {mx::subtract(mx::multiply(x.re, y.re), mx::multiply(x.im, y.im)),
          mx::add(mx::multiply(x.re, y.im), mx::multiply(x.im, y.re))};
}

// 1 or 0 with the sign of x, by whether x is infinite (C99 Annex G's
// recovery of infinities from a NaN result).
mx::array inf_unit(const mx::array& x) {
  return copysign_r(mx::where(mx::isinf(x), c(1.0), c(0.0)), x);
}

// Smith's algorithm, as XLA's elemental emitter: scale by the larger part
// of the divisor. Where that gives NaN + NaN i, XLA (as C99 Annex G)
// recovers: a zero divisor gives infinities signed by the dividend
// (copysign(inf, y.re) * x), an infinite dividend over a finite divisor
// infinities, a finite dividend over an infinite divisor signed zeros.
Cx div_c(const Cx& x, const Cx& y) {
  mx::array big_re = mx::greater_equal(mx::abs(y.re), mx::abs(y.im));
  // |y.re| >= |y.im|: r = y.im / y.re, d = y.re + y.im r
  mx::array safe_re = mx::where(mx::equal(y.re, c(0.0)), c(1.0), y.re);
  mx::array safe_im = mx::where(mx::equal(y.im, c(0.0)), c(1.0), y.im);
  mx::array r1 = mx::divide(y.im, safe_re);
  mx::array d1 = mx::add(y.re, mx::multiply(y.im, r1));
  mx::array re1 = mx::divide(mx::add(x.re, mx::multiply(x.im, r1)), d1);
  mx::array im1 = mx::divide(mx::subtract(x.im, mx::multiply(x.re, r1)), d1);
  // otherwise: r = y.re / y.im, d = y.im + y.re r
  mx::array r2 = mx::divide(y.re, safe_im);
  mx::array d2 = mx::add(y.im, mx::multiply(y.re, r2));
  mx::array re2 = mx::divide(mx::add(mx::multiply(x.re, r2), x.im), d2);
  mx::array im2 = mx::divide(mx::subtract(mx::multiply(x.im, r2), x.re), d2);
  mx::array re = mx::where(big_re, re1, re2), im = mx::where(big_re, im1, im2);
  mx::array both_nan = mx::logical_and(mx::isnan(re), mx::isnan(im));
  auto finite = [](const Cx& z) { return mx::logical_and(mx::isfinite(z.re), mx::isfinite(z.im)); };
  auto infinite = [](const Cx& z) { return mx::logical_or(mx::isinf(z.re), mx::isinf(z.im)); };
  mx::array x_nan = mx::logical_and(mx::isnan(x.re), mx::isnan(x.im));
  mx::array zero = mx::logical_and(mx::equal(y.re, c(0.0)), mx::equal(y.im, c(0.0)));
  mx::array inf = copysign_r(c(kInf), y.re);
  mx::array z_re = mx::multiply(inf, x.re), z_im = mx::multiply(inf, x.im);
  // Infinite dividend, finite divisor: inf (a c + b d) + inf (b c - a d) i.
  mx::array a = inf_unit(x.re), b = inf_unit(x.im);
  mx::array i_re = mx::multiply(c(kInf), mx::add(mx::multiply(a, y.re), mx::multiply(b, y.im)));
  mx::array i_im = mx::multiply(c(kInf), mx::subtract(mx::multiply(b, y.re), mx::multiply(a, y.im)));
  // Finite dividend, infinite divisor: 0 (a c + b d) + 0 (b c - a d) i.
  mx::array cc = inf_unit(y.re), dd = inf_unit(y.im);
  mx::array o_re = mx::multiply(c(0.0), mx::add(mx::multiply(x.re, cc), mx::multiply(x.im, dd)));
  mx::array o_im = mx::multiply(c(0.0), mx::subtract(mx::multiply(x.im, cc), mx::multiply(x.re, dd)));
  mx::array use_zero = mx::logical_and(both_nan, mx::logical_and(zero, mx::logical_not(x_nan)));
  mx::array use_inf = mx::logical_and(both_nan, mx::logical_and(infinite(x), finite(y)));
  mx::array use_o = mx::logical_and(both_nan, mx::logical_and(finite(x), infinite(y)));
  re = mx::where(use_zero, z_re, mx::where(use_inf, i_re, mx::where(use_o, o_re, re)));
  im = mx::where(use_zero, z_im, mx::where(use_inf, i_im, mx::where(use_o, o_im, im)));
  return {re, im};
}

// log|z| without overflow, and accurate near |z| = 1 (where log|z| is
// small and log(abs) would lose its digits).
mx::array log_abs(const Cx& z) {
  mx::array a = mx::abs(z.re), b = mx::abs(z.im);
  mx::array hi = mx::maximum(a, b), lo = mx::minimum(a, b);
  mx::array safe = mx::where(mx::equal(hi, c(0.0)), c(1.0), hi);
  mx::array r = mx::divide(lo, safe);
  mx::array far = mx::add(mx::log(hi), mx::multiply(c(0.5), mx::log1p(mx::multiply(r, r))));
  // 0.5 log1p((hi - 1)(hi + 1) + lo^2): exact products near |z| = 1.
  mx::array near = mx::multiply(
      c(0.5), mx::log1p(mx::add(mx::multiply(mx::subtract(hi, c(1.0)), mx::add(hi, c(1.0))),
                                mx::multiply(lo, lo))));
  mx::array is_near = mx::logical_and(mx::greater(hi, c(0.5)), mx::less(hi, c(2.0)));
  mx::array out = mx::where(is_near, near, far);
  out = mx::where(mx::equal(hi, c(0.0)), c(-kInf), out);
  return mx::where(mx::logical_or(mx::isinf(a), mx::isinf(b)), c(kInf), out);
}

Cx log_c(const Cx& z) { return {log_abs(z), mx::arctan2(z.im, z.re)}; }

// e^a (cos b + i sin b); b = 0 keeps the imaginary part exact (e^a * 0
// would be NaN for a = inf).
Cx exp_c(const Cx& z) {
  mx::array ea = exp_r(z.re);
  mx::array b0 = mx::equal(z.im, c(0.0));
  return {mx::where(b0, ea, mx::multiply(ea, cos_r(z.im))),
          mx::where(b0, z.im, mx::multiply(ea, sin_r(z.im)))};
}

// e^z - 1 = (expm1(a) cos b - 2 sin^2(b/2)) + i e^a sin b: no cancellation
// for small |z|.
Cx expm1_c(const Cx& z) {
  mx::array h = sin_r(mx::multiply(z.im, c(0.5)));
  mx::array em1 = mx::expm1(z.re);
  mx::array b0 = mx::equal(z.im, c(0.0));
  mx::array re = mx::subtract(mx::multiply(em1, cos_r(z.im)), mx::multiply(c(2.0), mx::multiply(h, h)));
  mx::array im = mx::multiply(exp_r(z.re), sin_r(z.im));
  return {mx::where(b0, em1, re), mx::where(b0, z.im, im)};
}

// log(1 + z): |1 + z| from log1p(a (2 + a) + b^2) while that cannot
// overflow, else log|1 + z|; the angle of 1 + z.
Cx log1p_c(const Cx& z) {
  mx::array a = z.re, b = z.im;
  mx::array one_a = mx::add(c(1.0), a);
  mx::array small = mx::logical_and(mx::less(mx::abs(a), c(1e150)), mx::less(mx::abs(b), c(1e150)));
  mx::array t = mx::add(mx::multiply(a, mx::add(c(2.0), a)), mx::multiply(b, b));
  mx::array re = mx::where(small, mx::multiply(c(0.5), mx::log1p(t)), log_abs({one_a, b}));
  return {re, mx::arctan2(b, one_a)};
}

// sqrt: t = sqrt((|a| + |z|) / 2), then (t, b / 2t) for a >= 0 and
// (|b| / 2t, copysign(t, b)) for a < 0; sqrt(0 + bi) = 0 + bi and
// sqrt(x + inf i) = inf + inf i (C99, XLA).
Cx sqrt_c(const Cx& z) {
  mx::array a = z.re, b = z.im;
  mx::array m = abs_c(z);
  mx::array t = mx::sqrt(mx::add(mx::multiply(mx::abs(a), c(0.5)), mx::multiply(m, c(0.5))));
  mx::array safe_t = mx::where(mx::equal(t, c(0.0)), c(1.0), t);
  mx::array q = mx::divide(b, mx::multiply(c(2.0), safe_t));
  mx::array pos = mx::greater_equal(a, c(0.0));
  mx::array re = mx::where(pos, t, mx::abs(q));
  mx::array im = mx::where(pos, q, copysign_r(t, b));
  mx::array zero = mx::equal(m, c(0.0));
  re = mx::where(zero, c(0.0), re);
  im = mx::where(zero, b, im);
  mx::array binf = mx::isinf(b);
  return {mx::where(binf, c(kInf), re), mx::where(binf, b, im)};
}

Cx one_c(const mx::array& like) { return {mx::ones_like(like), mx::zeros_like(like)}; }

// sin(a + bi) = sin a cosh b + i cos a sinh b; cos = cos a cosh b - i sin a sinh b.
Cx sin_c(const Cx& z) {
  return {mx::multiply(sin_r(z.re), cosh_r(z.im)), mx::multiply(cos_r(z.re), sinh_r(z.im))};
}
Cx cos_c(const Cx& z) {
  return {mx::multiply(cos_r(z.re), cosh_r(z.im)),
          mx::negative(mx::multiply(sin_r(z.re), sinh_r(z.im)))};
}

// tan(a + bi) = (t sech^2 b + i h (1 + t^2)) / (1 + t^2 h^2) with t = tan a,
// h = tanh b: no cancellation, and +-i once |b| is large (sech^2 b -> 0).
// tanh(a + bi) is the same with the parts' roles swapped.
Cx tan_parts(const mx::array& a, const mx::array& b) {
  mx::array t = mx::tan(a), h = mx::tanh(b);
  mx::array ch = cosh_r(b);
  mx::array sech2 = mx::divide(c(1.0), mx::multiply(ch, ch));
  mx::array t2 = mx::multiply(t, t);
  mx::array den = mx::add(c(1.0), mx::multiply(t2, mx::multiply(h, h)));
  return {mx::divide(mx::multiply(t, sech2), den),
          mx::divide(mx::multiply(h, mx::add(c(1.0), t2)), den)};
}
// tanh(x + yi) with XLA:CPU's special values (C99's, but for
// tanh(0 + nan i), NaN + NaN i): tanh(+-inf + yi) = +-1 + 0i for any y,
// tanh(nan + 0i) = nan + 0i, and NaN where y is infinite or NaN otherwise.
// tan(z) = -i tanh(iz).
Cx tanh_special(const mx::array& x, const mx::array& y) {
  Cx r = tan_parts(y, x);
  mx::array nan = c(std::numeric_limits<double>::quiet_NaN());
  mx::array bad_y = mx::logical_and(mx::logical_not(mx::isfinite(y)), mx::isfinite(x));
  mx::array re = mx::where(bad_y, nan, r.im), im = mx::where(bad_y, nan, r.re);
  mx::array nan_zero = mx::logical_and(mx::isnan(x), mx::equal(y, c(0.0)));
  im = mx::where(nan_zero, y, im);
  mx::array x_inf = mx::isinf(x);
  mx::array sin2y = mx::where(mx::isfinite(y), sin_r(mx::multiply(c(2.0), y)), c(1.0));
  re = mx::where(x_inf, copysign_r(c(1.0), x), re);
  im = mx::where(x_inf, copysign_r(c(0.0), sin2y), im);
  return {re, im};
}
Cx tanh_c(const Cx& z) { return tanh_special(z.re, z.im); }
Cx tan_c(const Cx& z) {
  // iz = -b + ai; tan z = -i tanh(iz) = im(t) - re(t) i.
  Cx t = tanh_special(mx::negative(z.im), z.re);
  return {t.im, mx::negative(t.re)};
}

// Each part divided by |z|; 0 stays 0 (XLA: sign(-inf + 2i) = nan + 0i).
Cx sign_c(const Cx& z) {
  mx::array m = abs_c(z);
  mx::array zero = mx::equal(m, c(0.0));
  mx::array safe = mx::where(zero, c(1.0), m);
  return {mx::where(zero, z.re, mx::divide(z.re, safe)), mx::where(zero, z.im, mx::divide(z.im, safe))};
}

// z^w = exp(w log z); 0^w is 1 for w = 0 and 0 for re(w) > 0, im(w) = 0.
Cx pow_c(const Cx& z, const Cx& w) {
  Cx r = exp_c(mul_c(w, log_c(z)));
  mx::array z0 = mx::logical_and(mx::equal(z.re, c(0.0)), mx::equal(z.im, c(0.0)));
  mx::array w0 = mx::logical_and(mx::equal(w.re, c(0.0)), mx::equal(w.im, c(0.0)));
  mx::array wpos = mx::logical_and(mx::greater(w.re, c(0.0)), mx::equal(w.im, c(0.0)));
  mx::array re = mx::where(w0, c(1.0), mx::where(mx::logical_and(z0, wpos), c(0.0), r.re));
  mx::array im = mx::where(w0, c(0.0), mx::where(mx::logical_and(z0, wpos), c(0.0), r.im));
  return {re, im};
}

// ---- op kinds -----------------------------------------------------------

// A region whose every instruction adds or subtracts two of its params, and
// whose returns are params or those results: linear in each part, so the
// op may run on the real and imaginary parts separately (reduce and
// scatter bodies: sum, replace, scatter-add).
bool linear_body(const Region& r) {
  auto is_param = [&](compiler::ValueId v) {
    return std::find(r.params.begin(), r.params.end(), v) != r.params.end();
  };
  std::vector<compiler::ValueId> defined;
  for (const Instruction& i : r.body) {
    if (i.op != Opcode::add && i.op != Opcode::subtract) return false;
    if (i.operands.size() != 2 || i.results.size() != 1) return false;
    for (auto v : i.operands)
      if (!is_param(v)) return false;
    defined.push_back(i.results[0]);
  }
  for (auto v : r.returns)
    if (!is_param(v) && std::find(defined.begin(), defined.end(), v) == defined.end()) return false;
  return true;
}

bool acts_on_parts(const Instruction& inst) {
  switch (inst.op) {
    case Opcode::add: case Opcode::subtract: case Opcode::negate:
    case Opcode::reshape: case Opcode::transpose: case Opcode::broadcast:
    case Opcode::broadcast_in_dim: case Opcode::slice: case Opcode::dynamic_slice:
    case Opcode::real_dynamic_slice: case Opcode::dynamic_update_slice:
    case Opcode::concatenate: case Opcode::reverse: case Opcode::pad:
    case Opcode::gather: case Opcode::dynamic_gather: case Opcode::select:
    case Opcode::all_gather: case Opcode::all_to_all: case Opcode::collective_permute:
    case Opcode::collective_broadcast: case Opcode::dynamic_broadcast_in_dim:
    case Opcode::dynamic_reshape: case Opcode::dynamic_pad:
      return true;
    case Opcode::reduce: case Opcode::scatter: case Opcode::reduce_window:
    case Opcode::all_reduce: case Opcode::reduce_scatter:
      return !inst.regions.empty() && linear_body(inst.regions[0]);
    default:
      return false;
  }
}

// Ops whose own lowering is right on the stored pairs: they carry values
// without reading them as numbers, or read c128 themselves.
bool carries_pairs(Opcode op) {
  switch (op) {
    case Opcode::while_: case Opcode::case_: case Opcode::if_: case Opcode::call:
    case Opcode::optimization_barrier: case Opcode::tuple: case Opcode::get_tuple_element:
    case Opcode::composite: case Opcode::custom_call: case Opcode::sdy_sharding_constraint:
    case Opcode::sdy_reshard: case Opcode::fft: case Opcode::cholesky:
    case Opcode::triangular_solve: case Opcode::sort:
      return true;
    default:
      return false;
  }
}

// The op's own lowering in the parts view.
Kernel parts_kernel(LowerCtx& ctx, Lowering own) {
  LowerCtx parts(ctx);
  parts.set_parts_view();
  return own(parts);
}

// Runs `k` on the real parts, then on the imaginary parts; c128 results are
// the pairs, other results come from the real run.
Kernel on_parts(LowerCtx& ctx, Lowering own) {
  Kernel k = parts_kernel(ctx, own);
  std::vector<bool> in_c, out_c;
  for (size_t i = 0; i < ctx.num_in(); ++i) in_c.push_back(is_c128(ctx.in(i)));
  for (size_t i = 0; i < ctx.num_out(); ++i) out_c.push_back(is_c128(ctx.out(i)));
  return [k, in_c, out_c](RunState& st, const Arrays& in) {
    Arrays re_in, im_in;
    for (size_t i = 0; i < in.size(); ++i) {
      re_in.push_back(in_c[i] ? re_of(in[i]) : in[i]);
      im_in.push_back(in_c[i] ? im_of(in[i]) : in[i]);
    }
    Arrays re = k(st, re_in), im = k(st, im_in);
    Arrays out;
    for (size_t i = 0; i < re.size(); ++i) out.push_back(out_c[i] ? pack(re[i], im[i]) : re[i]);
    return out;
  };
}

// dot_general and convolution: bilinear, so four runs of the real op:
// (a + bi)(c + di) = (ac - bd) + (ad + bc)i. A real operand has no
// imaginary part. A complex64 operand (preferred_element_type complex128)
// takes part with its parts widened to f64, exactly.
Kernel bilinear(LowerCtx& ctx, Lowering own) {
  LowerCtx parts(ctx);
  parts.set_parts_view(/*c64_parts=*/true);
  Kernel k = own(parts);
  auto complex_in = [&](size_t i) {
    return is_c128(ctx.in(i)) || ctx.in(i).dtype == DType::kC64;
  };
  const bool lc = complex_in(0), rc = complex_in(1);
  return [k, lc, rc](RunState& st, const Arrays& in) {
    Arrays rest(in.begin() + 2, in.end());
    auto run = [&](const mx::array& x, const mx::array& y) {
      Arrays args{x, y};
      args.insert(args.end(), rest.begin(), rest.end());
      return k(st, args)[0];
    };
    auto part = [](const mx::array& x, int p) {
      if (x.dtype() != mx::complex64) return c128_part(x, p);
      return mx::astype(p == 0 ? mx::real(x) : mx::imag(x), mx::float64);
    };
    mx::array ar = lc ? part(in[0], 0) : in[0], br = rc ? part(in[1], 0) : in[1];
    mx::array re = run(ar, br);
    if (lc && rc) {
      mx::array ai = part(in[0], 1), bi = part(in[1], 1);
      return Arrays{pack(mx::subtract(re, run(ai, bi)), mx::add(run(ar, bi), run(ai, br)))};
    }
    return Arrays{pack(re, lc ? run(part(in[0], 1), br) : run(ar, part(in[1], 1)))};
  };
}

template <typename F>
Kernel unary_c(F f) {
  return [f](RunState&, const Arrays& in) { return Arrays{pack(f(split(in[0])))}; };
}
template <typename F>
Kernel binary_c(F f) {
  return [f](RunState&, const Arrays& in) {
    return Arrays{pack(f(split(in[0]), split(in[1])))};
  };
}

Kernel lower_constant_c(LowerCtx& ctx) {
  const compiler::DenseData& d = ctx.inst().attr_dense("value");
  const compiler::TensorType& t = ctx.out(0);
  if (d.type.dtype != t.dtype) ctx.fail("value type ", d.type.str(), " differs from result ", t.str());
  mx::array value = [&] {
    if (d.splat) {
      if (d.bytes.size() != 16) ctx.fail("splat holds ", d.bytes.size(), " bytes for ", t.str());
      mx::array one = array_from_host(d.bytes.data(), {t.dtype, {}}, nullptr);
      return mx::broadcast_to(one, storage_shape(t));
    }
    if (static_cast<int64_t>(d.bytes.size()) != t.byte_size())
      ctx.fail("holds ", d.bytes.size(), " bytes for ", t.str());
    return array_from_host(d.bytes.data(), t, nullptr);
  }();
  return [value](RunState&, const Arrays&) { return Arrays{value}; };
}

Kernel lower_convert_c(LowerCtx& ctx, Lowering own) {
  DType from = ctx.in(0).dtype, to = ctx.out(0).dtype;
  if (from == DType::kC128 && to == DType::kC128)
    return [](RunState&, const Arrays& in) { return in; };
  if (from == DType::kC128 && to == DType::kC64)
    return [](RunState&, const Arrays& in) {
      return Arrays{make_complex(re_of(in[0]), im_of(in[0]))};
    };
  if (from == DType::kC64)
    return [](RunState&, const Arrays& in) {
      return Arrays{pack(mx::astype(mx::real(in[0]), mx::float64),
                         mx::astype(mx::imag(in[0]), mx::float64))};
    };
  // c128 -> real: the real part converted as an f64 (XLA drops the
  // imaginary part); real -> c128: the value as an f64, imaginary part 0.
  Kernel k = parts_kernel(ctx, own);
  if (from == DType::kC128)
    return [k](RunState& st, const Arrays& in) { return k(st, {re_of(in[0])}); };
  return [k](RunState& st, const Arrays& in) {
    mx::array re = k(st, in)[0];
    return Arrays{pack(re, mx::zeros_like(re))};
  };
}

// A bitcast sees the stored bytes: the pairs are complex<double>'s layout.
Kernel lower_bitcast_c(LowerCtx& ctx) {
  mx::Dtype dt = to_mlx(ctx.out(0).dtype);
  mx::Shape shape = storage_shape(ctx.out(0));
  if (compiler::dtype_bits(ctx.in(0).dtype) == 4 || compiler::dtype_bits(ctx.out(0).dtype) == 4 ||
      ctx.in(0).dtype == DType::kPred || ctx.out(0).dtype == DType::kPred)
    ctx.fail("bitcasts between ", ctx.in(0).str(), " and ", ctx.out(0).str(), " are not supported");
  return [dt, shape](RunState&, const Arrays& in) {
    mx::array x = mx::contiguous(in[0]);
    if (x.ndim() == 0) x = mx::reshape(x, {1});
    return Arrays{mx::reshape(mx::view(x, dt), shape)};
  };
}

Kernel lower_compare_c(LowerCtx& ctx) {
  const std::string& dir = ctx.inst().attr_str("comparison_direction");
  if (dir != "EQ" && dir != "NE") ctx.fail("complex operands support only EQ and NE, got ", dir);
  const bool eq = dir == "EQ";
  return [eq](RunState&, const Arrays& in) {
    Cx a = split(in[0]), b = split(in[1]);
    if (eq) return Arrays{mx::logical_and(mx::equal(a.re, b.re), mx::equal(a.im, b.im))};
    return Arrays{mx::logical_or(mx::not_equal(a.re, b.re), mx::not_equal(a.im, b.im))};
  };
}

}  // namespace

mx::array c128_part(const mx::array& pairs, int k) {
  mx::Shape start(pairs.ndim(), 0), stop = pairs.shape();
  start.back() = k;
  stop.back() = k + 1;
  return mx::squeeze(mx::slice(pairs, start, stop), -1);
}

Kernel lower_complex128(LowerCtx& ctx, Lowering own) {
  const Instruction& inst = ctx.inst();
  if (carries_pairs(inst.op)) return own(ctx);
  if (acts_on_parts(inst)) return on_parts(ctx, own);
  switch (inst.op) {
    case Opcode::dot_general: case Opcode::dot: case Opcode::convolution:
      return bilinear(ctx, own);
    // Other reduction and scatter bodies (a product, ...) run on the pairs;
    // windows only as cumulative scans (ops/reduce_window.cc).
    case Opcode::reduce: case Opcode::reduce_window: case Opcode::scatter: return own(ctx);
    case Opcode::constant: return lower_constant_c(ctx);
    case Opcode::iota: {
      // The f64 iota as the real parts, zero imaginary parts.
      Kernel k = parts_kernel(ctx, own);
      return [k](RunState& st, const Arrays& in) {
        mx::array re = k(st, in)[0];
        return Arrays{pack(re, mx::zeros_like(re))};
      };
    }
    case Opcode::convert: return lower_convert_c(ctx, own);
    case Opcode::bitcast_convert: return lower_bitcast_c(ctx);
    case Opcode::compare: return lower_compare_c(ctx);
    case Opcode::real:
      if (is_c128(ctx.in(0))) return unary([](const mx::array& x) { return re_of(x); });
      break;
    case Opcode::imag:
      if (is_c128(ctx.in(0))) return unary([](const mx::array& x) { return im_of(x); });
      break;
    case Opcode::complex:
      return binary([](const mx::array& re, const mx::array& im) { return pack(re, im); });
    case Opcode::abs:
      return unary([](const mx::array& x) { return abs_c(split(x)); });
    case Opcode::multiply: return binary_c(mul_c);
    case Opcode::divide: return binary_c(div_c);
    case Opcode::power: return binary_c(pow_c);
    case Opcode::sign: return unary_c(sign_c);
    case Opcode::exponential: return unary_c(exp_c);
    case Opcode::exponential_minus_one: return unary_c(expm1_c);
    case Opcode::log: return unary_c(log_c);
    case Opcode::log_plus_one: return unary_c(log1p_c);
    case Opcode::sqrt: return unary_c(sqrt_c);
    case Opcode::rsqrt:
      return unary_c([](const Cx& z) {
        // 1 / sqrt(z); an infinite z gives the signed zero of 1 / inf
        // (XLA: rsqrt(inf i) = 0 - 0i).
        Cx r = sqrt_c(z);
        Cx q = div_c(one_c(z.re), r);
        mx::array inf = mx::logical_or(mx::isinf(z.re), mx::isinf(z.im));
        return Cx{mx::where(inf, copysign_r(c(0.0), r.re), q.re),
                  mx::where(inf, copysign_r(c(0.0), mx::negative(r.im)), q.im)};
      });
    case Opcode::sine: return unary_c(sin_c);
    case Opcode::cosine: return unary_c(cos_c);
    case Opcode::tan: return unary_c(tan_c);
    case Opcode::tanh: return unary_c(tanh_c);
    case Opcode::logistic:
      return unary_c([](const Cx& z) {
        Cx e = exp_c({mx::negative(z.re), mx::negative(z.im)});
        return div_c(one_c(z.re), add_c(one_c(z.re), e));
      });
    default:
      break;
  }
  ctx.fail("complex128 (c128) is not supported for this op on MLX (no complex<f64> dtype; "
           "pjrtx computes c128 in f64 pairs for arithmetic, transcendental, linalg, FFT, "
           "data-movement and add/replace reduction and scatter ops); use complex64");
}

}  // namespace pjrtx::backend
