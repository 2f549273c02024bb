// PJRT_Executable and PJRT_LoadedExecutable entry points.
#include <cstddef>
#include <cstdint>
#include <string>

#include "pjrt/pjrt_entry_points.h"
#include "pjrt/pjrt_error.h"
#include "pjrt/pjrt_handles.h"

// The bytes of one Serialize call, freed by the deleter jaxlib calls once it
// has copied them.
struct PJRT_SerializedExecutable {
  std::string bytes;
};

namespace pjrtx::pjrt {

namespace {

PJRT_Executable* exe_of(PJRT_Executable* e, const char* fn) {
  if (e == nullptr) invalid_argument(fn, ": executable is null");
  return e;
}
PJRT_LoadedExecutable* loaded_of(PJRT_LoadedExecutable* e, const char* fn) {
  if (e == nullptr) invalid_argument(fn, ": executable is null");
  return e;
}
}  // namespace

// The memory kinds point at the names runtime::memory_kind_name returns
// (static strings), so they outlive the executable.
std::shared_ptr<const ExecutableInfo> make_executable_info(const runtime::LoadedExecutable& exe) {
  auto info = std::make_shared<ExecutableInfo>();
  for (size_t i = 0; i < exe.output_types().size(); ++i) {
    const auto& t = exe.output_types()[i];
    info->output_types.push_back(to_pjrt_type(t.dtype));
    info->output_ranks.push_back(t.shape.size());
    info->output_dims.insert(info->output_dims.end(), t.shape.begin(), t.shape.end());
    std::string_view kind = exe.output_memories()[i]->kind();
    info->output_kinds.push_back(kind.data());
    info->output_kind_sizes.push_back(kind.size());
  }
  for (runtime::Memory* m : exe.param_memories()) {
    info->param_kinds.push_back(m->kind().data());
    info->param_kind_sizes.push_back(m->kind().size());
  }
  for (const auto& t : exe.param_types()) {
    info->layout_storage.push_back(row_major_layout(t.shape.size()));
    info->param_layouts.push_back(info->layout_storage.back().get());
  }
  for (const auto& t : exe.output_types()) {
    info->layout_storage.push_back(row_major_layout(t.shape.size()));
    info->output_layouts.push_back(info->layout_storage.back().get());
  }
  // The plan outlives the info (the executable holds both).
  const auto& f = exe.plan().entry_function();
  for (const auto& s : f.arg_shardings) {
    info->param_shardings.push_back(s.data());
    info->param_sharding_sizes.push_back(s.size());
  }
  for (const auto& s : f.result_shardings) {
    info->output_shardings.push_back(s.data());
    info->output_sharding_sizes.push_back(s.size());
  }
  return info;
}

namespace {

PJRT_Error* Shardings_ParameterShardings(
    PJRT_Shardings_PJRT_Executable_ParameterShardings_Args* args) {
  return guard([&] {
    constexpr const char* kFn = "PJRT_Shardings_PJRT_Executable_ParameterShardings";
    if (args == nullptr) invalid_argument(kFn, ": args is null");
    const auto& info = *exe_of(args->executable, kFn)->info;
    const bool any = !info.param_shardings.empty();
    args->num_parameters = info.param_shardings.size();
    args->shardings = any ? info.param_shardings.data() : nullptr;
    args->sharding_sizes = any ? info.param_sharding_sizes.data() : nullptr;
  });
}

PJRT_Error* Shardings_OutputShardings(PJRT_Shardings_PJRT_Executable_OutputShardings_Args* args) {
  return guard([&] {
    constexpr const char* kFn = "PJRT_Shardings_PJRT_Executable_OutputShardings";
    if (args == nullptr) invalid_argument(kFn, ": args is null");
    const auto& info = *exe_of(args->executable, kFn)->info;
    const bool any = !info.output_shardings.empty();
    args->num_outputs = info.output_shardings.size();
    args->shardings = any ? info.output_shardings.data() : nullptr;
    args->sharding_sizes = any ? info.output_sharding_sizes.data() : nullptr;
  });
}

}  // namespace

PJRT_Extension_Base* shardings_extension() {
  static PJRT_Shardings_Extension ext = {
      {PJRT_Shardings_Extension_STRUCT_SIZE, PJRT_Extension_Type_Shardings, layouts_extension()},
      &Shardings_ParameterShardings,
      &Shardings_OutputShardings,
  };
  return &ext.base;
}

// ---- PJRT_Executable -----------------------------------------------------

PJRT_Error* Executable_Destroy(PJRT_Executable_Destroy_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Executable_Destroy);
    delete args->executable;
  });
}

