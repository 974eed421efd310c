// Gather and scatter-add as reductions over a one-hot mask of the index: the formulation for
// devices whose backend has no gather kernel (BackendCaps::gather). Each is one reduction group
// the fuser can join with its producers and consumers; its cost is the indexed dim's length
// times the index's size. The sums run in a fixed order, so the result's bits do not change from
// run to run.
#include "ops/index_prims.h"
#include "ops/record.h"

namespace loom {

Tensor gather_masked(const Tensor& xs, int d, const Tensor& index) {
  const int64_t L = xs.shape()[d];
  const Device dev = xs.device();
  if (L == 0 || index.numel() == 0) return zeros(index.shape(), {xs.dtype(), dev});
  Tensor ic = clamp(index, Scalar(0), Scalar(L - 1));
  Tensor xm = xs.transpose(d, -1).unsqueeze(-2);  // [..., 1, L]
  Tensor im = ic.transpose(d, -1).unsqueeze(-1);  // [..., J, 1]
  Shape s = im.shape();
  s.back() = L;                                          // [..., J, L]
  Tensor hit = eq(im, iota(s, int(s.size()) - 1, dev));  // (an arange view would not fuse)
  // One element of each row is picked, the rest add exact zeros (a -0.0 comes back as +0.0).
  Tensor r = sum(where(hit, xm, zeros({}, {xs.dtype(), dev})), {-1});
  return cast(r, xs.dtype()).transpose(d, -1);
}

Tensor scatter_add_masked(const Tensor& self, int d, const Tensor& index, const Tensor& src) {
  const int64_t L = self.shape()[d];
  const Device dev = self.device();
  if (L == 0 || index.numel() == 0) return self.clone();
  Tensor ic = clamp(index, Scalar(0), Scalar(L - 1));
  Tensor im = ic.transpose(d, -1).unsqueeze(-2);   // [..., 1, J]
  Tensor sm = src.transpose(d, -1).unsqueeze(-2);  // [..., 1, J]
  Shape s = im.shape();
  s[s.size() - 2] = L;  // [..., L, J]: output position p, index position j
  Tensor hit = eq(im, iota(s, int(s.size()) - 2, dev));
  Tensor add_in = sum(where(hit, sm, zeros({}, {src.dtype(), dev})), {-1});  // [..., L]
  add_in = pad_zeros(add_in.transpose(d, -1), self.shape());
  return cast(add(self, add_in), self.dtype());
}

}  // namespace loom
