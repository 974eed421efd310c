// Indexing: Python ints, slices (with step), None, Ellipsis and tuples of them become
// loom::Slice lists for Tensor::index. Negative steps (numpy's, not torch's) are applied here
// as views with negative strides. No advanced (tensor) indexing.
#include "bindings/common.h"

namespace loom::py {
namespace {

std::optional<int64_t> slice_part(PyObject* o, const char* what) {
  if (o == Py_None) return std::nullopt;
  Py_ssize_t v = PyNumber_AsSsize_t(o, PyExc_IndexError);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    throw nb::type_error((std::string("slice ") + what + " must be an integer or None").c_str());
  }
  return int64_t(v);
}

bool is_tensor(PyObject* o) { return nb::isinstance<Tensor>(nb::handle(o)); }

Slice one(PyObject* o) {
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) throw nb::index_error("index out of range of int64");
    return Slice::at(v);
  }
  if (PySlice_Check(o)) {
    auto* s = reinterpret_cast<PySliceObject*>(o);
    auto step = slice_part(s->step, "step");
    if (step && *step == 0) throw nb::value_error("slice step cannot be zero");
    if (step && *step < -PY_SSIZE_T_MAX) throw nb::value_error("slice step out of range");
    return Slice::range(slice_part(s->start, "start"), slice_part(s->stop, "stop"),
                        step.value_or(1));
  }
  if (o == Py_None) return Slice::newaxis();
  if (o == Py_Ellipsis) return Slice::ellipsis();
  if (PyBool_Check(o)) throw nb::index_error("indexing with a bool is not supported");
  if (is_tensor(o)) {
    const Tensor& t = nb::cast<const Tensor&>(nb::handle(o));
    LOOM_CHECK(t.dim() == 0 && !is_floating(t.dtype()) && !is_bool(t.dtype()), Index,
               "index: advanced indexing with a tensor (", dtype_name(t.dtype()), " of shape ",
               shape_str(t.shape()), ") is not supported; use ints, slices, None and ...");
    return Slice::at(t.item<int64_t>());
  }
  if (PyIndex_Check(o)) {
    Py_ssize_t v = PyNumber_AsSsize_t(o, PyExc_IndexError);
    if (v == -1 && PyErr_Occurred()) throw nb::python_error();
    return Slice::at(v);
  }
  if (PySequence_Check(o) && !PyUnicode_Check(o))
    throw nb::index_error(
        "advanced indexing with a sequence is not supported; use ints, slices, "
        "None and ...");
  throw nb::type_error((std::string("invalid index of type ") + Py_TYPE(o)->tp_name).c_str());
}

// Dim `d` of r sliced with a negative step (Python's rules for the bounds).
Tensor reverse_slice(const Tensor& r, int d, const Slice& s) {
  Py_ssize_t start = s.start ? Py_ssize_t(*s.start) : PY_SSIZE_T_MAX;
  Py_ssize_t stop = s.stop ? Py_ssize_t(*s.stop) : PY_SSIZE_T_MIN;
  Py_ssize_t len = PySlice_AdjustIndices(Py_ssize_t(r.shape()[d]), &start, &stop, s.step);
  View v = r.view_info();
  if (len > 0) v.offset += int64_t(start) * v.strides[d];
  v.shape[d] = len;
  v.strides[d] *= s.step;
  return Tensor(r.buffer(), v, r.dtype(), r.device());
}

// Tensor::index, plus negative-step slices.
Tensor apply_index(const Tensor& t, std::vector<Slice> idx) {
  std::vector<std::pair<int, Slice>> rev;
  int specified = 0;
  for (auto& s : idx) specified += s.kind == Slice::Kind::Index || s.kind == Slice::Kind::Range;
  int d = 0;
  for (auto& s : idx) {
    if (s.kind == Slice::Kind::Range && s.step < 0) rev.push_back({d, s}), s = Slice::all();
    if (s.kind == Slice::Kind::Range || s.kind == Slice::Kind::NewAxis) ++d;
    if (s.kind == Slice::Kind::Ellipsis) d += std::max(0, t.dim() - specified);
  }
  Tensor r = t.index(idx);
  for (auto& [dim, s] : rev) r = reverse_slice(r, dim, s);
  return r;
}

Tensor getitem(const Tensor& t, nb::handle idx) {
  PyObject* o = idx.ptr();
  if (PyLong_CheckExact(o)) {  // fast path: t[i]
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (!overflow) return t.select(0, v);
  }
  return apply_index(t, parse_index(idx));
}

void setitem(Tensor& t, nb::handle idx, nb::handle value) {
  Tensor region = apply_index(t, parse_index(idx));
  Scalar s;
  if (is_tensor(value.ptr())) {
    region.copy_(nb::cast<const Tensor&>(value));
  } else if (scalar_from_python(value, &s, true)) {
    region.fill_(s);
  } else {
    region.copy_(to_tensor(value, t.dtype(), t.device()));
  }
}

}  // namespace

std::vector<Slice> parse_index(nb::handle idx) {
  std::vector<Slice> out;
  PyObject* o = idx.ptr();
  if (PyTuple_Check(o)) {
    Py_ssize_t n = PyTuple_GET_SIZE(o);
    out.reserve(size_t(n));
    for (Py_ssize_t i = 0; i < n; ++i) out.push_back(one(PyTuple_GET_ITEM(o, i)));
  } else {
    out.push_back(one(o));
  }
  return out;
}

void init_index(nb::module_& m) {
  auto c = nb::borrow<nb::class_<Tensor>>(nb::type<Tensor>());
  c.def("__getitem__", &getitem, "index"_a.none(),
        "A view selected by ints, slices (any nonzero step), None and ... (negative indices "
        "count from the end).")
      .def("__setitem__", &setitem, "index"_a.none(), "value"_a.none(),
           "Writes `value` (a tensor, scalar or nested list, broadcast) into the selected view.");
}

}  // namespace loom::py
