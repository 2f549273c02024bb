// Eigen and singular value decompositions: the custom calls that
// pjrtx/jax_rules/linalg_eig.py emits for eigh, svd and eig, computed with
// mx::linalg (LAPACK syevd/heevd, gesdd, geev) on a CPU stream, because MLX
// has these on the CPU only; MLX fences the stream against the device's.
// mx::linalg stops at complex64 (and its eig of f64 would come back in
// complex64), so eigh and svd of c128 and eig of f64 and c128 run pjrtx's
// own double-precision routines (linalg_jacobi.cc, linalg_schur.cc).
//
// Results are exactly the JAX primitives' outputs (jax/_src/lax/linalg.py):
//   pjrtx_eigh  [v, w]         w real and ascending, v's columns eigenvectors
//   pjrtx_svd   [s] | [s,u,vt] s descending, u/vt full or economic
//   pjrtx_eig   [w, vl?, vr?]  complex, vectors of unit 2-norm
// Flags come in backend_config as "key=0|1;...".
//
// XLA's CPU rules turn LAPACK's info != 0 into NaN outputs for that matrix.
// MLX throws instead (the whole run fails), and LAPACK only fails on
// non-finite input here, so a matrix holding NaN or inf is replaced by zeros
// before the call and its outputs by NaN after it.
#include <cstdint>
#include <mlx/linalg.h>

#include <map>
#include <string>

#include "backend/mlx/ops/common.h"
#include "backend/mlx/ops/linalg_eig_util.h"

