// eigh, svd, eig and schur through the LAPACK routines XLA:CPU calls
// (host/lapack.h): syevd/heevd, gesdd, geev and gees with jaxlib's arguments (its
// job letters; its workspace sizes: the formulas it uses for syevd/heevd,
// LAPACK's own query for gesdd and geev, which picks gesdd's path) on a
// column-major copy of each matrix, as XLA hands LAPACK its operand. The
// results are XLA:CPU's bit for bit, the conventions included that a
// decomposition leaves free: the signs and phases of vectors and the order
// of eig's eigenvalues. As XLA's CPU rules, a matrix LAPACK fails on (info
// != 0) gives NaN outputs, and so does non-finite input, which is not
// passed to LAPACK (gesdd and geev refuse it; for eigh, the triangle LAPACK
// reads decides).
#include <algorithm>
#include <climits>
#include <cmath>
#include <complex>
#include <limits>
#include <type_traits>
#include <vector>

#include "backend/mlx/dtype.h"
#include "backend/mlx/host/host_kernel.h"
#include "backend/mlx/host/lapack.h"
#include "backend/mlx/host/linalg_kernels.h"
#include "backend/mlx/ops/common.h"
#include "backend/mlx/ops/linalg_eig_util.h"
#include "backend/mlx/ops/linalg_householder.h"

namespace pjrtx::backend::ops {

namespace {

namespace lp = lapack;
using householder::OutTypes;
using householder::out_types;
using lp::cd;
using lp::cf;

using linalg::real_t;
template <typename T>
constexpr bool kComplex = linalg::kIsComplex<T>;

template <typename T>
T nan_of() {
  const real_t<T> q = std::numeric_limits<real_t<T>>::quiet_NaN();
  if constexpr (kComplex<T>) return T(q, q);
  else return q;
}

// The routine of the table for T: pick(f.sgeev, f.dgeev, f.cgeev, f.zgeev).
template <typename T, typename S, typename D, typename C, typename Z>
auto pick(S* s, D* d, C* c, Z* z) {
  if constexpr (std::is_same_v<T, float>) return s;
  else if constexpr (std::is_same_v<T, double>) return d;
  else if constexpr (std::is_same_v<T, cf>) return c;
  else return z;
}

template <typename F>
void by_type(compiler::DType t, F&& f) {
  switch (t) {
    case compiler::DType::kF32: f(float{}); break;
    case compiler::DType::kF64: f(double{}); break;
    case compiler::DType::kC64: f(cf{}); break;
    default: f(cd{}); break;
  }
}

// Row-major rows x cols -> column-major (leading dimension rows); whether
// every element is finite.
template <typename T>
bool to_col_major(const T* src, int rows, int cols, T* dst) {
  bool finite = true;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const T x = src[static_cast<size_t>(r) * cols + c];
      finite = finite && std::isfinite(std::abs(x));
      dst[static_cast<size_t>(c) * rows + r] = x;
    }
  return finite;
}

// Column-major with leading dimension ld -> row-major rows x cols.
template <typename T>
void from_col_major(const T* src, int ld, int rows, int cols, T* dst) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      dst[static_cast<size_t>(r) * cols + c] = src[static_cast<size_t>(c) * ld + r];
}

// A LAPACK workspace query's answer as a size.
template <typename T>
int work_size(T query, const char* routine) {
  const double w = static_cast<double>(std::real(query));
  if (!(w <= static_cast<double>(INT_MAX)))
    throw std::runtime_error(std::string("pjrtx: LAPACK ") + routine +
                             " asks for a workspace beyond its 32-bit sizes");
  return std::max(1, static_cast<int>(w));
}

// ---- eigh: syevd / heevd ------------------------------------------------------

