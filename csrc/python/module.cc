// pjrtx._pjrtx: the plan builder for the frontend, introspection for tests
// and `python -m pjrtx doctor`, and (same shared object) the PJRT plugin that
// jaxlib loads through GetPjrtApi.
#include <mutex>
#include <set>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "backend/mlx/host/lapack.h"
#include "backend/mlx/mlx_rules.h"
#include "backend/mlx/constant_pool.h"
#include "backend/mlx/mlx_device.h"
#include "backend/mlx/process_group.h"
#include "backend/mlx/graph_stats.h"
#include "backend/mlx/loops/loop_stats.h"
#include "backend/mlx/registry.h"
#include "compiler/dense_pool.h"
#include "pjrt/pjrt_entry_points.h"
#include "python/bindings.h"
#include "common/env.h"
#include "common/profile.h"
#include "common/trace.h"

#ifndef PJRTX_VERSION
#define PJRTX_VERSION "dev"
#endif

namespace nb = nanobind;

NB_MODULE(_pjrtx, m) {
  using namespace pjrtx;
  m.attr("CONTRACT_VERSION") = python::kContractVersion;
  // PJRTX_PROFILE: start the trace clock at load and write the file at exit
  // even when the process compiles nothing.
  profile_enabled();
  m.attr("__version__") = PJRTX_VERSION;
  m.def("mlx_version", &backend::mlx_version, "MLX version the extension runs with");
  // CMakeLists.txt records the mlx it compiled against (MLX's C++ ABI
  // changes between releases); pjrtx._contract compares the two at load.
  m.attr("MLX_BUILD_VERSION") = PJRTX_MLX_BUILD_VERSION;
  m.def("distributed_available", &backend::distributed_backend_available, nb::arg("name"),
        "Whether MLX's distributed back end `name` (ring, mpi, nccl, jaccl) is available here");
  m.def(
      "device_backend",
      [](const std::string& preference) { return backend::choose_device(preference).backend; },
      nb::arg("preference") = "auto",
      "The MLX back end a client would use for a PJRTX_DEVICE value: Metal, CUDA or CPU");
  m.def(
      "supported_ops", [] { return backend::Registry::get().supported_ops(); },
      "StableHLO ops that have a lowering to MLX");
  m.def(
      "lowering_counts", [] { return backend::Registry::get().lowering_counts(); },
      "(op, times lowered) for every op lowered in this process");
  m.def(
      "loop_stats",
      [] {
        backend::LoopStats s = backend::loop_stats();
        nb::dict d;
        d["counted_runs"] = s.counted_runs;
        d["counted_iterations"] = s.counted_iterations;
        d["folded_iterations"] = s.folded_iterations;
        d["host_steps"] = s.host_steps;
        d["general_runs"] = s.general_runs;
        d["general_iterations"] = s.general_iterations;
        return d;
      },
      "How stablehlo.while loops ran in this process: entries and body runs on the counted "
      "path (trip count known at entry) and on the general path (predicate read per iteration)");
  m.def(
      "memory_stats",
      [] {
        backend::MemoryStats s = backend::memory_stats();
        nb::dict d;
        d["in_use"] = s.in_use;
        d["peak"] = s.peak;
        d["limit"] = s.limit;
        return d;
      },
      "MLX's allocator counters in bytes (process-wide): in_use, peak, limit");
  m.def(
      "constant_pool_stats",
      [] {
        compiler::WeakPoolStats d = compiler::dense_pool_stats();
        compiler::WeakPoolStats f = backend::folded_pool_stats();
        nb::dict out;
        out["dense_entries"] = d.entries;
        out["dense_bytes"] = d.bytes;
        out["dense_hits"] = d.hits;
        out["dense_hit_bytes"] = d.hit_bytes;
        out["folded_entries"] = f.entries;
        out["folded_bytes"] = f.bytes;
        out["folded_hits"] = f.hits;
        out["folded_hit_bytes"] = f.hit_bytes;
        return out;
      },
      "The process-wide pools of large constants (weak: only live ones count): dense_* for "
      "program constants, folded_* for constant subgraphs computed at compile time; *_hits "
      "and *_hit_bytes count the copies sharing avoided");
  m.def(
      "mlx_rule",
      [](const std::string& rule, const std::string& device, const std::string& dtype) {
        namespace mx = mlx::core;
        if (rule != "arg" && rule != "scan")
          throw nb::value_error("mlx_rule: rule must be 'arg' or 'scan'");
        if (device != "cpu" && device != "gpu")
          throw nb::value_error("mlx_rule: device must be 'cpu' or 'gpu'");
        const std::pair<const char*, mx::Dtype> dtypes[] = {
            {"float16", mx::float16}, {"bfloat16", mx::bfloat16}, {"float32", mx::float32},
            {"float64", mx::float64}};
        for (const auto& [name, dt] : dtypes) {
          if (dtype != name) continue;
          mx::Device d(device == "cpu" ? mx::Device::cpu : mx::Device::gpu);
          return rule == "arg" ? backend::mlx_arg_rule_holds(d, dt)
                               : backend::mlx_scan_rule_holds(d, dt);
        }
        throw nb::value_error(
            ("mlx_rule: dtype must be float16, bfloat16, float32 or float64, got '" + dtype +
             "'").c_str());
      },
      nb::arg("rule"), nb::arg("device"), nb::arg("dtype"),
      "Whether MLX on this device gives XLA's answer, so pjrtx uses it directly: 'arg' "
      "(argmax/argmin: first NaN, else lowest index of the extreme) or 'scan' (cummax/cummin "
      "carry NaN on); probed once per (rule, device, dtype) on a thread of its own");
  m.def("_force_mlx_rules", &backend::force_mlx_rules, nb::arg("value").none(),
        "Tests: make every mlx_rule answer `value` (None: probe again); affects programs "
        "lowered afterwards");
  m.def("reset_peak_memory", &backend::reset_peak_memory,
        "Restarts MLX's peak-memory counter at 0 (not at the bytes in use)");
  m.def(
      "count_primitives", [](bool on) { backend::set_count_primitives(on); }, nb::arg("on"),
      "Count the MLX primitives each evaluation runs (on by itself under PJRTX_TRACE=1)");
  m.def(
      "fusion_stats",
      [] {
        backend::CompileStats s = backend::compile_stats();
        nb::dict d;
        d["replay_traces"] = s.replay_traces;
        d["fused_traces"] = s.fused_traces;
        d["failed_traces"] = s.failed_traces;
        return d;
      },
      "mx::compile traces so far (process-wide): replay (fusion off), fused, failed");
  m.def("primitives_evaluated", &backend::primitives_evaluated,
        "MLX primitives evaluated by runs in this process while counting was on");
  m.def(
      "primitive_histogram",
      [](bool reset) {
        nb::dict d;
        for (const auto& [name, count] : backend::primitive_histogram()) d[name.c_str()] = count;
        if (reset) backend::reset_primitive_histogram();
        return d;
      },
      nb::arg("reset") = false,
      "primitives_evaluated() by MLX primitive name (Add, Compiled, Matmul, ...); reset=True "
      "starts it again at zero");
  m.def(
      "lapack_missing", [] { return backend::lapack::functions().missing; },
      "Why eigh/svd/eig/schur do not call the LAPACK routines XLA:CPU calls ('' when they "
      "do): PJRTX_LAPACK=own, or SciPy's table could not be read (resolves it on first use)");
  m.def("trace_enabled", &trace_enabled, "Whether PJRTX_TRACE is on (read once)");
  m.def(
      "trace_line", [](const std::string& line) { trace(line, 0, 0); }, nb::arg("line"),
      "Writes one PJRTX_TRACE line (the frontend's partitioning choice)");
  m.def("profile_enabled", &profile_enabled,
        "Whether PJRTX_PROFILE names a trace file (read once)");
  m.def("profile_flush", &profile_flush,
        "Writes the PJRTX_PROFILE trace with every event so far (also done at exit); returns "
        "its path, or '' when profiling is off");
  m.def("profile_now_us", &profile_now_us,
        "Microseconds on the PJRTX_PROFILE trace's clock");
  m.def(
      "profile_event",
      [](const std::string& cat, const std::string& name, double start_us, double dur_us) {
        // The category must outlive the trace: keep the few Python ones.
        static std::mutex mu;
        static std::set<std::string> cats;
        const char* c;
        {
          std::lock_guard<std::mutex> lock(mu);
          c = cats.insert(cat).first->c_str();
        }
        profile_event(c, name, start_us, dur_us);
      },
      nb::arg("cat"), nb::arg("name"), nb::arg("start_us"), nb::arg("dur_us"),
      "Records one complete event on the calling thread in the PJRTX_PROFILE trace");
  m.def(
      "env_vars",
      [] {
        std::vector<std::tuple<std::string, std::string, std::string>> out;
        for (const auto& v : env_vars())
          out.emplace_back(v.name, v.default_value, v.description);
        return out;
      },
      "Every PJRTX_* variable: (name, default, description)");
  m.def(
      "env_value", [](const std::string& name) { return env_string(name.c_str()); },
      nb::arg("name"), "A PJRTX_* variable's value as pjrtx reads it (set, derived, or default)");
  m.def("set_stablehlo_version", &pjrt::set_stablehlo_current_version, nb::arg("major"),
        nb::arg("minor"), nb::arg("patch"),
        "Sets the plugin attribute stablehlo_current_version (call before the client exists)");
  python::bind_abi(m);
  python::bind_plan(m);
  python::bind_cache(m);
  python::install_frontend_hook(m);
  python::install_callback_hook(m);
  python::install_lapack_hook(m);
}
