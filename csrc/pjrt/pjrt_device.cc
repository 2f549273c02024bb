// PJRT_DeviceDescription, PJRT_Device and PJRT_Memory entry points.
#include "pjrt/pjrt_entry_points.h"
#include "pjrt/pjrt_error.h"
#include "pjrt/pjrt_handles.h"

namespace pjrtx::pjrt {

PJRT_Error* DeviceDescription_Id(PJRT_DeviceDescription_Id_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(DeviceDescription_Id);
    args->id = need(args->device_description, "device_description")->rt->id();
  });
}

PJRT_Error* DeviceDescription_ProcessIndex(PJRT_DeviceDescription_ProcessIndex_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(DeviceDescription_ProcessIndex);
    args->process_index = need(args->device_description, "device_description")->rt->process_index();
  });
}

PJRT_Error* DeviceDescription_Attributes(PJRT_DeviceDescription_Attributes_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(DeviceDescription_Attributes);
    need(args->device_description, "device_description");
    args->attributes = nullptr;
    args->num_attributes = 0;
  });
}

PJRT_Error* DeviceDescription_Kind(PJRT_DeviceDescription_Kind_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(DeviceDescription_Kind);
    const std::string& k = need(args->device_description, "device_description")->rt->kind();
    args->device_kind = k.data();
    args->device_kind_size = k.size();
  });
}

PJRT_Error* DeviceDescription_DebugString(PJRT_DeviceDescription_DebugString_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(DeviceDescription_DebugString);
    const std::string& s = need(args->device_description, "device_description")->debug_string;
    args->debug_string = s.data();
    args->debug_string_size = s.size();
  });
}

PJRT_Error* DeviceDescription_ToString(PJRT_DeviceDescription_ToString_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(DeviceDescription_ToString);
    const std::string& s = need(args->device_description, "device_description")->to_string;
    args->to_string = s.data();
    args->to_string_size = s.size();
  });
}

PJRT_Error* Device_GetDescription(PJRT_Device_GetDescription_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Device_GetDescription);
    args->device_description = &need(args->device, "device")->description;
  });
}

PJRT_Error* Device_IsAddressable(PJRT_Device_IsAddressable_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Device_IsAddressable);
    need(args->device, "device");
    args->is_addressable = need(args->device, "device")->rt->is_addressable();
  });
}

PJRT_Error* Device_LocalHardwareId(PJRT_Device_LocalHardwareId_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Device_LocalHardwareId);
    args->local_hardware_id = need(args->device, "device")->rt->local_hardware_id();
  });
}

PJRT_Error* Device_AddressableMemories(PJRT_Device_AddressableMemories_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Device_AddressableMemories);
    auto* d = need(args->device, "device");
    args->memories = d->memories.data();
    args->num_memories = d->memories.size();
  });
}

PJRT_Error* Device_DefaultMemory(PJRT_Device_DefaultMemory_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Device_DefaultMemory);
    args->memory = need(args->device, "device")->memory;
  });
}

PJRT_Error* Device_MemoryStats(PJRT_Device_MemoryStats_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Device_MemoryStats);
    auto s = need(args->device, "device")->client->rt->memory_stats();
    args->bytes_in_use = s.in_use;
    args->peak_bytes_in_use = s.peak;
    args->peak_bytes_in_use_is_set = true;
    args->bytes_limit = s.limit;
    args->bytes_limit_is_set = s.limit > 0;
    args->num_allocs_is_set = false;
    args->largest_alloc_size_is_set = false;
    args->bytes_reserved_is_set = false;
    args->peak_bytes_reserved_is_set = false;
    args->bytes_reservable_limit_is_set = false;
    args->largest_free_block_bytes_is_set = false;
    args->pool_bytes_is_set = false;
    args->peak_pool_bytes_is_set = false;
  });
}

// No device attributes: an empty list, and a deleter that has nothing to free.
PJRT_Error* Device_GetAttributes(PJRT_Device_GetAttributes_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Device_GetAttributes);
    need(args->device, "device");
    args->attributes = nullptr;
    args->num_attributes = 0;
    args->device_attributes = nullptr;
    args->attributes_deleter = [](PJRT_Device_Attributes*) {};
  });
}

namespace {
PjrtxMemory* as_memory(PJRT_Memory* m, const char* fn) {
  if (m == nullptr) invalid_argument(fn, ": memory is null");
  return static_cast<PjrtxMemory*>(m);
}
}  // namespace

PJRT_Error* Memory_Id(PJRT_Memory_Id_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Memory_Id);
    args->id = as_memory(args->memory, kFn)->rt->id();
  });
}

PJRT_Error* Memory_Kind(PJRT_Memory_Kind_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Memory_Kind);
    auto k = as_memory(args->memory, kFn)->rt->kind();
    args->kind = k.data();
    args->kind_size = k.size();
  });
}

PJRT_Error* Memory_Kind_Id(PJRT_Memory_Kind_Id_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Memory_Kind_Id);
    args->kind_id = as_memory(args->memory, kFn)->rt->kind_id();
  });
}

PJRT_Error* Memory_DebugString(PJRT_Memory_DebugString_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Memory_DebugString);
    auto* m = as_memory(args->memory, kFn);
    args->debug_string = m->debug_string.data();
    args->debug_string_size = m->debug_string.size();
  });
}

PJRT_Error* Memory_ToString(PJRT_Memory_ToString_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Memory_ToString);
    auto* m = as_memory(args->memory, kFn);
    args->to_string = m->to_string.data();
    args->to_string_size = m->to_string.size();
  });
}

PJRT_Error* Memory_AddressableByDevices(PJRT_Memory_AddressableByDevices_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Memory_AddressableByDevices);
    auto* m = as_memory(args->memory, kFn);
    args->devices = m->devices.data();
    args->num_devices = m->devices.size();
  });
}

}  // namespace pjrtx::pjrt
