// pjrtx_eigh and pjrtx_svd of complex128 (stored as f64 pairs, complex128.h):
// mx::linalg's LAPACK calls take complex64 at most, so these are our own
// host routines in std::complex<double>, by Jacobi rotations:
// - eigh: cyclic two-sided Jacobi on the Hermitian matrix built from the
//   `lower` (or upper) triangle, the diagonal's imaginary parts ignored as
//   LAPACK's heevd does; eigenvalues ascending, eigenvectors as columns;
// - svd: one-sided Jacobi (Hestenes) on the columns of A (of A^H when A is
//   wide); singular values descending; U's columns for zero singular values
//   and the rest of a full U completed to an orthonormal basis.
// Jacobi is slower than LAPACK's divide and conquer (O(n^3) per sweep, a
// handful of sweeps) but as accurate or more (it has high relative accuracy),
// which is what x64 users ask of complex128. A rotation is skipped once its
// off-diagonal entry is below eps times the geometric mean of the diagonal
// entries it couples; a sweep with no rotation ends the iteration. A matrix
// holding NaN or inf gets NaN outputs (XLA's CPU rule for LAPACK's info).
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <numeric>
#include <vector>

#include "backend/mlx/dtype.h"
#include "backend/mlx/host/host_kernel.h"
#include "backend/mlx/ops/common.h"
#include "backend/mlx/ops/linalg_eig_util.h"

namespace pjrtx::backend::ops {

namespace {

using cd = std::complex<double>;
constexpr double kEps = std::numeric_limits<double>::epsilon();
constexpr double kTiny = std::numeric_limits<double>::min();
constexpr int kMaxSweeps = 80;
const cd kNaN{std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};

bool all_finite(const cd* a, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(a[i].real()) || !std::isfinite(a[i].imag())) return false;
  return true;
}

// Eigen-decomposition of the n x n Hermitian h (row-major, overwritten):
// w ascending, v (row-major) with the eigenvectors as columns. Each
// eigenvalue is the Rayleigh quotient v^H H v of its computed vector (not
// the rotated diagonal, which carries the rounding of every rotation), so
// the residual H v - w v is as small as the vector allows.
void jacobi_eigh(std::vector<cd>& h, int n, double* w, cd* v) {
  const std::vector<cd> h0 = h;
  auto A = [&](int r, int c) -> cd& { return h[static_cast<size_t>(r) * n + c]; };
  std::vector<cd> q(static_cast<size_t>(n) * n, cd(0));
  auto Q = [&](int r, int c) -> cd& { return q[static_cast<size_t>(r) * n + c]; };
  for (int i = 0; i < n; ++i) Q(i, i) = 1;
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    bool rotated = false;
    for (int p = 0; p < n; ++p)
      for (int k = p + 1; k < n; ++k) {
        cd apq = A(p, k);
        double g = std::abs(apq);
        double app = A(p, p).real(), aqq = A(k, k).real();
        if (g < kTiny || g <= 0.5 * kEps * std::sqrt(std::abs(app) * std::abs(aqq))) {
          continue;
        }
        rotated = true;
        // u makes the coupling real; then the real rotation of Jacobi's
        // method (t = tan theta, the smaller root) zeroes it.
        cd u = apq / g;
        double tau = (aqq - app) / (2 * g);
        double t = (tau >= 0 ? 1.0 : -1.0) / (std::abs(tau) + std::sqrt(1 + tau * tau));
        double c = 1 / std::sqrt(1 + t * t), s = c * t;
        // G = [[c, s], [-s conj(u), c conj(u)]]; A <- G^H A G, Q <- Q G.
        cd g00 = c, g01 = s, g10 = -s * std::conj(u), g11 = c * std::conj(u);
        for (int r = 0; r < n; ++r) {
          cd x = A(r, p), y = A(r, k);
          A(r, p) = x * g00 + y * g10;
          A(r, k) = x * g01 + y * g11;
          cd qx = Q(r, p), qy = Q(r, k);
          Q(r, p) = qx * g00 + qy * g10;
          Q(r, k) = qx * g01 + qy * g11;
        }
        for (int col = 0; col < n; ++col) {
          cd x = A(p, col), y = A(k, col);
          A(p, col) = std::conj(g00) * x + std::conj(g10) * y;
          A(k, col) = std::conj(g01) * x + std::conj(g11) * y;
        }
        A(p, k) = A(k, p) = 0;
        A(p, p) = A(p, p).real();
        A(k, k) = A(k, k).real();
      }
    if (!rotated) break;
  }
  std::vector<double> rq(n, 0.0);
  std::vector<cd> hv(n);
  for (int j = 0; j < n; ++j) {
    for (int r = 0; r < n; ++r) {
      cd acc = 0;
      for (int c = 0; c < n; ++c) acc += h0[static_cast<size_t>(r) * n + c] * Q(c, j);
      hv[r] = acc;
    }
    double num = 0, den = 0;
    for (int r = 0; r < n; ++r) {
      num += (std::conj(Q(r, j)) * hv[r]).real();
      den += std::norm(Q(r, j));
    }
    rq[j] = num / den;
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return rq[a] < rq[b]; });
  for (int j = 0; j < n; ++j) {
    w[j] = rq[order[j]];
    for (int r = 0; r < n; ++r) v[static_cast<size_t>(r) * n + j] = Q(r, order[j]);
  }
}

