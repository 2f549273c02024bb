#include "pjrt/pjrt_error.h"

#include <cstring>

#include "pjrt/pjrt_entry_points.h"

// Since PJRT 0.107 jaxlib reads a PJRT_Error through its function table, so
// every error we return starts with a real vtable.
struct PjrtxError : PJRT_Error {
  PJRT_Error_Code code;
  std::string message;
};

namespace pjrtx::pjrt {

namespace {

void vt_destroy(PJRT_Error* e) { delete static_cast<PjrtxError*>(e); }
void vt_message(const PJRT_Error* e, const char** msg, size_t* size) {
  const auto* pe = static_cast<const PjrtxError*>(e);
  *msg = pe->message.c_str();
  *size = pe->message.size();
}
PJRT_Error_Code vt_get_code(const PJRT_Error* e) {
  return static_cast<const PjrtxError*>(e)->code;
}
void vt_for_each_payload(const PJRT_Error*, PJRT_Error_PayloadVisitor, void*) {}

const PJRT_Error_FunctionTable kErrorVTable = {
    PJRT_Error_FunctionTable_STRUCT_SIZE,
    sizeof(PjrtxError),
    nullptr,
    vt_destroy,
    vt_message,
    vt_get_code,
    vt_for_each_payload,
};

const PjrtxError* as_error(const PJRT_Error* e) { return static_cast<const PjrtxError*>(e); }

}  // namespace

PJRT_Error* make_error(PJRT_Error_Code code, std::string message) {
  auto* e = new PjrtxError();
  e->vtable = &kErrorVTable;
  e->code = code;
  e->message = std::move(message);
  return e;
}

PJRT_Error_Code to_pjrt_code(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return PJRT_Error_Code_INVALID_ARGUMENT;
    case ErrorCode::kFailedPrecondition: return PJRT_Error_Code_FAILED_PRECONDITION;
    case ErrorCode::kUnimplemented: return PJRT_Error_Code_UNIMPLEMENTED;
    case ErrorCode::kNotFound: return PJRT_Error_Code_NOT_FOUND;
    case ErrorCode::kInternal: return PJRT_Error_Code_INTERNAL;
    case ErrorCode::kDeadlineExceeded: return PJRT_Error_Code_DEADLINE_EXCEEDED;
    case ErrorCode::kAborted: return PJRT_Error_Code_ABORTED;
    case ErrorCode::kUnavailable: return PJRT_Error_Code_UNAVAILABLE;
  }
  return PJRT_Error_Code_UNKNOWN;
}

PJRT_Error* to_pjrt_error(const Error* e) {
  return e ? make_error(to_pjrt_code(e->code()), e->what()) : nullptr;
}

void check_args(const void* args, size_t struct_size, size_t needed, const char* fn) {
  if (args == nullptr) invalid_argument(fn, ": args is null");
  if (struct_size < needed)
    invalid_argument(fn, ": args struct_size ", struct_size, " is smaller than ", needed,
                     " (the caller speaks a PJRT C API older than 0.", kOldestCallerMinor,
                     ", pjrtx's oldest: jaxlib 0.8.0)");
}

// ---- entry points --------------------------------------------------------

void Error_Destroy(PJRT_Error_Destroy_Args* args) {
  if (args != nullptr && args->error != nullptr) delete const_cast<PjrtxError*>(as_error(args->error));
}

void Error_Message(PJRT_Error_Message_Args* args) {
  if (args == nullptr || args->error == nullptr) return;
  args->message = as_error(args->error)->message.c_str();
  args->message_size = as_error(args->error)->message.size();
}

// jaxlib must never see this fail: it does not check.
PJRT_Error* Error_GetCode(PJRT_Error_GetCode_Args* args) {
  if (args != nullptr && args->error != nullptr) args->code = as_error(args->error)->code;
  return nullptr;
}

PJRT_Error* Error_ForEachPayload(PJRT_Error_ForEachPayload_Args*) { return nullptr; }

}  // namespace pjrtx::pjrt
