// Householder reductions that MLX has no op for, as host kernels (our own
// unblocked routines, one matrix at a time, on MLX's CPU stream):
//   pjrtx_hessenberg   [a, taus]          LAPACK gehrd's packed result
//   pjrtx_tridiagonal  [a, d, e, taus]    LAPACK sytrd/hetrd's packed result
// The packing follows LAPACK's documented contract, because JAX's callers
// (jax.scipy.linalg.hessenberg, householder_product) and the upstream tests
// (against scipy's gehrd/sytrd) read it element by element:
// - reflector H = I - tau v v^H, made as LAPACK's larfg makes it:
//   H^H [alpha; x] = [beta; 0], beta = -sign(Re alpha) ||[alpha; x]|| real,
//   tau = (beta - alpha) / beta, v = [1; x / (alpha - beta)]; tau = 0 when
//   x = 0 and alpha is real;
// - hessenberg: Q = H_0 ... H_{n-2}, v_i[i+1] = 1 and v_i[i+2:] stored in
//   a[i+2:, i], H = Q^H A Q in the upper triangle and first subdiagonal;
// - tridiagonal (lower): Q = H_0 ... H_{n-2}, v_i[i+2:] in a[i+2:, i];
//   (upper): Q = H_{n-2} ... H_0, v_i[i] = 1 and v_i[:i] in a[:i, i+1];
//   d/e the diagonal/off-diagonal of T = Q^H A Q, the other triangle of a
//   left as it came (LAPACK never reads or writes it).
// Arithmetic runs in double (complex<double>): one rounding at the end.
// Non-finite input gives non-finite output; nothing here can loop forever.
#include <cmath>
#include <complex>
#include <vector>

#include "backend/mlx/dtype.h"
#include "backend/mlx/host/host_kernel.h"
#include "backend/mlx/ops/common.h"
#include "backend/mlx/ops/linalg_eig_util.h"
#include "backend/mlx/ops/linalg_householder.h"

