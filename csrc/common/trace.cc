#include "common/trace.h"

#include <cstdint>
#include <cstdio>
#include <mutex>

#include "common/env.h"

namespace pjrtx {

bool trace_enabled() {
  // Read once: tracing is chosen at process start.
  static const bool on = env_flag("PJRTX_TRACE");
  return on;
}

void trace(const std::string& what, int64_t bytes, int64_t us, const std::string& extra) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "[pjrtx] %s%s%s bytes=%lld us=%lld\n", what.c_str(),
               extra.empty() ? "" : " ", extra.c_str(), static_cast<long long>(bytes),
               static_cast<long long>(us));
  std::fflush(stderr);
}

}  // namespace pjrtx
