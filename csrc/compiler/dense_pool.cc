#include "compiler/dense_pool.h"

#include <cstring>
#include <mutex>
#include <unordered_map>

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

struct Pool {
  std::mutex mu;
  std::unordered_multimap<uint64_t, std::weak_ptr<const DenseData>> entries;
  int64_t hits = 0, hit_bytes = 0;
  size_t inserts_since_sweep = 0;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: plans may die after static destructors
  return *p;
}

uint64_t key_of(const DenseData& d) {
  uint64_t seed = (static_cast<uint64_t>(d.type.dtype) << 1) | (d.splat ? 1 : 0);
  for (int64_t s : d.type.shape) seed = seed * 1000003ULL + static_cast<uint64_t>(s);
  return content_hash(d.bytes.data(), d.bytes.size(), seed);
}

bool same(const DenseData& a, const DenseData& b) {
  return a.type == b.type && a.splat == b.splat && a.bytes.size() == b.bytes.size() &&
         std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) == 0;
}

}  // namespace

std::shared_ptr<const DenseData> intern_dense(std::shared_ptr<const DenseData> d) {
  if (!d || d->bytes.size() < kMinPooledDenseBytes) return d;
  const uint64_t key = key_of(*d);
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  auto [lo, hi] = p.entries.equal_range(key);
  for (auto it = lo; it != hi; ++it) {
    if (auto live = it->second.lock(); live && same(*live, *d)) {
      ++p.hits;
      p.hit_bytes += static_cast<int64_t>(d->bytes.size());
      return live;
    }
  }
  // Drop expired entries now and then (amortised: every 64 inserts).
  if (++p.inserts_since_sweep >= 64) {
    p.inserts_since_sweep = 0;
    for (auto it = p.entries.begin(); it != p.entries.end();)
      it = it->second.expired() ? p.entries.erase(it) : std::next(it);
  }
  p.entries.emplace(key, d);
  return d;
}

DensePoolStats dense_pool_stats() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  DensePoolStats s;
  for (const auto& [key, weak] : p.entries) {
    if (auto live = weak.lock()) {
      ++s.entries;
      s.bytes += static_cast<int64_t>(live->bytes.size());
    }
  }
  s.hits = p.hits;
  s.hit_bytes = p.hit_bytes;
  return s;
}

}  // namespace pjrtx::compiler
