// pjrtx_schur [t, z?]: A = Z T Z^H with Z unitary, as a host kernel (MLX
// has no Schur decomposition). Our own routine: Householder reduction to
// Hessenberg form (linalg_householder.h), Z accumulated from its
// reflectors, then QR iterations on the Hessenberg matrix:
// - real input: Francis double-shift steps (3x3 reflectors chasing the
//   bulge), so T stays real; each 2x2 diagonal block left at the end is
//   standardised as LAPACK gees leaves it: a real-eigenvalue pair is split
//   into a triangular block, a complex pair gets equal diagonal entries and
//   off-diagonal entries of opposite signs;
// - complex input: single-shift steps with Wilkinson's shift (the
//   eigenvalue of the trailing 2x2 closer to its last entry), by unitary
//   2x2 rotations.
// A subdiagonal entry deflates when it is below eps * (|h[k-1][k-1]| +
// |h[k][k]|) in double precision. The order of eigenvalues on T's diagonal
// is the order they converge in, which need not be LAPACK's: only the
// decomposition's invariants are defined, as for any Schur form.
// Every 10th iteration without deflation uses an exceptional shift; after
// 30 * n iterations, or for non-finite input, the matrix's outputs are NaN
// (LAPACK's info > 0 becomes NaN in XLA's CPU rule).
//
// That routine is the fallback: where SciPy's LAPACK table resolves
// (host/lapack.h, PJRTX_LAPACK=scipy, the default), pjrtx_schur calls the
// gees that XLA:CPU calls (ops/linalg_lapack.cc: sort = 'N', the workspace
// gees asks for), so T and Z are XLA:CPU's bit for bit, in the input's own
// precision.
#include <cmath>
#include <complex>
#include <limits>
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

constexpr double kEps = std::numeric_limits<double>::epsilon();

// Z = H_0 H_1 ... H_{n-2} from hessenberg()'s packed reflectors; then the
// part of m below the subdiagonal is cleared.
template <typename W>
Mat<W> accumulate_q(Mat<W>& m, const std::vector<W>& taus) {
  int n = m.n;
  Mat<W> z{n, std::vector<W>(static_cast<size_t>(n) * n, W(0))};
  for (int k = 0; k < n; ++k) z(k, k) = W(1);
  std::vector<W> v(n);
  for (int i = n - 2; i >= 0; --i) {  // Z = H_i Z, innermost first
    v[i + 1] = W(1);
    for (int r = i + 2; r < n; ++r) v[r] = m(r, i);
    for (int c = 0; c < n; ++c) {
      W s = 0;
      for (int r = i + 1; r < n; ++r) s += conj_(v[r]) * z(r, c);
      s *= taus[i];
      for (int r = i + 1; r < n; ++r) z(r, c) -= v[r] * s;
    }
  }
  for (int r = 0; r < n; ++r)
    for (int c = 0; c + 1 < r; ++c) m(r, c) = W(0);
  return z;
}

// Index l of the active block ending at hi: the last k <= hi with a
// negligible h[k][k-1] (set to zero), or 0.
template <typename W>
int deflate(Mat<W>& h, int hi) {
  for (int k = hi; k > 0; --k) {
    double scale = std::abs(h(k - 1, k - 1)) + std::abs(h(k, k));
    if (std::abs(h(k, k - 1)) <= kEps * scale || std::abs(h(k, k - 1)) < 1e-300) {
      h(k, k - 1) = W(0);
      return k;
    }
  }
  return 0;
}

// Rows p, p+1 of h (columns c0..n-1) become U^H rows; columns p, p+1 of h
// (rows 0..r1) and of z become columns times U. U = [[u00, u01], [u10, u11]].
template <typename W>
void apply2(Mat<W>& h, Mat<W>& z, int p, int c0, int r1, W u00, W u01, W u10, W u11) {
  int n = h.n;
  for (int c = c0; c < n; ++c) {
    W x = h(p, c), y = h(p + 1, c);
    h(p, c) = conj_(u00) * x + conj_(u10) * y;
    h(p + 1, c) = conj_(u01) * x + conj_(u11) * y;
  }
  auto cols = [&](Mat<W>& m, int rows) {
    for (int r = 0; r < rows; ++r) {
      W x = m(r, p), y = m(r, p + 1);
      m(r, p) = x * u00 + y * u10;
      m(r, p + 1) = x * u01 + y * u11;
    }
  };
  cols(h, r1 + 1);
  cols(z, n);
}

