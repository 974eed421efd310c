#pragma once
// Addressing a strided view split around one dim as [outer | dim | inner] (outer and inner
// each row-major): what the gather and scatter kernels walk. A kernel takes an outer index, a
// position along the dim and a run of inner indices; the inner offsets of a run are computed
// once and reused for every outer index and position that shares the run.
#include <algorithm>
#include <cstdint>

#include "tensor/view.h"

namespace loom::cpu {

struct SplitView {
  const View* v;
  int dim, rank;
  int64_t dim_stride;
  bool collapsed;  // the inner dims walk with one stride, inner_stride
  int64_t inner_stride = 0;

  SplitView(const View& view, int d)
      : v(&view), dim(d), rank(int(view.shape.size())), dim_stride(view.strides[d]) {
    collapsed = collapsed_stride(view, d + 1, rank, &inner_stride);
  }
  // Offset (in elements, with the view's own) of outer index `o` at position 0 of the dim.
  int64_t outer(int64_t o) const { return v->offset + offset_of(*v, 0, dim, o); }
  // offs[k] = the offset of inner index t0 + k, for k < m.
  void inner(int64_t t0, int64_t m, int64_t* offs) const {
    if (collapsed)
      for (int64_t k = 0; k < m; ++k) offs[k] = (t0 + k) * inner_stride;
    else
      for (int64_t k = 0; k < m; ++k) offs[k] = offset_of(*v, dim + 1, rank, t0 + k);
  }
};

// Products of the dims before and after `d` of `s`.
inline void split_sizes(const Shape& s, int d, int64_t* outer, int64_t* inner) {
  *outer = 1, *inner = 1;
  for (int k = 0; k < d; ++k) *outer *= s[k];
  for (int k = d + 1; k < int(s.size()); ++k) *inner *= s[k];
}

// An index value read as int64 and clamped into [0, len): out-of-range values are reported by
// the op layer's deferred check; the kernel only has to stay inside the tensor.
inline int64_t clamp_index(int64_t i, int64_t len) { return std::clamp<int64_t>(i, 0, len - 1); }

}  // namespace loom::cpu
