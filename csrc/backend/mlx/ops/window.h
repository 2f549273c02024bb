// Window attributes shared by reduce_window and select_and_scatter.
#pragma once

#include "backend/mlx/ops/common.h"

#include <cstdint>

namespace pjrtx::backend::ops {

struct Window {
  std::vector<int64_t> dims, strides, base_dil, win_dil, pad_lo, pad_hi;
};

// Reads window_dimensions, window_strides, base/window_dilations (default 1)
// and padding (s64[rank, 2], default 0).
Window read_window(LowerCtx& ctx, int64_t rank);

}  // namespace pjrtx::backend::ops
