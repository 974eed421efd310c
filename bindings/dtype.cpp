// loom.dtype (one singleton per element type: loom.float32, ...) and loom.device.
#include "bindings/common.h"
#include "ops/record.h"

namespace loom::py {
namespace {

PyObject* g_dtypes[kNumDTypes] = {};  // borrowed: the module's attributes own them
PyTypeObject* g_dtype_type = nullptr;
PyTypeObject* g_device_type = nullptr;

// The module attribute of a dtype: its name, but `bool` is `bool_` here; python/loom/__init__.py
// adds loom.bool (and loom.float, loom.int), keeping builtins unshadowed in the generated stub.
const char* dtype_attr(DType t) { return t == DType::Bool ? "bool_" : dtype_name(t); }

// Python builtins and numpy dtype names as loom dtypes (torch accepts dtype=float etc.).
bool dtype_from_name(const char* s, DType* out) {
  if (!std::strcmp(s, "bool")) s = "bool_";
  for (int i = 0; i < kNumDTypes; ++i)
    if (!std::strcmp(s, dtype_attr(DType(i)))) return *out = DType(i), true;
  static const std::pair<const char*, DType> alias[] = {
      {"float", DType::Float32}, {"double", DType::Float64}, {"half", DType::Float16},
      {"int", DType::Int32},     {"short", DType::Int16},    {"long", DType::Int64}};
  for (auto& [n, t] : alias)
    if (!std::strcmp(s, n)) return *out = t, true;
  return false;
}

}  // namespace

nb::handle dtype_object(DType t) { return g_dtypes[int(t)]; }

bool dtype_from_python(nb::handle h, DType* out, bool convert) {
  PyObject* o = h.ptr();
  if (Py_TYPE(o) == g_dtype_type) return *out = nb::inst_ptr<PyDType>(h)->t, true;
  if (!convert) return false;
  if (o == (PyObject*)&PyFloat_Type) return *out = DType::Float64, true;
  if (o == (PyObject*)&PyLong_Type) return *out = DType::Int64, true;
  if (o == (PyObject*)&PyBool_Type) return *out = DType::Bool, true;
  if (PyUnicode_Check(o)) return dtype_from_name(PyUnicode_AsUTF8(o), out);
  // numpy dtypes and scalar types (np.float32, np.dtype('int64')): by name.
  PyObject* name = nullptr;
  if (PyType_Check(o) && std::strncmp(((PyTypeObject*)o)->tp_name, "numpy.", 6) == 0) {
    name = PyUnicode_FromString(((PyTypeObject*)o)->tp_name + 6);
  } else if (std::strncmp(Py_TYPE(o)->tp_name, "numpy.dtype", 11) == 0) {
    name = PyObject_GetAttrString(o, "name");
  }
  if (!name) return PyErr_Clear(), false;
  const char* s = PyUnicode_AsUTF8(name);
  bool ok = s && dtype_from_name(s, out);
  Py_DECREF(name);
  PyErr_Clear();
  return ok;
}

void init_dtype(nb::module_& m) {
  auto dt =
      nb::class_<PyDType>(m, "dtype", "An element type: loom.float32, loom.int64, ...")
          .def_prop_ro(
              "is_floating_point", [](const PyDType& d) { return is_floating(d.t); },
              "True for float16, bfloat16, float32 and float64.")
          .def_prop_ro(
              "is_signed", [](const PyDType& d) { return !is_unsigned(d.t) && !is_bool(d.t); },
              "True for signed integer and floating types.")
          .def_prop_ro(
              "itemsize", [](const PyDType& d) { return itemsize(d.t); }, "Bytes per element.")
          .def_prop_ro(
              "name", [](const PyDType& d) { return dtype_name(d.t); }, "Name, e.g. 'float32'.")
          .def(
              "__repr__", [](const PyDType& d) { return std::string("loom.") + dtype_name(d.t); },
              "loom.<name>.")
          .def(
              "__reduce__", [](const PyDType& d) { return std::string(dtype_attr(d.t)); },
              "Pickles as the module attribute of the same name.");
  g_dtype_type = (PyTypeObject*)dt.ptr();
  m.def("promote_types", &promote_types, "type1"_a, "type2"_a,
        "The dtype both promote to (torch.promote_types).");
  m.def(
      "result_type", [](const Tensor& a, const Tensor& b) { return result_type(a, b); },
      "tensor1"_a, "tensor2"_a, "The dtype of an op on both (0-d tensors count weakly).");
  m.def(
      "result_type", [](const Tensor& a, Scalar b) { return result_type(a, b); }, "tensor1"_a,
      "tensor2"_a, "The dtype of an op on a tensor and a Python scalar.");
  m.def(
      "result_type", [](Scalar b, const Tensor& a) { return result_type(a, b); }, "tensor1"_a,
      "tensor2"_a, "The dtype of an op on a Python scalar and a tensor.");
  for (int i = 0; i < kNumDTypes; ++i) {
    nb::object o = nb::cast(PyDType{DType(i)});
    m.attr(dtype_attr(DType(i))) = o;
    g_dtypes[i] = o.ptr();
  }
  // torch's aliases (loom.float and loom.int are added by __init__.py).
  m.attr("double") = m.attr("float64");
  m.attr("half") = m.attr("float16");
  m.attr("long") = m.attr("int64");
  m.attr("short") = m.attr("int16");

  auto dev =
      nb::class_<PyDevice>(m, "device", "A device: loom.device('cpu'), loom.device('cuda:0').")
          .def(
              "__init__",
              [](PyDevice* p, const std::string& s) { new (p) PyDevice{Device::parse(s)}; },
              "spec"_a, "Parses 'cpu', 'cuda' or 'cuda:N'.")
          .def(
              "__init__",
              [](PyDevice* p, const std::string& type, int index) {
                new (p) PyDevice{Device::parse(type + ":" + std::to_string(index))};
              },
              "type"_a, "index"_a, "A device from its type ('cuda') and index.")
          .def_prop_ro(
              "type",
              [](const PyDevice& d) { return d.d.kind == DeviceKind::CPU ? "cpu" : "cuda"; },
              "'cpu' or 'cuda'.")
          .def_prop_ro(
              "index",
              [](const PyDevice& d) -> std::optional<int> {
                if (d.d.kind == DeviceKind::CPU) return std::nullopt;
                return d.d.index;
              },
              "The device index (None for the CPU).")
          .def(
              "__eq__", [](const PyDevice& a, const Device& b) { return a.d == b; },
              "other"_a.none(), "Equal to another device or its string ('cpu', 'cuda:0').")
          .def(
              "__eq__", [](const PyDevice&, nb::handle) { return false; }, "other"_a.none(),
              "False for other objects.")
          .def(
              "__hash__", [](const PyDevice& d) { return int(d.d.kind) * 1024 + d.d.index; },
              "Hash of type and index.")
          .def(
              "__str__", [](const PyDevice& d) { return d.d.str(); }, "'cpu' or 'cuda:N'.")
          .def(
              "__repr__",
              [](const PyDevice& d) {
                if (d.d.kind == DeviceKind::CPU) return std::string("device(type='cpu')");
                return "device(type='cuda', index=" + std::to_string(d.d.index) + ")";
              },
              "device(type=..., index=...).");
  g_device_type = (PyTypeObject*)dev.ptr();
}

}  // namespace loom::py

namespace nanobind::detail {

bool type_caster<loom::Device>::from_python(handle src, uint32_t, cleanup_list*) noexcept {
  PyObject* o = src.ptr();
  if (Py_TYPE(o) == loom::py::g_device_type) {
    value = nb::inst_ptr<loom::py::PyDevice>(src)->d;
    return true;
  }
  if (!PyUnicode_Check(o)) return false;
  const char* s = PyUnicode_AsUTF8(o);
  if (!s) return PyErr_Clear(), false;
  try {
    value = loom::Device::parse(s);
  } catch (...) {
    return false;
  }
  return true;
}

handle type_caster<loom::Device>::from_cpp(const loom::Device& d, rv_policy,
                                           cleanup_list*) noexcept {
  return nb::cast(loom::py::PyDevice{d}).release();
}

}  // namespace nanobind::detail
