// Index helpers shared by the indexing lowerings (dynamic_slice, gather,
// scatter): MLX does no bounds checks, so every index is clamped or masked
// before it reaches MLX.
#pragma once

#include "backend/mlx/ops/common.h"

#include <cstdint>

#include "backend/mlx/host_int.h"

namespace pjrtx::backend::ops {

// clamp_index's answer for one index known on the host.
int32_t clamp_index_value(Int128 x, DType t, int64_t hi);

// idx (any integer type) clamped to [0, hi] and cast to int32. Comparing in
// the index's own type keeps huge unsigned values from wrapping negative.
mx::array clamp_index(const mx::array& idx, DType t, int64_t hi);

// Whether 0 <= idx <= hi, for an index of type t.
mx::array index_in_range(const mx::array& idx, DType t, int64_t hi);

}  // namespace pjrtx::backend::ops
