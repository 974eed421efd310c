// The gather primitive: one pass over the output, parallel over its rows (an outer index and a
// position along the gathered dim) and runs of inner elements.
//
// Where the index is the same over a whole inner run (index_select and embedding expand a 1-d
// index over the other dims) and the input's run is contiguous, the run is one memcpy of a row
// of the input; otherwise each element is read at its own index.
#include "cpu/gather.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>

#include "cpu/split_view.h"

namespace loom::cpu {
namespace {

constexpr int64_t kTile = 1024;  // inner elements of one run

// E: an unsigned integer of the element's size (elements are moved, never computed on);
// I: the index's storage type.
template <typename E, typename I>
void gather_typed(const Node& n, void* out_mem) {
  const Input& x = n.in[0];
  const Input& ix = n.in[1];
  const int d = n.dim;
  int64_t outer, inner;
  split_sizes(n.shape, d, &outer, &inner);
  const int64_t J = n.shape[d], L = x.view.shape[d];
  SplitView xs(x.view, d), is(ix.view, d);
  const E* xp = static_cast<const E*>(x.st->data());
  const I* ip = static_cast<const I*>(ix.st->data());
  E* op = static_cast<E*>(out_mem);
  const int64_t tile = std::min(inner, kTile), tiles = (inner + tile - 1) / tile;
  const bool run_copy =
      is.collapsed && is.inner_stride == 0 && xs.collapsed && xs.inner_stride == 1;
  const int64_t grain = std::max<int64_t>(1, 16384 / tile);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, outer * J * tiles, grain), [&](const auto& r) {
    int64_t xo[kTile], io[kTile], cur = -1;
    for (int64_t task = r.begin(); task < r.end(); ++task) {
      int64_t row = task / tiles, t0 = (task % tiles) * tile, m = std::min(tile, inner - t0);
      if (t0 != cur && !run_copy) {
        xs.inner(t0, m, xo);
        is.inner(t0, m, io);
        cur = t0;
      }
      int64_t o = row / J, j = row % J;
      const E* xb = xp + xs.outer(o);
      const I* ib = ip + is.outer(o) + j * is.dim_stride;
      E* ob = op + row * inner + t0;
      if (run_copy) {
        int64_t p = clamp_index(int64_t(ib[0]), L);
        std::memcpy(ob, xb + p * xs.dim_stride + t0, size_t(m) * sizeof(E));
        continue;
      }
      for (int64_t k = 0; k < m; ++k)
        ob[k] = xb[clamp_index(int64_t(ib[io[k]]), L) * xs.dim_stride + xo[k]];
    }
  });
}

template <typename E>
void gather_index(const Node& n, void* out) {
  if (n.in[1].dtype == DType::Int32)
    gather_typed<E, int32_t>(n, out);
  else
    gather_typed<E, int64_t>(n, out);
}

}  // namespace

void run_gather(const Group& g) {
  const Node& n = *g.opaque;
  void* out = g.outputs[0].st->data();
  const int64_t total = numel(n.shape);
  if (total == 0) return;
  const size_t isz = itemsize(n.dtype);
  if (n.in[0].view.shape[n.dim] == 0) {
    std::memset(out, 0, size_t(total) * isz);
    return;
  }
  switch (isz) {
    case 1:
      return gather_index<uint8_t>(n, out);
    case 2:
      return gather_index<uint16_t>(n, out);
    case 4:
      return gather_index<uint32_t>(n, out);
    default:
      return gather_index<uint64_t>(n, out);
  }
}

}  // namespace loom::cpu