PJRT_Error* Executable_Name(PJRT_Executable_Name_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Executable_Name);
    const std::string& n = exe_of(args->executable, kFn)->rt->name();
    args->executable_name = n.data();
    args->executable_name_size = n.size();
  });
}

PJRT_Error* Executable_NumReplicas(PJRT_Executable_NumReplicas_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Executable_NumReplicas);
    args->num_replicas = exe_of(args->executable, kFn)->rt->assignment().num_replicas;
  });
}

PJRT_Error* Executable_NumPartitions(PJRT_Executable_NumPartitions_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Executable_NumPartitions);
    args->num_partitions = exe_of(args->executable, kFn)->rt->assignment().num_partitions;
  });
}

PJRT_Error* Executable_NumOutputs(PJRT_Executable_NumOutputs_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Executable_NumOutputs);
    args->num_outputs = exe_of(args->executable, kFn)->rt->output_types().size();
  });
}

PJRT_Error* Executable_SizeOfGeneratedCodeInBytes(
    PJRT_Executable_SizeOfGeneratedCodeInBytes_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Executable_SizeOfGeneratedCodeInBytes);
    exe_of(args->executable, kFn);
    args->size_in_bytes = 0;  // no generated machine code of our own
  });
}

PJRT_Error* Executable_GetCostAnalysis(PJRT_Executable_GetCostAnalysis_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Executable_GetCostAnalysis);
    exe_of(args->executable, kFn);
    args->num_properties = 0;
    args->properties = nullptr;
  });
}

PJRT_Error* Executable_OutputMemoryKinds(PJRT_Executable_OutputMemoryKinds_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Executable_OutputMemoryKinds);
    const auto& info = *exe_of(args->executable, kFn)->info;
    args->num_outputs = info.output_kinds.size();
    args->memory_kinds = info.output_kinds.data();
    args->memory_kind_sizes = info.output_kind_sizes.data();
  });
}

PJRT_Error* Executable_ParameterMemoryKinds(PJRT_Executable_ParameterMemoryKinds_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Executable_ParameterMemoryKinds);
    const auto& info = *exe_of(args->executable, kFn)->info;
    args->num_parameters = info.param_kinds.size();
    args->memory_kinds = info.param_kinds.data();
    args->memory_kind_sizes = info.param_kind_sizes.data();
  });
}

PJRT_Error* Executable_OutputElementTypes(PJRT_Executable_OutputElementTypes_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Executable_OutputElementTypes);
    const auto& info = *exe_of(args->executable, kFn)->info;
    args->output_types = const_cast<PJRT_Buffer_Type*>(info.output_types.data());
    args->num_output_types = info.output_types.size();
  });
}

PJRT_Error* Executable_OutputDimensions(PJRT_Executable_OutputDimensions_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Executable_OutputDimensions);
    const auto& info = *exe_of(args->executable, kFn)->info;
    args->num_outputs = info.output_ranks.size();
    args->dims = info.output_dims.data();
    args->dim_sizes = info.output_ranks.data();
  });
}

PJRT_Error* Executable_Fingerprint(PJRT_Executable_Fingerprint_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Executable_Fingerprint);
    const std::string& f = exe_of(args->executable, kFn)->rt->fingerprint();
    args->executable_fingerprint = f.data();
    args->executable_fingerprint_size = f.size();
  });
}

