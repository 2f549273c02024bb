// Runs host callbacks for the back end (backend/mlx/host_callback.h): MLX's
// CPU stream thread calls in with no GIL; we take it for the call only.
// pjrtx.jax_rules.callbacks._invoke looks the callable up by id, hands it
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

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>

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

// Python < 3.14 ends a thread that takes the GIL once the interpreter
// finalizes (pthread_exit, whose unwind aborts the process when it meets a
// frame that cannot be unwound: "terminate called without an active
// exception"). Checking for finalization before taking the GIL is not
// enough: a callback thread already waiting for the GIL gets it during
// finalization. So an atexit hook (close_callbacks, which runs before
// finalization starts) closes this gate and, with the GIL released, waits
// for the callbacks inside it; later callbacks fail without the GIL.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool closed = false;
  int inside = 0;
};
Gate& gate() {
  static Gate* g = new Gate;  // used by threads that may outlive static destructors
  return *g;
}

class GatePass {
 public:
  explicit GatePass(uint64_t id) {
    std::lock_guard<std::mutex> lock(gate().mu);
    if (gate().closed || !Py_IsInitialized() || !nb::is_alive() || interpreter_finalizing())
      callback_error(id, "called while the Python interpreter shuts down");
    ++gate().inside;
  }
  ~GatePass() {
    std::lock_guard<std::mutex> lock(gate().mu);
    if (--gate().inside == 0) gate().cv.notify_all();
  }
  GatePass(const GatePass&) = delete;
  GatePass& operator=(const GatePass&) = delete;
};

// Registered with atexit when the module loads. Called with the GIL held.
void close_callbacks(double timeout_s) {
  {
    std::lock_guard<std::mutex> lock(gate().mu);
    gate().closed = true;
  }
  nb::gil_scoped_release release;  // the callbacks inside need it to finish
  std::unique_lock<std::mutex> lock(gate().mu);
  gate().cv.wait_for(lock, std::chrono::duration<double>(timeout_s),
                     [] { return gate().inside == 0; });
}

void run_callback(uint64_t id, const std::vector<backend::HostArray>& args,
                  const std::vector<backend::HostArray>& results) {
  GatePass pass(id);
  nb::gil_scoped_acquire gil;
  try {
    nb::list py_args;
    for (const auto& a : args) py_args.append(numpy_arg(a));
    nb::object invoke = nb::module_::import_("pjrtx.jax_rules.callbacks").attr("_invoke");
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
  m.def("_close_callbacks", &close_callbacks, nb::arg("timeout_s") = 30.0,
        "Refuses host callbacks from now on and waits (GIL released) up to timeout_s "
        "for those running; pjrtx registers it with atexit");
  nb::module_::import_("atexit").attr("register")(m.attr("_close_callbacks"));
}

}  // namespace pjrtx::python
