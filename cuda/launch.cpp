#include "cuda/launch.h"

#include <algorithm>
#include <cstring>

#include "tensor/error.h"

namespace loom::cuda {
namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t pow2ceil(int64_t x) {
  int64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

const Strides& access_strides(const Group& g, int a) {
  int L = int(g.leaves.size());
  return a < L ? g.leaves[a].strides : g.outputs[a - L].strides;
}

// Split rows when the row blocks cannot fill the machine and the rows are long enough to cut:
// segments enough for about 8 blocks of 256 threads an SM (a full wave; 2 an SM measured at
// 1.97 TB/s for a 64M-element sum on the H200, 2026-11-29). Partials stay small: rows times
// segments is about rpb * 8 * SMs.
int64_t split_segments(const Group& g, const Variant& v, int sm) {
  int64_t rows = g.rows(), cols = g.cols();
  int64_t blocks = cdiv(rows, v.rpb);
  int64_t min_seg = v.tpr == 1 ? 64 : 2048;
  if (blocks >= sm || cols < 2 * min_seg) return 1;
  return std::max<int64_t>(1, std::min(cdiv(8 * int64_t(sm), blocks), cols / min_seg));
}

// Persistent slots per lane for `cols` columns over `tpr` lanes, or 0 when the cached values
// would not fit the register budget.
int persistent_k(const Group& g, int64_t cols, int tpr) {
  int64_t k = pow2ceil(std::max<int64_t>(1, cdiv(cols, tpr)));
  if (k > 16) return 0;
  if (k * std::max(1, row_cache_words(g)) > 48) return 0;
  return int(k);
}

}  // namespace

Variant choose_variant(const Group& g, int sm) {
  Variant v;
  Layout layout = layout_of(g);
  if (!g.has_reduce()) {
    if (layout == Layout::Pointwise) return v;
    // Contiguous: as many elements a thread as fill a 16-byte access of the narrowest type,
    // when every unit-stride pointer is aligned for it.
    v.vec = 1;
    if (g.space.size() != 1) return v;
    size_t min_isz = 16;
    int n_acc = int(g.leaves.size() + g.outputs.size()), L = int(g.leaves.size());
    for (int a = 0; a < n_acc; ++a) {
      if (a < L && !g.leaves[a].st) continue;
      int64_t s = access_strides(g, a)[0];
      if (a >= L && s != 1) return v;
      if (s != 1) continue;
      DType dt = a < L ? g.leaves[a].dtype : g.nodes[g.outputs[a - L].node].dtype;
      min_isz = std::min(min_isz, itemsize(dt));
    }
    int V = int(std::min<size_t>(8, 16 / min_isz));
    // The vector loop is unrolled V times: keep big fused bodies from multiplying compile time
    // (an 8-wide 90-node body took 4.6 s in NVRTC on the H200 host, 2026-11-29).
    while (V > 1 && V * int(g.nodes.size()) > 192) V /= 2;
    if (V <= 1 || g.space[0] < V) return v;
    for (int a = 0; a < n_acc; ++a) {
      if (a < L && !g.leaves[a].st) continue;
      if (access_strides(g, a)[0] != 1) continue;
      const Storage* st = a < L ? g.leaves[a].st.get() : g.outputs[a - L].st.get();
      DType dt = a < L ? g.leaves[a].dtype : g.nodes[g.outputs[a - L].node].dtype;
      int64_t off = a < L ? g.leaves[a].offset : g.outputs[a - L].offset;
      size_t align = std::min<size_t>(16, V * itemsize(dt));
      uint64_t addr = uint64_t(reinterpret_cast<uintptr_t>(st->data())) + off * itemsize(dt);
      if (st->data() && addr % align != 0) return v;  // outputs not yet allocated count as aligned
    }
    v.vec = V;
    return v;
  }
  v.reduce = true;
  int64_t cols = g.cols();
  if (layout == Layout::Columns) {
    v.tpr = 1, v.rpb = 256;
  } else {
    v.tpr = int(std::clamp<int64_t>(pow2ceil(cdiv(cols, 8)), 1, 1024));
    v.rpb = std::max(1, 256 / v.tpr);
  }
  if (split_segments(g, v, sm) > 1) {
    v.split = true;
    if (layout != Layout::Columns) v.tpr = 256, v.rpb = 1;
    if (split_segments(g, v, sm) > 1) return v;
    v.split = false;
  }
  v.k = cols <= int64_t(v.tpr) * 16 ? persistent_k(g, cols, v.tpr) : 0;
  return v;
}

LaunchConfig launch_config(const Group& g, const Variant& v, int sm) {
  LaunchConfig lc;
  lc.block = unsigned(v.block());
  if (!v.reduce) {
    int64_t n = numel(g.space);
    lc.empty = n == 0;
    int64_t work = v.vec > 1 ? std::max<int64_t>(1, n / v.vec) : n;
    lc.grid_x = unsigned(std::clamp<int64_t>(cdiv(work, 256), 1, int64_t(sm) * 8));
    return lc;
  }
  int64_t rows = g.rows(), cols = g.cols();
  lc.empty = rows == 0;
  int64_t blocks = cdiv(rows, v.rpb);
  if (v.split) {
    LOOM_CHECK(blocks < (int64_t(1) << 31), Runtime, "cuda: too many rows for a split launch");
    int64_t S = split_segments(g, v, sm);
    lc.grid_x = unsigned(std::max<int64_t>(1, blocks));
    lc.seglen = std::max<int64_t>(1, cdiv(cols, S));
    lc.grid_y = unsigned(std::max<int64_t>(1, cdiv(cols, lc.seglen)));
  } else {
    int64_t cap = int64_t(sm) * std::max(1, 2048 / v.block()) * 2;
    lc.grid_x = unsigned(std::clamp<int64_t>(blocks, 1, cap));
  }
  return lc;
}

SplitScratch split_scratch(const Group& g, const Generated& k, const LaunchConfig& lc) {
  SplitScratch s;
  size_t rows = size_t(g.rows()), nr = size_t(std::max(1, k.reduces));
  s.partial_bytes = rows * lc.grid_y * nr * 16;
  s.final_bytes = rows * nr * 16;
  s.counter_bytes = size_t(lc.grid_x) * 4;
  return s;
}

std::vector<char> pack_params(const Group& g, const ParamSpec& spec, const LaunchConfig& lc,
                              const uint64_t scratch[3]) {
  std::vector<char> b(spec.bytes(), 0);
  int L = int(g.leaves.size());
  for (size_t i = 0; i < spec.ptrs.size(); ++i) {
    int a = spec.ptrs[i];
    uint64_t p;
    if (a == kPartials)
      p = scratch[0];
    else if (a == kFinals)
      p = scratch[1];
    else if (a == kCounters)
      p = scratch[2];
    else if (a < L)
      p = uint64_t(reinterpret_cast<uintptr_t>(g.leaves[a].st->data()));
    else
      p = uint64_t(reinterpret_cast<uintptr_t>(g.outputs[a - L].st->data()));
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
      case ValueSlot::Offset:
        x = vs.access < L ? g.leaves[vs.access].offset : g.outputs[vs.access - L].offset;
        break;
      case ValueSlot::SegLen:
        x = lc.seglen;
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
  return b;
}

}  // namespace loom::cuda
