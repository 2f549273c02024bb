// PJRT_Event entry points over runtime::Event.
#include "pjrt/pjrt_entry_points.h"
#include "pjrt/pjrt_error.h"
#include "pjrt/pjrt_handles.h"
#include "common/spin.h"

namespace pjrtx::pjrt {

PJRT_Error* Event_Destroy(PJRT_Event_Destroy_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Event_Destroy);
    delete args->event;
  });
}

// jaxlib asks IsReady once per buffer, when something first wants its
// readiness (block_until_ready, is_ready(), a host read), and on "not yet"
// registers OnReady and sleeps on a futex until our completion wakes it:
// 15-25 us on a small VM, longer than a tiny call's own work. So a pending
// event is polled for up to PJRTX_SPIN_US first (common/spin.h), as every
// other hand-off in pjrtx is; a long run still answers "not yet" after
// that bounded poll.
PJRT_Error* Event_IsReady(PJRT_Event_IsReady_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Event_IsReady);
    runtime::Event& ev = *need(args->event, "event")->rt;
    args->is_ready = ev.is_ready() ||
                     spin_until([&ev] { return ev.is_ready(); }, spin_us());
  });
}

PJRT_Error* Event_Error(PJRT_Event_Error_Args* args) {
  PJRT_Error* result = nullptr;
  PJRT_Error* err = guard([&] {
    PJRTX_CHECK_ARGS(Event_Error);
    auto e = need(args->event, "event")->rt->error();
    result = to_pjrt_error(e.get());
  });
  return err ? err : result;
}

PJRT_Error* Event_Await(PJRT_Event_Await_Args* args) {
  PJRT_Error* result = nullptr;
  PJRT_Error* err = guard([&] {
    PJRTX_CHECK_ARGS(Event_Await);
    auto e = need(args->event, "event")->rt->await();
    result = to_pjrt_error(e.get());
  });
  return err ? err : result;
}

// The callback owns the PJRT_Error it receives (it may be NULL).
PJRT_Error* Event_OnReady(PJRT_Event_OnReady_Args* args) {
  return guard([&] {
    PJRTX_CHECK_ARGS(Event_OnReady);
    auto* ev = need(args->event, "event");
    if (args->callback == nullptr) invalid_argument(kFn, ": callback is null");
    auto cb = args->callback;
    void* user = args->user_arg;
    ev->rt->on_ready([cb, user](const runtime::ErrorPtr& e) { cb(to_pjrt_error(e.get()), user); });
  });
}

}  // namespace pjrtx::pjrt
