// Every PJRT entry point pjrtx implements, named after its slot without the
// PJRT_ prefix. pjrt_api_table.cc puts them into the table; every other slot gets
// a stub that returns UNIMPLEMENTED naming the function.
#pragma once

#include "pjrt/pjrt_abi.h"

#include <cstddef>
#include <cstdint>
#include <memory>

// X(slot name without PJRT_): the implemented slots.
#define PJRTX_IMPLEMENTED_SLOTS(X)                                            \
  X(Error_Destroy) X(Error_Message) X(Error_GetCode) X(Error_ForEachPayload)  \
  X(Plugin_Initialize) X(Plugin_Attributes)                                   \
  X(Event_Destroy) X(Event_IsReady) X(Event_Error) X(Event_Await)             \
  X(Event_OnReady)                                                            \
  X(Client_Create) X(Client_Destroy) X(Client_PlatformName)                   \
  X(Client_ProcessIndex) X(Client_PlatformVersion) X(Client_Devices)          \
  X(Client_UpdateGlobalProcessInfo)          \
  X(Client_AddressableDevices) X(Client_LookupDevice)                         \
  X(Client_LookupAddressableDevice) X(Client_AddressableMemories)             \
  X(Client_Compile) X(Client_DefaultDeviceAssignment)                         \
  X(Client_BufferFromHostBuffer) X(Client_TopologyDescription)                \
  X(DeviceDescription_Id) X(DeviceDescription_ProcessIndex)                   \
  X(DeviceDescription_Attributes) X(DeviceDescription_Kind)                   \
  X(DeviceDescription_DebugString) X(DeviceDescription_ToString)              \
  X(Device_GetDescription) X(Device_IsAddressable) X(Device_LocalHardwareId)  \
  X(Device_AddressableMemories) X(Device_DefaultMemory) X(Device_MemoryStats) \
  X(Device_GetAttributes)                                                     \
  X(Memory_Id) X(Memory_Kind) X(Memory_DebugString) X(Memory_ToString)        \
  X(Memory_AddressableByDevices) X(Memory_Kind_Id)                            \
  X(Executable_Destroy) X(Executable_Name) X(Executable_NumReplicas)          \
  X(Executable_NumPartitions) X(Executable_NumOutputs)                        \
  X(Executable_SizeOfGeneratedCodeInBytes) X(Executable_GetCostAnalysis)      \
  X(Executable_OutputMemoryKinds) X(Executable_ParameterMemoryKinds)          \
  X(Executable_OutputElementTypes) X(Executable_OutputDimensions)             \
  X(Executable_Fingerprint) X(Executable_GetCompiledMemoryStats)              \
  X(Executable_Serialize) X(Executable_DeserializeAndLoad)                    \
  X(Executable_OptimizedProgram)                                              \
  X(LoadedExecutable_Destroy) X(LoadedExecutable_GetExecutable)               \
  X(LoadedExecutable_AddressableDevices) X(LoadedExecutable_Delete)           \
  X(LoadedExecutable_IsDeleted) X(LoadedExecutable_Execute)                   \
  X(LoadedExecutable_Fingerprint) X(LoadedExecutable_GetDeviceAssignment)     \
  X(LoadedExecutable_AddressableDeviceLogicalIds)                             \
  X(Buffer_Destroy) X(Buffer_ElementType) X(Buffer_Dimensions)                \
  X(Buffer_UnpaddedDimensions) X(Buffer_DynamicDimensionIndices)              \
  X(Buffer_GetMemoryLayout) X(Buffer_OnDeviceSizeInBytes) X(Buffer_Device)    \
  X(Buffer_Memory) X(Buffer_Delete) X(Buffer_IsDeleted) X(Buffer_CopyToDevice)\
  X(Buffer_CopyToMemory) X(Buffer_ToHostBuffer) X(Buffer_IsOnCpu)             \
  X(Buffer_ReadyEvent) X(Buffer_UnsafePointer)                                \
  X(Buffer_IncreaseExternalReferenceCount)                                    \
  X(Buffer_DecreaseExternalReferenceCount)                                    \
  X(Buffer_OpaqueDeviceMemoryDataPointer)                                     \
  X(TopologyDescription_PlatformName) X(TopologyDescription_PlatformVersion)  \
  X(TopologyDescription_GetDeviceDescriptions)                                \
  X(TopologyDescription_Attributes) X(TopologyDescription_Create)

namespace pjrtx::pjrt {

#define PJRTX_DECLARE_ENTRY(name) PJRT_##name name;
PJRTX_IMPLEMENTED_SLOTS(PJRTX_DECLARE_ENTRY)
#undef PJRTX_DECLARE_ENTRY

// The plugin attribute stablehlo_current_version ({major, minor, patch});
// jax_plugin.initialize() sets it to jaxlib's own version before the client
// is created, so jaxlib serializes the newest StableHLO our parser reads.
void set_stablehlo_current_version(int64_t major, int64_t minor, int64_t patch);

const PJRT_Api* api();
// The plugin's extension chain: the Shardings extension (pjrt/pjrt_executable.cc).
PJRT_Extension_Base* shardings_extension();
// The Layouts extension (pjrt/pjrt_layouts.cc), chained after the shardings one.
PJRT_Extension_Base* layouts_extension();
std::unique_ptr<PJRT_Layouts_MemoryLayout> row_major_layout(size_t rank);

}  // namespace pjrtx::pjrt