// Completes the orthonormal columns `have` of the m x m row-major u: each
// other column becomes the standard basis vector with the largest part
// orthogonal to the columns so far, that part normalized (Gram-Schmidt,
// twice). The largest part has norm^2 >= (free columns) / m, so it is never
// a rounding residue.
void complete_basis(std::vector<cd>& u, int m, const std::vector<bool>& have) {
  auto U = [&](int r, int c) -> cd& { return u[static_cast<size_t>(r) * m + c]; };
  std::vector<bool> done = have;
  std::vector<cd> x(m), best(m);
  for (int j = 0; j < m; ++j) {
    if (done[j]) continue;
    double best_norm = -1;
    for (int e = 0; e < m; ++e) {
      std::fill(x.begin(), x.end(), cd(0));
      x[e] = 1;
      for (int pass = 0; pass < 2; ++pass)
        for (int c = 0; c < m; ++c) {
          if (!done[c]) continue;
          cd d = 0;
          for (int r = 0; r < m; ++r) d += std::conj(U(r, c)) * x[r];
          for (int r = 0; r < m; ++r) x[r] -= d * U(r, c);
        }
      double nrm = 0;
      for (const cd& v : x) nrm += std::norm(v);
      if (nrm > best_norm) {
        best_norm = nrm;
        best = x;
      }
    }
    const double nrm = std::sqrt(best_norm);
    for (int r = 0; r < m; ++r) U(r, j) = best[r] / nrm;
    done[j] = true;
  }
}

