// stablehlo.scatter with the "set" body on MLX's CPU device, as one node
// that writes into the operand's own storage when the graph holds no other
// reference to it (a loop-carried buffer updated at a traced index: the
// pattern of samplers, solvers and decode loops).
//
// MLX's Scatter reuses its operand only when nothing else reads it, and a
// window that does not fit must be dropped (StableHLO), which MLX's scatter
// cannot do: writing the covered values back reads the operand, and MLX's
// CPU back end keeps every input of a queued task alive until the task runs,
// so the operand is no longer donatable and every step copies the buffer.
// This node reads the raw indices itself, clamps and drops on the host
// thread that runs it, and copies only the update windows.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/mlx/registry.h"

namespace pjrtx::backend::ops {

// Shapes and dimension numbers of one scatter (StableHLO's names).
struct ScatterLayout {
  std::vector<int64_t> operand_shape;
  std::vector<int64_t> window;          // update window size per operand dim
  std::vector<int64_t> index_shape;     // scatter_indices
  int64_t index_vector_dim = 0;         // == index rank: an implicit trailing 1
  std::vector<int64_t> index_map;       // scatter_dims_to_operand_dims
  std::vector<int64_t> batching_operand;  // input_batching_dims
  std::vector<int64_t> batching_indices;  // scatter_indices_batching_dims
  std::vector<int64_t> update_shape;
  std::vector<int64_t> update_window_dims;
  std::vector<int64_t> window_operand_dims;  // the operand dim of each update window dim
};

// The scatter of `updates` into `operand` at `indices` (set semantics;
// windows that do not fit are dropped). CPU stream only.
mx::array scatter_set_in_place(const mx::array& operand, const mx::array& indices,
                               const mx::array& updates,
                               std::shared_ptr<const ScatterLayout> layout);

}  // namespace pjrtx::backend::ops
