// stablehlo.pad with negative edge padding (cropping) and interior padding.
// MLX's pad has neither, so: spread the operand with interior gaps, crop for
// negative edges, then write it into a full array of the padding value.
#include "backend/mlx/ops/pad.h"

#include <cstdint>

namespace pjrtx::backend {

namespace ops {

mx::array pad_array(const mx::array& x, const mx::array& value, const std::vector<int64_t>& lo,
                    const std::vector<int64_t>& hi, const std::vector<int64_t>& interior) {
  size_t rank = x.ndim();
  bool has_interior = false;
  mx::Shape spread(rank), crop_start(rank), crop_stop(rank), place_start(rank), place_stop(rank),
      strides(rank), out_shape(rank);
  int64_t placed = 1;
  for (size_t d = 0; d < rank; ++d) {
    int64_t n = x.shape(static_cast<int>(d));
    has_interior |= interior[d] > 0;
    int64_t s = n == 0 ? 0 : n + (n - 1) * interior[d];
    spread[d] = static_cast<int32_t>(s);
    strides[d] = static_cast<int32_t>(interior[d] + 1);
    int64_t c0 = std::min(std::max<int64_t>(0, -lo[d]), s);
    int64_t c1 = std::max(c0, s - std::max<int64_t>(0, -hi[d]));
    crop_start[d] = static_cast<int32_t>(c0);
    crop_stop[d] = static_cast<int32_t>(c1);
    int64_t p0 = std::max<int64_t>(0, lo[d]);
    place_start[d] = static_cast<int32_t>(p0);
    place_stop[d] = static_cast<int32_t>(p0 + (c1 - c0));
    out_shape[d] = static_cast<int32_t>(std::max<int64_t>(0, s + lo[d] + hi[d]));
    placed *= c1 - c0;
  }
  mx::array result = mx::broadcast_to(mx::astype(value, x.dtype()), out_shape);
  if (placed == 0) return result;
  mx::array body = x;
  if (has_interior) {
    mx::array canvas = mx::broadcast_to(mx::astype(value, x.dtype()), spread);
    body = mx::slice_update(canvas, x, mx::Shape(rank, 0), spread, strides);
  }
  body = mx::slice(body, crop_start, crop_stop);
  return mx::slice_update(result, body, place_start, place_stop);
}

}  // namespace ops

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
  for (int64_t d = 0; d < rank; ++d) {
    if (interior[d] < 0) ctx.fail("negative interior padding ", interior[d]);
    int64_t n = in.shape[d];
    int64_t s = n == 0 ? 0 : n + (n - 1) * interior[d];
    if (s + lo[d] + hi[d] != out.shape[d]) ctx.fail("padding does not produce ", out.str());
  }
  return binary([=](const mx::array& x, const mx::array& value) {
    return pad_array(x, value, lo, hi, interior);
  });
}

}  // namespace

void register_pad_ops(Registry& r) { r.add(compiler::Opcode::pad, lower_pad); }

}  // namespace pjrtx::backend
