// Reductions: the op table's rows (sum, prod, amax, amin, argmax, argmin, any, all) bound by
// kind, then mean/var/std/logsumexp/norm/cumsum and torch's max/min (values and indices).
#include <string>

#include "bindings/common.h"

namespace loom::py {
namespace {

const char* kDimDoc = " `dim` is None (all dims), an int or a tuple of ints.";

template <ReduceKind K, typename F>
void bind_reduce(nb::module_& m, nb::class_<Tensor>& c, const char* api, F f) {
  std::string doc = std::string(api) + "(input, dim=None, keepdim=False) -> Tensor\n\n" +
                    "Reduces with " + api + " over dims (op table row).";
  if constexpr (K == ReduceKind::Sum) {
    doc += kDimDoc;
    doc += " Integer and bool inputs accumulate in int64; dtype= converts first.";
    auto g = [f](const Tensor& x, const DimArg& d, bool keepdim, std::optional<DType> dt) {
      Tensor r = f(dt ? x.to(*dt) : x, d.dims, keepdim);
      return dt ? r.to(*dt) : r;
    };
    m.def(api, g, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, nb::kw_only(),
          "dtype"_a = nb::none(), doc.c_str());
    c.def(api, g, "dim"_a = nb::none(), "keepdim"_a = false, nb::kw_only(), "dtype"_a = nb::none(),
          doc.c_str());
  } else if constexpr (K == ReduceKind::Index) {
    doc += " `dim` is an int, or None for the index into the flattened input (int64 result).";
    auto g = [f](const Tensor& x, std::optional<int64_t> d, bool keepdim) {
      return f(x, d, keepdim);
    };
    m.def(api, g, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, doc.c_str());
    c.def(api, g, "dim"_a = nb::none(), "keepdim"_a = false, doc.c_str());
  } else {
    doc += kDimDoc;
    doc += K == ReduceKind::Bool ? " The result is bool." : " The result keeps the input dtype.";
    auto g = [f](const Tensor& x, const DimArg& d, bool keepdim) { return f(x, d.dims, keepdim); };
    m.def(api, g, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, doc.c_str());
    c.def(api, g, "dim"_a = nb::none(), "keepdim"_a = false, doc.c_str());
  }
}

// torch.max / torch.min: the whole-tensor value, (values, indices) along a dim, or the
// elementwise maximum / minimum of two tensors.
template <bool Max>
void bind_minmax(nb::module_& m, nb::class_<Tensor>& c, nb::handle result_type) {
  const char* name = Max ? "max" : "min";
  nb::object rt = nb::borrow(result_type);
  auto all = [](const Tensor& x) { return Max ? amax(x) : amin(x); };
  auto along = [rt](const Tensor& x, int64_t dim, bool keepdim) {
    Tensor v = Max ? amax(x, {dim}, keepdim) : amin(x, {dim}, keepdim);
    Tensor i = Max ? argmax(x, dim, keepdim) : argmin(x, dim, keepdim);
    return rt(v, i);
  };
  auto pair = [](const Tensor& a, const Tensor& b) { return Max ? maximum(a, b) : minimum(a, b); };
  std::string d1 = std::string(name) + " of all elements.";
  std::string d2 = std::string("(values, indices) of the ") + name + " along dim.";
  std::string d3 = std::string("Elementwise ") + (Max ? "maximum" : "minimum") + " of two tensors.";
  m.def(name, all, "input"_a, d1.c_str());
  m.def(name, pair, "input"_a, "other"_a, d3.c_str());
  m.def(name, along, "input"_a, "dim"_a, "keepdim"_a = false, d2.c_str());
  c.def(name, all, d1.c_str());
  c.def(name, pair, "other"_a, d3.c_str());
  c.def(name, along, "dim"_a, "keepdim"_a = false, d2.c_str());
}

double norm_p(nb::handle p) {
  if (PyUnicode_Check(p.ptr())) {
    std::string s = nb::cast<std::string>(p);
    if (s == "fro") return 2;
    if (s == "nuc") throw nb::value_error("norm: the nuclear norm is not supported");
    throw nb::value_error(("norm: unknown norm '" + s + "'").c_str());
  }
  return nb::cast<double>(p);
}

}  // namespace

void init_reduce(nb::module_& m) {
  auto c = nb::borrow<nb::class_<Tensor>>(nb::type<Tensor>());
#define LOOM_X(name, api, kind, ...) \
  bind_reduce<ReduceKind::kind>( \
      m, c, #api, [](const Tensor& x, const auto& d, bool k) { return loom::api(x, d, k); });
  LOOM_REDUCE_OPS(LOOM_X)
#undef LOOM_X

  nb::object nt = nb::module_::import_("collections").attr("namedtuple");
  nb::object mm = nt("minmax", nb::make_tuple("values", "indices"));
  m.attr("_minmax_result") = mm;
  bind_minmax<true>(m, c, mm);
  bind_minmax<false>(m, c, mm);

  auto mean_f = [](const Tensor& x, const DimArg& d, bool keepdim, std::optional<DType> dt) {
    return mean(dt ? x.to(*dt) : x, d.dims, keepdim);
  };
  const char* mean_doc = "Mean over dims (floating inputs; dtype= converts first).";
  m.def("mean", mean_f, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, nb::kw_only(),
        "dtype"_a = nb::none(), mean_doc);
  c.def("mean", mean_f, "dim"_a = nb::none(), "keepdim"_a = false, nb::kw_only(),
        "dtype"_a = nb::none(), mean_doc);
  // var / std: torch's `unbiased` (positional) or `correction` (keyword).
  auto corr = [](bool unbiased, std::optional<double> correction) {
    return correction ? *correction : unbiased ? 1.0 : 0.0;
  };
  auto var_f = [corr](const Tensor& x, const DimArg& d, bool unbiased, bool keepdim,
                      std::optional<double> correction) {
    return var(x, d.dims, corr(unbiased, correction), keepdim);
  };
  auto std_f = [corr](const Tensor& x, const DimArg& d, bool unbiased, bool keepdim,
                      std::optional<double> correction) {
    return loom::std(x, d.dims, corr(unbiased, correction), keepdim);
  };
  const char* var_doc = "Variance over dims with Bessel's correction (correction=1) by default.";
  const char* std_doc = "Standard deviation over dims (correction=1 by default).";
  m.def("var", var_f, "input"_a, "dim"_a = nb::none(), "unbiased"_a = true, "keepdim"_a = false,
        nb::kw_only(), "correction"_a = nb::none(), var_doc);
  c.def("var", var_f, "dim"_a = nb::none(), "unbiased"_a = true, "keepdim"_a = false, nb::kw_only(),
        "correction"_a = nb::none(), var_doc);
  m.def("std", std_f, "input"_a, "dim"_a = nb::none(), "unbiased"_a = true, "keepdim"_a = false,
        nb::kw_only(), "correction"_a = nb::none(), std_doc);
  c.def("std", std_f, "dim"_a = nb::none(), "unbiased"_a = true, "keepdim"_a = false, nb::kw_only(),
        "correction"_a = nb::none(), std_doc);

  auto lse = [](const Tensor& x, const DimArg& d, bool keepdim) {
    return logsumexp(x, d.dims, keepdim);
  };
  m.def("logsumexp", lse, "input"_a, "dim"_a, "keepdim"_a = false, "log(sum(exp(x))) over dims.");
  c.def("logsumexp", lse, "dim"_a, "keepdim"_a = false, "log(sum(exp(x))) over dims.");
  auto norm_f = [](const Tensor& x, nb::handle p, const DimArg& d, bool keepdim) {
    return norm(x, norm_p(p), d.dims, keepdim);
  };
  const char* norm_doc = "Vector p-norm over dims (p a number, inf, or 'fro' = 2).";
  m.def("norm", norm_f, "input"_a, "p"_a = "fro", "dim"_a = nb::none(), "keepdim"_a = false,
        norm_doc);
  c.def("norm", norm_f, "p"_a = "fro", "dim"_a = nb::none(), "keepdim"_a = false, norm_doc);
  auto cumsum_f = [](const Tensor& x, int64_t dim, std::optional<DType> dt) {
    return cumsum(dt ? x.to(*dt) : x, dim);
  };
  m.def("cumsum", cumsum_f, "input"_a, "dim"_a, nb::kw_only(), "dtype"_a = nb::none(),
        "Cumulative sum along dim.");
  c.def("cumsum", cumsum_f, "dim"_a, nb::kw_only(), "dtype"_a = nb::none(),
        "Cumulative sum along dim.");
  auto cnz = [](const Tensor& x, const DimArg& d) { return sum(ne(x, 0), d.dims); };
  m.def("count_nonzero", cnz, "input"_a, "dim"_a = nb::none(), "Number of nonzero elements.");
  c.def("count_nonzero", cnz, "dim"_a = nb::none(), "Number of nonzero elements.");
}

}  // namespace loom::py
