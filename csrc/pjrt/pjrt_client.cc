// PJRT_Client entry points, compile included, and the client's topology.
#include <cstdint>
#include <cstring>

#include "pjrt/pjrt_entry_points.h"
#include "pjrt/pjrt_error.h"
#include "pjrt/pjrt_handles.h"

PJRT_Device* PJRT_Client::device_for(pjrtx::runtime::Device* d) const {
  for (PJRT_Device* p : devices)
    if (p->rt == d) return p;
  // Every runtime device has its handle (make_client); a miss is a bug,
  // never a silent device 0.
  pjrtx::throw_error(pjrtx::ErrorCode::kInternal, "pjrtx: no handle for ", d->to_string());
}

PjrtxMemory::~PjrtxMemory() {
  for (auto& [key, entry] : user_data)
    if (entry.second) entry.second(entry.first);
}

namespace pjrtx::pjrt {

namespace {

void* memory_get_user_data(PJRT_Memory* m, const void* key) {
  auto* mem = static_cast<PjrtxMemory*>(m);
  std::lock_guard<std::mutex> lock(mem->mu);
  auto it = mem->user_data.find(key);
  return it == mem->user_data.end() ? nullptr : it->second.first;
}

void memory_set_user_data(PJRT_Memory* m, const void* key, void* data, void (*dtor)(void*)) {
  auto* mem = static_cast<PjrtxMemory*>(m);
  std::pair<void*, void (*)(void*)> old{nullptr, nullptr};
  {
    std::lock_guard<std::mutex> lock(mem->mu);
    auto it = mem->user_data.find(key);
    if (it != mem->user_data.end()) old = it->second;
    mem->user_data[key] = {data, dtor};
  }
  if (old.second && old.first != data) old.second(old.first);
}

const PJRT_Memory_FunctionTable kMemoryVTable = {
    PJRT_Memory_FunctionTable_STRUCT_SIZE, nullptr, PJRT_Memory_STRUCT_SIZE,
    memory_get_user_data, memory_set_user_data,
};

// The PJRT_Error a key-value callback builds through our callback_error
// function (ours, so its message is readable here).
PJRT_Error* kv_callback_error(PJRT_Error_Code code, const char* message, size_t size) {
  return make_error(code, std::string(message != nullptr ? message : "", size));
}

[[noreturn]] void throw_kv_error(PJRT_Error* err, const std::string& what) {
  PJRT_Error_Message_Args m{};
  m.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
  m.error = err;
  Error_Message(&m);
  std::string msg(m.message != nullptr ? m.message : "", m.message_size);
  PJRT_Error_Destroy_Args d{};
  d.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
  d.error = err;
  Error_Destroy(&d);
  throw Error(ErrorCode::kUnavailable, "pjrtx: JAX's key-value store: " + what + ": " + msg);
}

// Under jax.distributed jaxlib passes node_id and num_nodes and the
// coordination service's key-value store.
runtime::ProcessOptions process_options(const PJRT_Client_Create_Args* args) {
  runtime::ProcessOptions o;
  for (size_t i = 0; i < args->num_options; ++i) {
    const PJRT_NamedValue& v = args->create_options[i];
    std::string name(v.name, v.name_size);
    if (v.type != PJRT_NamedValue_kInt64) continue;
    if (name == "node_id") o.node_id = static_cast<int>(v.int64_value);
    if (name == "num_nodes") o.num_nodes = static_cast<int>(v.int64_value);
  }
  if (o.num_nodes > 1 && args->kv_get_callback != nullptr && args->kv_put_callback != nullptr) {
    auto get_cb = args->kv_get_callback;
    void* get_arg = args->kv_get_user_arg;
    auto put_cb = args->kv_put_callback;
    void* put_arg = args->kv_put_user_arg;
    runtime::KvStore kv;
    kv.get = [get_cb, get_arg](const std::string& key, int timeout_ms) {
      static PJRT_CallbackError cb = kv_callback_error;
      PJRT_KeyValueGetCallback_Args a{};
      a.struct_size = PJRT_KeyValueGetCallback_Args_STRUCT_SIZE;
      a.key = key.data();
      a.key_size = key.size();
      a.timeout_in_ms = timeout_ms;
      a.callback_error = &cb;
      a.user_arg = get_arg;
      if (PJRT_Error* err = get_cb(&a)) throw_kv_error(err, "get '" + key + "'");
      std::string value(a.value != nullptr ? a.value : "", a.value_size);
      if (a.value != nullptr && a.value_deleter_callback != nullptr) a.value_deleter_callback(a.value);
      return value;
    };
    kv.put = [put_cb, put_arg](const std::string& key, const std::string& value) {
      static PJRT_CallbackError cb = kv_callback_error;
      PJRT_KeyValuePutCallback_Args a{};
      a.struct_size = PJRT_KeyValuePutCallback_Args_STRUCT_SIZE;
      a.key = key.data();
      a.key_size = key.size();
      a.value = value.data();
      a.value_size = value.size();
      a.callback_error = &cb;
      a.user_arg = put_arg;
      if (PJRT_Error* err = put_cb(&a)) throw_kv_error(err, "put '" + key + "'");
    };
    o.kv = std::move(kv);
  }
  return o;
}

std::unique_ptr<PJRT_Client> make_client(const runtime::ProcessOptions& options) {
  auto c = std::make_unique<PJRT_Client>();
  c->rt = std::make_unique<runtime::Client>(options);
  for (runtime::Device* d : c->rt->devices()) {
    auto dev = std::make_unique<PJRT_Device>();
    dev->rt = d;
    dev->client = c.get();
    dev->description.rt = d;
    dev->description.debug_string = d->debug_string();
    dev->description.to_string = d->to_string();
    for (runtime::Memory* m : d->memories()) {
      auto mem = std::make_unique<PjrtxMemory>();
      mem->vtable = &kMemoryVTable;
      mem->rt = m;
      mem->devices = {dev.get()};
      mem->debug_string = m->debug_string();
      mem->to_string = m->to_string();
      dev->memories.push_back(mem.get());
      if (d->is_addressable()) c->memories.push_back(mem.get());
      c->memory_storage.push_back(std::move(mem));
    }
    dev->memory = dev->memory_for(d->default_memory());
    c->devices.push_back(dev.get());
    if (d->is_addressable()) c->addressable_devices.push_back(dev.get());
    c->topology.descriptions.push_back(&dev->description);
    c->device_storage.push_back(std::move(dev));
  }
  c->topology.client = c.get();
  return c;
}

// Reads num_replicas / num_partitions from a serialized CompileOptionsProto
// (executable_build_options = 3 { num_replicas = 4, num_partitions = 5 }).
struct ProtoReader {
  const uint8_t* p;
  const uint8_t* end;
  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; p < end && shift < 64; shift += 7) {
      uint8_t b = *p++;
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  // Calls f(field, wire_type, value, sub_begin, sub_end) per field.
  template <typename F>
  bool fields(F&& f) {
    while (p < end) {
      uint64_t key, v = 0;
      if (!varint(key)) return false;
      int field = static_cast<int>(key >> 3), wt = static_cast<int>(key & 7);
      const uint8_t *sb = nullptr, *se = nullptr;
      if (wt == 0) {
        if (!varint(v)) return false;
      } else if (wt == 2) {
        if (!varint(v) || v > uint64_t(end - p)) return false;
        sb = p;
        se = p + v;
        p = se;
      } else if (wt == 1) {
        if (end - p < 8) return false;
        p += 8;
      } else if (wt == 5) {
        if (end - p < 4) return false;
        p += 4;
      } else {
        return false;
      }
      f(field, wt, v, sb, se);
    }
    return true;
  }
};

// The devices a compile is for, from a serialized CompileOptionsProto:
// executable_build_options (3) { num_replicas (4), num_partitions (5),
// device_assignment (9) { replica_count (1), computation_count (2),
// computation_devices (3) { replica_device_ids (1) } },
// allow_spmd_sharding_propagation_to_parameters (18, repeated bool) }.
// Logical device (r, p) runs on computation_devices[p].replica_device_ids[r].
runtime::DeviceAssignment read_compile_options(const char* data, size_t size, const char* fn) {
  runtime::DeviceAssignment a;
  if (data == nullptr || size == 0) return a;
  uint64_t replicas = 1, partitions = 1, da_replicas = 0, da_computations = 0;
  std::vector<std::vector<int64_t>> computations;  // [partition][replica] -> id
  bool has_assignment = false;
  auto ok = [&](bool parsed) {
    if (!parsed) invalid_argument(fn, ": compile_options is not a CompileOptionsProto");
  };
  ProtoReader top{reinterpret_cast<const uint8_t*>(data), reinterpret_cast<const uint8_t*>(data) + size};
  ok(top.fields([&](int field, int wt, uint64_t, const uint8_t* sb, const uint8_t* se) {
    if (field != 3 || wt != 2) return;
    ProtoReader build{sb, se};
    ok(build.fields([&](int f, int w, uint64_t v, const uint8_t* b2, const uint8_t* e2) {
      if (w == 0 && f == 4) replicas = v;
      if (w == 0 && f == 5) partitions = v;
      if (f == 18 && w == 0) a.open_params.push_back(v != 0);
      if (f == 18 && w == 2) {  // packed
        ProtoReader packed{b2, e2};
        uint64_t x;
        while (packed.p < packed.end && packed.varint(x)) a.open_params.push_back(x != 0);
      }
      if (w != 2 || f != 9) return;
      has_assignment = true;
      ProtoReader da{b2, e2};
      ok(da.fields([&](int f3, int w3, uint64_t v3, const uint8_t* b3, const uint8_t* e3) {
        if (w3 == 0 && f3 == 1) da_replicas = v3;
        if (w3 == 0 && f3 == 2) da_computations = v3;
        if (w3 != 2 || f3 != 3) return;
        std::vector<int64_t> ids;
        ProtoReader cd{b3, e3};
        ok(cd.fields([&](int f4, int w4, uint64_t v4, const uint8_t* b4, const uint8_t* e4) {
          if (f4 != 1) return;
          if (w4 == 0) ids.push_back(static_cast<int64_t>(v4));
          if (w4 == 2) {  // packed
            ProtoReader packed{b4, e4};
            uint64_t x;
            while (packed.p < packed.end && packed.varint(x)) ids.push_back(static_cast<int64_t>(x));
          }
        }));
        computations.push_back(std::move(ids));
      }));
    }));
  }));
  if (replicas < 1 || partitions < 1 || replicas * partitions > (1u << 16))
    invalid_argument(fn, ": num_replicas=", replicas, ", num_partitions=", partitions);
  a.num_replicas = static_cast<int>(replicas);
  a.num_partitions = static_cast<int>(partitions);
  // Only a partitioned program has argument shardings to choose; on one
  // partition the flags would only split the compile cache.
  if (partitions == 1) a.open_params.clear();
  if (!has_assignment) return a;  // the client picks the default devices
  if (da_replicas != replicas || da_computations != partitions ||
      computations.size() != partitions)
    invalid_argument(fn, ": the device assignment is ", da_replicas, " x ", da_computations,
                     " but the options ask for ", replicas, " replicas x ", partitions,
                     " partitions");
  for (uint64_t r = 0; r < replicas; ++r)
    for (uint64_t p = 0; p < partitions; ++p) {
      if (computations[p].size() != replicas)
        invalid_argument(fn, ": device assignment computation ", p, " lists ",
                         computations[p].size(), " devices for ", replicas, " replicas");
      a.device_ids.push_back(static_cast<int>(computations[p][r]));
    }
  return a;
}

}  // namespace

PJRT_Error* Client_Create(PJRT_Client_Create_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Client_Create);
    args->client = make_client(process_options(args)).release();
  });
}