template <typename T>
void run_eigh(const lp::Functions& f, const Arrays& in, Arrays& out, int n, bool lower) {
  using R = real_t<T>;
  const T* a = in[0].data<T>();
  T* v_out = out[0].data<T>();
  R* w_out = out[1].data<R>();
  const size_t nn = static_cast<size_t>(n) * n, batch = in[0].nbytes() / sizeof(T) / nn;
  char jobz = 'V', uplo = lower ? 'L' : 'U';
  int lda = std::max(n, 1), info = 0;
  // jaxlib's sizes (lapack_kernels.cc, eig::Get*WorkspaceSize).
  int lwork = kComplex<T> ? 2 * n + n * n : 1 + 6 * n + 2 * n * n;
  int lrwork = 1 + 5 * n + 2 * n * n, liwork = 3 + 5 * n;
  std::vector<T> m(nn), work(lwork);
  std::vector<R> rwork(kComplex<T> ? lrwork : 0);
  std::vector<int> iwork(liwork);
  for (size_t b = 0; b < batch; ++b) {
    const T* x = a + b * nn;
    to_col_major(x, n, n, m.data());
    bool ok = true;  // LAPACK reads one triangle only
    for (int r = 0; r < n; ++r)
      for (int c = lower ? 0 : r; c < (lower ? r + 1 : n); ++c)
        ok = ok && std::isfinite(std::abs(x[static_cast<size_t>(r) * n + c]));
    if (ok) {
      if constexpr (kComplex<T>)
        pick<T>(f.ssyevd, f.dsyevd, f.cheevd, f.zheevd)(&jobz, &uplo, &n, m.data(), &lda,
                                                         w_out + b * n, work.data(), &lwork,
                                                         rwork.data(), &lrwork, iwork.data(),
                                                         &liwork, &info);
      else
        pick<T>(f.ssyevd, f.dsyevd, f.cheevd, f.zheevd)(&jobz, &uplo, &n, m.data(), &lda,
                                                         w_out + b * n, work.data(), &lwork,
                                                         iwork.data(), &liwork, &info);
      ok = info == 0;
    }
    if (ok) {
      from_col_major(m.data(), n, n, n, v_out + b * nn);
    } else {
      std::fill(v_out + b * nn, v_out + (b + 1) * nn, nan_of<T>());
      std::fill(w_out + b * n, w_out + (b + 1) * n, nan_of<R>());
    }
  }
}

// ---- svd: gesdd ---------------------------------------------------------------

template <typename T>
void run_svd(const lp::Functions& f, const Arrays& in, Arrays& out, int m, int n, bool full,
             bool uv) {
  using R = real_t<T>;
  auto* fn = pick<T>(f.sgesdd, f.dgesdd, f.cgesdd, f.zgesdd);
  const int k = std::min(m, n), mx = std::max(m, n);
  const int ucols = full ? m : k, vtrows = full ? n : k;
  char jobz = uv ? (full ? 'A' : 'S') : 'N';
  int lda = std::max(m, 1), ldu = std::max(m, 1), ldvt = std::max(vtrows, 1), info = 0;
  std::vector<T> a(static_cast<size_t>(m) * n), u(uv ? static_cast<size_t>(ldu) * ucols : 1),
      vt(uv ? static_cast<size_t>(ldvt) * n : 1);
  std::vector<R> s(k);
  std::vector<int> iwork(8 * static_cast<size_t>(k));
  // jaxlib's rwork size (svd::GetRealWorkspaceSize).
  const size_t lrwork =
      !kComplex<T> ? 0
      : uv ? std::max<size_t>(5 * size_t(k) * k + 5 * size_t(k),
                              2 * size_t(mx) * k + 2 * size_t(k) * k + k)
           : 7 * size_t(k);
  std::vector<R> rwork(std::max<size_t>(lrwork, 1));
  auto call = [&](T* work, int* lwork) {
    if constexpr (kComplex<T>)
      fn(&jobz, &m, &n, a.data(), &lda, s.data(), u.data(), &ldu, vt.data(), &ldvt, work, lwork,
         rwork.data(), iwork.data(), &info);
    else
      fn(&jobz, &m, &n, a.data(), &lda, s.data(), u.data(), &ldu, vt.data(), &ldvt, work, lwork,
         iwork.data(), &info);
  };
  T query{};
  int lwork = -1;
  call(&query, &lwork);
  lwork = work_size(query, "gesdd");
  std::vector<T> work(lwork);
  const T* x = in[0].data<T>();
  R* s_out = out[0].data<R>();
  T* u_out = uv ? out[1].data<T>() : nullptr;
  T* vt_out = uv ? out[2].data<T>() : nullptr;
  const size_t mn = static_cast<size_t>(m) * n, batch = in[0].nbytes() / sizeof(T) / mn;
  const size_t usz = static_cast<size_t>(m) * ucols, vtsz = static_cast<size_t>(vtrows) * n;
  for (size_t b = 0; b < batch; ++b) {
    bool ok = to_col_major(x + b * mn, m, n, a.data());
    if (ok) {
      call(work.data(), &lwork);
      ok = info == 0;
    }
    if (!ok) {
      std::fill(s_out + b * k, s_out + (b + 1) * k, nan_of<R>());
      if (uv) {
        std::fill(u_out + b * usz, u_out + (b + 1) * usz, nan_of<T>());
        std::fill(vt_out + b * vtsz, vt_out + (b + 1) * vtsz, nan_of<T>());
      }
      continue;
    }
    std::copy(s.begin(), s.end(), s_out + b * k);
    if (uv) {
      from_col_major(u.data(), ldu, m, ucols, u_out + b * usz);
      from_col_major(vt.data(), ldvt, vtrows, n, vt_out + b * vtsz);
    }
  }
}

