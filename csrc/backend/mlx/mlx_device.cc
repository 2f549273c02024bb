#include "backend/mlx/mlx_device.h"

#include <cstdint>
#include <mlx/backend/gpu/device_info.h>
#include <mlx/backend/metal/metal.h>
#include <mlx/memory.h>
#include <mlx/version.h>

#include "common/error.h"

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

std::string mlx_version() { return mx::version(); }

}  // namespace pjrtx::backend
