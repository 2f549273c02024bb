// The ABI layout table, for tests/test_pjrt_abi.py only: every struct of
// our PJRT C API declaration (csrc/pjrt/pjrt_abi.h) with its fields'
// offsets and sizes, computed by the compiler from the declarations
// (offsetof/sizeof), the PJRT_Api slot names and every enum. The test
// compares them with pypjrt's independent table, which also catches a
// field missing here.
//
// It is not part of the shipped extension: the test compiles this file
// with the system C++ compiler into a small shared library (cached in a
// temporary folder) and reads the table through ctypes as JSON. The C ABI
// is the platform's, so the layouts are the ones the plugin is built with.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pjrt/pjrt_abi.h"

namespace {

struct FieldLayout {
  const char* name;
  size_t offset;
  size_t size;
};

struct StructLayout {
  const char* name;
  size_t sizeof_value;          // sizeof(T), padding included
  size_t struct_size_constant;  // T_STRUCT_SIZE: end of the last field
  // Declaration order. Members of an anonymous union are listed one by one,
  // all at the union's offset.
  std::vector<FieldLayout> fields;
};

struct EnumValue {
  const char* name;
  int64_t value;
};

struct EnumLayout {
  const char* name;
  std::vector<EnumValue> values;  // declaration order
};

// F(field) is one FieldLayout of the struct named T in the enclosing
// PJRTX_LAYOUT. The trailing comma lets a list of F()s form an initializer.
#define F(field)                                \
  FieldLayout{#field, offsetof(T, field),       \
              sizeof(static_cast<T*>(nullptr)->field)},

#define PJRTX_LAYOUT(S, FIELDS)                                        \
  [] {                                                                 \
    using T = S;                                                       \
    return StructLayout{#S, sizeof(T), S##_STRUCT_SIZE, {FIELDS}};     \
  }()

std::vector<StructLayout> build_layouts() {
  return {
      PJRTX_LAYOUT(PJRT_Extension_Base, F(struct_size) F(type) F(next)),
      PJRTX_LAYOUT(PJRT_Layouts_Extension,
                   F(base) F(PJRT_Layouts_MemoryLayout_Destroy)
                       F(PJRT_Layouts_MemoryLayout_Serialize)
                           F(PJRT_Layouts_PJRT_Client_GetDefaultLayout)
                               F(PJRT_Layouts_PJRT_Buffer_MemoryLayout)
                                   F(PJRT_Layouts_PJRT_Topology_GetDefaultLayout)
                                       F(PJRT_Layouts_PJRT_Executable_GetOutputLayouts)
                                           F(PJRT_Layouts_PJRT_Executable_GetParameterLayouts)),
      PJRTX_LAYOUT(PJRT_Layouts_MemoryLayout_Destroy_Args,
                   F(struct_size) F(extension_start) F(layout)),
      PJRTX_LAYOUT(PJRT_Layouts_MemoryLayout_Serialize_Args,
                   F(struct_size) F(extension_start) F(layout) F(serialized_bytes)
                       F(serialized_bytes_size) F(serialized_layout) F(serialized_layout_deleter)),
      PJRTX_LAYOUT(PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args,
                   F(struct_size) F(extension_start) F(client) F(type) F(dims) F(num_dims)
                       F(layout)),
      PJRTX_LAYOUT(PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args,
                   F(struct_size) F(extension_start) F(buffer) F(layout)),
      PJRTX_LAYOUT(PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args,
                   F(struct_size) F(extension_start) F(topology_description) F(type) F(dims)
                       F(num_dims) F(layout)),
      PJRTX_LAYOUT(PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args,
                   F(struct_size) F(extension_start) F(executable) F(num_outputs) F(layouts)),
      PJRTX_LAYOUT(PJRT_Layouts_PJRT_Executable_GetParameterLayouts_Args,
                   F(struct_size) F(extension_start) F(executable) F(num_parameters) F(layouts)),
      PJRTX_LAYOUT(PJRT_Profiler_Extension,
                   F(base) F(profiler_api) F(traceme_context_id)),
      PJRTX_LAYOUT(PJRT_Api_Version,
                   F(struct_size) F(extension_start) F(major_version)
                   F(minor_version)),
      PJRTX_LAYOUT(PJRT_Error_FunctionTable,
                   F(struct_size) F(instance_size) F(extension_start)
                   F(destroy) F(message) F(get_code) F(for_each_payload)),
      PJRTX_LAYOUT(PJRT_Error, F(vtable)),
      PJRTX_LAYOUT(PJRT_Error_Destroy_Args,
                   F(struct_size) F(extension_start) F(error)),
      PJRTX_LAYOUT(PJRT_Error_Message_Args,
                   F(struct_size) F(extension_start) F(error) F(message)
                   F(message_size)),
      PJRTX_LAYOUT(PJRT_Error_GetCode_Args,
                   F(struct_size) F(extension_start) F(error) F(code)),
      PJRTX_LAYOUT(PJRT_Error_ForEachPayload_Args,
                   F(struct_size) F(extension_start) F(error) F(visitor)
                   F(user_arg)),
      PJRTX_LAYOUT(PJRT_NamedValue,
                   F(struct_size) F(extension_start) F(name) F(name_size)
                   F(type) F(string_value) F(int64_value) F(int64_array_value)
                   F(float_value) F(bool_value) F(value_size)),
      PJRTX_LAYOUT(PJRT_Plugin_Initialize_Args,
                   F(struct_size) F(extension_start)),
      PJRTX_LAYOUT(PJRT_Plugin_Attributes_Args,
                   F(struct_size) F(extension_start) F(attributes)
                   F(num_attributes)),
      PJRTX_LAYOUT(PJRT_Event_Destroy_Args,
                   F(struct_size) F(extension_start) F(event)),
      PJRTX_LAYOUT(PJRT_Event_IsReady_Args,
                   F(struct_size) F(extension_start) F(event) F(is_ready)),
      PJRTX_LAYOUT(PJRT_Event_Error_Args,
                   F(struct_size) F(extension_start) F(event)),
      PJRTX_LAYOUT(PJRT_Event_Await_Args,
                   F(struct_size) F(extension_start) F(event)),
      PJRTX_LAYOUT(PJRT_Event_OnReady_Args,
                   F(struct_size) F(extension_start) F(event) F(callback)
                   F(user_arg)),
      PJRTX_LAYOUT(PJRT_Event_Create_Args,
                   F(struct_size) F(extension_start) F(event)),
      PJRTX_LAYOUT(PJRT_Event_Set_Args,
                   F(struct_size) F(extension_start) F(event) F(error_code)
                   F(error_message) F(error_message_size)),
      PJRTX_LAYOUT(PJRT_Memory_FunctionTable,
                   F(struct_size) F(extension_start) F(instance_struct_size)
                   F(get_user_data) F(set_user_data)),
      PJRTX_LAYOUT(PJRT_Memory, F(vtable)),
      PJRTX_LAYOUT(PJRT_Buffer_MemoryLayout_Tiled,
                   F(struct_size) F(extension_start) F(minor_to_major)
                   F(minor_to_major_size) F(tile_dims) F(tile_dim_sizes)
                   F(num_tiles)),
      PJRTX_LAYOUT(PJRT_Buffer_MemoryLayout_Strides,
                   F(struct_size) F(extension_start) F(byte_strides)
                   F(num_byte_strides)),
      PJRTX_LAYOUT(PJRT_Buffer_MemoryLayout,
                   F(struct_size) F(extension_start) F(tiled) F(strides)
                   F(type)),
      PJRTX_LAYOUT(PJRT_ShapeSpec,
                   F(struct_size) F(extension_start) F(dims) F(num_dims)
                   F(element_type)),
      PJRTX_LAYOUT(PJRT_KeyValueGetCallback_Args,
                   F(struct_size) F(extension_start) F(key) F(key_size)
                   F(timeout_in_ms) F(callback_error) F(user_arg) F(value)
                   F(value_size) F(value_deleter_callback)),
      PJRTX_LAYOUT(PJRT_KeyValueTryGetCallback_Args,
                   F(struct_size) F(extension_start) F(key) F(key_size)
                   F(callback_error) F(user_arg) F(value) F(value_size)
                   F(value_deleter_callback)),
      PJRTX_LAYOUT(PJRT_KeyValuePutCallback_Args,
                   F(struct_size) F(extension_start) F(key) F(key_size)
                   F(value) F(value_size) F(callback_error) F(user_arg)),
      PJRTX_LAYOUT(PJRT_Client_Create_Args,
                   F(struct_size) F(extension_start) F(create_options)
                   F(num_options) F(kv_get_callback) F(kv_get_user_arg)
                   F(kv_put_callback) F(kv_put_user_arg) F(client)
                   F(kv_try_get_callback) F(kv_try_get_user_arg)),
      PJRTX_LAYOUT(PJRT_Client_Destroy_Args,
                   F(struct_size) F(extension_start) F(client)),
      PJRTX_LAYOUT(PJRT_Client_PlatformName_Args,
                   F(struct_size) F(extension_start) F(client) F(platform_name)
                   F(platform_name_size)),
      PJRTX_LAYOUT(PJRT_Client_ProcessIndex_Args,
                   F(struct_size) F(extension_start) F(client) F(process_index)),
      PJRTX_LAYOUT(PJRT_Client_PlatformVersion_Args,
                   F(struct_size) F(extension_start) F(client)
                   F(platform_version) F(platform_version_size)),
      PJRTX_LAYOUT(PJRT_Client_TopologyDescription_Args,
                   F(struct_size) F(extension_start) F(client) F(topology)),
      PJRTX_LAYOUT(PJRT_Client_Devices_Args,
                   F(struct_size) F(extension_start) F(client) F(devices)
                   F(num_devices)),
      PJRTX_LAYOUT(PJRT_Client_AddressableDevices_Args,
                   F(struct_size) F(extension_start) F(client)
                   F(addressable_devices) F(num_addressable_devices)),
      PJRTX_LAYOUT(PJRT_Client_LookupDevice_Args,
                   F(struct_size) F(extension_start) F(client) F(id) F(device)),
      PJRTX_LAYOUT(PJRT_Client_LookupAddressableDevice_Args,
                   F(struct_size) F(extension_start) F(client)
                   F(local_hardware_id) F(addressable_device)),
      PJRTX_LAYOUT(PJRT_ProcessInfo,
                   F(struct_size) F(task_id) F(incarnation_id) F(state)
                   F(error_code) F(error_message) F(error_message_size)),
      PJRTX_LAYOUT(PJRT_Client_UpdateGlobalProcessInfo_Args,
                   F(struct_size) F(extension_start) F(client) F(process_infos)
                   F(num_process_infos)),
      PJRTX_LAYOUT(PJRT_Client_AddressableMemories_Args,
                   F(struct_size) F(extension_start) F(client)
                   F(addressable_memories) F(num_addressable_memories)),
      PJRTX_LAYOUT(PJRT_Program,
                   F(struct_size) F(extension_start) F(code) F(code_size)
                   F(format) F(format_size)),
      PJRTX_LAYOUT(PJRT_Client_Compile_Args,
                   F(struct_size) F(extension_start) F(client) F(program)
                   F(compile_options) F(compile_options_size) F(executable)),
      PJRTX_LAYOUT(PJRT_Client_Load_Args,
                   F(struct_size) F(extension_start) F(client) F(executable)
                   F(compile_options) F(compile_options_size)
                   F(loaded_executable)),
      PJRTX_LAYOUT(PJRT_Client_DefaultDeviceAssignment_Args,
                   F(struct_size) F(extension_start) F(client) F(num_replicas)
                   F(num_partitions) F(default_assignment_size)
                   F(default_assignment)),
      PJRTX_LAYOUT(PJRT_Client_DmaMap_Args,
                   F(struct_size) F(extension_start) F(client) F(data) F(size)),
      PJRTX_LAYOUT(PJRT_Client_DmaUnmap_Args,
                   F(struct_size) F(extension_start) F(client) F(data)),
      PJRTX_LAYOUT(PJRT_Client_CreateUninitializedBuffer_Args,
                   F(struct_size) F(extension_start) F(client) F(shape_dims)
                   F(shape_num_dims) F(shape_element_type) F(shape_layout)
                   F(device) F(memory) F(buffer)),
      PJRTX_LAYOUT(PJRT_Client_CreateErrorBuffer_Args,
                   F(struct_size) F(extension_start) F(client) F(error_code)
                   F(error_message) F(error_message_size) F(shape_dims)
                   F(shape_num_dims) F(shape_element_type) F(shape_layout)
                   F(memory) F(buffer) F(payload) F(num_payload)),
      PJRTX_LAYOUT(PJRT_Client_CreateAliasBuffer_Args,
                   F(struct_size) F(extension_start) F(client) F(memory)
                   F(shape_dims) F(shape_num_dims) F(shape_element_type)
                   F(shape_layout) F(alias_buffer) F(fulfill_alias_buffer_cb)),
      PJRTX_LAYOUT(PJRT_Client_FulfillAliasBuffer_Args,
                   F(struct_size) F(extension_start) F(client) F(buffer)
                   F(status_code) F(error_message) F(error_message_size)
                   F(fulfill_alias_buffer_cb)),
      PJRTX_LAYOUT(PJRT_Client_BufferFromHostBuffer_Args,
                   F(struct_size) F(extension_start) F(client) F(data) F(type)
                   F(dims) F(num_dims) F(byte_strides) F(num_byte_strides)
                   F(host_buffer_semantics) F(device) F(memory)
                   F(device_layout) F(done_with_host_buffer) F(buffer)),
      PJRTX_LAYOUT(PJRT_Client_CreateViewOfDeviceBuffer_Args,
                   F(struct_size) F(extension_start) F(client)
                   F(device_buffer_ptr) F(dims) F(num_dims) F(element_type)
                   F(layout) F(device) F(on_delete_callback)
                   F(on_delete_callback_arg) F(stream) F(buffer) F(memory)),
      PJRTX_LAYOUT(PJRT_Client_CreateBuffersForAsyncHostToDevice_Args,
                   F(struct_size) F(extension_start) F(client) F(shape_specs)
                   F(num_shape_specs) F(device_layouts) F(num_device_layouts)
                   F(memory) F(transfer_manager)),
      PJRTX_LAYOUT(PJRT_AsyncHostToDeviceTransferManager_Destroy_Args,
                   F(struct_size) F(extension_start) F(transfer_manager)),
      PJRTX_LAYOUT(PJRT_AsyncHostToDeviceTransferManager_TransferData_Args,
                   F(struct_size) F(extension_start) F(transfer_manager)
                   F(buffer_index) F(data) F(offset) F(transfer_size)
                   F(is_last_transfer) F(done_with_h2d_transfer)),
      PJRTX_LAYOUT(PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args,
                   F(struct_size) F(extension_start) F(transfer_manager)
                   F(buffer_index) F(buffer_out)),
      PJRTX_LAYOUT(PJRT_AsyncHostToDeviceTransferManager_Device_Args,
                   F(struct_size) F(extension_start) F(transfer_manager)
                   F(device_out)),
      PJRTX_LAYOUT(PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args,
                   F(struct_size) F(extension_start) F(transfer_manager)
                   F(buffer_count)),
      PJRTX_LAYOUT(PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args,
                   F(struct_size) F(extension_start) F(transfer_manager)
                   F(buffer_index) F(buffer_size)),
      PJRTX_LAYOUT(PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args,
                   F(struct_size) F(extension_start) F(transfer_manager)
                   F(buffer_index) F(error_code) F(error_message)
                   F(error_message_size)),
      PJRTX_LAYOUT(PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args,
                   F(struct_size) F(extension_start) F(transfer_manager)
                   F(transfer_metadata) F(num_metadata)),
      PJRTX_LAYOUT(PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args,
                   F(struct_size) F(extension_start) F(transfer_manager)
                   F(buffer_index) F(data) F(shape_dims) F(shape_num_dims)
                   F(shape_element_type) F(shape_layout)
                   F(done_with_h2d_transfer)),
      PJRTX_LAYOUT(PJRT_DeviceDescription_Id_Args,
                   F(struct_size) F(extension_start) F(device_description)
                   F(id)),
      PJRTX_LAYOUT(PJRT_DeviceDescription_ProcessIndex_Args,
                   F(struct_size) F(extension_start) F(device_description)
                   F(process_index)),
      PJRTX_LAYOUT(PJRT_DeviceDescription_Attributes_Args,
                   F(struct_size) F(extension_start) F(device_description)
                   F(num_attributes) F(attributes)),
      PJRTX_LAYOUT(PJRT_DeviceDescription_Kind_Args,
                   F(struct_size) F(extension_start) F(device_description)
                   F(device_kind) F(device_kind_size)),
      PJRTX_LAYOUT(PJRT_DeviceDescription_DebugString_Args,
                   F(struct_size) F(extension_start) F(device_description)
                   F(debug_string) F(debug_string_size)),
      PJRTX_LAYOUT(PJRT_DeviceDescription_ToString_Args,
                   F(struct_size) F(extension_start) F(device_description)
                   F(to_string) F(to_string_size)),
      PJRTX_LAYOUT(PJRT_Device_GetDescription_Args,
                   F(struct_size) F(extension_start) F(device)
                   F(device_description)),
      PJRTX_LAYOUT(PJRT_Device_IsAddressable_Args,
                   F(struct_size) F(extension_start) F(device)
                   F(is_addressable)),
      PJRTX_LAYOUT(PJRT_Device_LocalHardwareId_Args,
                   F(struct_size) F(extension_start) F(device)
                   F(local_hardware_id)),
      PJRTX_LAYOUT(PJRT_Device_AddressableMemories_Args,
                   F(struct_size) F(extension_start) F(device) F(memories)
                   F(num_memories)),
      PJRTX_LAYOUT(PJRT_Device_DefaultMemory_Args,
                   F(struct_size) F(extension_start) F(device) F(memory)),
      PJRTX_LAYOUT(PJRT_Device_MemoryStats_Args,
                   F(struct_size) F(extension_start) F(device) F(bytes_in_use)
                   F(peak_bytes_in_use) F(peak_bytes_in_use_is_set)
                   F(num_allocs) F(num_allocs_is_set) F(largest_alloc_size)
                   F(largest_alloc_size_is_set) F(bytes_limit)
                   F(bytes_limit_is_set) F(bytes_reserved)
                   F(bytes_reserved_is_set) F(peak_bytes_reserved)
                   F(peak_bytes_reserved_is_set) F(bytes_reservable_limit)
                   F(bytes_reservable_limit_is_set) F(largest_free_block_bytes)
                   F(largest_free_block_bytes_is_set) F(pool_bytes)
                   F(pool_bytes_is_set) F(peak_pool_bytes)
                   F(peak_pool_bytes_is_set)),
      PJRTX_LAYOUT(PJRT_Device_ClearMemoryStats_Args,
                   F(struct_size) F(extension_start) F(device)),
      PJRTX_LAYOUT(PJRT_Device_PoisonExecution_Args,
                   F(struct_size) F(extension_start) F(device) F(launch_id)
                   F(error_code) F(error_message) F(error_message_size)
                   F(poisoned) F(payload) F(num_payload)),
      PJRTX_LAYOUT(PJRT_Device_GetAttributes_Args,
                   F(struct_size) F(extension_start) F(device) F(attributes)
                   F(num_attributes) F(device_attributes) F(attributes_deleter)),
      PJRTX_LAYOUT(PJRT_Device_CreateAsyncTrackingEvent_Args,
                   F(struct_size) F(extension_start) F(device) F(description)
                   F(description_size) F(event)),
      PJRTX_LAYOUT(PJRT_AsyncTrackingEvent_Destroy_Args,
                   F(struct_size) F(extension_start) F(event)),
      PJRTX_LAYOUT(PJRT_Memory_Id_Args,
                   F(struct_size) F(extension_start) F(memory) F(id)),
      PJRTX_LAYOUT(PJRT_Memory_Kind_Args,
                   F(struct_size) F(extension_start) F(memory) F(kind)
                   F(kind_size)),
      PJRTX_LAYOUT(PJRT_Memory_Kind_Id_Args,
                   F(struct_size) F(extension_start) F(memory) F(kind_id)),
      PJRTX_LAYOUT(PJRT_Memory_DebugString_Args,
                   F(struct_size) F(extension_start) F(memory) F(debug_string)
                   F(debug_string_size)),
      PJRTX_LAYOUT(PJRT_Memory_ToString_Args,
                   F(struct_size) F(extension_start) F(memory) F(to_string)
                   F(to_string_size)),
      PJRTX_LAYOUT(PJRT_Memory_AddressableByDevices_Args,
                   F(struct_size) F(extension_start) F(memory) F(devices)
                   F(num_devices)),
      PJRTX_LAYOUT(PJRT_ExecuteContext_Create_Args,
                   F(struct_size) F(extension_start) F(context)),
      PJRTX_LAYOUT(PJRT_ExecuteContext_Destroy_Args,
                   F(struct_size) F(extension_start) F(context)),
      PJRTX_LAYOUT(PJRT_Executable_Destroy_Args,
                   F(struct_size) F(extension_start) F(executable)),
      PJRTX_LAYOUT(PJRT_Executable_Name_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(executable_name) F(executable_name_size)),
      PJRTX_LAYOUT(PJRT_Executable_NumReplicas_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(num_replicas)),
      PJRTX_LAYOUT(PJRT_Executable_NumPartitions_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(num_partitions)),
      PJRTX_LAYOUT(PJRT_Executable_NumOutputs_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(num_outputs)),
      PJRTX_LAYOUT(PJRT_Executable_SizeOfGeneratedCodeInBytes_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(size_in_bytes)),
      PJRTX_LAYOUT(PJRT_Executable_GetCostAnalysis_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(num_properties) F(properties)),
      PJRTX_LAYOUT(PJRT_Executable_OutputMemoryKinds_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(num_outputs) F(memory_kinds) F(memory_kind_sizes)),
      PJRTX_LAYOUT(PJRT_Executable_ParameterMemoryKinds_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(num_parameters) F(memory_kinds) F(memory_kind_sizes)),
      PJRTX_LAYOUT(PJRT_Executable_OptimizedProgram_Args,
                   F(struct_size) F(extension_start) F(executable) F(program)),
      PJRTX_LAYOUT(PJRT_Executable_Serialize_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(serialized_bytes) F(serialized_bytes_size)
                   F(serialized_executable) F(serialized_executable_deleter)),
      PJRTX_LAYOUT(PJRT_Executable_Fingerprint_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(executable_fingerprint) F(executable_fingerprint_size)),
      PJRTX_LAYOUT(PJRT_Executable_OutputElementTypes_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(output_types) F(num_output_types)),
      PJRTX_LAYOUT(PJRT_Executable_OutputDimensions_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(num_outputs) F(dims) F(dim_sizes)),
      PJRTX_LAYOUT(PJRT_Executable_GetCompiledMemoryStats_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(generated_code_size_in_bytes) F(argument_size_in_bytes)
                   F(output_size_in_bytes) F(alias_size_in_bytes)
                   F(temp_size_in_bytes) F(host_generated_code_size_in_bytes)
                   F(host_argument_size_in_bytes) F(host_output_size_in_bytes)
                   F(host_alias_size_in_bytes) F(host_temp_size_in_bytes)
                   F(peak_memory_in_bytes) F(total_size_in_bytes)
                   F(total_allocation_bytes) F(indefinite_allocations)
                   F(peak_unpadded_heap_bytes)),
      PJRTX_LAYOUT(PJRT_Executable_GetCompileOptions_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(serialized_bytes) F(serialized_bytes_size)
                   F(serialized_compile_options)
                   F(serialized_compile_options_deleter)),
      PJRTX_LAYOUT(PJRT_LoadOptions,
                   F(struct_size) F(computation_origin)
                   F(computation_origin_size) F(multi_slice_config)),
      PJRTX_LAYOUT(PJRT_Executable_DeserializeAndLoad_Args,
                   F(struct_size) F(extension_start) F(client)
                   F(serialized_executable) F(serialized_executable_size)
                   F(loaded_executable)
                   F(overridden_serialized_compile_options)
                   F(overridden_serialized_compile_options_size)
                   F(load_options)),
      PJRTX_LAYOUT(PJRT_LoadedExecutable_Destroy_Args,
                   F(struct_size) F(extension_start) F(executable)),
      PJRTX_LAYOUT(PJRT_LoadedExecutable_GetExecutable_Args,
                   F(struct_size) F(extension_start) F(loaded_executable)
                   F(executable)),
      PJRTX_LAYOUT(PJRT_LoadedExecutable_AddressableDevices_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(addressable_devices) F(num_addressable_devices)),
      PJRTX_LAYOUT(PJRT_LogicalDeviceIds, F(replica) F(partition)),
      PJRTX_LAYOUT(PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(addressable_device_logical_ids)
                   F(num_addressable_device_logical_ids)),
      PJRTX_LAYOUT(PJRT_LoadedExecutable_GetDeviceAssignment_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(serialized_bytes) F(serialized_bytes_size)
                   F(serialized_device_assignment)
                   F(serialized_device_assignment_deleter)),
      PJRTX_LAYOUT(PJRT_LoadedExecutable_Delete_Args,
                   F(struct_size) F(extension_start) F(executable)),
      PJRTX_LAYOUT(PJRT_LoadedExecutable_IsDeleted_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(is_deleted)),
      PJRTX_LAYOUT(PJRT_LoadedExecutable_Fingerprint_Args,
                   F(struct_size) F(extension_start) F(executable)
                   F(executable_fingerprint) F(executable_fingerprint_size)),
      PJRTX_LAYOUT(PJRT_Chunk, F(data) F(size) F(deleter) F(deleter_arg)),
      PJRTX_LAYOUT(PJRT_SendCallbackInfo,
                   F(channel_id) F(user_arg) F(send_callback)),
      PJRTX_LAYOUT(PJRT_RecvCallbackInfo,
                   F(channel_id) F(user_arg) F(recv_callback)),
      PJRTX_LAYOUT(PJRT_HloOutputCallbackInfo,
                   F(user_arg) F(callback) F(callback_id) F(num_operands)),
      PJRTX_LAYOUT(PJRT_ExecuteOptions,
                   F(struct_size) F(extension_start) F(send_callbacks)
                   F(recv_callbacks) F(num_send_ops) F(num_recv_ops)
                   F(launch_id) F(non_donatable_input_indices)
                   F(num_non_donatable_input_indices) F(context)
                   F(call_location) F(num_tasks) F(task_ids) F(incarnation_ids)
                   F(multi_slice_config)
                   F(use_major_to_minor_data_layout_for_callbacks)
                   F(hlo_output_callbacks) F(num_hlo_output_callbacks)),
      PJRTX_LAYOUT(PJRT_LoadedExecutable_Execute_Args,
                   F(struct_size) F(extension_start) F(executable) F(options)
                   F(argument_lists) F(num_devices) F(num_args) F(output_lists)
                   F(device_complete_events) F(execute_device)),
      PJRTX_LAYOUT(PJRT_Buffer_Destroy_Args,
                   F(struct_size) F(extension_start) F(buffer)),
      PJRTX_LAYOUT(PJRT_Buffer_ElementType_Args,
                   F(struct_size) F(extension_start) F(buffer) F(type)),
      PJRTX_LAYOUT(PJRT_Buffer_Dimensions_Args,
                   F(struct_size) F(extension_start) F(buffer) F(dims)
                   F(num_dims)),
      PJRTX_LAYOUT(PJRT_Buffer_UnpaddedDimensions_Args,
                   F(struct_size) F(extension_start) F(buffer) F(unpadded_dims)
                   F(num_dims)),
      PJRTX_LAYOUT(PJRT_Buffer_DynamicDimensionIndices_Args,
                   F(struct_size) F(extension_start) F(buffer)
                   F(dynamic_dim_indices) F(num_dynamic_dims)),
      PJRTX_LAYOUT(PJRT_Buffer_GetMemoryLayout_Args,
                   F(struct_size) F(extension_start) F(buffer) F(layout)),
      PJRTX_LAYOUT(PJRT_Buffer_OnDeviceSizeInBytes_Args,
                   F(struct_size) F(extension_start) F(buffer)
                   F(on_device_size_in_bytes)),
      PJRTX_LAYOUT(PJRT_Buffer_Device_Args,
                   F(struct_size) F(extension_start) F(buffer) F(device)),
      PJRTX_LAYOUT(PJRT_Buffer_Memory_Args,
                   F(struct_size) F(extension_start) F(buffer) F(memory)),
      PJRTX_LAYOUT(PJRT_Buffer_Delete_Args,
                   F(struct_size) F(extension_start) F(buffer)),
      PJRTX_LAYOUT(PJRT_Buffer_IsDeleted_Args,
                   F(struct_size) F(extension_start) F(buffer) F(is_deleted)),
      PJRTX_LAYOUT(PJRT_Buffer_CopyToDevice_Args,
                   F(struct_size) F(extension_start) F(buffer) F(dst_device)
                   F(dst_buffer)),
      PJRTX_LAYOUT(PJRT_Buffer_ToHostBuffer_Args,
                   F(struct_size) F(extension_start) F(src) F(host_layout)
                   F(dst) F(dst_size) F(event)),
      PJRTX_LAYOUT(PJRT_Buffer_IsOnCpu_Args,
                   F(struct_size) F(extension_start) F(buffer) F(is_on_cpu)),
      PJRTX_LAYOUT(PJRT_Buffer_ReadyEvent_Args,
                   F(struct_size) F(extension_start) F(buffer) F(event)),
      PJRTX_LAYOUT(PJRT_Buffer_UnsafePointer_Args,
                   F(struct_size) F(extension_start) F(buffer)
                   F(buffer_pointer)),
      PJRTX_LAYOUT(PJRT_Buffer_IncreaseExternalReferenceCount_Args,
                   F(struct_size) F(extension_start) F(buffer)),
      PJRTX_LAYOUT(PJRT_Buffer_DecreaseExternalReferenceCount_Args,
                   F(struct_size) F(extension_start) F(buffer)),
      PJRTX_LAYOUT(PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args,
                   F(struct_size) F(extension_start) F(buffer)
                   F(device_memory_ptr)),
      PJRTX_LAYOUT(PJRT_Buffer_CopyToMemory_Args,
                   F(struct_size) F(extension_start) F(buffer) F(dst_memory)
                   F(dst_buffer)),
      PJRTX_LAYOUT(PJRT_Buffer_CopyRawToHost_Args,
                   F(struct_size) F(extension_start) F(buffer) F(dst) F(offset)
                   F(transfer_size) F(event)),
      PJRTX_LAYOUT(PJRT_Buffer_CopyRawToHostFuture_Callback_Args,
                   F(struct_size) F(callback_data) F(error_code)
                   F(error_message) F(error_message_size) F(dst)),
      PJRTX_LAYOUT(PJRT_Buffer_CopyRawToHostFuture_Args,
                   F(struct_size) F(extension_start) F(buffer) F(offset)
                   F(transfer_size) F(event) F(callback_data)
                   F(future_ready_callback)),
      PJRTX_LAYOUT(PJRT_Buffer_DonateWithControlDependency_Callback_Args,
                   F(struct_size) F(callback_data) F(error_code)
                   F(error_message) F(error_message_size)),
      PJRTX_LAYOUT(PJRT_Buffer_DonateWithControlDependency_Args,
                   F(struct_size) F(extension_start) F(buffer) F(callback_data)
                   F(dependency_ready_callback) F(out_buffer)),
      PJRTX_LAYOUT(PJRT_Buffer_Bitcast_Args,
                   F(struct_size) F(extension_start) F(buffer) F(element_type)
                   F(dims) F(num_dims) F(device_layout) F(out_buffer)),
      PJRTX_LAYOUT(PJRT_CopyToDeviceStream_Destroy_Args,
                   F(struct_size) F(extension_start) F(stream)),
      PJRTX_LAYOUT(PJRT_CopyToDeviceStream_AddChunk_Args,
                   F(struct_size) F(extension_start) F(stream) F(chunk)
                   F(transfer_complete)),
      PJRTX_LAYOUT(PJRT_CopyToDeviceStream_TotalBytes_Args,
                   F(struct_size) F(extension_start) F(stream) F(total_bytes)),
      PJRTX_LAYOUT(PJRT_CopyToDeviceStream_GranuleSize_Args,
                   F(struct_size) F(extension_start) F(stream)
                   F(granule_size_in_bytes)),
      PJRTX_LAYOUT(PJRT_CopyToDeviceStream_CurrentBytes_Args,
                   F(struct_size) F(extension_start) F(stream) F(current_bytes)),
      PJRTX_LAYOUT(PJRT_TopologyDescription_Create_Args,
                   F(struct_size) F(extension_start) F(topology_name)
                   F(topology_name_size) F(create_options) F(num_options)
                   F(topology)),
      PJRTX_LAYOUT(PJRT_TopologyDescription_Destroy_Args,
                   F(struct_size) F(extension_start) F(topology)),
      PJRTX_LAYOUT(PJRT_TopologyDescription_PlatformVersion_Args,
                   F(struct_size) F(extension_start) F(topology)
                   F(platform_version) F(platform_version_size)),
      PJRTX_LAYOUT(PJRT_TopologyDescription_PlatformName_Args,
                   F(struct_size) F(extension_start) F(topology)
                   F(platform_name) F(platform_name_size)),
      PJRTX_LAYOUT(PJRT_TopologyDescription_GetDeviceDescriptions_Args,
                   F(struct_size) F(extension_start) F(topology)
                   F(descriptions) F(num_descriptions)),
      PJRTX_LAYOUT(PJRT_TopologyDescription_Serialize_Args,
                   F(struct_size) F(extension_start) F(topology)
                   F(serialized_bytes) F(serialized_bytes_size)
                   F(serialized_topology) F(serialized_topology_deleter)),
      PJRTX_LAYOUT(PJRT_TopologyDescription_Attributes_Args,
                   F(struct_size) F(extension_start) F(topology) F(attributes)
                   F(num_attributes)),
      PJRTX_LAYOUT(PJRT_TopologyDescription_Deserialize_Args,
                   F(struct_size) F(extension_start) F(serialized_topology)
                   F(serialized_topology_size) F(topology)),
      PJRTX_LAYOUT(PJRT_TopologyDescription_Fingerprint_Args,
                   F(struct_size) F(extension_start) F(topology) F(fingerprint)),
      PJRTX_LAYOUT(PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args,
                   F(struct_size) F(extension_start) F(topology)
                   F(memory_space_kind_id) F(dims) F(num_dims) F(element_type)
                   F(layout) F(serialized_shape) F(serialized_shape_size)
                   F(serialized_shape_deleter)),
      PJRTX_LAYOUT(PJRT_TopologyDescription_GetMemorySpaceKindIds_Args,
                   F(struct_size) F(extension_start) F(topology)
                   F(memory_space_kind_ids) F(num_memory_space_kind_ids)),
      PJRTX_LAYOUT(PJRT_Compile_Args,
                   F(struct_size) F(extension_start) F(topology) F(program)
                   F(compile_options) F(compile_options_size) F(client)
                   F(executable)),
      // The table itself: header, then one F() per slot from the slot list.
      PJRTX_LAYOUT(PJRT_Api,
                   F(struct_size) F(extension_start) F(pjrt_api_version)
                   PJRTX_PJRT_SLOTS(F)),
  };
}

#undef PJRTX_LAYOUT
#undef F

#define E(enumerator) EnumValue{#enumerator, static_cast<int64_t>(enumerator)},

std::vector<EnumLayout> build_enums() {
  return {
      {"PJRT_Extension_Type",
       {E(PJRT_Extension_Type_Gpu_Custom_Call) E(PJRT_Extension_Type_Profiler)
        E(PJRT_Extension_Type_Custom_Partitioner) E(PJRT_Extension_Type_Stream)
        E(PJRT_Extension_Type_Layouts) E(PJRT_Extension_Type_FFI)
        E(PJRT_Extension_Type_MemoryDescriptions) E(PJRT_Extension_Type_Triton)
        E(PJRT_Extension_Type_RawBuffer) E(PJRT_Extension_Type_PhaseCompile)
        E(PJRT_Extension_Type_Example) E(PJRT_Extension_Type_Unknown)
        E(PJRT_Extension_Type_CrossHostTransfers)
        E(PJRT_Extension_Type_ExecutableMetadata)
        E(PJRT_Extension_Type_Callback) E(PJRT_Extension_Type_HostAllocator)
        E(PJRT_Extension_Type_TpuTopology) E(PJRT_Extension_Type_TpuExecutable)
        E(PJRT_Extension_Type_Megascale) E(PJRT_Extension_Type_Shardings)
        E(PJRT_Extension_Type_AbiVersion) E(PJRT_Extension_Type_Collectives)
        E(PJRT_Extension_Type_MultiSlice)
        E(PJRT_Extension_Type_HostMemoryAllocator)
        E(PJRT_Extension_Type_XlaTransform)}},
      {"PJRT_Error_Code",
       {E(PJRT_Error_Code_OK) E(PJRT_Error_Code_CANCELLED)
        E(PJRT_Error_Code_UNKNOWN) E(PJRT_Error_Code_INVALID_ARGUMENT)
        E(PJRT_Error_Code_DEADLINE_EXCEEDED) E(PJRT_Error_Code_NOT_FOUND)
        E(PJRT_Error_Code_ALREADY_EXISTS) E(PJRT_Error_Code_PERMISSION_DENIED)
        E(PJRT_Error_Code_RESOURCE_EXHAUSTED)
        E(PJRT_Error_Code_FAILED_PRECONDITION) E(PJRT_Error_Code_ABORTED)
        E(PJRT_Error_Code_OUT_OF_RANGE) E(PJRT_Error_Code_UNIMPLEMENTED)
        E(PJRT_Error_Code_INTERNAL) E(PJRT_Error_Code_UNAVAILABLE)
        E(PJRT_Error_Code_DATA_LOSS) E(PJRT_Error_Code_UNAUTHENTICATED)}},
      {"PJRT_NamedValue_Type",
       {E(PJRT_NamedValue_kString) E(PJRT_NamedValue_kInt64)
        E(PJRT_NamedValue_kInt64List) E(PJRT_NamedValue_kFloat)
        E(PJRT_NamedValue_kBool)}},
      {"PJRT_Buffer_Type",
       {E(PJRT_Buffer_Type_INVALID) E(PJRT_Buffer_Type_PRED)
        E(PJRT_Buffer_Type_S8) E(PJRT_Buffer_Type_S16) E(PJRT_Buffer_Type_S32)
        E(PJRT_Buffer_Type_S64) E(PJRT_Buffer_Type_U8) E(PJRT_Buffer_Type_U16)
        E(PJRT_Buffer_Type_U32) E(PJRT_Buffer_Type_U64) E(PJRT_Buffer_Type_F16)
        E(PJRT_Buffer_Type_F32) E(PJRT_Buffer_Type_F64)
        E(PJRT_Buffer_Type_BF16) E(PJRT_Buffer_Type_C64)
        E(PJRT_Buffer_Type_C128) E(PJRT_Buffer_Type_F8E5M2)
        E(PJRT_Buffer_Type_F8E4M3FN) E(PJRT_Buffer_Type_F8E4M3B11FNUZ)
        E(PJRT_Buffer_Type_F8E5M2FNUZ) E(PJRT_Buffer_Type_F8E4M3FNUZ)
        E(PJRT_Buffer_Type_S4) E(PJRT_Buffer_Type_U4) E(PJRT_Buffer_Type_TOKEN)
        E(PJRT_Buffer_Type_S2) E(PJRT_Buffer_Type_U2)
        E(PJRT_Buffer_Type_F8E4M3) E(PJRT_Buffer_Type_F8E3M4)
        E(PJRT_Buffer_Type_F8E8M0FNU) E(PJRT_Buffer_Type_F4E2M1FN)
        E(PJRT_Buffer_Type_S1) E(PJRT_Buffer_Type_U1)}},
      {"PJRT_HostBufferSemantics",
       {E(PJRT_HostBufferSemantics_kImmutableOnlyDuringCall)
        E(PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes)
        E(PJRT_HostBufferSemantics_kImmutableZeroCopy)
        E(PJRT_HostBufferSemantics_kMutableZeroCopy)}},
      {"PJRT_Buffer_MemoryLayout_Type",
       {E(PJRT_Buffer_MemoryLayout_Type_Tiled)
        E(PJRT_Buffer_MemoryLayout_Type_Strides)}},
      {"PJRT_ProcessState",
       {E(PJRT_ProcessState_kUnspecified) E(PJRT_ProcessState_kUninitialized)
        E(PJRT_ProcessState_kDisconnected) E(PJRT_ProcessState_kConnected)
        E(PJRT_ProcessState_kError)}},
  };
}

#undef E

// The three tables as one JSON document, the form the test reads through
// ctypes: {"layouts": [{name, sizeof, struct_size, fields: [[name, offset,
// size], ...]}, ...], "slots": [name, ...], "enums": {name: [[enumerator,
// value], ...]}}. Every name is a C identifier, so nothing needs escaping.
std::string to_json() {
  std::string out = "{\"layouts\": [";
  const char* sep = "";
  for (const StructLayout& s : build_layouts()) {
    out += sep;
    sep = ", ";
    out += "{\"name\": \"" + std::string(s.name) + "\", \"sizeof\": " +
           std::to_string(s.sizeof_value) + ", \"struct_size\": " +
           std::to_string(s.struct_size_constant) + ", \"fields\": [";
    const char* fsep = "";
    for (const FieldLayout& f : s.fields) {
      out += fsep;
      fsep = ", ";
      out += "[\"" + std::string(f.name) + "\", " + std::to_string(f.offset) + ", " +
             std::to_string(f.size) + "]";
    }
    out += "]}";
  }
  out += "], \"slots\": [";
  sep = "";
#define PJRTX_SLOT_NAME(fn) out += sep, out += "\"" #fn "\"", sep = ", ";
  PJRTX_PJRT_SLOTS(PJRTX_SLOT_NAME)
#undef PJRTX_SLOT_NAME
  out += "], \"enums\": {";
  sep = "";
  for (const EnumLayout& e : build_enums()) {
    out += sep;
    sep = ", ";
    out += "\"" + std::string(e.name) + "\": [";
    const char* vsep = "";
    for (const EnumValue& v : e.values) {
      out += vsep;
      vsep = ", ";
      out += "[\"" + std::string(v.name) + "\", " + std::to_string(v.value) + "]";
    }
    out += "]";
  }
  out += "}}";
  return out;
}

}  // namespace

// The one exported symbol; the string lives as long as the library.
extern "C" __attribute__((visibility("default"))) const char* pjrtx_abi_layout_json() {
  static const std::string json = to_json();
  return json.c_str();
}
