// Recording the Gather and ScatterAdd primitives, or their masked formulations where the
// device's backend has no kernel for them (BackendCaps::gather).
#include "ops/index_prims.h"

#include "ops/grad_node.h"
#include "ops/record.h"
#include "tensor/backend.h"

namespace loom {
namespace {

// Whether `d`'s backend runs Gather / ScatterAdd over `rank` dims itself.
bool has_gather(Device d, int rank) {
  if (!backend_available(d.kind)) return false;
  const BackendCaps c = backend(d).caps();
  return c.gather && (c.gather_rank == 0 || rank <= c.gather_rank);
}

// `x` narrowed to `shape` in every dim but `skip` (a view; no copy).
Tensor cut_to(const Tensor& x, const Shape& shape, int skip) {
  Tensor r = x;
  for (int k = 0; k < x.dim(); ++k)
    if (k != skip && r.shape()[k] != shape[k]) r = r.narrow(k, 0, shape[k]);
  return r;
}

}  // namespace

Tensor gather_prim(const Tensor& x, int d, const Tensor& index) {
  Tensor y;
  {
    NoGradGuard forward;  // its own backward node, below (the cut is part of the op)
    Tensor xs = cut_to(x, index.shape(), d);
    if (has_gather(x.device(), index.dim())) {
      auto n = new_node(Op::Gather, x.dtype(), index.shape(), x.device());
      n->dim = d;
      add_input(*n, xs);
      add_input(*n, index);
      y = record_node(std::move(n));
    } else {
      y = gather_masked(xs, d, index);
    }
  }
  if (autograd::needs_grad(x)) autograd::record_gather(x, d, index, y);
  return y;
}

Tensor scatter_add_prim(const Tensor& self, int d, const Tensor& index, const Tensor& src) {
  Tensor y;
  {
    NoGradGuard forward;
    Tensor ss = cut_to(src, index.shape(), -1);
    if (has_gather(self.device(), self.dim())) {
      auto n = new_node(Op::ScatterAdd, self.dtype(), self.shape(), self.device());
      n->dim = d;
      add_input(*n, self);
      add_input(*n, index);
      add_input(*n, ss);
      y = record_node(std::move(n));
    } else {
      y = scatter_add_masked(self, d, index, ss);
    }
  }
  if (autograd::needs_grad(self, src)) autograd::record_scatter_add(self, d, index, src, y);
  return y;
}

Tensor class_values(const Tensor& v, const Tensor& t) {
  const int64_t C = v.shape()[v.dim() - 1];
  if (C == 0) return zeros(t.shape(), {v.dtype(), v.device()});
  // Every gather (the backends' kernels, gather_masked) clamps its index into range.
  if (v.dim() == 1) return gather_prim(v, 0, t);
  return gather_prim(v, 1, t.unsqueeze(1)).squeeze(1);
}

Tensor pad_zeros(const Tensor& t, const Shape& shape) {
  Tensor r = t;
  for (int k = 0; k < t.dim(); ++k) {
    if (r.shape()[k] >= shape[k]) continue;
    Shape z = r.shape();
    z[k] = shape[k] - r.shape()[k];
    r = cat({r, zeros(z, {r.dtype(), r.device()})}, k);
  }
  return r;
}

}  // namespace loom
