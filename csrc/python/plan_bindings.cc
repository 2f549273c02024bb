// PlanBuilder and Plan for the Python frontend. Types cross as
// (dtype, shape) tuples; attributes as bool/int/float/str, lists of those, or
// Dense objects (bytes, not Python lists, for large constants).
#include <cstdint>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>

#include "compiler/builder.h"
#include "common/error.h"
#include "compiler/printer.h"
#include "compiler/dense_pool.h"
#include "python/bindings.h"

namespace nb = nanobind;

namespace pjrtx::python {

namespace {

using compiler::AttrValue;
using compiler::DenseData;
using compiler::TensorType;

struct Dense {
  std::shared_ptr<const DenseData> data;
};

using PyType = std::pair<std::string, std::vector<int64_t>>;

TensorType to_type(const PyType& t) {
  TensorType out{compiler::parse_dtype(t.first), t.second};
  if (out.dtype == compiler::DType::kInvalid)
    invalid_argument("pjrtx: unsupported element type ", t.first);
  return out;
}

std::vector<TensorType> to_types(const std::vector<PyType>& ts) {
  std::vector<TensorType> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(to_type(t));
  return out;
}

AttrValue to_attr(const std::string& key, nb::handle v) {
  if (v.is_none()) return std::monostate();
  if (nb::isinstance<nb::bool_>(v)) return nb::cast<bool>(v);
  if (nb::isinstance<nb::int_>(v)) return nb::cast<int64_t>(v);
  if (nb::isinstance<nb::float_>(v)) return nb::cast<double>(v);
  if (nb::isinstance<nb::str>(v)) return nb::cast<std::string>(v);
  if (nb::isinstance<Dense>(v)) return nb::cast<Dense&>(v).data;
  if (nb::isinstance<nb::list>(v) || nb::isinstance<nb::tuple>(v)) {
    nb::sequence seq = nb::borrow<nb::sequence>(v);
    size_t n = nb::len(seq);
    if (n == 0) return std::vector<int64_t>{};
    nb::handle first = seq[0];
    if (nb::isinstance<nb::int_>(first) || nb::isinstance<nb::bool_>(first)) {
      std::vector<int64_t> out;
      for (nb::handle x : seq) out.push_back(nb::cast<int64_t>(x));
      return out;
    }
    if (nb::isinstance<nb::float_>(first)) {
      std::vector<double> out;
      for (nb::handle x : seq) out.push_back(nb::cast<double>(x));
      return out;
    }
    if (nb::isinstance<nb::str>(first)) {
      std::vector<std::string> out;
      for (nb::handle x : seq) out.push_back(nb::cast<std::string>(x));
      return out;
    }
  }
  invalid_argument("pjrtx: attribute '", key, "' has an unsupported Python value: ",
                   nb::cast<std::string>(nb::repr(v)));
}

compiler::PlanBuilder::Attrs to_attrs(const nb::dict& d) {
  compiler::PlanBuilder::Attrs out;
  for (auto [k, v] : d) {
    std::string key = nb::cast<std::string>(k);
    out.emplace(key, to_attr(key, v));
  }
  return out;
}

}  // namespace

void bind_plan(nb::module_& m) {
  nb::class_<Dense>(m, "Dense", "Dense element data for a constant or attribute")
      .def(
          "__init__",
          [](Dense* self, const std::string& dtype, const std::vector<int64_t>& shape,
             nb::handle data, bool splat) {
            // Any C-contiguous buffer (bytes, or the frontend's NumPy view of
            // the MLIR attribute): read in place, so a large weight is not
            // copied into a Python bytes object first.
            Py_buffer view;
            if (PyObject_GetBuffer(data.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) {
              PyErr_Clear();
              invalid_argument("pjrtx: dense data must be bytes or a contiguous buffer");
            }
            struct Release {
              Py_buffer* v;
              ~Release() { PyBuffer_Release(v); }
            } release{&view};
            compiler::TensorType type = to_type({dtype, shape});
            const auto* p = static_cast<const uint8_t*>(view.buf);
            const size_t n = static_cast<size_t>(view.len);
            int64_t want = splat ? compiler::dtype_size(type.dtype) : type.byte_size();
            if (static_cast<int64_t>(n) != want)
              invalid_argument("pjrtx: dense ", type.str(), splat ? " splat" : "", " needs ",
                               want, " bytes, got ", n);
            // Equal large constants (the same weight in two programs) share one
            // copy for as long as either lives; a hit copies nothing.
            new (self) Dense{compiler::intern_dense_bytes(type, splat, p, n)};
          },
          nb::arg("dtype"), nb::arg("shape"), nb::arg("data"), nb::arg("splat") = false);

  nb::class_<compiler::Plan>(m, "Plan", "A verified executable plan")
      .def_ro("name", &compiler::Plan::name)
      .def_prop_ro("num_instructions", &compiler::Plan::num_instructions)
      .def_prop_ro("donated_params",
                   [](const compiler::Plan& p) {
                     std::vector<int64_t> out;
                     const auto& d = p.entry_function().donors;
                     for (size_t i = 0; i < d.size(); ++i)
                       if (d[i]) out.push_back(static_cast<int64_t>(i));
                     return out;
                   })
      .def("text", [](const compiler::Plan& p) { return compiler::print_plan(p); })
      .def(
          "set_entry_shardings",
          [](compiler::Plan& p, const std::vector<nb::bytes>& args,
             const std::vector<nb::bytes>& results) {
            compiler::Function& f = p.functions.at(static_cast<size_t>(p.entry));
            if (args.size() != f.body.params.size() || results.size() != f.result_types.size())
              invalid_argument("pjrtx: plan: @", f.name, " has ", f.body.params.size(),
                               " arguments and ", f.result_types.size(),
                               " results; got shardings for ", args.size(), " and ",
                               results.size());
            auto str = [](const nb::bytes& b) { return std::string(b.c_str(), b.size()); };
            f.arg_shardings.clear();
            f.result_shardings.clear();
            for (const auto& b : args) f.arg_shardings.push_back(str(b));
            for (const auto& b : results) f.result_shardings.push_back(str(b));
          },
          nb::arg("args"), nb::arg("results"),
          "Serialized xla.OpSharding per entry argument and result (multi-device programs)");

  nb::class_<compiler::PlanBuilder>(m, "PlanBuilder")
      .def(nb::init<>())
      .def("begin_function",
           [](compiler::PlanBuilder& b, const std::string& name, bool is_public,
              const std::vector<PyType>& args, const std::vector<PyType>& results) {
             return b.begin_function(name, is_public, to_types(args), to_types(results));
           })
      .def("set_memory_kinds", &compiler::PlanBuilder::set_memory_kinds, nb::arg("args"),
           nb::arg("results"))
      .def("end_function", &compiler::PlanBuilder::end_function)
      .def("set_donors", &compiler::PlanBuilder::set_donors, nb::arg("params"))
      .def(
          "add_op",
          [](compiler::PlanBuilder& b, const std::string& name,
             const std::vector<compiler::ValueId>& operands, const std::vector<PyType>& results,
             const nb::dict& attrs, const std::string& loc, int num_regions) {
            return b.add_op(name, operands, to_types(results), to_attrs(attrs), loc, num_regions);
          },
          nb::arg("name"), nb::arg("operands"), nb::arg("results"), nb::arg("attrs"),
          nb::arg("loc") = "", nb::arg("num_regions") = 0)
      .def("begin_region",
           [](compiler::PlanBuilder& b, const std::vector<PyType>& args) {
             return b.begin_region(to_types(args));
           })
      .def("end_region", &compiler::PlanBuilder::end_region)
      .def(
          "finish",
          [](compiler::PlanBuilder& b, const std::string& entry, const std::string& name) {
            compiler::Plan p = b.finish(entry);
            p.name = name;
            return p;
          },
          nb::arg("entry") = "main", nb::arg("name") = "");
}

}  // namespace pjrtx::python
