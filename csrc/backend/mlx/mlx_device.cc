#include "backend/mlx/mlx_device.h"

#include <cstdint>
#include <mlx/backend/gpu/device_info.h>
#include <mlx/backend/metal/metal.h>
#include <mlx/memory.h>
#include <mlx/version.h>

#include "common/error.h"
#include "common/trace.h"

#if defined(__linux__) && defined(__GLIBC__)
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#endif

namespace pjrtx::backend {

void make_default(const DeviceChoice& d) { mx::set_default_device(d.device); }

namespace {
// MLX builds have one GPU back end: Metal on macOS, CUDA on Linux. Only the
// metal:: and gpu:: queries are declared in every build's headers.
std::string gpu_backend_name() {
  return mx::metal::is_available() ? "Metal" : "CUDA";
}
}  // namespace

DeviceChoice choose_device(std::string_view preference) {
  bool gpu = mx::gpu::is_available();
  if (preference.empty() || preference == "auto") {
    if (gpu) return {mx::Device(mx::Device::gpu), gpu_backend_name()};
    return {mx::Device(mx::Device::cpu), "CPU"};
  }
  if (preference == "cpu") return {mx::Device(mx::Device::cpu), "CPU"};
  if (preference == "gpu") {
    if (!gpu)
      invalid_argument("pjrtx: PJRTX_DEVICE=gpu but this MLX build has no GPU "
                       "back end available (Metal or CUDA)");
    return {mx::Device(mx::Device::gpu), gpu_backend_name()};
  }
  invalid_argument("pjrtx: PJRTX_DEVICE must be 'auto', 'cpu' or 'gpu', got '",
                   preference, "'");
}

MemoryStats memory_stats() {
  MemoryStats s;
  s.in_use = static_cast<int64_t>(mx::get_active_memory());
  s.peak = static_cast<int64_t>(mx::get_peak_memory());
  s.limit = static_cast<int64_t>(mx::get_memory_limit());
  return s;
}

void reset_peak_memory() { mx::reset_peak_memory(); }

#if defined(__linux__) && defined(__GLIBC__)
namespace {
int64_t resident_bytes() {
  long pages_total = 0, pages_resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  const int n = std::fscanf(f, "%ld %ld", &pages_total, &pages_resident);
  std::fclose(f);
  return n == 2 ? static_cast<int64_t>(pages_resident) * sysconf(_SC_PAGESIZE) : -1;
}

std::atomic<int64_t> g_last_run_ms{0};
std::atomic<int> g_runs_in_flight{0};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::mutex g_trim_mu;
int64_t g_checked_run_ms = 0;  // the last run release_freed_memory has seen
int64_t g_baseline = -1;       // resident - live MLX bytes at the first run, then after each trim

int64_t slack_bytes() {
  const int64_t rss = resident_bytes();
  return rss < 0 ? -1 : rss - static_cast<int64_t>(mx::get_active_memory());
}

}  // namespace

RunToken::RunToken() {
  if (g_runs_in_flight.fetch_add(1, std::memory_order_relaxed) == 0 &&
      g_last_run_ms.load(std::memory_order_relaxed) == 0) {
    std::lock_guard<std::mutex> lock(g_trim_mu);
    if (g_baseline < 0) g_baseline = slack_bytes();
  }
}
RunToken::~RunToken() {
  g_last_run_ms.store(now_ms(), std::memory_order_relaxed);
  g_runs_in_flight.fetch_sub(1, std::memory_order_release);
}

void release_freed_memory() {
  constexpr int64_t kIdleMs = 1000;
  constexpr int64_t kGrowth = int64_t{256} << 20;
  const int64_t last = g_last_run_ms.load(std::memory_order_relaxed);
  if (last == 0 || g_runs_in_flight.load(std::memory_order_acquire) > 0 || now_ms() - last < kIdleMs)
    return;
  std::lock_guard<std::mutex> lock(g_trim_mu);
  if (last == g_checked_run_ms) return;
  g_checked_run_ms = last;
  const int64_t rss = resident_bytes();
  if (rss < 0) return;
  const int64_t slack = rss - static_cast<int64_t>(mx::get_active_memory());
  if (g_baseline < 0 || slack < g_baseline) {
    g_baseline = slack;
    return;
  }
  if (slack - g_baseline < kGrowth) return;
  Stopwatch sw;
  malloc_trim(0);
  const int64_t after = resident_bytes();
  if (after >= 0) g_baseline = after - static_cast<int64_t>(mx::get_active_memory());
  if (trace_enabled())
    trace("malloc_trim resident " + std::to_string(rss >> 20) + " MiB -> " +
              std::to_string(after >> 20) + " MiB",
          rss - after, sw.us());
}
#else
RunToken::RunToken() {}
RunToken::~RunToken() {}
void release_freed_memory() {}
#endif

std::string mlx_version() { return mx::version(); }

}  // namespace pjrtx::backend