// ---- complex: single shift ------------------------------------------------------

bool schur_complex(Mat<cd>& h, Mat<cd>& z) {
  int n = h.n, hi = n - 1, iter = 0, total = 0;
  while (hi > 0) {
    int l = deflate(h, hi);
    if (l == hi) {
      --hi;
      iter = 0;
      continue;
    }
    if (++total > 30 * n) return false;
    ++iter;
    cd mu;
    if (iter % 10 == 0) {
      mu = h(hi, hi) + cd(std::abs(h(hi, hi - 1)), 0);  // exceptional shift
    } else {
      cd a = h(hi - 1, hi - 1), b = h(hi - 1, hi), c = h(hi, hi - 1), d = h(hi, hi);
      cd half = 0.5 * (a - d), disc = std::sqrt(half * half + b * c);
      // d - (b c) / (half ± disc): the root nearer d, without cancellation.
      cd den = std::abs(half + disc) >= std::abs(half - disc) ? half + disc : half - disc;
      mu = den == cd(0) ? d : d - b * c / den;
    }
    cd x = h(l, l) - mu, y = h(l + 1, l);
    for (int k = l; k < hi; ++k) {
      double nrm = std::hypot(std::abs(x), std::abs(y));
      if (nrm > 0) {
        // U's first column is [x; y] / nrm, so U^H [x; y] = [nrm; 0].
        cd u00 = x / nrm, u10 = y / nrm;
        apply2<cd>(h, z, k, k == l ? l : k - 1, std::min(k + 2, hi), u00, -std::conj(u10), u10,
                   std::conj(u00));
      }
      if (k > l) h(k + 1, k - 1) = 0;
      if (k + 1 < hi) {
        x = h(k + 1, k);
        y = h(k + 2, k);
      }
    }
  }
  return true;
}

// ---- real: Francis double shift -------------------------------------------------

// A 2x2 block at (p, p) in standard form (see the file comment).
void standardize_2x2(Mat<double>& h, Mat<double>& z, int p) {
  double a = h(p, p), b = h(p, p + 1), c = h(p + 1, p), d = h(p + 1, p + 1);
  if (c == 0) return;
  double half = 0.5 * (a - d), disc = half * half + b * c;
  if (disc >= 0) {
    // Real pair: rotate the eigenvector of lam onto e_1, leaving lam at
    // (p, p) and a zero below it.
    double lam = 0.5 * (a + d) + (half >= 0 ? 1 : -1) * std::sqrt(disc);
    double x0 = lam - d, x1 = c;
    double nrm = std::hypot(x0, x1);
    double cs = x0 / nrm, sn = x1 / nrm;
    apply2<double>(h, z, p, p, p + 1, cs, -sn, sn, cs);
    h(p + 1, p) = 0;
    return;
  }
  if (a == d && (b < 0) != (c < 0)) return;
  // Complex pair: rotation R(theta) with (R^T B R)[0][0] = [1][1], i.e.
  // cos(2 theta) (a - d) + sin(2 theta) (b + c) = 0.
  double theta = 0.5 * std::atan2(-(a - d), b + c);
  double cs = std::cos(theta), sn = std::sin(theta);
  apply2<double>(h, z, p, p, p + 1, cs, -sn, sn, cs);
  double mid = 0.5 * (h(p, p) + h(p + 1, p + 1));
  h(p, p) = h(p + 1, p + 1) = mid;
}

// Householder reflector P = I - beta v v^T (v[0] = 1) with P [x; y; z] = [*; 0; 0].
int reflector3(double* v, int len, double& beta) {
  double alpha = v[0], s = 0;
  for (int i = 1; i < len; ++i) s += v[i] * v[i];
  if (s == 0) {
    beta = 0;
    return 0;
  }
  double nrm = std::sqrt(alpha * alpha + s);
  double u0 = alpha + (alpha >= 0 ? nrm : -nrm);
  for (int i = 1; i < len; ++i) v[i] /= u0;
  v[0] = 1;
  beta = 2.0 / (1.0 + s / (u0 * u0));
  return 1;
}

