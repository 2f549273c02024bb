#include "backend/mlx/ops/window.h"

#include <cstdint>

namespace pjrtx::backend::ops {

Window read_window(LowerCtx& ctx, int64_t rank) {
  const auto& inst = ctx.inst();
  Window w;
  std::vector<int64_t> ones(rank, 1);
  w.dims = inst.attr_ints("window_dimensions");
  w.strides = inst.attr_ints("window_strides", ones);
  w.base_dil = inst.attr_ints("base_dilations", ones);
  w.win_dil = inst.attr_ints("window_dilations", ones);
  w.pad_lo.assign(rank, 0);
  w.pad_hi.assign(rank, 0);
  if (inst.has("padding")) {
    auto pad = inst.attr_dense_ints("padding");
    if (static_cast<int64_t>(pad.size()) != 2 * rank) ctx.fail("padding must be s64[", rank, ",2]");
    for (int64_t d = 0; d < rank; ++d) {
      w.pad_lo[d] = pad[2 * d];
      w.pad_hi[d] = pad[2 * d + 1];
    }
  }
  for (auto* v : {&w.dims, &w.strides, &w.base_dil, &w.win_dil})
    if (static_cast<int64_t>(v->size()) != rank) ctx.fail("window attributes need one entry per dim");
  return w;
}

}  // namespace pjrtx::backend::ops
