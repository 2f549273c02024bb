#include "backend/mlx/constant_pool.h"

#include <cstdint>
#include <cstring>
#include <mutex>

#include "compiler/dense_pool.h"
#include "compiler/weak_pool.h"

namespace pjrtx::backend {

namespace {

compiler::WeakPool<PooledArray>& pool() {
  // Never destroyed: executables may outlive static destructors.
  static auto* p = new compiler::WeakPool<PooledArray>;
  return *p;
}

uint8_t* mlx_alloc(size_t n, void** handle) {
  mx::allocator::Buffer b = mx::allocator::allocator().malloc(n);
  *handle = b.ptr();
  return static_cast<uint8_t*>(b.raw_ptr());
}

void mlx_release(void* handle, uint8_t*) {
  mx::allocator::allocator().free(mx::allocator::Buffer(handle));
}

const compiler::DenseStorage kMlxStorage{mlx_alloc, mlx_release,
                                         compiler::kMinPooledDenseBytes};

// Installed at load, before any plan is built: plan constants are MLX
// buffers from the start, so lowering wraps them instead of copying.
const bool kInstalled = (compiler::set_dense_storage(&kMlxStorage), true);

}  // namespace

const compiler::DenseStorage* mlx_dense_storage() { return &kMlxStorage; }

std::shared_ptr<const PooledArray> pool_folded(const mx::array& a) {
  if (!a.is_available() || a.nbytes() < compiler::kMinPooledDenseBytes) return nullptr;
  // Owns its storage outright: contiguous, every element its own, and no
  // other array (an operand it is a view of) holds the same data.
  if (!a.flags().row_contiguous || a.data_size() != a.size() || a.data_shared_ptr().use_count() != 1)
    return nullptr;
  uint64_t seed = static_cast<uint64_t>(a.dtype().val()) * 31 + a.itemsize();
  for (int d : a.shape()) seed = seed * 1000003ULL + static_cast<uint64_t>(d);
  const uint64_t key = compiler::content_hash(a.data<uint8_t>(), a.nbytes(), seed);
  std::lock_guard<std::mutex> lock(pool().mu());
  auto live = pool().find(key, static_cast<int64_t>(a.nbytes()), [&](const PooledArray& b) {
    return a.dtype() == b.array.dtype() && a.shape() == b.array.shape() &&
           std::memcmp(a.data<uint8_t>(), b.array.data<uint8_t>(), a.nbytes()) == 0;
  });
  if (live) return live;
  auto entry = std::make_shared<const PooledArray>(PooledArray{a});
  pool().insert(key, entry);
  return entry;
}

compiler::WeakPoolStats folded_pool_stats() {
  return pool().stats(
      [](const PooledArray& p) { return static_cast<int64_t>(p.array.nbytes()); });
}

}  // namespace pjrtx::backend
