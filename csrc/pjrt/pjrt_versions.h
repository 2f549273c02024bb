// What differs between the jaxlibs pjrtx serves, for the C ABI layer: the
// PJRT C API minor each caller speaks and the argument structs that grew
// between the oldest caller and pjrtx's own header (0.112). Its Python twin,
// pjrtx/versions.py, holds the rest (releases, Shardy, JAX internals).
//
// pjrtx reports minor 112 to every caller. jaxlib accepts a plugin newer
// than itself and only calls the slots it knows (the table is append-only
// since 0.57), but it passes each argument struct at the size it was
// compiled with: a 0.80 caller (jaxlib 0.8.0) sends
// PJRT_Executable_GetCompiledMemoryStats_Args without the fields added at
// 0.90 and 0.104. So an entry point requires only the size the oldest
// caller sends (PJRTX_CHECK_ARGS reads kOldestSize here), and reads or
// writes a field added later only when PJRTX_SENT says the caller's struct
// reaches past it.
#pragma once

#include <cstddef>

#include "pjrt/pjrt_abi.h"

namespace pjrtx::pjrt {

// The PJRT C API minor of each jaxlib pjrtx is tested with (jaxlib's own
// log line "The framework PJRT API version is 0.N"):
//   jaxlib 0.8.0: 80   0.8.1: 81   0.8.2, 0.8.3: 85
//   jaxlib 0.9.0: 90   0.9.1: 96   0.9.2: 100
//   jaxlib 0.10.0: 104   0.10.1: 108   0.10.2: 112
constexpr int kOldestCallerMinor = 80;
constexpr int kNewestCallerMinor = PJRTX_PJRT_API_MINOR;  // 112

// X(struct, last field a kOldestCallerMinor caller sends, minor that first
// grew it): the structs pjrtx reads or fills that grew after 0.80. Every
// other struct pjrtx implements a slot for has the same size at 0.80 as at
// 0.112 (PJRT C API changelog, 0.81-0.112).
#define PJRTX_GROWN_STRUCTS(X)                                                \
  /* 0.90 total_size_in_bytes; 0.104 total_allocation_bytes,                 \
     indefinite_allocations, peak_unpadded_heap_bytes (all out) */           \
  X(PJRT_Executable_GetCompiledMemoryStats_Args, peak_memory_in_bytes, 90)    \
  /* 0.97 multi_slice_config; later use_major_to_minor_data_layout_for_      \
     callbacks, hlo_output_callbacks, num_hlo_output_callbacks */            \
  X(PJRT_ExecuteOptions, incarnation_ids, 97)

template <typename T>
struct Oldest {
  static constexpr bool grown = false;
  static constexpr size_t size = 0;  // unused: the struct's full STRUCT_SIZE
  static constexpr int grown_at = 0;
};
#define PJRTX_OLDEST_SPEC(T, last, minor)                       \
  template <>                                                   \
  struct Oldest<T> {                                            \
    static constexpr bool grown = true;                         \
    static constexpr size_t size = PJRTX_STRUCT_SIZE(T, last);  \
    static constexpr int grown_at = minor;                      \
    static_assert(size < T##_STRUCT_SIZE, #T ": not grown");    \
    static_assert(minor > kOldestCallerMinor, #T ": too old");  \
  };
PJRTX_GROWN_STRUCTS(PJRTX_OLDEST_SPEC)
#undef PJRTX_OLDEST_SPEC

// The smallest struct_size pjrtx accepts for T: what the oldest caller sends.
template <typename T>
constexpr size_t oldest_size(size_t full) {
  return Oldest<T>::grown ? Oldest<T>::size : full;
}

// Whether the caller's struct reaches past `field` (read it, or write it).
#define PJRTX_SENT(p, T, field) ((p)->struct_size >= PJRTX_STRUCT_SIZE(T, field))

}  // namespace pjrtx::pjrt
