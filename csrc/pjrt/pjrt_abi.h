// pjrtx's own declaration of the PJRT C API, version 0.112 (the version that
// jaxlib 0.10.2 speaks; its xla pin is openxla/xla 5a9e73cb).
//
// Type names, field names, field order, field types and enum values are ABI
// facts and match the framework bit for bit; everything else here (grouping,
// macros, comments) is ours. tests/test_pjrt_abi.py checks every layout below
// against an independent table of the ABI (pypjrt).
//
// Conventions the whole file relies on:
// - Every argument struct starts with `struct_size` and `extension_start`.
//   A caller compiled against an older header passes a smaller struct_size:
//   read a field only if `struct_size` reaches past its end.
// - `<T>_STRUCT_SIZE` = offsetof(last field) + sizeof(last field). It is NOT
//   sizeof(T): a struct that ends in a bool has an odd size (e.g.
//   PJRT_Buffer_IsDeleted_Args_STRUCT_SIZE is 25 while sizeof is 32).
// - The function table starts at byte 40 of PJRT_Api and holds 138 pointers in
//   the order of PJRTX_PJRT_SLOTS below; the slot order is the ABI.
// - Handles are opaque except PJRT_Error and PJRT_Memory, whose first member is
//   a pointer to a function table the framework may call through directly
//   (jaxlib reads PJRT_Memory's table from minor 105 on).
//
// C-compatible (C11) and C++20; no other includes.

#ifndef PJRTX_PJRT_ABI_H_
#define PJRTX_PJRT_ABI_H_

#include <cstdint>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PJRTX_PJRT_API_MAJOR 0
#define PJRTX_PJRT_API_MINOR 112

// Bytes of T up to and including `last`.
#define PJRTX_STRUCT_SIZE(T, last) \
  (offsetof(T, last) + sizeof(((T*)0)->last))

// Defines T##_STRUCT_SIZE. In C++ it is a constexpr size_t, and a static_assert
// checks that `last` really is the last member: sizeof(T) must be the struct
// size rounded up to T's alignment.
#ifdef __cplusplus
#define PJRTX_DEFINE_SIZE(T, last)                                        \
  constexpr size_t T##_STRUCT_SIZE = PJRTX_STRUCT_SIZE(T, last);          \
  static_assert(sizeof(T) == (T##_STRUCT_SIZE + alignof(T) - 1) /         \
                                 alignof(T) * alignof(T),                 \
                #T ": `" #last "` is not its last member");
#else
#define PJRTX_DEFINE_SIZE(T, last) \
  enum { T##_STRUCT_SIZE = PJRTX_STRUCT_SIZE(T, last) };
#endif

// The two members every argument (and most helper) struct begins with.
#define PJRTX_ARGS_PREFIX \
  size_t struct_size;     \
  PJRT_Extension_Base* extension_start;

#ifdef __cplusplus
extern "C" {
#endif

// ===========================================================================
// Extension chains
// ===========================================================================

// Tag of a PJRT_Extension_Base. Values are positional and never reused.
typedef enum {
  PJRT_Extension_Type_Gpu_Custom_Call = 0,
  PJRT_Extension_Type_Profiler = 1,
  PJRT_Extension_Type_Custom_Partitioner = 2,
  PJRT_Extension_Type_Stream = 3,
  PJRT_Extension_Type_Layouts = 4,
  PJRT_Extension_Type_FFI = 5,
  PJRT_Extension_Type_MemoryDescriptions = 6,
  PJRT_Extension_Type_Triton = 7,
  PJRT_Extension_Type_RawBuffer = 8,
  PJRT_Extension_Type_PhaseCompile = 9,
  PJRT_Extension_Type_Example = 10,
  PJRT_Extension_Type_Unknown = 11,
  PJRT_Extension_Type_CrossHostTransfers = 12,
  PJRT_Extension_Type_ExecutableMetadata = 13,
  PJRT_Extension_Type_Callback = 14,
  PJRT_Extension_Type_HostAllocator = 15,
  PJRT_Extension_Type_TpuTopology = 16,
  PJRT_Extension_Type_TpuExecutable = 17,
  PJRT_Extension_Type_Megascale = 18,
  PJRT_Extension_Type_Shardings = 19,
  PJRT_Extension_Type_AbiVersion = 20,
  PJRT_Extension_Type_Collectives = 21,
  PJRT_Extension_Type_MultiSlice = 22,
  PJRT_Extension_Type_HostMemoryAllocator = 23,
  PJRT_Extension_Type_XlaTransform = 24,
} PJRT_Extension_Type;

// Header of every extension; `next` links the chain that starts at some
// `extension_start` (PJRT_Api's for plugin extensions, an args struct's for
// per-call ones).
typedef struct PJRT_Extension_Base {
  size_t struct_size;
  PJRT_Extension_Type type;
  struct PJRT_Extension_Base* next;
} PJRT_Extension_Base;
PJRTX_DEFINE_SIZE(PJRT_Extension_Base, next)

// Profiler extension (type PJRT_Extension_Type_Profiler). jaxlib puts one in
// PJRT_LoadedExecutable_Execute_Args.extension_start to pass a trace context;
// a plugin that has no profiler skips it. The profiler API itself stays opaque
// here.
typedef struct PLUGIN_Profiler_Api PLUGIN_Profiler_Api;

typedef struct PJRT_Profiler_Extension {
  PJRT_Extension_Base base;
  PLUGIN_Profiler_Api* profiler_api;  // NULL when used as an args extension
  int64_t traceme_context_id;         // meaningful only as an args extension
} PJRT_Profiler_Extension;
PJRTX_DEFINE_SIZE(PJRT_Profiler_Extension, traceme_context_id)

// Shardings extension (type PJRT_Extension_Type_Shardings, version 1): the
// parameter and output shardings of a compiled executable, as serialized
// xla.OpSharding protos owned by the executable. jaxlib asks for them when
// an executable spans several devices; outputs JAX left to the compiler
// take the reported sharding. NULL arrays: "not reported".
struct PJRT_Executable;
typedef struct PJRT_Shardings_PJRT_Executable_ParameterShardings_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  struct PJRT_Executable* executable;
  size_t num_parameters;         // out
  const char* const* shardings;  // out
  const size_t* sharding_sizes;  // out
} PJRT_Shardings_PJRT_Executable_ParameterShardings_Args;
PJRTX_DEFINE_SIZE(PJRT_Shardings_PJRT_Executable_ParameterShardings_Args, sharding_sizes)
typedef struct PJRT_Error* PJRT_Shardings_PJRT_Executable_ParameterShardings(
    PJRT_Shardings_PJRT_Executable_ParameterShardings_Args* args);

typedef struct PJRT_Shardings_PJRT_Executable_OutputShardings_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  struct PJRT_Executable* executable;
  size_t num_outputs;            // out
  const char* const* shardings;  // out
  const size_t* sharding_sizes;  // out
} PJRT_Shardings_PJRT_Executable_OutputShardings_Args;
PJRTX_DEFINE_SIZE(PJRT_Shardings_PJRT_Executable_OutputShardings_Args, sharding_sizes)
typedef struct PJRT_Error* PJRT_Shardings_PJRT_Executable_OutputShardings(
    PJRT_Shardings_PJRT_Executable_OutputShardings_Args* args);

typedef struct PJRT_Shardings_Extension {
  PJRT_Extension_Base base;
  PJRT_Shardings_PJRT_Executable_ParameterShardings* PJRT_Shardings_PJRT_Executable_ParameterShardings;
  PJRT_Shardings_PJRT_Executable_OutputShardings* PJRT_Shardings_PJRT_Executable_OutputShardings;
} PJRT_Shardings_Extension;
PJRTX_DEFINE_SIZE(PJRT_Shardings_Extension, PJRT_Shardings_PJRT_Executable_OutputShardings)

// ===========================================================================
// Version
// ===========================================================================

typedef struct PJRT_Api_Version {
  PJRTX_ARGS_PREFIX
  int major_version;  // out: PJRTX_PJRT_API_MAJOR
  int minor_version;  // out: PJRTX_PJRT_API_MINOR
} PJRT_Api_Version;
PJRTX_DEFINE_SIZE(PJRT_Api_Version, minor_version)

// ===========================================================================
// Opaque handles (the plugin defines them)
// ===========================================================================

typedef struct PJRT_Client PJRT_Client;
typedef struct PJRT_Device PJRT_Device;
typedef struct PJRT_DeviceDescription PJRT_DeviceDescription;
typedef struct PJRT_TopologyDescription PJRT_TopologyDescription;
typedef struct PJRT_Executable PJRT_Executable;
typedef struct PJRT_LoadedExecutable PJRT_LoadedExecutable;
typedef struct PJRT_Buffer PJRT_Buffer;
typedef struct PJRT_Event PJRT_Event;
typedef struct PJRT_ExecuteContext PJRT_ExecuteContext;
typedef struct PJRT_CopyToDeviceStream PJRT_CopyToDeviceStream;
typedef struct PJRT_AsyncHostToDeviceTransferManager
    PJRT_AsyncHostToDeviceTransferManager;
typedef struct PJRT_AsyncTrackingEvent PJRT_AsyncTrackingEvent;
typedef struct PJRT_FulfillAliasBufferCallback PJRT_FulfillAliasBufferCallback;
typedef struct PJRT_PhaseCompiler PJRT_PhaseCompiler;
typedef struct PJRT_MultiSlice_Config PJRT_MultiSlice_Config;
typedef struct PJRT_Device_Attributes PJRT_Device_Attributes;
typedef struct PJRT_DeviceAssignmentSerialized PJRT_DeviceAssignmentSerialized;
typedef struct PJRT_SerializedExecutable PJRT_SerializedExecutable;
typedef struct PJRT_SerializedCompileOptions PJRT_SerializedCompileOptions;
typedef struct PJRT_SerializedTopology PJRT_SerializedTopology;

// Not opaque (see below).
typedef struct PJRT_Error PJRT_Error;
typedef struct PJRT_Memory PJRT_Memory;

// ===========================================================================
// Errors
// ===========================================================================

// absl::StatusCode numbering.
typedef enum {
  PJRT_Error_Code_OK = 0,
  PJRT_Error_Code_CANCELLED = 1,
  PJRT_Error_Code_UNKNOWN = 2,
  PJRT_Error_Code_INVALID_ARGUMENT = 3,
  PJRT_Error_Code_DEADLINE_EXCEEDED = 4,
  PJRT_Error_Code_NOT_FOUND = 5,
  PJRT_Error_Code_ALREADY_EXISTS = 6,
  PJRT_Error_Code_PERMISSION_DENIED = 7,
  PJRT_Error_Code_RESOURCE_EXHAUSTED = 8,
  PJRT_Error_Code_FAILED_PRECONDITION = 9,
  PJRT_Error_Code_ABORTED = 10,
  PJRT_Error_Code_OUT_OF_RANGE = 11,
  PJRT_Error_Code_UNIMPLEMENTED = 12,
  PJRT_Error_Code_INTERNAL = 13,
  PJRT_Error_Code_UNAVAILABLE = 14,
  PJRT_Error_Code_DATA_LOSS = 15,
  PJRT_Error_Code_UNAUTHENTICATED = 16,
} PJRT_Error_Code;

// Called once per (key, value) status payload.
typedef void (*PJRT_Error_PayloadVisitor)(const char* key, size_t key_size,
                                          const char* value, size_t value_size,
                                          void* user_arg);

// Since minor 107 an error is an object with a function table as its first
// member. `instance_size` is the size of the object behind PJRT_Error*.
// (jaxlib 0.10.2's own table starts {56, 8, NULL, ...}: struct_size 56 and
// instance_size 8 = sizeof(PJRT_Error).)
typedef struct PJRT_Error_FunctionTable {
  size_t struct_size;
  size_t instance_size;
  PJRT_Extension_Base* extension_start;
  void (*destroy)(PJRT_Error* error);
  void (*message)(const PJRT_Error* error, const char** message,
                  size_t* message_size);
  PJRT_Error_Code (*get_code)(const PJRT_Error* error);
  void (*for_each_payload)(const PJRT_Error* error,
                           PJRT_Error_PayloadVisitor visitor, void* user_arg);
} PJRT_Error_FunctionTable;
PJRTX_DEFINE_SIZE(PJRT_Error_FunctionTable, for_each_payload)

struct PJRT_Error {
  const PJRT_Error_FunctionTable* vtable;
};
PJRTX_DEFINE_SIZE(PJRT_Error, vtable)

typedef struct PJRT_Error_Destroy_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Error* error;  // may be NULL
} PJRT_Error_Destroy_Args;
PJRTX_DEFINE_SIZE(PJRT_Error_Destroy_Args, error)
typedef void PJRT_Error_Destroy(PJRT_Error_Destroy_Args* args);

typedef struct PJRT_Error_Message_Args {
  PJRTX_ARGS_PREFIX
  const PJRT_Error* error;
  const char* message;  // out; lives as long as `error`
  size_t message_size;  // out
} PJRT_Error_Message_Args;
PJRTX_DEFINE_SIZE(PJRT_Error_Message_Args, message_size)
typedef void PJRT_Error_Message(PJRT_Error_Message_Args* args);

typedef struct PJRT_Error_GetCode_Args {
  PJRTX_ARGS_PREFIX
  const PJRT_Error* error;
  PJRT_Error_Code code;  // out
} PJRT_Error_GetCode_Args;
PJRTX_DEFINE_SIZE(PJRT_Error_GetCode_Args, code)
typedef PJRT_Error* PJRT_Error_GetCode(PJRT_Error_GetCode_Args* args);

typedef struct PJRT_Error_ForEachPayload_Args {
  PJRTX_ARGS_PREFIX
  const PJRT_Error* error;
  PJRT_Error_PayloadVisitor visitor;
  void* user_arg;
} PJRT_Error_ForEachPayload_Args;
PJRTX_DEFINE_SIZE(PJRT_Error_ForEachPayload_Args, user_arg)
typedef PJRT_Error* PJRT_Error_ForEachPayload(
    PJRT_Error_ForEachPayload_Args* args);

// Given by the plugin to caller-supplied callbacks so they can build an error;
// the implementation copies `message`.
typedef PJRT_Error* (*PJRT_CallbackError)(PJRT_Error_Code code,
                                          const char* message,
                                          size_t message_size);

// ===========================================================================
// Named values (attributes, options)
// ===========================================================================

typedef enum {
  PJRT_NamedValue_kString = 0,
  PJRT_NamedValue_kInt64 = 1,
  PJRT_NamedValue_kInt64List = 2,
  PJRT_NamedValue_kFloat = 3,
  PJRT_NamedValue_kBool = 4,
} PJRT_NamedValue_Type;

typedef struct PJRT_NamedValue {
  PJRTX_ARGS_PREFIX
  const char* name;
  size_t name_size;
  PJRT_NamedValue_Type type;
  union {
    const char* string_value;
    int64_t int64_value;
    const int64_t* int64_array_value;
    float float_value;
    bool bool_value;
  };
  size_t value_size;  // element count for string/list, 1 for scalars
} PJRT_NamedValue;
PJRTX_DEFINE_SIZE(PJRT_NamedValue, value_size)

// ===========================================================================
// Plugin
// ===========================================================================

typedef struct PJRT_Plugin_Initialize_Args {
  PJRTX_ARGS_PREFIX
} PJRT_Plugin_Initialize_Args;
PJRTX_DEFINE_SIZE(PJRT_Plugin_Initialize_Args, extension_start)
typedef PJRT_Error* PJRT_Plugin_Initialize(PJRT_Plugin_Initialize_Args* args);

typedef struct PJRT_Plugin_Attributes_Args {
  PJRTX_ARGS_PREFIX
  const PJRT_NamedValue* attributes;  // out; must live for the process
  size_t num_attributes;              // out
} PJRT_Plugin_Attributes_Args;
PJRTX_DEFINE_SIZE(PJRT_Plugin_Attributes_Args, num_attributes)
typedef PJRT_Error* PJRT_Plugin_Attributes(PJRT_Plugin_Attributes_Args* args);

// ===========================================================================
// Events
// ===========================================================================

typedef struct PJRT_Event_Destroy_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Event* event;
} PJRT_Event_Destroy_Args;
PJRTX_DEFINE_SIZE(PJRT_Event_Destroy_Args, event)
typedef PJRT_Error* PJRT_Event_Destroy(PJRT_Event_Destroy_Args* args);

