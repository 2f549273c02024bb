// The PJRT ABI version this extension implements and the slots it fills,
// so jax_plugin can check the version it is about to register and tests can
// list what is implemented. (The full struct layout table is test-only:
// tests/pjrt_abi_layout.cc, built by tests/test_pjrt_abi.py.)

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "pjrt/pjrt_entry_points.h"
#include "pjrt/pjrt_abi.h"
#include "pjrt/pjrt_versions.h"
#include "python/bindings.h"

namespace nb = nanobind;

namespace pjrtx::python {

void bind_abi(nb::module_& m) {
  m.def(
      "implemented_slots",
      [] {
        std::vector<std::string> names;
#define PJRTX_SLOT_NAME(name) names.emplace_back(#name);
        PJRTX_IMPLEMENTED_SLOTS(PJRTX_SLOT_NAME)
#undef PJRTX_SLOT_NAME
        return names;
      },
      "The PJRT slots pjrtx implements (without the PJRT_ prefix); every other slot is a "
      "stub that returns UNIMPLEMENTED.");
  m.def(
      "abi_version",
      [] {
        return nb::make_tuple(int{PJRTX_PJRT_API_MAJOR},
                              int{PJRTX_PJRT_API_MINOR});
      },
      "The PJRT C API version (major, minor) this extension implements.");
  m.def(
      "abi_callers",
      [] {
        nb::list grown;
#define PJRTX_GROWN_ROW(T, last, minor)                                               \
  grown.append(nb::make_tuple(#T, pjrt::Oldest<T>::size, size_t{T##_STRUCT_SIZE}, \
                              pjrt::Oldest<T>::grown_at));
        PJRTX_GROWN_STRUCTS(PJRTX_GROWN_ROW)
#undef PJRTX_GROWN_ROW
        nb::dict d;
        d["oldest_minor"] = pjrt::kOldestCallerMinor;
        d["newest_minor"] = pjrt::kNewestCallerMinor;
        d["grown"] = grown;
        return d;
      },
      "The PJRT C API minors of the callers pjrtx serves (oldest, newest) and the argument "
      "structs that grew in between: (name, size the oldest caller sends, size at the "
      "newest, minor that grew it) (csrc/pjrt/pjrt_versions.h).");
}

}  // namespace pjrtx::python
