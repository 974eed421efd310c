// numpy and DLPack interop. Exports (t.numpy(), __array__, __dlpack__) are zero-copy views
// of loom's memory that keep it alive; imports (from_dlpack, from_numpy) wrap the producer's
// memory through loom::from_external. loom.tensor(array) copies (convert.cpp).
#include <nanobind/ndarray.h>

#include "bindings/common.h"
#include "bindings/dlpack_types.h"

namespace loom::py {
namespace {

using MemPtr = std::shared_ptr<Memory>;

// A DLPack view of t's elements (t must be ready) that keeps its memory alive.
template <typename... Fw>
nb::ndarray<Fw...> view_of(const Tensor& t) {
  ensure_ready(t.storage());
  const MemPtr& mem = t.storage()->mem;
  nb::capsule owner(new MemPtr(mem), [](void* p) noexcept { delete static_cast<MemPtr*>(p); });
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  char* data = static_cast<char*>(mem->ptr) + t.offset() * int64_t(itemsize(t.dtype()));
  int dev_type =
      t.device().kind == DeviceKind::CPU ? nb::device::cpu::value : nb::device::cuda::value;
  return nb::ndarray<Fw...>(data, shape.size(), shape.data(), owner, t.strides().data(),
                            to_dlpack(t.dtype()), dev_type, t.device().index);
}

nb::object to_numpy(const Tensor& t0, bool force) {
  LOOM_CHECK(t0.dtype() != DType::BFloat16, Type,
             "numpy: numpy has no bfloat16; convert first, e.g. t.float().numpy()");
  Tensor t = t0.device() == kCPU ? t0 : t0.to(kCPU);
  nb::object a = nb::cast(view_of<nb::numpy>(t));
  return force ? a.attr("copy")() : a;
}

nb::object array(const Tensor& t, nb::handle dtype, nb::handle copy) {
  nb::object a = to_numpy(t, false);
  if (!dtype.is_none()) a = a.attr("astype")(dtype, "copy"_a = false);
  if (copy.ptr() == Py_True) a = a.attr("copy")();
  return a;
}

nb::object dlpack(const Tensor& t0, nb::handle stream, nb::handle max_version, nb::handle dl_device,
                  nb::handle copy) {
  Tensor t = t0;
  if (!dl_device.is_none()) {
    auto dev = nb::cast<std::pair<int, int>>(dl_device);
    Device want = dev.first == 1 ? kCPU : Device{DeviceKind::CUDA, dev.second};
    if (dev.first != 1 && dev.first != 2)
      throw nb::buffer_error("__dlpack__: unsupported dl_device");
    if (want != t.device()) {
      if (copy.ptr() == Py_False)
        throw nb::buffer_error("__dlpack__: a copy to another device is needed but copy=False");
      t = t.to(want);
    }
  }
  if (copy.ptr() == Py_True && t.same_buffer(t0)) t = t.clone();
  nb::object arr = nb::cast(view_of<nb::array_api>(t));
  if (t.device().kind != DeviceKind::CPU) backend(t.device()).synchronize();
  (void)stream;
  if (max_version.is_none()) return arr.attr("__dlpack__")();
  return arr.attr("__dlpack__")("max_version"_a = max_version);
}

nb::tuple dlpack_device(const Tensor& t) {
  if (t.device().kind == DeviceKind::CPU) return nb::make_tuple(1, 0);
  return nb::make_tuple(2, t.device().index);
}

// Wraps x's memory (anything with __dlpack__ or the buffer protocol) without a copy.
Tensor from_dlpack(nb::handle x, std::optional<Device> device, std::optional<bool> copy) {
  if (nb::isinstance<Tensor>(x)) {
    const Tensor& t = nb::cast<const Tensor&>(x);
    Tensor r = device ? t.to(*device) : t;
    LOOM_CHECK(r.same_buffer(t) || copy != false, Value, "from_dlpack: moving to ", device->str(),
               " needs a copy but copy=False");
    return copy == true && r.same_buffer(t) ? r.clone() : r;
  }
  PyObject* o = x.ptr();
  if (!PyObject_HasAttrString(o, "__dlpack__") && !PyObject_CheckBuffer(o) &&
      !PyCapsule_CheckExact(o))
    throw nb::type_error(("from_dlpack: expected an object with __dlpack__ or the buffer "
                          "protocol, got " +
                          std::string(Py_TYPE(o)->tp_name))
                             .c_str());
  nb::ndarray<> a;
  bool writable = nb::try_cast(x, a, false);
  if (copy == true || !writable) {
    // Read-only producers are copied: loom's in-place ops may write into wrapped memory.
    if (copy == false)
      throw nb::buffer_error(
          "from_dlpack: the array is read-only; loom can only wrap writable "
          "memory without a copy (pass copy=None or True)");
    return to_tensor(x, std::nullopt, device);
  }
  DType dt;
  if (!dtype_from_dlpack(a.dtype(), &dt))
    throw nb::type_error(
        ("from_dlpack: unsupported element type " + dlpack_dtype_str(a.dtype())).c_str());
  Device dev;
  if (a.device_type() == nb::device::cpu::value)
    dev = kCPU;
  else if (a.device_type() == nb::device::cuda::value)
    dev = {DeviceKind::CUDA, a.device_id()};
  else
    throw nb::buffer_error("from_dlpack: only CPU (1) and CUDA (2) devices are supported");
  Shape shape(a.ndim());
  Strides strides(a.ndim());
  for (size_t d = 0; d < a.ndim(); ++d) shape[d] = int64_t(a.shape(d)), strides[d] = a.stride(d);
  auto* keep = new nb::ndarray<>(a);
  Tensor t = from_external(a.data(), shape, strides, dt, dev, [keep] {
    if (!Py_IsInitialized()) return;  // interpreter gone: leak rather than crash
    nb::gil_scoped_acquire gil;
    delete keep;
  });
  if (device && *device != dev) {
    LOOM_CHECK(copy != false, Value, "from_dlpack: moving to ", device->str(),
               " needs a copy but copy=False");
    return t.to(*device);
  }
  return t;
}

}  // namespace

void init_interop(nb::module_& m) {
  auto c = nb::borrow<nb::class_<Tensor>>(nb::type<Tensor>());
  c.def("numpy", &to_numpy, "force"_a = false,
        "A numpy array (a sync point): a zero-copy view of loom's memory on the CPU, which it "
        "keeps alive; force=True returns a copy.")
      .def("__array__", &array, "dtype"_a = nb::none(), "copy"_a = nb::none(),
           "numpy's array protocol (zero-copy unless dtype or copy=True ask for one).")
      .def("__dlpack__", &dlpack, nb::kw_only(), "stream"_a = nb::none(),
           "max_version"_a = nb::none(), "dl_device"_a = nb::none(), "copy"_a = nb::none(),
           "A DLPack capsule viewing this tensor's memory (a sync point).")
      .def("__dlpack_device__", &dlpack_device, "(device_type, device_id): (1, 0) for the CPU.")
      .def(
          "data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); },
          "Address of the first element (a sync point).");
  m.def("from_dlpack", &from_dlpack, "x"_a, nb::kw_only(), "device"_a = nb::none(),
        "copy"_a = nb::none(),
        "A tensor sharing x's memory (no copy) for anything with __dlpack__ or the buffer "
        "protocol; read-only arrays and copy=True are copied.");
  m.def(
      "from_numpy", [](nb::handle a) { return from_dlpack(a, std::nullopt, std::nullopt); },
      "ndarray"_a, "A tensor sharing the numpy array's memory (no copy when writable).");
}

}  // namespace loom::py