typedef struct PJRT_Event_IsReady_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Event* event;
  bool is_ready;  // out
} PJRT_Event_IsReady_Args;
PJRTX_DEFINE_SIZE(PJRT_Event_IsReady_Args, is_ready)
typedef PJRT_Error* PJRT_Event_IsReady(PJRT_Event_IsReady_Args* args);

typedef struct PJRT_Event_Error_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Event* event;
} PJRT_Event_Error_Args;
PJRTX_DEFINE_SIZE(PJRT_Event_Error_Args, event)
// Returns the event's error (a fresh PJRT_Error each call) or NULL.
typedef PJRT_Error* PJRT_Event_Error(PJRT_Event_Error_Args* args);

typedef struct PJRT_Event_Await_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Event* event;
} PJRT_Event_Await_Args;
PJRTX_DEFINE_SIZE(PJRT_Event_Await_Args, event)
typedef PJRT_Error* PJRT_Event_Await(PJRT_Event_Await_Args* args);

// The callback owns `error` (may be NULL) and must destroy it.
typedef void (*PJRT_Event_OnReadyCallback)(PJRT_Error* error, void* user_arg);

typedef struct PJRT_Event_OnReady_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Event* event;
  PJRT_Event_OnReadyCallback callback;
  void* user_arg;
} PJRT_Event_OnReady_Args;
PJRTX_DEFINE_SIZE(PJRT_Event_OnReady_Args, user_arg)
typedef PJRT_Error* PJRT_Event_OnReady(PJRT_Event_OnReady_Args* args);

typedef struct PJRT_Event_Create_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Event* event;  // out
} PJRT_Event_Create_Args;
PJRTX_DEFINE_SIZE(PJRT_Event_Create_Args, event)
typedef PJRT_Error* PJRT_Event_Create(PJRT_Event_Create_Args* args);

typedef struct PJRT_Event_Set_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Event* event;  // made by PJRT_Event_Create
  PJRT_Error_Code error_code;
  const char* error_message;  // copied
  size_t error_message_size;
} PJRT_Event_Set_Args;
PJRTX_DEFINE_SIZE(PJRT_Event_Set_Args, error_message_size)
typedef PJRT_Error* PJRT_Event_Set(PJRT_Event_Set_Args* args);

// ===========================================================================
// Memory objects (function table since minor 105)
// ===========================================================================

// jaxlib attaches its own per-memory data through this table: it calls
// set_user_data / get_user_data on every PJRT_Memory the plugin hands out.
typedef struct PJRT_Memory_FunctionTable {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  size_t instance_struct_size;  // PJRT_Memory_STRUCT_SIZE
  void* (*get_user_data)(PJRT_Memory* memory, const void* key);
  void (*set_user_data)(PJRT_Memory* memory, const void* key, void* data,
                        void (*dtor)(void*));
} PJRT_Memory_FunctionTable;
PJRTX_DEFINE_SIZE(PJRT_Memory_FunctionTable, set_user_data)

struct PJRT_Memory {
  const PJRT_Memory_FunctionTable* vtable;
};
PJRTX_DEFINE_SIZE(PJRT_Memory, vtable)

// ===========================================================================
// Element types, host-buffer semantics, layouts, shapes
// ===========================================================================

typedef enum {
  PJRT_Buffer_Type_INVALID = 0,
  PJRT_Buffer_Type_PRED = 1,
  PJRT_Buffer_Type_S8 = 2,
  PJRT_Buffer_Type_S16 = 3,
  PJRT_Buffer_Type_S32 = 4,
  PJRT_Buffer_Type_S64 = 5,
  PJRT_Buffer_Type_U8 = 6,
  PJRT_Buffer_Type_U16 = 7,
  PJRT_Buffer_Type_U32 = 8,
  PJRT_Buffer_Type_U64 = 9,
  PJRT_Buffer_Type_F16 = 10,
  PJRT_Buffer_Type_F32 = 11,
  PJRT_Buffer_Type_F64 = 12,
  PJRT_Buffer_Type_BF16 = 13,
  PJRT_Buffer_Type_C64 = 14,   // (f32 real, f32 imag)
  PJRT_Buffer_Type_C128 = 15,  // (f64 real, f64 imag)
  PJRT_Buffer_Type_F8E5M2 = 16,
  PJRT_Buffer_Type_F8E4M3FN = 17,
  PJRT_Buffer_Type_F8E4M3B11FNUZ = 18,
  PJRT_Buffer_Type_F8E5M2FNUZ = 19,
  PJRT_Buffer_Type_F8E4M3FNUZ = 20,
  PJRT_Buffer_Type_S4 = 21,
  PJRT_Buffer_Type_U4 = 22,
  PJRT_Buffer_Type_TOKEN = 23,
  PJRT_Buffer_Type_S2 = 24,
  PJRT_Buffer_Type_U2 = 25,
  PJRT_Buffer_Type_F8E4M3 = 26,
  PJRT_Buffer_Type_F8E3M4 = 27,
  PJRT_Buffer_Type_F8E8M0FNU = 28,
  PJRT_Buffer_Type_F4E2M1FN = 29,
  PJRT_Buffer_Type_S1 = 30,
  PJRT_Buffer_Type_U1 = 31,
  // 0.114 appends F6E2M3FN = 32 and F6E3M2FN = 33; 0.112 stops at U1.
} PJRT_Buffer_Type;

typedef enum {
  // `data` may be read only during the call.
  PJRT_HostBufferSemantics_kImmutableOnlyDuringCall = 0,
  // `data` stays valid and unchanged until done_with_host_buffer fires.
  PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes = 1,
  // The buffer may alias `data` for its whole life, read-only; jaxlib uses
  // this for device_put.
  PJRT_HostBufferSemantics_kImmutableZeroCopy = 2,
  // Like kImmutableZeroCopy, but the runtime may also write `data`.
  PJRT_HostBufferSemantics_kMutableZeroCopy = 3,
} PJRT_HostBufferSemantics;

typedef enum {
  PJRT_Buffer_MemoryLayout_Type_Tiled = 0,
  PJRT_Buffer_MemoryLayout_Type_Strides = 1,
} PJRT_Buffer_MemoryLayout_Type;

typedef struct PJRT_Buffer_MemoryLayout_Tiled {
  PJRTX_ARGS_PREFIX
  const int64_t* minor_to_major;  // logical dim per physical dim, minor first
  size_t minor_to_major_size;
  const int64_t* tile_dims;       // all tiles' dims, concatenated
  const size_t* tile_dim_sizes;   // rank of each tile; `num_tiles` entries
  size_t num_tiles;
} PJRT_Buffer_MemoryLayout_Tiled;
PJRTX_DEFINE_SIZE(PJRT_Buffer_MemoryLayout_Tiled, num_tiles)

typedef struct PJRT_Buffer_MemoryLayout_Strides {
  PJRTX_ARGS_PREFIX
  const int64_t* byte_strides;  // may be negative
  size_t num_byte_strides;
} PJRT_Buffer_MemoryLayout_Strides;
PJRTX_DEFINE_SIZE(PJRT_Buffer_MemoryLayout_Strides, num_byte_strides)

typedef struct PJRT_Buffer_MemoryLayout {
  PJRTX_ARGS_PREFIX
  union {
    PJRT_Buffer_MemoryLayout_Tiled tiled;
    PJRT_Buffer_MemoryLayout_Strides strides;
  };
  PJRT_Buffer_MemoryLayout_Type type;  // selects the union member
} PJRT_Buffer_MemoryLayout;
PJRTX_DEFINE_SIZE(PJRT_Buffer_MemoryLayout, type)

typedef struct PJRT_ShapeSpec {
  PJRTX_ARGS_PREFIX
  const int64_t* dims;
  size_t num_dims;
  PJRT_Buffer_Type element_type;
} PJRT_ShapeSpec;
PJRTX_DEFINE_SIZE(PJRT_ShapeSpec, element_type)

// ===========================================================================
// Client
// ===========================================================================

// Key-value store callbacks a caller may hand to PJRT_Client_Create.
typedef void (*PJRT_KeyValueGetCallback_ValueDeleter)(char* value);

typedef struct PJRT_KeyValueGetCallback_Args {
  PJRTX_ARGS_PREFIX
  const char* key;
  size_t key_size;
  int timeout_in_ms;
  PJRT_CallbackError* callback_error;
  void* user_arg;
  char* value;        // out
  size_t value_size;  // out
  PJRT_KeyValueGetCallback_ValueDeleter value_deleter_callback;  // out
} PJRT_KeyValueGetCallback_Args;
PJRTX_DEFINE_SIZE(PJRT_KeyValueGetCallback_Args, value_deleter_callback)
typedef PJRT_Error* (*PJRT_KeyValueGetCallback)(
    PJRT_KeyValueGetCallback_Args* args);

typedef void (*PJRT_KeyValueTryGetCallback_ValueDeleter)(char* value);

typedef struct PJRT_KeyValueTryGetCallback_Args {
  PJRTX_ARGS_PREFIX
  const char* key;
  size_t key_size;
  PJRT_CallbackError* callback_error;
  void* user_arg;
  char* value;        // out
  size_t value_size;  // out
  PJRT_KeyValueTryGetCallback_ValueDeleter value_deleter_callback;  // out
} PJRT_KeyValueTryGetCallback_Args;
PJRTX_DEFINE_SIZE(PJRT_KeyValueTryGetCallback_Args, value_deleter_callback)
typedef PJRT_Error* (*PJRT_KeyValueTryGetCallback)(
    PJRT_KeyValueTryGetCallback_Args* args);

typedef struct PJRT_KeyValuePutCallback_Args {
  PJRTX_ARGS_PREFIX
  const char* key;
  size_t key_size;
  const char* value;  // valid during the call only
  size_t value_size;
  PJRT_CallbackError* callback_error;
  void* user_arg;
} PJRT_KeyValuePutCallback_Args;
PJRTX_DEFINE_SIZE(PJRT_KeyValuePutCallback_Args, user_arg)
typedef PJRT_Error* (*PJRT_KeyValuePutCallback)(
    PJRT_KeyValuePutCallback_Args* args);

typedef struct PJRT_Client_Create_Args {
  PJRTX_ARGS_PREFIX
  const PJRT_NamedValue* create_options;
  size_t num_options;
  PJRT_KeyValueGetCallback kv_get_callback;
  void* kv_get_user_arg;
  PJRT_KeyValuePutCallback kv_put_callback;
  void* kv_put_user_arg;
  PJRT_Client* client;  // out
  PJRT_KeyValueTryGetCallback kv_try_get_callback;
  void* kv_try_get_user_arg;
} PJRT_Client_Create_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_Create_Args, kv_try_get_user_arg)
typedef PJRT_Error* PJRT_Client_Create(PJRT_Client_Create_Args* args);

typedef struct PJRT_Client_Destroy_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
} PJRT_Client_Destroy_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_Destroy_Args, client)
typedef PJRT_Error* PJRT_Client_Destroy(PJRT_Client_Destroy_Args* args);

