// Host callbacks (jax.pure_callback, io_callback, debug.callback/print,
// checkify): `custom_call @pjrtx_callback` with backend_config "<id>" names
// a Python callable that pjrtx.jax_rules.callbacks holds in a table. The back
// end has no Python in it: the nanobind module installs the runner that calls
// the table under the GIL (csrc/python/callback_hook.cc).
//
// Lifetime: a lowered program retains every id it calls (Program -> kernel
// -> CallbackRef) until the program and its runs in flight are gone. The
// Python table drops a callable only when its lowering's keepalive has died
// (the jaxlib executable holds it) and no program retains the id any more;
// releases are queued here and the Python side collects them whenever it
// holds the GIL anyway (the next lowering), so nothing on the executor or
// MLX threads ever waits for the GIL to free a callable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/types.h"

namespace pjrtx::backend {

inline constexpr const char* kCallbackTarget = "pjrtx_callback";

// One operand or result of a callback: row-contiguous bytes in the plan
// type's storage (s4/u4 one value per byte, pred one byte).
struct HostArray {
  void* data;
  int64_t nbytes;
  compiler::TensorType type;
};

// Calls callable `id` on `args` and writes its results into `results`
// (already allocated, sized for their types). Throws an Error naming the
// callback when the callable raises or returns the wrong thing.
using CallbackRunner = std::function<void(uint64_t id, const std::vector<HostArray>& args,
                                          const std::vector<HostArray>& results)>;
void set_callback_runner(CallbackRunner fn);

// Calls callable `id` through the installed runner, with this thread marked
// as inside a host callback (in_host_callback) until it returns. Throws an
// Error naming the callback when no runner is installed, or when the
// callable raises or returns the wrong thing. The MLX node of
// ops/callback.cc and the compiled host loops (loops/host_loop.cc) both
// call it.
void run_host_callback(uint64_t id, const std::vector<HostArray>& args,
                       const std::vector<HostArray>& results);

// The callable id of a custom_call @pjrtx_callback (its backend_config, a
// decimal number), or nullopt when the config is not one.
std::optional<uint64_t> parse_callback_id(const std::string& backend_config);

// Keeps id's table entry alive while held (a count per id, no GIL needed).
using CallbackRef = std::shared_ptr<const void>;
CallbackRef retain_callback(uint64_t id);
bool callback_in_use(uint64_t id);
// Ids whose last CallbackRef died since the previous call.
std::vector<uint64_t> take_released_callbacks();

// True on the thread that is running a host callback right now (MLX's CPU
// stream thread). The runtime refuses to queue executor work from there: the
// executor is busy with the very run that waits for this callback, so any
// wait for that work would never end.
bool in_host_callback();
// Whether any thread is inside a host callback now (the executor waits for
// it: work that needs the executor cannot start until it returns).
bool host_callback_running();

}  // namespace pjrtx::backend