// ---- eig: geev ----------------------------------------------------------------

// geev's real eigenvectors of a complex pair share two columns (re, im);
// jaxlib's UnpackEigenvectors spreads them into v and conj(v). Column-major.
template <typename R>
void unpack(int n, const R* wi, const R* packed, std::complex<R>* unpacked) {
  for (int j = 0; j < n;) {
    const size_t cj = static_cast<size_t>(j) * n;
    if (wi[j] == 0 || std::isnan(wi[j])) {
      for (int i = 0; i < n; ++i) unpacked[cj + i] = {packed[cj + i], R(0)};
      ++j;
    } else {
      for (int i = 0; i < n; ++i) {
        const R re = packed[cj + i], im = packed[cj + n + i];
        unpacked[cj + i] = {re, im};
        unpacked[cj + n + i] = {re, -im};
      }
      j += 2;
    }
  }
}

template <typename T>
void run_eig(const lp::Functions& f, const Arrays& in, Arrays& out, int n, bool left, bool right) {
  using R = real_t<T>;
  using C = std::complex<R>;
  auto* fn = pick<T>(f.sgeev, f.dgeev, f.cgeev, f.zgeev);
  char jobvl = left ? 'V' : 'N', jobvr = right ? 'V' : 'N';
  int ld = std::max(n, 1), info = 0;
  const size_t nn = static_cast<size_t>(n) * n;
  std::vector<T> a(nn), vl(nn), vr(nn);
  std::vector<R> wr(n), wi(n), rwork(2 * static_cast<size_t>(std::max(n, 1)));
  std::vector<C> w(n), unpacked(nn);
  auto call = [&](T* work, int* lwork) {
    if constexpr (kComplex<T>)
      fn(&jobvl, &jobvr, &n, a.data(), &ld, w.data(), vl.data(), &ld, vr.data(), &ld, work, lwork,
         rwork.data(), &info);
    else
      fn(&jobvl, &jobvr, &n, a.data(), &ld, wr.data(), wi.data(), vl.data(), &ld, vr.data(), &ld,
         work, lwork, &info);
  };
  T query{};
  int lwork = -1;
  call(&query, &lwork);
  lwork = work_size(query, "geev");
  std::vector<T> work(lwork);
  const T* x = in[0].data<T>();
  C* w_out = out[0].data<C>();
  C* vl_out = left ? out[1].data<C>() : nullptr;
  C* vr_out = right ? out[left ? 2 : 1].data<C>() : nullptr;
  const size_t batch = in[0].nbytes() / sizeof(T) / nn;
  auto emit = [&](const T* v, C* dst) {  // column-major eigenvectors -> row-major output
    if constexpr (kComplex<T>) {
      from_col_major(v, n, n, n, dst);
    } else {
      unpack(n, wi.data(), v, unpacked.data());
      from_col_major(unpacked.data(), n, n, n, dst);
    }
  };
  for (size_t b = 0; b < batch; ++b) {
    bool ok = to_col_major(x + b * nn, n, n, a.data());
    if (ok) {
      call(work.data(), &lwork);
      ok = info == 0;
    }
    if (!ok) {
      std::fill(w_out + b * n, w_out + (b + 1) * n, nan_of<C>());
      if (left) std::fill(vl_out + b * nn, vl_out + (b + 1) * nn, nan_of<C>());
      if (right) std::fill(vr_out + b * nn, vr_out + (b + 1) * nn, nan_of<C>());
      continue;
    }
    for (int j = 0; j < n; ++j) {
      if constexpr (kComplex<T>) w_out[b * n + j] = w[j];
      else w_out[b * n + j] = C(wr[j], wi[j]);
    }
    if (left) emit(vl.data(), vl_out + b * nn);
    if (right) emit(vr.data(), vr_out + b * nn);
  }
}

// ---- schur: gees (sort = 'N') ------------------------------------------------

