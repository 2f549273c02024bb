// Dense factorizations and triangular solves on one row-major matrix in host
// memory, for the host kernels of ops/linalg_factor.cc and, as text, for the
// compiled host loops (loops/host_loop.cc builds this file after the loop
// prelude, so a cholesky inside a loop computes exactly what the op computes
// outside one). T is float, double, std::complex<float> or
// std::complex<double> (c128, stored as f64 pairs). Standard headers only.
//
// They follow LAPACK's algorithms and conventions (what XLA:CPU calls through
// JAX's CPU lowerings), unblocked: potrf (Cholesky), trsm (substitution),
// geqrf/orgqr (Householder QR, LAPACK's reflector convention: H = I - tau v
// v^H, v[0] = 1), geqp3 (QR with column pivoting, laqp2's norm downdating),
// getrf (partial pivoting, the first largest |re| + |im|).
// Inner loops run along rows, so every O(n^3) loop reads memory in order.
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace pjrtx::backend::linalg {

template <typename T>
struct RealOf { using type = T; };
template <typename T>
struct RealOf<std::complex<T>> { using type = T; };
template <typename T>
using real_t = typename RealOf<T>::type;

template <typename T>
constexpr bool kIsComplex = !std::is_same_v<T, real_t<T>>;

template <typename T>
T conj(T x) {
  if constexpr (kIsComplex<T>) return std::conj(x);
  else return x;
}
template <typename T>
real_t<T> re(T x) {
  if constexpr (kIsComplex<T>) return x.real();
  else return x;
}
template <typename T>
real_t<T> im(T x) {
  if constexpr (kIsComplex<T>) return x.imag();
  else return real_t<T>(0);
}
// |re| + |im|: BLAS i?amax's measure, so pivots match LAPACK's.
template <typename T>
real_t<T> abs1(T x) {
  return std::abs(re(x)) + std::abs(im(x));
}
template <typename T>
T nan_value() {
  const real_t<T> q = std::numeric_limits<real_t<T>>::quiet_NaN();
  if constexpr (kIsComplex<T>) return T(q, q);
  else return q;
}

// sqrt(sum |x_i|^2) over n elements `stride` apart, scaled by the largest
// |component| so that squares neither overflow nor underflow (LAPACK's
// nrm2 does the same); NaN in gives NaN out.
template <typename T>
real_t<T> norm2(const T* x, int64_t n, int64_t stride) {
  using R = real_t<T>;
  R scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    R a = std::max(std::abs(re(x[i * stride])), std::abs(im(x[i * stride])));
    if (std::isnan(a)) return a;
    scale = std::max(scale, a);
  }
  if (scale == 0 || std::isinf(scale)) return scale;
  R sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    R r = re(x[i * stride]) / scale, j = im(x[i * stride]) / scale;
    sum += r * r + j * j;
  }
  return scale * std::sqrt(sum);
}

// ---- Cholesky (potrf, lower) ----------------------------------------------------------

// l = L with a = L L^H, reading only the lower triangle of a (and the real
// part of its diagonal, as potrf does); L's strict upper triangle is zero.
// Returns false (l then holds garbage) when a pivot is <= 0: a is not
// (numerically) positive definite. A NaN pivot passes and spreads NaN, as
// in the potrf that XLA:CPU calls (OpenBLAS's tests ajj <= 0 only;
// reference LAPACK's also fails on NaN).
template <typename T>
bool cholesky_lower(const T* a, T* l, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T* li = l + i * n;
    for (int64_t j = 0; j < i; ++j) {
      const T* lj = l + j * n;
      T s = a[i * n + j];
      for (int64_t k = 0; k < j; ++k) s -= li[k] * conj(lj[k]);
      li[j] = s / re(lj[j]);
    }
    real_t<T> d = re(a[i * n + i]);
    for (int64_t k = 0; k < i; ++k) d -= re(li[k] * conj(li[k]));
    if (d <= 0) return false;
    li[i] = T(std::sqrt(d));
    for (int64_t j = i + 1; j < n; ++j) li[j] = T(0);
  }
  return true;
}

