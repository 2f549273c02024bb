// Folded constants shared between executables: two programs closing over
// the same weight fold the same w.astype(bf16) to equal bytes, and hold one
// array. Like compiler/dense_pool.h for the plan's own constants, the pool
// keeps weak references, so an entry lives only while an executable uses it.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/mlx/arrays.h"
#include "compiler/plan.h"
#include "compiler/weak_pool.h"

namespace pjrtx::backend {

// The DenseStorage (compiler/plan.h) that puts plan constants in MLX
// buffers; installed when the extension loads.
const compiler::DenseStorage* mlx_dense_storage();

struct PooledArray {
  mx::array array;
};

// For an evaluated array that owns its storage (row-contiguous, not a view
// of another array) of at least compiler::kMinPooledDenseBytes: the pooled
// array with equal dtype, shape and bytes, recording `a` if there is none.
// nullptr for anything else (views share their source's storage already).
std::shared_ptr<const PooledArray> pool_folded(const mx::array& a);

compiler::WeakPoolStats folded_pool_stats();

}  // namespace pjrtx::backend