namespace pjrtx::backend {

namespace {

using namespace ops;

Kernel lower_eigh(LowerCtx& ctx) {
  check_linalg_types(ctx, "eigh");
  bool lower = config_flag(ctx, "lower");
  if (ctx.in(0).num_elements() == 0) return empty_results(ctx);
  if (use_lapack()) return lower_eigh_lapack(ctx, lower);
  if (ctx.in(0).dtype == compiler::DType::kC128) return lower_eigh_c128(ctx, lower);
  return [lower](RunState&, const Arrays& in) {
    mx::Stream s = cpu_stream();
    // LAPACK reads one triangle, so only that one can make it fail.
    mx::array bad = nonfinite_matrices(lower ? mx::tril(in[0], 0, s) : mx::triu(in[0], 0, s), s);
    auto [w, v] = mx::linalg::eigh(zero_where(bad, in[0], s), lower ? "L" : "U", s);
    return Arrays{nan_where(bad, v, s), nan_where(bad, w, s)};
  };
}

Kernel lower_svd(LowerCtx& ctx) {
  check_linalg_types(ctx, "svd");
  bool full = config_flag(ctx, "full_matrices");
  bool uv = config_flag(ctx, "compute_uv");
  const auto& shape = ctx.in(0).shape;
  int m = static_cast<int>(shape[shape.size() - 2]);
  int n = static_cast<int>(shape.back());
  if (ctx.num_out() != (uv ? 3u : 1u))
    ctx.fail("pjrtx_svd with compute_uv=", uv, " has ", ctx.num_out(), " results");
  if (ctx.in(0).num_elements() == 0) return empty_results(ctx);
  if (use_lapack()) return lower_svd_lapack(ctx, full, uv);
  if (ctx.in(0).dtype == compiler::DType::kC128) return lower_svd_c128(ctx, full, uv);
  // m == 0 or n == 0 lowers without a custom call (pjrtx/jax_rules).
  int k = std::min(m, n);
  bool real = !compiler::is_complex(ctx.in(0).dtype);
  // MLX's gesdd computes u and vt in full (jobz 'A'): max(m, n)^2 elements.
  // Real economic SVDs of non-square matrices go through a reduced QR
  // instead (A = QR, R = Ur S Vt, U = Q Ur), so (400000, 2) needs no
  // 400000 x 400000 u; what remains must fit LAPACK's int32 sizes and 1 GiB.
  bool via_qr = uv && !full && real && m != n;
  int64_t big = std::max(m, n);
  if (uv && !via_qr && big * big > (int64_t{1} << 28))
    ctx.fail("pjrtx_svd of ", ctx.in(0).str(), " needs a ", big, "x", big,
             " intermediate (MLX's SVD computes full U and V)");
  return [full, uv, k, via_qr, m, n](RunState&, const Arrays& in) {
    mx::Stream s = cpu_stream();
    mx::array bad = nonfinite_matrices(in[0], s);
    mx::array a = zero_where(bad, in[0], s);
    if (!uv) return Arrays{nan_where(bad, mx::linalg::svd(a, false, s)[0], s)};
    if (via_qr) {
      bool tall = m > n;
      auto [q, r] = mx::linalg::qr(tall ? a : mx::swapaxes(a, -1, -2, s), s);
      Arrays f = mx::linalg::svd(r, true, s);  // r is k x k
      mx::array u = tall ? mx::matmul(q, f[0], s) : mx::swapaxes(f[2], -1, -2, s);
      mx::array vt = tall ? f[2] : mx::swapaxes(mx::matmul(q, f[0], s), -1, -2, s);
      return Arrays{nan_where(bad, f[1], s), nan_where(bad, u, s), nan_where(bad, vt, s)};
    }
    Arrays r = mx::linalg::svd(a, true, s);
    // MLX returns [u, s, vt] with full u (m x m) and vt (n x n).
    mx::array u = r[0], vt = r[2];
    if (!full) {
      u = last_dims_slice(u, u.shape(-2), k, s);
      vt = last_dims_slice(vt, k, vt.shape(-1), s);
    }
    return Arrays{nan_where(bad, r[1], s), nan_where(bad, u, s), nan_where(bad, vt, s)};
  };
}

// Left eigenvectors from right ones: VR^-1 A = diag(w) VR^-1, so row j of
// VR^-1 is u_j^H for the eigenvalue w_j, in w's order (geev computes both
// from one Schur form; a second eig of A^H would order its eigenvalues
// differently). Accurate to eps * cond(VR); defective matrices (singular
// VR) give inf/NaN where LAPACK gives some basis.
mx::array left_from_right(const mx::array& vr, mx::Stream s) {
  mx::array inv = complex_inverse(vr, s);
  mx::array vl = mx::conjugate(mx::swapaxes(inv, -1, -2, s), s);
  return geev_normalize(vl, s);
}

Kernel lower_eig(LowerCtx& ctx) {
  check_linalg_types(ctx, "eig");
  bool left = config_flag(ctx, "left");
  bool right = config_flag(ctx, "right");
  if (ctx.num_out() != 1u + left + right)
    ctx.fail("pjrtx_eig with left=", left, " right=", right, " has ", ctx.num_out(), " results");
  if (ctx.in(0).num_elements() == 0) return empty_results(ctx);
  if (use_lapack()) return lower_eig_lapack(ctx, left, right);
  if (ctx.in(0).dtype == compiler::DType::kF64 || ctx.in(0).dtype == compiler::DType::kC128)
    return lower_eig_wide(ctx, left, right);
  bool complex_in = compiler::is_complex(ctx.in(0).dtype);
  return [left, right, complex_in](RunState&, const Arrays& in) {
    mx::Stream s = cpu_stream();
    mx::array bad = nonfinite_matrices(in[0], s);
    mx::array a = zero_where(bad, in[0], s);
    if (!left && !right) return Arrays{nan_where(bad, mx::linalg::eigvals(a, s), s)};
    auto [w, vr] = mx::linalg::eig(a, s);
    // MLX runs geev on the row-major matrix, i.e. on A^T, and conjugates
    // the left eigenvectors of A^T into right ones of A for real input
    // only; complex input needs the conjugate here.
    if (complex_in) vr = mx::conjugate(vr, s);
    Arrays out{nan_where(bad, w, s)};
    if (left) out.push_back(nan_where(bad, left_from_right(vr, s), s));
    if (right) out.push_back(nan_where(bad, vr, s));
    return out;
  };
}

}  // namespace

void register_linalg_eig_ops(Registry& r) {
  r.add_target("pjrtx_eigh", lower_eigh);
  r.add_target("pjrtx_svd", lower_svd);
  r.add_target("pjrtx_eig", lower_eig);
}

}  // namespace pjrtx::backend
