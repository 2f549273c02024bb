// The Layouts extension: every pjrtx array is dense and row-major (MLX
// arrays are), so a layout is the descending minor_to_major of its rank.
// jaxlib reads an executable's parameter and output layouts through it
// (Compiled.input_formats / output_formats, the persistent cache's layout
// check); without it jaxlib asks for an HLO module pjrtx does not have.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pjrt/pjrt_entry_points.h"
#include "pjrt/pjrt_error.h"
#include "pjrt/pjrt_handles.h"

struct PJRT_Layouts_SerializedLayout {
  std::string bytes;
};

namespace pjrtx::pjrt {

std::unique_ptr<PJRT_Layouts_MemoryLayout> row_major_layout(size_t rank) {
  auto l = std::make_unique<PJRT_Layouts_MemoryLayout>();
  for (size_t i = 0; i < rank; ++i) l->minor_to_major.push_back(static_cast<int64_t>(rank - 1 - i));
  return l;
}

namespace {

// The text xla::Layout::ToString writes and jaxlib 0.10.2's
// PjRtLayout::Deserialize parses (it CHECK-fails, aborting, on anything
// else): "{1,0}" for a row-major matrix, "{}" for a scalar. No tiling,
// default element size and memory space.
std::string layout_text(const std::vector<int64_t>& minor_to_major) {
  std::string out = "{";
  for (size_t i = 0; i < minor_to_major.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(minor_to_major[i]);
  }
  return out + "}";
}

void delete_serialized(PJRT_Layouts_SerializedLayout* s) { delete s; }

PJRT_Error* MemoryLayout_Destroy(PJRT_Layouts_MemoryLayout_Destroy_Args* args) {
  return guard([&] {
    if (args == nullptr) invalid_argument("PJRT_Layouts_MemoryLayout_Destroy: args is null");
    delete args->layout;
  });
}

PJRT_Error* MemoryLayout_Serialize(PJRT_Layouts_MemoryLayout_Serialize_Args* args) {
  return guard([&] {
    constexpr const char* kFn = "PJRT_Layouts_MemoryLayout_Serialize";
    if (args == nullptr || args->layout == nullptr) invalid_argument(kFn, ": layout is null");
    auto* s = new PJRT_Layouts_SerializedLayout{layout_text(args->layout->minor_to_major)};
    args->serialized_bytes = s->bytes.data();
    args->serialized_bytes_size = s->bytes.size();
    args->serialized_layout = s;
    args->serialized_layout_deleter = &delete_serialized;
  });
}

PJRT_Error* Client_GetDefaultLayout(PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args* args) {
  return guard([&] {
    if (args == nullptr) invalid_argument("PJRT_Layouts_PJRT_Client_GetDefaultLayout: args is null");
    args->layout = row_major_layout(args->num_dims).release();
  });
}

PJRT_Error* Topology_GetDefaultLayout(PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args* args) {
  return guard([&] {
    if (args == nullptr) invalid_argument("PJRT_Layouts_PJRT_Topology_GetDefaultLayout: args is null");
    args->layout = row_major_layout(args->num_dims).release();
  });
}

PJRT_Error* Buffer_MemoryLayout(PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args* args) {
  return guard([&] {
    constexpr const char* kFn = "PJRT_Layouts_PJRT_Buffer_MemoryLayout";
    if (args == nullptr || args->buffer == nullptr) invalid_argument(kFn, ": buffer is null");
    auto l = std::make_unique<PJRT_Layouts_MemoryLayout>();
    l->minor_to_major = args->buffer->minor_to_major;
    args->layout = l.release();
  });
}

PJRT_Error* Executable_GetOutputLayouts(PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args* args) {
  return guard([&] {
    constexpr const char* kFn = "PJRT_Layouts_PJRT_Executable_GetOutputLayouts";
    if (args == nullptr || args->executable == nullptr) invalid_argument(kFn, ": executable is null");
    auto& layouts = args->executable->info->output_layouts;
    args->num_outputs = layouts.size();
    args->layouts = layouts.empty() ? nullptr : const_cast<PJRT_Layouts_MemoryLayout**>(layouts.data());
  });
}

PJRT_Error* Executable_GetParameterLayouts(
    PJRT_Layouts_PJRT_Executable_GetParameterLayouts_Args* args) {
  return guard([&] {
    constexpr const char* kFn = "PJRT_Layouts_PJRT_Executable_GetParameterLayouts";
    if (args == nullptr || args->executable == nullptr) invalid_argument(kFn, ": executable is null");
    auto& layouts = args->executable->info->param_layouts;
    args->num_parameters = layouts.size();
    args->layouts = layouts.empty() ? nullptr : const_cast<PJRT_Layouts_MemoryLayout**>(layouts.data());
  });
}

}  // namespace

PJRT_Extension_Base* layouts_extension() {
  static PJRT_Layouts_Extension ext = {
      {PJRT_Layouts_Extension_STRUCT_SIZE, PJRT_Extension_Type_Layouts, nullptr},
      &MemoryLayout_Destroy,
      &MemoryLayout_Serialize,
      &Client_GetDefaultLayout,
      &Buffer_MemoryLayout,
      &Topology_GetDefaultLayout,
      &Executable_GetOutputLayouts,
      &Executable_GetParameterLayouts,
  };
  return &ext.base;
}

}  // namespace pjrtx::pjrt
