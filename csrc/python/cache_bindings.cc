// Introspection of the executable cache and of serialized plans: compile
// counters (tests prove a cache hit skipped the frontend), the plan text of
// a live executable by its fingerprint (Compiled.as_text on pjrtx, see
// pjrtx/jax_plugin.py), and the plan (de)serializer without its checksummed
// envelope, so tests can feed it damaged bytes directly.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>

#include "compiler/printer.h"
#include "compiler/serialize.h"
#include "compiler/verifier.h"
#include "python/bindings.h"
#include "runtime/client.h"
#include "runtime/compile_cache.h"
#include "runtime/sha256.h"

namespace nb = nanobind;

namespace pjrtx::python {

void bind_cache(nb::module_& m) {
  m.def(
      "compile_stats",
      [] {
        runtime::CompileStats s = runtime::compile_stats();
        nb::dict d;
        d["frontend_runs"] = s.frontend_runs;
        d["cache_hits"] = s.cache_hits;
        d["deserialized"] = s.deserialized;
        d["serialized"] = s.serialized;
        return d;
      },
      "Process-wide compile counters: frontend_runs (programs parsed by the Python "
      "frontend), cache_hits (compiles served by the executable cache), deserialized, "
      "serialized");
  m.def("clear_compile_cache", &runtime::clear_compile_caches,
        "Empties the executable cache of every live client (jax.clear_caches() calls it)");
  m.def(
      "plan_text",
      [](const std::string& fingerprint) -> std::optional<std::string> {
        auto plan = runtime::find_plan(fingerprint);
        if (!plan) return std::nullopt;
        return compiler::print_plan(*plan);
      },
      nb::arg("fingerprint"),
      "The plan text of a live executable with this fingerprint, or None");
  m.def(
      "plan_shardings",
      [](const std::string& fingerprint) -> std::optional<nb::tuple> {
        auto plan = runtime::find_plan(fingerprint);
        if (!plan) return std::nullopt;
        const auto& f = plan->entry_function();
        nb::list args, results;
        for (const auto& s : f.arg_shardings) args.append(nb::bytes(s.data(), s.size()));
        for (const auto& s : f.result_shardings) results.append(nb::bytes(s.data(), s.size()));
        return nb::make_tuple(args, results);
      },
      nb::arg("fingerprint"),
      "(argument shardings, result shardings) of a live executable, each a list of serialized "
      "xla.OpSharding protos (what the PJRT Shardings extension reports), or None. For jaxlibs "
      "older than the extension (PJRT C API < 0.91: jax 0.9.0 and older).");
  m.def(
      "plan_bytes",
      [](const std::string& fingerprint) -> std::optional<nb::bytes> {
        auto plan = runtime::find_plan(fingerprint);
        if (!plan) return std::nullopt;
        std::string b = compiler::serialize_plan(*plan);
        return nb::bytes(b.data(), b.size());
      },
      nb::arg("fingerprint"),
      "compiler::serialize_plan of a live executable's plan (no envelope), or None");
  m.def(
      "serialize_plan",
      [](const compiler::Plan& plan) {
        std::string b = compiler::serialize_plan(plan);
        return nb::bytes(b.data(), b.size());
      },
      nb::arg("plan"), "compiler::serialize_plan: the plan as bytes (no envelope)");
  m.def(
      "deserialize_plan",
      [](nb::bytes data) {
        compiler::Plan plan =
            compiler::deserialize_plan(std::string_view(data.c_str(), data.size()));
        compiler::verify(plan);
        return plan;
      },
      nb::arg("data"),
      "Parses and verifies plan bytes (serialize_plan's format); raises RuntimeError "
      "naming what is wrong for damaged bytes");
  m.def(
      "sha256_hex",
      [](nb::bytes data) { return runtime::sha256_hex(std::string_view(data.c_str(), data.size())); },
      nb::arg("data"), "SHA-256 of the bytes as hex (the runtime's own implementation)");
}

}  // namespace pjrtx::python