typedef struct PJRT_Client_PlatformName_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  const char* platform_name;  // out; owned by the client
  size_t platform_name_size;  // out
} PJRT_Client_PlatformName_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_PlatformName_Args, platform_name_size)
typedef PJRT_Error* PJRT_Client_PlatformName(
    PJRT_Client_PlatformName_Args* args);

typedef struct PJRT_Client_ProcessIndex_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  int process_index;  // out
} PJRT_Client_ProcessIndex_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_ProcessIndex_Args, process_index)
typedef PJRT_Error* PJRT_Client_ProcessIndex(
    PJRT_Client_ProcessIndex_Args* args);

typedef struct PJRT_Client_PlatformVersion_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  const char* platform_version;  // out; owned by the client
  size_t platform_version_size;  // out
} PJRT_Client_PlatformVersion_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_PlatformVersion_Args, platform_version_size)
typedef PJRT_Error* PJRT_Client_PlatformVersion(
    PJRT_Client_PlatformVersion_Args* args);

typedef struct PJRT_Client_TopologyDescription_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  PJRT_TopologyDescription* topology;  // out; owned by the client
} PJRT_Client_TopologyDescription_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_TopologyDescription_Args, topology)
typedef PJRT_Error* PJRT_Client_TopologyDescription(
    PJRT_Client_TopologyDescription_Args* args);

typedef struct PJRT_Client_Devices_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  PJRT_Device* const* devices;  // out
  size_t num_devices;           // out
} PJRT_Client_Devices_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_Devices_Args, num_devices)
typedef PJRT_Error* PJRT_Client_Devices(PJRT_Client_Devices_Args* args);

typedef struct PJRT_Client_AddressableDevices_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  PJRT_Device* const* addressable_devices;  // out
  size_t num_addressable_devices;           // out
} PJRT_Client_AddressableDevices_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_AddressableDevices_Args, num_addressable_devices)
typedef PJRT_Error* PJRT_Client_AddressableDevices(
    PJRT_Client_AddressableDevices_Args* args);

typedef struct PJRT_Client_LookupDevice_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  int id;
  PJRT_Device* device;  // out
} PJRT_Client_LookupDevice_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_LookupDevice_Args, device)
typedef PJRT_Error* PJRT_Client_LookupDevice(
    PJRT_Client_LookupDevice_Args* args);

typedef struct PJRT_Client_LookupAddressableDevice_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  int local_hardware_id;
  PJRT_Device* addressable_device;  // out
} PJRT_Client_LookupAddressableDevice_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_LookupAddressableDevice_Args, addressable_device)
typedef PJRT_Error* PJRT_Client_LookupAddressableDevice(
    PJRT_Client_LookupAddressableDevice_Args* args);

typedef enum {
  PJRT_ProcessState_kUnspecified = 0,
  PJRT_ProcessState_kUninitialized = 1,
  PJRT_ProcessState_kDisconnected = 2,
  PJRT_ProcessState_kConnected = 3,
  PJRT_ProcessState_kError = 4,
} PJRT_ProcessState;

// Note: no extension_start here.
typedef struct PJRT_ProcessInfo {
  size_t struct_size;
  int task_id;
  uint64_t incarnation_id;
  PJRT_ProcessState state;
  int error_code;
  const char* error_message;
  size_t error_message_size;
} PJRT_ProcessInfo;
PJRTX_DEFINE_SIZE(PJRT_ProcessInfo, error_message_size)

typedef struct PJRT_Client_UpdateGlobalProcessInfo_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  PJRT_ProcessInfo* process_infos;
  size_t num_process_infos;
} PJRT_Client_UpdateGlobalProcessInfo_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_UpdateGlobalProcessInfo_Args, num_process_infos)
typedef PJRT_Error* PJRT_Client_UpdateGlobalProcessInfo(
    PJRT_Client_UpdateGlobalProcessInfo_Args* args);

typedef struct PJRT_Client_AddressableMemories_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  PJRT_Memory* const* addressable_memories;  // out
  size_t num_addressable_memories;           // out
} PJRT_Client_AddressableMemories_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_AddressableMemories_Args,
                  num_addressable_memories)
typedef PJRT_Error* PJRT_Client_AddressableMemories(
    PJRT_Client_AddressableMemories_Args* args);

// A program to compile. jaxlib sends format "mlir": StableHLO portable
// artifact bytecode.
typedef struct PJRT_Program {
  PJRTX_ARGS_PREFIX
  char* code;  // input to Compile; output buffer for OptimizedProgram
  size_t code_size;
  const char* format;
  size_t format_size;
} PJRT_Program;
PJRTX_DEFINE_SIZE(PJRT_Program, format_size)

typedef struct PJRT_Client_Compile_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  const PJRT_Program* program;
  const char* compile_options;  // serialized xla.CompileOptionsProto
  size_t compile_options_size;
  PJRT_LoadedExecutable* executable;  // out
} PJRT_Client_Compile_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_Compile_Args, executable)
typedef PJRT_Error* PJRT_Client_Compile(PJRT_Client_Compile_Args* args);

typedef struct PJRT_Client_Load_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  PJRT_Executable* executable;
  const char* compile_options;
  size_t compile_options_size;
  PJRT_LoadedExecutable* loaded_executable;  // out
} PJRT_Client_Load_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_Load_Args, loaded_executable)
typedef PJRT_Error* PJRT_Client_Load(PJRT_Client_Load_Args* args);

typedef struct PJRT_Client_DefaultDeviceAssignment_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  int num_replicas;
  int num_partitions;
  size_t default_assignment_size;  // room in `default_assignment`
  int* default_assignment;         // caller's array; filled by the plugin
} PJRT_Client_DefaultDeviceAssignment_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_DefaultDeviceAssignment_Args, default_assignment)
typedef PJRT_Error* PJRT_Client_DefaultDeviceAssignment(
    PJRT_Client_DefaultDeviceAssignment_Args* args);

typedef struct PJRT_Client_DmaMap_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  void* data;
  size_t size;
} PJRT_Client_DmaMap_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_DmaMap_Args, size)
typedef PJRT_Error* PJRT_Client_DmaMap(PJRT_Client_DmaMap_Args* args);

typedef struct PJRT_Client_DmaUnmap_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  void* data;
} PJRT_Client_DmaUnmap_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_DmaUnmap_Args, data)
typedef PJRT_Error* PJRT_Client_DmaUnmap(PJRT_Client_DmaUnmap_Args* args);

typedef struct PJRT_Client_CreateUninitializedBuffer_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  const int64_t* shape_dims;
  size_t shape_num_dims;
  PJRT_Buffer_Type shape_element_type;
  PJRT_Buffer_MemoryLayout* shape_layout;
  PJRT_Device* device;
  PJRT_Memory* memory;  // wins over `device` when set
  PJRT_Buffer* buffer;  // out
} PJRT_Client_CreateUninitializedBuffer_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_CreateUninitializedBuffer_Args, buffer)
typedef PJRT_Error* PJRT_Client_CreateUninitializedBuffer(
    PJRT_Client_CreateUninitializedBuffer_Args* args);

typedef struct PJRT_Client_CreateErrorBuffer_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  PJRT_Error_Code error_code;
  const char* error_message;
  size_t error_message_size;
  const int64_t* shape_dims;
  size_t shape_num_dims;
  PJRT_Buffer_Type shape_element_type;
  PJRT_Buffer_MemoryLayout* shape_layout;
  PJRT_Memory* memory;
  PJRT_Buffer* buffer;  // out
  const PJRT_NamedValue* payload;
  size_t num_payload;
} PJRT_Client_CreateErrorBuffer_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_CreateErrorBuffer_Args, num_payload)
typedef PJRT_Error* PJRT_Client_CreateErrorBuffer(
    PJRT_Client_CreateErrorBuffer_Args* args);

typedef struct PJRT_Client_CreateAliasBuffer_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  PJRT_Memory* memory;
  const int64_t* shape_dims;
  size_t shape_num_dims;
  PJRT_Buffer_Type shape_element_type;
  PJRT_Buffer_MemoryLayout* shape_layout;
  PJRT_Buffer* alias_buffer;                                 // out
  PJRT_FulfillAliasBufferCallback* fulfill_alias_buffer_cb;  // out
} PJRT_Client_CreateAliasBuffer_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_CreateAliasBuffer_Args, fulfill_alias_buffer_cb)
typedef PJRT_Error* PJRT_Client_CreateAliasBuffer(
    PJRT_Client_CreateAliasBuffer_Args* args);

typedef struct PJRT_Client_FulfillAliasBuffer_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  PJRT_Buffer* buffer;
  PJRT_Error_Code status_code;
  const char* error_message;
  size_t error_message_size;
  PJRT_FulfillAliasBufferCallback* fulfill_alias_buffer_cb;
} PJRT_Client_FulfillAliasBuffer_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_FulfillAliasBuffer_Args, fulfill_alias_buffer_cb)
typedef PJRT_Error* PJRT_Client_FulfillAliasBuffer(
    PJRT_Client_FulfillAliasBuffer_Args* args);

typedef struct PJRT_Client_BufferFromHostBuffer_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  const void* data;
  PJRT_Buffer_Type type;
  const int64_t* dims;
  size_t num_dims;
  // Empty means dense major-to-minor. jaxlib does pass non-contiguous and
  // negative strides (transposed / strided numpy views).
  const int64_t* byte_strides;
  size_t num_byte_strides;
  PJRT_HostBufferSemantics host_buffer_semantics;
  PJRT_Device* device;
  PJRT_Memory* memory;                      // wins over `device` when set
  PJRT_Buffer_MemoryLayout* device_layout;  // NULL: dense major-to-minor
  PJRT_Event* done_with_host_buffer;        // out
  PJRT_Buffer* buffer;                      // out
} PJRT_Client_BufferFromHostBuffer_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_BufferFromHostBuffer_Args, buffer)
typedef PJRT_Error* PJRT_Client_BufferFromHostBuffer(
    PJRT_Client_BufferFromHostBuffer_Args* args);

typedef struct PJRT_Client_CreateViewOfDeviceBuffer_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  void* device_buffer_ptr;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Buffer_Type element_type;
  PJRT_Buffer_MemoryLayout* layout;
  PJRT_Device* device;  // deprecated in favour of `memory`
  void (*on_delete_callback)(void* device_buffer_ptr, void* user_arg);
  void* on_delete_callback_arg;
  intptr_t stream;
  PJRT_Buffer* buffer;  // out
  PJRT_Memory* memory;
} PJRT_Client_CreateViewOfDeviceBuffer_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_CreateViewOfDeviceBuffer_Args, memory)
typedef PJRT_Error* PJRT_Client_CreateViewOfDeviceBuffer(
    PJRT_Client_CreateViewOfDeviceBuffer_Args* args);

typedef struct PJRT_Client_CreateBuffersForAsyncHostToDevice_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  PJRT_ShapeSpec* shape_specs;
  size_t num_shape_specs;
  PJRT_Buffer_MemoryLayout** device_layouts;  // optional
  size_t num_device_layouts;
  PJRT_Memory* memory;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;  // out
} PJRT_Client_CreateBuffersForAsyncHostToDevice_Args;
PJRTX_DEFINE_SIZE(PJRT_Client_CreateBuffersForAsyncHostToDevice_Args,
                  transfer_manager)
typedef PJRT_Error* PJRT_Client_CreateBuffersForAsyncHostToDevice(
    PJRT_Client_CreateBuffersForAsyncHostToDevice_Args* args);

// ===========================================================================
// Async host-to-device transfer manager
// ===========================================================================

typedef struct PJRT_AsyncHostToDeviceTransferManager_Destroy_Args {
  PJRTX_ARGS_PREFIX
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
} PJRT_AsyncHostToDeviceTransferManager_Destroy_Args;
PJRTX_DEFINE_SIZE(PJRT_AsyncHostToDeviceTransferManager_Destroy_Args,
                  transfer_manager)
typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_Destroy(
    PJRT_AsyncHostToDeviceTransferManager_Destroy_Args* args);

typedef struct PJRT_AsyncHostToDeviceTransferManager_TransferData_Args {
  PJRTX_ARGS_PREFIX
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  int buffer_index;
  const void* data;
  int64_t offset;
  int64_t transfer_size;
  bool is_last_transfer;
  PJRT_Event* done_with_h2d_transfer;  // out
} PJRT_AsyncHostToDeviceTransferManager_TransferData_Args;
PJRTX_DEFINE_SIZE(PJRT_AsyncHostToDeviceTransferManager_TransferData_Args,
                  done_with_h2d_transfer)
typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_TransferData(
    PJRT_AsyncHostToDeviceTransferManager_TransferData_Args* args);

typedef struct PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args {
  PJRTX_ARGS_PREFIX
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  int buffer_index;
  PJRT_Buffer* buffer_out;  // out
} PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args;
PJRTX_DEFINE_SIZE(PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args,
                  buffer_out)
typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer(
    PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args* args);

typedef struct PJRT_AsyncHostToDeviceTransferManager_Device_Args {
  PJRTX_ARGS_PREFIX
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  PJRT_Device* device_out;  // out
} PJRT_AsyncHostToDeviceTransferManager_Device_Args;
PJRTX_DEFINE_SIZE(PJRT_AsyncHostToDeviceTransferManager_Device_Args,
                  device_out)
typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_Device(
    PJRT_AsyncHostToDeviceTransferManager_Device_Args* args);

typedef struct PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args {
  PJRTX_ARGS_PREFIX
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  size_t buffer_count;  // out
} PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args;
PJRTX_DEFINE_SIZE(PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args,
                  buffer_count)
typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_BufferCount(
    PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args* args);

