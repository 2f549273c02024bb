// Factorizations and triangular solves: stablehlo.cholesky,
// stablehlo.triangular_solve, and the custom calls JAX emits for geqrf
// (@Qr), orgqr (@ProductOfElementaryHouseholderReflectors) and LU
// (@LuDecomposition, also what pjrtx/jax_rules/linalg_factor.py emits for
// lu_p), and for geqp3 (@pjrtx_geqp3, emitted by the same file for
// geqp3_p). Each runs as a host kernel (host/host_kernel.h) over the batch,
// with the loops of host/linalg_kernels.h; MLX's own linalg does not fit: its
// cholesky ignores a failed factorization and its solve_triangular inverts
// the matrix (and throws on a singular one) where XLA substitutes and
// returns inf/NaN.
//
// Element types: f32, f64, c64, c128. A triangular solve also takes f16 and bf16
// and computes in f32 (XLA:CPU expands those in their own precision, so
// results agree to their rounding); the factorizations refuse them with
// "Unsupported dtype", as XLA:CPU's LAPACK calls do. c128 (stored as f64
// pairs, complex128.h) computes in std::complex<double>.
// Zero-size operands never reach a host kernel.
#include <complex>
#include <cstdint>
#include <string>

#include "backend/mlx/host/host_kernel.h"
#include "backend/mlx/ops/common.h"
#include "backend/mlx/host/linalg_kernels.h"

namespace pjrtx::backend {

namespace {

using namespace ops;
using C64 = std::complex<float>;

// The plan type a host kernel computes in: f16/bf16 widen to f32 where
// `half` allows them.
DType compute_type(LowerCtx& ctx, DType t, bool half = false) {
  switch (t) {
    case DType::kF32: case DType::kF64: case DType::kC64: case DType::kC128: return t;
    case DType::kF16: case DType::kBF16:
      if (half) return DType::kF32;
      ctx.fail("Unsupported dtype ", compiler::dtype_name(t), " (f32, f64, c64, c128)");
    default: ctx.fail("Unsupported dtype ", compiler::dtype_name(t), " (f32, f64, c64, c128)");
  }
}

// make(T{}) for the C++ element type of a compute type.
template <typename Make>
HostFn by_type(DType t, Make make) {
  switch (t) {
    case DType::kF64: return make(double{});
    case DType::kC64: return make(C64{});
    // c128 values are stored as (re, im) f64 pairs: complex<double>'s layout.
    case DType::kC128: return make(std::complex<double>{});
    default: return make(float{});
  }
}

// Checks "[..., rows, cols]" and returns (batch count, rows, cols).
struct MatrixDims {
  int64_t batch, rows, cols;
};
MatrixDims matrix_dims(LowerCtx& ctx, const compiler::TensorType& t, const char* what) {
  if (t.rank() < 2) ctx.fail(what, " must have rank >= 2, got ", t.str());
  MatrixDims d{1, t.shape[t.rank() - 2], t.shape[t.rank() - 1]};
  for (int64_t i = 0; i + 2 < t.rank(); ++i) d.batch *= t.shape[i];
  return d;
}

compiler::Shape batch_shape(const compiler::TensorType& t) {
  return compiler::Shape(t.shape.begin(), t.shape.end() - 2);
}

void check_same_batch(LowerCtx& ctx, const compiler::TensorType& a, int64_t a_trailing,
                      const compiler::TensorType& b, int64_t b_trailing) {
  if (a.rank() - a_trailing != b.rank() - b_trailing ||
      !std::equal(a.shape.begin(), a.shape.end() - a_trailing, b.shape.begin()))
    ctx.fail("batch dimensions differ: ", a.str(), " and ", b.str());
}

// Runs fn as a host kernel on inputs widened to `ct`, narrowing float
// outputs back to the plan's result types.
Kernel host_kernel_op(LowerCtx& ctx, std::string name, DType ct, HostFn fn) {
  std::vector<mx::Shape> shapes;
  std::vector<mx::Dtype> kernel_types, result_types;
  for (size_t i = 0; i < ctx.num_out(); ++i) {
    shapes.push_back(storage_shape(ctx.out(i)));
    result_types.push_back(to_mlx(ctx.out(i).dtype));
    kernel_types.push_back(compiler::is_float(ctx.out(i).dtype) ? to_mlx(ct) : result_types.back());
  }
  std::vector<bool> widen;
  for (size_t i = 0; i < ctx.num_in(); ++i) widen.push_back(compiler::is_float(ctx.in(i).dtype) &&
                                                           ctx.in(i).dtype != ct);
  mx::Dtype ct_mlx = to_mlx(ct);
  return [=](RunState&, const Arrays& in) {
    Arrays args = in;
    for (size_t i = 0; i < args.size(); ++i)
      if (widen[i]) args[i] = mx::astype(args[i], ct_mlx);
    Arrays out = host_kernel(name, args, shapes, kernel_types, fn);
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i].dtype() != result_types[i]) out[i] = mx::astype(out[i], result_types[i]);
    return out;
  };
}

