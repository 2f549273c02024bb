// PJRT_Buffer entry points.
#include "pjrt/pjrt_entry_points.h"
#include "pjrt/pjrt_error.h"
#include "pjrt/pjrt_handles.h"

#include <cstdint>

namespace pjrtx::pjrt {

PJRT_Buffer* wrap_buffer(PJRT_Client* client, runtime::BufferPtr rt) {
  auto* out = new PJRT_Buffer();
  out->client = client;
  out->device = client->device_for(rt->device());
  out->memory = out->device->memory_for(rt->memory());
  out->dims = rt->type().shape;
  for (int64_t d = rt->type().rank() - 1; d >= 0; --d) out->minor_to_major.push_back(d);
  out->rt = std::move(rt);
  return out;
}

namespace {
PJRT_Buffer* live(PJRT_Buffer* b, const char* fn) {
  if (b == nullptr) invalid_argument(fn, ": buffer is null");
  return b;
}
}  // namespace

PJRT_Error* Buffer_Destroy(PJRT_Buffer_Destroy_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_Destroy);
    delete args->buffer;
  });
}

PJRT_Error* Buffer_ElementType(PJRT_Buffer_ElementType_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_ElementType);
    args->type = to_pjrt_type(live(args->buffer, kFn)->rt->type().dtype);
  });
}

PJRT_Error* Buffer_Dimensions(PJRT_Buffer_Dimensions_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_Dimensions);
    auto* b = live(args->buffer, kFn);
    args->dims = b->dims.data();
    args->num_dims = b->dims.size();
  });
}

PJRT_Error* Buffer_UnpaddedDimensions(PJRT_Buffer_UnpaddedDimensions_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_UnpaddedDimensions);
    auto* b = live(args->buffer, kFn);
    args->unpadded_dims = b->dims.data();
    args->num_dims = b->dims.size();
  });
}

PJRT_Error* Buffer_DynamicDimensionIndices(PJRT_Buffer_DynamicDimensionIndices_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_DynamicDimensionIndices);
    live(args->buffer, kFn);
    args->dynamic_dim_indices = nullptr;
    args->num_dynamic_dims = 0;
  });
}

PJRT_Error* Buffer_GetMemoryLayout(PJRT_Buffer_GetMemoryLayout_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_GetMemoryLayout);
    auto* b = live(args->buffer, kFn);
    args->layout = PJRT_Buffer_MemoryLayout{};
    args->layout.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
    args->layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
    args->layout.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
    args->layout.tiled.minor_to_major = b->minor_to_major.data();
    args->layout.tiled.minor_to_major_size = b->minor_to_major.size();
    args->layout.tiled.num_tiles = 0;
  });
}

PJRT_Error* Buffer_OnDeviceSizeInBytes(PJRT_Buffer_OnDeviceSizeInBytes_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_OnDeviceSizeInBytes);
    args->on_device_size_in_bytes = live(args->buffer, kFn)->rt->on_device_size();
  });
}

PJRT_Error* Buffer_Device(PJRT_Buffer_Device_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_Device);
    args->device = live(args->buffer, kFn)->device;
  });
}

PJRT_Error* Buffer_Memory(PJRT_Buffer_Memory_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_Memory);
    args->memory = live(args->buffer, kFn)->memory;
  });
}

PJRT_Error* Buffer_Delete(PJRT_Buffer_Delete_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_Delete);
    live(args->buffer, kFn)->rt->mark_deleted();
  });
}

PJRT_Error* Buffer_IsDeleted(PJRT_Buffer_IsDeleted_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_IsDeleted);
    args->is_deleted = live(args->buffer, kFn)->rt->is_deleted();
  });
}

PJRT_Error* Buffer_IsOnCpu(PJRT_Buffer_IsOnCpu_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_IsOnCpu);
    PJRT_Buffer* b = live(args->buffer, kFn);
    // true lets jaxlib read the storage in place (np.asarray without a copy,
    // memoryview, DLPack) through the external-reference slots below; false
    // keeps it on ToHostBuffer (GPU streams, 4-bit types, empty buffers).
    args->is_on_cpu = b->client->rt->host_readable(*b->rt);
  });
}

// jax.Array.unsafe_buffer_pointer(): the address of the evaluated,
// contiguous MLX storage (host memory on CPU and Metal's unified memory).
PJRT_Error* Buffer_UnsafePointer(PJRT_Buffer_UnsafePointer_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_UnsafePointer);
    PJRT_Buffer* b = live(args->buffer, kFn);
    args->buffer_pointer = b->client->rt->unsafe_pointer(b->rt);
  });
}

