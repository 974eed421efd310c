// Creation: from host data, constants, ranges and the counter-based generator.
#include <atomic>
#include <cmath>
#include <cstring>

#include "ops/record.h"

namespace loom {
namespace {

struct Generator {
  std::atomic<uint64_t> seed{0x5eed5eedull};
  std::atomic<uint64_t> offset{0};
};
Generator& gen() {
  static Generator g;
  return g;
}

Tensor random_node(Op op, const Shape& shape, Device d, RandomRange r) {
  auto n = new_node(op, DType::Float32, shape, d);
  n->seed = r.seed;
  n->offset = r.offset;
  return record_node(std::move(n));
}

Tensor random_node(Op op, const Shape& shape, Device d) {
  check_sizes(op == Op::Rand ? "rand" : "randn", shape);
  return random_node(op, shape, d, reserve_random(numel(shape)));
}

}  // namespace

RandomRange reserve_random(int64_t n) { return {gen().seed, gen().offset.fetch_add(uint64_t(n))}; }

Tensor rand_at(const Shape& shape, Device d, RandomRange r) {
  check_sizes("rand", shape);
  return random_node(Op::Rand, shape, d, r);
}

Tensor from_blob(const void* data, const Shape& shape, DType dtype, Device device) {
  check_sizes("tensor", shape);
  size_t bytes = size_t(numel(shape)) * itemsize(dtype);
  auto st = make_ready_storage(kCPU, bytes);
  if (bytes) std::memcpy(st->data(), data, bytes);
  Tensor t = make_result(st, shape, dtype, kCPU);
  return device == kCPU ? t : t.to(device);
}

template <typename T>
Tensor tensor(const std::vector<T>& data, const Shape& shape, Options opts) {
  check_sizes("tensor", shape);
  LOOM_CHECK(int64_t(data.size()) == numel(shape), Value, "tensor: ", data.size(),
             " values do not fill shape ", shape_str(shape), " (", numel(shape), " elements)");
  Tensor t;
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> b(data.begin(), data.end());
    t = from_blob(b.data(), shape, DType::Bool, opts.device);
  } else {
    t = from_blob(data.data(), shape, dtype_of<T>(), opts.device);
  }
  return cast(t, opts.dtype);
}
template <typename T>
Tensor tensor(const std::vector<T>& data, const Shape& shape) {
  return tensor(data, shape, Options(dtype_of<T>()));
}
#define LOOM_INST(T)                                                       \
  template Tensor tensor<T>(const std::vector<T>&, const Shape&, Options); \
  template Tensor tensor<T>(const std::vector<T>&, const Shape&);
#define LOOM_X(name, text, storage, size, category, compute, host) \
  LOOM_DTYPE_IF(host, LOOM_INST(storage))
LOOM_DTYPES(LOOM_X)
#undef LOOM_X
#undef LOOM_INST

Tensor scalar_tensor(Scalar s, Options opts) { return full({}, s, opts); }

Tensor empty(const Shape& shape, Options opts) {
  check_sizes("empty", shape);
  return record_node(new_node(Op::Empty, opts.dtype, shape, opts.device));
}

Tensor full(const Shape& shape, Scalar value, Options opts) {
  check_sizes("full", shape);
  return const_tensor(value, opts.dtype, opts.device, shape);
}
Tensor zeros(const Shape& shape, Options opts) {
  check_sizes("zeros", shape);
  return full(shape, 0, opts);
}
Tensor ones(const Shape& shape, Options opts) {
  check_sizes("ones", shape);
  return full(shape, 1, opts);
}

Tensor empty_like(const Tensor& t, std::optional<DType> dt) {
  return empty(t.shape(), {dt.value_or(t.dtype()), t.device()});
}
Tensor zeros_like(const Tensor& t, std::optional<DType> dt) {
  return zeros(t.shape(), {dt.value_or(t.dtype()), t.device()});
}
Tensor ones_like(const Tensor& t, std::optional<DType> dt) {
  return ones(t.shape(), {dt.value_or(t.dtype()), t.device()});
}
Tensor full_like(const Tensor& t, Scalar v, std::optional<DType> dt) {
  return full(t.shape(), v, {dt.value_or(t.dtype()), t.device()});
}

