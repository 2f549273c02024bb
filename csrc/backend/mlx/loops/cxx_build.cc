#include "backend/mlx/loops/cxx_build.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "common/cpu_features.h"
#include "common/profile.h"
#include "common/trace.h"

namespace pjrtx::backend::loops {

namespace {

// Two FNV-1a passes with different offsets: a 128-bit name for a source.
std::string hash_hex(const std::string& s) {
  uint64_t a = 14695981039346656037ull, b = 0x6c62272e07bb0142ull;
  for (unsigned char c : s) {
    a = (a ^ c) * 1099511628211ull;
    b = (b ^ c) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return buf;
}

std::string cache_dir() {
  if (const char* d = std::getenv("PJRTX_CACHE_DIR"); d && *d) return std::string(d) + "/host_loops";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/pjrtx/host_loops";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/pjrtx/host_loops";
  return "/tmp/pjrtx-host-loops";
}

bool make_dirs(const std::string& path) {
  std::string cur;
  std::stringstream ss(path);
  std::string part;
  if (!path.empty() && path[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

std::string compiler() {
  const char* cxx = std::getenv("CXX");
  return cxx && *cxx ? cxx : "c++";
}

// Strict IEEE: no contraction into FMAs and no fast-math, so + - * / and
// sqrt round as XLA:CPU's do (-O3 keeps that; it only unrolls, vectorizes
// and inlines more). -O3 rather than -O2: GCC's -O2 leaves the emitted
// per-op loops over small arrays rolled, so each value of a body goes
// through memory; unrolled, they stay in registers (the bench's loop body,
// x * 0.999 + 0.001 over f32[16], 1,000 steps: 10.5 us at -O2, 2.8 us at
// -O3, measured on the emitted source; the NumPyro NUTS body builds no
// slower, ~3 s either way). A precompiled prelude (the linalg kernels') is
// built with exactly these flags, or the compiler would not use it.
const char* kFlags = "-O3 -pipe -std=c++17 -fPIC -ffp-contract=off -fno-fast-math -w";

// GCC only: fewer alias queries per load and store in value numbering and
// dead-store elimination. GCC's alias walk grows with a function's memory
// operations times their number, and a sampler's body is one function of
// thousands of small buffers: numpyro's ESS loop (3,689 ops, 6,700 lines)
// built in 22 s, 10 of them "alias stmt walking" (-ftime-report), and in
// 10-12 s with these limits. Small loops stay under the defaults' limits
// anyway. Clang has no such parameters (and builds big functions faster).
const char* kGccFlags = " --param=sccvn-max-alias-queries-per-access=100 --param=dse-max-alias-queries-per-store=32";

// Whether `cxx --version` names GCC (asked once per compiler and process).
bool is_gcc(const std::string& cxx) {
  static std::mutex m;
  static std::map<std::string, bool> known;
  std::lock_guard<std::mutex> lock(m);
  if (auto it = known.find(cxx); it != known.end()) return it->second;
  std::string out;
  if (FILE* p = popen((cxx + " --version 2>/dev/null").c_str(), "r")) {
    std::array<char, 512> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0 && out.size() < 4096) out.append(buf.data(), n);
    pclose(p);
  }
  const bool gcc = out.find("clang") == std::string::npos &&
                   (out.find("Free Software Foundation") != std::string::npos || out.find("GCC") != std::string::npos);
  known[cxx] = gcc;
  return gcc;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct Loaded {
  HostLoopFn fn;
  std::string path;
};

std::mutex& mu() {
  static std::mutex m;
  return m;
}
std::map<std::string, Loaded>& loaded() {
  static auto* m = new std::map<std::string, Loaded>();  // never destroyed: code stays mapped
  return *m;
}

HostLoopFn open_symbol(const std::string& path, const std::string& symbol, std::string* err) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *err = std::string("dlopen: ") + dlerror();
    return nullptr;
  }
  void* f = dlsym(h, symbol.c_str());
  if (!f) {
    *err = "dlsym " + symbol + " failed";
    return nullptr;
  }
  return reinterpret_cast<HostLoopFn>(f);
}

// Runs `cmd` (stderr folded in); returns its exit status and the start of
// its output.
int run_command(const std::string& cmd, std::string* log) {
  int rc = -1;
  if (FILE* p = popen((cmd + " 2>&1").c_str(), "r")) {
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
      if (log->size() < 8192) log->append(buf.data(), n);
    rc = pclose(p);
  }
  return rc;
}

// Writes `text` to `path` through a per-process temporary name, so another
// process never reads half a file.
bool write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + "." + std::to_string(getpid()) + ".tmp";
  {
    std::ofstream f(tmp);
    f << text;
    if (!f) return false;
  }
  return rename(tmp.c_str(), path.c_str()) == 0;
}

// The prelude as a header in the cache, named by its hash, beside its
// precompiled form (`.gch`, which GCC and Clang both look for when a source
// is compiled with -include): headers such as <cmath> then cost a loop's
// build nothing. Built once per machine and compiler; where the compiler
// cannot precompile it, the header is still included and parsed each time.
// Called under mu().
std::string prelude_header(const std::string& dir, const std::string& cmd_base,
                           const std::string& prelude) {
  const std::string h = dir + "/prelude-" + hash_hex(cmd_base + "\n" + prelude) + ".h";
  struct stat st;
  if (stat(h.c_str(), &st) != 0 && !write_file(h, "#pragma once\n" + prelude)) return "";
  const std::string pch = h + ".gch";
  static std::map<std::string, bool> tried;  // per process: one failed try is enough
  if (stat(pch.c_str(), &st) != 0 && !tried[pch]) {
    tried[pch] = true;
    ProfileScope span("compile", "host loop: precompile prelude");
    const std::string tmp = pch + "." + std::to_string(getpid()) + ".tmp";
    std::string log;
    if (run_command(cmd_base + " -x c++-header " + shell_quote(h) + " -o " + shell_quote(tmp), &log) == 0)
      rename(tmp.c_str(), pch.c_str());
    else
      unlink(tmp.c_str());
  }
  return h;
}

// Whether a loop's library is linked against libm, libc and libgcc alone,
// without the C++ runtime the driver links by default: libstdc++ is most of
// the link's work (ode's loop: 21 ms of link CPU with it, 12 without). Code
// that cannot throw needs none of it; only heap buffers (B<>, out of memory)
// and host callbacks throw, and the entry point's catch goes with them. A
// guess, checked: -z defs makes a runtime symbol the compiler kept anyway
// an error, and the driver's own link then runs on the same object. ELF
// only (Apple's ld64 links against libSystem, which has it all).
bool plain_link(const std::string& header, const std::string& code) {
#if defined(__linux__)
  return header.empty() && code.find("B<") == std::string::npos && code.find("host_call(") == std::string::npos;
#else
  (void)header;
  (void)code;
  return false;
#endif
}

}  // namespace

// x86-64's baseline has no FMA instruction: without -mfma every m_fma (a
// contracted multiply-add, fma_contract.h) would be a call into libm.
const char* fma_flag() {
#if defined(__x86_64__)
  return host_has_fma() ? " -mfma" : "";
#else
  return "";
#endif
}

BuiltLoop build_loop(const std::string& prelude, const std::string& code, const std::string& symbol) {
  BuiltLoop out;
  const std::string cxx = compiler();
  const std::string cmd_base = cxx + " " + kFlags + fma_flag() + (is_gcc(cxx) ? kGccFlags : "");
  const std::string key = hash_hex(cmd_base + "\n" + prelude + "\n" + code);
  std::lock_guard<std::mutex> lock(mu());
  if (auto it = loaded().find(key); it != loaded().end()) {
    out.fn = it->second.fn;
    out.path = it->second.path;
    out.cached = true;
    return out;
  }
  const std::string dir = cache_dir();
  const std::string so = dir + "/" + key + ".so";
  struct stat st;
  if (stat(so.c_str(), &st) == 0) {
    std::string err;
    if (HostLoopFn fn = open_symbol(so, symbol, &err)) {
      loaded()[key] = {fn, so};
      out.fn = fn;
      out.path = so;
      out.cached = true;
      return out;
    }
    unlink(so.c_str());  // a broken file: build it again
  }
  if (!make_dirs(dir)) {
    out.error = "cannot create " + dir;
    return out;
  }
  Stopwatch sw;
  // A prelude of our own text alone (no system header) parses in about a
  // millisecond, as fast as its precompiled form loads (ode's loop: 72 ms
  // of cc1plus CPU with it, 73 without), so it goes into the source and a
  // machine's first loop pays no ~1 s precompile. The linalg kernels'
  // prelude includes <complex>, <vector> and <cmath>: that one is precompiled.
  const std::string header =
      prelude.find("#include") == std::string::npos ? "" : prelude_header(dir, cmd_base, prelude);
  // Per-process temporary names, renamed into place: two processes
  // building the same loop never read a half-written file.
  const std::string tag = std::to_string(getpid());
  const std::string src = dir + "/" + key + "." + tag + ".cc";
  const std::string tmp = dir + "/" + key + "." + tag + ".so.tmp";
  {
    std::ofstream f(src);
    if (header.empty()) f << prelude << "\n";
    f << code;
    if (!f) {
      out.error = "cannot write " + src;
      return out;
    }
  }
  std::string log;
  int rc;
  if (plain_link(header, code)) {
    const std::string obj = dir + "/" + key + "." + tag + ".o";
    rc = run_command(cmd_base + " -c " + shell_quote(src) + " -o " + shell_quote(obj), &log);
    if (rc == 0 && run_command(cxx + " -shared -nostdlib " + shell_quote(obj) + " -lm -lc -lgcc -Wl,-z,defs -o " +
                                   shell_quote(tmp),
                               &log) != 0) {
      log.clear();  // the guess missed: the driver's own link, which has the C++ runtime
      rc = run_command(cxx + " -shared " + shell_quote(obj) + " -o " + shell_quote(tmp), &log);
    }
    unlink(obj.c_str());
  } else {
    rc = run_command(cmd_base + " -shared" + (header.empty() ? "" : " -include " + shell_quote(header)) + " " +
                         shell_quote(src) + " -o " + shell_quote(tmp),
                     &log);
  }
  out.compile_us = sw.us();
  if (rc != 0) {
    out.error = "`" + compiler() + "` failed (exit " + std::to_string(rc) + "): " + log.substr(0, 2000) +
                " [source kept at " + src + "]";
    unlink(tmp.c_str());
    return out;
  }
  unlink(src.c_str());
  if (rename(tmp.c_str(), so.c_str()) != 0) {
    out.error = "cannot rename " + tmp;
    unlink(tmp.c_str());
    return out;
  }
  std::string err;
  HostLoopFn fn = open_symbol(so, symbol, &err);
  if (!fn) {
    out.error = err;
    return out;
  }
  loaded()[key] = {fn, so};
  out.fn = fn;
  out.path = so;
  return out;
}

}  // namespace pjrtx::backend::loops