// ---- stablehlo.cholesky -----------------------------------------------------------------

// A matrix that is not positive definite comes back all NaN, as JAX's CPU
// lowering makes of potrf's info > 0. The triangle opposite `lower` is zero.
Kernel lower_cholesky(LowerCtx& ctx) {
  const auto& t = ctx.in(0);
  MatrixDims d = matrix_dims(ctx, t, "operand");
  if (d.rows != d.cols) ctx.fail("operand must be square, got ", t.str());
  if (ctx.out(0) != t) ctx.fail("result ", ctx.out(0).str(), " must match operand ", t.str());
  const bool lower = ctx.inst().attr_bool("lower", false);
  DType ct = compute_type(ctx, t.dtype);
  if (t.num_elements() == 0) return [](RunState&, const Arrays& in) { return in; };
  const int64_t n = d.rows, batch = d.batch;
  HostFn fn = by_type(ct, [=](auto tag) -> HostFn {
    using T = decltype(tag);
    return [=](const Arrays& in, Arrays& out) {
      std::vector<T> scratch(lower ? 0 : n * n);
      for (int64_t b = 0; b < batch; ++b)
        linalg::cholesky(in[0].data<T>() + b * n * n, out[0].data<T>() + b * n * n, n, lower, scratch.data());
    };
  });
  return host_kernel_op(ctx, "stablehlo.cholesky", ct, fn);
}

// ---- stablehlo.triangular_solve ---------------------------------------------------------

// op(a) x = b (left_side) or x op(a) = b; op is the identity, transpose or
// adjoint (transpose_a); only a's `lower` (or upper) triangle is read, and
// not its diagonal when unit_diagonal.
Kernel lower_triangular_solve(LowerCtx& ctx) {
  const auto &ta = ctx.in(0), &tb = ctx.in(1);
  MatrixDims da = matrix_dims(ctx, ta, "a"), db = matrix_dims(ctx, tb, "b");
  if (da.rows != da.cols) ctx.fail("a must be square, got ", ta.str());
  check_same_batch(ctx, ta, 2, tb, 2);
  if (ta.dtype != tb.dtype) ctx.fail("a ", ta.str(), " and b ", tb.str(), " differ in type");
  if (ctx.out(0) != tb) ctx.fail("result ", ctx.out(0).str(), " must match b ", tb.str());
  const auto& inst = ctx.inst();
  const bool left = inst.attr_bool("left_side", false);
  const bool lower = inst.attr_bool("lower", false);
  const bool unit = inst.attr_bool("unit_diagonal", false);
  const std::string trans = inst.attr_str("transpose_a", "NO_TRANSPOSE");
  if (trans != "NO_TRANSPOSE" && trans != "TRANSPOSE" && trans != "ADJOINT")
    ctx.fail("unknown transpose_a ", trans);
  const int64_t n = da.rows;
  if ((left ? db.rows : db.cols) != n)
    ctx.fail("a ", ta.str(), " does not fit b ", tb.str(), left ? " on the left" : " on the right");
  DType ct = compute_type(ctx, tb.dtype, /*half=*/true);
  if (tb.num_elements() == 0) return [](RunState&, const Arrays& in) { return Arrays{in[1]}; };
  const int64_t batch = db.batch, other = left ? db.cols : db.rows;
  const bool transposed = trans != "NO_TRANSPOSE", adjoint = trans == "ADJOINT";
  HostFn fn = by_type(ct, [=](auto tag) -> HostFn {
    using T = decltype(tag);
    return [=](const Arrays& in, Arrays& out) {
      std::vector<T> scratch(transposed ? n * n : 0);
      const int64_t bsize = n * other;
      const T* bin = in[1].data<T>();
      T* x = out[0].data<T>();
      std::copy(bin, bin + batch * bsize, x);
      for (int64_t b = 0; b < batch; ++b)
        linalg::triangular_solve(in[0].data<T>() + b * n * n, x + b * bsize, n, other, left, lower, unit,
                                 transposed, adjoint, scratch.data());
    };
  });
  return host_kernel_op(ctx, "stablehlo.triangular_solve", ct, fn);
}

