// In-place ops: compute the new value lazily, then make it the buffer's next version.
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
  if (v.shape() != t.shape()) v = expand_to(v, t.shape());
  return v;
}

// Hands the value over as the sole holder of its buffer, so a fresh result becomes the
// new version itself instead of being copied.
void update(Tensor& t, Tensor&& value) {
  Tensor v = std::move(value);
  assign_inplace(t, v);
}

}  // namespace

Tensor& Tensor::add_(const Tensor& o, Scalar alpha) {
  bool one = alpha.kind == Scalar::Kind::Int && alpha.i == 1;
  update(*this, fit("add_", *this, one ? add(*this, o) : add(*this, o * alpha)));
  return *this;
}
Tensor& Tensor::add_(Scalar s) {
  update(*this, fit("add_", *this, add(*this, s)));
  return *this;
}
Tensor& Tensor::sub_(const Tensor& o, Scalar alpha) {
  bool one = alpha.kind == Scalar::Kind::Int && alpha.i == 1;
  update(*this, fit("sub_", *this, one ? sub(*this, o) : sub(*this, o * alpha)));
  return *this;
}
Tensor& Tensor::sub_(Scalar s) {
  update(*this, fit("sub_", *this, sub(*this, s)));
  return *this;
}
Tensor& Tensor::mul_(const Tensor& o) {
  update(*this, fit("mul_", *this, mul(*this, o)));
  return *this;
}
Tensor& Tensor::mul_(Scalar s) {
  update(*this, fit("mul_", *this, mul(*this, s)));
  return *this;
}
Tensor& Tensor::div_(const Tensor& o) {
  update(*this, fit("div_", *this, div(*this, o)));
  return *this;
}
Tensor& Tensor::div_(Scalar s) {
  update(*this, fit("div_", *this, div(*this, s)));
  return *this;
}
Tensor& Tensor::copy_(const Tensor& src) {
  Tensor s = src.device() == device_ ? src : src.to(device_);
  update(*this, fit("copy_", *this, s));
  return *this;
}
Tensor& Tensor::fill_(Scalar s) {
  check_writable("fill_", *this);
  update(*this, expand_to(const_tensor(s, dtype_, device_), shape()));
  return *this;
}
Tensor& Tensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) {
  update(*this, fit("clamp_", *this, clamp(*this, lo, hi)));
  return *this;
}
Tensor& Tensor::addcmul_(const Tensor& a, const Tensor& b, Scalar value) {
  update(*this, fit("addcmul_", *this, addcmul(*this, a, b, value)));
  return *this;
}
Tensor& Tensor::addcdiv_(const Tensor& a, const Tensor& b, Scalar value) {
  update(*this, fit("addcdiv_", *this, addcdiv(*this, a, b, value)));
  return *this;
}
Tensor& Tensor::lerp_(const Tensor& end, Scalar weight) {
  update(*this, fit("lerp_", *this, lerp(*this, end, weight)));
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
