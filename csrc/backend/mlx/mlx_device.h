// Which MLX device runs the programs: Metal when present, else CUDA, else
// the CPU. The runtime passes the user's preference (PJRTX_DEVICE).
#pragma once

#include <cstdint>
#include <mlx/device.h>

#include <string>
#include <string_view>

namespace pjrtx::backend {

namespace mx = mlx::core;

struct DeviceChoice {
  mx::Device device{mx::Device::cpu};
  std::string backend;  // "Metal", "CUDA" or "CPU"
  bool is_gpu() const { return device.type == mx::Device::gpu; }
};

// Makes `d` MLX's default device. MLX keeps the default device process-wide
// (and default streams per thread): every executor of a client sets the
// same one when it starts.
void make_default(const DeviceChoice& d);

// preference: "" or "auto" (best available), "gpu", "cpu". Throws
// INVALID_ARGUMENT for other values or a GPU that is not there.
DeviceChoice choose_device(std::string_view preference);

struct MemoryStats {
  int64_t in_use = 0;  // bytes held by live arrays
  int64_t peak = 0;
  int64_t limit = 0;   // MLX's memory limit
};
// MLX's allocator counters (process-wide); safe on any thread.
MemoryStats memory_stats();
// Restarts MLX's peak counter at 0, not at the bytes in use: until the next
// allocation the peak reads 0 (tests measure one loop's peak with it).
void reset_peak_memory();

// The MLX version string the library was built with.
std::string mlx_version();

}  // namespace pjrtx::backend
