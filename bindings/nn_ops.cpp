// The ops models need beside the core ones: triangles, masked_fill, one_hot and attention.
#include "bindings/common.h"

namespace loom::py {

void init_nn_ops(nb::module_& m) {
  auto c = nb::borrow<nb::class_<Tensor>>(nb::type<Tensor>());
  for (auto [name, fn] : {std::pair{"tril", &tril}, std::pair{"triu", &triu}}) {
    m.def(name, fn, "input"_a, "diagonal"_a = 0,
          "The triangle of the last two dims (j - i <= diagonal for tril, >= for triu); zeros "
          "elsewhere.");
    c.def(name, fn, "diagonal"_a = 0, "The triangle of the last two dims.");
  }
  m.def("masked_fill", &masked_fill, "input"_a, "mask"_a, "value"_a,
        "value where mask is True, else input (keeps input's dtype).");
  c.def(
      "masked_fill",
      [](const Tensor& x, const Tensor& mask, Scalar v) { return x.masked_fill(mask, v); },
      "mask"_a, "value"_a, "value where mask is True, else self (keeps self's dtype).");
  c.def(
      "masked_fill_",
      [](Tensor& x, const Tensor& mask, Scalar v) -> Tensor& { return x.masked_fill_(mask, v); },
      "mask"_a, "value"_a, nb::rv_policy::reference, "In place: value where mask is True.");
  m.def("one_hot", &one_hot, "tensor"_a, "num_classes"_a = -1,
        "int64 [..., num_classes] with a 1 at each class (num_classes=-1: the largest + 1, "
        "read from the tensor).");
  m.def("multinomial", &multinomial, "input"_a, "num_samples"_a, "replacement"_a = false,
        "Category indices drawn from each row's weights (int64 [..., num_samples]).");
  c.def("multinomial", &multinomial, "num_samples"_a, "replacement"_a = false,
        "Category indices drawn from each row's weights.");
  m.def("_sort", &sort, "input"_a, "dim"_a = -1, "descending"_a = false, "stable"_a = false,
        "(values, indices) sorted along dim (stable; NaN largest).");
  m.def("argsort", &argsort, "input"_a, "dim"_a = -1, "descending"_a = false, "stable"_a = false,
        "The indices that sort input along dim (stable; NaN largest).");
  c.def("argsort", &argsort, "dim"_a = -1, "descending"_a = false, "stable"_a = false,
        "The indices that sort self along dim.");
  m.def("_topk", &topk, "input"_a, "k"_a, "dim"_a = -1, "largest"_a = true, "sorted"_a = true,
        "(values, indices) of the k largest (or smallest) along dim, in order.");
  m.def("_linear", &linear, "input"_a, "weight"_a, "bias"_a = nb::none(),
        "input @ weight^T + bias (weight [out_features, in_features]); the bias add fuses "
        "into the matmul's epilogue.");
  m.def("scaled_dot_product_attention", &scaled_dot_product_attention, "query"_a, "key"_a,
        "value"_a, "attn_mask"_a = nb::none(), "dropout_p"_a = 0.0, "is_causal"_a = false,
        "scale"_a = nb::none(),
        "softmax(query @ key^T * scale + mask) @ value (scale defaults to 1/sqrt(E)); the "
        "scale, mask and softmax run as one fused kernel.");
}

}  // namespace loom::py
