// stablehlo.pad with negative edge padding (cropping) and interior padding.
// MLX's pad has neither, so: spread the operand with interior gaps, crop for
// negative edges, then write it into a full array of the padding value.
#include "backend/mlx/ops/common.h"

namespace pjrtx::backend {

namespace {

using namespace ops;

Kernel lower_pad(LowerCtx& ctx) {
  const auto& in = ctx.in(0);
  const auto& out = ctx.out(0);
  auto lo = ctx.inst().attr_ints("edge_padding_low");
  auto hi = ctx.inst().attr_ints("edge_padding_high");
  auto interior = ctx.inst().attr_ints("interior_padding");
  int64_t rank = in.rank();
  if (static_cast<int64_t>(lo.size()) != rank || hi.size() != lo.size() ||
      interior.size() != lo.size())
    ctx.fail("padding needs one entry per dim of ", in.str());
  bool has_interior = false;
  mx::Shape spread(rank), crop_start(rank), crop_stop(rank), place_start(rank), place_stop(rank),
      strides(rank), spread_stop(rank);
  int64_t placed_elems = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (interior[d] < 0) ctx.fail("negative interior padding ", interior[d]);
    has_interior |= interior[d] > 0;
    int64_t n = in.shape[d];
    int64_t s = n == 0 ? 0 : n + (n - 1) * interior[d];
    spread[d] = static_cast<int32_t>(s);
    strides[d] = static_cast<int32_t>(interior[d] + 1);
    spread_stop[d] = static_cast<int32_t>(s);
    int64_t c0 = std::min(std::max<int64_t>(0, -lo[d]), s);
    int64_t c1 = std::max(c0, s - std::max<int64_t>(0, -hi[d]));
    crop_start[d] = static_cast<int32_t>(c0);
    crop_stop[d] = static_cast<int32_t>(c1);
    int64_t p0 = std::max<int64_t>(0, lo[d]);
    place_start[d] = static_cast<int32_t>(p0);
    place_stop[d] = static_cast<int32_t>(p0 + (c1 - c0));
    placed_elems *= c1 - c0;
    if (p0 + (c1 - c0) > out.shape[d]) ctx.fail("padding does not produce ", out.str());
  }
  mx::Shape out_shape = to_mlx_shape(out.shape);
  return binary([=](const mx::array& x, const mx::array& value) {
    mx::array result = mx::broadcast_to(value, out_shape);
    if (placed_elems == 0 || x.size() == 0) return result;
    mx::array body = x;
    if (has_interior) {
      mx::array canvas = mx::broadcast_to(value, spread);
      body = mx::slice_update(canvas, x, mx::Shape(rank, 0), spread_stop, strides);
    }
    body = mx::slice(body, crop_start, crop_stop);
    return mx::slice_update(result, body, place_start, place_stop);
  });
}

}  // namespace

void register_pad_ops(Registry& r) { r.add(compiler::Opcode::pad, lower_pad); }

}  // namespace pjrtx::backend
