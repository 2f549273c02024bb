// pjrtx_tridiagonal_solve: lax.linalg.tridiagonal_solve as a host kernel,
// Gaussian elimination with partial (row) pivoting as LAPACK gtsv does it,
// so that XLA:CPU's answers (gtsv, and tridiagonal_solve_perturbed_ffi for
// perturb_singular) are matched where they are defined:
//   operands dl, d, du [..., m] (dl[0] and du[m-1] unused), b [..., m, k];
//   result x [..., m, k]; backend_config "perturb=0|1".
// Elimination of row i+1 by row i keeps the row with the larger |pivot|
// candidate (|d_i| >= |dl_{i+1}| keeps row i, as gttrf); U then has three
// diagonals (d, du, du2).
// - perturb=0: an exactly zero pivot makes the matrix singular; that batch
//   entry's x is all NaN, as JAX's CPU rule maps gtsv's info > 0 to NaN.
// - perturb=1 (JAX's documented contract): a tiny pivot is replaced by
//   eps * max|U| of the factor so far, eps of the operand's type, keeping
//   its sign (+ for 0); when U is all zero, by the type's smallest normal
//   number, so x stays finite (a zero matrix and b = 1 give |x| ~ 1e38 in
//   f32). Inverse iteration (eigh_tridiagonal) relies on this.
// Arithmetic runs in double (complex<double>), one rounding at the end.
#include <algorithm>
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

// One system: factor (with pivoting) and solve every column of b in place.
// Returns false when a zero pivot is met and perturb is off.
template <typename W>
bool solve_one(std::vector<W>& dl, std::vector<W>& d, std::vector<W>& du, std::vector<W>& b,
               int m, int k, bool perturb, double eps, double tiny) {
  std::vector<W> du2(m, W(0)), fact(m, W(0));
  std::vector<char> swapped(m, 0);
  double max_u = 0;
  auto fix_pivot = [&](int i) {
    max_u = std::max({max_u, std::abs(d[i]), i + 1 < m ? std::abs(du[i]) : 0.0,
                      i + 2 < m ? std::abs(du2[i]) : 0.0});
    double floor_ = max_u > 0 ? eps * max_u : tiny;
    if (std::abs(d[i]) < floor_) {
      // Keep the direction of the pivot; zero goes positive.
      double r = re(d[i]);
      d[i] = std::abs(d[i]) == 0 ? W(std::signbit(r) ? -floor_ : floor_)
                                 : d[i] * (floor_ / std::abs(d[i]));
    }
  };
  for (int i = 0; i + 1 < m; ++i) {
    if (std::abs(d[i]) >= std::abs(dl[i + 1])) {
      if (perturb) fix_pivot(i);
      else if (d[i] == W(0)) return false;  // then dl[i+1] is 0 too
      fact[i] = dl[i + 1] / d[i];
      d[i + 1] -= fact[i] * du[i];
    } else {
      // Row i+1 becomes the pivot row: U row i is (dl[i+1], d[i+1], du[i+1]).
      swapped[i] = 1;
      W f = d[i] / dl[i + 1];
      fact[i] = f;
      d[i] = dl[i + 1];
      W tmp = d[i + 1];
      d[i + 1] = du[i] - f * tmp;
      if (i + 2 < m) {
        du2[i] = du[i + 1];
        du[i + 1] = -f * du2[i];
      }
      du[i] = tmp;
      if (perturb) fix_pivot(i);
    }
  }
  if (perturb) fix_pivot(m - 1);
  else if (d[m - 1] == W(0)) return false;
  for (int c = 0; c < k; ++c) {
    auto x = [&](int r) -> W& { return b[static_cast<size_t>(r) * k + c]; };
    for (int i = 0; i + 1 < m; ++i) {
      if (swapped[i]) {
        W t = x(i);
        x(i) = x(i + 1);
        x(i + 1) = t - fact[i] * x(i + 1);
      } else {
        x(i + 1) -= fact[i] * x(i);
      }
    }
    for (int i = m - 1; i >= 0; --i) {
      W s = x(i);
      if (i + 1 < m) s -= du[i] * x(i + 1);
      if (i + 2 < m) s -= du2[i] * x(i + 2);
      x(i) = s / d[i];
    }
  }
  return true;
}

template <typename T, typename R>
void run_solve(const Arrays& in, Arrays& out, int m, int k, bool perturb) {
  using W = Wide<T>;
  const double eps = std::numeric_limits<R>::epsilon();
  const double tiny = std::numeric_limits<R>::min();
  size_t mk = static_cast<size_t>(m) * k, batch = m == 0 ? 0 : in[1].nbytes() / sizeof(T) / m;
  T* x = out[0].data<T>();
  for (size_t bi = 0; bi < batch; ++bi) {
    auto vec = [&](int i) {
      const T* p = in[i].data<T>() + bi * m;
      return std::vector<W>(p, p + m);
    };
    std::vector<W> dl = vec(0), d = vec(1), du = vec(2);
    const T* bp = in[3].data<T>() + bi * mk;
    std::vector<W> b(bp, bp + mk);
    bool ok = solve_one(dl, d, du, b, m, k, perturb, eps, tiny);
    for (size_t j = 0; j < mk; ++j)
      x[bi * mk + j] = ok ? narrow<T>(b[j]) : narrow<T>(W(std::nan("")) * W(1));
  }
}

Kernel lower_tridiagonal_solve(LowerCtx& ctx) {
  check_linalg_types(ctx, "tridiagonal_solve");
  bool perturb = config_flag(ctx, "perturb");
  if (ctx.num_in() != 4 || ctx.num_out() != 1)
    ctx.fail("pjrtx_tridiagonal_solve takes (dl, d, du, b) -> x, not ", ctx.num_in(), " -> ",
             ctx.num_out());
  const auto& bt = ctx.in(3);
  if (bt.rank() < 2 || ctx.out(0) != bt)
    ctx.fail("pjrtx_tridiagonal_solve: b ", bt.str(), " must be [..., m, k] and equal x ", ctx.out(0).str());
  compiler::Shape diag(bt.shape.begin(), bt.shape.end() - 1);
  for (int i = 0; i < 3; ++i)
    if (ctx.in(i).shape != diag || ctx.in(i).dtype != bt.dtype)
      ctx.fail("pjrtx_tridiagonal_solve: diagonal ", ctx.in(i).str(), " does not match b ", bt.str());
  if (bt.num_elements() == 0) return empty_results(ctx);
  int m = static_cast<int>(bt.shape[bt.rank() - 2]), k = static_cast<int>(bt.shape.back());
  compiler::DType t = bt.dtype;
  OutTypes o = out_types(ctx);
  return [m, k, t, perturb, o](RunState&, const Arrays& in) {
    return host_kernel("pjrtx_tridiagonal_solve", in, o.shapes, o.dtypes,
                       [m, k, t, perturb](const Arrays& ins, Arrays& outs) {
                         if (t == compiler::DType::kF32) run_solve<float, float>(ins, outs, m, k, perturb);
                         else if (t == compiler::DType::kF64) run_solve<double, double>(ins, outs, m, k, perturb);
                         else if (t == compiler::DType::kC128)
                           run_solve<std::complex<double>, double>(ins, outs, m, k, perturb);
                         else run_solve<std::complex<float>, float>(ins, outs, m, k, perturb);
                       });
  };
}

}  // namespace

void register_linalg_tridiagonal_solve_ops(Registry& r) {
  r.add_target("pjrtx_tridiagonal_solve", lower_tridiagonal_solve);
}

}  // namespace pjrtx::backend