// ---- custom_call @Qr (geqrf) ------------------------------------------------------------

// (a[..., m, n]) -> (a packed as geqrf leaves it, taus[..., min(m, n)]).
Kernel lower_qr(LowerCtx& ctx) {
  if (ctx.num_in() != 1 || ctx.num_out() != 2) ctx.fail("custom_call @Qr takes 1 operand, gives 2 results");
  const auto& t = ctx.in(0);
  MatrixDims d = matrix_dims(ctx, t, "operand");
  const int64_t m = d.rows, n = d.cols, k = std::min(m, n);
  compiler::TensorType taus{t.dtype, batch_shape(t)};
  taus.shape.push_back(k);
  if (ctx.out(0) != t || ctx.out(1) != taus)
    ctx.fail("custom_call @Qr of ", t.str(), " gives ", t.str(), " and ", taus.str(), ", not ",
             ctx.out(0).str(), " and ", ctx.out(1).str());
  DType ct = compute_type(ctx, t.dtype);
  if (t.num_elements() == 0) {
    mx::Shape ts = storage_shape(taus);
    mx::Dtype dt = to_mlx(t.dtype);
    return [=](RunState&, const Arrays& in) { return Arrays{in[0], mx::zeros(ts, dt)}; };
  }
  const int64_t batch = d.batch;
  HostFn fn = by_type(ct, [=](auto tag) -> HostFn {
    using T = decltype(tag);
    return [=](const Arrays& in, Arrays& out) {
      std::vector<T> w;
      const T* a = in[0].data<T>();
      T* r = out[0].data<T>();
      std::copy(a, a + batch * m * n, r);
      for (int64_t b = 0; b < batch; ++b)
        linalg::geqrf(r + b * m * n, out[1].data<T>() + b * k, m, n, w);
    };
  });
  return host_kernel_op(ctx, "custom_call @Qr", ct, fn);
}

// ---- custom_call @pjrtx_geqp3 (QR with column pivoting) --------------------------------

// (a[..., m, n], jpvt s32[..., n]) -> (a packed as geqp3 leaves it, jpvt
// 1-based, taus[..., min(m, n)]): geqp3_p's contract, with the lowering
// rule (pjrtx/jax_rules/linalg_factor.py) converting jpvt to s32 and back.
Kernel lower_geqp3(LowerCtx& ctx) {
  const char* name = "custom_call @pjrtx_geqp3";
  if (ctx.num_in() != 2 || ctx.num_out() != 3) ctx.fail(name, " takes 2 operands, gives 3 results");
  const auto &t = ctx.in(0), &tp = ctx.in(1);
  MatrixDims d = matrix_dims(ctx, t, "a");
  const int64_t m = d.rows, n = d.cols, k = std::min(m, n);
  compiler::TensorType piv{DType::kS32, batch_shape(t)}, taus{t.dtype, batch_shape(t)};
  piv.shape.push_back(n);
  taus.shape.push_back(k);
  if (tp != piv || ctx.out(0) != t || ctx.out(1) != piv || ctx.out(2) != taus)
    ctx.fail(name, " of ", t.str(), " and ", tp.str(), " gives ", t.str(), ", ", piv.str(),
             " and ", taus.str(), " (jpvt must be ", piv.str(), ")");
  DType ct = compute_type(ctx, t.dtype);
  if (t.num_elements() == 0) {
    // LAPACK returns before reading jpvt when min(m, n) = 0: it comes back as given.
    mx::Shape ts = storage_shape(taus);
    mx::Dtype dt = to_mlx(t.dtype);
    return [=](RunState&, const Arrays& in) { return Arrays{in[0], in[1], mx::zeros(ts, dt)}; };
  }
  const int64_t batch = d.batch;
  HostFn fn = by_type(ct, [=](auto tag) -> HostFn {
    using T = decltype(tag);
    return [=](const Arrays& in, Arrays& out) {
      std::vector<T> w;
      const T* a = in[0].data<T>();
      T* r = out[0].data<T>();
      const int32_t* p_in = in[1].data<int32_t>();
      int32_t* p = out[1].data<int32_t>();
      std::copy(a, a + batch * m * n, r);
      std::copy(p_in, p_in + batch * n, p);
      for (int64_t b = 0; b < batch; ++b)
        linalg::geqp3(r + b * m * n, p + b * n, out[2].data<T>() + b * k, m, n, w);
    };
  });
  return host_kernel_op(ctx, name, ct, fn);
}

// ---- custom_call @ProductOfElementaryHouseholderReflectors (orgqr) ----------------------

