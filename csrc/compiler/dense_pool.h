// One copy of each large dense constant per process: two plans (say, two
// jitted functions closing over the same 4 MiB weight) get the same
// DenseData, and the MLX arrays lowered from it are views of its bytes, so
// the weight is held once. The pool holds weak references: a weight lives
// as long as some plan or array uses it, not as long as the process.
#pragma once

#include <cstdint>
#include <memory>

#include "compiler/plan.h"
#include "compiler/weak_pool.h"

namespace pjrtx::compiler {

// Data below this many bytes is returned as is: sharing 4 KiB saves less
// than the hash and lock cost on every small attribute (padding, pairs).
constexpr size_t kMinPooledDenseBytes = 4096;

// Returns the pooled DenseData equal to `d` (same type, splat flag and
// bytes), or `d` itself after recording it.
std::shared_ptr<const DenseData> intern_dense(std::shared_ptr<const DenseData> d);
// The same from bytes not yet copied: a hit copies nothing.
std::shared_ptr<const DenseData> intern_dense_bytes(const TensorType& type, bool splat,
                                                    const uint8_t* data, size_t n);

// 64-bit content hash of `n` bytes (8 bytes a step). Pools compare the bytes
// in full on a hash match, so equality never rests on the hash alone.
uint64_t content_hash(const void* data, size_t n, uint64_t seed = 0);

WeakPoolStats dense_pool_stats();

}  // namespace pjrtx::compiler
