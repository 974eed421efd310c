// Indexing by integer tensors: gather, index_select, take_along_dim, embedding, scatter_add and
// index_add (and their in-place forms), with torch's argument names. An out-of-range index
// raises IndexError at the next sync point.
#include "bindings/common.h"

namespace loom::py {

void init_index_ops(nb::module_& m) {
  auto c = nb::borrow<nb::class_<Tensor>>(nb::type<Tensor>());
  m.def(
      "gather",
      [](const Tensor& x, int64_t dim, const Tensor& index) { return gather(x, dim, index); },
      "input"_a, "dim"_a, "index"_a,
      "gather(input, dim, index) -> Tensor\n\nout[i][j] = input[i][index[i][j]] along dim 1 "
      "(torch.gather); the result has index's shape.");
  c.def(
      "gather",
      [](const Tensor& x, int64_t dim, const Tensor& index) { return gather(x, dim, index); },
      "dim"_a, "index"_a, "See loom.gather.");
  m.def(
      "index_select",
      [](const Tensor& x, int64_t dim, const Tensor& index) { return index_select(x, dim, index); },
      "input"_a, "dim"_a, "index"_a,
      "index_select(input, dim, index) -> Tensor\n\nThe slices of input at a 1-d index along dim.");
  c.def(
      "index_select",
      [](const Tensor& x, int64_t dim, const Tensor& index) { return index_select(x, dim, index); },
      "dim"_a, "index"_a, "See loom.index_select.");
  m.def(
      "take_along_dim",
      [](const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
        return take_along_dim(x, indices, dim);
      },
      "input"_a, "indices"_a, "dim"_a = nb::none(),
      "take_along_dim(input, indices, dim=None) -> Tensor\n\ngather with the other dims "
      "broadcast; without dim, of the flattened input.");
  c.def(
      "take_along_dim",
      [](const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
        return take_along_dim(x, indices, dim);
      },
      "indices"_a, "dim"_a = nb::none(), "See loom.take_along_dim.");
  m.def(
      "embedding",
      [](const Tensor& input, const Tensor& weight) { return embedding(input, weight); }, "input"_a,
      "weight"_a, "embedding(input, weight) -> Tensor\n\nThe rows of weight at input's indices.");
  auto scat = [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
    return scatter_add(x, dim, index, src);
  };
  m.def("scatter_add", scat, "input"_a, "dim"_a, "index"_a, "src"_a,
        "scatter_add(input, dim, index, src) -> Tensor\n\ninput with src[i][j] added at "
        "[i][index[i][j]] along dim 1; duplicates accumulate in a fixed order.");
  c.def("scatter_add", scat, "dim"_a, "index"_a, "src"_a, "See loom.scatter_add.");
  c.def(
      "scatter_add_",
      [](Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) -> Tensor& {
        return x.scatter_add_(dim, index, src);
      },
      "dim"_a, "index"_a, "src"_a, nb::rv_policy::reference, "In-place scatter_add.");
  auto iadd = [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 Scalar alpha) { return index_add(x, dim, index, source, alpha); };
  m.def("index_add", iadd, "input"_a, "dim"_a, "index"_a, "source"_a, nb::kw_only(), "alpha"_a = 1,
        "index_add(input, dim, index, source, *, alpha=1) -> Tensor\n\ninput with alpha * "
        "source's slices added at a 1-d index along dim; duplicates accumulate in a fixed order.");
  c.def(
      "index_add",
      [iadd](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
             Scalar alpha) { return iadd(x, dim, index, source, alpha); },
      "dim"_a, "index"_a, "source"_a, nb::kw_only(), "alpha"_a = 1, "See loom.index_add.");
  c.def(
      "index_add_",
      [](Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
         Scalar alpha) -> Tensor& { return x.index_add_(dim, index, source, alpha); },
      "dim"_a, "index"_a, "source"_a, nb::kw_only(), "alpha"_a = 1, nb::rv_policy::reference,
      "In-place index_add.");
}

}  // namespace loom::py