// SVD of the m x n row-major a with m >= n: s (n, descending), u (m x m
// when full, else m x n, row-major), v (n x n, row-major, columns the right
// singular vectors; not V^H).
void jacobi_svd_tall(const cd* a, int m, int n, bool full, double* s, std::vector<cd>& u,
                     std::vector<cd>& v) {
  // Columns stored contiguously: col[j * m + r] = a[r][j].
  std::vector<cd> col(static_cast<size_t>(m) * n);
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < n; ++j) col[static_cast<size_t>(j) * m + r] = a[static_cast<size_t>(r) * n + j];
  v.assign(static_cast<size_t>(n) * n, cd(0));
  std::vector<cd> vc(static_cast<size_t>(n) * n, cd(0));  // V's columns, contiguous
  for (int j = 0; j < n; ++j) vc[static_cast<size_t>(j) * n + j] = 1;
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    bool rotated = false;
    for (int p = 0; p < n; ++p)
      for (int k = p + 1; k < n; ++k) {
        cd* xp = &col[static_cast<size_t>(p) * m];
        cd* xq = &col[static_cast<size_t>(k) * m];
        double alpha = 0, beta = 0;
        cd gamma = 0;
        for (int r = 0; r < m; ++r) {
          alpha += std::norm(xp[r]);
          beta += std::norm(xq[r]);
          gamma += std::conj(xp[r]) * xq[r];
        }
        double g = std::abs(gamma);
        if (g < kTiny || g <= kEps * std::sqrt(alpha * beta)) continue;
        rotated = true;
        cd cu = std::conj(gamma / g);
        double zeta = (beta - alpha) / (2 * g);
        double t = (zeta >= 0 ? 1.0 : -1.0) / (std::abs(zeta) + std::sqrt(1 + zeta * zeta));
        double c = 1 / std::sqrt(1 + t * t), sn = c * t;
        for (int r = 0; r < m; ++r) {
          cd x = xp[r], y = xq[r] * cu;
          xp[r] = c * x - sn * y;
          xq[r] = sn * x + c * y;
        }
        cd* vp = &vc[static_cast<size_t>(p) * n];
        cd* vq = &vc[static_cast<size_t>(k) * n];
        for (int r = 0; r < n; ++r) {
          cd x = vp[r], y = vq[r] * cu;
          vp[r] = c * x - sn * y;
          vq[r] = sn * x + c * y;
        }
      }
    if (!rotated) break;
  }
  std::vector<double> norms(n);
  for (int j = 0; j < n; ++j) {
    double acc = 0;
    for (int r = 0; r < m; ++r) acc += std::norm(col[static_cast<size_t>(j) * m + r]);
    norms[j] = std::sqrt(acc);
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return norms[x] > norms[y]; });
  const int uc = full ? m : n;
  u.assign(static_cast<size_t>(m) * uc, cd(0));
  std::vector<bool> have(uc, false);
  const double cutoff = norms.empty() ? 0 : norms[order[0]] * kEps * std::max(m, n);
  for (int j = 0; j < n; ++j) {
    int o = order[j];
    s[j] = norms[o];
    for (int r = 0; r < n; ++r) v[static_cast<size_t>(r) * n + j] = vc[static_cast<size_t>(o) * n + r];
    if (norms[o] > cutoff && norms[o] > 0) {
      for (int r = 0; r < m; ++r) u[static_cast<size_t>(r) * uc + j] = col[static_cast<size_t>(o) * m + r] / norms[o];
      have[j] = true;
    }
  }
  if (uc == m) {
    complete_basis(u, m, have);
  } else if (std::find(have.begin(), have.end(), false) != have.end()) {
    // Economic U with zero singular values: completed within an m x m
    // basis whose columns past n are left out (zero, marked done).
    std::vector<cd> big(static_cast<size_t>(m) * m, cd(0));
    std::vector<bool> done(m, true);
    for (int j = 0; j < n; ++j) {
      done[j] = have[j];
      for (int r = 0; r < m; ++r) big[static_cast<size_t>(r) * m + j] = u[static_cast<size_t>(r) * uc + j];
    }
    complete_basis(big, m, done);
    for (int j = 0; j < n; ++j)
      for (int r = 0; r < m; ++r) u[static_cast<size_t>(r) * uc + j] = big[static_cast<size_t>(r) * m + j];
  }
}

}  // namespace

Kernel lower_eigh_c128(LowerCtx& ctx, bool lower) {
  const int n = static_cast<int>(ctx.in(0).shape.back());
  std::vector<mx::Shape> shapes;
  std::vector<mx::Dtype> dtypes;
  for (size_t i = 0; i < ctx.num_out(); ++i) {
    shapes.push_back(storage_shape(ctx.out(i)));
    dtypes.push_back(to_mlx(ctx.out(i).dtype));
  }
  HostFn fn = [n, lower](const Arrays& in, Arrays& out) {
    const size_t nn = static_cast<size_t>(n) * n;
    // f64 pairs: in[0] holds 2 doubles per element.
    const size_t batch = in[0].size() / (2 * nn);
    const cd* a = in[0].data<cd>();
    cd* v = out[0].data<cd>();
    double* w = out[1].data<double>();
    std::vector<cd> h(nn);
    for (size_t b = 0; b < batch; ++b) {
      const cd* x = a + b * nn;
      bool ok = true;
      for (int r = 0; r < n; ++r)
        for (int c = 0; c < n; ++c) {
          bool mine = lower ? c <= r : c >= r;
          if (!mine) continue;
          cd e = x[static_cast<size_t>(r) * n + c];
          ok = ok && std::isfinite(e.real()) && std::isfinite(e.imag());
          if (r == c) e = e.real();
          h[static_cast<size_t>(r) * n + c] = e;
          h[static_cast<size_t>(c) * n + r] = std::conj(e);
        }
      if (!ok) {
        std::fill(v + b * nn, v + (b + 1) * nn, kNaN);
        std::fill(w + b * n, w + (b + 1) * n, kNaN.real());
        continue;
      }
      jacobi_eigh(h, n, w + b * n, v + b * nn);
    }
  };
  return [shapes, dtypes, fn](RunState&, const Arrays& in) {
    return host_kernel("pjrtx_eigh", in, shapes, dtypes, fn);
  };
}

