// The scan primitive (cumsum): one pass over memory, O(n) per row.
//
// The shape splits around the scanned dim into [outer, len, inner]. When inner is 1 each row
// is scanned on its own, in chunks that stay in L1. Otherwise the inner elements of one step
// are a vector: a tile of them is accumulated step by step, reading and writing whole runs
// (a column scan of a row-major matrix streams rows instead of striding down columns).
#include "cpu/scan.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "cpu/split_view.h"
#include "tensor/convert.h"

namespace loom::cpu {
namespace {

constexpr int64_t kChunk = 2048;  // elements of a row scanned per load/store run
constexpr int64_t kTile = 512;    // inner elements accumulated together

template <typename A>
inline A add(A a, A b) {
  if constexpr (std::is_integral_v<A>)
    return A(uint64_t(a) + uint64_t(b));  // wraps like torch's int64 cumsum, without UB
  else
    return a + b;
}

template <typename A>
void scan_typed(const Node& n, void* out_mem) {
  const Input& in = n.in[0];
  const View& v = in.view;
  int r = int(n.shape.size()), d = n.dim;
  int64_t len = n.shape[d], outer = 1, inner = 1;
  for (int k = 0; k < d; ++k) outer *= n.shape[k];
  for (int k = d + 1; k < r; ++k) inner *= n.shape[k];
  if (outer * len * inner == 0) return;
  size_t isz = itemsize(in.dtype), osz = itemsize(n.dtype);
  const char* src = static_cast<const char*>(in.st->data()) + v.offset * int64_t(isz);
  char* dst = static_cast<char*>(out_mem);
  int64_t sd = v.strides[d];
  int64_t s_inner = 1;
  bool tiled = inner > 1 && collapsed_stride(v, d + 1, r, &s_inner);

  if (!tiled) {
    // One row per (outer, inner) index; rows of a parallel block share nothing.
    int64_t rows = outer * inner;
    int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(len, 1));
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, grain), [&](const auto& range) {
      A buf[kChunk];
      for (int64_t row = range.begin(); row < range.end(); ++row) {
        int64_t o = row / inner, i = row % inner;
        const char* s = src + (offset_of(v, 0, d, o) + offset_of(v, d + 1, r, i)) * int64_t(isz);
        char* t = dst + (o * len * inner + i) * int64_t(osz);
        A acc = 0;
        for (int64_t k0 = 0; k0 < len; k0 += kChunk) {
          int64_t m = std::min(kChunk, len - k0);
          load_run<A>(s + k0 * sd * int64_t(isz), in.dtype, sd, buf, m);
          for (int64_t j = 0; j < m; ++j) buf[j] = acc = add(acc, buf[j]);
          store_run<A>(t + k0 * inner * int64_t(osz), n.dtype, inner, buf, m);
        }
      }
    });
    return;
  }

  // Tiles of inner elements: tile t covers [t0, t0 + m) of one outer index.
  int64_t tiles_per = (inner + kTile - 1) / kTile;
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(len * std::min(inner, kTile), 1));
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, outer * tiles_per, grain),
                    [&](const auto& range) {
                      A acc[kTile], buf[kTile];
                      for (int64_t t = range.begin(); t < range.end(); ++t) {
                        int64_t o = t / tiles_per, t0 = (t % tiles_per) * kTile;
                        int64_t m = std::min(kTile, inner - t0);
                        const char* s = src + (offset_of(v, 0, d, o) + t0 * s_inner) * int64_t(isz);
                        char* q = dst + (o * len * inner + t0) * int64_t(osz);
                        std::fill(acc, acc + m, A(0));
                        for (int64_t k = 0; k < len; ++k) {
                          load_run<A>(s + k * sd * int64_t(isz), in.dtype, s_inner, buf, m);
                          for (int64_t j = 0; j < m; ++j) acc[j] = add(acc[j], buf[j]);
                          store_run<A>(q + k * inner * int64_t(osz), n.dtype, 1, acc, m);
                        }
                      }
                    });
}

}  // namespace

void run_scan(const Group& g) {
  const Node& n = *g.opaque;
  void* out = g.outputs[0].st->data();
  if (is_floating(n.dtype))
    scan_typed<double>(n, out);
  else
    scan_typed<int64_t>(n, out);
}

}  // namespace loom::cpu