PJRT_Error* Client_Destroy(PJRT_Client_Destroy_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Client_Destroy);
    delete args->client;
  });
}

PJRT_Error* Client_PlatformName(PJRT_Client_PlatformName_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Client_PlatformName);
    auto name = need(args->client, "client")->rt->platform_name();
    args->platform_name = name.data();
    args->platform_name_size = name.size();
  });
}

// jaxlib's process-info watcher (under jax.distributed) passes every
// process's state here and treats any error as fatal (it aborts the
// process, for XLA:CPU programs too). A pjrtx client learns the processes
// when it is created (and a process that dies fails the collectives that
// wait for it), so there is nothing to update; XLA's own clients answer OK
// as well.
PJRT_Error* Client_UpdateGlobalProcessInfo(PJRT_Client_UpdateGlobalProcessInfo_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Client_UpdateGlobalProcessInfo);
    need(args->client, "client");
    if (args->num_process_infos > 0) need(args->process_infos, "process_infos");
  });
}

PJRT_Error* Client_ProcessIndex(PJRT_Client_ProcessIndex_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Client_ProcessIndex);
    args->process_index = need(args->client, "client")->rt->process_index();
  });
}

PJRT_Error* Client_PlatformVersion(PJRT_Client_PlatformVersion_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Client_PlatformVersion);
    const std::string& v = need(args->client, "client")->rt->platform_version();
    args->platform_version = v.data();
    args->platform_version_size = v.size();
  });
}

