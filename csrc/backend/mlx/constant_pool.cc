#include "backend/mlx/constant_pool.h"

#include <cstring>
#include <mutex>
#include <unordered_map>

#include "compiler/dense_pool.h"

namespace pjrtx::backend {

namespace {

struct Pool {
  std::mutex mu;
  std::unordered_multimap<uint64_t, std::weak_ptr<const PooledArray>> entries;
  int64_t hits = 0, hit_bytes = 0;
  size_t inserts_since_sweep = 0;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: executables may outlive static destructors
  return *p;
}

bool same(const mx::array& a, const mx::array& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data<uint8_t>(), b.data<uint8_t>(), a.nbytes()) == 0;
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
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  auto [lo, hi] = p.entries.equal_range(key);
  for (auto it = lo; it != hi; ++it) {
    if (auto live = it->second.lock(); live && same(live->array, a)) {
      ++p.hits;
      p.hit_bytes += static_cast<int64_t>(a.nbytes());
      return live;
    }
  }
  if (++p.inserts_since_sweep >= 64) {
    p.inserts_since_sweep = 0;
    for (auto it = p.entries.begin(); it != p.entries.end();)
      it = it->second.expired() ? p.entries.erase(it) : std::next(it);
  }
  auto entry = std::make_shared<const PooledArray>(PooledArray{a});
  p.entries.emplace(key, entry);
  return entry;
}

FoldedPoolStats folded_pool_stats() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  FoldedPoolStats s;
  for (const auto& [key, weak] : p.entries) {
    if (auto live = weak.lock()) {
      ++s.entries;
      s.bytes += static_cast<int64_t>(live->array.nbytes());
    }
  }
  s.hits = p.hits;
  s.hit_bytes = p.hit_bytes;
  return s;
}

}  // namespace pjrtx::backend
