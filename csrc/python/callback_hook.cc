// Runs host callbacks for the back end (backend/mlx/host_callback.h): MLX's
// CPU stream thread calls in with no GIL; we take it for the call only.
// pjrtx.lowerings.callbacks._invoke looks the callable up by id, hands it
// NumPy arrays and returns its results checked against the declared types,
// as C-contiguous arrays whose bytes we copy into the outputs.
//
// Deadlock freedom: the GIL is the only lock taken here, and the threads
// that hold it never wait for this run while holding it (jaxlib releases the
// GIL while it compiles, executes or waits for a buffer; the compile's
// frontend step holds it but waits for nothing of ours).
#include <cstdint>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>

#include "backend/mlx/host_callback.h"
#include "common/error.h"
#include "python/bindings.h"

namespace nb = nanobind;

namespace pjrtx::python {

namespace {

[[noreturn]] void callback_error(uint64_t id, const std::string& msg) {
  throw Error(ErrorCode::kInternal, "[pjrtx_callback " + std::to_string(id) + "] " + msg);
}

nb::object numpy_arg(const backend::HostArray& a) {
  // A fresh bytearray: the callable may keep its argument (io_callback
  // appending to a list) long after MLX reuses this memory.
  PyObject* buf = PyByteArray_FromStringAndSize(static_cast<const char*>(a.data),
                                                static_cast<Py_ssize_t>(a.nbytes));
  if (buf == nullptr) throw nb::python_error();
  nb::list shape;
  for (int64_t d : a.type.shape) shape.append(d);
  return nb::make_tuple(nb::steal(buf), std::string(compiler::dtype_name(a.type.dtype)),
                        nb::tuple(shape));
}

void copy_result(uint64_t id, size_t i, nb::handle value, const backend::HostArray& out) {
  Py_buffer view;
  if (PyObject_GetBuffer(value.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) throw nb::python_error();
  int64_t len = static_cast<int64_t>(view.len);
  if (len == out.nbytes && len > 0) std::memcpy(out.data, view.buf, static_cast<size_t>(len));
  PyBuffer_Release(&view);
  if (len != out.nbytes)
    callback_error(id, "result " + std::to_string(i) + " has " + std::to_string(len) +
                           " bytes, " + out.type.str() + " needs " +
                           std::to_string(out.nbytes));
}

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

void run_callback(uint64_t id, const std::vector<backend::HostArray>& args,
                  const std::vector<backend::HostArray>& results) {
  // Taking the GIL while the interpreter finalizes ends this thread (Python
  // unwinds it with pthread_exit, and the unwind aborts the process when it
  // meets a frame that cannot be unwound): a run still calling back at exit
  // fails instead.
  if (!Py_IsInitialized() || !nb::is_alive() || interpreter_finalizing())
    callback_error(id, "called after the Python interpreter shut down");
  nb::gil_scoped_acquire gil;
  try {
    nb::list py_args;
    for (const auto& a : args) py_args.append(numpy_arg(a));
    nb::object invoke = nb::module_::import_("pjrtx.lowerings.callbacks").attr("_invoke");
    nb::object outs = invoke(id, py_args, results.size());
    for (size_t i = 0; i < results.size(); ++i) copy_result(id, i, outs[i], results[i]);
  } catch (nb::python_error& e) {
    // _invoke raises CallbackError with the callback's name and the
    // original exception's traceback; anything else gets its type named.
    std::string msg = nb::cast<std::string>(nb::str(e.value()));
    std::string type = nb::cast<std::string>(nb::handle(e.type()).attr("__name__"));
    callback_error(id, type == "CallbackError" ? msg : type + ": " + msg);
  }
}

}  // namespace

void install_callback_hook(nb::module_& m) {
  backend::set_callback_runner(run_callback);
  m.def("_callback_in_use", &backend::callback_in_use, nb::arg("id"),
        "Whether a lowered program still holds host callback `id`");
  m.def("_take_released_callbacks", &backend::take_released_callbacks,
        "Host callback ids no program holds any more (since the last call)");
}

}  // namespace pjrtx::python