PJRT_Error* Client_Devices(PJRT_Client_Devices_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Client_Devices);
    auto* c = need(args->client, "client");
    args->devices = c->devices.data();
    args->num_devices = c->devices.size();
  });
}

PJRT_Error* Client_AddressableDevices(PJRT_Client_AddressableDevices_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Client_AddressableDevices);
    auto* c = need(args->client, "client");
    args->addressable_devices = c->addressable_devices.data();
    args->num_addressable_devices = c->addressable_devices.size();
  });
}

PJRT_Error* Client_LookupDevice(PJRT_Client_LookupDevice_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Client_LookupDevice);
    auto* c = need(args->client, "client");
    args->device = c->device_for(c->rt->lookup_device(args->id));
  });
}

PJRT_Error* Client_LookupAddressableDevice(PJRT_Client_LookupAddressableDevice_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Client_LookupAddressableDevice);
    auto* c = need(args->client, "client");
    for (PJRT_Device* d : c->addressable_devices)
      if (d->rt->local_hardware_id() == args->local_hardware_id) {
        args->addressable_device = d;
        return;
      }
    invalid_argument("pjrtx: no addressable device with local hardware id ",
                     args->local_hardware_id, " (this process has ",
                     c->addressable_devices.size(), ")");
  });
}

PJRT_Error* Client_AddressableMemories(PJRT_Client_AddressableMemories_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Client_AddressableMemories);
    auto* c = need(args->client, "client");
    args->addressable_memories = c->memories.data();
    args->num_addressable_memories = c->memories.size();
  });
}

