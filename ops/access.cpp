// Sync points that read values back: item, to_vector, data_ptr; moves between devices.
#include <cstring>

#include "ops/grad_node.h"
#include "ops/record.h"
#include "tensor/backend.h"
#include "tensor/convert.h"

namespace loom {
namespace {

// A ready, contiguous host copy of t's elements (bytes in t's dtype).
std::vector<char> host_bytes(const Tensor& t0) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  NoGradGuard read;  // reading values is no op of the autograd graph
  Tensor t = t0.contiguous();
  ensure_ready(t.storage());
  size_t isz = itemsize(t.dtype()), n = size_t(t.numel()) * isz;
  std::vector<char> out(n);
  if (n == 0) return out;
  const char* src = static_cast<const char*>(t.storage()->data()) + t.offset() * int64_t(isz);
  backend(t.device()).copy_to_host_of(*t.storage(), out.data(), src, n);
  return out;
}

template <typename T>
std::vector<T> convert(const std::vector<char>& bytes, DType dt, int64_t n) {
  std::vector<T> out(static_cast<size_t>(n));
  if (n == 0) return out;
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> b(static_cast<size_t>(n));
    load_run<uint8_t>(bytes.data(), dt, 1, b.data(), n);
    for (int64_t i = 0; i < n; ++i) out[i] = b[i] != 0;
  } else if constexpr (std::is_floating_point_v<T>) {
    std::vector<double> d(static_cast<size_t>(n));
    load_run<double>(bytes.data(), dt, 1, d.data(), n);
    for (int64_t i = 0; i < n; ++i) out[i] = T(d[i]);
  } else {
    std::vector<int64_t> d(static_cast<size_t>(n));
    if (is_floating(dt)) {
      std::vector<double> f(static_cast<size_t>(n));
      load_run<double>(bytes.data(), dt, 1, f.data(), n);
      for (int64_t i = 0; i < n; ++i) d[i] = int64_t(f[i]);
    } else {
      load_run<int64_t>(bytes.data(), dt, 1, d.data(), n);
    }
    for (int64_t i = 0; i < n; ++i) out[i] = T(d[i]);
  }
  return out;
}

}  // namespace

template <typename T>
std::vector<T> Tensor::to_vector() const {
  return convert<T>(host_bytes(*this), dtype_, numel());
}

template <typename T>
T Tensor::item() const {
  LOOM_CHECK(numel() == 1, Value, "item: a Tensor with ", numel(),
             " elements cannot be converted to a scalar (shape ", shape_str(shape()), ")");
  return to_vector<T>()[0];
}

#define LOOM_INST(T)                                    \
  template std::vector<T> Tensor::to_vector<T>() const; \
  template T Tensor::item<T>() const;
#define LOOM_X(name, text, storage, size, category, compute, host) \
  LOOM_DTYPE_IF(host, LOOM_INST(storage))
LOOM_DTYPES(LOOM_X)
#undef LOOM_X
#undef LOOM_INST

const void* Tensor::data_ptr() const {
  ensure_ready(storage());
  return static_cast<const char*>(storage()->data()) + offset() * int64_t(itemsize(dtype_));
}

Tensor Tensor::to(Device d) const {
  if (d == device_) return *this;
  LOOM_CHECK(backend_available(d.kind), Runtime, "to: device ", d.str(), " is not available");
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  Tensor c;
  {
    NoGradGuard copy;  // the result's own node covers it (below)
    c = contiguous();
  }
  ensure_ready(c.storage());
  size_t bytes = size_t(c.numel()) * itemsize(dtype_);
  auto st = make_ready_storage(d, bytes);
  const char* src =
      static_cast<const char*>(c.storage()->data()) + c.offset() * int64_t(itemsize(dtype_));
  if (bytes) {
    if (is_host(device_)) {
      backend(d).copy_from_host(st->data(), src, bytes);
    } else if (is_host(d)) {
      backend(device_).copy_to_host(st->data(), src, bytes);
    } else if (!backend(device_).copy_to_device(d, st->data(), src, bytes)) {
      std::vector<char> tmp(bytes);
      backend(device_).copy_to_host(tmp.data(), src, bytes);
      backend(d).copy_from_host(st->data(), tmp.data(), bytes);
    }
  }
  Tensor r = make_result(st, shape(), dtype_, d);
  if (autograd::needs_grad(*this)) autograd::record_same("ToCopyBackward0", *this, r);
  return r;
}

std::string explain(const Tensor& t) {
  return explain_storage(t.storage()) + autograd::explain_graph(t);
}

}  // namespace loom
