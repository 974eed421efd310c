// Python values -> loom: scalars, dim and size arguments, and `loom.tensor(data)` (nested
// lists, scalars, tensors, numpy arrays and anything with the buffer protocol or DLPack).
#include <nanobind/ndarray.h>

#include "bindings/common.h"
#include "bindings/dlpack_types.h"

namespace loom::py {
namespace {

bool is_numpy_scalar(PyObject* o) {
  const char* tn = Py_TYPE(o)->tp_name;
  return std::strncmp(tn, "numpy.", 6) == 0 && std::strcmp(tn, "numpy.ndarray") != 0;
}

bool int_from_python(PyObject* o, int64_t* out) {
  if (PyBool_Check(o)) return false;
  if (!PyLong_Check(o) && !PyIndex_Check(o)) return false;
  Py_ssize_t v = PyNumber_AsSsize_t(o, PyExc_OverflowError);
  if (v == -1 && PyErr_Occurred()) return PyErr_Clear(), false;
  return *out = int64_t(v), true;
}

bool dims_from_sequence(PyObject* o, Dims* out) {
  PyObject* seq = PySequence_Fast(o, "");
  if (!seq) return PyErr_Clear(), false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  out->resize(size_t(n));
  bool ok = true;
  for (Py_ssize_t i = 0; i < n && ok; ++i)
    ok = int_from_python(PySequence_Fast_GET_ITEM(seq, i), &(*out)[size_t(i)]);
  Py_DECREF(seq);
  return ok;
}

// ---- nested lists ------------------------------------------------------------------------
struct ListParse {
  Shape shape;
  bool leaf_seen = false;
  int category = 0;
  bool u64 = false;  // an integer past int64's range: the tensor is uint64
  std::vector<double> f;
  std::vector<int64_t> i;
};

void walk(nb::handle h, size_t depth, ListParse& p) {
  PyObject* o = h.ptr();
  bool tensor = nb::isinstance<Tensor>(h);
  if (tensor && nb::cast<const Tensor&>(h).dim() == 0) {
    walk(item_object(nb::cast<const Tensor&>(h)), depth, p);
    return;
  }
  bool seq = tensor || PyList_Check(o) || PyTuple_Check(o) ||
             (PySequence_Check(o) && !PyUnicode_Check(o) && !PyBytes_Check(o));
  if (seq) {
    Py_ssize_t n = PyObject_Length(o);
    if (n < 0) throw nb::python_error();
    if (depth == p.shape.size() && !p.leaf_seen) {
      p.shape.push_back(n);
    } else if (depth >= p.shape.size() || p.shape[depth] != n) {
      throw nb::value_error(("tensor: expected a sequence of length " +
                             (depth < p.shape.size() ? std::to_string(p.shape[depth]) : "?") +
                             " at dim " + std::to_string(depth) + " (got " + std::to_string(n) +
                             "): nested lists must be rectangular")
                                .c_str());
    }
    nb::object obj = nb::borrow(h);
    for (Py_ssize_t k = 0; k < n; ++k) walk(obj[nb::int_(k)], depth + 1, p);
    return;
  }
  Scalar s;
  if (!scalar_from_python(h, &s, true))
    throw nb::type_error((std::string("tensor: can't convert an element of type ") +
                          Py_TYPE(o)->tp_name + " to a number")
                             .c_str());
  if (depth != p.shape.size())
    throw nb::value_error(("tensor: a number at dim " + std::to_string(depth) +
                           " where a sequence was expected: nested lists must be rectangular")
                              .c_str());
  p.leaf_seen = true;
  p.category = std::max(p.category, s.category());
  p.u64 |= s.u64;
  p.f.push_back(s.f);
  p.i.push_back(s.i);
}

Tensor from_list(nb::handle data, std::optional<DType> dtype, Device dev) {
  ListParse p;
  walk(data, 0, p);
  if (!p.leaf_seen) return empty(p.shape, {dtype.value_or(kDefaultFloat), dev}).zero_();
  Tensor t;
  if (p.category == 2) {
    t = tensor(p.f, p.shape, Options(DType::Float64, dev)).to(dtype.value_or(kDefaultFloat));
  } else if (p.category == 1 && p.u64) {  // numpy's choice too; a negative value then wraps
    std::vector<uint64_t> u(p.i.begin(), p.i.end());
    t = tensor(u, p.shape, Options(DType::UInt64, dev)).to(dtype.value_or(DType::UInt64));
  } else if (p.category == 1) {
    t = tensor(p.i, p.shape, Options(DType::Int64, dev)).to(dtype.value_or(DType::Int64));
  } else {
    std::vector<bool> b(p.i.begin(), p.i.end());
    t = tensor(b, p.shape, Options(DType::Bool, dev)).to(dtype.value_or(DType::Bool));
  }
  return t;
}

// ---- arrays (copied) ---------------------------------------------------------------------
void gather(char* dst, const char* src, const nb::ndarray<nb::ro>& a, size_t d, size_t isz,
            size_t& pos) {
  if (d == a.ndim()) {
    std::memcpy(dst + pos, src, isz);
    pos += isz;
    return;
  }
  for (size_t k = 0; k < a.shape(d); ++k)
    gather(dst, src + int64_t(k) * a.stride(d) * int64_t(isz), a, d + 1, isz, pos);
}

Tensor from_array(nb::handle data, std::optional<DType> dtype, Device dev) {
  nb::ndarray<nb::ro> a;
  if (!nb::try_cast(data, a, false))
    throw nb::type_error(
        (std::string("tensor: can't read an array from ") + Py_TYPE(data.ptr())->tp_name).c_str());
  DType dt;
  if (!dtype_from_dlpack(a.dtype(), &dt))
    throw nb::type_error(
        ("tensor: unsupported element type " + dlpack_dtype_str(a.dtype())).c_str());
  LOOM_CHECK(a.device_type() == nb::device::cpu::value, Value,
             "tensor: only CPU arrays can be copied (use loom.from_dlpack)");
  Shape shape(a.ndim());
  for (size_t d = 0; d < a.ndim(); ++d) shape[d] = int64_t(a.shape(d));
  size_t isz = itemsize(dt);
  bool contig = true;
  int64_t want = 1;
  for (size_t d = a.ndim(); d-- > 0;) {
    if (a.shape(d) != 1 && a.stride(d) != want) contig = false;
    want *= int64_t(a.shape(d));
  }
  Tensor t;
  if (contig || a.size() == 0) {
    t = from_blob(a.data(), shape, dt, dev);
  } else {
    std::vector<char> buf(a.size() * isz);
    size_t pos = 0;
    gather(buf.data(), static_cast<const char*>(a.data()), a, 0, isz, pos);
    t = from_blob(buf.data(), shape, dt, dev);
  }
  return dtype ? t.to(*dtype) : t;
}

bool is_array_like(PyObject* o) {
  return PyObject_CheckBuffer(o) || PyObject_HasAttrString(o, "__dlpack__") ||
         PyObject_HasAttrString(o, "__array_interface__");
}

}  // namespace

bool scalar_from_python(nb::handle h, Scalar* out, bool convert) {
  PyObject* o = h.ptr();
  if (PyFloat_Check(o)) return *out = Scalar(PyFloat_AS_DOUBLE(o)), true;
  if (PyBool_Check(o)) return *out = Scalar(o == Py_True), true;
  if (PyLong_Check(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow > 0) {  // past int64: a uint64 where it fits (its dtype's values)
      unsigned long long u = PyLong_AsUnsignedLongLong(o);
      if (PyErr_Occurred()) return PyErr_Clear(), false;
      return *out = Scalar(uint64_t(u)), true;
    }
    if (overflow || (v == -1 && PyErr_Occurred())) return PyErr_Clear(), false;
    return *out = Scalar(int64_t(v)), true;
  }
  if (!convert || !is_numpy_scalar(o)) return false;
  const char* tn = Py_TYPE(o)->tp_name;
  if (!std::strcmp(tn, "numpy.bool") || !std::strcmp(tn, "numpy.bool_")) {
    int b = PyObject_IsTrue(o);
    if (b < 0) return PyErr_Clear(), false;
    return *out = Scalar(b != 0), true;
  }
  int64_t i;
  if (!std::strcmp(tn, "numpy.uint64")) {  // past int64 too
    unsigned long long u = PyLong_AsUnsignedLongLong(nb::steal(PyNumber_Index(o)).ptr());
    if (PyErr_Occurred()) return PyErr_Clear(), false;
    return *out = Scalar(uint64_t(u)), true;
  }
  if (PyIndex_Check(o)) return int_from_python(o, &i) ? (*out = Scalar(i), true) : false;
  double d = PyFloat_AsDouble(o);
  if (d == -1 && PyErr_Occurred()) return PyErr_Clear(), false;
  return *out = Scalar(d), true;
}

Dims dims_from_args(const nb::args& args, const char* op) {
  Dims out;
  if (args.size() == 1 && !PyLong_Check(args[0].ptr()) && !PyIndex_Check(args[0].ptr())) {
    if (dims_from_sequence(args[0].ptr(), &out)) return out;
  } else {
    out.resize(args.size());
    bool ok = true;
    for (size_t k = 0; k < args.size() && ok; ++k) ok = int_from_python(args[k].ptr(), &out[k]);
    if (ok) return out;
  }
  throw nb::type_error(
      (std::string(op) + ": sizes must be ints, given as f(2, 3) or f((2, 3))").c_str());
}

Tensor to_tensor(nb::handle data, std::optional<DType> dtype, std::optional<Device> device) {
  Device dev = device.value_or(kCPU);
  if (nb::isinstance<Tensor>(data)) {
    const Tensor& t = nb::cast<const Tensor&>(data);
    Tensor r = t.to(dev);
    if (dtype) r = r.to(*dtype);
    return r.same_buffer(t) ? r.clone() : r;
  }
  Scalar s;
  if (scalar_from_python(data, &s, true))
    return full({}, s, {dtype.value_or(s.default_dtype()), dev});
  if (is_array_like(data.ptr()) && !PyBytes_Check(data.ptr())) return from_array(data, dtype, dev);
  return from_list(data, dtype, dev);
}

}  // namespace loom::py

namespace nanobind::detail {

bool type_caster<loom::py::DimArg>::from_python(handle src, uint32_t, cleanup_list*) noexcept {
  PyObject* o = src.ptr();
  value = loom::py::DimArg{};
  if (o == Py_None) return true;
  value.none = false;
  int64_t d;
  if (loom::py::int_from_python(o, &d)) return value.dims = {d}, true;
  if (PyUnicode_Check(o) || !PySequence_Check(o)) return false;
  return loom::py::dims_from_sequence(o, &value.dims);
}

}  // namespace nanobind::detail
