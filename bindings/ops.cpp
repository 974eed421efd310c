// The op table (fusion/prims.h) bound row by row: loom.exp(x) and x.exp(), loom.add(a, b)
// and a.add(b), in-place x.exp_() / a.add_(b); then the non-table pointwise ops and
// composites (where, clamp, lerp, addcmul, softmax, layer_norm, matmul, cat, ...).
#include <string>

#include "bindings/common.h"

namespace loom::py {
namespace {

std::string unary_doc(const char* api, UnaryKind k) {
  std::string d = std::string(api) + "(input) -> Tensor\n\nElementwise " + api + " (op table row).";
  if (k == UnaryKind::FloatOut) d += " Integer and bool inputs compute in float32.";
  if (k == UnaryKind::BoolOut) d += " The result is bool.";
  if (k == UnaryKind::Same) d += " The result keeps the input dtype.";
  return d;
}

std::string binary_doc(const char* api, BinaryKind k) {
  std::string d = std::string(api) + "(input, other) -> Tensor\n\nElementwise " + api +
                  " with broadcasting; either side may be a Python scalar (op table row).";
  switch (k) {
    case BinaryKind::Arith:
      d += " The result has torch's promoted dtype.";
      break;
    case BinaryKind::TrueDiv:
      d += " Integer inputs give float32.";
      break;
    case BinaryKind::Floating:
      d += " Floating tensors only.";
      break;
    case BinaryKind::Compare:
      d += " The result is bool.";
      break;
    case BinaryKind::Logical:
      d += " Compares truthiness; the result is bool.";
      break;
    case BinaryKind::Bitwise:
      d += " Integer and bool tensors only.";
      break;
  }
  return d;
}

template <Tensor (*f)(const Tensor&)>
void bind_unary(nb::module_& m, nb::class_<Tensor>& c, const char* api, UnaryKind k) {
  std::string doc = unary_doc(api, k);
  m.def(api, f, "input"_a, doc.c_str());
  c.def(api, f, doc.c_str());
  std::string ip = std::string(api) + "_";
  c.def(
      ip.c_str(), [ip](Tensor& t) -> Tensor& { return assign_result(t, f(t), ip.c_str()); },
      nb::rv_policy::reference,
      (ip + "() -> Tensor\n\nIn-place " + api + "; returns self.").c_str());
}

template <Tensor (*ft)(const Tensor&, const Tensor&), Tensor (*fs)(const Tensor&, Scalar),
          Tensor (*fr)(Scalar, const Tensor&)>
void bind_binary(nb::module_& m, nb::class_<Tensor>& c, const char* api, BinaryKind k) {
  std::string doc = binary_doc(api, k);
  m.def(api, ft, "input"_a, "other"_a, doc.c_str());
  m.def(api, fs, "input"_a, "other"_a, doc.c_str());
  m.def(api, fr, "input"_a, "other"_a, doc.c_str());
  c.def(api, ft, "other"_a, doc.c_str());
  c.def(api, fs, "other"_a, doc.c_str());
  std::string ip = std::string(api) + "_";
  std::string ipdoc = ip + "(other) -> Tensor\n\nIn-place " + api + "; returns self.";
  c.def(
      ip.c_str(),
      [ip](Tensor& t, const Tensor& o) -> Tensor& {
        return assign_result(t, ft(t, o), ip.c_str());
      },
      "other"_a, nb::rv_policy::reference, ipdoc.c_str());
  c.def(
      ip.c_str(),
      [ip](Tensor& t, Scalar o) -> Tensor& { return assign_result(t, fs(t, o), ip.c_str()); },
      "other"_a, nb::rv_policy::reference, ipdoc.c_str());
}

using U = Tensor (*)(const Tensor&);
using BT = Tensor (*)(const Tensor&, const Tensor&);
using BS = Tensor (*)(const Tensor&, Scalar);
using BR = Tensor (*)(Scalar, const Tensor&);

void bind_table(nb::module_& m, nb::class_<Tensor>& c) {
#define LOOM_X(name, api, kind) bind_unary<static_cast<U>(&loom::api)>(m, c, #api, UnaryKind::kind);
  LOOM_UNARY_OPS(LOOM_X)
#undef LOOM_X
#define LOOM_X(name, api, kind)                                         \
  bind_binary<static_cast<BT>(&loom::api), static_cast<BS>(&loom::api), \
              static_cast<BR>(&loom::api)>(m, c, #api, BinaryKind::kind);
  LOOM_BINARY_OPS(LOOM_X)
#undef LOOM_X
}

// torch's add/sub with alpha: input + alpha * other.
void bind_alpha(nb::module_& m, nb::class_<Tensor>& c) {
  m.def(
      "add", [](const Tensor& a, const Tensor& b, Scalar alpha) { return add(a, mul(b, alpha)); },
      "input"_a, "other"_a, nb::kw_only(), "alpha"_a, "input + alpha * other.");
  m.def(
      "sub", [](const Tensor& a, const Tensor& b, Scalar alpha) { return sub(a, mul(b, alpha)); },
      "input"_a, "other"_a, nb::kw_only(), "alpha"_a, "input - alpha * other.");
  c.def(
      "add", [](const Tensor& a, const Tensor& b, Scalar alpha) { return add(a, mul(b, alpha)); },
      "other"_a, nb::kw_only(), "alpha"_a, "self + alpha * other.");
  c.def(
      "sub", [](const Tensor& a, const Tensor& b, Scalar alpha) { return sub(a, mul(b, alpha)); },
      "other"_a, nb::kw_only(), "alpha"_a, "self - alpha * other.");
  auto ref = nb::rv_policy::reference;
  c.def(
      "add_", [](Tensor& a, const Tensor& b, Scalar alpha) -> Tensor& { return a.add_(b, alpha); },
      "other"_a, nb::kw_only(), "alpha"_a = 1, ref, "In place: self += alpha * other.");
  c.def(
      "add_", [](Tensor& a, Scalar b) -> Tensor& { return a.add_(b); }, "other"_a, ref,
      "In place: self += other.");
  c.def(
      "sub_", [](Tensor& a, const Tensor& b, Scalar alpha) -> Tensor& { return a.sub_(b, alpha); },
      "other"_a, nb::kw_only(), "alpha"_a = 1, ref, "In place: self -= alpha * other.");
  c.def(
      "sub_", [](Tensor& a, Scalar b) -> Tensor& { return a.sub_(b); }, "other"_a, ref,
      "In place: self -= other.");
}

// Aliases with torch's other names.
void bind_aliases(nb::module_& m, nb::class_<Tensor>& c) {
  static const std::pair<const char*, const char*> names[] = {
      {"subtract", "sub"}, {"multiply", "mul"},     {"divide", "div"},    {"true_divide", "div"},
      {"negative", "neg"}, {"absolute", "abs"},     {"arctan2", "atan2"}, {"greater", "gt"},
      {"less", "lt"},      {"greater_equal", "ge"}, {"less_equal", "le"}, {"not_equal", "ne"}};
  for (auto& [alias, name] : names) {
    m.attr(alias) = m.attr(name);
  }
  (void)c;
}

void bind_pointwise_extra(nb::module_& m, nb::class_<Tensor>& c) {
  using OT = std::optional<Tensor>;
  using OS = std::optional<Scalar>;
  m.def(
      "gelu", [](const Tensor& x, const std::string& a) { return gelu(x, a); }, "input"_a,
      "approximate"_a = "none", "GELU; approximate='tanh' uses the tanh form.");
  m.def("where", nb::overload_cast<const Tensor&, const Tensor&, const Tensor&>(&where),
        "condition"_a, "input"_a, "other"_a, "input where condition is True, else other.");
  m.def("where", nb::overload_cast<const Tensor&, Scalar, const Tensor&>(&where), "condition"_a,
        "input"_a, "other"_a, "input where condition is True, else other.");
  m.def("where", nb::overload_cast<const Tensor&, const Tensor&, Scalar>(&where), "condition"_a,
        "input"_a, "other"_a, "input where condition is True, else other.");
  m.def("where", nb::overload_cast<const Tensor&, Scalar, Scalar>(&where), "condition"_a, "input"_a,
        "other"_a, "input where condition is True, else other.");
  c.def(
      "where",
      [](const Tensor& x, const Tensor& cond, const Tensor& o) { return where(cond, x, o); },
      "condition"_a, "other"_a, "self where condition is True, else other.");
  c.def(
      "where", [](const Tensor& x, const Tensor& cond, Scalar o) { return where(cond, x, o); },
      "condition"_a, "other"_a, "self where condition is True, else other.");
  m.def(
      "equal",
      [](const Tensor& a, const Tensor& b) {
        return a.shape() == b.shape() && eq(a, b).all().item<bool>();
      },
      "input"_a, "other"_a, "True when both have the same shape and elements (a sync point).");
  auto clamp_s = nb::overload_cast<const Tensor&, OS, OS>(&clamp);
  auto clamp_t = nb::overload_cast<const Tensor&, const OT&, const OT&>(&clamp);
  for (const char* n : {"clamp", "clip"}) {
    m.def(n, clamp_s, "input"_a, "min"_a = nb::none(), "max"_a = nb::none(),
          "Elementwise min(max(input, min), max).");
    m.def(n, clamp_t, "input"_a, "min"_a = nb::none(), "max"_a = nb::none(),
          "Elementwise min(max(input, min), max) with tensor bounds.");
    c.def(n, clamp_s, "min"_a = nb::none(), "max"_a = nb::none(), "Elementwise clamp.");
    c.def(n, clamp_t, "min"_a = nb::none(), "max"_a = nb::none(), "Elementwise clamp.");
  }
  c.def(
      "clamp_", [](Tensor& x, OS lo, OS hi) -> Tensor& { return x.clamp_(lo, hi); },
      "min"_a = nb::none(), "max"_a = nb::none(), nb::rv_policy::reference, "In-place clamp.");
  c.def(
      "clamp_",
      [](Tensor& x, const OT& lo, const OT& hi) -> Tensor& {
        return assign_result(x, clamp(x, lo, hi), "clamp_");
      },
      "min"_a = nb::none(), "max"_a = nb::none(), nb::rv_policy::reference,
      "In-place clamp with tensor bounds.");
  m.def("isclose", &isclose, "input"_a, "other"_a, "rtol"_a = 1e-05, "atol"_a = 1e-08,
        "equal_nan"_a = false, "|input - other| <= atol + rtol * |other|, elementwise (torch).");
  c.def("isclose", &isclose, "other"_a, "rtol"_a = 1e-05, "atol"_a = 1e-08, "equal_nan"_a = false,
        "|self - other| <= atol + rtol * |other|, elementwise.");
  m.def("allclose", &allclose, "input"_a, "other"_a, "rtol"_a = 1e-05, "atol"_a = 1e-08,
        "equal_nan"_a = false, "Whether isclose holds everywhere (a sync point).");
  c.def("allclose", &allclose, "other"_a, "rtol"_a = 1e-05, "atol"_a = 1e-08, "equal_nan"_a = false,
        "Whether isclose holds everywhere (a sync point).");
  using OD = std::optional<double>;
  m.def("nan_to_num", &nan_to_num, "input"_a, "nan"_a = 0.0, "posinf"_a = nb::none(),
        "neginf"_a = nb::none(),
        "NaN to nan, +-inf to posinf / neginf (default: the dtype's largest / lowest).");
  c.def("nan_to_num", &nan_to_num, "nan"_a = 0.0, "posinf"_a = nb::none(), "neginf"_a = nb::none(),
        "NaN and infinities replaced (loom.nan_to_num).");
  c.def(
      "nan_to_num_",
      [](Tensor& x, double nan, OD pi, OD ni) -> Tensor& {
        return assign_result(x, nan_to_num(x, nan, pi, ni), "nan_to_num_");
      },
      "nan"_a = 0.0, "posinf"_a = nb::none(), "neginf"_a = nb::none(), nb::rv_policy::reference,
      "In-place nan_to_num.");
  m.def("lerp", nb::overload_cast<const Tensor&, const Tensor&, Scalar>(&lerp), "input"_a, "end"_a,
        "weight"_a, "input + weight * (end - input).");
  m.def("lerp", nb::overload_cast<const Tensor&, const Tensor&, const Tensor&>(&lerp), "input"_a,
        "end"_a, "weight"_a, "input + weight * (end - input).");
  c.def("lerp", nb::overload_cast<const Tensor&, const Tensor&, Scalar>(&lerp), "end"_a, "weight"_a,
        "self + weight * (end - self).");
  c.def("lerp", nb::overload_cast<const Tensor&, const Tensor&, const Tensor&>(&lerp), "end"_a,
        "weight"_a, "self + weight * (end - self).");
  c.def(
      "lerp_", [](Tensor& x, const Tensor& e, Scalar w) -> Tensor& { return x.lerp_(e, w); },
      "end"_a, "weight"_a, nb::rv_policy::reference, "In-place lerp.");
  m.def("addcmul", &addcmul, "input"_a, "tensor1"_a, "tensor2"_a, nb::kw_only(), "value"_a = 1,
        "input + value * tensor1 * tensor2.");
  m.def("addcdiv", &addcdiv, "input"_a, "tensor1"_a, "tensor2"_a, nb::kw_only(), "value"_a = 1,
        "input + value * tensor1 / tensor2.");
  c.def("addcmul", &addcmul, "tensor1"_a, "tensor2"_a, nb::kw_only(), "value"_a = 1,
        "self + value * tensor1 * tensor2.");
  c.def("addcdiv", &addcdiv, "tensor1"_a, "tensor2"_a, nb::kw_only(), "value"_a = 1,
        "self + value * tensor1 / tensor2.");
  c.def(
      "addcmul_",
      [](Tensor& x, const Tensor& a, const Tensor& b, Scalar v) -> Tensor& {
        return x.addcmul_(a, b, v);
      },
      "tensor1"_a, "tensor2"_a, nb::kw_only(), "value"_a = 1, nb::rv_policy::reference,
      "In-place addcmul.");
  c.def(
      "addcdiv_",
      [](Tensor& x, const Tensor& a, const Tensor& b, Scalar v) -> Tensor& {
        return x.addcdiv_(a, b, v);
      },
      "tensor1"_a, "tensor2"_a, nb::kw_only(), "value"_a = 1, nb::rv_policy::reference,
      "In-place addcdiv.");
  auto ref = nb::rv_policy::reference;
  c.def(
      "mul_", [](Tensor& a, const Tensor& b) -> Tensor& { return a.mul_(b); }, "other"_a, ref,
      "In place: self *= other.");
  c.def(
      "div_", [](Tensor& a, const Tensor& b) -> Tensor& { return a.div_(b); }, "other"_a, ref,
      "In place: self /= other.");
  c.def(
      "copy_", [](Tensor& a, const Tensor& b) -> Tensor& { return a.copy_(b); }, "src"_a, ref,
      "Copies src (broadcast, converted) into self; returns self.");
  c.def(
      "fill_", [](Tensor& a, Scalar v) -> Tensor& { return a.fill_(v); }, "value"_a, ref,
      "Fills self with value; returns self.");
  c.def(
      "zero_", [](Tensor& a) -> Tensor& { return a.zero_(); }, ref, "Fills self with zeros.");
  m.def("cast", &cast, "input"_a, "dtype"_a, "input converted to dtype.");
}

// Softmax-style ops accept torch's dtype= (the input is converted first).
Tensor with_dtype(const Tensor& x, std::optional<DType> dt) { return dt ? x.to(*dt) : x; }

void bind_composites(nb::module_& m, nb::class_<Tensor>& c) {
  using OT = std::optional<Tensor>;
  auto softmax_f = [](const Tensor& x, int64_t dim, std::optional<DType> dt) {
    return softmax(with_dtype(x, dt), dim);
  };
  auto log_softmax_f = [](const Tensor& x, int64_t dim, std::optional<DType> dt) {
    return log_softmax(with_dtype(x, dt), dim);
  };
  m.def("softmax", softmax_f, "input"_a, "dim"_a, "dtype"_a = nb::none(),
        "exp(x) / sum(exp(x)) along dim, computed stably (one fused kernel).");
  m.def("log_softmax", log_softmax_f, "input"_a, "dim"_a, "dtype"_a = nb::none(),
        "log(softmax(x)) along dim, computed stably.");
  c.def("softmax", softmax_f, "dim"_a, "dtype"_a = nb::none(), "softmax along dim.");
  c.def("log_softmax", log_softmax_f, "dim"_a, "dtype"_a = nb::none(), "log_softmax along dim.");
  m.def(
      "layer_norm",
      [](const Tensor& x, const DimArg& ns, const OT& w, const OT& b, double eps) {
        return layer_norm(x, ns.dims, w, b, eps);
      },
      "input"_a, "normalized_shape"_a, "weight"_a = nb::none(), "bias"_a = nb::none(),
      "eps"_a = 1e-5, "Layer normalization over the trailing normalized_shape dims.");
  m.def(
      "rms_norm",
      [](const Tensor& x, const DimArg& ns, const OT& w, std::optional<double> eps) {
        return rms_norm(x, ns.dims, w, eps);
      },
      "input"_a, "normalized_shape"_a, "weight"_a = nb::none(), "eps"_a = nb::none(),
      "RMS normalization over the trailing normalized_shape dims.");
  m.def("dropout", &dropout, "input"_a, "p"_a = 0.5, "training"_a = true,
        "Zeroes elements with probability p and scales the rest by 1/(1-p) when training.");
  m.def("matmul", &matmul, "input"_a, "other"_a, "Matrix product with batch broadcasting.");
  m.def("_svdvals", &svdvals, "A"_a, "loom.linalg.svdvals (the singular values, descending).");
  m.def("bmm", &bmm, "input"_a, "mat2"_a, "Batched matrix product of [B, M, K] and [B, K, N].");
  m.def(
      "mm",
      [](const Tensor& a, const Tensor& b) {
        LOOM_CHECK(a.dim() == 2 && b.dim() == 2, Value, "mm: expected 2-D tensors, got ",
                   shape_str(a.shape()), " and ", shape_str(b.shape()));
        return matmul(a, b);
      },
      "input"_a, "mat2"_a, "Matrix product of two 2-D tensors.");
  c.def("matmul", &matmul, "other"_a, "Matrix product with batch broadcasting.");
  c.def("bmm", &bmm, "mat2"_a, "Batched matrix product.");
  for (const char* n : {"cat", "concat", "concatenate"})
    m.def(n, &cat, "tensors"_a, "dim"_a = 0, "Joins tensors along an existing dim.");
  m.def("stack", &stack, "tensors"_a, "dim"_a = 0, "Joins tensors along a new dim.");
}

}  // namespace

// {"unary": [(api, kind)], "binary": [...], "reduce": [...]}: the table, for tests and docs.
nb::dict op_table() {
  nb::dict d;
  nb::list u, b, r;
#define LOOM_X(name, api, kind) u.append(nb::make_tuple(#api, #kind));
  LOOM_UNARY_OPS(LOOM_X)
#undef LOOM_X
#define LOOM_X(name, api, kind) b.append(nb::make_tuple(#api, #kind));
  LOOM_BINARY_OPS(LOOM_X)
#undef LOOM_X
#define LOOM_X(name, api, kind, ...) r.append(nb::make_tuple(#api, #kind));
  LOOM_REDUCE_OPS(LOOM_X)
#undef LOOM_X
  d["unary"] = u;
  d["binary"] = b;
  d["reduce"] = r;
  return d;
}

void init_ops(nb::module_& m) {
  auto c = nb::borrow<nb::class_<Tensor>>(nb::type<Tensor>());
  m.def("op_table", &op_table,
        "The op table rows as {'unary'|'binary'|'reduce': [(name, kind), ...]}.");
  bind_table(m, c);
  bind_alpha(m, c);
  bind_pointwise_extra(m, c);
  bind_composites(m, c);
  bind_aliases(m, c);
}

}  // namespace loom::py