PJRT_Error* Client_TopologyDescription(PJRT_Client_TopologyDescription_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Client_TopologyDescription);
    args->topology = &need(args->client, "client")->topology;
  });
}

PJRT_Error* Client_DefaultDeviceAssignment(PJRT_Client_DefaultDeviceAssignment_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Client_DefaultDeviceAssignment);
    auto* c = need(args->client, "client");
    // Row-major [replica][partition], as XLA fills it.
    runtime::DeviceAssignment a = c->rt->default_assignment(args->num_replicas,
                                                            args->num_partitions);
    if (args->default_assignment == nullptr ||
        args->default_assignment_size < a.device_ids.size())
      invalid_argument(kFn, ": default_assignment has room for ", args->default_assignment_size,
                       " ids, ", a.device_ids.size(), " needed");
    for (size_t i = 0; i < a.device_ids.size(); ++i)
      args->default_assignment[i] = a.device_ids[i];
  });
}

std::shared_ptr<const ExecutableInfo> make_executable_info(const runtime::LoadedExecutable& exe);

static PJRT_LoadedExecutable* wrap_executable(PJRT_Client* c,
                                              std::shared_ptr<runtime::LoadedExecutable> exe) {
  auto* out = new PJRT_LoadedExecutable();
  out->rt = std::move(exe);
  out->client = c;
  out->info = make_executable_info(*out->rt);
  const runtime::DeviceAssignment& a = out->rt->assignment();
  for (size_t k = 0; k < out->rt->devices().size(); ++k) {
    out->devices.push_back(c->device_for(out->rt->devices()[k]));
    const int i = out->rt->logical_index(k);
    out->logical_ids.push_back({i / a.num_partitions, i % a.num_partitions});
  }
  // xla.DeviceAssignmentProto: replica_count (1), computation_count (2),
  // computation_devices (3) { replica_device_ids (1) }, one per partition.
  auto varint = [](std::string& s, uint64_t v) {
    do {
      uint8_t b = v & 0x7f;
      v >>= 7;
      s.push_back(static_cast<char>(v ? (b | 0x80) : b));
    } while (v);
  };
  std::string& proto = out->assignment_proto;
  proto.push_back(0x08);
  varint(proto, a.num_replicas);
  proto.push_back(0x10);
  varint(proto, a.num_partitions);
  for (int p = 0; p < a.num_partitions; ++p) {
    std::string ids;
    for (int r = 0; r < a.num_replicas; ++r) {
      ids.push_back(0x08);
      varint(ids, static_cast<uint64_t>(a.device_ids[r * a.num_partitions + p]));
    }
    proto.push_back(0x1a);
    varint(proto, ids.size());
    proto += ids;
  }
  return out;
}

