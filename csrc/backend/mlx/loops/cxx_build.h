// Builds emitted C++ (loops/emit_cxx.h) into a shared library with the
// system compiler, as MLX's CPU back end builds its fused kernels, and
// returns the entry point as a plain function pointer: a host loop then runs
// with no Python and no GIL anywhere on its path.
//
// Built libraries are kept on disk under $PJRTX_CACHE_DIR (default
// $XDG_CACHE_HOME/pjrtx, else ~/.cache/pjrtx) in host_loops/, named by a
// hash of the source and the compiler command, so a second process (or a
// second compile of the same loop) loads instead of compiling. The compiler
// is $CXX, else `c++`.
#pragma once

#include <string>

namespace pjrtx::backend::loops {

// The callbacks a loop may call (the prelude's pjrtx_host_calls, the same
// layout): call returns nonzero when callback k failed.
struct HostCalls {
  int (*call)(void* self, long k, const void* const* args, void* const* results);
  void* self;
};

// Returns 0, 1 when the loop ran out of memory, 2 when a callback failed.
using HostLoopFn = int (*)(const void* const* inputs, void* const* outputs, const HostCalls* calls);

struct BuiltLoop {
  HostLoopFn fn = nullptr;
  bool cached = false;     // loaded from disk or memory, not compiled now
  int64_t compile_us = 0;  // the compiler's run (0 when cached)
  std::string path;        // the shared library
  std::string error;       // why fn is null
};

// `code` compiled after `prelude` (loops/cxx_prelude.h): written into the
// source, or, where the prelude includes system headers (the linalg
// kernels'), kept in the cache as a precompiled header. Never throws: a missing or failing
// compiler is reported in `error`.
BuiltLoop build_loop(const std::string& prelude, const std::string& code, const std::string& symbol);

}  // namespace pjrtx::backend::loops