namespace pjrtx::backend {

namespace {

using namespace ops;
using namespace ops::householder;

// sytd2/hetd2 on one triangle. `at(r, c)` with r >= c (lower) or r <= c
// (upper) is the stored element; the Hermitian matrix it stands for has a
// real diagonal.
template <typename W>
void tridiagonal(Mat<W>& m, bool lower, std::vector<double>& d, std::vector<double>& e,
                 std::vector<W>& taus) {
  int n = m.n;
  auto herm = [&](int r, int c) -> W {  // element (r, c) of the Hermitian matrix
    if (r == c) return W(re(m(r, r)));
    bool stored = lower ? r > c : r < c;
    return stored ? m(r, c) : conj_(m(c, r));
  };
  std::vector<W> v(n), w(n);
  for (int k = 0; k < n; ++k) m(k, k) = W(re(m(k, k)));
  for (int step = 0; step + 1 < n; ++step) {
    // lower: i = step, reflector on column i below i+1, block i+1..n-1.
    // upper: i = n-2-step, reflector on column i+1 above i, block 0..i.
    int i = lower ? step : n - 2 - step;
    int lo = lower ? i + 1 : 0, hi = lower ? n : i + 1;  // block rows [lo, hi)
    int pivot = lower ? i + 1 : i;                        // v[pivot] = 1
    int col = lower ? i : i + 1;
    std::vector<W*> x;
    for (int r = lo; r < hi; ++r)
      if (r != pivot) x.push_back(&m(r, col));
    W beta = m(pivot, col);
    W tau = make_reflector(beta, x);
    if (tau != W(0)) {
      for (int r = lo; r < hi; ++r) v[r] = r == pivot ? W(1) : m(r, col);
      // w = tau A v; alpha = -tau/2 (w^H v); w += alpha v; A -= v w^H + w v^H.
      W dot = 0;
      for (int r = lo; r < hi; ++r) {
        W s = 0;
        for (int c = lo; c < hi; ++c) s += herm(r, c) * v[c];
        w[r] = tau * s;
      }
      for (int r = lo; r < hi; ++r) dot += conj_(w[r]) * v[r];
      W alpha = W(-0.5) * tau * dot;
      for (int r = lo; r < hi; ++r) w[r] += alpha * v[r];
      for (int r = lo; r < hi; ++r)
        for (int c = lo; c < hi; ++c) {
          bool stored = lower ? r >= c : r <= c;
          if (!stored) continue;
          W upd = v[r] * conj_(w[c]) + w[r] * conj_(v[c]);
          m(r, c) = r == c ? W(re(m(r, c)) - re(upd)) : m(r, c) - upd;
        }
    }
    m(pivot, col) = W(re(beta));
    e[i] = re(beta);
    taus[i] = tau;
  }
  for (int k = 0; k < n; ++k) d[k] = re(m(k, k));
}

template <typename T>
void run_hessenberg(const Arrays& in, Arrays& out, int n) {
  using W = Wide<T>;
  const T* a = in[0].data<T>();
  T* h = out[0].data<T>();
  T* taus = out[1].data<T>();
  size_t nn = static_cast<size_t>(n) * n, batch = in[0].nbytes() / sizeof(T) / nn;
  for (size_t b = 0; b < batch; ++b) {
    Mat<W> m{n, std::vector<W>(a + b * nn, a + (b + 1) * nn)};
    std::vector<W> t(std::max(n - 1, 0));
    hessenberg(m, t);
    for (size_t k = 0; k < nn; ++k) h[b * nn + k] = narrow<T>(m.a[k]);
    for (int k = 0; k + 1 < n; ++k) taus[b * (n - 1) + k] = narrow<T>(t[k]);
  }
}

template <typename T, typename R>
void run_tridiagonal(const Arrays& in, Arrays& out, int n, bool lower) {
  using W = Wide<T>;
  const T* a = in[0].data<T>();
  T* c = out[0].data<T>();
  R* d = out[1].data<R>();
  R* e = out[2].data<R>();
  T* taus = out[3].data<T>();
  size_t nn = static_cast<size_t>(n) * n, batch = in[0].nbytes() / sizeof(T) / nn;
  for (size_t b = 0; b < batch; ++b) {
    Mat<W> m{n, std::vector<W>(a + b * nn, a + (b + 1) * nn)};
    std::vector<double> dd(n), ee(n - 1);
    std::vector<W> t(n - 1);
    tridiagonal(m, lower, dd, ee, t);
    // The triangle LAPACK does not reference comes back as it went in.
    for (int r = 0; r < n; ++r)
      for (int col = 0; col < n; ++col) {
        bool ref = lower ? r >= col : r <= col;
        size_t k = b * nn + static_cast<size_t>(r) * n + col;
        c[k] = ref ? narrow<T>(m(r, col)) : a[k];
      }
    for (int k = 0; k < n; ++k) d[b * n + k] = static_cast<R>(dd[k]);
    for (int k = 0; k + 1 < n; ++k) {
      e[b * (n - 1) + k] = static_cast<R>(ee[k]);
      taus[b * (n - 1) + k] = narrow<T>(t[k]);
    }
  }
}

Kernel lower_hessenberg(LowerCtx& ctx) {
  check_linalg_types(ctx, "hessenberg");
  if (ctx.num_out() != 2) ctx.fail("pjrtx_hessenberg has 2 results, not ", ctx.num_out());
  if (ctx.in(0).num_elements() == 0) return empty_results(ctx);
  int n = static_cast<int>(ctx.in(0).shape.back());
  compiler::DType t = ctx.in(0).dtype;
  OutTypes o = out_types(ctx);
  return [n, t, o](RunState&, const Arrays& in) {
    return host_kernel("pjrtx_hessenberg", in, o.shapes, o.dtypes,
                       [n, t](const Arrays& ins, Arrays& outs) {
                         if (t == compiler::DType::kF32) run_hessenberg<float>(ins, outs, n);
                         else if (t == compiler::DType::kF64) run_hessenberg<double>(ins, outs, n);
                         else if (t == compiler::DType::kC128)
                           run_hessenberg<std::complex<double>>(ins, outs, n);
                         else run_hessenberg<std::complex<float>>(ins, outs, n);
                       });
  };
}

Kernel lower_tridiagonal(LowerCtx& ctx) {
  check_linalg_types(ctx, "tridiagonal");
  bool lower = config_flag(ctx, "lower");
  if (ctx.num_out() != 4) ctx.fail("pjrtx_tridiagonal has 4 results, not ", ctx.num_out());
  if (ctx.in(0).num_elements() == 0) return empty_results(ctx);
  int n = static_cast<int>(ctx.in(0).shape.back());
  compiler::DType t = ctx.in(0).dtype;
  OutTypes o = out_types(ctx);
  return [n, t, o, lower](RunState&, const Arrays& in) {
    return host_kernel("pjrtx_tridiagonal", in, o.shapes, o.dtypes,
                       [n, t, lower](const Arrays& ins, Arrays& outs) {
                         if (t == compiler::DType::kF32)
                           run_tridiagonal<float, float>(ins, outs, n, lower);
                         else if (t == compiler::DType::kF64)
                           run_tridiagonal<double, double>(ins, outs, n, lower);
                         else if (t == compiler::DType::kC128)
                           run_tridiagonal<std::complex<double>, double>(ins, outs, n, lower);
                         else
                           run_tridiagonal<std::complex<float>, float>(ins, outs, n, lower);
                       });
  };
}

}  // namespace

void register_linalg_reduce_ops(Registry& r) {
  r.add_target("pjrtx_hessenberg", lower_hessenberg);
  r.add_target("pjrtx_tridiagonal", lower_tridiagonal);
}

}  // namespace pjrtx::backend