PJRT_Error* Executable_GetCompiledMemoryStats(PJRT_Executable_GetCompiledMemoryStats_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Executable_GetCompiledMemoryStats);
    const auto& rt = *exe_of(args->executable, kFn)->rt;
    int64_t in = 0, out = 0;
    for (const auto& t : rt.param_types()) in += t.byte_size();
    for (const auto& t : rt.output_types()) out += t.byte_size();
    args->generated_code_size_in_bytes = 0;
    args->argument_size_in_bytes = in;
    args->output_size_in_bytes = out;
    args->alias_size_in_bytes = 0;
    args->temp_size_in_bytes = 0;  // MLX allocates temporaries lazily
    args->host_generated_code_size_in_bytes = 0;
    args->host_argument_size_in_bytes = 0;
    args->host_output_size_in_bytes = 0;
    args->host_alias_size_in_bytes = 0;
    args->host_temp_size_in_bytes = 0;
    args->peak_memory_in_bytes = in + out;
    // Added at 0.90 (pjrt_versions.h): never written past what the caller sent.
    if (PJRTX_SENT(args, PJRT_Executable_GetCompiledMemoryStats_Args, total_size_in_bytes))
      args->total_size_in_bytes = in + out;
  });
}

// jaxlib reads this slot's bytes as an HLO module proto or as StableHLO
// ("hlo_with_config" / "mlir") and prints them as HLO (GetHloModules), so it
// cannot carry pjrtx's plan; returning the input program instead would keep
// a second copy of every constant for the executable's lifetime and show
// what pjrtx does not run. jaxlib tolerates UNIMPLEMENTED here (it calls
// the slot while compiling), and Compiled.as_text() on pjrtx shows the plan
// through pjrtx.jax_plugin, by the executable's fingerprint.
PJRT_Error* Executable_OptimizedProgram(PJRT_Executable_OptimizedProgram_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Executable_OptimizedProgram);
    exe_of(args->executable, kFn);
    unimplemented(kFn, ": pjrtx runs a plan, not an HLO module; "
                  "jax's Compiled.as_text() shows that plan");
  });
}

PJRT_Error* Executable_Serialize(PJRT_Executable_Serialize_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Executable_Serialize);
    const auto& rt = *exe_of(const_cast<PJRT_Executable*>(args->executable), kFn)->rt;
    auto* out = new PJRT_SerializedExecutable{rt.client()->serialize(rt)};
    args->serialized_executable = out;
    args->serialized_bytes = out->bytes.data();
    args->serialized_bytes_size = out->bytes.size();
    args->serialized_executable_deleter = [](PJRT_SerializedExecutable* e) { delete e; };
  });
}

// ---- PJRT_LoadedExecutable -------------------------------------------------

PJRT_Error* LoadedExecutable_Destroy(PJRT_LoadedExecutable_Destroy_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(LoadedExecutable_Destroy);
    delete args->executable;
  });
}

// jaxlib destroys the returned handle with Executable_Destroy: a new handle
// per call, sharing the executable.
PJRT_Error* LoadedExecutable_GetExecutable(PJRT_LoadedExecutable_GetExecutable_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(LoadedExecutable_GetExecutable);
    auto* e = loaded_of(args->loaded_executable, kFn);
    args->executable = new PJRT_Executable{e->rt, e->info};
  });
}

PJRT_Error* LoadedExecutable_AddressableDevices(PJRT_LoadedExecutable_AddressableDevices_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(LoadedExecutable_AddressableDevices);
    auto* e = loaded_of(args->executable, kFn);
    args->addressable_devices = e->devices.data();
    args->num_addressable_devices = e->devices.size();
  });
}

PJRT_Error* LoadedExecutable_AddressableDeviceLogicalIds(
    PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(LoadedExecutable_AddressableDeviceLogicalIds);
    auto* e = loaded_of(args->executable, kFn);
    args->addressable_device_logical_ids = e->logical_ids.data();
    args->num_addressable_device_logical_ids = e->logical_ids.size();
  });
}

