// custom_call @mhlo.erf, @mhlo.acos, @mhlo.asin, @mhlo.acosh, @mhlo.atanh,
// @mhlo.sinh and @mhlo.cosh: how jaxlib 0.8.0 to 0.9.0 serialize these CHLO
// ops (a custom call with no decomposition; 0.9.1 and later send a
// stablehlo.composite whose decomposition runs as ordinary ops). Without
// them `lax.erf` (jax.nn.gelu, truncated_normal, Flax's initializers) and
// jnp.arccos/arcsin/arccosh/arctanh/sinh/cosh fail at compile time there.
//
// Each runs element by element as a host kernel over the C++ library's
// functions, which are within an ulp or two and follow C99's special values
// (NaN outside the domain, atanh(+-1) = +-inf, the signs of zeros, the
// complex branch cuts of Annex G, as NumPy and XLA's decompositions do):
// - f32 and f64 call the function of their own type; f16 and bf16 widen to
//   f32 and round once, as XLA's decompositions do;
// - c64 and c128 (stored as f64 pairs, see complex128.h) call the
//   std::complex overloads for acos, asin, acosh and atanh; erf takes real
//   operands only, as CHLO's does;
// - complex sinh and cosh are XLA's own formula, the decomposition jaxlib
//   0.9.1 and later send (and pjrtx runs there): exp(z + ln 1/2) -+
//   exp(ln 1/2 - z), each exp e^a (cos b + i sin b) with b = 0 kept exact.
//   C99's csinh/ccosh differ where a part is infinite (ccosh(-inf + inf i)
//   is inf + nan i there, nan + nan i in XLA and in JAX's accuracy tests),
//   and one JAX program should not change answers with the JAX release.
// Why not MLX's kernels: its erf is accurate only in absolute terms
// (erf(1e-8) is 0 in f32 and f64, mlx 0.32), and one host form serves every
// type, c128 included. On a GPU device the kernel runs on the CPU stream.
#include <cmath>
#include <complex>
#include <string>
#include <type_traits>

#include "backend/mlx/dtype.h"
#include "backend/mlx/host/host_kernel.h"
#include "backend/mlx/ops/common.h"

namespace pjrtx::backend {

namespace {

using namespace ops;

enum class Fn { kErf, kAcos, kAsin, kAcosh, kAtanh, kSinh, kCosh };

template <typename R>
std::complex<R> exp_as_xla(R a, R b) {
  const R ea = std::exp(a);
  if (b == R(0)) return {ea, b};
  return {ea * std::cos(b), ea * std::sin(b)};
}

// sinh (Sign = -1) and cosh (Sign = +1) of a complex number, as XLA's
// decomposition computes them.
template <int Sign, typename R>
std::complex<R> hyperbolic_as_xla(std::complex<R> z) {
  const R ln_half = std::log(R(0.5));
  // Complex addition of ln 1/2 + 0i: the zero imaginary part turns a -0
  // into +0, as XLA's add and subtract do.
  const std::complex<R> up = exp_as_xla(z.real() + ln_half, z.imag() + R(0));
  const std::complex<R> down = exp_as_xla(ln_half - z.real(), R(0) - z.imag());
  return Sign > 0 ? up + down : up - down;
}

template <typename T>
T apply(Fn f, T x) {
  if constexpr (!std::is_floating_point_v<T>) {
    if (f == Fn::kSinh) return hyperbolic_as_xla<-1>(x);
    if (f == Fn::kCosh) return hyperbolic_as_xla<1>(x);
  }
  switch (f) {
    case Fn::kAcos: return std::acos(x);
    case Fn::kAsin: return std::asin(x);
    case Fn::kAcosh: return std::acosh(x);
    case Fn::kAtanh: return std::atanh(x);
    case Fn::kSinh: return std::sinh(x);
    case Fn::kCosh: return std::cosh(x);
    case Fn::kErf:
      if constexpr (std::is_floating_point_v<T>) return std::erf(x);
      break;
  }
  return x;  // unreachable: lower_mhlo_chlo rejects complex erf
}

template <typename T>
void map_elements(Fn f, const Arrays& in, Arrays& out) {
  const size_t n = in[0].nbytes() / sizeof(T);
  const T* x = in[0].data<T>();
  T* y = out[0].data<T>();
  for (size_t i = 0; i < n; ++i) y[i] = apply(f, x[i]);
}

Kernel lower_mhlo_chlo(LowerCtx& ctx, Fn f) {
  const std::string target = ctx.inst().attr_str("call_target_name", "");
  if (ctx.num_in() != 1 || ctx.num_out() != 1)
    ctx.fail("custom_call @", target, " expects one operand and one result, got ", ctx.num_in(),
             " -> ", ctx.num_out());
  const auto& x = ctx.in(0);
  const DType t = x.dtype;
  const bool cplx = compiler::is_complex(t);
  if (!compiler::is_float(t) && !cplx)
    ctx.fail("custom_call @", target, " expects a floating-point or complex operand, got ", x.str());
  if (cplx && f == Fn::kErf)
    ctx.fail("custom_call @", target, " takes a real operand, got ", x.str());
  if (ctx.out(0) != x)
    ctx.fail("custom_call @", target, " of ", x.str(), " gives ", ctx.out(0).str());
  if (x.num_elements() == 0)
    return [](RunState&, const Arrays& in) { return Arrays{in[0]}; };
  return [f, t, target](RunState&, const Arrays& in) {
    // f16 and bf16 in f32, rounded once at the end.
    const bool narrow = t == DType::kF16 || t == DType::kBF16;
    mx::array arg = narrow ? mx::astype(in[0], mx::float32) : in[0];
    Arrays out = host_kernel(target, {arg}, {arg.shape()}, {arg.dtype()},
                             [f, t](const Arrays& ins, Arrays& outs) {
                               switch (t) {
                                 case DType::kF64: return map_elements<double>(f, ins, outs);
                                 case DType::kC64:
                                   return map_elements<std::complex<float>>(f, ins, outs);
                                 case DType::kC128:
                                   return map_elements<std::complex<double>>(f, ins, outs);
                                 default: return map_elements<float>(f, ins, outs);
                               }
                             });
    if (narrow) out[0] = mx::astype(out[0], in[0].dtype());
    return out;
  };
}

template <Fn F>
Kernel lower(LowerCtx& ctx) {
  return lower_mhlo_chlo(ctx, F);
}

}  // namespace

void register_mhlo_chlo_ops(Registry& r) {
  r.add_target("mhlo.erf", lower<Fn::kErf>);
  r.add_target("mhlo.acos", lower<Fn::kAcos>);
  r.add_target("mhlo.asin", lower<Fn::kAsin>);
  r.add_target("mhlo.acosh", lower<Fn::kAcosh>);
  r.add_target("mhlo.atanh", lower<Fn::kAtanh>);
  r.add_target("mhlo.sinh", lower<Fn::kSinh>);
  r.add_target("mhlo.cosh", lower<Fn::kCosh>);
}

}  // namespace pjrtx::backend
