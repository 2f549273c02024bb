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

// Hands memory that finished runs freed back to the system. glibc keeps
// freed blocks in its arenas (blocks under its adaptive mmap threshold, up
// to 32 MiB each, come from there) and returns them only from the top of a
// heap, so a process whose one run peaked at 10 GB stayed at 10 GB after it
// (NumPyro's test_distributions drove a pjrtx worker to 12.8 GB and the
// OOM killer; a Dirichlet sample of 360k values: 1.5 GB resident after
// every array was freed, 0.2 GB after malloc_trim, which took 66 ms).
// When no run is in flight and none has finished for a second (a loop of
// big steps reuses what it freed, and returning it would cost each step its
// page faults again), and the resident bytes not held by live MLX arrays
// have grown by 256 MiB since the last trim, malloc_trim returns them.
// Each run holds a RunToken while in flight; the completion threads call
// release_freed_memory when they have waited a second for work. A no-op
// but on Linux with glibc (macOS's allocator returns large blocks itself).
struct RunToken {
  RunToken();
  ~RunToken();
  RunToken(const RunToken&) = delete;
  RunToken& operator=(const RunToken&) = delete;
};
void release_freed_memory();

// The MLX version string the library was built with.
std::string mlx_version();

}  // namespace pjrtx::backend