PJRT_Error* Client_Compile(PJRT_Client_Compile_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Client_Compile);
    auto* c = need(args->client, "client");
    const PJRT_Program* prog = need(args->program, "program");
    if (prog->code == nullptr && prog->code_size != 0) invalid_argument(kFn, ": program code is null");
    runtime::DeviceAssignment assignment =
        read_compile_options(args->compile_options, args->compile_options_size, kFn);
    std::string_view code(prog->code ? prog->code : "", prog->code_size);
    std::string_view format(prog->format ? prog->format : "", prog->format_size);
    args->executable = wrap_executable(c, c->rt->compile(code, format, std::move(assignment)));
  });
}

// The bytes come from Executable_Serialize, in this process or another one
// (JAX's persistent compilation cache); the frontend does not run. Overriding
// options that carry a device assignment move the program to those devices.
PJRT_Error* Executable_DeserializeAndLoad(PJRT_Executable_DeserializeAndLoad_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Executable_DeserializeAndLoad);
    auto* c = need(args->client, "client");
    if (args->serialized_executable == nullptr && args->serialized_executable_size != 0)
      invalid_argument(kFn, ": serialized_executable is null");
    runtime::DeviceAssignment assignment =
        read_compile_options(args->overridden_serialized_compile_options,
                             args->overridden_serialized_compile_options_size, kFn);
    std::string_view bytes(args->serialized_executable ? args->serialized_executable : "",
                           args->serialized_executable_size);
    args->loaded_executable =
        wrap_executable(c, c->rt->deserialize(bytes, std::move(assignment)));
  });
}

