// The GetPjrtApi table: every one of the 138 slots (0.112) is filled. A NULL
// slot that jaxlib calls kills the process, so slots pjrtx does not implement
// get a stub returning UNIMPLEMENTED with the function's name.
#include <string>

#include "pjrt/pjrt_entry_points.h"
#include "pjrt/pjrt_error.h"

namespace pjrtx::pjrt {

namespace {

template <typename Fn, const char* Name>
struct Stub;

template <typename Args, const char* Name>
struct Stub<PJRT_Error*(Args*), Name> {
  static PJRT_Error* fn(Args*) {
    return make_error(PJRT_Error_Code_UNIMPLEMENTED,
                      std::string(Name) + " is not implemented by pjrtx");
  }
};

template <typename Args, const char* Name>
struct Stub<void(Args*), Name> {
  static void fn(Args*) {}
};

#define PJRTX_STUB_NAME(name) constexpr char kStubName_##name[] = #name;
PJRTX_PJRT_SLOTS(PJRTX_STUB_NAME)
#undef PJRTX_STUB_NAME

PJRT_Api build_api() {
  PJRT_Api a{};
  a.struct_size = PJRT_Api_STRUCT_SIZE;
  a.extension_start = shardings_extension();
  a.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
  a.pjrt_api_version.extension_start = nullptr;
  a.pjrt_api_version.major_version = PJRTX_PJRT_API_MAJOR;
  a.pjrt_api_version.minor_version = PJRTX_PJRT_API_MINOR;
#define PJRTX_FILL_STUB(name) a.name = &Stub<::name, kStubName_##name>::fn;
  PJRTX_PJRT_SLOTS(PJRTX_FILL_STUB)
#undef PJRTX_FILL_STUB
#define PJRTX_FILL_IMPL(name) a.PJRT_##name = &name;
  PJRTX_IMPLEMENTED_SLOTS(PJRTX_FILL_IMPL)
#undef PJRTX_FILL_IMPL
  return a;
}

}  // namespace

const PJRT_Api* api() {
  static const PJRT_Api table = build_api();
  return &table;
}

}  // namespace pjrtx::pjrt

// The plugin's one exported C symbol.
extern "C" __attribute__((visibility("default"))) const PJRT_Api* GetPjrtApi() {
  return pjrtx::pjrt::api();
}
