// The concrete types behind PJRT's opaque handles. Each wraps a runtime
// object plus whatever the C API needs to hand out stable pointers
// (strings, dims, arrays of handles) for the handle's lifetime.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pjrt/pjrt_abi.h"
#include "runtime/client.h"
#include "runtime/executable.h"

struct PJRT_DeviceDescription {
  pjrtx::runtime::Device* rt = nullptr;
  std::string debug_string, to_string;
};

// PJRT_Memory has a public vtable since 0.105 (jaxlib stores user data on it).
struct PjrtxMemory : PJRT_Memory {
  pjrtx::runtime::Memory* rt = nullptr;
  std::vector<PJRT_Device*> devices;
  std::string debug_string, to_string;
  std::mutex mu;
  std::map<const void*, std::pair<void*, void (*)(void*)>> user_data;
  ~PjrtxMemory();
};

struct PJRT_Device {
  pjrtx::runtime::Device* rt = nullptr;
  PJRT_Client* client = nullptr;
  PJRT_DeviceDescription description;
  PjrtxMemory* memory = nullptr;       // the default memory ("device")
  std::vector<PJRT_Memory*> memories;  // indexed by runtime::MemoryKind

  PjrtxMemory* memory_for(const pjrtx::runtime::Memory* m) const {
    return static_cast<PjrtxMemory*>(memories.at(static_cast<size_t>(m->kind_id())));
  }
};

struct PJRT_TopologyDescription {
  PJRT_Client* client = nullptr;
  std::vector<PJRT_DeviceDescription*> descriptions;
};

struct PJRT_Client {
  std::unique_ptr<pjrtx::runtime::Client> rt;
  std::vector<std::unique_ptr<PJRT_Device>> device_storage;
  std::vector<std::unique_ptr<PjrtxMemory>> memory_storage;
  std::vector<PJRT_Device*> devices;              // every process's
  std::vector<PJRT_Device*> addressable_devices;  // this process's
  std::vector<PJRT_Memory*> memories;             // this process's devices'
  PJRT_TopologyDescription topology;

  PJRT_Device* device_for(pjrtx::runtime::Device* d) const;
};

struct PJRT_Event {
  pjrtx::runtime::EventPtr rt;
};

struct PJRT_Buffer {
  pjrtx::runtime::BufferPtr rt;
  PJRT_Client* client = nullptr;
  PJRT_Device* device = nullptr;
  PjrtxMemory* memory = nullptr;  // rt's memory, as jaxlib's handle
  std::vector<int64_t> dims;
  std::vector<int64_t> minor_to_major;
};

// A layout the Layouts extension hands out (pjrt/pjrt_layouts.cc): pjrtx arrays
// are dense, so the order of dimensions says it all.
struct PJRT_Layouts_MemoryLayout {
  std::vector<int64_t> minor_to_major;
};

// Metadata a PJRT_Executable hands out, built once.
struct ExecutableInfo {
  std::vector<PJRT_Buffer_Type> output_types;
  std::vector<int64_t> output_dims;
  std::vector<size_t> output_ranks;
  std::vector<const char*> output_kinds, param_kinds;
  std::vector<size_t> output_kind_sizes, param_kind_sizes;
  // The Shardings extension's arrays (empty: not reported).
  std::vector<const char*> param_shardings, output_shardings;
  std::vector<size_t> param_sharding_sizes, output_sharding_sizes;
  // Row-major layouts of the parameters and outputs (Layouts extension);
  // the pointers point into layout_storage.
  std::vector<std::unique_ptr<PJRT_Layouts_MemoryLayout>> layout_storage;
  std::vector<PJRT_Layouts_MemoryLayout*> param_layouts, output_layouts;
};

struct PJRT_Executable {
  std::shared_ptr<pjrtx::runtime::LoadedExecutable> rt;
  std::shared_ptr<const ExecutableInfo> info;
};

struct PJRT_LoadedExecutable {
  std::shared_ptr<pjrtx::runtime::LoadedExecutable> rt;
  PJRT_Client* client = nullptr;
  std::shared_ptr<const ExecutableInfo> info;
  // The executable's devices in assignment order, their logical ids, and
  // the serialized xla.DeviceAssignmentProto.
  std::vector<PJRT_Device*> devices;
  std::vector<PJRT_LogicalDeviceIds> logical_ids;
  std::string assignment_proto;
};

namespace pjrtx::pjrt {

// The handle of a runtime buffer, on its device and in its memory.
PJRT_Buffer* wrap_buffer(PJRT_Client* client, pjrtx::runtime::BufferPtr rt);

// Plan dtype <-> PJRT element type; throws for types MLX cannot hold.
PJRT_Buffer_Type to_pjrt_type(compiler::DType t);
compiler::DType from_pjrt_type(PJRT_Buffer_Type t);

}  // namespace pjrtx::pjrt
