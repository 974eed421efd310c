// Indexing by integer tensors, torch's API: gather and scatter_add, and what torch builds on
// them (index_select, take_along_dim, embedding, index_add) recorded as the same two primitives
// over a view of the index (a 1-d index expanded over the other dims). Shapes, dtypes and
// devices are checked at the call; an index out of range is a value only the kernel sees, so it
// is checked with the work and raised at the next sync point (fusion/checks.h).
#include "ops/index_prims.h"
#include "ops/record.h"

namespace loom {
namespace {

void check_index_dtype(const char* op, const Tensor& index, const Tensor& x) {
  LOOM_CHECK(index.dtype() == DType::Int64 || index.dtype() == DType::Int32, Type, op,
             ": index must be int64 or int32, got ", dtype_name(index.dtype()), " of shape ",
             shape_str(index.shape()), " (input of shape ", shape_str(x.shape()), ")");
  check_same_device(op, x, index);
}

// Records the check that every element of `index` lies in [0, len) (no negative indices, as
// in torch's gather).
void check_range(const char* op, const Tensor& index, int64_t len, int d, const Tensor& x) {
  if (index.numel() == 0) return;
  check_later(logical_or(lt(index, 0), ge(index, len)), ErrorKind::Index,
              detail::cat(op, ": an index is out of range [0, ", len, ") along dim ", d,
                          " of the input of shape ", shape_str(x.shape()), " (index ",
                          dtype_name(index.dtype()), " of shape ", shape_str(index.shape()), ")"));
}

// index's shape as a view of x's rank with the index along `d` (a 1-d or 0-d index).
Dims along(const Tensor& index, int d, int rank) {
  Dims v(size_t(rank), 1);
  v[size_t(d)] = index.numel();
  return v;
}

void check_1d_index(const char* op, const Tensor& index, const Tensor& x) {
  check_index_dtype(op, index, x);
  LOOM_CHECK(index.dim() <= 1, Value, op, ": index must be 1-d, got shape ",
             shape_str(index.shape()), " (input of shape ", shape_str(x.shape()), ")");
}

Tensor gather_checked(const char* op, const Tensor& x, int64_t dim, const Tensor& index) {
  check_index_dtype(op, index, x);
  LOOM_CHECK(index.dim() == x.dim(), Value, op, ": index of shape ", shape_str(index.shape()),
             " must have as many dims as the input of shape ", shape_str(x.shape()));
  if (x.dim() == 0) return gather_checked(op, x.reshape({1}), dim, index.reshape({1})).reshape({});
  int d = normalize_dim(op, dim, x.shape());
  for (int k = 0; k < x.dim(); ++k)
    LOOM_CHECK(k == d || index.shape()[k] <= x.shape()[k], Value, op, ": index of shape ",
               shape_str(index.shape()), " is larger than the input of shape ",
               shape_str(x.shape()), " in dim ", k, " (only dim ", d, " may be)");
  check_range(op, index, x.shape()[d], d, x);
  return gather_prim(x, d, index);
}

void check_scatter_dtypes(const char* op, const Tensor& self, const Tensor& src) {
  check_same_device(op, self, src);
  LOOM_CHECK(self.dtype() == src.dtype(), Type, op, ": src of dtype ", dtype_name(src.dtype()),
             " must have the input's dtype ", dtype_name(self.dtype()), " (shapes ",
             shape_str(self.shape()), " and ", shape_str(src.shape()), ")");
  LOOM_CHECK(self.dtype() != DType::Bool, Type, op, ": not supported for bool (input of shape ",
             shape_str(self.shape()), ")");
}

Tensor scatter_add_checked(const char* op, const Tensor& self, int64_t dim, const Tensor& index,
                           const Tensor& src) {
  check_index_dtype(op, index, self);
  check_scatter_dtypes(op, self, src);
  LOOM_CHECK(index.dim() == self.dim() && src.dim() == self.dim(), Value, op,
             ": input, index and src must have the same number of dims, got shapes ",
             shape_str(self.shape()), ", ", shape_str(index.shape()), " and ",
             shape_str(src.shape()));
  if (self.dim() == 0)
    return scatter_add_checked(op, self.reshape({1}), dim, index.reshape({1}), src.reshape({1}))
        .reshape({});
  int d = normalize_dim(op, dim, self.shape());
  for (int k = 0; k < self.dim(); ++k) {
    LOOM_CHECK(index.shape()[k] <= src.shape()[k], Value, op, ": index of shape ",
               shape_str(index.shape()), " is larger than src of shape ", shape_str(src.shape()),
               " in dim ", k);
    LOOM_CHECK(k == d || index.shape()[k] <= self.shape()[k], Value, op, ": index of shape ",
               shape_str(index.shape()), " is larger than the input of shape ",
               shape_str(self.shape()), " in dim ", k, " (only dim ", d, " may be)");
  }
  check_range(op, index, self.shape()[d], d, self);
  return scatter_add_prim(self, d, index, src);
}

}  // namespace

Tensor gather(const Tensor& input, int64_t dim, const Tensor& index) {
  return gather_checked("gather", input, dim, index);
}

Tensor scatter_add(const Tensor& input, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_add_checked("scatter_add", input, dim, index, src);
}

Tensor index_select(const Tensor& input, int64_t dim, const Tensor& index) {
  const char* op = "index_select";
  check_1d_index(op, index, input);
  if (input.dim() == 0) return index_select(input.reshape({1}), dim, index).reshape({});
  int d = normalize_dim(op, dim, input.shape());
  check_range(op, index, input.shape()[d], d, input);
  Shape out = input.shape();
  out[size_t(d)] = index.numel();
  Tensor full = index.reshape(along(index, d, input.dim())).expand(Dims(out.begin(), out.end()));
  return gather_prim(input, d, full);
}

Tensor take_along_dim(const Tensor& input, const Tensor& indices, std::optional<int64_t> dim) {
  const char* op = "take_along_dim";
  if (!dim) return gather_checked(op, input.reshape({-1}), 0, indices.reshape({-1}));
  LOOM_CHECK(indices.dim() == input.dim(), Value, op, ": indices of shape ",
             shape_str(indices.shape()), " must have as many dims as the input of shape ",
             shape_str(input.shape()));
  if (input.dim() == 0) return gather_checked(op, input, *dim, indices);
  int d = normalize_dim(op, *dim, input.shape());
  // Every dim but `d` broadcasts, as torch's does.
  Shape xs = input.shape(), is = indices.shape();
  xs[size_t(d)] = is[size_t(d)] = 1;
  Shape b = broadcast_shapes(op, xs, is);
  Dims xb(b.begin(), b.end()), ib(b.begin(), b.end());
  xb[size_t(d)] = input.shape()[d];
  ib[size_t(d)] = indices.shape()[d];
  return gather_checked(op, input.expand(xb), d, indices.expand(ib));
}

Tensor embedding(const Tensor& input, const Tensor& weight) {
  const char* op = "embedding";
  check_index_dtype(op, input, weight);
  LOOM_CHECK(weight.dim() == 2, Value, op,
             ": weight must be 2-d [num_embeddings, embedding_dim], got shape ",
             shape_str(weight.shape()), " (input of shape ", shape_str(input.shape()), ")");
  const int64_t n = input.numel(), D = weight.shape()[1];
  check_range(op, input, weight.shape()[0], 0, weight);
  Tensor rows = gather_prim(weight, 0, input.reshape({n, 1}).expand({n, D}));
  Dims out(input.shape().begin(), input.shape().end());
  out.push_back(D);
  return rows.reshape(out);
}

Tensor index_add(const Tensor& input, int64_t dim, const Tensor& index, const Tensor& source,
                 Scalar alpha) {
  const char* op = "index_add";
  check_1d_index(op, index, input);
  LOOM_CHECK(source.dim() == input.dim(), Value, op, ": source of shape ",
             shape_str(source.shape()), " must have as many dims as the input of shape ",
             shape_str(input.shape()));
  if (input.dim() == 0)
    return index_add(input.reshape({1}), dim, index, source.reshape({1}), alpha).reshape({});
  int d = normalize_dim(op, dim, input.shape());
  for (int k = 0; k < input.dim(); ++k)
    LOOM_CHECK(k == d ? source.shape()[k] == index.numel() : source.shape()[k] == input.shape()[k],
               Value, op, ": source of shape ", shape_str(source.shape()),
               " does not fit the input of shape ", shape_str(input.shape()), " and index of ",
               index.numel(), " elements along dim ", d, " (dim ", k, ")");
  LOOM_CHECK(alpha.kind != Scalar::Kind::Float || is_floating(source.dtype()), Type, op,
             ": a float alpha needs a floating source, got ", dtype_name(source.dtype()),
             " of shape ", shape_str(source.shape()));
  check_scatter_dtypes(op, input, source);
  bool one = alpha.kind != Scalar::Kind::Float && alpha.i == 1;
  Tensor src = one ? source : cast(source * alpha, source.dtype());
  check_range(op, index, input.shape()[d], d, input);
  Tensor full = index.reshape(along(index, d, input.dim()))
                    .expand(Dims(source.shape().begin(), source.shape().end()));
  return scatter_add_prim(input, d, full, src);
}

Tensor Tensor::gather(int64_t dim, const Tensor& index) const {
  return loom::gather(*this, dim, index);
}
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  return loom::index_select(*this, dim, index);
}
Tensor Tensor::take_along_dim(const Tensor& indices, std::optional<int64_t> dim) const {
  return loom::take_along_dim(*this, indices, dim);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return loom::scatter_add(*this, dim, index, src);
}
Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& source,
                         Scalar alpha) const {
  return loom::index_add(*this, dim, index, source, alpha);
}

}  // namespace loom
