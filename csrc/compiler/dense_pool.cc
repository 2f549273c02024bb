#include "compiler/dense_pool.h"

#include <cstdint>
#include <cstring>
#include <mutex>

#include "compiler/weak_pool.h"

namespace pjrtx::compiler {

uint64_t content_hash(const void* data, size_t n, uint64_t seed) {
  // A multiply-xorshift mix over 8-byte words (splitmix64's finaliser):
  // every input bit reaches every output bit; about 1 GB/s, so a 4 MiB
  // weight costs ~4 ms once per compile.
  auto mix = [](uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
  };
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = mix(seed ^ (n * 0x9e3779b97f4a7c15ULL));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mix(h ^ w) + 0x9e3779b97f4a7c15ULL;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p + i, n - i);
  return mix(h ^ tail ^ (n - i));
}

namespace {

WeakPool<DenseData>& pool() {
  // Never destroyed: plans may die after static destructors.
  static auto* p = new WeakPool<DenseData>;
  return *p;
}

uint64_t key_of(const TensorType& type, bool splat, const uint8_t* data, size_t n) {
  uint64_t seed = (static_cast<uint64_t>(type.dtype) << 1) | (splat ? 1 : 0);
  for (int64_t s : type.shape) seed = seed * 1000003ULL + static_cast<uint64_t>(s);
  return content_hash(data, n, seed);
}

// A live pooled DenseData equal to (type, splat, data), or nullptr. Caller
// holds the lock.
std::shared_ptr<const DenseData> find(uint64_t key, const TensorType& type, bool splat,
                                      const uint8_t* data, size_t n) {
  return pool().find(key, static_cast<int64_t>(n), [&](const DenseData& a) {
    return a.type == type && a.splat == splat && a.bytes.size() == n &&
           std::memcmp(a.bytes.data(), data, n) == 0;
  });
}

}  // namespace

std::shared_ptr<const DenseData> intern_dense(std::shared_ptr<const DenseData> d) {
  if (!d || d->bytes.size() < kMinPooledDenseBytes) return d;
  const uint64_t key = key_of(d->type, d->splat, d->bytes.data(), d->bytes.size());
  std::lock_guard<std::mutex> lock(pool().mu());
  if (auto live = find(key, d->type, d->splat, d->bytes.data(), d->bytes.size())) return live;
  pool().insert(key, d);
  return d;
}

std::shared_ptr<const DenseData> intern_dense_bytes(const TensorType& type, bool splat,
                                                    const uint8_t* data, size_t n) {
  auto make = [&] {
    auto d = std::make_shared<DenseData>();
    d->type = type;
    d->splat = splat;
    d->bytes.assign(data, data + n);
    return std::shared_ptr<const DenseData>(std::move(d));
  };
  if (n < kMinPooledDenseBytes) return make();
  const uint64_t key = key_of(type, splat, data, n);
  {
    std::lock_guard<std::mutex> lock(pool().mu());
    if (auto live = find(key, type, splat, data, n)) return live;
  }
  // Copied outside the lock (4 MiB takes ~1 ms); if another thread pooled
  // the same weight meanwhile, its copy wins and ours is dropped.
  auto d = make();
  std::lock_guard<std::mutex> lock(pool().mu());
  if (auto live = find(key, type, splat, data, n)) return live;
  pool().insert(key, d);
  return d;
}

WeakPoolStats dense_pool_stats() {
  return pool().stats([](const DenseData& d) { return static_cast<int64_t>(d.bytes.size()); });
}

}  // namespace pjrtx::compiler
