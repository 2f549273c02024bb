#include "backend/mlx/ops/linalg_eig_util.h"

#include <mlx/linalg.h>
#include <mlx/ops.h>

#include <cmath>
#include <sstream>

#include "backend/mlx/dtype.h"

namespace pjrtx::backend::ops {

using compiler::DType;

mx::Stream cpu_stream() { return mx::default_stream(mx::Device::cpu); }

bool config_flag(LowerCtx& ctx, const std::string& key) {
  std::string cfg = ctx.inst().attr_str("backend_config", "");
  std::istringstream in(cfg);
  std::string item;
  while (std::getline(in, item, ';')) {
    auto eq = item.find('=');
    if (eq != std::string::npos && item.substr(0, eq) == key) return item.substr(eq + 1) == "1";
  }
  ctx.fail("custom_call @", ctx.inst().attr_str("call_target_name"), " needs flag '", key,
           "' in backend_config \"", cfg, "\"");
}

void check_linalg_types(LowerCtx& ctx, const char* op) {
  DType t = ctx.in(0).dtype;
  if (t != DType::kF32 && t != DType::kF64 && t != DType::kC64 && t != DType::kC128)
    ctx.fail("pjrtx_", op, " of ", ctx.in(0).str(), ": only f32, f64, c64 and c128 are supported");
}

Kernel empty_results(LowerCtx& ctx) {
  std::vector<mx::Shape> shapes;
  std::vector<mx::Dtype> dtypes;
  for (size_t i = 0; i < ctx.num_out(); ++i) {
    shapes.push_back(storage_shape(ctx.out(i)));
    dtypes.push_back(to_mlx(ctx.out(i).dtype));
  }
  return [shapes, dtypes](RunState&, const Arrays&) {
    Arrays out;
    for (size_t i = 0; i < shapes.size(); ++i) out.push_back(mx::zeros(shapes[i], dtypes[i]));
    return out;
  };
}

mx::array nonfinite_matrices(const mx::array& x, mx::Stream s) {
  mx::array finite = mx::issubdtype(x.dtype(), mx::complexfloating)
                         ? mx::logical_and(mx::isfinite(mx::real(x, s), s),
                                           mx::isfinite(mx::imag(x, s), s), s)
                         : mx::isfinite(x, s);
  return mx::logical_not(mx::all(finite, std::vector<int>{-2, -1}, false, s), s);
}

namespace {

// bad[batch...] -> bad[batch..., 1, ...] broadcastable against y.
mx::array expand_to(const mx::array& bad, const mx::array& y, mx::Stream s) {
  mx::Shape shape = bad.shape();
  while (shape.size() < y.shape().size()) shape.push_back(1);
  return mx::reshape(bad, shape, s);
}

}  // namespace

mx::array zero_where(const mx::array& bad, const mx::array& x, mx::Stream s) {
  return mx::where(expand_to(bad, x, s), mx::zeros({}, x.dtype(), s), x, s);
}

mx::array nan_where(const mx::array& bad, const mx::array& y, mx::Stream s) {
  mx::array nan = mx::array(NAN, mx::float32);
  if (y.dtype() == mx::complex64) {
    nan = mx::squeeze(mx::view(mx::stack({nan, nan}, -1, s), mx::complex64, s), -1, s);
  } else {
    nan = mx::astype(nan, y.dtype(), s);
  }
  return mx::where(expand_to(bad, y, s), nan, y, s);
}

mx::array last_dims_slice(const mx::array& x, int rows, int cols, mx::Stream s) {
  mx::Shape start(x.ndim(), 0);
  mx::Shape stop = x.shape();
  stop[x.ndim() - 2] = rows;
  stop[x.ndim() - 1] = cols;
  return mx::slice(x, start, stop, s);
}

mx::array complex_inverse(const mx::array& m, mx::Stream s) {
  int n = m.shape(-1);
  mx::array x = mx::real(m, s), y = mx::imag(m, s);
  mx::array big = mx::concatenate({mx::concatenate({x, mx::negative(y, s)}, -1, s),
                                   mx::concatenate({y, x}, -1, s)},
                                  -2, s);
  mx::array ib = mx::linalg::inv(big, s);
  mx::Shape start(ib.ndim(), 0), stop = ib.shape();
  stop[ib.ndim() - 1] = n;
  stop[ib.ndim() - 2] = n;
  mx::array p = mx::slice(ib, start, stop, s);
  start[ib.ndim() - 2] = n;
  stop[ib.ndim() - 2] = 2 * n;
  mx::array q = mx::slice(ib, start, stop, s);
  return mx::squeeze(mx::view(mx::stack({p, q}, -1, s), mx::complex64, s), -1, s);
}

mx::array geev_normalize(const mx::array& v, mx::Stream s) {
  mx::array mag = mx::abs(v, s);
  mx::array norm = mx::sqrt(mx::sum(mx::square(mag, s), -2, true, s), s);
  mx::array u = mx::divide(v, mx::astype(norm, v.dtype(), s), s);
  mx::array k = mx::argmax(mag, -2, true, s);
  mx::array top = mx::take_along_axis(u, k, -2, s);
  mx::array top_abs = mx::abs(top, s);
  // conj(top) / |top| rotates the top component onto the positive reals.
  mx::array phase = mx::where(mx::equal(top_abs, mx::zeros({}, top_abs.dtype(), s), s),
                              mx::ones({}, v.dtype(), s),
                              mx::divide(mx::conjugate(top, s), mx::astype(top_abs, v.dtype(), s), s), s);
  return mx::multiply(u, phase, s);
}

}  // namespace pjrtx::backend::ops
