// stablehlo.convolution onto mx::conv_general, which wants input
// [N, spatial..., C], weight [O, spatial..., C/groups] and gives
// [N, spatial..., O]: operands are transposed in from the dimension numbers
// and the result out. What MLX lacks is done around it:
// - input dilation together with negative padding is wrong in MLX, so both
//   are applied explicitly (pad_array) whenever padding is negative;
// - window_reversal flips the chosen kernel dims;
// - batch_group_count becomes feature groups (the batch splits into
//   batch_group_count contiguous chunks that sit side by side in C);
// - groups on 3 spatial dims (MLX: 1-D/2-D only) run per group;
// - no spatial dims gets a dummy one; integer/bool convolutions compute in
//   f32 (MLX's conv takes floats only); complex ones are four real ones;
// - float64: MLX's conv_general computes f64 in f32 (a 3-tap f64 convolution
//   is off by ~1e-8 in MLX 0.32), so f64 is a sum over kernel positions of
//   strided input slices times the kernel tap, each an f64 matmul.
#include <algorithm>
#include <cstdint>
#include <optional>

#include "backend/mlx/ops/pad.h"

namespace pjrtx::backend {

namespace {

using namespace ops;

struct ConvPlan {
  std::vector<int> lhs_perm, rhs_perm, out_perm;
  std::vector<int> strides, pad_lo, pad_hi, lhs_dil, rhs_dil;
  std::vector<int> reversed;  // kernel spatial axes (in MLX layout) to flip
  bool explicit_pad = false;  // apply padding/lhs dilation before conv_general
  std::vector<int64_t> x_lo, x_hi, x_interior;
  int64_t groups = 1, batch_groups = 1, nsp = 0;
  mx::Dtype compute = mx::float32, out = mx::float32;
};

// x [N, S..., C] already padded and input-dilated, w [O, K..., C/groups]:
// y[n, o..., :] = sum over taps k of x[n, o*stride + k*dil, :] . w[:, k, :]^T,
// one (grouped) matmul per tap. Exact in the input type (MLX's f64 matmul).
mx::array conv_by_taps(const ConvPlan& p, const mx::array& x, const mx::array& w) {
  int nsp = static_cast<int>(p.nsp), n = x.shape(0), c = x.shape(-1), o = w.shape(0);
  int groups = static_cast<int>(std::max(p.groups, p.batch_groups));
  mx::Shape out_sp, ksz;
  for (int d = 0; d < nsp; ++d) {
    int span = (w.shape(1 + d) - 1) * p.rhs_dil[d] + 1;
    out_sp.push_back(std::max(0, (x.shape(1 + d) - span) / p.strides[d] + 1));
    ksz.push_back(w.shape(1 + d));
  }
  int64_t rows = n;
  for (int s : out_sp) rows *= s;
  mx::Shape out_shape{n};
  out_shape.insert(out_shape.end(), out_sp.begin(), out_sp.end());
  out_shape.push_back(o);
  if (rows == 0 || c == 0) return mx::zeros(out_shape, x.dtype());
  std::optional<mx::array> acc;
  std::vector<int> k(nsp, 0);
  while (true) {
    mx::Shape start(x.ndim(), 0), stop(x.shape().begin(), x.shape().end()), step(x.ndim(), 1);
    mx::Shape wstart(w.ndim(), 0), wstop(w.shape().begin(), w.shape().end());
    for (int d = 0; d < nsp; ++d) {
      start[1 + d] = k[d] * p.rhs_dil[d];
      stop[1 + d] = start[1 + d] + (out_sp[d] - 1) * p.strides[d] + 1;
      step[1 + d] = p.strides[d];
      wstart[1 + d] = k[d];
      wstop[1 + d] = k[d] + 1;
    }
    // [rows, G, C/G] x [G, C/G, O/G] -> [G, rows, O/G]
    mx::array xs = mx::reshape(mx::slice(x, start, stop, step), {static_cast<int>(rows), groups, c / groups});
    mx::array wk = mx::reshape(mx::slice(w, wstart, wstop), {groups, o / groups, c / groups});
    mx::array y = mx::matmul(mx::transpose(xs, {1, 0, 2}), mx::transpose(wk, {0, 2, 1}));
    acc = acc ? mx::add(*acc, y) : y;
    int d = nsp - 1;
    while (d >= 0 && ++k[d] == ksz[d]) k[d--] = 0;
    if (d < 0) break;
  }
  return mx::reshape(mx::transpose(*acc, {1, 0, 2}), out_shape);
}

mx::array conv(const ConvPlan& p, const mx::array& x, const mx::array& w) {
  if (p.compute == mx::float64) return conv_by_taps(p, x, w);
  auto run = [&](const mx::array& xi, const mx::array& wi, int groups) {
    return mx::conv_general(xi, wi, p.strides, p.explicit_pad ? std::vector<int>(p.nsp, 0) : p.pad_lo,
                            p.explicit_pad ? std::vector<int>(p.nsp, 0) : p.pad_hi, p.rhs_dil,
                            p.explicit_pad ? std::vector<int>(p.nsp, 1) : p.lhs_dil, groups, false);
  };
  int groups = static_cast<int>(std::max(p.groups, p.batch_groups));
  if (groups == 1 || p.nsp <= 2) return run(x, w, groups);
  // MLX groups cover 1-D and 2-D only: one convolution per group.
  int c = x.shape(-1) / groups, o = w.shape(0) / groups;
  std::vector<mx::array> parts;
  for (int g = 0; g < groups; ++g) {
    mx::Shape xs(x.ndim(), 0), xe(x.shape().begin(), x.shape().end());
    xs.back() = g * c;
    xe.back() = (g + 1) * c;
    mx::Shape ws(w.ndim(), 0), we(w.shape().begin(), w.shape().end());
    ws[0] = g * o;
    we[0] = (g + 1) * o;
    parts.push_back(run(mx::slice(x, xs, xe), mx::slice(w, ws, we), 1));
  }
  return mx::concatenate(parts, -1);
}

// One real convolution in p.compute, laid out as the result.
mx::array run_conv(const ConvPlan& p, const mx::array& a, const mx::array& b) {
    mx::array x = mx::astype(transpose_if_needed(a, p.lhs_perm), p.compute);
    mx::array w = mx::astype(transpose_if_needed(b, p.rhs_perm), p.compute);
    for (int axis : p.reversed) w = mx::flip(w, axis);
    if (p.batch_groups > 1) {
      // [N, S..., C] -> [G, N/G, S..., C] -> [N/G, S..., G, C] -> [N/G, S..., G*C]
      mx::Shape s(x.shape().begin(), x.shape().end());
      int g = static_cast<int>(p.batch_groups);
      mx::Shape split = s;
      split[0] = s[0] / g;
      split.insert(split.begin(), g);
      x = mx::reshape(x, split);
      std::vector<int> perm;
      for (int d = 1; d < static_cast<int>(split.size()) - 1; ++d) perm.push_back(d);
      perm.push_back(0);
      perm.push_back(static_cast<int>(split.size()) - 1);
      x = mx::transpose(x, perm);
      mx::Shape merged(split.begin() + 1, split.end() - 1);
      merged.push_back(g * s.back());
      x = mx::reshape(x, merged);
    }
    if (p.explicit_pad) x = pad_array(x, mx::array(0.0f), p.x_lo, p.x_hi, p.x_interior);
    mx::array y = [&] {
      if (p.nsp > 0) return conv(p, x, w);
      // No spatial dims: a dummy one of size 1.
      ConvPlan q = p;
      q.nsp = 1;
      q.strides = q.pad_lo = q.pad_hi = {0};
      q.strides = {1};
      q.lhs_dil = q.rhs_dil = {1};
      q.explicit_pad = false;
      return mx::squeeze(conv(q, mx::expand_dims(x, 1), mx::expand_dims(w, 1)), 1);
    }();
  return transpose_if_needed(y, p.out_perm);
}

Kernel lower_convolution(LowerCtx& ctx) {
  const auto& inst = ctx.inst();
  const auto& lhs = ctx.in(0);
  const auto& rhs = ctx.in(1);
  const auto& out = ctx.out(0);
  const std::string k = "dimension_numbers.";
  int64_t ib = inst.attr_int(k + "input_batch_dimension");
  int64_t ifd = inst.attr_int(k + "input_feature_dimension");
  auto is = inst.attr_ints(k + "input_spatial_dimensions", {});
  int64_t ki = inst.attr_int(k + "kernel_input_feature_dimension");
  int64_t ko = inst.attr_int(k + "kernel_output_feature_dimension");
  auto ks = inst.attr_ints(k + "kernel_spatial_dimensions", {});
  int64_t ob = inst.attr_int(k + "output_batch_dimension");
  int64_t of = inst.attr_int(k + "output_feature_dimension");
  auto os = inst.attr_ints(k + "output_spatial_dimensions", {});
  ConvPlan p;
  p.nsp = static_cast<int64_t>(is.size());
  if (ks.size() != is.size() || os.size() != is.size())
    ctx.fail("spatial dimension counts differ between input, kernel and output");
  if (p.nsp > 3) ctx.fail(p.nsp, " spatial dims: MLX convolves over at most 3");
  std::vector<int64_t> ones(p.nsp, 1), zeros(p.nsp, 0);
  auto strides = inst.attr_ints("window_strides", ones);
  auto lhs_dil = inst.attr_ints("lhs_dilation", ones);
  auto rhs_dil = inst.attr_ints("rhs_dilation", ones);
  auto reversal = inst.attr_ints("window_reversal", zeros);
  std::vector<int64_t> lo(p.nsp, 0), hi(p.nsp, 0);
  if (inst.has("padding")) {
    auto pad = inst.attr_dense_ints("padding");
    if (static_cast<int64_t>(pad.size()) != 2 * p.nsp) ctx.fail("padding must be s64[", p.nsp, ",2]");
    for (int64_t d = 0; d < p.nsp; ++d) {
      lo[d] = pad[2 * d];
      hi[d] = pad[2 * d + 1];
    }
  }
  p.groups = inst.attr_int("feature_group_count", 1);
  p.batch_groups = inst.attr_int("batch_group_count", 1);
  if (p.groups > 1 && p.batch_groups > 1) ctx.fail("feature and batch groups at once");

  p.lhs_perm.push_back(static_cast<int>(ib));
  for (int64_t d : is) p.lhs_perm.push_back(static_cast<int>(d));
  p.lhs_perm.push_back(static_cast<int>(ifd));
  p.rhs_perm.push_back(static_cast<int>(ko));
  for (int64_t d : ks) p.rhs_perm.push_back(static_cast<int>(d));
  p.rhs_perm.push_back(static_cast<int>(ki));
  p.out_perm.assign(out.rank(), 0);
  for (int64_t r = 0; r < out.rank(); ++r) {
    if (r == ob) p.out_perm[r] = 0;
    else if (r == of) p.out_perm[r] = static_cast<int>(p.nsp + 1);
    else {
      auto it = std::find(os.begin(), os.end(), r);
      if (it == os.end()) ctx.fail("output dimension ", r, " is not mapped");
      p.out_perm[r] = static_cast<int>(1 + (it - os.begin()));
    }
  }
  bool negative = false;
  for (int64_t d = 0; d < p.nsp; ++d) {
    p.strides.push_back(static_cast<int>(strides[d]));
    p.pad_lo.push_back(static_cast<int>(lo[d]));
    p.pad_hi.push_back(static_cast<int>(hi[d]));
    p.lhs_dil.push_back(static_cast<int>(lhs_dil[d]));
    p.rhs_dil.push_back(static_cast<int>(rhs_dil[d]));
    if (reversal[d]) p.reversed.push_back(static_cast<int>(1 + d));
    negative |= lo[d] < 0 || hi[d] < 0;
  }
  // conv_by_taps (f64) takes the input padded and dilated.
  bool f64 = out.dtype == DType::kF64 || ctx.in(0).dtype == DType::kF64 || ctx.in(1).dtype == DType::kF64;
  p.explicit_pad = negative || f64;
  if (p.explicit_pad) {
    p.x_lo.assign(p.nsp + 2, 0);
    p.x_hi.assign(p.nsp + 2, 0);
    p.x_interior.assign(p.nsp + 2, 0);
    for (int64_t d = 0; d < p.nsp; ++d) {
      p.x_lo[1 + d] = lo[d];
      p.x_hi[1 + d] = hi[d];
      p.x_interior[1 + d] = lhs_dil[d] - 1;
    }
  }
  p.out = to_mlx(out.dtype);
  p.compute = f64 ? mx::float64 : compiler::is_float(out.dtype) ? p.out : mx::float32;  // ints, bool, complex parts
  bool empty = out.num_elements() == 0 || lhs.num_elements() == 0 || rhs.num_elements() == 0;
  mx::Shape out_shape = to_mlx_shape(out.shape);
  bool is_complex = compiler::is_complex(out.dtype);
  return binary([p, empty, out_shape, is_complex](const mx::array& a, const mx::array& b) {
    if (empty) return mx::zeros(out_shape, p.out);
    if (is_complex) {
      // MLX convolves real types only: four real convolutions,
      // (ar + i ai) * (br + i bi) = (ar*br - ai*bi) + i (ar*bi + ai*br).
      mx::array ar = mx::real(a), ai = mx::imag(a), br = mx::real(b), bi = mx::imag(b);
      mx::array re = mx::subtract(run_conv(p, ar, br), run_conv(p, ai, bi));
      mx::array im = mx::add(run_conv(p, ar, bi), run_conv(p, ai, br));
      return make_complex(re, im);
    }
    mx::array y = run_conv(p, a, b);
    return y.dtype() == p.out ? y : mx::astype(y, p.out);
  });
}

}  // namespace

void register_convolution_ops(Registry& r) {
  r.add(compiler::Opcode::convolution, lower_convolution);
}

}  // namespace pjrtx::backend