// jaxlib's zero-copy readers: Increase, then OpaqueDeviceMemoryDataPointer,
// then the ready event; Decrease when the NumPy view / capsule dies.
PJRT_Error* Buffer_IncreaseExternalReferenceCount(
    PJRT_Buffer_IncreaseExternalReferenceCount_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_IncreaseExternalReferenceCount);
    PJRT_Buffer* b = live(args->buffer, kFn);
    b->client->rt->acquire_external(b->rt);
  });
}

PJRT_Error* Buffer_DecreaseExternalReferenceCount(
    PJRT_Buffer_DecreaseExternalReferenceCount_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_DecreaseExternalReferenceCount);
    PJRT_Buffer* b = live(args->buffer, kFn);
    b->client->rt->release_external(b->rt);
  });
}

PJRT_Error* Buffer_OpaqueDeviceMemoryDataPointer(
    PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_OpaqueDeviceMemoryDataPointer);
    PJRT_Buffer* b = live(args->buffer, kFn);
    args->device_memory_ptr = reinterpret_cast<void*>(b->client->rt->unsafe_pointer(b->rt));
  });
}

PJRT_Error* Buffer_ReadyEvent(PJRT_Buffer_ReadyEvent_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_ReadyEvent);
    auto* b = live(args->buffer, kFn);
    if (b->rt->is_deleted()) {
      // As XLA's buffers answer: x.block_until_ready() on a donated or
      // deleted array raises (jax 0.8.x asks the buffer; later releases
      // refuse a deleted array before asking).
      auto failed = runtime::Event::create();
      failed->set_error(std::make_shared<const Error>(
          ErrorCode::kInvalidArgument, "BlockHostUntilReady() called on deleted or donated buffer"));
      args->event = new PJRT_Event{failed};
      return;
    }
    args->event = new PJRT_Event{b->rt->ready_event()};
  });
}

namespace {
PJRT_Buffer* copy_buffer(PJRT_Buffer* src, runtime::Memory* dst, const char* fn) {
  if (src->rt->is_deleted()) failed_precondition(fn, ": buffer was deleted");
  return wrap_buffer(src->client, src->client->rt->copy_buffer(src->rt, dst));
}
}  // namespace

PJRT_Error* Buffer_CopyToDevice(PJRT_Buffer_CopyToDevice_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_CopyToDevice);
    auto* b = live(args->buffer, kFn);
    // Another device's default memory, as XLA copies between devices.
    args->dst_buffer =
        copy_buffer(b, need(args->dst_device, "dst_device")->rt->default_memory(), kFn);
  });
}

PJRT_Error* Buffer_CopyToMemory(PJRT_Buffer_CopyToMemory_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_CopyToMemory);
    auto* b = live(args->buffer, kFn);
    auto* mem = static_cast<PjrtxMemory*>(need(args->dst_memory, "dst_memory"));
    args->dst_buffer = copy_buffer(b, mem->rt, kFn);
  });
}

PJRT_Error* Buffer_ToHostBuffer(PJRT_Buffer_ToHostBuffer_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Buffer_ToHostBuffer);
    auto* b = live(args->src, kFn);
    size_t size = static_cast<size_t>(b->rt->on_device_size());
    if (args->host_layout != nullptr) {
      const PJRT_Buffer_MemoryLayout* l = args->host_layout;
      bool dense = false;
      if (l->type == PJRT_Buffer_MemoryLayout_Type_Tiled) {
        dense = l->tiled.num_tiles == 0 && l->tiled.minor_to_major_size == b->dims.size();
        for (size_t i = 0; dense && i < b->dims.size(); ++i)
          dense = l->tiled.minor_to_major[i] == static_cast<int64_t>(b->dims.size() - 1 - i);
      } else {
        int64_t expect = compiler::dtype_size(b->rt->type().dtype);
        dense = l->strides.num_byte_strides == b->dims.size();
        for (int64_t i = static_cast<int64_t>(b->dims.size()) - 1; dense && i >= 0; --i) {
          dense = b->dims[i] == 1 || l->strides.byte_strides[i] == expect;
          expect *= b->dims[i];
        }
      }
      if (!dense) unimplemented(kFn, ": only dense major-to-minor host layouts are supported");
    }
    if (args->dst == nullptr) {  // size query
      args->dst_size = size;
      args->event = nullptr;
      return;
    }
    if (args->dst_size < size)
      invalid_argument(kFn, ": dst_size ", args->dst_size, " < ", size, " bytes of ",
                       b->rt->type().str());
    if (b->rt->is_deleted()) failed_precondition(kFn, ": buffer ", b->rt->type().str(), " was deleted");
    args->event = new PJRT_Event{b->client->rt->to_host(b->rt, args->dst, size)};
  });
}

}  // namespace pjrtx::pjrt