// The serialized xla.DeviceAssignmentProto (pjrt/pjrt_client.cc builds it).
PJRT_Error* LoadedExecutable_GetDeviceAssignment(
    PJRT_LoadedExecutable_GetDeviceAssignment_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(LoadedExecutable_GetDeviceAssignment);
    auto* e = loaded_of(args->executable, kFn);
    args->serialized_bytes = e->assignment_proto.data();
    args->serialized_bytes_size = e->assignment_proto.size();
    args->serialized_device_assignment = nullptr;
    args->serialized_device_assignment_deleter = [](PJRT_DeviceAssignmentSerialized*) {};
  });
}

PJRT_Error* LoadedExecutable_Delete(PJRT_LoadedExecutable_Delete_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(LoadedExecutable_Delete);
    loaded_of(args->executable, kFn)->rt->mark_deleted();
  });
}

PJRT_Error* LoadedExecutable_IsDeleted(PJRT_LoadedExecutable_IsDeleted_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(LoadedExecutable_IsDeleted);
    args->is_deleted = loaded_of(args->executable, kFn)->rt->is_deleted();
  });
}

PJRT_Error* LoadedExecutable_Fingerprint(PJRT_LoadedExecutable_Fingerprint_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(LoadedExecutable_Fingerprint);
    const std::string& f = loaded_of(args->executable, kFn)->rt->fingerprint();
    args->executable_fingerprint = f.data();
    args->executable_fingerprint_size = f.size();
  });
}

PJRT_Error* LoadedExecutable_Execute(PJRT_LoadedExecutable_Execute_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(LoadedExecutable_Execute);
    auto* e = loaded_of(args->executable, kFn);
    const size_t n = e->devices.size();
    // execute_device runs a one-device executable on another device
    // (jaxlib's portable executables); pjrtx lowers per device, so that is
    // refused rather than silently run on the compiled device.
    if (args->execute_device != nullptr && (n != 1 || args->execute_device != e->devices.front()))
      invalid_argument(kFn, ": execute_device is not this executable's device");
    if (args->num_devices != n)
      invalid_argument(kFn, ": the executable runs on ", n, " device(s); got num_devices=",
                       args->num_devices);
    if (n > 0) need(args->output_lists, "output_lists");
    if (args->num_args > 0) need(args->argument_lists, "argument_lists");
    std::vector<std::vector<runtime::BufferPtr>> inputs(n);
    for (size_t d = 0; d < n; ++d) {
      // jaxlib passes no output array for a program without results.
      if (!e->rt->output_types().empty()) need(args->output_lists[d], "output_lists[d]");
      if (args->num_args == 0) continue;
      need(args->argument_lists[d], "argument_lists[d]");
      inputs[d].reserve(args->num_args);
      for (size_t i = 0; i < args->num_args; ++i) {
        PJRT_Buffer* b = args->argument_lists[d][i];
        if (b == nullptr) invalid_argument(kFn, ": device ", d, " argument ", i, " is null");
        inputs[d].push_back(b->rt);
      }
    }
    std::vector<int64_t> non_donatable;
    // Older callers' options may end before these fields (pjrt_versions.h).
    if (args->options != nullptr &&
        PJRTX_SENT(args->options, PJRT_ExecuteOptions, num_non_donatable_input_indices) &&
        args->options->num_non_donatable_input_indices > 0) {
      need(args->options->non_donatable_input_indices, "options->non_donatable_input_indices");
      non_donatable.assign(args->options->non_donatable_input_indices,
                           args->options->non_donatable_input_indices +
                               args->options->num_non_donatable_input_indices);
    }
    auto results = e->rt->execute(inputs, non_donatable);
    for (size_t d = 0; d < n; ++d) {
      for (size_t i = 0; i < results[d].outputs.size(); ++i)
        args->output_lists[d][i] = wrap_buffer(e->client, results[d].outputs[i]);
      if (args->device_complete_events != nullptr)
        args->device_complete_events[d] = new PJRT_Event{results[d].done};
    }
  });
}

}  // namespace pjrtx::pjrt