bool schur_real(Mat<double>& h, Mat<double>& z) {
  int n = h.n, hi = n - 1, iter = 0, total = 0;
  while (hi >= 0) {
    int l = deflate(h, hi);
    if (l == hi) {
      --hi;
      iter = 0;
      continue;
    }
    if (l == hi - 1) {
      standardize_2x2(h, z, l);
      hi -= 2;
      iter = 0;
      continue;
    }
    if (++total > 30 * n) return false;
    ++iter;
    // Shifts: the eigenvalues of the trailing 2x2 (sum s, product t), or
    // exceptional ones every 10th iteration.
    double s, t;
    if (iter % 10 == 0) {
      double e = std::abs(h(hi, hi - 1)) + std::abs(h(hi - 1, hi - 2));
      s = 1.5 * e + h(hi, hi);
      t = e * e;
    } else {
      s = h(hi - 1, hi - 1) + h(hi, hi);
      t = h(hi - 1, hi - 1) * h(hi, hi) - h(hi - 1, hi) * h(hi, hi - 1);
    }
    // First column of (H - mu1)(H - mu2) restricted to rows l..l+2.
    double v[3];
    v[0] = h(l, l) * h(l, l) + h(l, l + 1) * h(l + 1, l) - s * h(l, l) + t;
    v[1] = h(l + 1, l) * (h(l, l) + h(l + 1, l + 1) - s);
    v[2] = h(l + 1, l) * h(l + 2, l + 1);
    for (int k = l; k <= hi - 1; ++k) {
      int len = std::min(3, hi - k + 1);
      double beta;
      if (reflector3(v, len, beta)) {
        // Rows k..k+len-1 from the left, columns from max(l, k-1).
        for (int c = std::max(l, k - 1); c < n; ++c) {
          double sdot = 0;
          for (int i = 0; i < len; ++i) sdot += v[i] * h(k + i, c);
          sdot *= beta;
          for (int i = 0; i < len; ++i) h(k + i, c) -= sdot * v[i];
        }
        int rows = std::min(k + 3, hi);
        auto right = [&](Mat<double>& m, int last) {
          for (int r = 0; r <= last; ++r) {
            double sdot = 0;
            for (int i = 0; i < len; ++i) sdot += m(r, k + i) * v[i];
            sdot *= beta;
            for (int i = 0; i < len; ++i) m(r, k + i) -= sdot * v[i];
          }
        };
        right(h, rows);
        right(z, n - 1);
      }
      if (k > l) {
        h(k + 1, k - 1) = 0;
        if (k + 2 <= hi) h(k + 2, k - 1) = 0;
      }
      if (k + 1 <= hi - 1) {
        v[0] = h(k + 1, k);
        v[1] = h(k + 2, k);
        v[2] = k + 3 <= hi ? h(k + 3, k) : 0;
      }
    }
  }
  return true;
}

template <typename T>
void run_schur(const Arrays& in, Arrays& out, int n, bool vectors) {
  using W = Wide<T>;
  const T* a = in[0].data<T>();
  T* t_out = out[0].data<T>();
  T* z_out = vectors ? out[1].data<T>() : nullptr;
  size_t nn = static_cast<size_t>(n) * n, batch = in[0].nbytes() / sizeof(T) / nn;
  for (size_t b = 0; b < batch; ++b) {
    Mat<W> m{n, std::vector<W>(a + b * nn, a + (b + 1) * nn)};
    bool ok = true;
    for (const W& x : m.a) ok = ok && std::isfinite(std::abs(x));
    Mat<W> z{n, {}};
    if (ok) {
      std::vector<W> taus(std::max(n - 1, 0));
      hessenberg(m, taus);
      z = accumulate_q(m, taus);
      if constexpr (std::is_same_v<W, cd>) ok = schur_complex(m, z);
      else ok = schur_real(m, z);
    }
    T nan = static_cast<T>(std::numeric_limits<float>::quiet_NaN());
    if constexpr (std::is_same_v<W, cd>) nan = T(nan.real(), nan.real());
    for (size_t k = 0; k < nn; ++k) {
      t_out[b * nn + k] = ok ? narrow<T>(m.a[k]) : nan;
      if (vectors) z_out[b * nn + k] = ok ? narrow<T>(z.a[k]) : nan;
    }
  }
}

// ---- eig in double precision ----------------------------------------------------