// stablehlo.cholesky of one n x n matrix: out = L with a = L L^H (`lower`,
// reading a's lower triangle) or U with a = U^H U (reading its upper one);
// the other triangle is zero. A matrix that is not positive definite gives
// all NaN, as JAX's CPU lowering makes of potrf's info > 0. `scratch` holds
// n * n elements (used when !lower).
template <typename T>
void cholesky(const T* a, T* out, int64_t n, bool lower, T* scratch) {
  if (!lower) {
    // a = U^H U: U^H is the lower factor of the matrix whose lower triangle
    // is the conjugate transpose of a's upper one.
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j <= i; ++j) scratch[i * n + j] = conj(a[j * n + i]);
    a = scratch;
  }
  if (!cholesky_lower(a, out, n)) {
    std::fill(out, out + n * n, nan_value<T>());
  } else if (!lower) {
    for (int64_t i = 0; i < n; ++i) {
      out[i * n + i] = conj(out[i * n + i]);
      for (int64_t j = 0; j < i; ++j) {
        out[j * n + i] = conj(out[i * n + j]);
        out[i * n + j] = T(0);
      }
    }
  }
}

// ---- Triangular solves (trsm) ------------------------------------------------------------

// m is n x n, read only in its `lower` (or upper) triangle, its diagonal
// taken as 1 when `unit`. Solves m x = b for x (b is n x cols, overwritten)
// when `left`, else x m = b (b is rows x n). Plain substitution that
// divides by the diagonal: a zero pivot gives inf/NaN, as BLAS trsm does.
template <typename T>
void trsm(const T* m, T* b, int64_t n, int64_t other, bool left, bool lower, bool unit) {
  if (left) {
    const int64_t cols = other;
    // Row i of x is (b_i - sum_k m[i][k] x_k) / m[i][i], k over the solved
    // rows: forward for lower, backward for upper.
    for (int64_t step = 0; step < n; ++step) {
      const int64_t i = lower ? step : n - 1 - step;
      T* bi = b + i * cols;
      const int64_t k0 = lower ? 0 : i + 1, k1 = lower ? i : n;
      for (int64_t k = k0; k < k1; ++k) {
        const T mik = m[i * n + k];
        const T* bk = b + k * cols;
        for (int64_t c = 0; c < cols; ++c) bi[c] -= mik * bk[c];
      }
      if (!unit) {
        const T d = m[i * n + i];
        for (int64_t c = 0; c < cols; ++c) bi[c] /= d;
      }
    }
  } else {
    // Each row r of x solves x_r m = b_r: column j of the product is
    // sum_k x_r[k] m[k][j], so an upper m resolves x_r[0] first and a
    // lower m x_r[n-1] first; a resolved x_r[j] then leaves b_r along row j
    // of m.
    for (int64_t r = 0; r < other; ++r) {
      T* br = b + r * n;
      for (int64_t step = 0; step < n; ++step) {
        const int64_t j = lower ? n - 1 - step : step;
        if (!unit) br[j] /= m[j * n + j];
        const T x = br[j];
        const T* mj = m + j * n;
        if (lower) {
          for (int64_t c = 0; c < j; ++c) br[c] -= x * mj[c];
        } else {
          for (int64_t c = j + 1; c < n; ++c) br[c] -= x * mj[c];
        }
      }
    }
  }
}

// ---- Householder QR (geqrf, orgqr) -------------------------------------------------------

// |(a, b, c)| without overflow (LAPACK's lapy3).
template <typename R>
R norm2_3(R a, R b, R c) {
  const R s = std::max({std::abs(a), std::abs(b), std::abs(c)});
  if (s == 0) return s;  // inf or NaN components give NaN below, as lapy3 does
  const R x = a / s, y = b / s, z = c / s;
  return s * std::sqrt(x * x + y * y + z * z);
}

// One elementary reflector from alpha = x[0] and the rest of x (LAPACK's
// larfg): on return x[0] = beta (real), x[1..] = v[1..] and the result is
// tau, with H^H [alpha; rest] = [beta; 0]. tau = 0 (H = I) when the rest is
// zero and alpha is real.
template <typename T>
T make_reflector(T* x, int64_t len, int64_t stride) {
  using R = real_t<T>;
  const T alpha = x[0];
  const R xnorm = len > 1 ? norm2(x + stride, len - 1, stride) : R(0);
  if (xnorm == 0 && im(alpha) == 0) return T(0);
  const R ar = re(alpha), ai = im(alpha);
  // beta = -sign(re alpha) * |(alpha, xnorm)|, Fortran's SIGN: the sign
  // bit decides, so -0 counts as negative.
  const R mag = norm2_3(ar, ai, xnorm);
  const R beta = std::signbit(ar) ? mag : -mag;
  T tau;
  if constexpr (kIsComplex<T>) tau = T((beta - ar) / beta, -ai / beta);
  else tau = (beta - ar) / beta;
  const T scale = T(1) / (alpha - T(beta));
  for (int64_t i = 1; i < len; ++i) x[i * stride] *= scale;
  x[0] = T(beta);
  return tau;
}

