// Python view of the PJRT ABI we compile against (csrc/pjrt/abi_layout.h),
// so tests can compare it with an independent description of PJRT and
// jax_plugin can check the version it is about to register.

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <vector>

#include "pjrt/abi_layout.h"
#include "pjrt/entry_points.h"
#include "pjrt/c_api.h"
#include "python/bindings.h"

namespace nb = nanobind;

namespace pjrtx::python {

namespace {

nb::list layouts_to_python() {
  nb::list out;
  for (const pjrt::StructLayout& s : pjrt::abi_layouts()) {
    nb::list fields;
    for (const pjrt::FieldLayout& f : s.fields) {
      fields.append(nb::make_tuple(f.name, f.offset, f.size));
    }
    nb::dict d;
    d["name"] = s.name;
    d["sizeof"] = s.sizeof_value;
    d["struct_size"] = s.struct_size_constant;
    d["fields"] = fields;
    out.append(d);
  }
  return out;
}

nb::dict enums_to_python() {
  nb::dict out;
  for (const pjrt::EnumLayout& e : pjrt::abi_enums()) {
    nb::list values;
    for (const pjrt::EnumValue& v : e.values) {
      values.append(nb::make_tuple(v.name, v.value));
    }
    out[e.name] = values;
  }
  return out;
}

}  // namespace

void bind_abi(nb::module_& m) {
  m.def("abi_layouts", &layouts_to_python,
        "Every PJRT struct we declare: a list of dicts {name, sizeof, "
        "struct_size, fields: [(name, offset, size), ...]}.");
  m.def(
      "abi_slot_names",
      [] {
        std::vector<std::string> names;
        for (const char* n : pjrt::abi_slot_names()) names.emplace_back(n);
        return names;
      },
      "The 138 PJRT_Api function slots in table order.");
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
  m.def("abi_enums", &enums_to_python,
        "Every PJRT enum we declare: {enum name: [(enumerator, value), ...]}.");
  m.def(
      "abi_version",
      [] {
        return nb::make_tuple(int{PJRTX_PJRT_API_MAJOR},
                              int{PJRTX_PJRT_API_MINOR});
      },
      "The PJRT C API version (major, minor) this extension implements.");
}

}  // namespace pjrtx::python