Kernel lower_svd_c128(LowerCtx& ctx, bool full, bool uv) {
  const auto& shape = ctx.in(0).shape;
  const int m = static_cast<int>(shape[shape.size() - 2]), n = static_cast<int>(shape.back());
  const int k = std::min(m, n);
  std::vector<mx::Shape> shapes;
  std::vector<mx::Dtype> dtypes;
  for (size_t i = 0; i < ctx.num_out(); ++i) {
    shapes.push_back(storage_shape(ctx.out(i)));
    dtypes.push_back(to_mlx(ctx.out(i).dtype));
  }
  HostFn fn = [m, n, k, full, uv](const Arrays& in, Arrays& out) {
    const size_t mn = static_cast<size_t>(m) * n;
    const size_t batch = in[0].size() / (2 * mn);
    const cd* a = in[0].data<cd>();
    double* s = out[0].data<double>();
    const bool tall = m >= n;
    const int rows = tall ? m : n, cols = tall ? n : m;  // the matrix Jacobi runs on
    const int uc = full ? m : k, vr = full ? n : k;       // u: m x uc, vt: vr x n
    std::vector<cd> t(mn), u, v;
    for (size_t b = 0; b < batch; ++b) {
      const cd* x = a + b * mn;
      double* sb = s + b * k;
      cd* ub = uv ? out[1].data<cd>() + b * static_cast<size_t>(m) * uc : nullptr;
      cd* vb = uv ? out[2].data<cd>() + b * static_cast<size_t>(vr) * n : nullptr;
      if (!all_finite(x, mn)) {
        std::fill(sb, sb + k, kNaN.real());
        if (uv) {
          std::fill(ub, ub + static_cast<size_t>(m) * uc, kNaN);
          std::fill(vb, vb + static_cast<size_t>(vr) * n, kNaN);
        }
        continue;
      }
      // Wide A: A^H = U' S V'^H, so A = V' S U'^H.
      if (tall) {
        std::copy(x, x + mn, t.begin());
      } else {
        for (int r = 0; r < m; ++r)
          for (int c = 0; c < n; ++c) t[static_cast<size_t>(c) * m + r] = std::conj(x[static_cast<size_t>(r) * n + c]);
      }
      const bool full_left = uv && full;
      jacobi_svd_tall(t.data(), rows, cols, full_left, sb, u, v);
      if (!uv) continue;
      const int ucols = full_left ? rows : cols;  // columns of the tall U'
      if (tall) {
        // u = U (m x uc), vt = V^H (k x n, or n x n; k == n here).
        for (int r = 0; r < m; ++r)
          for (int c = 0; c < uc; ++c) ub[static_cast<size_t>(r) * uc + c] = u[static_cast<size_t>(r) * ucols + c];
        for (int r = 0; r < vr; ++r)
          for (int c = 0; c < n; ++c) vb[static_cast<size_t>(r) * n + c] = std::conj(v[static_cast<size_t>(c) * cols + r]);
      } else {
        // u = V' (m x m, k == m), vt = U'^H (vr x n).
        for (int r = 0; r < m; ++r)
          for (int c = 0; c < uc; ++c) ub[static_cast<size_t>(r) * uc + c] = v[static_cast<size_t>(r) * cols + c];
        for (int r = 0; r < vr; ++r)
          for (int c = 0; c < n; ++c) vb[static_cast<size_t>(r) * n + c] = std::conj(u[static_cast<size_t>(c) * ucols + r]);
      }
    }
  };
  return [shapes, dtypes, fn](RunState&, const Arrays& in) {
    return host_kernel("pjrtx_svd", in, shapes, dtypes, fn);
  };
}

}  // namespace pjrtx::backend::ops
