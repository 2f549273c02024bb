// Shared pieces of the host linalg routines (linalg_reduce.cc,
// linalg_schur.cc): a row-major matrix in a wide type, LAPACK larfg's
// reflector, and gehd2's Hessenberg reduction (see linalg_reduce.cc for the
// packed format).
#pragma once

#include <cmath>
#include <complex>
#include <type_traits>
#include <vector>

#include "backend/mlx/dtype.h"
#include "backend/mlx/registry.h"

namespace pjrtx::backend::ops::householder {

using cd = std::complex<double>;

inline double re(double x) { return x; }
inline double re(cd x) { return x.real(); }
inline double conj_(double x) { return x; }
inline cd conj_(cd x) { return std::conj(x); }
inline double abs2(double x) { return x * x; }
inline double abs2(cd x) { return std::norm(x); }

// A dense n x n row-major matrix in the wide type W.
template <typename W>
struct Mat {
  int n;
  std::vector<W> a;
  W& operator()(int r, int c) { return a[static_cast<size_t>(r) * n + c]; }
};

// larfg on (alpha, x[0..len)) where x is strided in m: returns tau and
// overwrites alpha with beta and x with v's tail.
template <typename W>
W make_reflector(W& alpha, std::vector<W*> x) {
  double xnorm2 = 0;
  for (W* p : x) xnorm2 += abs2(*p);
  double alphi = std::abs(alpha - W(re(alpha)));
  if (xnorm2 == 0 && alphi == 0) return W(0);
  double beta = -std::copysign(std::sqrt(abs2(alpha) + xnorm2), re(alpha));
  W tau = (W(beta) - alpha) / W(beta);
  W scale = W(1) / (alpha - W(beta));
  for (W* p : x) *p *= scale;
  alpha = W(beta);
  return tau;
}

// gehd2: reduce m to upper Hessenberg form in place, taus[0..n-1).
template <typename W>
void hessenberg(Mat<W>& m, std::vector<W>& taus) {
  int n = m.n;
  std::vector<W> v(n);
  for (int i = 0; i + 1 < n; ++i) {
    std::vector<W*> x;
    for (int r = i + 2; r < n; ++r) x.push_back(&m(r, i));
    W beta = m(i + 1, i);
    W tau = make_reflector(beta, x);
    taus[i] = tau;
    // v has support i+1..n-1.
    v[i + 1] = W(1);
    for (int r = i + 2; r < n; ++r) v[r] = m(r, i);
    // From the right on every row: A[:, i+1:] -= tau (A v) v^H.
    for (int r = 0; r < n; ++r) {
      W s = 0;
      for (int c = i + 1; c < n; ++c) s += m(r, c) * v[c];
      s *= tau;
      for (int c = i + 1; c < n; ++c) m(r, c) -= s * conj_(v[c]);
    }
    // H^H from the left on rows i+1..: A -= conj(tau) v (v^H A).
    for (int c = i + 1; c < n; ++c) {
      W s = 0;
      for (int r = i + 1; r < n; ++r) s += conj_(v[r]) * m(r, c);
      s *= conj_(tau);
      for (int r = i + 1; r < n; ++r) m(r, c) -= v[r] * s;
    }
    m(i + 1, i) = beta;
  }
}

template <typename T>
using Wide = std::conditional_t<std::is_same_v<T, std::complex<float>> ||
                                     std::is_same_v<T, std::complex<double>>,
                                 cd, double>;

template <typename T>
T narrow(Wide<T> x) {
  return static_cast<T>(x);
}

struct OutTypes {
  std::vector<mx::Shape> shapes;
  std::vector<mx::Dtype> dtypes;
};

inline OutTypes out_types(LowerCtx& ctx) {
  OutTypes o;
  for (size_t i = 0; i < ctx.num_out(); ++i) {
    o.shapes.push_back(storage_shape(ctx.out(i)));
    o.dtypes.push_back(to_mlx(ctx.out(i).dtype));
  }
  return o;
}

}  // namespace pjrtx::backend::ops::householder
