// Linear algebra beyond matmul: the singular values (a backend primitive, a group boundary).
#include "ops/record.h"
#include "tensor/backend.h"

namespace loom {

Tensor svdvals(const Tensor& x) {
  LOOM_CHECK(x.dim() >= 2, Value, "svdvals: needs a tensor of at least 2 dims, got ",
             shape_str(x.shape()));
  LOOM_CHECK(is_floating(x.dtype()), Type, "svdvals: needs a floating tensor, got ",
             dtype_name(x.dtype()), " ", shape_str(x.shape()));
  if (!backend_available(x.device().kind) || !backend(x.device()).caps().svd)  // on the host's backend, and back
    return svdvals(x.to(kCPU)).to(x.device());
  // float16 and bfloat16 as float32 (the values are computed in float64 either way)
  const DType rt = is_reduced_float(x.dtype()) ? DType::Float32 : x.dtype();
  Shape out(x.shape().begin(), x.shape().end() - 1);
  out.back() = std::min(x.shape()[x.dim() - 2], x.shape()[x.dim() - 1]);
  auto n = new_node(Op::Svdvals, rt, out, x.device());
  n->in.push_back(as_input(rt == x.dtype() ? x : cast(x, rt)));
  Tensor r = record_node(std::move(n));
  return rt == x.dtype() ? r : cast(r, x.dtype());
}

}  // namespace loom
