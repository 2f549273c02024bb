// Connects the runtime's compile step to the Python frontend
// (pjrtx.frontend.build_plan), which parses StableHLO with jaxlib's own MLIR
// bindings. Compile arrives on a jaxlib worker thread with the GIL released,
// so the hook takes the GIL for the parse only.
#include <nanobind/stl/string.h>

#include "common/error.h"
#include "python/bindings.h"
#include "runtime/client.h"

namespace nb = nanobind;

namespace pjrtx::python {

namespace {

compiler::Plan run_frontend(std::string_view code, std::string_view format,
                            const std::vector<bool>& open_params, std::string* mlir_text) {
  if (!Py_IsInitialized())
    failed_precondition("pjrtx: compile after the Python interpreter shut down");
  nb::gil_scoped_acquire gil;
  try {
    nb::object build = nb::module_::import_("pjrtx.frontend").attr("build_plan");
    nb::list open;
    for (bool b : open_params) open.append(nb::bool_(b));
    nb::tuple r = nb::cast<nb::tuple>(build(nb::bytes(code.data(), code.size()),
                                            nb::str(format.data(), format.size()),
                                            mlir_text != nullptr, nb::tuple(open)));
    compiler::Plan& plan = nb::cast<compiler::Plan&>(r[0]);
    if (mlir_text != nullptr && !r[1].is_none()) *mlir_text = nb::cast<std::string>(r[1]);
    return std::move(plan);
  } catch (nb::python_error& e) {
    // Keep the frontend's message (it names the op and location); the
    // Python exception itself stays with this thread.
    std::string msg = nb::cast<std::string>(nb::str(e.value()));
    if (msg.rfind("pjrtx", 0) != 0) {
      std::string type = nb::cast<std::string>(nb::handle(e.type()).attr("__name__"));
      msg = "pjrtx frontend: " + type + ": " + msg;
    }
    invalid_argument(msg);
  }
}

}  // namespace

void install_frontend_hook(nb::module_&) { runtime::set_frontend(run_frontend); }

}  // namespace pjrtx::python