typedef struct PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args {
  PJRTX_ARGS_PREFIX
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  int buffer_index;
  size_t buffer_size;  // out
} PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args;
PJRTX_DEFINE_SIZE(PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args,
                  buffer_size)
typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_BufferSize(
    PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args* args);

typedef struct PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args {
  PJRTX_ARGS_PREFIX
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  int buffer_index;
  PJRT_Error_Code error_code;
  const char* error_message;
  size_t error_message_size;
} PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args;
PJRTX_DEFINE_SIZE(PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args,
                  error_message_size)
typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_SetBufferError(
    PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args* args);

typedef struct PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args {
  PJRTX_ARGS_PREFIX
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  const PJRT_NamedValue* transfer_metadata;
  size_t num_metadata;
} PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args;
PJRTX_DEFINE_SIZE(PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args,
                  num_metadata)
typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_AddMetadata(
    PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args* args);

typedef struct PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args {
  PJRTX_ARGS_PREFIX
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  int buffer_index;
  const void* data;
  const int64_t* shape_dims;
  size_t shape_num_dims;
  PJRT_Buffer_Type shape_element_type;
  PJRT_Buffer_MemoryLayout* shape_layout;
  PJRT_Event* done_with_h2d_transfer;  // out
} PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args;
PJRTX_DEFINE_SIZE(PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args,
                  done_with_h2d_transfer)
typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_TransferLiteral(
    PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args* args);

// ===========================================================================
// Device descriptions
// ===========================================================================

typedef struct PJRT_DeviceDescription_Id_Args {
  PJRTX_ARGS_PREFIX
  PJRT_DeviceDescription* device_description;
  int id;  // out
} PJRT_DeviceDescription_Id_Args;
PJRTX_DEFINE_SIZE(PJRT_DeviceDescription_Id_Args, id)
typedef PJRT_Error* PJRT_DeviceDescription_Id(
    PJRT_DeviceDescription_Id_Args* args);

typedef struct PJRT_DeviceDescription_ProcessIndex_Args {
  PJRTX_ARGS_PREFIX
  PJRT_DeviceDescription* device_description;
  int process_index;  // out
} PJRT_DeviceDescription_ProcessIndex_Args;
PJRTX_DEFINE_SIZE(PJRT_DeviceDescription_ProcessIndex_Args, process_index)
typedef PJRT_Error* PJRT_DeviceDescription_ProcessIndex(
    PJRT_DeviceDescription_ProcessIndex_Args* args);

// Note the order: the count comes before the array here.
typedef struct PJRT_DeviceDescription_Attributes_Args {
  PJRTX_ARGS_PREFIX
  PJRT_DeviceDescription* device_description;
  size_t num_attributes;              // out
  const PJRT_NamedValue* attributes;  // out
} PJRT_DeviceDescription_Attributes_Args;
PJRTX_DEFINE_SIZE(PJRT_DeviceDescription_Attributes_Args, attributes)
typedef PJRT_Error* PJRT_DeviceDescription_Attributes(
    PJRT_DeviceDescription_Attributes_Args* args);

typedef struct PJRT_DeviceDescription_Kind_Args {
  PJRTX_ARGS_PREFIX
  PJRT_DeviceDescription* device_description;
  const char* device_kind;  // out
  size_t device_kind_size;  // out
} PJRT_DeviceDescription_Kind_Args;
PJRTX_DEFINE_SIZE(PJRT_DeviceDescription_Kind_Args, device_kind_size)
typedef PJRT_Error* PJRT_DeviceDescription_Kind(
    PJRT_DeviceDescription_Kind_Args* args);

typedef struct PJRT_DeviceDescription_DebugString_Args {
  PJRTX_ARGS_PREFIX
  PJRT_DeviceDescription* device_description;
  const char* debug_string;  // out
  size_t debug_string_size;  // out
} PJRT_DeviceDescription_DebugString_Args;
PJRTX_DEFINE_SIZE(PJRT_DeviceDescription_DebugString_Args, debug_string_size)
typedef PJRT_Error* PJRT_DeviceDescription_DebugString(
    PJRT_DeviceDescription_DebugString_Args* args);

typedef struct PJRT_DeviceDescription_ToString_Args {
  PJRTX_ARGS_PREFIX
  PJRT_DeviceDescription* device_description;
  const char* to_string;  // out
  size_t to_string_size;  // out
} PJRT_DeviceDescription_ToString_Args;
PJRTX_DEFINE_SIZE(PJRT_DeviceDescription_ToString_Args, to_string_size)
typedef PJRT_Error* PJRT_DeviceDescription_ToString(
    PJRT_DeviceDescription_ToString_Args* args);

// ===========================================================================
// Devices
// ===========================================================================

typedef struct PJRT_Device_GetDescription_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Device* device;
  PJRT_DeviceDescription* device_description;  // out
} PJRT_Device_GetDescription_Args;
PJRTX_DEFINE_SIZE(PJRT_Device_GetDescription_Args, device_description)
typedef PJRT_Error* PJRT_Device_GetDescription(
    PJRT_Device_GetDescription_Args* args);

typedef struct PJRT_Device_IsAddressable_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Device* device;
  bool is_addressable;  // out
} PJRT_Device_IsAddressable_Args;
PJRTX_DEFINE_SIZE(PJRT_Device_IsAddressable_Args, is_addressable)
typedef PJRT_Error* PJRT_Device_IsAddressable(
    PJRT_Device_IsAddressable_Args* args);

typedef struct PJRT_Device_LocalHardwareId_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Device* device;
  int local_hardware_id;  // out; -1 if undefined
} PJRT_Device_LocalHardwareId_Args;
PJRTX_DEFINE_SIZE(PJRT_Device_LocalHardwareId_Args, local_hardware_id)
typedef PJRT_Error* PJRT_Device_LocalHardwareId(
    PJRT_Device_LocalHardwareId_Args* args);

typedef struct PJRT_Device_AddressableMemories_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Device* device;
  PJRT_Memory* const* memories;  // out; lives as long as the device
  size_t num_memories;           // out
} PJRT_Device_AddressableMemories_Args;
PJRTX_DEFINE_SIZE(PJRT_Device_AddressableMemories_Args, num_memories)
typedef PJRT_Error* PJRT_Device_AddressableMemories(
    PJRT_Device_AddressableMemories_Args* args);

typedef struct PJRT_Device_DefaultMemory_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Device* device;
  PJRT_Memory* memory;  // out
} PJRT_Device_DefaultMemory_Args;
PJRTX_DEFINE_SIZE(PJRT_Device_DefaultMemory_Args, memory)
typedef PJRT_Error* PJRT_Device_DefaultMemory(
    PJRT_Device_DefaultMemory_Args* args);

// Every stat but bytes_in_use is optional: set its *_is_set flag when filled.
// At 0.112 the struct ends at peak_pool_bytes_is_set: 185 bytes
// (0.114 appends peak_allocated_bytes[_is_set], 201 bytes).
typedef struct PJRT_Device_MemoryStats_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Device* device;
  int64_t bytes_in_use;  // out
  int64_t peak_bytes_in_use;
  bool peak_bytes_in_use_is_set;
  int64_t num_allocs;
  bool num_allocs_is_set;
  int64_t largest_alloc_size;
  bool largest_alloc_size_is_set;
  int64_t bytes_limit;
  bool bytes_limit_is_set;
  int64_t bytes_reserved;
  bool bytes_reserved_is_set;
  int64_t peak_bytes_reserved;
  bool peak_bytes_reserved_is_set;
  int64_t bytes_reservable_limit;
  bool bytes_reservable_limit_is_set;
  int64_t largest_free_block_bytes;
  bool largest_free_block_bytes_is_set;
  int64_t pool_bytes;
  bool pool_bytes_is_set;
  int64_t peak_pool_bytes;
  bool peak_pool_bytes_is_set;
} PJRT_Device_MemoryStats_Args;
PJRTX_DEFINE_SIZE(PJRT_Device_MemoryStats_Args, peak_pool_bytes_is_set)
typedef PJRT_Error* PJRT_Device_MemoryStats(PJRT_Device_MemoryStats_Args* args);

typedef struct PJRT_Device_ClearMemoryStats_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Device* device;
} PJRT_Device_ClearMemoryStats_Args;
PJRTX_DEFINE_SIZE(PJRT_Device_ClearMemoryStats_Args, device)
typedef PJRT_Error* PJRT_Device_ClearMemoryStats(
    PJRT_Device_ClearMemoryStats_Args* args);

typedef struct PJRT_Device_PoisonExecution_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Device* device;
  int32_t launch_id;
  PJRT_Error_Code error_code;
  const char* error_message;
  size_t error_message_size;
  bool poisoned;  // out
  const PJRT_NamedValue* payload;
  size_t num_payload;
} PJRT_Device_PoisonExecution_Args;
PJRTX_DEFINE_SIZE(PJRT_Device_PoisonExecution_Args, num_payload)
typedef PJRT_Error* PJRT_Device_PoisonExecution(
    PJRT_Device_PoisonExecution_Args* args);

// jaxlib (minor >= 92) asks for device attributes here, not through
// PJRT_DeviceDescription_Attributes; it calls `attributes_deleter` later.
typedef struct PJRT_Device_GetAttributes_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Device* device;
  const PJRT_NamedValue* attributes;          // out
  size_t num_attributes;                      // out
  PJRT_Device_Attributes* device_attributes;  // out; backs `attributes`
  void (*attributes_deleter)(PJRT_Device_Attributes* device_attributes);  // out
} PJRT_Device_GetAttributes_Args;
PJRTX_DEFINE_SIZE(PJRT_Device_GetAttributes_Args, attributes_deleter)
typedef PJRT_Error* PJRT_Device_GetAttributes(
    PJRT_Device_GetAttributes_Args* args);

typedef struct PJRT_Device_CreateAsyncTrackingEvent_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Device* device;
  const char* description;
  size_t description_size;
  PJRT_AsyncTrackingEvent* event;  // out
} PJRT_Device_CreateAsyncTrackingEvent_Args;
PJRTX_DEFINE_SIZE(PJRT_Device_CreateAsyncTrackingEvent_Args, event)
typedef PJRT_Error* PJRT_Device_CreateAsyncTrackingEvent(
    PJRT_Device_CreateAsyncTrackingEvent_Args* args);

typedef struct PJRT_AsyncTrackingEvent_Destroy_Args {
  PJRTX_ARGS_PREFIX
  PJRT_AsyncTrackingEvent* event;
} PJRT_AsyncTrackingEvent_Destroy_Args;
PJRTX_DEFINE_SIZE(PJRT_AsyncTrackingEvent_Destroy_Args, event)
typedef PJRT_Error* PJRT_AsyncTrackingEvent_Destroy(
    PJRT_AsyncTrackingEvent_Destroy_Args* args);

// ===========================================================================
// Memories
// ===========================================================================

typedef struct PJRT_Memory_Id_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Memory* memory;
  int id;  // out
} PJRT_Memory_Id_Args;
PJRTX_DEFINE_SIZE(PJRT_Memory_Id_Args, id)
typedef PJRT_Error* PJRT_Memory_Id(PJRT_Memory_Id_Args* args);

typedef struct PJRT_Memory_Kind_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Memory* memory;
  const char* kind;  // out
  size_t kind_size;  // out
} PJRT_Memory_Kind_Args;
PJRTX_DEFINE_SIZE(PJRT_Memory_Kind_Args, kind_size)
typedef PJRT_Error* PJRT_Memory_Kind(PJRT_Memory_Kind_Args* args);

typedef struct PJRT_Memory_Kind_Id_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Memory* memory;
  int kind_id;  // out
} PJRT_Memory_Kind_Id_Args;
PJRTX_DEFINE_SIZE(PJRT_Memory_Kind_Id_Args, kind_id)
typedef PJRT_Error* PJRT_Memory_Kind_Id(PJRT_Memory_Kind_Id_Args* args);

typedef struct PJRT_Memory_DebugString_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Memory* memory;
  const char* debug_string;  // out
  size_t debug_string_size;  // out
} PJRT_Memory_DebugString_Args;
PJRTX_DEFINE_SIZE(PJRT_Memory_DebugString_Args, debug_string_size)
typedef PJRT_Error* PJRT_Memory_DebugString(PJRT_Memory_DebugString_Args* args);

typedef struct PJRT_Memory_ToString_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Memory* memory;
  const char* to_string;  // out
  size_t to_string_size;  // out
} PJRT_Memory_ToString_Args;
PJRTX_DEFINE_SIZE(PJRT_Memory_ToString_Args, to_string_size)
typedef PJRT_Error* PJRT_Memory_ToString(PJRT_Memory_ToString_Args* args);

typedef struct PJRT_Memory_AddressableByDevices_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Memory* memory;
  PJRT_Device* const* devices;  // out
  size_t num_devices;           // out
} PJRT_Memory_AddressableByDevices_Args;
PJRTX_DEFINE_SIZE(PJRT_Memory_AddressableByDevices_Args, num_devices)
typedef PJRT_Error* PJRT_Memory_AddressableByDevices(
    PJRT_Memory_AddressableByDevices_Args* args);

// ===========================================================================
// Execute contexts
// ===========================================================================

typedef struct PJRT_ExecuteContext_Create_Args {
  PJRTX_ARGS_PREFIX
  PJRT_ExecuteContext* context;  // out
} PJRT_ExecuteContext_Create_Args;
PJRTX_DEFINE_SIZE(PJRT_ExecuteContext_Create_Args, context)
typedef PJRT_Error* PJRT_ExecuteContext_Create(
    PJRT_ExecuteContext_Create_Args* args);