// pjrtx_eig of f64 or c128: the Schur form A = Z T Z^H above (for f64 the
// real one, its 2x2 blocks then triangularized); the eigenvalues are T's
// diagonal, in the order the iteration leaves them (eig
// and eigvals agree: the same iteration runs either way). Eigenvectors of T
// by substitution, as LAPACK trevc: right ones solve (T - w_k) y = 0 with
// y_k = 1 upwards, left ones (T - w_k)^H y = 0 downwards; a pivot smaller
// than eps * |T| is replaced by that (trevc's smin), so defective matrices
// give finite vectors. Mapped through Z, each vector is scaled as geev
// does: unit 2-norm, its largest component real and positive.
void geev_scale(std::vector<cd>& x) {
  double nrm = 0;
  size_t top = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    nrm += std::norm(x[i]);
    if (std::abs(x[i]) > std::abs(x[top])) top = i;
  }
  nrm = std::sqrt(nrm);
  if (nrm == 0) return;
  cd phase = std::abs(x[top]) > 0 ? std::conj(x[top]) / std::abs(x[top]) : cd(1);
  for (auto& e : x) e = e * phase / nrm;
  x[top] = cd(x[top].real(), 0.0);
}

template <typename T>
void run_eig_wide(const Arrays& in, Arrays& out, int n, bool left, bool right) {
  const T* a = in[0].data<T>();
  size_t nn = static_cast<size_t>(n) * n, batch = in[0].nbytes() / sizeof(T) / nn;
  cd* w_out = out[0].data<cd>();
  cd* vl_out = left ? out[1].data<cd>() : nullptr;
  cd* vr_out = right ? out[1 + left].data<cd>() : nullptr;
  const cd nan(std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN());
  std::vector<cd> y(n), x(n);
  for (size_t b = 0; b < batch; ++b) {
    Mat<cd> m{n, std::vector<cd>(nn)};
    bool ok = true;
    for (size_t k = 0; k < nn; ++k) {
      m.a[k] = cd(a[b * nn + k]);
      ok = ok && std::isfinite(m.a[k].real()) && std::isfinite(m.a[k].imag());
    }
    Mat<cd> z{n, {}};
    if (ok && std::is_same_v<T, double>) {
      // Real input: the real Schur form, as dgeev, so real eigenvalues come
      // out exactly real and complex ones in exact conjugate pairs (the
      // positive imaginary part first); each standardized 2x2 block
      // [[a, b], [c, a]] is then made triangular by the unitary whose first
      // column is its eigenvector (b, i sqrt(-bc)) for a + i sqrt(-bc).
      Mat<double> r{n, std::vector<double>(nn)};
      for (size_t k = 0; k < nn; ++k) r.a[k] = m.a[k].real();
      std::vector<double> taus(std::max(n - 1, 0));
      hessenberg(r, taus);
      Mat<double> rz = accumulate_q(r, taus);
      ok = schur_real(r, rz);
      z = Mat<cd>{n, std::vector<cd>(rz.a.begin(), rz.a.end())};
      m = Mat<cd>{n, std::vector<cd>(r.a.begin(), r.a.end())};
      for (int p = 0; ok && p + 1 < n; ++p) {
        if (r(p + 1, p) == 0) continue;
        const double bb = r(p, p + 1), cc = r(p + 1, p), aa = r(p, p);
        const double wi = std::sqrt(std::abs(bb)) * std::sqrt(std::abs(cc));
        cd u0(bb, 0), u1(0, wi);
        const double nu = std::sqrt(std::norm(u0) + std::norm(u1));
        u0 /= nu;
        u1 /= nu;
        apply2<cd>(m, z, p, p, p + 1, u0, -std::conj(u1), u1, std::conj(u0));
        m(p + 1, p) = 0;
        m(p, p) = cd(aa, wi);
        m(p + 1, p + 1) = cd(aa, -wi);
        ++p;
      }
    } else if (ok) {
      std::vector<cd> taus(std::max(n - 1, 0));
      hessenberg(m, taus);
      z = accumulate_q(m, taus);
      ok = schur_complex(m, z);
    }
    if (!ok) {
      std::fill(w_out + b * n, w_out + (b + 1) * n, nan);
      if (left) std::fill(vl_out + b * nn, vl_out + (b + 1) * nn, nan);
      if (right) std::fill(vr_out + b * nn, vr_out + (b + 1) * nn, nan);
      continue;
    }
    double tnorm = 0;
    for (int r = 0; r < n; ++r)
      for (int c = r; c < n; ++c) tnorm = std::max(tnorm, std::abs(m(r, c)));
    const double smin = std::max(kEps * tnorm, std::numeric_limits<double>::min());
    auto pivot = [&](cd d) { return std::abs(d) < smin ? cd(smin) : d; };
    for (int k = 0; k < n; ++k) w_out[b * n + k] = m(k, k);
    for (int k = 0; k < n && right; ++k) {
      const cd wk = m(k, k);
      std::fill(y.begin(), y.end(), cd(0));
      y[k] = 1;
      for (int i = k - 1; i >= 0; --i) {
        cd s = m(i, k);
        for (int j = i + 1; j < k; ++j) s += m(i, j) * y[j];
        y[i] = -s / pivot(m(i, i) - wk);
      }
      for (int r = 0; r < n; ++r) {
        cd s = 0;
        for (int j = 0; j <= k; ++j) s += z(r, j) * y[j];
        x[r] = s;
      }
      geev_scale(x);
      for (int r = 0; r < n; ++r) vr_out[b * nn + static_cast<size_t>(r) * n + k] = x[r];
    }
    for (int k = 0; k < n && left; ++k) {
      const cd wk = std::conj(m(k, k));
      std::fill(y.begin(), y.end(), cd(0));
      y[k] = 1;
      for (int i = k + 1; i < n; ++i) {
        cd s = 0;
        for (int j = k; j < i; ++j) s += std::conj(m(j, i)) * y[j];
        y[i] = -s / pivot(std::conj(m(i, i)) - wk);
      }
      for (int r = 0; r < n; ++r) {
        cd s = 0;
        for (int j = k; j < n; ++j) s += z(r, j) * y[j];
        x[r] = s;
      }
      geev_scale(x);
      for (int r = 0; r < n; ++r) vl_out[b * nn + static_cast<size_t>(r) * n + k] = x[r];
    }
  }
}

}  // namespace

