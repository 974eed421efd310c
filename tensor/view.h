#pragma once
// View: how a tensor reads its buffer (shape, strides and offset, in elements).
#include <cstdint>

#include "tensor/shape.h"

namespace loom {

struct View {
  Shape shape;
  Strides strides;
  int64_t offset = 0;  // in elements
};

// Element offset of the index `i` over dims [lo, hi) of a view (row-major decomposition),
// without the view's own offset.
inline int64_t offset_of(const View& v, int lo, int hi, int64_t i) {
  int64_t off = 0;
  for (int d = hi - 1; d >= lo; --d) {
    off += (i % v.shape[d]) * v.strides[d];
    i /= v.shape[d];
  }
  return off;
}

// The single stride that walks dims [lo, hi) of `v` in row-major order, if there is one (a
// dim of size 1 never breaks it).
inline bool collapsed_stride(const View& v, int lo, int hi, int64_t* stride) {
  int64_t s = 1, span = 1;  // span: elements of the dims after d
  bool any = false;
  for (int d = hi - 1; d >= lo; --d) {
    if (v.shape[d] == 1) continue;
    if (!any) {
      s = v.strides[d];
      any = true;
    } else if (v.strides[d] != s * span) {
      return false;
    }
    span *= v.shape[d];
  }
  *stride = s;
  return true;
}

}  // namespace loom