Tensor iota(const Shape& shape, int dim, Device d) {
  auto n = new_node(Op::Iota, DType::Int64, shape, d);
  n->dim = dim;
  return record_node(std::move(n));
}

Tensor arange(Scalar end, Options opts) {
  DType t = end.kind == Scalar::Kind::Float ? kDefaultFloat : opts.dtype;
  return arange(0, end, 1, t, opts.device);
}

Tensor arange(Scalar start, Scalar end, Scalar step, std::optional<DType> dtype, Device device) {
  LOOM_CHECK(step.f != 0, Value, "arange: step must be nonzero");
  double span = (end.f - start.f) / step.f;
  LOOM_CHECK(std::isfinite(span), Value, "arange: start, end and step must be finite");
  int64_t n = std::max<int64_t>(0, int64_t(std::ceil(span)));
  bool any_float = start.kind == Scalar::Kind::Float || end.kind == Scalar::Kind::Float ||
                   step.kind == Scalar::Kind::Float;
  if (!any_float) {  // exact count for integers past 2^53: ceil((end - start) / step)
    int64_t span_i = end.i - start.i, q = span_i / step.i, r = span_i % step.i;
    if (r != 0 && ((r > 0) == (step.i > 0))) ++q;
    n = std::max<int64_t>(0, q);
  }
  DType t = dtype.value_or(any_float ? kDefaultFloat : DType::Int64);
  Tensor i = iota({n}, 0, device);
  if (!is_floating(t) && !any_float) return cast(i * step.i + start.i, t);
  return cast(cast(i, DType::Float64) * step.f + start.f, t);
}

Tensor linspace(double start, double end, int64_t steps, Options opts) {
  LOOM_CHECK(steps >= 0, Value, "linspace: number of steps must be non-negative, got ", steps);
  if (steps == 1) return full({1}, start, opts);  // like torch: the one value is `start`
  double step = steps > 1 ? (end - start) / double(steps - 1) : 0.0;
  Tensor i = cast(iota({steps}, 0, opts.device), DType::Float64);
  // Like torch: the second half counts back from `end`, so both ends are exact.
  Tensor fwd = i * step + start, bwd = end - (double(steps - 1) - i) * step;
  return cast(where(lt(i, double(steps / 2)), fwd, bwd), opts.dtype);
}

Tensor eye(int64_t n, std::optional<int64_t> m, Options opts) {
  int64_t cols = m.value_or(n);
  check_sizes("eye", {n, cols});
  Shape s{n, cols};
  return cast(eq(iota(s, 0, opts.device), iota(s, 1, opts.device)), opts.dtype);
}

void manual_seed(uint64_t seed) {
  gen().seed = seed;
  gen().offset = 0;
}

Tensor rand(const Shape& shape, Options opts) {
  LOOM_CHECK(is_floating(opts.dtype), Type, "rand: dtype must be floating, got ",
             dtype_name(opts.dtype));
  return cast(random_node(Op::Rand, shape, opts.device), opts.dtype);
}
Tensor randn(const Shape& shape, Options opts) {
  LOOM_CHECK(is_floating(opts.dtype), Type, "randn: dtype must be floating, got ",
             dtype_name(opts.dtype));
  return cast(random_node(Op::Randn, shape, opts.device), opts.dtype);
}
Tensor randint(int64_t low, int64_t high, const Shape& shape, Options opts) {
  LOOM_CHECK(high > low, Value, "randint: high (", high, ") must be greater than low (", low, ")");
  Tensor u = cast(random_node(Op::Rand, shape, opts.device), DType::Float64);
  return cast(floor(u * double(high - low)) + double(low), opts.dtype);
}
Tensor rand_like(const Tensor& t) { return rand(t.shape(), {t.dtype(), t.device()}); }
Tensor randn_like(const Tensor& t) { return randn(t.shape(), {t.dtype(), t.device()}); }

}  // namespace loom
