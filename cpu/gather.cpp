// The gather primitive: one pass over the output, parallel over blocks of its rows (an outer
// index and positions along the gathered dim) and runs of inner elements.
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

constexpr int64_t kTile = 1024;   // inner elements of one run, at most
constexpr int64_t kWork = 16384;  // elements of one task, about

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
  // A task: one outer index, a block of positions along the dim and a run of inner elements,
  // about kWork elements in all (a gather along the last dim has runs of one element; an
  // embedding has one outer index).
  const int64_t tile = std::min(inner, kTile), tiles = (inner + tile - 1) / tile;
  const int64_t jblk = std::clamp<int64_t>(kWork / tile, 1, J), jblocks = (J + jblk - 1) / jblk;
  const bool run_copy =
      is.collapsed && is.inner_stride == 0 && xs.collapsed && xs.inner_stride == 1;
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, outer * jblocks * tiles), [&](const auto& r) {
    int64_t xo[kTile], io[kTile], cur = -1;
    for (int64_t task = r.begin(); task < r.end(); ++task) {
      int64_t o = task / (jblocks * tiles), rest = task % (jblocks * tiles);
      int64_t j0 = (rest / tiles) * jblk, j1 = std::min(J, j0 + jblk);
      int64_t t0 = (rest % tiles) * tile, m = std::min(tile, inner - t0);
      if (t0 != cur && !run_copy) {
        xs.inner(t0, m, xo);
        is.inner(t0, m, io);
        cur = t0;
      }
      const E* xb = xp + xs.outer(o);
      const I* ib0 = ip + is.outer(o);
      if (inner == 1) {  // a gather along the last dim: one element a position
        E* ob = op + o * J;
        for (int64_t j = j0; j < j1; ++j)
          ob[j] = xb[clamp_index(int64_t(ib0[j * is.dim_stride]), L) * xs.dim_stride];
        continue;
      }
      for (int64_t j = j0; j < j1; ++j) {
        const I* ib = ib0 + j * is.dim_stride;
        E* ob = op + (o * J + j) * inner + t0;
        if (run_copy) {
          int64_t p = clamp_index(int64_t(ib[0]), L);
          std::memcpy(ob, xb + p * xs.dim_stride + t0, size_t(m) * sizeof(E));
          continue;
        }
        for (int64_t k = 0; k < m; ++k)
          ob[k] = xb[clamp_index(int64_t(ib[io[k]]), L) * xs.dim_stride + xo[k]];
      }
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
