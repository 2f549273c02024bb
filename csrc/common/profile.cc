#include "common/profile.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include "common/env.h"

#ifdef _WIN32
#include <process.h>
#define PJRTX_GETPID _getpid
#else
#include <unistd.h>
#define PJRTX_GETPID getpid
#endif

namespace pjrtx {

namespace {

struct Event {
  const char* cat;
  std::string name;
  double ts, dur;
  int tid;
  std::vector<std::pair<std::string, std::string>> args;
};

// About 150 bytes an event in memory and in the file: a run of a million
// executes (3 events each) stops recording at ~150 MB instead of growing
// without bound; the file then says how many were dropped.
constexpr size_t kMaxEvents = 1'000'000;

// Never destroyed: executor threads may still record while static
// destructors run; the file is written by an atexit handler instead.
struct Profiler {
  std::string path;
  size_t dropped = 0;
  std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
  std::mutex mu;
  std::vector<Event> events;
  std::vector<std::pair<int, std::string>> thread_names;
};

Profiler* profiler() {
  static Profiler* p = [] {
    std::string path = env_string("PJRTX_PROFILE");
    if (path.empty()) return static_cast<Profiler*>(nullptr);
    auto* prof = new Profiler;
    prof->path = std::move(path);
    std::atexit([] { profile_flush(); });
    return prof;
  }();
  return p;
}

// Small, stable thread ids in order of first event (viewers sort by them).
int this_tid() {
  static std::atomic<int> next{1};
  thread_local int tid = next++;
  return tid;
}

void put_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

bool is_integer(const std::string& s) {
  if (s.empty() || s.size() > 18) return false;
  size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

void put_number(std::string& out, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v < 0 ? 0.0 : v);
  out += buf;
}

}  // namespace

bool profile_enabled() {
  static const bool on = profiler() != nullptr;
  return on;
}

double profile_now_us() {
  Profiler* p = profiler();
  if (p == nullptr) return 0;
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - p->origin)
      .count();
}

void profile_event(const char* cat, std::string name, double start_us, double dur_us,
                   std::vector<std::pair<std::string, std::string>> args) {
  Profiler* p = profiler();
  if (p == nullptr) return;
  int tid = this_tid();
  std::lock_guard<std::mutex> lock(p->mu);
  if (p->events.size() >= kMaxEvents) {
    ++p->dropped;
    return;
  }
  p->events.push_back({cat, std::move(name), start_us, dur_us, tid, std::move(args)});
}

void profile_thread_name(const std::string& name) {
  Profiler* p = profiler();
  if (p == nullptr) return;
  int tid = this_tid();
  std::lock_guard<std::mutex> lock(p->mu);
  p->thread_names.emplace_back(tid, name);
}

std::string profile_flush() {
  Profiler* p = profiler();
  if (p == nullptr) return "";
  const std::string pid = std::to_string(PJRTX_GETPID());
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  std::lock_guard<std::mutex> lock(p->mu);
  bool first = true;
  auto sep = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  sep();
  out += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid +
         ",\"tid\":0,\"args\":{\"name\":\"pjrtx\",\"dropped_events\":" +
         std::to_string(p->dropped) + "}}";
  for (const auto& [tid, name] : p->thread_names) {
    sep();
    out += "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid +
           ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":";
    put_string(out, name);
    out += "}}";
  }
  for (const Event& e : p->events) {
    sep();
    out += "{\"ph\":\"X\",\"cat\":";
    put_string(out, e.cat);
    out += ",\"name\":";
    put_string(out, e.name);
    out += ",\"pid\":" + pid + ",\"tid\":" + std::to_string(e.tid) + ",\"ts\":";
    put_number(out, e.ts);
    out += ",\"dur\":";
    put_number(out, e.dur);
    out += ",\"args\":{";
    for (size_t i = 0; i < e.args.size(); ++i) {
      if (i) out += ',';
      put_string(out, e.args[i].first);
      out += ':';
      if (is_integer(e.args[i].second))
        out += e.args[i].second;
      else
        put_string(out, e.args[i].second);
    }
    out += "}}";
  }
  out += "\n]}\n";
  // Written beside the target and renamed, so a reader never sees half a file.
  std::string tmp = p->path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << out;
    if (!f) {
      std::fprintf(stderr, "[pjrtx] PJRTX_PROFILE: cannot write %s\n", tmp.c_str());
      return p->path;
    }
  }
  if (std::rename(tmp.c_str(), p->path.c_str()) != 0)
    std::fprintf(stderr, "[pjrtx] PJRTX_PROFILE: cannot rename %s to %s\n", tmp.c_str(),
                 p->path.c_str());
  return p->path;
}

}  // namespace pjrtx