template <typename T>
void run_schur(const lp::Functions& f, const Arrays& in, Arrays& out, int n, bool vectors) {
  using R = real_t<T>;
  auto* fn = pick<T>(f.sgees, f.dgees, f.cgees, f.zgees);
  char jobvs = vectors ? 'V' : 'N', sort = 'N';
  int lda = std::max(n, 1), ldvs = vectors ? lda : 1, sdim = 0, info = 0;
  int bwork = 0;  // not referenced with sort = 'N'
  const size_t nn = static_cast<size_t>(n) * n;
  std::vector<T> m(nn), z(vectors ? nn : 1);
  std::vector<R> wr(n), wi(n), rwork(std::max(n, 1));
  std::vector<T> w(n);
  auto call = [&](T* work, int* lwork) {
    if constexpr (kComplex<T>)
      fn(&jobvs, &sort, nullptr, &n, m.data(), &lda, &sdim, w.data(), z.data(), &ldvs, work, lwork,
         rwork.data(), &bwork, &info);
    else
      fn(&jobvs, &sort, nullptr, &n, m.data(), &lda, &sdim, wr.data(), wi.data(), z.data(), &ldvs,
         work, lwork, &bwork, &info);
  };
  T query{};
  int lwork = -1;
  call(&query, &lwork);
  lwork = work_size(query, "gees");
  std::vector<T> work(lwork);
  const T* a = in[0].data<T>();
  T* t_out = out[0].data<T>();
  T* z_out = vectors ? out[1].data<T>() : nullptr;
  const size_t batch = in[0].nbytes() / sizeof(T) / nn;
  for (size_t b = 0; b < batch; ++b) {
    bool ok = to_col_major(a + b * nn, n, n, m.data());
    if (ok) {
      call(work.data(), &lwork);
      ok = info == 0;
    }
    if (!ok) {
      std::fill(t_out + b * nn, t_out + (b + 1) * nn, nan_of<T>());
      if (vectors) std::fill(z_out + b * nn, z_out + (b + 1) * nn, nan_of<T>());
      continue;
    }
    from_col_major(m.data(), n, n, n, t_out + b * nn);
    if (vectors) from_col_major(z.data(), n, n, n, z_out + b * nn);
  }
}

// The operand's m x n must fit LAPACK's 32-bit sizes.
void check_lapack_size(LowerCtx& ctx, const char* op, int64_t rows, int64_t cols) {
  if (rows * cols > INT_MAX)
    ctx.fail("pjrtx_", op, " of ", ctx.in(0).str(), ": a matrix of ", rows, "x", cols,
             " is beyond LAPACK's 32-bit sizes");
}

// A host kernel that runs run(T{}, table, inputs, outputs) for the
// operand's element type T.
template <typename Run>
Kernel lapack_kernel(LowerCtx& ctx, const char* name, Run run) {
  const compiler::DType t = ctx.in(0).dtype;
  const OutTypes o = out_types(ctx);
  const lp::Functions& f = lp::functions();
  return [=, &f](RunState&, const Arrays& in) {
    return host_kernel(name, in, o.shapes, o.dtypes, [=, &f](const Arrays& ins, Arrays& outs) {
      by_type(t, [&](auto tag) { run(tag, f, ins, outs); });
    });
  };
}

}  // namespace

bool use_lapack() { return lapack::functions().missing.empty(); }

Kernel lower_eigh_lapack(LowerCtx& ctx, bool lower) {
  const int n = static_cast<int>(ctx.in(0).shape.back());
  check_lapack_size(ctx, "eigh", n, n);
  return lapack_kernel(ctx, "pjrtx_eigh",
                       [=](auto tag, const lp::Functions& f, const Arrays& ins, Arrays& outs) {
                         run_eigh<decltype(tag)>(f, ins, outs, n, lower);
                       });
}

Kernel lower_svd_lapack(LowerCtx& ctx, bool full, bool uv) {
  const auto& shape = ctx.in(0).shape;
  const int m = static_cast<int>(shape[shape.size() - 2]);
  const int n = static_cast<int>(shape.back());
  check_lapack_size(ctx, "svd", m, n);
  const int64_t big = std::max(m, n);
  if (uv && full) check_lapack_size(ctx, "svd", big, big);  // u or vt is big x big
  return lapack_kernel(ctx, "pjrtx_svd",
                       [=](auto tag, const lp::Functions& f, const Arrays& ins, Arrays& outs) {
                         run_svd<decltype(tag)>(f, ins, outs, m, n, full, uv);
                       });
}

Kernel lower_schur_lapack(LowerCtx& ctx, bool vectors) {
  const int n = static_cast<int>(ctx.in(0).shape.back());
  check_lapack_size(ctx, "schur", n, n);
  return lapack_kernel(ctx, "pjrtx_schur",
                       [=](auto tag, const lp::Functions& f, const Arrays& ins, Arrays& outs) {
                         run_schur<decltype(tag)>(f, ins, outs, n, vectors);
                       });
}

Kernel lower_eig_lapack(LowerCtx& ctx, bool left, bool right) {
  const int n = static_cast<int>(ctx.in(0).shape.back());
  check_lapack_size(ctx, "eig", n, n);
  return lapack_kernel(ctx, "pjrtx_eig",
                       [=](auto tag, const lp::Functions& f, const Arrays& ins, Arrays& outs) {
                         run_eig<decltype(tag)>(f, ins, outs, n, left, right);
                       });
}

}  // namespace pjrtx::backend::ops
