// A table of every struct layout and slot name declared in c_api.h, computed
// by the compiler (offsetof/sizeof) from the declarations themselves. It lets
// tests compare our ABI against an independent description of PJRT (pypjrt)
// without parsing C.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pjrtx::pjrt {

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

// Every struct in c_api.h that has a _STRUCT_SIZE constant, PJRT_Api included.
const std::vector<StructLayout>& abi_layouts();

// The PJRT_Api slot names in table order (from PJRTX_PJRT_SLOTS); 138 of them.
const std::vector<const char*>& abi_slot_names();

// Every enum in c_api.h with its enumerators.
const std::vector<EnumLayout>& abi_enums();

}  // namespace pjrtx::pjrt