Kernel ops::lower_eig_wide(LowerCtx& ctx, bool left, bool right) {
  int n = static_cast<int>(ctx.in(0).shape.back());
  compiler::DType t = ctx.in(0).dtype;
  OutTypes o = out_types(ctx);
  for (size_t i = 0; i < ctx.num_out(); ++i)
    if (ctx.out(i).dtype != compiler::DType::kC128)
      ctx.fail("pjrtx_eig of ", ctx.in(0).str(), " must give c128 results, not ", ctx.out(i).str());
  return [n, t, o, left, right](RunState&, const Arrays& in) {
    return host_kernel("pjrtx_eig", in, o.shapes, o.dtypes,
                       [n, t, left, right](const Arrays& ins, Arrays& outs) {
                         if (t == compiler::DType::kF64) run_eig_wide<double>(ins, outs, n, left, right);
                         else run_eig_wide<std::complex<double>>(ins, outs, n, left, right);
                       });
  };
}

namespace {

Kernel lower_schur(LowerCtx& ctx) {
  check_linalg_types(ctx, "schur");
  bool vectors = config_flag(ctx, "vectors");
  if (ctx.num_out() != (vectors ? 2u : 1u))
    ctx.fail("pjrtx_schur with vectors=", vectors, " has ", ctx.num_out(), " results");
  if (ctx.in(0).num_elements() == 0) return empty_results(ctx);
  int n = static_cast<int>(ctx.in(0).shape.back());
  compiler::DType t = ctx.in(0).dtype;
  OutTypes o = out_types(ctx);
  if (use_lapack()) return lower_schur_lapack(ctx, vectors);
  return [n, t, o, vectors](RunState&, const Arrays& in) {
    return host_kernel("pjrtx_schur", in, o.shapes, o.dtypes,
                       [n, t, vectors](const Arrays& ins, Arrays& outs) {
                         if (t == compiler::DType::kF32) run_schur<float>(ins, outs, n, vectors);
                         else if (t == compiler::DType::kF64) run_schur<double>(ins, outs, n, vectors);
                         else if (t == compiler::DType::kC128)
                           run_schur<std::complex<double>>(ins, outs, n, vectors);
                         else run_schur<std::complex<float>>(ins, outs, n, vectors);
                       });
  };
}

}  // namespace

void register_linalg_schur_ops(Registry& r) { r.add_target("pjrtx_schur", lower_schur); }

}  // namespace pjrtx::backend
