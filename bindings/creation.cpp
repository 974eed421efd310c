// Creation: loom.tensor, zeros/ones/full/empty/arange/linspace/eye, *_like, random numbers.
#include "bindings/common.h"

namespace loom::py {
namespace {

using OD = std::optional<DType>;
using ODev = std::optional<Device>;

Options opts(OD dt, ODev dev, DType dflt = kDefaultFloat) {
  return Options(dt.value_or(dflt), dev.value_or(kCPU));
}

// A new tensor as a leaf of the autograd graph when asked (requires_grad=True).
Tensor leaf(Tensor t, bool requires_grad) {
  if (requires_grad) t.requires_grad_(true);
  return t;
}

template <Tensor (*f)(const Shape&, Options)>
void sized(nb::module_& m, const char* name, const char* doc) {
  m.def(
      name,
      [name](nb::args size, OD dt, ODev dev, bool rg) {
        return leaf(f(dims_from_args(size, name), opts(dt, dev)), rg);
      },
      "size"_a, "dtype"_a = nb::none(), "device"_a = nb::none(), "requires_grad"_a = false, doc);
}

// A *_like creator: same shape as `input`, its dtype and device unless given.
template <typename F>
void like(nb::module_& m, const char* name, F f, const char* doc) {
  m.def(
      name,
      [f](const Tensor& x, OD dt, ODev dev, bool rg) {
        return leaf(f(x.shape(), Options(dt.value_or(x.dtype()), dev.value_or(x.device()))), rg);
      },
      "input"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(),
      "requires_grad"_a = false, doc);
}

Tensor arange_f(Scalar a, std::optional<Scalar> b, Scalar step, OD dt, ODev dev, bool rg) {
  Scalar start = b ? a : Scalar(int64_t(0)), end = b ? *b : a;
  return leaf(arange(start, end, step, dt, dev.value_or(kCPU)), rg);
}

Tensor randint_f(int64_t low, int64_t high, const DimArg& size, OD dt, ODev dev) {
  return randint(low, high, size.dims, opts(dt, dev, DType::Int64));
}

}  // namespace

void init_creation(nb::module_& m) {
  m.def(
      "tensor",
      [](nb::handle data, OD dt, ODev dev, bool rg) { return leaf(to_tensor(data, dt, dev), rg); },
      "data"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(),
      "requires_grad"_a = false,
      "A new tensor holding a copy of data: a Python scalar, a nested list, a numpy array (or "
      "anything with the buffer protocol or DLPack) or a tensor. Without dtype: bool, int64 or "
      "float32 for Python values, the array's dtype for arrays.");
  m.def(
      "as_tensor",
      [](nb::handle data, OD dt, ODev dev) {
        if (nb::isinstance<Tensor>(data)) {
          Tensor t = nb::cast<Tensor>(data);
          if (dev) t = t.to(*dev);
          return dt ? t.to(*dt) : t;
        }
        Tensor t = to_tensor(data, std::nullopt, dev);
        return dt ? t.to(*dt) : t;
      },
      "data"_a, "dtype"_a = nb::none(), "device"_a = nb::none(),
      "Like tensor(), but returns a tensor argument itself when no conversion is needed.");
  m.def(
      "scalar_tensor", [](Scalar s, OD dt, ODev dev) { return scalar_tensor(s, opts(dt, dev)); },
      "s"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(),
      "A 0-d tensor holding s (float32 unless dtype is given).");
  sized<&empty>(m, "empty", "A tensor of the given size with unspecified values.");
  sized<&zeros>(m, "zeros", "A tensor of the given size filled with 0.");
  sized<&ones>(m, "ones", "A tensor of the given size filled with 1.");
  sized<&rand>(m, "rand", "Uniform random numbers in [0, 1) (Philox; same on every device).");
  sized<&randn>(m, "randn", "Standard normal random numbers (Philox; same on every device).");
  m.def(
      "full",
      [](const DimArg& size, Scalar v, OD dt, ODev dev, bool rg) {
        return leaf(full(size.dims, v, opts(dt, dev, v.default_dtype())), rg);
      },
      "size"_a, "fill_value"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(),
      "requires_grad"_a = false,
      "A tensor of the given size filled with fill_value (dtype from the value unless given).");
  like(m, "empty_like", &empty, "Like empty(), with input's shape, dtype and device.");
  like(m, "zeros_like", &zeros, "Like zeros(), with input's shape, dtype and device.");
  like(m, "ones_like", &ones, "Like ones(), with input's shape, dtype and device.");
  like(m, "rand_like", &rand, "Like rand(), with input's shape, dtype and device.");
  like(m, "randn_like", &randn, "Like randn(), with input's shape, dtype and device.");
  m.def(
      "full_like",
      [](const Tensor& x, Scalar v, OD dt, ODev dev, bool rg) {
        return leaf(full(x.shape(), v, Options(dt.value_or(x.dtype()), dev.value_or(x.device()))),
                    rg);
      },
      "input"_a, "fill_value"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(),
      "requires_grad"_a = false, "Like full(), with input's shape, dtype and device.");
  m.def("arange", &arange_f, "start"_a, "end"_a = nb::none(), "step"_a = 1, nb::kw_only(),
        "dtype"_a = nb::none(), "device"_a = nb::none(), "requires_grad"_a = false,
        "Values from start (default 0) up to end, exclusive, by step; arange(end) counts from 0. "
        "int64 for int arguments, float32 if any is a float.");
  m.def(
      "linspace",
      [](double a, double b, int64_t steps, OD dt, ODev dev, bool rg) {
        return leaf(linspace(a, b, steps, opts(dt, dev)), rg);
      },
      "start"_a, "end"_a, "steps"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(),
      "requires_grad"_a = false, "steps evenly spaced values from start to end, inclusive.");
  m.def(
      "eye",
      [](int64_t n, std::optional<int64_t> mm, OD dt, ODev dev, bool rg) {
        return leaf(eye(n, mm, opts(dt, dev)), rg);
      },
      "n"_a, "m"_a = nb::none(), nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(),
      "requires_grad"_a = false, "An n x m matrix with ones on the diagonal.");
  m.def("randint", &randint_f, "low"_a, "high"_a, "size"_a, nb::kw_only(), "dtype"_a = nb::none(),
        "device"_a = nb::none(), "Uniform random integers in [low, high) (int64 by default).");
  m.def(
      "randint",
      [](int64_t high, const DimArg& size, OD dt, ODev dev) {
        return randint_f(0, high, size, dt, dev);
      },
      "high"_a, "size"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(),
      "Uniform random integers in [0, high) (int64 by default).");
  m.def("manual_seed", &manual_seed, "seed"_a,
        "Seeds the random number generator (and restarts its counter).");
}

}  // namespace loom::py