// a (rows x cols, row-major) -= t * v (w), w = v^H a, v = column `vcol` of
// `vbase` from row `r0` on with v[r0] = 1: applies I - t v v^H from the left
// to rows r0.. and columns c0.. of a. w is scratch of cols entries.
template <typename T>
void apply_reflector(const T* vbase, int64_t vcol, int64_t vstride, T t, T* a, int64_t rows,
                     int64_t cols, int64_t r0, int64_t c0, std::vector<T>& w) {
  if (t == T(0) || c0 >= cols) return;
  auto v = [&](int64_t i) { return i == r0 ? T(1) : vbase[i * vstride + vcol]; };
  for (int64_t c = c0; c < cols; ++c) w[c] = T(0);
  for (int64_t i = r0; i < rows; ++i) {
    const T vi = conj(v(i));
    const T* ai = a + i * cols;
    for (int64_t c = c0; c < cols; ++c) w[c] += vi * ai[c];
  }
  for (int64_t i = r0; i < rows; ++i) {
    const T f = t * v(i);
    T* ai = a + i * cols;
    for (int64_t c = c0; c < cols; ++c) ai[c] -= f * w[c];
  }
}

// In place on a (m x n): R on and above the diagonal, reflector i's v below
// the diagonal of column i; tau[min(m, n)].
template <typename T>
void geqrf(T* a, T* tau, int64_t m, int64_t n, std::vector<T>& w) {
  w.resize(n);
  const int64_t k = std::min(m, n);
  for (int64_t j = 0; j < k; ++j) {
    tau[j] = make_reflector(a + j * n + j, m - j, n);
    // geqr2 applies H^H = I - conj(tau) v v^H to the trailing columns.
    apply_reflector(a, j, n, conj(tau[j]), a, m, n, j, j + 1, w);
  }
}

// q (m x n, m >= n) = the first n columns of H_0 H_1 ... H_{k-1}, the
// reflectors read from below the diagonal of a (m x n) and tau[k] (orgqr).
// q may be a.
template <typename T>
void orgqr(const T* a, const T* tau, T* q, int64_t m, int64_t n, int64_t k, std::vector<T>& w) {
  w.resize(n);
  if (q != a)
    for (int64_t i = 0; i < m * n; ++i) q[i] = a[i];
  // Columns k.. start as the identity's; then the reflectors apply
  // backwards, each to the columns right of its own, whose column then
  // becomes H_i e_i.
  for (int64_t j = k; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) q[i * n + j] = T(i == j ? 1 : 0);
  for (int64_t i = k - 1; i >= 0; --i) {
    apply_reflector(q, i, n, tau[i], q, m, n, i, i + 1, w);
    for (int64_t r = i + 1; r < m; ++r) q[r * n + i] *= -tau[i];
    q[i * n + i] = T(1) - tau[i];
    for (int64_t r = 0; r < i; ++r) q[r * n + i] = T(0);
  }
}

// ---- QR with column pivoting (geqp3) -----------------------------------------------------

// In place on a (m x n) as geqrf leaves it, for a with its columns
// permuted: on entry jpvt[j] != 0 marks column j as fixed (moved to the
// front, in order, and factored without pivoting); every other step takes
// the remaining column of largest norm (the first one on ties, as idamax).
// On exit jpvt[j] is the 1-based index of the original column now at j,
// tau[min(m, n)]. The column norms are downdated after each step and
// recomputed when cancellation has eaten half the digits (LAPACK laqp2:
// downdating loses accuracy once the norm fell below sqrt(eps) times the
// norm last computed directly).
template <typename T>
void geqp3(T* a, int32_t* jpvt, T* tau, int64_t m, int64_t n, std::vector<T>& w) {
  using R = real_t<T>;
  w.resize(n);
  const int64_t k = std::min(m, n);
  auto swap_cols = [&](int64_t i, int64_t j) {
    for (int64_t r = 0; r < m; ++r) std::swap(a[r * n + i], a[r * n + j]);
  };
  int64_t nfixed = 0;
  for (int64_t j = 0; j < n; ++j) {
    if (jpvt[j] != 0) {
      if (j != nfixed) {
        swap_cols(j, nfixed);
        jpvt[j] = jpvt[nfixed];
        jpvt[nfixed] = static_cast<int32_t>(j + 1);
      } else {
        jpvt[j] = static_cast<int32_t>(j + 1);
      }
      ++nfixed;
    } else {
      jpvt[j] = static_cast<int32_t>(j + 1);
    }
  }
  // The fixed columns: plain Householder steps (geqrf, then Q^H on the rest).
  const int64_t kf = std::min(nfixed, k);
  for (int64_t j = 0; j < kf; ++j) {
    tau[j] = make_reflector(a + j * n + j, m - j, n);
    apply_reflector(a, j, n, conj(tau[j]), a, m, n, j, j + 1, w);
  }
  if (kf >= k) return;
  // vn1: downdated norms of the free columns below row kf; vn2: the norm
  // last computed directly.
  std::vector<R> vn1(n, R(0)), vn2(n, R(0));
  for (int64_t j = kf; j < n; ++j) vn1[j] = vn2[j] = norm2(a + kf * n + j, m - kf, n);
  const R tol3z = std::sqrt(std::numeric_limits<R>::epsilon() / 2);
  for (int64_t i = kf; i < k; ++i) {
    int64_t p = i;
    for (int64_t j = i + 1; j < n; ++j)
      if (vn1[j] > vn1[p]) p = j;
    if (p != i) {
      swap_cols(p, i);
      std::swap(jpvt[p], jpvt[i]);
      vn1[p] = vn1[i];
      vn2[p] = vn2[i];
    }
    tau[i] = make_reflector(a + i * n + i, m - i, n);
    apply_reflector(a, i, n, conj(tau[i]), a, m, n, i, i + 1, w);
    for (int64_t j = i + 1; j < n; ++j) {
      if (vn1[j] == 0) continue;
      R t = std::abs(a[i * n + j]) / vn1[j];
      t = std::max(R(0), (R(1) + t) * (R(1) - t));
      const R ratio = vn1[j] / vn2[j];
      if (t * ratio * ratio <= tol3z) {
        vn1[j] = vn2[j] = i + 1 < m ? norm2(a + (i + 1) * n + j, m - i - 1, n) : R(0);
      } else {
        vn1[j] *= std::sqrt(t);
      }
    }
  }
}