typedef struct PJRT_ExecuteContext_Destroy_Args {
  PJRTX_ARGS_PREFIX
  PJRT_ExecuteContext* context;
} PJRT_ExecuteContext_Destroy_Args;
PJRTX_DEFINE_SIZE(PJRT_ExecuteContext_Destroy_Args, context)
typedef PJRT_Error* PJRT_ExecuteContext_Destroy(
    PJRT_ExecuteContext_Destroy_Args* args);

// ===========================================================================
// Executables
// ===========================================================================

typedef struct PJRT_Executable_Destroy_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Executable* executable;
} PJRT_Executable_Destroy_Args;
PJRTX_DEFINE_SIZE(PJRT_Executable_Destroy_Args, executable)
typedef PJRT_Error* PJRT_Executable_Destroy(PJRT_Executable_Destroy_Args* args);

typedef struct PJRT_Executable_Name_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Executable* executable;
  const char* executable_name;  // out
  size_t executable_name_size;  // out
} PJRT_Executable_Name_Args;
PJRTX_DEFINE_SIZE(PJRT_Executable_Name_Args, executable_name_size)
typedef PJRT_Error* PJRT_Executable_Name(PJRT_Executable_Name_Args* args);

typedef struct PJRT_Executable_NumReplicas_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Executable* executable;
  size_t num_replicas;  // out
} PJRT_Executable_NumReplicas_Args;
PJRTX_DEFINE_SIZE(PJRT_Executable_NumReplicas_Args, num_replicas)
typedef PJRT_Error* PJRT_Executable_NumReplicas(
    PJRT_Executable_NumReplicas_Args* args);

typedef struct PJRT_Executable_NumPartitions_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Executable* executable;
  size_t num_partitions;  // out
} PJRT_Executable_NumPartitions_Args;
PJRTX_DEFINE_SIZE(PJRT_Executable_NumPartitions_Args, num_partitions)
typedef PJRT_Error* PJRT_Executable_NumPartitions(
    PJRT_Executable_NumPartitions_Args* args);

typedef struct PJRT_Executable_NumOutputs_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Executable* executable;
  size_t num_outputs;  // out
} PJRT_Executable_NumOutputs_Args;
PJRTX_DEFINE_SIZE(PJRT_Executable_NumOutputs_Args, num_outputs)
typedef PJRT_Error* PJRT_Executable_NumOutputs(
    PJRT_Executable_NumOutputs_Args* args);

typedef struct PJRT_Executable_SizeOfGeneratedCodeInBytes_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Executable* executable;
  int64_t size_in_bytes;  // out
} PJRT_Executable_SizeOfGeneratedCodeInBytes_Args;
PJRTX_DEFINE_SIZE(PJRT_Executable_SizeOfGeneratedCodeInBytes_Args,
                  size_in_bytes)
typedef PJRT_Error* PJRT_Executable_SizeOfGeneratedCodeInBytes(
    PJRT_Executable_SizeOfGeneratedCodeInBytes_Args* args);

typedef struct PJRT_Executable_GetCostAnalysis_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Executable* executable;
  size_t num_properties;              // out
  const PJRT_NamedValue* properties;  // out; owned by the executable
} PJRT_Executable_GetCostAnalysis_Args;
PJRTX_DEFINE_SIZE(PJRT_Executable_GetCostAnalysis_Args, properties)
typedef PJRT_Error* PJRT_Executable_GetCostAnalysis(
    PJRT_Executable_GetCostAnalysis_Args* args);

typedef struct PJRT_Executable_OutputMemoryKinds_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Executable* executable;
  size_t num_outputs;               // out
  const char* const* memory_kinds;  // out
  const size_t* memory_kind_sizes;  // out
} PJRT_Executable_OutputMemoryKinds_Args;
PJRTX_DEFINE_SIZE(PJRT_Executable_OutputMemoryKinds_Args, memory_kind_sizes)
typedef PJRT_Error* PJRT_Executable_OutputMemoryKinds(
    PJRT_Executable_OutputMemoryKinds_Args* args);

typedef struct PJRT_Executable_ParameterMemoryKinds_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Executable* executable;
  size_t num_parameters;            // out
  const char* const* memory_kinds;  // out
  const size_t* memory_kind_sizes;  // out
} PJRT_Executable_ParameterMemoryKinds_Args;
PJRTX_DEFINE_SIZE(PJRT_Executable_ParameterMemoryKinds_Args, memory_kind_sizes)
typedef PJRT_Error* PJRT_Executable_ParameterMemoryKinds(
    PJRT_Executable_ParameterMemoryKinds_Args* args);

// Two-call protocol: first with program->code == NULL to learn code_size,
// then with a caller buffer of that size.
typedef struct PJRT_Executable_OptimizedProgram_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Executable* executable;
  PJRT_Program* program;  // in/out
} PJRT_Executable_OptimizedProgram_Args;
PJRTX_DEFINE_SIZE(PJRT_Executable_OptimizedProgram_Args, program)
typedef PJRT_Error* PJRT_Executable_OptimizedProgram(
    PJRT_Executable_OptimizedProgram_Args* args);

typedef struct PJRT_Executable_Serialize_Args {
  PJRTX_ARGS_PREFIX
  const PJRT_Executable* executable;
  const char* serialized_bytes;  // out; backed by serialized_executable
  size_t serialized_bytes_size;  // out
  PJRT_SerializedExecutable* serialized_executable;  // out
  void (*serialized_executable_deleter)(
      PJRT_SerializedExecutable* exec);  // out
} PJRT_Executable_Serialize_Args;
PJRTX_DEFINE_SIZE(PJRT_Executable_Serialize_Args, serialized_executable_deleter)
typedef PJRT_Error* PJRT_Executable_Serialize(
    PJRT_Executable_Serialize_Args* args);

typedef struct PJRT_Executable_Fingerprint_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Executable* executable;
  const char* executable_fingerprint;  // out; owned by the executable
  size_t executable_fingerprint_size;  // out
} PJRT_Executable_Fingerprint_Args;
PJRTX_DEFINE_SIZE(PJRT_Executable_Fingerprint_Args, executable_fingerprint_size)
typedef PJRT_Error* PJRT_Executable_Fingerprint(
    PJRT_Executable_Fingerprint_Args* args);

typedef struct PJRT_Executable_OutputElementTypes_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Executable* executable;
  PJRT_Buffer_Type* output_types;  // out
  size_t num_output_types;         // out
} PJRT_Executable_OutputElementTypes_Args;
PJRTX_DEFINE_SIZE(PJRT_Executable_OutputElementTypes_Args, num_output_types)
typedef PJRT_Error* PJRT_Executable_OutputElementTypes(
    PJRT_Executable_OutputElementTypes_Args* args);

typedef struct PJRT_Executable_OutputDimensions_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Executable* executable;
  size_t num_outputs;       // out
  const int64_t* dims;      // out; all outputs' dims, concatenated
  const size_t* dim_sizes;  // out; rank of each output
} PJRT_Executable_OutputDimensions_Args;
PJRTX_DEFINE_SIZE(PJRT_Executable_OutputDimensions_Args, dim_sizes)
typedef PJRT_Error* PJRT_Executable_OutputDimensions(
    PJRT_Executable_OutputDimensions_Args* args);

typedef struct PJRT_Executable_GetCompiledMemoryStats_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Executable* executable;
  // Device memory (all out).
  int64_t generated_code_size_in_bytes;
  int64_t argument_size_in_bytes;
  int64_t output_size_in_bytes;
  int64_t alias_size_in_bytes;
  int64_t temp_size_in_bytes;
  // Host memory (all out).
  int64_t host_generated_code_size_in_bytes;
  int64_t host_argument_size_in_bytes;
  int64_t host_output_size_in_bytes;
  int64_t host_alias_size_in_bytes;
  int64_t host_temp_size_in_bytes;
  int64_t peak_memory_in_bytes;
  int64_t total_size_in_bytes;
  int64_t total_allocation_bytes;
  int64_t indefinite_allocations;
  int64_t peak_unpadded_heap_bytes;
} PJRT_Executable_GetCompiledMemoryStats_Args;
PJRTX_DEFINE_SIZE(PJRT_Executable_GetCompiledMemoryStats_Args,
                  peak_unpadded_heap_bytes)
typedef PJRT_Error* PJRT_Executable_GetCompiledMemoryStats(
    PJRT_Executable_GetCompiledMemoryStats_Args* args);

typedef struct PJRT_Executable_GetCompileOptions_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Executable* executable;
  const char* serialized_bytes;  // out; backed by serialized_compile_options
  size_t serialized_bytes_size;  // out
  PJRT_SerializedCompileOptions* serialized_compile_options;  // out
  void (*serialized_compile_options_deleter)(
      PJRT_SerializedCompileOptions* options);  // out
} PJRT_Executable_GetCompileOptions_Args;
PJRTX_DEFINE_SIZE(PJRT_Executable_GetCompileOptions_Args,
                  serialized_compile_options_deleter)
typedef PJRT_Error* PJRT_Executable_GetCompileOptions(
    PJRT_Executable_GetCompileOptions_Args* args);

// Note: no extension_start here.
typedef struct PJRT_LoadOptions {
  size_t struct_size;
  const int32_t* computation_origin;
  size_t computation_origin_size;
  PJRT_MultiSlice_Config* multi_slice_config;
} PJRT_LoadOptions;
PJRTX_DEFINE_SIZE(PJRT_LoadOptions, multi_slice_config)

typedef struct PJRT_Executable_DeserializeAndLoad_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  const char* serialized_executable;
  size_t serialized_executable_size;
  PJRT_LoadedExecutable* loaded_executable;  // out
  const char* overridden_serialized_compile_options;
  size_t overridden_serialized_compile_options_size;
  PJRT_LoadOptions* load_options;
} PJRT_Executable_DeserializeAndLoad_Args;
PJRTX_DEFINE_SIZE(PJRT_Executable_DeserializeAndLoad_Args, load_options)
typedef PJRT_Error* PJRT_Executable_DeserializeAndLoad(
    PJRT_Executable_DeserializeAndLoad_Args* args);

// ===========================================================================
// Loaded executables and execution
// ===========================================================================

typedef struct PJRT_LoadedExecutable_Destroy_Args {
  PJRTX_ARGS_PREFIX
  PJRT_LoadedExecutable* executable;
} PJRT_LoadedExecutable_Destroy_Args;
PJRTX_DEFINE_SIZE(PJRT_LoadedExecutable_Destroy_Args, executable)
typedef PJRT_Error* PJRT_LoadedExecutable_Destroy(
    PJRT_LoadedExecutable_Destroy_Args* args);

// The returned PJRT_Executable is destroyed by the caller with
// PJRT_Executable_Destroy, independently of the loaded executable.
typedef struct PJRT_LoadedExecutable_GetExecutable_Args {
  PJRTX_ARGS_PREFIX
  PJRT_LoadedExecutable* loaded_executable;
  PJRT_Executable* executable;  // out
} PJRT_LoadedExecutable_GetExecutable_Args;
PJRTX_DEFINE_SIZE(PJRT_LoadedExecutable_GetExecutable_Args, executable)
typedef PJRT_Error* PJRT_LoadedExecutable_GetExecutable(
    PJRT_LoadedExecutable_GetExecutable_Args* args);

typedef struct PJRT_LoadedExecutable_AddressableDevices_Args {
  PJRTX_ARGS_PREFIX
  PJRT_LoadedExecutable* executable;
  PJRT_Device* const* addressable_devices;  // out
  size_t num_addressable_devices;           // out
} PJRT_LoadedExecutable_AddressableDevices_Args;
PJRTX_DEFINE_SIZE(PJRT_LoadedExecutable_AddressableDevices_Args,
                  num_addressable_devices)
typedef PJRT_Error* PJRT_LoadedExecutable_AddressableDevices(
    PJRT_LoadedExecutable_AddressableDevices_Args* args);

typedef struct PJRT_LogicalDeviceIds {
  int replica;
  int partition;
} PJRT_LogicalDeviceIds;
// (Upstream gives this struct no size constant; ours is sizeof, 8.)
PJRTX_DEFINE_SIZE(PJRT_LogicalDeviceIds, partition)

typedef struct PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args {
  PJRTX_ARGS_PREFIX
  PJRT_LoadedExecutable* executable;
  PJRT_LogicalDeviceIds* addressable_device_logical_ids;  // out
  size_t num_addressable_device_logical_ids;              // out
} PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args;
PJRTX_DEFINE_SIZE(PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args,
                  num_addressable_device_logical_ids)
typedef PJRT_Error* PJRT_LoadedExecutable_AddressableDeviceLogicalIds(
    PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args* args);

typedef struct PJRT_LoadedExecutable_GetDeviceAssignment_Args {
  PJRTX_ARGS_PREFIX
  PJRT_LoadedExecutable* executable;
  const char* serialized_bytes;  // out; DeviceAssignmentProto
  size_t serialized_bytes_size;  // out
  PJRT_DeviceAssignmentSerialized* serialized_device_assignment;  // out
  void (*serialized_device_assignment_deleter)(
      PJRT_DeviceAssignmentSerialized* da);  // out
} PJRT_LoadedExecutable_GetDeviceAssignment_Args;
PJRTX_DEFINE_SIZE(PJRT_LoadedExecutable_GetDeviceAssignment_Args,
                  serialized_device_assignment_deleter)
typedef PJRT_Error* PJRT_LoadedExecutable_GetDeviceAssignment(
    PJRT_LoadedExecutable_GetDeviceAssignment_Args* args);

typedef struct PJRT_LoadedExecutable_Delete_Args {
  PJRTX_ARGS_PREFIX
  PJRT_LoadedExecutable* executable;
} PJRT_LoadedExecutable_Delete_Args;
PJRTX_DEFINE_SIZE(PJRT_LoadedExecutable_Delete_Args, executable)
typedef PJRT_Error* PJRT_LoadedExecutable_Delete(
    PJRT_LoadedExecutable_Delete_Args* args);

