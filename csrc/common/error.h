// The exception type every layer below csrc/pjrt throws. csrc/pjrt/pjrt_error.cc is
// the one place where it (and any std::exception) becomes a PJRT_Error.
// Messages start with what failed, e.g.
//   "[stablehlo.dot_general] lhs batching dims (0) != rhs (1): f32[2,3] x f32[3,2]".
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace pjrtx {

enum class ErrorCode {
  kInvalidArgument,
  kFailedPrecondition,
  kUnimplemented,
  kNotFound,
  kInternal,
  kDeadlineExceeded,  // a collective waited past PJRTX_COLLECTIVE_TIMEOUT_S
  kAborted,           // another device of the same run failed
  kUnavailable,       // another process cannot be reached (jax.distributed)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

template <typename... Args>
[[noreturn]] void throw_error(ErrorCode code, const Args&... args) {
  throw Error(code, detail::concat(args...));
}
template <typename... Args>
[[noreturn]] void invalid_argument(const Args&... args) {
  throw_error(ErrorCode::kInvalidArgument, args...);
}
template <typename... Args>
[[noreturn]] void unimplemented(const Args&... args) {
  throw_error(ErrorCode::kUnimplemented, args...);
}
template <typename... Args>
[[noreturn]] void failed_precondition(const Args&... args) {
  throw_error(ErrorCode::kFailedPrecondition, args...);
}

}  // namespace pjrtx
