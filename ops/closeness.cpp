// Composites of the math library: isclose / allclose and nan_to_num, each decomposed into
// table primitives (one fused group).
#include <cmath>
#include <limits>

#include "ops/record.h"

namespace loom {
namespace {

// The largest finite value of a floating dtype (torch.finfo(dtype).max).
double float_max(DType t) {
  switch (t) {
    case DType::Float16:
      return 65504.0;
    case DType::BFloat16:
      return 3.3895313892515355e38;
    case DType::Float32:
      return double(std::numeric_limits<float>::max());
    default:
      return std::numeric_limits<double>::max();
  }
}

}  // namespace

// torch.isclose: |a - b| <= atol + rtol |b| where that error is finite, or a == b (equal
// infinities), or both NaN with equal_nan. Integer inputs compare their difference in float32
// (torch casts to the default dtype); the dtypes must match, as in torch.
Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  check_same_device("isclose", a, b);
  LOOM_CHECK(a.dtype() == b.dtype(), Type, "isclose: the tensors have different dtypes (",
             dtype_name(a.dtype()), " ", shape_str(a.shape()), " and ", dtype_name(b.dtype()), " ",
             shape_str(b.shape()), ")");
  LOOM_CHECK(rtol >= 0 && atol >= 0, Value, "isclose: rtol and atol must be non-negative, got ",
             rtol, " and ", atol);
  (void)broadcast_shapes("isclose", a.shape(), b.shape());
  Tensor close = eq(a, b);
  if (is_bool(a.dtype())) return close;
  if (equal_nan && is_floating(a.dtype()))
    close = logical_or(close, logical_and(isnan(a), isnan(b)));
  if (rtol == 0 && atol == 0) return close;
  Tensor fa = is_floating(a.dtype()) ? a : cast(a, kDefaultFloat);
  Tensor fb = is_floating(b.dtype()) ? b : cast(b, kDefaultFloat);
  Tensor err = abs(sub(fa, fb));
  Tensor allowed = add(mul(abs(fb), rtol), atol);
  return logical_or(close, logical_and(isfinite(err), le(err, allowed)));
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  return all(isclose(a, b, rtol, atol, equal_nan)).item<bool>();
}

// torch.nan_to_num: NaN to `nan`, +inf to `posinf` (else the dtype's largest finite value),
// -inf to `neginf` (else its lowest); integer and bool tensors are returned unchanged.
Tensor nan_to_num(const Tensor& x, double nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  LOOM_CHECK(x.defined(), Value, "nan_to_num: undefined tensor");
  if (!is_floating(x.dtype())) return x;
  const double big = float_max(x.dtype());
  const double inf = std::numeric_limits<double>::infinity();
  Tensor y = where(isnan(x), Scalar(nan), x);
  y = where(eq(x, inf), Scalar(posinf.value_or(big)), y);
  y = where(eq(x, -inf), Scalar(neginf.value_or(-big)), y);
  return cast(y, x.dtype());
}

Tensor& operator<<=(Tensor& a, const Tensor& b) { return a.copy_(bitwise_left_shift(a, b)); }
Tensor& operator<<=(Tensor& a, Scalar b) { return a.copy_(bitwise_left_shift(a, b)); }
Tensor& operator>>=(Tensor& a, const Tensor& b) { return a.copy_(bitwise_right_shift(a, b)); }
Tensor& operator>>=(Tensor& a, Scalar b) { return a.copy_(bitwise_right_shift(a, b)); }

}  // namespace loom
