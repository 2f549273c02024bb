// stablehlo.reduce_window.
//
// JAX's cumsum/cumprod/cummax/cummin arrive as a window as long as the axis
// with padding (n-1, 0) (or (0, n-1) reversed) and an identity init: those
// map to MLX's cumulative ops, O(n) instead of O(n * window).
//
// Everything else (pooling) pads the input (edge padding, base dilation as
// interior padding), takes one strided slice per window offset, and
// combines the slices into the init value: a recognised body through MLX,
// any other body by running the region batched on the slices. Padding
// elements are skipped, as XLA:CPU does (so a non-identity init counts
// once), through a mask of the real elements unless the init is the
// body's identity.
#include <numeric>

#include "backend/mlx/ops/combiner.h"
#include "backend/mlx/ops/window.h"

namespace pjrtx::backend {

namespace {

using namespace ops;

// The axis and direction when the window is a cumulative scan.
std::optional<std::pair<int, bool>> cumulative_axis(const Window& w, const compiler::Shape& shape) {
  int axis = -1;
  bool reverse = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (w.strides[d] != 1 || w.base_dil[d] != 1 || w.win_dil[d] != 1) return std::nullopt;
    if (w.dims[d] == 1 && w.pad_lo[d] == 0 && w.pad_hi[d] == 0) continue;
    int64_t n = shape[d];
    if (axis >= 0 || w.dims[d] != n || n < 2) return std::nullopt;
    if (w.pad_lo[d] == n - 1 && w.pad_hi[d] == 0) reverse = false;
    else if (w.pad_lo[d] == 0 && w.pad_hi[d] == n - 1) reverse = true;
    else return std::nullopt;
    axis = static_cast<int>(d);
  }
  if (axis < 0) return std::nullopt;
  return std::make_pair(axis, reverse);
}

mx::array cumulative(Combiner c, const mx::array& x, int axis, bool reverse) {
  switch (c) {
    case Combiner::kAdd: return mx::cumsum(x, axis, reverse, true);
    case Combiner::kMul: return mx::cumprod(x, axis, reverse, true);
    case Combiner::kMax: case Combiner::kOr: return mx::cummax(x, axis, reverse, true);
    case Combiner::kMin: case Combiner::kAnd: return mx::cummin(x, axis, reverse, true);
  }
  return x;
}

Kernel lower_reduce_window(LowerCtx& ctx) {
  const auto& inst = ctx.inst();
  if (ctx.num_in() != 2 || ctx.num_out() != 1)
    ctx.fail("reduce_window of ", ctx.num_out(), " operands at once is not supported yet");
  const auto& in = ctx.in(0);
  const auto& out = ctx.out(0);
  int64_t rank = in.rank();
  Window w = read_window(ctx, rank);
  auto combiner = match_combiner(inst.regions.at(0), in.dtype);
  mx::Dtype dt = to_mlx(out.dtype);

  auto init_value = ctx.constant_value(inst.operands[1]);
  bool identity_init = combiner && init_value && is_identity(*combiner, *init_value, in.dtype);
  // Cumulative fast path (identity init only: padding contributes nothing).
  if (auto cum = cumulative_axis(w, in.shape); cum && identity_init) {
    {
      auto [axis, reverse] = *cum;
      Combiner c = *combiner;
      bool is_pred = in.dtype == DType::kPred;
      return binary([=](const mx::array& x, const mx::array&) {
        mx::array y = is_pred ? mx::astype(x, mx::uint8) : x;
        mx::array r = cumulative(c, y, axis, reverse);
        return r.dtype() == dt ? r : mx::astype(r, dt);
      });
    }
  }

  // General path: pad (edges + base dilation), then combine strided slices.
  mx::Shape spread(rank), padded(rank), place_start(rank), place_stop(rank), place_step(rank);
  bool needs_pad = false;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = in.shape[d];
    int64_t s = n == 0 ? 0 : (n - 1) * w.base_dil[d] + 1;
    int64_t p = s + w.pad_lo[d] + w.pad_hi[d];
    if (w.pad_lo[d] < 0 || w.pad_hi[d] < 0) ctx.fail("negative reduce_window padding is not supported yet");
    padded[d] = static_cast<int32_t>(p);
    place_start[d] = static_cast<int32_t>(w.pad_lo[d]);
    place_stop[d] = static_cast<int32_t>(w.pad_lo[d] + s);
    place_step[d] = static_cast<int32_t>(w.base_dil[d]);
    needs_pad |= p != n;
  }
  // One slice per window offset.
  int64_t offsets = 1;
  for (int64_t d = 0; d < rank; ++d) offsets *= w.dims[d];
  if (offsets > 4096)
    ctx.fail("windows of ", offsets, " elements are not supported outside the cumulative fast path");
  std::vector<std::pair<mx::Shape, mx::Shape>> slices;  // (start, stop); strides shared
  mx::Shape strides = to_shape(w.strides);
  for (int64_t o = 0; o < offsets; ++o) {
    mx::Shape start(rank), stop(rank);
    int64_t rem = o;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t k = rem % w.dims[d];
      rem /= w.dims[d];
      int64_t s0 = k * w.win_dil[d];
      start[d] = static_cast<int32_t>(s0);
      stop[d] = static_cast<int32_t>(out.shape[d] == 0 ? s0 : s0 + (out.shape[d] - 1) * w.strides[d] + 1);
    }
    slices.emplace_back(start, stop);
  }
  mx::Shape out_shape = to_mlx_shape(out.shape);
  bool use_mask = needs_pad && !identity_init;
  mx::array mask = mx::array(true);
  if (use_mask && in.num_elements() > 0)
    mask = mx::slice_update(mx::zeros(padded, mx::bool_), mx::ones(to_mlx_shape(in.shape), mx::bool_),
                            place_start, place_stop, place_step);
  std::shared_ptr<const RegionProgram> body;
  if (!combiner) body = ctx.lower_region(inst.regions.at(0));
  std::optional<Combiner> c = combiner;
  bool empty = out.num_elements() == 0;
  return [=](RunState& st, const Arrays& args) {
    const mx::array& x = args[0];
    const mx::array& init = args[1];
    if (empty) return Arrays{mx::broadcast_to(init, out_shape)};
    mx::array base = x;
    if (needs_pad) {
      mx::array canvas = mx::broadcast_to(init, padded);
      base = in.num_elements() == 0 ? canvas
                                    : mx::slice_update(canvas, x, place_start, place_stop, place_step);
    }
    mx::array acc = mx::broadcast_to(init, out_shape);
    for (const auto& [start, stop] : slices) {
      mx::array s = mx::slice(base, start, stop, strides);
      mx::array next = c ? combine(*c, acc, s) : body->run_batched(st, {acc, s})[0];
      acc = use_mask ? mx::where(mx::slice(mask, start, stop, strides), next, acc) : next;
    }
    return Arrays{acc};
  };
}

}  // namespace

void register_reduce_window_ops(Registry& r) {
  r.add(compiler::Opcode::reduce_window, lower_reduce_window);
}

}  // namespace pjrtx::backend
