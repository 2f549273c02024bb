// The loop counters of loop_stats.h.
#include "backend/mlx/loops/loop_stats.h"

#include <atomic>

namespace pjrtx::backend {

namespace {
std::atomic<int64_t> g_counted_runs{0}, g_counted_iterations{0};
std::atomic<int64_t> g_general_runs{0}, g_general_iterations{0};
std::atomic<int64_t> g_folded_iterations{0}, g_host_steps{0};
}  // namespace

LoopStats loop_stats() {
  LoopStats s;
  s.counted_runs = g_counted_runs.load();
  s.counted_iterations = g_counted_iterations.load();
  s.general_runs = g_general_runs.load();
  s.general_iterations = g_general_iterations.load();
  s.folded_iterations = g_folded_iterations.load();
  s.host_steps = g_host_steps.load();
  return s;
}

void record_folded(int64_t iterations) {
  g_folded_iterations.fetch_add(iterations, std::memory_order_relaxed);
}

void record_host_step() { g_host_steps.fetch_add(1, std::memory_order_relaxed); }

void record_loop(bool counted, int64_t iterations) {
  (counted ? g_counted_runs : g_general_runs).fetch_add(1, std::memory_order_relaxed);
  (counted ? g_counted_iterations : g_general_iterations)
      .fetch_add(iterations, std::memory_order_relaxed);
}

}  // namespace pjrtx::backend
