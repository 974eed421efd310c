#pragma once
// Shared pieces of the Python bindings: type casters (Python scalars -> loom::Scalar,
// loom.dtype <-> loom::DType, str/loom.device <-> loom::Device, dim arguments) and the
// init_xxx functions, one per file.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>

#include "loom.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace loom::py {

// The Python object behind `loom.float32` etc.; one singleton per DType.
struct PyDType {
  DType t;
};
// The Python object behind `loom.device("cpu")`.
struct PyDevice {
  Device d;
};
nb::handle dtype_object(DType t);  // borrowed singleton
bool dtype_from_python(nb::handle h, DType* out, bool convert);

// A `dim` argument: None (all dims), an int, or a sequence of ints.
struct DimArg {
  Dims dims;
  bool none = true;
};

// Python bool / int / float (and numpy scalars when converting) as a loom::Scalar.
bool scalar_from_python(nb::handle h, Scalar* out, bool convert);
// Sizes given as `f(2, 3)` or `f((2, 3))` / `f([2, 3])`.
Dims dims_from_args(const nb::args& args, const char* op);
// A Python index (int, slice, None, Ellipsis or a tuple of them) as loom slices.
std::vector<Slice> parse_index(nb::handle idx);
// Python value (tensor, scalar, nested list, array) as a tensor like `loom.tensor`.
Tensor to_tensor(nb::handle data, std::optional<DType> dtype, std::optional<Device> device);
// Python object for one element of a tensor (bool, int or float by dtype).
nb::object item_object(const Tensor& t);
// t <- v in place (torch's rules: castable to t's dtype, v has t's shape); returns t.
Tensor& assign_result(Tensor& t, const Tensor& v, const char* op);

void init_dtype(nb::module_& m);
void init_tensor(nb::module_& m);
void init_index(nb::module_& m);
void init_index_ops(nb::module_& m);
void init_operators(nb::module_& m);
void init_ops(nb::module_& m);
void init_reduce(nb::module_& m);
void init_creation(nb::module_& m);
void init_interop(nb::module_& m);
void init_runtime(nb::module_& m);
void init_knobs(nb::module_& m);
void init_autograd(nb::module_& m);  // after init_tensor
void init_optim(nb::module_& m);
void init_loss(nb::module_& m);
void init_nn_ops(nb::module_& m);
void init_autocast(nb::module_& m);
void init_cuda(nb::module_& m);
void init_checkpoint(nb::module_& m);

}  // namespace loom::py

namespace nanobind::detail {

template <>
struct type_caster<loom::Scalar> {
  NB_TYPE_CASTER(loom::Scalar, const_name("float | int | bool"))
  bool from_python(handle src, uint32_t flags, cleanup_list*) noexcept {
    return loom::py::scalar_from_python(src, &value, flags & cast_flags::convert);
  }
  static handle from_cpp(const loom::Scalar& s, rv_policy, cleanup_list*) noexcept {
    if (s.kind == loom::Scalar::Kind::Bool) return PyBool_FromLong(long(s.i));
    if (s.kind == loom::Scalar::Kind::Int) return PyLong_FromLongLong(s.i);
    return PyFloat_FromDouble(s.f);
  }
};

template <>
struct type_caster<loom::DType> {
  NB_TYPE_CASTER(loom::DType, const_name("dtype"))
  bool from_python(handle src, uint32_t flags, cleanup_list*) noexcept {
    return loom::py::dtype_from_python(src, &value, flags & cast_flags::convert);
  }
  static handle from_cpp(loom::DType t, rv_policy, cleanup_list*) noexcept {
    return loom::py::dtype_object(t).inc_ref();
  }
};

template <>
struct type_caster<loom::Device> {
  NB_TYPE_CASTER(loom::Device, io_name("device | str", "device"))
  bool from_python(handle src, uint32_t, cleanup_list*) noexcept;
  static handle from_cpp(const loom::Device& d, rv_policy, cleanup_list*) noexcept;
};

template <>
struct type_caster<loom::py::DimArg> {
  NB_TYPE_CASTER(loom::py::DimArg, const_name("int | collections.abc.Sequence[int]"))
  bool from_python(handle src, uint32_t, cleanup_list*) noexcept;
  static handle from_cpp(const loom::py::DimArg&, rv_policy, cleanup_list*) noexcept {
    return none().release();
  }
};

}  // namespace nanobind::detail
