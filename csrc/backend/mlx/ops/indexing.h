// Index helpers shared by the indexing lowerings (dynamic_slice, gather,
// scatter): MLX does no bounds checks, so every index is clamped or masked
// before it reaches MLX.
#pragma once

#include "backend/mlx/ops/common.h"

#include <cstdint>

namespace pjrtx::backend::ops {

// idx (any integer type) clamped to [0, hi] and cast to int32, by the rule
// host_int::clamp_index_value states for one index known on the host.
mx::array clamp_index(const mx::array& idx, DType t, int64_t hi);

// Whether 0 <= idx <= hi, for an index of type t.
mx::array index_in_range(const mx::array& idx, DType t, int64_t hi);

}  // namespace pjrtx::backend::ops