typedef struct PJRT_LoadedExecutable_IsDeleted_Args {
  PJRTX_ARGS_PREFIX
  PJRT_LoadedExecutable* executable;
  bool is_deleted;  // out
} PJRT_LoadedExecutable_IsDeleted_Args;
PJRTX_DEFINE_SIZE(PJRT_LoadedExecutable_IsDeleted_Args, is_deleted)
typedef PJRT_Error* PJRT_LoadedExecutable_IsDeleted(
    PJRT_LoadedExecutable_IsDeleted_Args* args);

typedef struct PJRT_LoadedExecutable_Fingerprint_Args {
  PJRTX_ARGS_PREFIX
  PJRT_LoadedExecutable* executable;
  const char* executable_fingerprint;  // out
  size_t executable_fingerprint_size;  // out
} PJRT_LoadedExecutable_Fingerprint_Args;
PJRTX_DEFINE_SIZE(PJRT_LoadedExecutable_Fingerprint_Args,
                  executable_fingerprint_size)
typedef PJRT_Error* PJRT_LoadedExecutable_Fingerprint(
    PJRT_LoadedExecutable_Fingerprint_Args* args);

// Host send/recv callbacks.
typedef struct PJRT_Chunk {
  void* data;
  size_t size;
  void (*deleter)(void* data, void* deleter_arg);
  void* deleter_arg;
} PJRT_Chunk;
// (Upstream gives this struct no size constant; ours is sizeof, 32.)
PJRTX_DEFINE_SIZE(PJRT_Chunk, deleter_arg)

typedef PJRT_Error* (*PJRT_SendCallback)(PJRT_Chunk* chunk,
                                         PJRT_CallbackError* callback_error,
                                         size_t total_size_in_bytes, bool done,
                                         void* user_arg);
typedef void (*PJRT_RecvCallback)(PJRT_CopyToDeviceStream* stream,
                                  void* user_arg);

typedef struct PJRT_SendCallbackInfo {
  int64_t channel_id;
  void* user_arg;
  PJRT_SendCallback send_callback;
} PJRT_SendCallbackInfo;
PJRTX_DEFINE_SIZE(PJRT_SendCallbackInfo, send_callback)

typedef struct PJRT_RecvCallbackInfo {
  int64_t channel_id;
  void* user_arg;
  PJRT_RecvCallback recv_callback;
} PJRT_RecvCallbackInfo;
PJRTX_DEFINE_SIZE(PJRT_RecvCallbackInfo, recv_callback)

typedef void (*PJRT_HloOutputCallback)(int64_t replica_id, int64_t partition_id,
                                       const void* data,
                                       const int64_t* shape_dims,
                                       size_t shape_num_dims,
                                       PJRT_Buffer_Type shape_element_type,
                                       int64_t operand_index, void* user_arg);

typedef struct PJRT_HloOutputCallbackInfo {
  void* user_arg;
  PJRT_HloOutputCallback callback;
  int64_t callback_id;
  size_t num_operands;
} PJRT_HloOutputCallbackInfo;
PJRTX_DEFINE_SIZE(PJRT_HloOutputCallbackInfo, num_operands)

// At 0.112 this ends at num_hlo_output_callbacks: jaxlib 0.10.2 passes
// struct_size 144.
typedef struct PJRT_ExecuteOptions {
  PJRTX_ARGS_PREFIX
  PJRT_SendCallbackInfo** send_callbacks;  // [num_devices][num_send_ops]
  PJRT_RecvCallbackInfo** recv_callbacks;  // [num_devices][num_recv_ops]
  size_t num_send_ops;
  size_t num_recv_ops;
  int launch_id;
  const int64_t* non_donatable_input_indices;
  size_t num_non_donatable_input_indices;
  PJRT_ExecuteContext* context;
  const char* call_location;  // NUL-terminated; valid during the call only
  size_t num_tasks;
  int* task_ids;
  int64_t* incarnation_ids;
  PJRT_MultiSlice_Config* multi_slice_config;
  bool use_major_to_minor_data_layout_for_callbacks;
  PJRT_HloOutputCallbackInfo* hlo_output_callbacks;
  size_t num_hlo_output_callbacks;
} PJRT_ExecuteOptions;
PJRTX_DEFINE_SIZE(PJRT_ExecuteOptions, num_hlo_output_callbacks)

typedef struct PJRT_LoadedExecutable_Execute_Args {
  PJRTX_ARGS_PREFIX
  PJRT_LoadedExecutable* executable;
  PJRT_ExecuteOptions* options;
  PJRT_Buffer* const* const* argument_lists;  // [num_devices][num_args]
  size_t num_devices;
  size_t num_args;
  // [num_devices][num_outputs]; both levels allocated by the caller, the
  // plugin stores new buffers into them.
  PJRT_Buffer** const* output_lists;
  // NULL, or [num_devices] slots the plugin fills with completion events.
  PJRT_Event** device_complete_events;
  PJRT_Device* execute_device;  // NULL: the compiled-for device(s)
} PJRT_LoadedExecutable_Execute_Args;
PJRTX_DEFINE_SIZE(PJRT_LoadedExecutable_Execute_Args, execute_device)
typedef PJRT_Error* PJRT_LoadedExecutable_Execute(
    PJRT_LoadedExecutable_Execute_Args* args);

// ===========================================================================
// Buffers
// ===========================================================================

typedef struct PJRT_Buffer_Destroy_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
} PJRT_Buffer_Destroy_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_Destroy_Args, buffer)
typedef PJRT_Error* PJRT_Buffer_Destroy(PJRT_Buffer_Destroy_Args* args);

typedef struct PJRT_Buffer_ElementType_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  PJRT_Buffer_Type type;  // out
} PJRT_Buffer_ElementType_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_ElementType_Args, type)
typedef PJRT_Error* PJRT_Buffer_ElementType(PJRT_Buffer_ElementType_Args* args);

typedef struct PJRT_Buffer_Dimensions_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  const int64_t* dims;  // out; owned by the buffer
  size_t num_dims;      // out
} PJRT_Buffer_Dimensions_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_Dimensions_Args, num_dims)
typedef PJRT_Error* PJRT_Buffer_Dimensions(PJRT_Buffer_Dimensions_Args* args);

typedef struct PJRT_Buffer_UnpaddedDimensions_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  const int64_t* unpadded_dims;  // out
  size_t num_dims;               // out
} PJRT_Buffer_UnpaddedDimensions_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_UnpaddedDimensions_Args, num_dims)
typedef PJRT_Error* PJRT_Buffer_UnpaddedDimensions(
    PJRT_Buffer_UnpaddedDimensions_Args* args);

typedef struct PJRT_Buffer_DynamicDimensionIndices_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  const size_t* dynamic_dim_indices;  // out
  size_t num_dynamic_dims;            // out
} PJRT_Buffer_DynamicDimensionIndices_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_DynamicDimensionIndices_Args, num_dynamic_dims)
typedef PJRT_Error* PJRT_Buffer_DynamicDimensionIndices(
    PJRT_Buffer_DynamicDimensionIndices_Args* args);

// Deprecated upstream (layouts extension), still a slot.
typedef struct PJRT_Buffer_GetMemoryLayout_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  PJRT_Buffer_MemoryLayout layout;  // out (embedded, not a pointer)
} PJRT_Buffer_GetMemoryLayout_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_GetMemoryLayout_Args, layout)
typedef PJRT_Error* PJRT_Buffer_GetMemoryLayout(
    PJRT_Buffer_GetMemoryLayout_Args* args);

typedef struct PJRT_Buffer_OnDeviceSizeInBytes_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  size_t on_device_size_in_bytes;  // out
} PJRT_Buffer_OnDeviceSizeInBytes_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_OnDeviceSizeInBytes_Args, on_device_size_in_bytes)
typedef PJRT_Error* PJRT_Buffer_OnDeviceSizeInBytes(
    PJRT_Buffer_OnDeviceSizeInBytes_Args* args);

typedef struct PJRT_Buffer_Device_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  PJRT_Device* device;  // out
} PJRT_Buffer_Device_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_Device_Args, device)
typedef PJRT_Error* PJRT_Buffer_Device(PJRT_Buffer_Device_Args* args);

typedef struct PJRT_Buffer_Memory_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  PJRT_Memory* memory;  // out
} PJRT_Buffer_Memory_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_Memory_Args, memory)
typedef PJRT_Error* PJRT_Buffer_Memory(PJRT_Buffer_Memory_Args* args);

typedef struct PJRT_Buffer_Delete_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
} PJRT_Buffer_Delete_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_Delete_Args, buffer)
typedef PJRT_Error* PJRT_Buffer_Delete(PJRT_Buffer_Delete_Args* args);

typedef struct PJRT_Buffer_IsDeleted_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  bool is_deleted;  // out
} PJRT_Buffer_IsDeleted_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_IsDeleted_Args, is_deleted)
typedef PJRT_Error* PJRT_Buffer_IsDeleted(PJRT_Buffer_IsDeleted_Args* args);

typedef struct PJRT_Buffer_CopyToDevice_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  PJRT_Device* dst_device;
  PJRT_Buffer* dst_buffer;  // out
} PJRT_Buffer_CopyToDevice_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_CopyToDevice_Args, dst_buffer)
typedef PJRT_Error* PJRT_Buffer_CopyToDevice(
    PJRT_Buffer_CopyToDevice_Args* args);

// With dst == NULL the plugin only reports dst_size. jaxlib passes a
// host_layout (descending minor_to_major) and needs `event` back.
typedef struct PJRT_Buffer_ToHostBuffer_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* src;
  PJRT_Buffer_MemoryLayout* host_layout;  // NULL: dense major-to-minor
  void* dst;                              // in
  size_t dst_size;                        // in/out
  PJRT_Event* event;                      // out
} PJRT_Buffer_ToHostBuffer_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_ToHostBuffer_Args, event)
typedef PJRT_Error* PJRT_Buffer_ToHostBuffer(
    PJRT_Buffer_ToHostBuffer_Args* args);

typedef struct PJRT_Buffer_IsOnCpu_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  bool is_on_cpu;  // out
} PJRT_Buffer_IsOnCpu_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_IsOnCpu_Args, is_on_cpu)
typedef PJRT_Error* PJRT_Buffer_IsOnCpu(PJRT_Buffer_IsOnCpu_Args* args);

typedef struct PJRT_Buffer_ReadyEvent_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  PJRT_Event* event;  // out; destroyed by the caller
} PJRT_Buffer_ReadyEvent_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_ReadyEvent_Args, event)
typedef PJRT_Error* PJRT_Buffer_ReadyEvent(PJRT_Buffer_ReadyEvent_Args* args);

typedef struct PJRT_Buffer_UnsafePointer_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  uintptr_t buffer_pointer;  // out
} PJRT_Buffer_UnsafePointer_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_UnsafePointer_Args, buffer_pointer)
typedef PJRT_Error* PJRT_Buffer_UnsafePointer(
    PJRT_Buffer_UnsafePointer_Args* args);

typedef struct PJRT_Buffer_IncreaseExternalReferenceCount_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
} PJRT_Buffer_IncreaseExternalReferenceCount_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_IncreaseExternalReferenceCount_Args, buffer)
typedef PJRT_Error* PJRT_Buffer_IncreaseExternalReferenceCount(
    PJRT_Buffer_IncreaseExternalReferenceCount_Args* args);

typedef struct PJRT_Buffer_DecreaseExternalReferenceCount_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
} PJRT_Buffer_DecreaseExternalReferenceCount_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_DecreaseExternalReferenceCount_Args, buffer)
typedef PJRT_Error* PJRT_Buffer_DecreaseExternalReferenceCount(
    PJRT_Buffer_DecreaseExternalReferenceCount_Args* args);

typedef struct PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  void* device_memory_ptr;  // out
} PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args,
                  device_memory_ptr)
typedef PJRT_Error* PJRT_Buffer_OpaqueDeviceMemoryDataPointer(
    PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args* args);

typedef struct PJRT_Buffer_CopyToMemory_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  PJRT_Memory* dst_memory;
  PJRT_Buffer* dst_buffer;  // out
} PJRT_Buffer_CopyToMemory_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_CopyToMemory_Args, dst_buffer)
typedef PJRT_Error* PJRT_Buffer_CopyToMemory(
    PJRT_Buffer_CopyToMemory_Args* args);

typedef struct PJRT_Buffer_CopyRawToHost_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  void* dst;
  int64_t offset;
  int64_t transfer_size;
  PJRT_Event* event;  // out
} PJRT_Buffer_CopyRawToHost_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_CopyRawToHost_Args, event)
typedef PJRT_Error* PJRT_Buffer_CopyRawToHost(
    PJRT_Buffer_CopyRawToHost_Args* args);

// Note: no extension_start here.
typedef struct PJRT_Buffer_CopyRawToHostFuture_Callback_Args {
  size_t struct_size;
  void* callback_data;
  PJRT_Error_Code error_code;
  const char* error_message;
  size_t error_message_size;
  void* dst;
} PJRT_Buffer_CopyRawToHostFuture_Callback_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_CopyRawToHostFuture_Callback_Args, dst)

typedef struct PJRT_Buffer_CopyRawToHostFuture_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  int64_t offset;
  int64_t transfer_size;
  PJRT_Event* event;    // out
  void* callback_data;  // out
  void (*future_ready_callback)(
      PJRT_Buffer_CopyRawToHostFuture_Callback_Args* args);  // out
} PJRT_Buffer_CopyRawToHostFuture_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_CopyRawToHostFuture_Args, future_ready_callback)
typedef PJRT_Error* PJRT_Buffer_CopyRawToHostFuture(
    PJRT_Buffer_CopyRawToHostFuture_Args* args);

