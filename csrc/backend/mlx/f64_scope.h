// MLX's GPU back ends (Metal, CUDA) have no float64, and MLX refuses at
// graph-build time any op on a GPU stream whose inputs or output are
// float64 ("float64 is not supported on the GPU"). Lowerings of f64
// instructions run with the CPU as the default device (program.cc); the ops
// pjrtx builds outside lowerings over a program's values (the completion
// marker over a run's outputs, contiguous copies before a transfer to the
// host, copies between devices) use this scope: while it lives, the default
// device is the CPU if the default is a GPU and one of the arrays is f64
// (complex128 is stored as f64 pairs). MLX fences between the streams.
//
// The default device is process-wide in MLX: with several GPU devices, an
// executor building a graph at the same moment puts its ops on the CPU
// stream too: slower, still correct.
#pragma once

#include <mlx/array.h>
#include <mlx/device.h>

#include <optional>
#include <vector>

namespace pjrtx::backend {

namespace mx = mlx::core;

class CpuScope {
 public:
  // Unconditionally: the default device is the CPU while this lives.
  CpuScope() { switch_to_cpu(); }
  // Only where the default device is a GPU and one of `arrays` is f64.
  explicit CpuScope(const std::vector<mx::array>& arrays) {
    if (mx::default_device() == mx::Device::cpu) return;
    for (const auto& a : arrays)
      if (a.dtype() == mx::float64) {
        switch_to_cpu();
        return;
      }
  }
  explicit CpuScope(const mx::array& a) : CpuScope(std::vector<mx::array>{a}) {}
  ~CpuScope() {
    if (prev_) mx::set_default_device(*prev_);
  }
  CpuScope(const CpuScope&) = delete;
  CpuScope& operator=(const CpuScope&) = delete;

 private:
  void switch_to_cpu() {
    prev_ = mx::default_device();
    mx::set_default_device(mx::Device(mx::Device::cpu));
  }
  std::optional<mx::Device> prev_;
};

}  // namespace pjrtx::backend