PJRT_Error* Client_BufferFromHostBuffer(PJRT_Client_BufferFromHostBuffer_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Client_BufferFromHostBuffer);
    auto* c = need(args->client, "client");
    // jaxlib names the memory (device_put with a memory kind) and leaves
    // device null; older callers name only the device (its default memory).
    PJRT_Device* device = args->device;
    if (device == nullptr) device = c->devices.front();
    runtime::Memory* memory = device->rt->default_memory();
    if (args->memory != nullptr) memory = static_cast<PjrtxMemory*>(args->memory)->rt;
    if (args->device_layout != nullptr) {
      const PJRT_Buffer_MemoryLayout* l = args->device_layout;
      bool dense = l->type == PJRT_Buffer_MemoryLayout_Type_Tiled && l->tiled.num_tiles == 0;
      for (size_t i = 0; dense && i < l->tiled.minor_to_major_size; ++i)
        dense = l->tiled.minor_to_major[i] == static_cast<int64_t>(args->num_dims - 1 - i);
      if (!dense) unimplemented(kFn, ": only the default (major-to-minor) device layout is supported");
    }
    compiler::TensorType type{from_pjrt_type(args->type), {}};
    if (args->num_dims > 0) need(args->dims, "dims");
    for (size_t i = 0; i < args->num_dims; ++i) {
      if (args->dims[i] < 0) invalid_argument(kFn, ": negative dimension ", args->dims[i]);
      type.shape.push_back(args->dims[i]);
    }
    const int64_t* strides = nullptr;
    if (args->num_byte_strides != 0) {
      if (args->num_byte_strides != args->num_dims)
        invalid_argument(kFn, ": ", args->num_byte_strides, " byte_strides for ", args->num_dims,
                         " dims");
      strides = need(args->byte_strides, "byte_strides");
    }
    // Every semantics is served by copying now: the host memory is free as
    // soon as we return, so done_with_host_buffer is ready at once.
    args->buffer = wrap_buffer(c, c->rt->buffer_from_host(args->data, type, strides, memory));
    args->done_with_host_buffer = new PJRT_Event{runtime::Event::ready()};
  });
}

// A topology without a client is what ahead-of-time compilation starts
// from (jax.experimental.topologies); pjrtx compiles only against a live
// client. JAX treats "topology not implemented" as a platform without AOT
// topologies rather than as a failure.
PJRT_Error* TopologyDescription_Create(PJRT_TopologyDescription_Create_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(TopologyDescription_Create);
    unimplemented("PJRT_TopologyDescription_Create: topology not implemented by pjrtx "
                  "(ahead-of-time compilation without a client is not supported; compile "
                  "on a pjrtx device instead)");
  });
}

PJRT_Error* TopologyDescription_PlatformName(PJRT_TopologyDescription_PlatformName_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(TopologyDescription_PlatformName);
    auto name = need(args->topology, "topology")->client->rt->platform_name();
    args->platform_name = name.data();
    args->platform_name_size = name.size();
  });
}

PJRT_Error* TopologyDescription_PlatformVersion(
    PJRT_TopologyDescription_PlatformVersion_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(TopologyDescription_PlatformVersion);
    const std::string& v = need(args->topology, "topology")->client->rt->platform_version();
    args->platform_version = v.data();
    args->platform_version_size = v.size();
  });
}

PJRT_Error* TopologyDescription_GetDeviceDescriptions(
    PJRT_TopologyDescription_GetDeviceDescriptions_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(TopologyDescription_GetDeviceDescriptions);
    auto* t = const_cast<PJRT_TopologyDescription*>(need(args->topology, "topology"));
    args->descriptions = t->descriptions.data();
    args->num_descriptions = t->descriptions.size();
  });
}

PJRT_Error* TopologyDescription_Attributes(PJRT_TopologyDescription_Attributes_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(TopologyDescription_Attributes);
    need(args->topology, "topology");
    args->attributes = nullptr;
    args->num_attributes = 0;
  });
}

}  // namespace pjrtx::pjrt
