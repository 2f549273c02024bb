// A process-wide pool of equal values, held weakly: values are found by a
// content hash and compared in full, and the pool keeps nothing alive (a
// value goes when its last user does). Plan constants (compiler/dense_pool)
// and folded MLX arrays (backend/mlx/constant_pool) each keep one.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace pjrtx::compiler {

struct WeakPoolStats {
  int64_t entries = 0;    // live pooled values
  int64_t bytes = 0;      // their bytes (each counted once)
  int64_t hits = 0;       // lookups that found an equal live value
  int64_t hit_bytes = 0;  // bytes those hits did not store again
};

template <typename T>
class WeakPool {
 public:
  // Every call below but stats() expects the caller to hold mu().
  std::mutex& mu() { return mu_; }

  // A live value under `key` for which `equal(value)` holds, counting a hit
  // of `bytes`; nullptr when there is none.
  template <typename Equal>
  std::shared_ptr<const T> find(uint64_t key, int64_t bytes, const Equal& equal) {
    auto [lo, hi] = entries_.equal_range(key);
    for (auto it = lo; it != hi; ++it) {
      if (auto live = it->second.lock(); live && equal(*live)) {
        ++hits_;
        hit_bytes_ += bytes;
        return live;
      }
    }
    return nullptr;
  }

  void insert(uint64_t key, const std::shared_ptr<const T>& v) {
    // Drop expired entries now and then (amortised: every 64 inserts).
    if (++inserts_since_sweep_ >= 64) {
      inserts_since_sweep_ = 0;
      for (auto it = entries_.begin(); it != entries_.end();)
        it = it->second.expired() ? entries_.erase(it) : std::next(it);
    }
    entries_.emplace(key, v);
  }

  template <typename BytesOf>
  WeakPoolStats stats(const BytesOf& bytes_of) {
    std::lock_guard<std::mutex> lock(mu_);
    WeakPoolStats s;
    for (const auto& [key, weak] : entries_) {
      if (auto live = weak.lock()) {
        ++s.entries;
        s.bytes += bytes_of(*live);
      }
    }
    s.hits = hits_;
    s.hit_bytes = hit_bytes_;
    return s;
  }

 private:
  std::mutex mu_;
  std::unordered_multimap<uint64_t, std::weak_ptr<const T>> entries_;
  int64_t hits_ = 0, hit_bytes_ = 0;
  size_t inserts_since_sweep_ = 0;
};

}  // namespace pjrtx::compiler
