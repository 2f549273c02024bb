// The executable cache: compiling the same program twice (same bytes and
// format, same lowering options, same client) reuses the plan and the
// lowered backend::Program of the first compile instead of running the
// Python frontend and the lowering again. Each compile still gets its own
// LoadedExecutable around the shared program, so JAX deleting one handle
// (PJRT_LoadedExecutable_Delete) leaves the others usable.
//
// Entries are keyed by SHA-256 (runtime/sha256.h) and evicted least
// recently used first, bounded by count and by the bytes of constants
// they keep alive (a cached program holds its weights).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "compiler/plan.h"

namespace pjrtx::backend {
class Program;
}

namespace pjrtx::runtime {

// Which devices an executable runs on: XLA's replica and partition counts
// and the compile options' device assignment (device ids, replica-major:
// logical device r * num_partitions + p is replica r, partition p).
struct DeviceAssignment {
  int num_replicas = 1, num_partitions = 1;
  std::vector<int> device_ids;  // num_replicas * num_partitions ids
  // allow_spmd_sharding_propagation_to_parameters: the arguments whose
  // sharding the compile may choose (JAX leaves a NumPy input open). One
  // entry means all; empty means none. The frontend reads it, so it is
  // part of the compile cache key, not of the device comparison below.
  std::vector<bool> open_params;
  int num_devices() const { return num_replicas * num_partitions; }
  bool operator==(const DeviceAssignment& o) const {
    return num_replicas == o.num_replicas && num_partitions == o.num_partitions &&
           device_ids == o.device_ids;
  }
};

struct CompiledProgram {
  std::shared_ptr<const compiler::Plan> plan;
  // One lowering per logical device of `assignment`, each on its device's
  // executor (replica/partition ids and collective groups are per device).
  std::vector<std::shared_ptr<backend::Program>> programs;
  std::string fingerprint;  // 64 hex digits
  DeviceAssignment assignment;
};

class CompileCache {
 public:
  // 64 programs and 128 MiB of constants: a training script compiles a few
  // dozen distinct programs, and weights normally arrive as arguments, not
  // constants; the byte bound keeps a dropped program with large
  // closed-over weights from pinning them for long. A program whose
  // constants alone exceed it is not kept.
  explicit CompileCache(size_t max_entries = 64, int64_t max_bytes = int64_t{128} << 20)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // The entry for `key`, marked most recently used; null if absent.
  std::shared_ptr<const CompiledProgram> find(const std::string& key);
  void insert(const std::string& key, std::shared_ptr<const CompiledProgram> entry);
  void clear();
  size_t size() const;

 private:
  struct Slot {
    std::shared_ptr<const CompiledProgram> entry;
    int64_t bytes;
    std::list<std::string>::iterator lru;
  };
  mutable std::mutex mu_;
  size_t max_entries_;
  int64_t max_bytes_;
  int64_t bytes_ = 0;
  std::list<std::string> lru_;  // front = most recently used
  std::unordered_map<std::string, Slot> slots_;
};

// Whether the plan calls Python host callbacks (custom_call @pjrtx_callback).
bool plan_has_host_callbacks(const compiler::Plan& plan);

// Bytes of dense data (constants, dense attributes) a plan holds.
int64_t plan_constant_bytes(const compiler::Plan& plan);

// Process-wide counters, for tests and `python -m pjrtx doctor`.
struct CompileStats {
  int64_t frontend_runs = 0;    // programs parsed by the Python frontend
  int64_t cache_hits = 0;       // compiles served by the executable cache
  int64_t deserialized = 0;     // executables loaded from serialized bytes
  int64_t serialized = 0;       // executables serialized
};
CompileStats compile_stats();
void count_frontend_run();
void count_cache_hit();
void count_deserialized();
void count_serialized();

// Fingerprint -> plan, for every live executable, so the Python side can
// show the plan of a jaxlib executable it knows only by its fingerprint
// (Compiled.as_text on pjrtx). Holds the plans weakly.
void register_plan(const std::string& fingerprint, const std::shared_ptr<const compiler::Plan>& plan);
std::shared_ptr<const compiler::Plan> find_plan(const std::string& fingerprint);

// A serialized executable (PJRT_Executable_Serialize): a header naming the
// pjrtx build that wrote it and the fingerprint, a SHA-256 of the payload,
// then compiler::serialize_plan's bytes. Lowering is not stored: MLX arrays
// and compiled kernels belong to a process, and the frontend is most of a
// compile (an MLP SGD step of 106 instructions: 17 ms to compile, 1.1 ms to
// load and lower its serialized plan, on a 2-core Linux machine).
std::string pack_executable(const std::string& fingerprint, const compiler::Plan& plan,
                            const DeviceAssignment& assignment);
struct UnpackedExecutable {
  std::string fingerprint;
  DeviceAssignment assignment;
  compiler::Plan plan;
};
// Throws INVALID_ARGUMENT "pjrtx: serialized executable: ..." for bytes
// that are not one, come from another pjrtx build, or fail their checksum.
UnpackedExecutable unpack_executable(std::string_view bytes);

}  // namespace pjrtx::runtime
