// The scatter-add primitive, in two parallel passes: the input is copied into the output, then
// src is added in. The second pass splits the index's shape around the scattered dim into
// [outer | dim | inner]; a task owns an outer index and a run of inner indices, so no two tasks
// write one element, and walks the dim's positions in increasing order: the result's bits do not
// depend on the thread count or the schedule.
#include "cpu/scatter.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "cpu/split_view.h"
#include "tensor/half.h"

namespace loom::cpu {
namespace {

constexpr int64_t kTile = 512;  // inner elements of one task, at most

template <typename T>
inline T add(T a, T b) {
  if constexpr (std::is_same_v<T, Half>)
    return Half{f32_to_f16(f16_to_f32(a.bits) + f16_to_f32(b.bits))};
  else if constexpr (std::is_same_v<T, BFloat16>)
    return BFloat16{f32_to_bf16(bf16_to_f32(a.bits) + bf16_to_f32(b.bits))};
  else if constexpr (std::is_same_v<T, bool>)
    return a || b;
  else if constexpr (std::is_integral_v<T>)
    return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b));  // wraps, without UB
  else
    return a + b;
}

// out (contiguous in self's shape) = self's elements, row by row of the last dim.
void copy_input(const Input& self, char* out) {
  const View& v = self.view;
  const int r = int(v.shape.size());
  const size_t isz = itemsize(self.dtype);
  const int64_t last = v.shape[r - 1], rows = numel(v.shape) / last, ls = v.strides[r - 1];
  const char* src = static_cast<const char*>(self.st->data());
  const int64_t grain = std::max<int64_t>(1, 16384 / last);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, grain), [&](const auto& range) {
    for (int64_t row = range.begin(); row < range.end(); ++row) {
      const char* s = src + (v.offset + offset_of(v, 0, r - 1, row)) * int64_t(isz);
      char* t = out + row * last * int64_t(isz);
      if (ls == 1) {
        std::memcpy(t, s, size_t(last) * isz);
        continue;
      }
      for (int64_t k = 0; k < last; ++k)
        std::memcpy(t + k * int64_t(isz), s + k * ls * int64_t(isz), isz);
    }
  });
}

template <typename T, typename I>
void accumulate(const Node& n, T* out) {
  const Input& ix = n.in[1];
  const Input& src = n.in[2];
  const int d = n.dim;
  const Shape& is_shape = ix.view.shape;
  int64_t outer, inner;
  split_sizes(is_shape, d, &outer, &inner);
  const int64_t J = is_shape[d], L = n.shape[d];
  if (outer * J * inner == 0 || L == 0) return;
  // The output as a view in the index's shape (its dim `d` of length L): the elements src reaches.
  View ov{is_shape, contiguous_strides(n.shape), 0};
  ov.shape[d] = L;
  SplitView os(ov, d), is(ix.view, d), ss(src.view, d);
  const I* ip = static_cast<const I*>(ix.st->data());
  const T* sp = static_cast<const T*>(src.st->data());
  // Runs short enough to give the cores work when there are few outer indices (an embedding's
  // gradient has one).
  int64_t tile = std::min(inner, kTile);
  while (tile > 16 && outer * ((inner + tile - 1) / tile) < 64) tile /= 2;
  const int64_t tiles = (inner + tile - 1) / tile;
  // index_add: one index for a whole contiguous run of src and of the output.
  const bool rows = is.collapsed && is.inner_stride == 0 && ss.collapsed && ss.inner_stride == 1 &&
                    os.collapsed && os.inner_stride == 1;
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, outer * tiles), [&](const auto& r) {
    int64_t oo[kTile], io[kTile], so[kTile], cur = -1;
    for (int64_t task = r.begin(); task < r.end(); ++task) {
      int64_t o = task / tiles, t0 = (task % tiles) * tile, m = std::min(tile, inner - t0);
      if (t0 != cur && !rows) {
        os.inner(t0, m, oo);
        is.inner(t0, m, io);
        ss.inner(t0, m, so);
        cur = t0;
      }
      T* ob = out + os.outer(o);
      const I* ib = ip + is.outer(o);
      const T* sb = sp + ss.outer(o);
      if (inner == 1) {  // along the last dim: one element a position, no offset tables
        for (int64_t j = 0; j < J; ++j) {
          T& e = ob[clamp_index(int64_t(ib[j * is.dim_stride]), L) * os.dim_stride];
          e = add(e, sb[j * ss.dim_stride]);
        }
        continue;
      }
      for (int64_t j = 0; j < J; ++j) {
        const I* ij = ib + j * is.dim_stride;
        const T* sj = sb + j * ss.dim_stride;
        if (rows) {
          T* orow = ob + clamp_index(int64_t(ij[0]), L) * os.dim_stride + t0;
          for (int64_t k = 0; k < m; ++k) orow[k] = add(orow[k], sj[t0 + k]);
          continue;
        }
        for (int64_t k = 0; k < m; ++k) {
          T& e = ob[clamp_index(int64_t(ij[io[k]]), L) * os.dim_stride + oo[k]];
          e = add(e, sj[so[k]]);
        }
      }
    }
  });
}

template <typename T>
void accumulate_index(const Node& n, void* out) {
  if (n.in[1].dtype == DType::Int32)
    accumulate<T, int32_t>(n, static_cast<T*>(out));
  else
    accumulate<T, int64_t>(n, static_cast<T*>(out));
}

}  // namespace

void run_scatter_add(const Group& g) {
  const Node& n = *g.opaque;
  char* out = static_cast<char*>(g.outputs[0].st->data());
  if (numel(n.shape) == 0) return;
  copy_input(n.in[0], out);
  switch (n.dtype) {
#define LOOM_X(name, text, storage, ...) \
  case DType::name:                      \
    return accumulate_index<storage>(n, out);
    LOOM_DTYPES(LOOM_X)
#undef LOOM_X
  }
}

}  // namespace loom::cpu
