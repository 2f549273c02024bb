// PJRTX_PROFILE=trace.json: a Chrome/Perfetto trace of where time goes
// (compile phases, executes with their graph build and evaluation,
// transfers, waits), written as {"traceEvents": [...]} complete events
// ("ph": "X", ts/dur in microseconds) when the process exits normally, and
// on profile_flush() (pjrtx._pjrtx.profile_flush) for long-running ones.
// Open it in ui.perfetto.dev or chrome://tracing.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pjrtx {

// Read once at first use; when off every scope below costs this one check.
bool profile_enabled();

// Microseconds since the profiler started (the trace's time origin).
double profile_now_us();

// Records one complete event on the calling thread. `args` values are
// emitted as JSON strings unless they parse as plain integers.
void profile_event(const char* cat, std::string name, double start_us, double dur_us,
                   std::vector<std::pair<std::string, std::string>> args = {});

// Names the calling thread in the trace ("pjrtx executor").
void profile_thread_name(const std::string& name);

// Rewrites the trace file with every event so far; returns its path ("" when
// profiling is off). Also runs at normal process exit.
std::string profile_flush();

// RAII: one complete event from construction to destruction on this thread.
// Scopes nest (a scope opened inside another on the same thread lies inside
// it), which is how viewers draw them.
class ProfileScope {
 public:
  ProfileScope(const char* cat, const char* name) : on_(profile_enabled()) {
    if (on_) {
      cat_ = cat;
      name_ = name;
      start_ = profile_now_us();
    }
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;
  ~ProfileScope() {
    if (on_) profile_event(cat_, std::move(name_), start_, profile_now_us() - start_, std::move(args_));
  }
  bool active() const { return on_; }
  void set_name(std::string name) {
    if (on_) name_ = std::move(name);
  }
  void arg(const char* key, std::string value) {
    if (on_) args_.emplace_back(key, std::move(value));
  }
  void arg(const char* key, int64_t value) {
    if (on_) args_.emplace_back(key, std::to_string(value));
  }
  double start_us() const { return start_; }

 private:
  bool on_;
  const char* cat_ = "";
  std::string name_;
  double start_ = 0;
  std::vector<std::pair<std::string, std::string>> args_;
};

}  // namespace pjrtx
