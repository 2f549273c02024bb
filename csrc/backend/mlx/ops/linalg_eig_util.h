// Helpers shared by the decomposition targets (linalg_eig.cc and the host
// routines in linalg_reduce.cc): backend_config flags, dtype checks, the
// CPU stream, and the NaN convention for matrices LAPACK would reject.
#pragma once

#include <string>

#include "backend/mlx/registry.h"

namespace pjrtx::backend::ops {

// mx::linalg runs on the CPU only ("not yet supported on the GPU").
mx::Stream cpu_stream();

// The flag `key` of backend_config "key=0|1;..."; a missing one fails.
bool config_flag(LowerCtx& ctx, const std::string& key);

// Operand f32/f64/c64/c128; else a compile-time error naming pjrtx_<op>
// and the type.
void check_linalg_types(LowerCtx& ctx, const char* op);

// Double-precision routines for what mx::linalg's LAPACK calls cannot take
// (they stop at complex64): eigh and svd of c128 (linalg_jacobi.cc), eig of
// f64 and c128, whose eigenvalues are c128 (linalg_schur.cc).
Kernel lower_eigh_c128(LowerCtx& ctx, bool lower);
Kernel lower_svd_c128(LowerCtx& ctx, bool full, bool uv);
Kernel lower_eig_wide(LowerCtx& ctx, bool left, bool right);

// The LAPACK routines XLA:CPU calls (linalg_lapack.cc, host/lapack.h): used
// where use_lapack() (PJRTX_LAPACK=scipy and SciPy's table resolved).
bool use_lapack();
Kernel lower_eigh_lapack(LowerCtx& ctx, bool lower);
Kernel lower_svd_lapack(LowerCtx& ctx, bool full, bool uv);
Kernel lower_eig_lapack(LowerCtx& ctx, bool left, bool right);
Kernel lower_schur_lapack(LowerCtx& ctx, bool vectors);

// Zero-element operand: every result is empty too; zeros of their types.
Kernel empty_results(LowerCtx& ctx);

// bool[batch...]: true where the matrix (last two dims) holds NaN or inf.
mx::array nonfinite_matrices(const mx::array& x, mx::Stream s);
// x with the bad matrices replaced by zeros (LAPACK-safe input).
mx::array zero_where(const mx::array& bad, const mx::array& x, mx::Stream s);
// y with every element of a bad batch entry set to NaN (NaN + NaN i for
// complex, as XLA's _nan_like_hlo).
mx::array nan_where(const mx::array& bad, const mx::array& y, mx::Stream s);

// x[..., :rows, :cols].
mx::array last_dims_slice(const mx::array& x, int rows, int cols, mx::Stream s);

// Inverse of a complex64 matrix through the real 2n x 2n embedding
// [[X, -Y], [Y, X]] (mx::linalg::inv takes real types only).
mx::array complex_inverse(const mx::array& m, mx::Stream s);

// LAPACK geev's normalisation of eigenvector columns: unit 2-norm, largest
// |component| real and non-negative.
mx::array geev_normalize(const mx::array& v, mx::Stream s);

}  // namespace pjrtx::backend::ops