// ---- LU with partial pivoting (getrf) ---------------------------------------------------

// In place on a (m x n): unit-lower L below the diagonal, U on and above;
// pivot[min(m, n)] 0-based (row i was swapped with pivot[i]); perm[m] the
// resulting row order. A zero pivot column is left unscaled (LAPACK then
// reports info > 0 and the factorization goes on).
template <typename T>
void getrf(T* a, int32_t* pivot, int32_t* perm, int64_t m, int64_t n) {
  using R = real_t<T>;
  const int64_t k = std::min(m, n);
  for (int64_t i = 0; i < m; ++i) perm[i] = static_cast<int32_t>(i);
  for (int64_t j = 0; j < k; ++j) {
    // The first row with the largest |re| + |im| (i?amax: strict >).
    int64_t p = j;
    R best = abs1(a[j * n + j]);
    for (int64_t i = j + 1; i < m; ++i) {
      R v = abs1(a[i * n + j]);
      if (v > best) best = v, p = i;
    }
    pivot[j] = static_cast<int32_t>(p);
    if (p != j) {
      for (int64_t c = 0; c < n; ++c) std::swap(a[j * n + c], a[p * n + c]);
      std::swap(perm[j], perm[p]);
    }
    const T d = a[j * n + j];
    if (d != T(0)) {
      // getf2 multiplies by 1/d unless d is tiny enough that 1/d overflows.
      const bool recip = std::abs(d) >= std::numeric_limits<R>::min();
      const T inv = T(1) / d;
      for (int64_t i = j + 1; i < m; ++i) {
        if (recip) a[i * n + j] *= inv;
        else a[i * n + j] /= d;
      }
    }
    const T* uj = a + j * n;
    for (int64_t i = j + 1; i < m; ++i) {
      const T l = a[i * n + j];
      T* ai = a + i * n;
      for (int64_t c = j + 1; c < n; ++c) ai[c] -= l * uj[c];
    }
  }
}

// stablehlo.triangular_solve of one matrix: x holds b (n x other when
// `left`, other x n otherwise) and becomes the solution of op(a) x = b (or
// x op(a) = b), op the identity, transpose (`transposed`) or adjoint
// (`adjoint` too). Only a's `lower` (or upper) triangle is read, and not its
// diagonal when `unit`. `scratch` holds n * n elements (used when
// transposed).
template <typename T>
void triangular_solve(const T* a, T* x, int64_t n, int64_t other, bool left, bool lower, bool unit,
                      bool transposed, bool adjoint, T* scratch) {
  if (transposed) {
    // op(a) is triangular on the other side: its lower triangle is the
    // (conjugate) transpose of a's upper one.
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) scratch[i * n + j] = adjoint ? conj(a[j * n + i]) : a[j * n + i];
    a = scratch;
  }
  trsm(a, x, n, other, left, transposed ? !lower : lower, unit);
}

}  // namespace pjrtx::backend::linalg
