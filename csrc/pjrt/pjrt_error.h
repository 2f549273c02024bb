// The one boundary where C++ exceptions become PJRT_Error, plus argument
// checks shared by every entry point. Entry points look like:
//
//   PJRT_Error* Client_PlatformName(PJRT_Client_PlatformName_Args* args) {
//     return guard([&] {
//       PJRTX_CHECK_ARGS(Client_PlatformName);
//       auto* c = need(args->client, "client");
//       ...fill out-fields...
//     });
//   }
#pragma once

#include <string>

#include "common/error.h"
#include "pjrt/pjrt_abi.h"
#include "pjrt/pjrt_versions.h"

namespace pjrtx::pjrt {

PJRT_Error* make_error(PJRT_Error_Code code, std::string message);
PJRT_Error_Code to_pjrt_code(ErrorCode code);
// nullptr when e is null.
PJRT_Error* to_pjrt_error(const Error* e);

template <typename F>
PJRT_Error* guard(F&& f) noexcept {
  try {
    f();
    return nullptr;
  } catch (const Error& e) {
    return make_error(to_pjrt_code(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return make_error(PJRT_Error_Code_RESOURCE_EXHAUSTED, "pjrtx: out of host memory");
  } catch (const std::exception& e) {
    return make_error(PJRT_Error_Code_INTERNAL, std::string("pjrtx: ") + e.what());
  } catch (...) {
    return make_error(PJRT_Error_Code_INTERNAL, "pjrtx: unknown C++ exception");
  }
}

// Throws INVALID_ARGUMENT when args is null or smaller than what the oldest
// caller pjrtx serves sends (pjrt_versions.h: a struct that grew since then
// is accepted at its older size, and its newer fields are used only where
// PJRTX_SENT says they arrived).
void check_args(const void* args, size_t struct_size, size_t needed, const char* fn);
#define PJRTX_CHECK_ARGS(Name)                                                    \
  ::pjrtx::pjrt::check_args(                                                      \
      args, args ? args->struct_size : 0,                                         \
      ::pjrtx::pjrt::oldest_size<PJRT_##Name##_Args>(PJRT_##Name##_Args_STRUCT_SIZE), \
      "PJRT_" #Name);                                                             \
  [[maybe_unused]] static constexpr const char* kFn = "PJRT_" #Name

template <typename T>
T* need_ptr(T* p, const char* fn, const char* what) {
  if (p == nullptr) invalid_argument(fn, ": ", what, " is null");
  return p;
}
#define need(p, what) ::pjrtx::pjrt::need_ptr(p, kFn, what)

}  // namespace pjrtx::pjrt
