// PJRTX_TRACE=1: one line per event on stderr, e.g.
//   [pjrtx] compile main instructions=7 bytes=1234 us=5321
//   [pjrtx] h2d f32[4,3] bytes=48 us=3
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace pjrtx {

bool trace_enabled();
void trace(const std::string& what, int64_t bytes, int64_t us,
           const std::string& extra = "");

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  int64_t us() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now() - start_)
        .count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace pjrtx
