// Masking ops: tril / triu, masked_fill and one_hot. Each is one `where` (or comparison)
// over an index iota, so it fuses into the ops around it (a causal mask costs no memory).
#include "ops/record.h"

namespace loom {
namespace {

// Whether element (i, j) of the last two dims has j - i <= diagonal (lower) / >= (upper).
Tensor band(const char* op, const Tensor& x, int64_t diagonal, bool lower) {
  LOOM_CHECK(x.dim() >= 2, Value, op, ": needs at least 2 dims, got shape ", shape_str(x.shape()));
  const Shape& s = x.shape();
  int r = x.dim();
  Shape mat{s[r - 2], s[r - 1]};
  Tensor rows = iota(mat, 0, x.device()), cols = iota(mat, 1, x.device());
  Tensor diff = cols - rows;
  return lower ? le(diff, diagonal) : ge(diff, diagonal);
}

}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) {
  return where(band("tril", x, diagonal, true), x, Scalar(0)).to(x.dtype());
}

Tensor triu(const Tensor& x, int64_t diagonal) {
  return where(band("triu", x, diagonal, false), x, Scalar(0)).to(x.dtype());
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  LOOM_CHECK(mask.dtype() == DType::Bool, Type, "masked_fill: mask must be bool, got ",
             dtype_name(mask.dtype()), " of shape ", shape_str(mask.shape()));
  check_same_device("masked_fill", x, mask);
  Tensor y = where(mask, value, x);
  LOOM_CHECK(y.shape() == x.shape(), Value, "masked_fill: mask of shape ", shape_str(mask.shape()),
             " does not broadcast to input of shape ", shape_str(x.shape()));
  return y.to(x.dtype());
}

Tensor& Tensor::masked_fill_(const Tensor& mask, Scalar value) {
  return copy_(loom::masked_fill(*this, mask, value));
}

Tensor Tensor::masked_fill(const Tensor& mask, Scalar value) const {
  return loom::masked_fill(*this, mask, value);
}

Tensor one_hot(const Tensor& t, int64_t num_classes) {
  LOOM_CHECK(t.dtype() == DType::Int64 || t.dtype() == DType::Int32, Type,
             "one_hot: needs an integer class tensor, got ", dtype_name(t.dtype()), " of shape ",
             shape_str(t.shape()));
  if (num_classes < 0) {
    // As torch: the count is the largest class + 1, which must be read (a sync point).
    LOOM_CHECK(t.numel() > 0, Value,
               "one_hot: can not infer the number of classes of an "
               "empty tensor (pass num_classes)");
    num_classes = t.amax().item<int64_t>() + 1;
  }
  Shape s = t.shape();
  s.push_back(num_classes);
  if (t.numel() > 0)
    check_later(logical_or(lt(t, 0), ge(t, num_classes)), ErrorKind::Index,
                detail::cat("one_hot: a class is out of range [0, ", num_classes,
                            ") in a tensor of shape ", shape_str(t.shape())));
  Tensor cls = iota(s, int(s.size()) - 1, t.device());
  return cast(eq(cls, t.unsqueeze(-1)), DType::Int64);
}

}  // namespace loom