// Note: no extension_start here.
typedef struct PJRT_Buffer_DonateWithControlDependency_Callback_Args {
  size_t struct_size;
  void* callback_data;
  PJRT_Error_Code error_code;
  const char* error_message;
  size_t error_message_size;
} PJRT_Buffer_DonateWithControlDependency_Callback_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_DonateWithControlDependency_Callback_Args,
                  error_message_size)

typedef struct PJRT_Buffer_DonateWithControlDependency_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  void* callback_data;  // out
  void (*dependency_ready_callback)(
      PJRT_Buffer_DonateWithControlDependency_Callback_Args* args);  // out
  PJRT_Buffer* out_buffer;  // out
} PJRT_Buffer_DonateWithControlDependency_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_DonateWithControlDependency_Args, out_buffer)
typedef PJRT_Error* PJRT_Buffer_DonateWithControlDependency(
    PJRT_Buffer_DonateWithControlDependency_Args* args);

typedef struct PJRT_Buffer_Bitcast_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  PJRT_Buffer_Type element_type;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Buffer_MemoryLayout* device_layout;
  PJRT_Buffer* out_buffer;  // out
} PJRT_Buffer_Bitcast_Args;
PJRTX_DEFINE_SIZE(PJRT_Buffer_Bitcast_Args, out_buffer)
typedef PJRT_Error* PJRT_Buffer_Bitcast(PJRT_Buffer_Bitcast_Args* args);

// ===========================================================================
// Copy-to-device streams (handed to recv callbacks)
// ===========================================================================

typedef struct PJRT_CopyToDeviceStream_Destroy_Args {
  PJRTX_ARGS_PREFIX
  PJRT_CopyToDeviceStream* stream;
} PJRT_CopyToDeviceStream_Destroy_Args;
PJRTX_DEFINE_SIZE(PJRT_CopyToDeviceStream_Destroy_Args, stream)
typedef PJRT_Error* PJRT_CopyToDeviceStream_Destroy(
    PJRT_CopyToDeviceStream_Destroy_Args* args);

typedef struct PJRT_CopyToDeviceStream_AddChunk_Args {
  PJRTX_ARGS_PREFIX
  PJRT_CopyToDeviceStream* stream;
  PJRT_Chunk* chunk;  // ownership moves to the stream
  PJRT_Event* transfer_complete;  // out
} PJRT_CopyToDeviceStream_AddChunk_Args;
PJRTX_DEFINE_SIZE(PJRT_CopyToDeviceStream_AddChunk_Args, transfer_complete)
typedef PJRT_Error* PJRT_CopyToDeviceStream_AddChunk(
    PJRT_CopyToDeviceStream_AddChunk_Args* args);

typedef struct PJRT_CopyToDeviceStream_TotalBytes_Args {
  PJRTX_ARGS_PREFIX
  PJRT_CopyToDeviceStream* stream;
  int64_t total_bytes;  // out
} PJRT_CopyToDeviceStream_TotalBytes_Args;
PJRTX_DEFINE_SIZE(PJRT_CopyToDeviceStream_TotalBytes_Args, total_bytes)
typedef PJRT_Error* PJRT_CopyToDeviceStream_TotalBytes(
    PJRT_CopyToDeviceStream_TotalBytes_Args* args);

typedef struct PJRT_CopyToDeviceStream_GranuleSize_Args {
  PJRTX_ARGS_PREFIX
  PJRT_CopyToDeviceStream* stream;
  int64_t granule_size_in_bytes;  // out
} PJRT_CopyToDeviceStream_GranuleSize_Args;
PJRTX_DEFINE_SIZE(PJRT_CopyToDeviceStream_GranuleSize_Args,
                  granule_size_in_bytes)
typedef PJRT_Error* PJRT_CopyToDeviceStream_GranuleSize(
    PJRT_CopyToDeviceStream_GranuleSize_Args* args);

typedef struct PJRT_CopyToDeviceStream_CurrentBytes_Args {
  PJRTX_ARGS_PREFIX
  PJRT_CopyToDeviceStream* stream;
  int64_t current_bytes;  // out
} PJRT_CopyToDeviceStream_CurrentBytes_Args;
PJRTX_DEFINE_SIZE(PJRT_CopyToDeviceStream_CurrentBytes_Args, current_bytes)
typedef PJRT_Error* PJRT_CopyToDeviceStream_CurrentBytes(
    PJRT_CopyToDeviceStream_CurrentBytes_Args* args);

// ===========================================================================
// Topology descriptions and device-less compilation
// ===========================================================================

typedef struct PJRT_TopologyDescription_Create_Args {
  PJRTX_ARGS_PREFIX
  const char* topology_name;
  size_t topology_name_size;
  const PJRT_NamedValue* create_options;
  size_t num_options;
  PJRT_TopologyDescription* topology;  // out
} PJRT_TopologyDescription_Create_Args;
PJRTX_DEFINE_SIZE(PJRT_TopologyDescription_Create_Args, topology)
typedef PJRT_Error* PJRT_TopologyDescription_Create(
    PJRT_TopologyDescription_Create_Args* args);

typedef struct PJRT_TopologyDescription_Destroy_Args {
  PJRTX_ARGS_PREFIX
  PJRT_TopologyDescription* topology;
} PJRT_TopologyDescription_Destroy_Args;
PJRTX_DEFINE_SIZE(PJRT_TopologyDescription_Destroy_Args, topology)
typedef PJRT_Error* PJRT_TopologyDescription_Destroy(
    PJRT_TopologyDescription_Destroy_Args* args);

typedef struct PJRT_TopologyDescription_PlatformVersion_Args {
  PJRTX_ARGS_PREFIX
  PJRT_TopologyDescription* topology;
  const char* platform_version;  // out
  size_t platform_version_size;  // out
} PJRT_TopologyDescription_PlatformVersion_Args;
PJRTX_DEFINE_SIZE(PJRT_TopologyDescription_PlatformVersion_Args,
                  platform_version_size)
typedef PJRT_Error* PJRT_TopologyDescription_PlatformVersion(
    PJRT_TopologyDescription_PlatformVersion_Args* args);

typedef struct PJRT_TopologyDescription_PlatformName_Args {
  PJRTX_ARGS_PREFIX
  const PJRT_TopologyDescription* topology;
  const char* platform_name;  // out
  size_t platform_name_size;  // out
} PJRT_TopologyDescription_PlatformName_Args;
PJRTX_DEFINE_SIZE(PJRT_TopologyDescription_PlatformName_Args,
                  platform_name_size)
typedef PJRT_Error* PJRT_TopologyDescription_PlatformName(
    PJRT_TopologyDescription_PlatformName_Args* args);

typedef struct PJRT_TopologyDescription_GetDeviceDescriptions_Args {
  PJRTX_ARGS_PREFIX
  const PJRT_TopologyDescription* topology;
  PJRT_DeviceDescription* const* descriptions;  // out
  size_t num_descriptions;                      // out
} PJRT_TopologyDescription_GetDeviceDescriptions_Args;
PJRTX_DEFINE_SIZE(PJRT_TopologyDescription_GetDeviceDescriptions_Args,
                  num_descriptions)
typedef PJRT_Error* PJRT_TopologyDescription_GetDeviceDescriptions(
    PJRT_TopologyDescription_GetDeviceDescriptions_Args* args);

typedef struct PJRT_TopologyDescription_Serialize_Args {
  PJRTX_ARGS_PREFIX
  PJRT_TopologyDescription* topology;
  const char* serialized_bytes;  // out; backed by serialized_topology
  size_t serialized_bytes_size;  // out
  PJRT_SerializedTopology* serialized_topology;  // out
  void (*serialized_topology_deleter)(
      PJRT_SerializedTopology* serialized_topology);  // out
} PJRT_TopologyDescription_Serialize_Args;
PJRTX_DEFINE_SIZE(PJRT_TopologyDescription_Serialize_Args,
                  serialized_topology_deleter)
typedef PJRT_Error* PJRT_TopologyDescription_Serialize(
    PJRT_TopologyDescription_Serialize_Args* args);

typedef struct PJRT_TopologyDescription_Attributes_Args {
  PJRTX_ARGS_PREFIX
  PJRT_TopologyDescription* topology;
  const PJRT_NamedValue* attributes;  // out
  size_t num_attributes;              // out
} PJRT_TopologyDescription_Attributes_Args;
PJRTX_DEFINE_SIZE(PJRT_TopologyDescription_Attributes_Args, num_attributes)
typedef PJRT_Error* PJRT_TopologyDescription_Attributes(
    PJRT_TopologyDescription_Attributes_Args* args);

typedef struct PJRT_TopologyDescription_Deserialize_Args {
  PJRTX_ARGS_PREFIX
  const char* serialized_topology;
  size_t serialized_topology_size;
  PJRT_TopologyDescription* topology;  // out
} PJRT_TopologyDescription_Deserialize_Args;
PJRTX_DEFINE_SIZE(PJRT_TopologyDescription_Deserialize_Args, topology)
typedef PJRT_Error* PJRT_TopologyDescription_Deserialize(
    PJRT_TopologyDescription_Deserialize_Args* args);

typedef struct PJRT_TopologyDescription_Fingerprint_Args {
  PJRTX_ARGS_PREFIX
  const PJRT_TopologyDescription* topology;
  uint64_t fingerprint;  // out
} PJRT_TopologyDescription_Fingerprint_Args;
PJRTX_DEFINE_SIZE(PJRT_TopologyDescription_Fingerprint_Args, fingerprint)
typedef PJRT_Error* PJRT_TopologyDescription_Fingerprint(
    PJRT_TopologyDescription_Fingerprint_Args* args);

typedef struct PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args {
  PJRTX_ARGS_PREFIX
  const PJRT_TopologyDescription* topology;
  int memory_space_kind_id;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Buffer_Type element_type;
  const PJRT_Buffer_MemoryLayout* layout;  // optional
  const char* serialized_shape;            // out; xla.ShapeProto
  size_t serialized_shape_size;            // out
  void (*serialized_shape_deleter)(const char* serialized_shape);  // out
} PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args;
PJRTX_DEFINE_SIZE(
    PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args,
    serialized_shape_deleter)
typedef PJRT_Error* PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace(
    PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args* args);

typedef struct PJRT_TopologyDescription_GetMemorySpaceKindIds_Args {
  PJRTX_ARGS_PREFIX
  const PJRT_TopologyDescription* topology;
  const int* memory_space_kind_ids;  // out
  size_t num_memory_space_kind_ids;  // out
} PJRT_TopologyDescription_GetMemorySpaceKindIds_Args;
PJRTX_DEFINE_SIZE(PJRT_TopologyDescription_GetMemorySpaceKindIds_Args,
                  num_memory_space_kind_ids)
typedef PJRT_Error* PJRT_TopologyDescription_GetMemorySpaceKindIds(
    PJRT_TopologyDescription_GetMemorySpaceKindIds_Args* args);

typedef struct PJRT_Compile_Args {
  PJRTX_ARGS_PREFIX
  const PJRT_TopologyDescription* topology;
  const PJRT_Program* program;
  const char* compile_options;
  size_t compile_options_size;
  PJRT_Client* client;          // optional
  PJRT_Executable* executable;  // out
} PJRT_Compile_Args;
PJRTX_DEFINE_SIZE(PJRT_Compile_Args, executable)
typedef PJRT_Error* PJRT_Compile(PJRT_Compile_Args* args);

// ===========================================================================
// The function table
// ===========================================================================