// (a[..., m, n], taus[..., k]) -> the first n columns of H_0 ... H_{k-1}.
Kernel lower_householder_product(LowerCtx& ctx) {
  const char* name = "custom_call @ProductOfElementaryHouseholderReflectors";
  if (ctx.num_in() != 2 || ctx.num_out() != 1) ctx.fail(name, " takes 2 operands, gives 1 result");
  const auto &t = ctx.in(0), &tt = ctx.in(1);
  MatrixDims d = matrix_dims(ctx, t, "a");
  if (tt.rank() < 1) ctx.fail("taus must have rank >= 1, got ", tt.str());
  check_same_batch(ctx, t, 2, tt, 1);
  const int64_t m = d.rows, n = d.cols, k = tt.shape.back();
  if (m < n || k > n) ctx.fail(name, " needs rows >= columns >= taus, got ", t.str(), " and ", tt.str());
  if (tt.dtype != t.dtype || ctx.out(0) != t)
    ctx.fail(name, " of ", t.str(), " and ", tt.str(), " cannot give ", ctx.out(0).str());
  DType ct = compute_type(ctx, t.dtype);
  if (t.num_elements() == 0) return [](RunState&, const Arrays& in) { return Arrays{in[0]}; };
  const int64_t batch = d.batch;
  HostFn fn = by_type(ct, [=](auto tag) -> HostFn {
    using T = decltype(tag);
    return [=](const Arrays& in, Arrays& out) {
      std::vector<T> w;
      for (int64_t b = 0; b < batch; ++b)
        linalg::orgqr(in[0].data<T>() + b * m * n, k ? in[1].data<T>() + b * k : nullptr,
                      out[0].data<T>() + b * m * n, m, n, k, w);
    };
  });
  return host_kernel_op(ctx, name, ct, fn);
}

// ---- custom_call @LuDecomposition (getrf) -----------------------------------------------

// (a[..., m, n]) -> (lu, pivots s32[..., min(m, n)] 0-based, permutation
// s32[..., m]): JAX's lu_p contract (TPU's target of this name has it too).
Kernel lower_lu(LowerCtx& ctx) {
  const char* name = "custom_call @LuDecomposition";
  if (ctx.num_in() != 1 || ctx.num_out() != 3) ctx.fail(name, " takes 1 operand, gives 3 results");
  const auto& t = ctx.in(0);
  MatrixDims d = matrix_dims(ctx, t, "operand");
  const int64_t m = d.rows, n = d.cols, k = std::min(m, n);
  compiler::TensorType piv{DType::kS32, batch_shape(t)}, perm = piv;
  piv.shape.push_back(k);
  perm.shape.push_back(m);
  if (ctx.out(0) != t || ctx.out(1) != piv || ctx.out(2) != perm)
    ctx.fail(name, " of ", t.str(), " gives ", t.str(), ", ", piv.str(), " and ", perm.str());
  DType ct = compute_type(ctx, t.dtype);
  if (t.num_elements() == 0) {
    // No rows to swap: the permutation is the identity.
    mx::Shape ps = to_mlx_shape(piv.shape), qs = to_mlx_shape(perm.shape);
    return [=](RunState&, const Arrays& in) {
      return Arrays{in[0], mx::zeros(ps, mx::int32),
                    mx::broadcast_to(mx::arange(static_cast<int>(m), mx::int32), qs)};
    };
  }
  const int64_t batch = d.batch;
  HostFn fn = by_type(ct, [=](auto tag) -> HostFn {
    using T = decltype(tag);
    return [=](const Arrays& in, Arrays& out) {
      const T* a = in[0].data<T>();
      T* lu = out[0].data<T>();
      std::copy(a, a + batch * m * n, lu);
      for (int64_t b = 0; b < batch; ++b)
        linalg::getrf(lu + b * m * n, out[1].data<int32_t>() + b * k,
                      out[2].data<int32_t>() + b * m, m, n);
    };
  });
  return host_kernel_op(ctx, name, ct, fn);
}

}  // namespace

void register_linalg_factor_ops(Registry& r) {
  r.add(compiler::Opcode::cholesky, lower_cholesky);
  r.add(compiler::Opcode::triangular_solve, lower_triangular_solve);
  r.add_target("Qr", lower_qr);
  r.add_target("ProductOfElementaryHouseholderReflectors", lower_householder_product);
  r.add_target("LuDecomposition", lower_lu);
  r.add_target("pjrtx_geqp3", lower_geqp3);
}

}  // namespace pjrtx::backend
