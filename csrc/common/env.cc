#include "common/env.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "common/spin.h"

namespace pjrtx {

const std::vector<EnvVar>& env_vars() {
  static const std::vector<EnvVar> vars = {
      {"PJRTX_DEVICE", "auto",
       "MLX device: auto (Metal, else CUDA, else CPU), gpu or cpu"},
      {"PJRTX_DEVICES", "1",
       "how many devices pjrtx lists, each of the chosen MLX kind with its own executor "
       "thread and stream, as XLA:CPU's --xla_force_host_platform_device_count (unset: that "
       "flag's value in XLA_FLAGS, else 1); read when the client is created"},
      {"PJRTX_COLLECTIVE_TIMEOUT_S", "300",
       "seconds a device waits in a collective for the other devices of its group before "
       "the run fails with DEADLINE_EXCEEDED (a device whose run failed wakes the others "
       "at once)"},
      {"PJRTX_DISTRIBUTED", "ring",
       "several processes (jax.distributed.initialize): MLX's distributed back end that "
       "joins them: ring (TCP, in every MLX build but Windows), mpi (needs libmpi), nccl "
       "(CUDA builds) or jaccl (macOS, RDMA over Thunderbolt); read when the client is "
       "created"},
      {"PJRTX_DISTRIBUTED_HOST", "",
       "several processes: the address other processes reach this one at (default: "
       "127.0.0.1 when every process runs on one host, else this host's first non-loopback "
       "IPv4 address)"},
      {"PJRTX_DISTRIBUTED_PORT", "",
       "several processes: the TCP port where MLX's ring accepts this process (default: a "
       "free port the system picks; set it where a firewall must let it through)"},
      {"PJRTX_DISTRIBUTED_TIMEOUT_S", "120",
       "several processes: seconds the client waits for the other processes' details in "
       "JAX's key-value store when it is created"},
      {"PJRTX_PARTITION", "auto",
       "multi-device jit programs: auto (Shardy's partitioner from jaxlib where every op "
       "is known to partition correctly, else every device runs the whole program on "
       "gathered arguments), global (always the latter); shardy skips the screen and can "
       "abort the process: tests only; read per compile"},
      {"PJRTX_TRACE", "0",
       "1: print one line per compile, host-to-device, execute and device-to-host event to stderr"},
      {"PJRTX_PROFILE", "",
       "file: write a Chrome/Perfetto trace (compile phases, executes, transfers, waits) there "
       "at exit and on pjrtx._pjrtx.profile_flush(); open it in ui.perfetto.dev"},
      {"PJRTX_DUMP_DIR", "",
       "directory: write the input MLIR and the plan text of every compile there, and the C++ of "
       "each loop that runs on the host"},
      {"PJRTX_F64", "cpu",
       "float64 on a GPU device: cpu (run f64 instructions on MLX's CPU stream) or error "
       "(refuse f64 at compile time, on any device)"},
      {"PJRTX_LAPACK", "scipy",
       "eigh, svd, eig and schur (host kernels on MLX's CPU stream): scipy (call the LAPACK "
       "routines XLA:CPU calls, from SciPy's scipy.linalg.cython_lapack, so results match "
       "XLA:CPU's bit for bit, vector signs and eigenvalue order included) or own (MLX's "
       "linalg and pjrtx's own routines; also what runs when SciPy's table cannot be read); "
       "read per compile"},
      {"PJRTX_BLAS", "auto",
       "Linux: BLAS/LAPACK for MLX's CPU kernels: auto (OpenBLAS from scipy-openblas32 when "
       "installed, else MLX's bundled reference BLAS), openblas (required) or reference; "
       "read before the extension loads; no effect on macOS (Accelerate)"},
      {"PJRTX_BLAS_THREADS", "1",
       "Linux, with OpenBLAS: its threads per BLAS call (0: OpenBLAS's own choice, e.g. "
       "OPENBLAS_NUM_THREADS); 1 because MLX already runs kernels on its own thread and "
       "OpenBLAS's spinning workers cost 5-150x on shared cores"},
      {"PJRTX_COMPILE", "auto",
       "straight-line segments and loop-body blocks through mx::compile: auto (eager for "
       "runs 1-2, so a program run once never waits for compilation; a replayed graph from "
       "run 3; fused kernels from run 65), always (fused from the first run) or never; read "
       "per compile"},
      {"PJRTX_HOST", "all",
       "ops on small computed values (at most 64 elements) that run on the host instead of "
       "as MLX primitives: all (integer, pred and data-movement ops, and f32/f64 arithmetic "
       "with one IEEE answer: + - * / sqrt, compares, converts, max/min, order-free "
       "reductions), int (all but the float arithmetic) or off; read per compile"},
      {"PJRTX_LOOPS", "auto",
       "where while loops (fori_loop, scan, while_loop) run: auto (a loop whose iterations "
       "are latency-bound, at most PJRTX_LOOP_WORK elements written per op and iteration, runs "
       "whole as C++ built by the system compiler, $CXX or c++; bigger loops run on MLX), host "
       "(every loop the host engine takes) or mlx (none); PJRTX_TRACE=1 prints each choice and "
       "its reason; read per compile"},
      {"PJRTX_LOOP_WORK", "",
       "the auto placement's bound: elements a loop may write per op and iteration and still "
       "run on the host (unset: 8192 on MLX's CPU device, 65536 on a GPU)"},
      {"PJRTX_CACHE_DIR", "",
       "where built host loops are kept across processes (unset: $XDG_CACHE_HOME/pjrtx, else "
       "~/.cache/pjrtx)"},
      {"PJRTX_SPIN_US", "50",
       "microseconds a waiting thread polls (yielding its core) before it blocks: the "
       "executor for the next call and for a short run's result (loop predicates included), "
       "block_until_ready for its result (a buffer's first readiness check, PJRT_Event_IsReady, "
       "before jaxlib would sleep), and on MLX's CPU device MLX's CPU stream thread "
       "after each run; 0 blocks at once (less CPU when calls are long or far apart)"},
      {"PJRTX_PRIORITY", "500",
       "JAX backend priority of the plugin (CPU is 0; the highest is the default backend)"},
  };
  return vars;
}

namespace {
// N of the last --xla_force_host_platform_device_count=N in XLA_FLAGS, as
// written there, or "" (JAX users and test suites set it to simulate
// devices, e.g. flax's nnx tests before they import jax).
std::string xla_host_device_count() {
  const char* flags = std::getenv("XLA_FLAGS");
  if (flags == nullptr) return "";
  const std::string f(flags), key = "--xla_force_host_platform_device_count=";
  std::string value;
  for (size_t at = f.find(key); at != std::string::npos; at = f.find(key, at + 1)) {
    if (at != 0 && !std::isspace(static_cast<unsigned char>(f[at - 1]))) continue;
    size_t begin = at + key.size(), end = begin;
    while (end < f.size() && !std::isspace(static_cast<unsigned char>(f[end]))) ++end;
    value = f.substr(begin, end - begin);
  }
  return value;
}
}  // namespace

std::string env_string(const char* name) {
  const auto& vars = env_vars();
  auto it = std::find_if(vars.begin(), vars.end(),
                         [&](const EnvVar& v) { return std::strcmp(v.name, name) == 0; });
  if (it == vars.end())
    throw_error(ErrorCode::kInternal, "pjrtx: ", name, " is not in the env table");
  const char* v = std::getenv(name);
  if (v) return std::string(v);
  if (std::strcmp(name, "PJRTX_DEVICES") == 0) {
    std::string xla = xla_host_device_count();
    if (!xla.empty()) return xla;
  }
  return std::string(it->default_value);
}

int64_t spin_us() {
  static const int64_t us = [] {
    std::string v = env_string("PJRTX_SPIN_US");
    char* end = nullptr;
    long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < 0 || n > 1000000)
      invalid_argument("pjrtx: PJRTX_SPIN_US must be a number of microseconds from 0 to "
                       "1000000, got '", v, "'");
    return static_cast<int64_t>(n);
  }();
  return us;
}

bool env_flag(const char* name) {
  std::string v = env_string(name);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

}  // namespace pjrtx