// All 138 slots of PJRT_Api 0.112 in table order; index 0 sits at byte 40.
// This list is the single source of the slot order.
#define PJRTX_PJRT_SLOTS(X)                                       \
  /* 0 */ X(PJRT_Error_Destroy)                                   \
  X(PJRT_Error_Message)                                           \
  X(PJRT_Error_GetCode)                                           \
  X(PJRT_Plugin_Initialize)                                       \
  X(PJRT_Plugin_Attributes)                                       \
  /* 5 */ X(PJRT_Event_Destroy)                                   \
  X(PJRT_Event_IsReady)                                           \
  X(PJRT_Event_Error)                                             \
  X(PJRT_Event_Await)                                             \
  X(PJRT_Event_OnReady)                                           \
  /* 10 */ X(PJRT_Client_Create)                                  \
  X(PJRT_Client_Destroy)                                          \
  X(PJRT_Client_PlatformName)                                     \
  X(PJRT_Client_ProcessIndex)                                     \
  X(PJRT_Client_PlatformVersion)                                  \
  X(PJRT_Client_Devices)                                          \
  X(PJRT_Client_AddressableDevices)                               \
  X(PJRT_Client_LookupDevice)                                     \
  X(PJRT_Client_LookupAddressableDevice)                          \
  X(PJRT_Client_AddressableMemories)                              \
  /* 20 */ X(PJRT_Client_Compile)                                 \
  X(PJRT_Client_DefaultDeviceAssignment)                          \
  X(PJRT_Client_BufferFromHostBuffer)                             \
  X(PJRT_DeviceDescription_Id)                                    \
  X(PJRT_DeviceDescription_ProcessIndex)                          \
  X(PJRT_DeviceDescription_Attributes)                            \
  X(PJRT_DeviceDescription_Kind)                                  \
  X(PJRT_DeviceDescription_DebugString)                           \
  X(PJRT_DeviceDescription_ToString)                              \
  X(PJRT_Device_GetDescription)                                   \
  /* 30 */ X(PJRT_Device_IsAddressable)                           \
  X(PJRT_Device_LocalHardwareId)                                  \
  X(PJRT_Device_AddressableMemories)                              \
  X(PJRT_Device_DefaultMemory)                                    \
  X(PJRT_Device_MemoryStats)                                      \
  X(PJRT_Memory_Id)                                               \
  X(PJRT_Memory_Kind)                                             \
  X(PJRT_Memory_DebugString)                                      \
  X(PJRT_Memory_ToString)                                         \
  X(PJRT_Memory_AddressableByDevices)                             \
  /* 40 */ X(PJRT_Executable_Destroy)                             \
  X(PJRT_Executable_Name)                                         \
  X(PJRT_Executable_NumReplicas)                                  \
  X(PJRT_Executable_NumPartitions)                                \
  X(PJRT_Executable_NumOutputs)                                   \
  X(PJRT_Executable_SizeOfGeneratedCodeInBytes)                   \
  X(PJRT_Executable_GetCostAnalysis)                              \
  X(PJRT_Executable_OutputMemoryKinds)                            \
  X(PJRT_Executable_OptimizedProgram)                             \
  X(PJRT_Executable_Serialize)                                    \
  /* 50 */ X(PJRT_LoadedExecutable_Destroy)                       \
  X(PJRT_LoadedExecutable_GetExecutable)                          \
  X(PJRT_LoadedExecutable_AddressableDevices)                     \
  X(PJRT_LoadedExecutable_Delete)                                 \
  X(PJRT_LoadedExecutable_IsDeleted)                              \
  X(PJRT_LoadedExecutable_Execute)                                \
  X(PJRT_Executable_DeserializeAndLoad)                           \
  X(PJRT_LoadedExecutable_Fingerprint)                            \
  X(PJRT_Buffer_Destroy)                                          \
  X(PJRT_Buffer_ElementType)                                      \
  /* 60 */ X(PJRT_Buffer_Dimensions)                              \
  X(PJRT_Buffer_UnpaddedDimensions)                               \
  X(PJRT_Buffer_DynamicDimensionIndices)                          \
  X(PJRT_Buffer_GetMemoryLayout)                                  \
  X(PJRT_Buffer_OnDeviceSizeInBytes)                              \
  X(PJRT_Buffer_Device)                                           \
  X(PJRT_Buffer_Memory)                                           \
  X(PJRT_Buffer_Delete)                                           \
  X(PJRT_Buffer_IsDeleted)                                        \
  X(PJRT_Buffer_CopyToDevice)                                     \
  /* 70 */ X(PJRT_Buffer_ToHostBuffer)                            \
  X(PJRT_Buffer_IsOnCpu)                                          \
  X(PJRT_Buffer_ReadyEvent)                                       \
  X(PJRT_Buffer_UnsafePointer)                                    \
  X(PJRT_Buffer_IncreaseExternalReferenceCount)                   \
  X(PJRT_Buffer_DecreaseExternalReferenceCount)                   \
  X(PJRT_Buffer_OpaqueDeviceMemoryDataPointer)                    \
  X(PJRT_CopyToDeviceStream_Destroy)                              \
  X(PJRT_CopyToDeviceStream_AddChunk)                             \
  X(PJRT_CopyToDeviceStream_TotalBytes)                           \
  /* 80 */ X(PJRT_CopyToDeviceStream_GranuleSize)                 \
  X(PJRT_CopyToDeviceStream_CurrentBytes)                         \
  X(PJRT_TopologyDescription_Create)                              \
  X(PJRT_TopologyDescription_Destroy)                             \
  X(PJRT_TopologyDescription_PlatformName)                        \
  X(PJRT_TopologyDescription_PlatformVersion)                     \
  X(PJRT_TopologyDescription_GetDeviceDescriptions)               \
  X(PJRT_TopologyDescription_Serialize)                           \
  X(PJRT_TopologyDescription_Attributes)                          \
  X(PJRT_Compile)                                                 \
  /* 90 */ X(PJRT_Executable_OutputElementTypes)                  \
  X(PJRT_Executable_OutputDimensions)                             \
  X(PJRT_Buffer_CopyToMemory)                                     \
  X(PJRT_Client_CreateViewOfDeviceBuffer)                         \
  X(PJRT_Executable_Fingerprint)                                  \
  X(PJRT_Client_TopologyDescription)                              \
  X(PJRT_Executable_GetCompiledMemoryStats)                       \
  X(PJRT_Memory_Kind_Id)                                          \
  X(PJRT_ExecuteContext_Create)                                   \
  X(PJRT_ExecuteContext_Destroy)                                  \
  /* 100 */ X(PJRT_Buffer_CopyRawToHost)                          \
  X(PJRT_AsyncHostToDeviceTransferManager_Destroy)                \
  X(PJRT_AsyncHostToDeviceTransferManager_TransferData)           \
  X(PJRT_Client_CreateBuffersForAsyncHostToDevice)                \
  X(PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer)         \
  X(PJRT_AsyncHostToDeviceTransferManager_Device)                 \
  X(PJRT_AsyncHostToDeviceTransferManager_BufferCount)            \
  X(PJRT_AsyncHostToDeviceTransferManager_BufferSize)             \
  X(PJRT_AsyncHostToDeviceTransferManager_SetBufferError)         \
  X(PJRT_AsyncHostToDeviceTransferManager_AddMetadata)            \
  /* 110 */ X(PJRT_Client_DmaMap)                                 \
  X(PJRT_Client_DmaUnmap)                                         \
  X(PJRT_Client_CreateUninitializedBuffer)                        \
  X(PJRT_Client_UpdateGlobalProcessInfo)                          \
  X(PJRT_TopologyDescription_Deserialize)                         \
  X(PJRT_Client_CreateAliasBuffer)                                \
  X(PJRT_Client_FulfillAliasBuffer)                               \
  X(PJRT_LoadedExecutable_GetDeviceAssignment)                    \
  X(PJRT_Client_CreateErrorBuffer)                                \
  X(PJRT_AsyncHostToDeviceTransferManager_TransferLiteral)        \
  /* 120 */ X(PJRT_Buffer_CopyRawToHostFuture)                    \
  X(PJRT_Device_PoisonExecution)                                  \
  X(PJRT_Device_CreateAsyncTrackingEvent)                         \
  X(PJRT_AsyncTrackingEvent_Destroy)                              \
  X(PJRT_Executable_GetCompileOptions)                            \
  X(PJRT_Buffer_DonateWithControlDependency)                      \
  X(PJRT_Event_Create)                                            \
  X(PJRT_Event_Set)                                               \
  X(PJRT_Device_GetAttributes)                                    \
  X(PJRT_Client_Load)                                             \
  /* 130 */ X(PJRT_LoadedExecutable_AddressableDeviceLogicalIds)  \
  X(PJRT_Buffer_Bitcast)                                          \
  X(PJRT_Error_ForEachPayload)                                    \
  X(PJRT_TopologyDescription_Fingerprint)                         \
  X(PJRT_Executable_ParameterMemoryKinds)                         \
  X(PJRT_Device_ClearMemoryStats)                                 \
  X(PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace)    \
  /* 137 */ X(PJRT_TopologyDescription_GetMemorySpaceKindIds)

#define PJRTX_PJRT_SLOT_COUNT 138

// A member named after its own function type. In C++ the type is named with
// `::` so the new member does not change what the name means inside the
// class.
#ifdef __cplusplus
#define PJRTX_API_SLOT_MEMBER(fn) ::fn* fn;
#else
#define PJRTX_API_SLOT_MEMBER(fn) fn* fn;
#endif

typedef struct PJRT_Api {
  size_t struct_size;  // PJRT_Api_STRUCT_SIZE
  PJRT_Extension_Base* extension_start;
  PJRT_Api_Version pjrt_api_version;
  PJRTX_PJRT_SLOTS(PJRTX_API_SLOT_MEMBER)
} PJRT_Api;
PJRTX_DEFINE_SIZE(PJRT_Api, PJRT_TopologyDescription_GetMemorySpaceKindIds)

#undef PJRTX_API_SLOT_MEMBER

// ===========================================================================
// Layouts extension (type PJRT_Extension_Type_Layouts, version 1, as of API
// 0.93): the memory layouts of buffers, of a client's default arrays and of
// an executable's parameters and outputs. A layout is an opaque handle;
// Serialize gives xla::Layout's text ("{1,0}"), which jaxlib 0.10.2 parses.
// Without it jaxlib asks Executable_OptimizedProgram for an HLO module to
// read layouts from (pjrtx has none), and Compiled.input_formats fails.
// ===========================================================================

typedef struct PJRT_Layouts_MemoryLayout PJRT_Layouts_MemoryLayout;
typedef struct PJRT_Layouts_SerializedLayout PJRT_Layouts_SerializedLayout;

typedef struct PJRT_Layouts_MemoryLayout_Destroy_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Layouts_MemoryLayout* layout;
} PJRT_Layouts_MemoryLayout_Destroy_Args;
PJRTX_DEFINE_SIZE(PJRT_Layouts_MemoryLayout_Destroy_Args, layout)
typedef struct PJRT_Error* PJRT_Layouts_MemoryLayout_Destroy(
    PJRT_Layouts_MemoryLayout_Destroy_Args* args);

typedef struct PJRT_Layouts_MemoryLayout_Serialize_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Layouts_MemoryLayout* layout;
  const char* serialized_bytes;                     // out; lives as long as serialized_layout
  size_t serialized_bytes_size;                     // out
  PJRT_Layouts_SerializedLayout* serialized_layout;  // out
  void (*serialized_layout_deleter)(PJRT_Layouts_SerializedLayout* s);  // out
} PJRT_Layouts_MemoryLayout_Serialize_Args;
PJRTX_DEFINE_SIZE(PJRT_Layouts_MemoryLayout_Serialize_Args, serialized_layout_deleter)
typedef struct PJRT_Error* PJRT_Layouts_MemoryLayout_Serialize(
    PJRT_Layouts_MemoryLayout_Serialize_Args* args);

typedef struct PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Client* client;
  PJRT_Buffer_Type type;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Layouts_MemoryLayout* layout;  // out; the caller destroys it
} PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args;
PJRTX_DEFINE_SIZE(PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args, layout)
typedef struct PJRT_Error* PJRT_Layouts_PJRT_Client_GetDefaultLayout(
    PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args* args);

typedef struct PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Buffer* buffer;
  PJRT_Layouts_MemoryLayout* layout;  // out; the caller destroys it
} PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args;
PJRTX_DEFINE_SIZE(PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args, layout)
typedef struct PJRT_Error* PJRT_Layouts_PJRT_Buffer_MemoryLayout(
    PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args* args);

typedef struct PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args {
  PJRTX_ARGS_PREFIX
  PJRT_TopologyDescription* topology_description;
  PJRT_Buffer_Type type;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Layouts_MemoryLayout* layout;  // out; the caller destroys it
} PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args;
PJRTX_DEFINE_SIZE(PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args, layout)
typedef struct PJRT_Error* PJRT_Layouts_PJRT_Topology_GetDefaultLayout(
    PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args* args);

typedef struct PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Executable* executable;
  size_t num_outputs;                         // out
  PJRT_Layouts_MemoryLayout** layouts;        // out; owned by the executable
} PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args;
PJRTX_DEFINE_SIZE(PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args, layouts)
typedef struct PJRT_Error* PJRT_Layouts_PJRT_Executable_GetOutputLayouts(
    PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args* args);

typedef struct PJRT_Layouts_PJRT_Executable_GetParameterLayouts_Args {
  PJRTX_ARGS_PREFIX
  PJRT_Executable* executable;
  size_t num_parameters;                      // out
  PJRT_Layouts_MemoryLayout** layouts;        // out; owned by the executable
} PJRT_Layouts_PJRT_Executable_GetParameterLayouts_Args;
PJRTX_DEFINE_SIZE(PJRT_Layouts_PJRT_Executable_GetParameterLayouts_Args, layouts)
typedef struct PJRT_Error* PJRT_Layouts_PJRT_Executable_GetParameterLayouts(
    PJRT_Layouts_PJRT_Executable_GetParameterLayouts_Args* args);

typedef struct PJRT_Layouts_Extension {
  PJRT_Extension_Base base;
  PJRT_Layouts_MemoryLayout_Destroy* PJRT_Layouts_MemoryLayout_Destroy;
  PJRT_Layouts_MemoryLayout_Serialize* PJRT_Layouts_MemoryLayout_Serialize;
  PJRT_Layouts_PJRT_Client_GetDefaultLayout* PJRT_Layouts_PJRT_Client_GetDefaultLayout;
  PJRT_Layouts_PJRT_Buffer_MemoryLayout* PJRT_Layouts_PJRT_Buffer_MemoryLayout;
  PJRT_Layouts_PJRT_Topology_GetDefaultLayout* PJRT_Layouts_PJRT_Topology_GetDefaultLayout;
  PJRT_Layouts_PJRT_Executable_GetOutputLayouts* PJRT_Layouts_PJRT_Executable_GetOutputLayouts;
  PJRT_Layouts_PJRT_Executable_GetParameterLayouts*
      PJRT_Layouts_PJRT_Executable_GetParameterLayouts;
} PJRT_Layouts_Extension;
PJRTX_DEFINE_SIZE(PJRT_Layouts_Extension, PJRT_Layouts_PJRT_Executable_GetParameterLayouts)

#ifdef __cplusplus
}  // extern "C"

static_assert(offsetof(PJRT_Api, PJRT_Error_Destroy) == 40,
              "the function table starts at byte 40");
static_assert(sizeof(PJRT_Api) == 40 + PJRTX_PJRT_SLOT_COUNT * 8,
              "PJRT_Api holds exactly 138 pointers after its header");
static_assert(PJRT_Api_STRUCT_SIZE == 1144,
              "jax-cuda12-pjrt 0.10.2 reports struct_size 1144");
#endif

#endif  // PJRTX_PJRT_ABI_H_
