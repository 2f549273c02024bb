// Host memory <-> MLX arrays. Uploads copy once into MLX's allocator (MLX's
// no-copy constructor copies anyway on Linux CPU/CUDA builds); downloads
// evaluate, make the array row-contiguous and copy out.
#pragma once

#include <mlx/array.h>

#include <cstdint>
#include <vector>

#include "compiler/types.h"

namespace pjrtx::backend {

namespace mx = mlx::core;

// Copies `data` (dims of `type`, optional byte_strides per dim, which may be
// any sign or zero) into a new array; s4/u4 bytes become their canonical
// storage (backend/mlx/dtype.h). Safe on any thread: it touches only
// MLX's allocator.
mx::array array_from_host(const void* data, const compiler::TensorType& type,
                          const int64_t* byte_strides);

// Evaluates `a` and copies its row-major bytes into dst (dst_size bytes must
// equal a.nbytes()); `t` is the plan type, for the host form of s4/u4. Call
// on the executor thread.
void array_to_host(const mx::array& a, compiler::DType t, void* dst, size_t dst_size);

// a evaluated and row-contiguous: a itself when it already is, else a
// contiguous copy (a broadcast or strided view has no one block of data).
mx::array materialized(const mx::array& a);
// An evaluated copy of `a` in storage of its own (a buffer moving to
// another device must not share the source's memory). Call on the
// destination's executor, with `a` evaluated.
mx::array copy_to_own_storage(const mx::array& a);
// A bit-exact copy of `a` in storage of its own (mx::copy of an evaluated
// array shares its buffer: MLX arrays are immutable). Lazy.
mx::array own_copy(const mx::array& a);
// Outputs that are one of the run's non-donated inputs, or an earlier
// output, array for array, become copies on this device's stream, so every
// output buffer has storage of its own (XLA copies such outputs too; a
// donated input passed through keeps its storage). Call on the executor.
void unshare_outputs(std::vector<mx::array>& outputs, const std::vector<mx::array>& inputs,
                     const std::vector<bool>& donated);
// XLA aliases a donated input with an output of its shape and dtype; MLX
// reuses an input's storage only when its rules allow (never for a binary
// op on one-element arrays, the `x + 1` of a scalar counter). On the CPU
// device, a small output (<= kAliasSmallBytes) that did not take a donated
// input's storage is written into it by a last node of the graph, ordered
// after every other output and every effect (a debug.print of the input
// must see its old value), so unsafe_buffer_pointer() is the input's as on
// XLA. Larger outputs keep MLX's own donation (a copy would cost more than
// it saves). Call on the executor, before the inputs are dropped.
constexpr size_t kAliasSmallBytes = 256;
void alias_small_donated(std::vector<mx::array>& outputs, const std::vector<mx::array>& inputs,
                         const std::vector<bool>& donated, const std::vector<mx::array>& effects);
// The address of an evaluated, row-contiguous array's data (0 when empty).
uintptr_t array_address(const mx::array& a);

// Copies a strided host array into a dense row-major buffer.
void strided_copy(const void* src, void* dst, const compiler::Shape& shape,
                  const int64_t* byte_strides, int64_t elem_size);

}  // namespace pjrtx::backend
