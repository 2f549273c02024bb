// The client: one per process-side PJRT client, the top of the runtime.
// It owns PJRTX_DEVICES devices of one MLX kind (device.h), each with its
// own executor (the thread that builds and evaluates its MLX graphs, so
// each has its own MLX streams) and three memories; it makes buffers and
// compiles executables (executable.h), which sit below it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "backend/mlx/program.h"
#include "compiler/plan.h"
#include "runtime/buffer.h"
#include "runtime/compile_cache.h"
#include "runtime/device.h"
#include "runtime/executable.h"
#include "runtime/executor.h"
#include "runtime/processes.h"

namespace pjrtx::runtime {

// Turns program bytes into a plan. Set by the Python module (it runs the
// frontend under the GIL). open_params is DeviceAssignment::open_params.
// mlir_text, when not null, receives the module's text for PJRTX_DUMP_DIR.
using FrontendFn = std::function<compiler::Plan(std::string_view code, std::string_view format,
                                                const std::vector<bool>& open_params,
                                                std::string* mlir_text)>;
void set_frontend(FrontendFn fn);

class Client {
 public:
  // Reads PJRTX_DEVICE, PJRTX_DEVICES and PJRTX_F64 and starts one
  // executor per device. With several processes (options.num_nodes > 1)
  // it also lists every other process's devices (through JAX's key-value
  // store) and joins the processes through MLX's distributed engine.
  explicit Client(const ProcessOptions& options = {});
  ~Client();

  std::string_view platform_name() const { return "pjrtx"; }
  const std::string& platform_version() const { return platform_version_; }
  // Every process's devices, by id; addressable_devices() are this
  // process's.
  const std::vector<Device*>& devices() const { return device_ptrs_; }
  const std::vector<Device*>& addressable_devices() const { return local_ptrs_; }
  int process_index() const { return process_index_; }
  int process_count() const { return process_count_; }
  // The MLX distributed back end joining the processes ("" for one).
  const std::string& distributed_backend() const { return distributed_backend_; }
  const std::vector<Memory*>& memories() const { return memory_ptrs_; }
  // Throws INVALID_ARGUMENT naming the id and the devices there are.
  Device* lookup_device(int id) const;
  const std::string& backend_name() const { return backend_; }
  // Held while a multi-device run is posted to its devices' executors.
  std::mutex& launch_mutex() { return launch_mu_; }
  struct MemoryStats {
    int64_t in_use, peak, limit;
  };
  MemoryStats memory_stats() const;

  // Copies host data (byte_strides may be null for dense row-major) into a
  // new buffer in `memory`. The host memory is free to reuse on return.
  BufferPtr buffer_from_host(const void* data, const compiler::TensorType& type,
                             const int64_t* byte_strides, Memory* memory);

  // A new buffer in `memory` with the same contents (arrays are immutable,
  // so it shares them); ready when `src` is.
  BufferPtr copy_buffer(const BufferPtr& src, Memory* memory);

  // Compiles program bytes (format "mlir") for the devices of `assignment`
  // (empty device_ids: this client's first device), or reuses an earlier
  // compile of the same bytes for the same devices under the same options
  // (runtime/compile_cache.h). Throws INVALID_ARGUMENT for an unknown or
  // repeated device.
  std::shared_ptr<LoadedExecutable> compile(std::string_view code, std::string_view format,
                                            DeviceAssignment assignment = {});
  // PJRT_Executable_Serialize / DeserializeAndLoad: the executable's plan
  // as bytes, and an executable lowered from such bytes without the
  // frontend. Deserializing throws INVALID_ARGUMENT for foreign or damaged
  // bytes.
  std::string serialize(const LoadedExecutable& exe) const;
  // `assignment`, when it names devices, replaces the serialized one.
  std::shared_ptr<LoadedExecutable> deserialize(std::string_view bytes,
                                                DeviceAssignment assignment = {});
  // XLA's default assignment: devices in id order, replica-major.
  DeviceAssignment default_assignment(int num_replicas, int num_partitions) const;
  // Drops every cached program (tests; executables already handed out stay).
  void clear_compile_cache() { cache_.clear(); }

  // Copies `buffer` into dst (row-major) on the executor; returns the event
  // that fires when done.
  EventPtr to_host(const BufferPtr& buffer, void* dst, size_t dst_size);
  // Waits for `buffer`, evaluates it (a strided or broadcast view becomes a
  // contiguous copy) and returns the address of its storage.
  uintptr_t unsafe_pointer(const BufferPtr& buffer);
  // unsafe_pointer, plus a hold on that storage until release_external
  // (PJRT's external reference count).
  uintptr_t acquire_external(const BufferPtr& buffer);
  void release_external(const BufferPtr& buffer) { buffer->drop_external_ref(); }
  // Whether a buffer's storage is host memory laid out as PJRT's dense
  // row-major bytes of its type, so jaxlib may read it in place (NumPy
  // views, the buffer protocol, DLPack): MLX's CPU device, for types whose
  // MLX storage is their host form (not s4/u4/f4e2m1fn, whose nibbles MLX
  // keeps sign-extended) and that hold data.
  bool host_readable(const Buffer& buffer) const;

 private:
  std::string platform_version_;
  // Verifies, size-checks and lowers a plan on each assigned device's
  // executor.
  std::shared_ptr<const CompiledProgram> lower(std::shared_ptr<const compiler::Plan> plan,
                                               std::string fingerprint,
                                               const DeviceAssignment& assignment);
  // Fills in a missing assignment and checks its device ids.
  DeviceAssignment checked(DeviceAssignment a) const;
  // What an executable of `compiled` takes from this client (executable.h).
  ClientLink link(const CompiledProgram& compiled);
  // SHA-256 over what decides a compile's result besides the bytes.
  std::string cache_key(std::string_view kind, std::string_view format, std::string_view bytes,
                        const DeviceAssignment& assignment) const;

  backend::LowerOptions lower_options_;
  std::string backend_;
  std::mutex launch_mu_;
  CompileCache cache_;
  std::vector<std::unique_ptr<Executor>> executors_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<Device*> device_ptrs_, local_ptrs_;
  std::vector<Memory*> memory_ptrs_;
  int process_index_ = 0, process_count_ = 1;
  std::string distributed_backend_;
};

// Empties every live client's executable cache (jax.clear_caches() calls it
// through pjrtx/jax_plugin.py, so cached programs free their constants).
void clear_compile_caches();

}  // namespace pjrtx::runtime
