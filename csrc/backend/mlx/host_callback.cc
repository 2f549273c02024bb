// The table behind host_callback.h: the runner the Python module installs,
// the count of programs that retain each callable, and the per-thread flag
// the runtime reads to refuse work queued from inside a callback. Kept
// below the op families: ops/callback.cc (a callback as an MLX node) and
// loops/host_loop.cc (a callback called from a compiled host loop) both
// call run_host_callback.
#include "backend/mlx/host_callback.h"

#include <atomic>
#include <charconv>
#include <map>
#include <mutex>

#include "common/error.h"

namespace pjrtx::backend {

namespace {

struct CallbackTable {
  std::mutex mu;
  CallbackRunner runner;
  std::map<uint64_t, int64_t> refs;
  std::vector<uint64_t> released;
};

// Never destroyed: programs (and their CallbackRefs) may die in other
// static destructors at exit.
CallbackTable& table() {
  static CallbackTable* t = new CallbackTable();
  return *t;
}

thread_local bool t_in_callback = false;
std::atomic<int> g_callbacks_running{0};

void release_callback(uint64_t id) {
  CallbackTable& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.refs.find(id);
  if (it == t.refs.end()) return;
  if (--it->second == 0) {
    t.refs.erase(it);
    t.released.push_back(id);
  }
}

}  // namespace

void run_host_callback(uint64_t id, const std::vector<HostArray>& args,
                       const std::vector<HostArray>& results) {
  CallbackRunner fn;
  {
    CallbackTable& t = table();
    std::lock_guard<std::mutex> lock(t.mu);
    fn = t.runner;
  }
  if (!fn)
    failed_precondition("[pjrtx_callback] no callback runner is installed (import pjrtx first)");
  struct Flag {
    Flag() {
      t_in_callback = true;
      g_callbacks_running.fetch_add(1);
    }
    ~Flag() {
      t_in_callback = false;
      g_callbacks_running.fetch_sub(1);
    }
  } flag;
  fn(id, args, results);
}

void set_callback_runner(CallbackRunner fn) {
  CallbackTable& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  t.runner = std::move(fn);
}

CallbackRef retain_callback(uint64_t id) {
  {
    CallbackTable& t = table();
    std::lock_guard<std::mutex> lock(t.mu);
    ++t.refs[id];
  }
  return CallbackRef(new uint64_t(id), [](const void* p) {
    const auto* id = static_cast<const uint64_t*>(p);
    release_callback(*id);
    delete id;
  });
}

bool callback_in_use(uint64_t id) {
  CallbackTable& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.refs.count(id) != 0;
}

std::vector<uint64_t> take_released_callbacks() {
  CallbackTable& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  std::vector<uint64_t> out;
  out.swap(t.released);
  return out;
}

std::optional<uint64_t> parse_callback_id(const std::string& cfg) {
  uint64_t id = 0;
  auto [end, ec] = std::from_chars(cfg.data(), cfg.data() + cfg.size(), id);
  if (cfg.empty() || ec != std::errc() || end != cfg.data() + cfg.size()) return std::nullopt;
  return id;
}

bool in_host_callback() { return t_in_callback; }

bool host_callback_running() { return g_callbacks_running.load() > 0; }

}  // namespace pjrtx::backend
