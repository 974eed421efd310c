// The parameter block of a launch and the scratch of a split one.
#include <algorithm>
#include <cstring>

#include "cuda/launch_geometry.h"

namespace loom::cuda {

SplitScratch split_scratch(const Group& g, const Generated& k, const LaunchConfig& lc) {
  SplitScratch s;
  size_t rows = size_t(g.rows()), nr = size_t(std::max(1, k.reduces));
  s.partial_bytes = rows * lc.grid_y * nr * 16;
  s.final_bytes = rows * nr * 16;
  s.counter_bytes = size_t(lc.grid_x) * 4;
  return s;
}

void pack_params(const Group& g, const ParamSpec& spec, const LaunchConfig& lc,
                 const uint64_t scratch[3], std::vector<char>& b) {
  b.assign(spec.bytes(), 0);
  for (size_t i = 0; i < spec.ptrs.size(); ++i) {
    int a = spec.ptrs[i];
    uint64_t p;
    if (a == kPartials)
      p = scratch[0];
    else if (a == kFinals)
      p = scratch[1];
    else if (a == kCounters)
      p = scratch[2];
    else
      p = kernel_ptr(g, a);
    std::memcpy(b.data() + 8 * i, &p, 8);
  }
  for (int s = 0; s < spec.scalars; ++s) {
    const Scalar& sc = g.scalars[s];
    char* dst = b.data() + 8 * (spec.ptrs.size() + s);
    if (sc.kind == Scalar::Kind::Float)
      std::memcpy(dst, &sc.f, 8);
    else
      std::memcpy(dst, &sc.i, 8);
  }
  for (size_t i = 0; i < spec.values.size(); ++i) {
    const ValueSlot& vs = spec.values[i];
    int64_t x = 0;
    switch (vs.kind) {
      case ValueSlot::N:
        x = numel(g.space);
        break;
      case ValueSlot::Rows:
        x = g.rows();
        break;
      case ValueSlot::Cols:
        x = g.cols();
        break;
      case ValueSlot::Size:
        x = g.space[vs.dim];
        break;
      case ValueSlot::Stride:
        x = access_strides(g, vs.access)[vs.dim];
        break;
      case ValueSlot::Offset:  // (with the pointer's residue, as kernel_ptr)
        x = kernel_offset(g, vs.access);
        break;
      case ValueSlot::SegLen:
        x = lc.seglen;
        break;
      case ValueSlot::Blocks:
        x = lc.grid_x;
        break;
    }
    char* dst = b.data() + spec.values_offset() + i * (spec.index64 ? 8 : 4);
    if (spec.index64) {
      std::memcpy(dst, &x, 8);
    } else {
      int32_t y = int32_t(x);
      std::memcpy(dst, &y, 4);
    }
  }
}

}  // namespace loom::cuda
