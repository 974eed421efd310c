// In-place ops: compute the new value lazily, then make it the buffer's next version.
#include "ops/grad_node.h"
#include "ops/record.h"

namespace loom {
namespace {

// Like torch: an in-place write through a view where several elements share one memory
// location (an expanded dim) has no single answer, so it is an error.
void check_writable(const char* op, const Tensor& t) {
  for (int d = 0; d < t.dim() && t.numel() > 0; ++d)
    LOOM_CHECK(t.strides()[d] != 0 || t.shape()[d] <= 1, Value, op,
               ": more than one element of the written-to tensor of shape ", shape_str(t.shape()),
               " refers to a single memory location (expanded dim ", d, "); clone() it first");
}

// Value for an in-place update of `t`: same shape (no broadcasting of t) and t's dtype.
Tensor fit(const char* op, const Tensor& t, Tensor v) {
  check_writable(op, t);
  check_same_device(op, t, v);
  Shape s = broadcast_shapes(op, t.shape(), v.shape());
  LOOM_CHECK(s == t.shape(), Value, op, ": output of shape ", shape_str(t.shape()),
             " does not match the broadcast shape ", shape_str(s));
  // Only copy_ converts down a category (float -> int); clamp_(int, 0.5) errors as in torch.
  if (dtype_category(v.dtype()) > dtype_category(t.dtype()) && std::string(op) != "copy_")
    throw Error(ErrorKind::Type, std::string(op) + ": result type " + dtype_name(v.dtype()) +
                                     " can't be cast to the desired output type " +
                                     dtype_name(t.dtype()) + " (shapes " + shape_str(t.shape()) +
                                     " and " + shape_str(v.shape()) + ")");
  // Reassign rather than copy, so a fresh result keeps a single holder (see update()).
  if (v.dtype() != t.dtype()) v = cast(v, t.dtype());
  if (v.shape() != t.shape()) v = v.expand(Dims(t.shape().begin(), t.shape().end()));
  return v;
}

// Hands the value over as the sole holder of its buffer, so a fresh result becomes the
// new version itself instead of being copied.
void update(const char* op, Tensor& t, Tensor&& value) {
  Tensor v = std::move(value);
  autograd::check_inplace(op, t, v);
  assign_inplace(t, v);
  autograd::rebase_inplace(t, v);
}

// The operand an in-place op computes from: t itself, or its snapshot when the op is tracked
// (the rule may read t's values from before the write).
Tensor source(const Tensor& t, const Tensor& o = Tensor()) {
  bool tracked = is_grad_enabled() && (t.requires_grad() || (o.defined() && o.requires_grad()));
  return tracked ? autograd::snapshot(t) : t;
}

}  // namespace

Tensor& Tensor::add_(const Tensor& o, Scalar alpha) {
  bool one = alpha.kind == Scalar::Kind::Int && alpha.i == 1;
  update("add_", *this,
         fit("add_", *this, one ? add(source(*this, o), o) : add(source(*this, o), o * alpha)));
  return *this;
}
Tensor& Tensor::add_(Scalar s) {
  update("add_", *this, fit("add_", *this, add(source(*this), s)));
  return *this;
}
Tensor& Tensor::sub_(const Tensor& o, Scalar alpha) {
  bool one = alpha.kind == Scalar::Kind::Int && alpha.i == 1;
  update("sub_", *this,
         fit("sub_", *this, one ? sub(source(*this, o), o) : sub(source(*this, o), o * alpha)));
  return *this;
}
Tensor& Tensor::sub_(Scalar s) {
  update("sub_", *this, fit("sub_", *this, sub(source(*this), s)));
  return *this;
}
Tensor& Tensor::scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) {
  update("scatter_add_", *this,
         fit("scatter_add_", *this, loom::scatter_add(source(*this, src), dim, index, src)));
  return *this;
}
Tensor& Tensor::index_add_(int64_t dim, const Tensor& index, const Tensor& src, Scalar alpha) {
  update("index_add_", *this,
         fit("index_add_", *this, loom::index_add(source(*this, src), dim, index, src, alpha)));
  return *this;
}
Tensor& Tensor::mul_(const Tensor& o) {
  update("mul_", *this, fit("mul_", *this, mul(source(*this, o), o)));
  return *this;
}
Tensor& Tensor::mul_(Scalar s) {
  update("mul_", *this, fit("mul_", *this, mul(source(*this), s)));
  return *this;
}
Tensor& Tensor::div_(const Tensor& o) {
  update("div_", *this, fit("div_", *this, div(source(*this, o), o)));
  return *this;
}
Tensor& Tensor::div_(Scalar s) {
  update("div_", *this, fit("div_", *this, div(source(*this), s)));
  return *this;
}
Tensor& Tensor::copy_(const Tensor& src) {
  Tensor s = src.device() == device_ ? src : src.to(device_);
  if (autograd::needs_grad(s)) s = s.clone();  // a node of its own: src keeps its graph place
  update("copy_", *this, fit("copy_", *this, s));
  return *this;
}
Tensor& Tensor::fill_(Scalar s) {
  check_writable("fill_", *this);
  update("fill_", *this, expand_to(const_tensor(s, dtype_, device_), shape()));
  return *this;
}
Tensor& Tensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) {
  update("clamp_", *this, fit("clamp_", *this, clamp(source(*this), lo, hi)));
  return *this;
}
Tensor& Tensor::addcmul_(const Tensor& a, const Tensor& b, Scalar value) {
  update("addcmul_", *this,
         fit("addcmul_", *this,
             addcmul(source(*this, autograd::needs_grad(a, b) ? a : b), a, b, value)));
  return *this;
}
Tensor& Tensor::addcdiv_(const Tensor& a, const Tensor& b, Scalar value) {
  update("addcdiv_", *this,
         fit("addcdiv_", *this,
             addcdiv(source(*this, autograd::needs_grad(a, b) ? a : b), a, b, value)));
  return *this;
}
Tensor& Tensor::lerp_(const Tensor& end, Scalar weight) {
  update("lerp_", *this, fit("lerp_", *this, lerp(source(*this, end), end, weight)));
  return *this;
}

void Tensor::index_put(const std::vector<Slice>& idx, const Tensor& value) {
  Tensor region = index(idx);
  region.copy_(value);
}
void Tensor::index_put(const std::vector<Slice>& idx, Scalar value) {
  Tensor region = index(idx);
  region.fill_(value);
}

}  // namespace loom
