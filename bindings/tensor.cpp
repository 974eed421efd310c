// loom.Tensor: attributes, views and movement, conversions and the Python protocols
// (len, iter, bool/int/float, repr). Operators are in operators.cpp, indexing in index.cpp.
#include "bindings/common.h"

namespace loom::py {
namespace {

using IntTuple = nb::typed<nb::tuple, int, nb::ellipsis>;

template <typename V>
IntTuple to_tuple(const V& v) {
  PyObject* t = PyTuple_New(Py_ssize_t(v.size()));
  for (size_t i = 0; i < v.size(); ++i)
    PyTuple_SET_ITEM(t, Py_ssize_t(i), PyLong_FromLongLong(v[i]));
  return nb::steal<IntTuple>(t);
}

template <typename T>
nb::object nested(const std::vector<T>& v, const Shape& s, size_t d, int64_t& pos) {
  if (d == s.size()) {
    T x = v[size_t(pos++)];
    return nb::cast(x);
  }
  nb::list l;
  for (int64_t i = 0; i < s[d]; ++i) l.append(nested(v, s, d + 1, pos));
  return l;
}

nb::object tolist(const Tensor& t) {
  int64_t pos = 0;
  if (is_bool(t.dtype())) return nested(t.to_vector<bool>(), t.shape(), 0, pos);
  if (is_floating(t.dtype())) return nested(t.to_vector<double>(), t.shape(), 0, pos);
  if (t.dtype() == DType::UInt64) return nested(t.to_vector<uint64_t>(), t.shape(), 0, pos);
  return nested(t.to_vector<int64_t>(), t.shape(), 0, pos);
}

std::vector<Tensor> split_sizes(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim) {
  int d = normalize_dim("split", dim, t.dim());
  int64_t total = 0;
  for (auto s : sizes) total += s;
  LOOM_CHECK(total == t.shape()[d], Value, "split: split sizes sum to ", total, " but dim ", d,
             " of shape ", shape_str(t.shape()), " has size ", t.shape()[d]);
  std::vector<Tensor> out;
  int64_t off = 0;
  for (auto s : sizes) out.push_back(t.narrow(d, off, s)), off += s;
  return out;
}

Tensor to_impl(const Tensor& t, std::optional<Device> dev, std::optional<DType> dt, bool copy) {
  Tensor r = t;
  if (dev) r = r.to(*dev);
  if (dt) r = r.to(*dt);
  if (copy && r.same_buffer(t)) r = r.clone();
  return r;
}

Tensor mT(const Tensor& t) {
  LOOM_CHECK(t.dim() >= 2, Value, "mT: needs a tensor of at least 2 dims, got shape ",
             shape_str(t.shape()));
  return t.transpose(-2, -1);
}

// A view with explicit sizes, strides (may be negative) and offset, checked against the buffer.
Tensor as_strided(const Tensor& t, const Dims& size, const Dims& stride,
                  std::optional<int64_t> off) {
  LOOM_CHECK(size.size() == stride.size(), Value, "as_strided: ", size.size(), " sizes but ",
             stride.size(), " strides");
  check_sizes("as_strided", size);
  int64_t o = off.value_or(t.offset()), lo = o, hi = o;
  bool empty = numel(size) == 0;
  for (size_t d = 0; d < size.size() && !empty; ++d) {
    int64_t ext = (size[d] - 1) * stride[d];
    (ext < 0 ? lo : hi) += ext;
  }
  int64_t cap = int64_t(t.storage()->nbytes / itemsize(t.dtype()));
  LOOM_CHECK(empty || (lo >= 0 && hi < cap), Index, "as_strided: sizes ", shape_str(size),
             ", strides ", shape_str(stride), " and offset ", o, " reach elements [", lo, ", ", hi,
             "] outside the buffer's ", cap, " elements");
  return Tensor(t.buffer(), View{size, stride, o}, t.dtype(), t.device());
}

Tensor T(const Tensor& t) {
  Dims order;
  for (int d = t.dim() - 1; d >= 0; --d) order.push_back(d);
  return t.permute(order);
}

}  // namespace

nb::object item_object(const Tensor& t) {
  LOOM_CHECK(t.numel() == 1, Value, "item: a Tensor with ", t.numel(),
             " elements cannot be converted to a Python scalar (shape ", shape_str(t.shape()), ")");
  if (is_bool(t.dtype())) return nb::bool_(t.item<bool>());
  if (is_floating(t.dtype())) return nb::float_(t.item<double>());
  if (t.dtype() == DType::UInt64)
    return nb::steal<nb::int_>(PyLong_FromUnsignedLongLong(t.item<uint64_t>()));
  return nb::int_(t.item<int64_t>());
}

void init_tensor(nb::module_& m) {
  auto c = nb::class_<Tensor>(m, "Tensor",
                              "A lazy tensor: ops record work that runs, fused, at the next sync "
                              "point (item, numpy, printing, loom.sync()).");
  // A Python subclass (loom.array_api's Array) is made from a loom tensor through this.
  c.def(nb::init<const Tensor&>(), "other"_a,
        "A new handle on other's buffer and view (no copy, nothing recorded).");
  // ---- attributes --------------------------------------------------------------------
  c.def_prop_ro(
       "shape", [](const Tensor& t) { return to_tuple(t.shape()); }, "The sizes, a tuple of ints.")
      .def_prop_ro("dtype", &Tensor::dtype, "The element type (loom.float32, ...).")
      .def_prop_ro("device", &Tensor::device, "The device the tensor lives on.")
      .def_prop_ro("ndim", &Tensor::dim, "The number of dims.")
      .def_prop_ro("T", &T, "All dims reversed (a view).")
      .def_prop_ro("mT", &mT, "The last two dims swapped (a view).")
      .def_prop_ro(
          "itemsize", [](const Tensor& t) { return itemsize(t.dtype()); }, "Bytes per element.")
      .def_prop_ro(
          "nbytes", [](const Tensor& t) { return size_t(t.numel()) * itemsize(t.dtype()); },
          "Bytes of the elements (numel * itemsize).")
      .def_prop_ro(
          "is_cuda", [](const Tensor& t) { return t.device().kind == DeviceKind::CUDA; },
          "True on a CUDA device.")
      .def_prop_ro("is_pending", &Tensor::is_pending,
                   "True while the tensor's values wait for the next sync point.")
      .def("dim", &Tensor::dim, "The number of dims.")
      .def("numel", &Tensor::numel, "The number of elements.")
      .def("nelement", &Tensor::numel, "The number of elements.")
      .def(
          "element_size", [](const Tensor& t) { return itemsize(t.dtype()); }, "Bytes per element.")
      .def(
          "size", [](const Tensor& t) { return to_tuple(t.shape()); }, "The sizes, a tuple.")
      .def("size", &Tensor::size, "dim"_a, "The size of one dim.")
      .def(
          "stride", [](const Tensor& t) { return to_tuple(t.strides()); },
          "The strides in elements, a tuple.")
      .def(
          "stride",
          [](const Tensor& t, int64_t d) {
            return t.strides()[normalize_dim("stride", d, t.dim())];
          },
          "dim"_a, "The stride of one dim in elements.")
      .def("storage_offset", &Tensor::offset, "Offset of the first element in its buffer.")
      .def("is_contiguous", &Tensor::is_contiguous, "True when laid out row-major without gaps.")
      .def(
          "is_floating_point", [](const Tensor& t) { return is_floating(t.dtype()); },
          "True for floating dtypes.")
      .def("item", &item_object, "The one element as a Python bool, int or float (a sync point).")
      .def("tolist", &tolist, "The elements as nested Python lists (a sync point).");

  // ---- views and movement --------------------------------------------------------------
  c.def(
       "reshape",
       [](const Tensor& t, nb::args s) { return t.reshape(dims_from_args(s, "reshape")); },
       "shape"_a, "A tensor of the new shape (a view when possible, else a copy); -1 is inferred.")
      .def(
          "view", [](const Tensor& t, nb::args s) { return t.view(dims_from_args(s, "view")); },
          "shape"_a, "A view of the new shape; errors if the strides do not allow one.")
      .def(
          "permute",
          [](const Tensor& t, nb::args s) { return t.permute(dims_from_args(s, "permute")); },
          "dims"_a, "A view with the dims reordered.")
      .def(
          "expand",
          [](const Tensor& t, nb::args s) { return t.expand(dims_from_args(s, "expand")); },
          "sizes"_a, "A broadcast view to the sizes (-1 keeps a dim).")
      .def(
          "expand_as", [](const Tensor& t, const Tensor& o) { return t.expand(o.shape()); },
          "other"_a, "expand(other.shape).")
      .def(
          "broadcast_to", [](const Tensor& t, const Dims& s) { return t.expand(s); }, "size"_a,
          "A broadcast view to `size`.")
      .def("transpose", &Tensor::transpose, "dim0"_a, "dim1"_a, "A view with two dims swapped.")
      .def("swapaxes", &Tensor::transpose, "axis0"_a, "axis1"_a, "Alias of transpose.")
      .def("t", &Tensor::t, "Transpose of a tensor of at most 2 dims.")
      .def("unsqueeze", &Tensor::unsqueeze, "dim"_a, "A view with a size-1 dim inserted at `dim`.")
      .def(
          "squeeze",
          [](const Tensor& t, const DimArg& d) {
            if (d.none) return t.squeeze();
            Tensor r = t;
            Dims ds = d.dims;
            for (auto& x : ds) x = normalize_dim("squeeze", x, t.dim());
            std::sort(ds.rbegin(), ds.rend());
            for (auto x : ds) r = r.squeeze(x);
            return r;
          },
          "dim"_a = nb::none(), "A view without size-1 dims (all, or those in `dim`).")
      .def("flatten", &Tensor::flatten, "start_dim"_a = 0, "end_dim"_a = -1,
           "Dims start_dim..end_dim merged into one.")
      .def("narrow", &Tensor::narrow, "dim"_a, "start"_a, "length"_a,
           "A view of `length` elements of `dim` from `start`.")
      .def("select", &Tensor::select, "dim"_a, "index"_a,
           "A view at `index` of `dim` (dim removed).")
      .def("as_strided", &as_strided, "size"_a, "stride"_a, "storage_offset"_a = nb::none(),
           "A view with the given sizes, strides (in elements; may be negative) and offset into "
           "this tensor's buffer.")
      .def("contiguous", &Tensor::contiguous, "Itself when contiguous, else a row-major copy.")
      .def("clone", &Tensor::clone, "A copy with its own memory.")
      .def("split", &Tensor::split, "split_size"_a, "dim"_a = 0,
           "Views of `split_size` elements along `dim` (the last may be smaller).")
      .def("split", &split_sizes, "split_size"_a, "dim"_a = 0,
           "Views of the given sizes along `dim`.")
      .def("chunk", &Tensor::chunk, "chunks"_a, "dim"_a = 0,
           "`chunks` nearly equal views along `dim`.")
      .def(
          "unbind",
          [](const Tensor& t, int64_t dim) {
            int d = normalize_dim("unbind", dim, t.dim());
            std::vector<Tensor> out;
            for (int64_t i = 0; i < t.shape()[d]; ++i) out.push_back(t.select(d, i));
            return out;
          },
          "dim"_a = 0, "Views of each index of `dim` (dim removed).");

  // ---- dtype and device --------------------------------------------------------------------
  c.def(
       "to",
       [](const Tensor& t, DType dt, bool non_blocking, bool copy) {
         return to_impl(t, {}, dt, copy);
       },
       "dtype"_a, "non_blocking"_a = false, "copy"_a = false, "Converted to `dtype`.")
      .def(
          "to",
          [](const Tensor& t, std::optional<Device> dev, std::optional<DType> dt, bool non_blocking,
             bool copy) { return to_impl(t, dev, dt, copy); },
          "device"_a = nb::none(), "dtype"_a = nb::none(), "non_blocking"_a = false,
          "copy"_a = false, "Moved to `device` and/or converted to `dtype`.")
      .def(
          "to",
          [](const Tensor& t, const Tensor& o, bool non_blocking, bool copy) {
            return to_impl(t, o.device(), o.dtype(), copy);
          },
          "other"_a, "non_blocking"_a = false, "copy"_a = false,
          "Converted to the device and dtype of `other`.")
      .def(
          "type_as", [](const Tensor& t, const Tensor& o) { return t.to(o.dtype()); }, "other"_a,
          "Converted to the dtype of `other`.")
      .def(
          "cpu", [](const Tensor& t) { return t.to(kCPU); }, "Moved to the CPU.")
      .def(
          "cuda",
          [](const Tensor& t, int index) {
            return t.to(Device{DeviceKind::CUDA, index});
          },
          "device"_a = 0, "Moved to CUDA device `device`.")
      .def(
          "to_device", [](const Tensor& t, const Device& d, nb::handle) { return t.to(d); },
          "device"_a, "stream"_a = nb::none(), "Array API: moved to `device`.");
  static const std::pair<const char*, DType> casts[] = {
      {"float", DType::Float32},     {"double", DType::Float64}, {"half", DType::Float16},
      {"bfloat16", DType::BFloat16}, {"int", DType::Int32},      {"long", DType::Int64},
      {"bool", DType::Bool},         {"byte", DType::UInt8},     {"char", DType::Int8},
      {"short", DType::Int16}};
  for (auto& [name, dt] : casts) {
    DType t = dt;
    c.def(
        name, [t](const Tensor& x) { return x.to(t); },
        (std::string("Converted to ") + dtype_name(dt) + ".").c_str());
  }

  // ---- Python protocols --------------------------------------------------------------------
  c.def("__repr__", &Tensor::str, "Like torch: values, then dtype and device (a sync point).")
      .def("__str__", &Tensor::str, "Like torch (a sync point).")
      .def(
          "__len__",
          [](const Tensor& t) {
            if (t.dim() == 0) throw nb::type_error("len() of a 0-d tensor");
            return t.shape()[0];
          },
          "The size of dim 0.")
      .def(
          "__iter__",
          [](const Tensor& t) {
            if (t.dim() == 0) throw nb::type_error("iteration over a 0-d tensor");
            nb::list l;
            for (int64_t i = 0; i < t.shape()[0]; ++i) l.append(t.select(0, i));
            return nb::iter(l);
          },
          "Iterates over dim 0.")
      .def(
          "__bool__",
          [](const Tensor& t) {
            LOOM_CHECK(t.numel() == 1, Value, "bool: the truth value of a tensor with ", t.numel(),
                       " elements is ambiguous (shape ", shape_str(t.shape()), ")");
            return t.item<double>() != 0;
          },
          "Truth of the one element (a sync point).")
      .def(
          "__float__", [](const Tensor& t) { return t.item<double>(); },
          "The one element as a float (a sync point).")
      .def(
          "__int__",
          [](const Tensor& t) -> nb::object {
            if (t.dtype() == DType::UInt64) return item_object(t);  // past int64 too
            return nb::int_(t.item<int64_t>());
          },
          "The one element as an int, truncated (a sync point).")
      .def(
          "__index__",
          [](const Tensor& t) -> nb::object {
            LOOM_CHECK(!is_floating(t.dtype()), Type,
                       "only integer tensors of a single element "
                       "can be converted to an index, got ",
                       dtype_name(t.dtype()));
            if (t.dtype() == DType::UInt64) return item_object(t);
            return nb::int_(t.item<int64_t>());
          },
          "The one element of an integer tensor as an index.")
      .def(
          "__hash__", [](nb::handle self) { return intptr_t(self.ptr()); }, "Identity hash.")
      .def(
          "__array_namespace__",
          [](nb::handle, nb::handle) { return nb::module_::import_("loom.array_api"); },
          "api_version"_a = nb::none(), "The array API namespace, loom.array_api.");
}

}  // namespace loom::py
