// Resolves the LAPACK table of backend/mlx/host/lapack.h from SciPy, as
// jaxlib resolves XLA:CPU's: the function pointers in the capsules of
// scipy.linalg.cython_lapack.__pyx_capi__. Runs once, at the first compile
// of a program that needs LAPACK (on a jaxlib thread with the GIL released,
// so it takes the GIL).
#include <string>
#include <type_traits>

#include "backend/mlx/host/lapack.h"
#include "python/bindings.h"

namespace nb = nanobind;

namespace pjrtx::python {

namespace {

namespace lapack = backend::lapack;

lapack::Functions resolve_from_scipy() {
  lapack::Functions f;
  if (!Py_IsInitialized()) {
    f.missing = "the Python interpreter is not running";
    return f;
  }
  nb::gil_scoped_acquire gil;
  try {
    nb::dict capi = nb::cast<nb::dict>(
        nb::module_::import_("scipy.linalg.cython_lapack").attr("__pyx_capi__"));
    auto get = [&](const char* name) -> void* {
      if (!capi.contains(name)) return nullptr;
      nb::object cap = capi[name];
      PyObject* p = cap.ptr();
      void* fn = PyCapsule_IsValid(p, PyCapsule_GetName(p))
                     ? PyCapsule_GetPointer(p, PyCapsule_GetName(p)) : nullptr;
      if (fn == nullptr) PyErr_Clear();
      return fn;
    };
    std::string lacks;
    auto set = [&](auto*& slot, const char* name) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(get(name));
      if (slot == nullptr) lacks += std::string(lacks.empty() ? "" : ", ") + name;
    };
    set(f.sgees, "sgees");
    set(f.dgees, "dgees");
    set(f.cgees, "cgees");
    set(f.zgees, "zgees");
    set(f.ssyevd, "ssyevd");
    set(f.dsyevd, "dsyevd");
    set(f.cheevd, "cheevd");
    set(f.zheevd, "zheevd");
    set(f.sgesdd, "sgesdd");
    set(f.dgesdd, "dgesdd");
    set(f.cgesdd, "cgesdd");
    set(f.zgesdd, "zgesdd");
    set(f.sgeev, "sgeev");
    set(f.dgeev, "dgeev");
    set(f.cgeev, "cgeev");
    set(f.zgeev, "zgeev");
    if (!lacks.empty()) {
      f = lapack::Functions{};
      f.missing = "scipy.linalg.cython_lapack lacks " + lacks;
    }
  } catch (nb::python_error& e) {
    f = lapack::Functions{};
    f.missing = "scipy.linalg.cython_lapack: " + nb::cast<std::string>(nb::str(e.value()));
  }
  return f;
}

}  // namespace

void install_lapack_hook(nb::module_&) { lapack::set_resolver(resolve_from_scipy); }

}  // namespace pjrtx::python
