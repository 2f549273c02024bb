#include "backend/mlx/host/lapack.h"

#include <atomic>
#include <mutex>

#include "common/env.h"
#include "common/error.h"

namespace pjrtx::backend::lapack {

namespace {

std::atomic<Resolver> g_resolver{nullptr};

}  // namespace

void set_resolver(Resolver resolver) { g_resolver.store(resolver); }

const Functions& functions() {
  static const Functions own = [] {
    Functions f;
    f.missing = "PJRTX_LAPACK=own";
    return f;
  }();
  std::string mode = env_string("PJRTX_LAPACK");
  if (mode == "own") return own;
  if (mode != "scipy")
    invalid_argument("pjrtx: PJRTX_LAPACK must be 'scipy' or 'own', got '", mode, "'");
  static std::once_flag once;
  static Functions table;
  std::call_once(once, [] {
    Resolver r = g_resolver.load();
    if (r != nullptr) table = r();
    else table.missing = "no resolver (the extension was loaded without pjrtx's Python package)";
  });
  return table;
}

}  // namespace pjrtx::backend::lapack
