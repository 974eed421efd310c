// The memory of a tile: the runs of the innermost dim it covers, loads and stores through
// them (streamed where streams()).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "cpu/interp_job.h"
#include "tensor/convert.h"

namespace loom::cpu::interp {
namespace {

// dst = src (bytes), the 64-byte-aligned middle with non-temporal stores.
void stream_copy(char* dst, const char* src, int64_t bytes) {
  int64_t head =
      std::min<int64_t>(bytes, int64_t((64 - (reinterpret_cast<uintptr_t>(dst) & 63)) & 63));
  std::memcpy(dst, src, size_t(head));
  dst += head, src += head, bytes -= head;
  for (; bytes >= 64; dst += 64, src += 64, bytes -= 64) {
#if defined(__AVX512F__)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst),
                        _mm512_loadu_si512(reinterpret_cast<const void*>(src)));
#else
    for (int k = 0; k < 64; k += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + k),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k)));
#endif
  }
  std::memcpy(dst, src, size_t(bytes));
}

// Calls f(pos, col_offset_for(strides), len) over runs of the innermost dim.
template <typename F>
void for_runs(const Job& job, int64_t c0, int64_t nc, const Strides& st, F f) {
  if (nc <= 0) return;
  const int rank = job.rank, nk = job.nk;
  int cr = rank - nk;
  if (cr == 0) {
    f(0, int64_t(0), nc);
    return;
  }
  if (cr == 1) {  // one reduced dim: the tile's columns are one run of it (no divisions)
    f(0, c0 * st[rank - 1], nc);
    return;
  }
  int64_t idx[16];
  int64_t c = c0;
  for (int k = cr - 1; k >= 0; --k) {
    int64_t sz = job.g.space[nk + k];
    idx[k] = c % sz;
    c /= sz;
  }
  int64_t last = job.g.space[rank - 1];
  int64_t pos = 0, off = 0;
  for (int k = 0; k < cr; ++k) off += idx[k] * st[nk + k];
  // The offset follows the index as it steps (recomputed from it each run, the sum was one
  // vector load of the index just stored: a stall on each run of a head's 32 values).
  while (pos < nc) {
    int64_t len = std::min(nc - pos, last - idx[cr - 1]);
    f(pos, off, len);
    pos += len;
    idx[cr - 1] += len, off += len * st[rank - 1];
    for (int k = cr - 1; k > 0 && idx[k] >= job.g.space[nk + k]; --k) {
      off += st[nk + k - 1] - idx[k] * st[nk + k];
      idx[k] = 0, idx[k - 1]++;
    }
  }
}

// The column layout's walk of a tile: f(j, off) for each column j < nc of the tile, `off` the
// element offset of its row r0 under strides st; row r0 + i is at off + i * st[nk - 1] (a
// tile's rows are consecutive along the innermost kept dim: interp_cols.cpp).
template <typename F>
void for_cols(const Job& job, int64_t r0, int64_t c0, int64_t nc, const Strides& st, int64_t off0,
              F f) {
  int64_t base = job.row_base(st, off0, r0);
  int64_t sr = st[job.rank - 1];
  for_runs(job, c0, nc, st, [&](int64_t pos, int64_t off, int64_t len) {
    for (int64_t j = 0; j < len; ++j) f(pos + j, base + off + j * sr);
  });
}

#if defined(__AVX512F__)
// out rows 0-15, columns 0-15 (row stride nc) = the transpose of the 16 runs of 16 floats at
// src + k * sl: run k holds column k's values of the 16 rows.
inline void transpose16(const float* src, int64_t sl, float* out, int64_t nc) {
  __m512 r[16], a[16], b[16];
  for (int k = 0; k < 16; ++k) r[k] = _mm512_loadu_ps(src + k * sl);
  for (int p = 0; p < 8; ++p) {  // per 128-bit lane: element pairs of runs 2p, 2p + 1
    a[2 * p] = _mm512_unpacklo_ps(r[2 * p], r[2 * p + 1]);
    a[2 * p + 1] = _mm512_unpackhi_ps(r[2 * p], r[2 * p + 1]);
  }
  for (int q = 0; q < 4; ++q) {  // b[4q + e], lane L: element 4L + e of runs 4q .. 4q + 3
    b[4 * q] = _mm512_shuffle_ps(a[4 * q], a[4 * q + 2], 0x44);
    b[4 * q + 1] = _mm512_shuffle_ps(a[4 * q], a[4 * q + 2], 0xEE);
    b[4 * q + 2] = _mm512_shuffle_ps(a[4 * q + 1], a[4 * q + 3], 0x44);
    b[4 * q + 3] = _mm512_shuffle_ps(a[4 * q + 1], a[4 * q + 3], 0xEE);
  }
  for (int e = 0; e < 4; ++e) {  // row 4L + e: lane L of b[e], b[4 + e], b[8 + e], b[12 + e]
    __m512 c = _mm512_shuffle_f32x4(b[e], b[4 + e], 0x88),
           d = _mm512_shuffle_f32x4(b[e], b[4 + e], 0xDD);
    __m512 c2 = _mm512_shuffle_f32x4(b[8 + e], b[12 + e], 0x88),
           d2 = _mm512_shuffle_f32x4(b[8 + e], b[12 + e], 0xDD);
    _mm512_storeu_ps(out + e * nc, _mm512_shuffle_f32x4(c, c2, 0x88));
    _mm512_storeu_ps(out + (4 + e) * nc, _mm512_shuffle_f32x4(d, d2, 0x88));
    _mm512_storeu_ps(out + (8 + e) * nc, _mm512_shuffle_f32x4(c, c2, 0xDD));
    _mm512_storeu_ps(out + (12 + e) * nc, _mm512_shuffle_f32x4(d, d2, 0xDD));
  }
}
#endif

// Rows [0, nr) x columns [0, nc) of a tile whose rows are consecutive in memory and whose
// columns are sl apart (a transposed view; src: row 0, column 0): each column's nr values are
// one run, read whole and written down the tile, so every cache line read is used whole (read
// row by row, a line would give each row one element, and lines sl apart share a cache set).
template <typename T>
void load_transposed(const char* src, DType dt, int64_t sl, T* out, int64_t nr, int64_t nc) {
  const int64_t isz = int64_t(itemsize(dt));
  int64_t i0 = 0;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>)
    if (dt == DType::Float32)
      for (; i0 + 16 <= nr; i0 += 16) {
        int64_t j = 0;
        const float* f = reinterpret_cast<const float*>(src) + i0;
        for (; j + 16 <= nc; j += 16) transpose16(f + j * sl, sl, out + i0 * nc + j, nc);
        for (; j < nc; ++j)
          for (int64_t i = i0; i < i0 + 16; ++i)
            out[i * nc + j] = reinterpret_cast<const float*>(src)[j * sl + i];
      }
#endif
  if (i0 == nr) return;
  T col[64];
  for (int64_t j = 0; j < nc; ++j)
    for (int64_t i = i0; i < nr; i += 64) {
      int64_t k = std::min<int64_t>(64, nr - i);
      load_run<T>(src + (j * sl + i) * isz, dt, 1, col, k);
      for (int64_t m = 0; m < k; ++m) out[(i + m) * nc + j] = col[m];
    }
}

template <typename T>
void load_full_t(const Job& job, const GLeaf& l, T* out, int64_t r0, int64_t nr, int64_t c0,
                 int64_t nc) {
  size_t isz = itemsize(l.dtype);
  if (!job.col_layout && job.transposed(l.strides, r0, nr)) {
    const int64_t sl = l.strides[job.rank - 1];
    load_transposed<T>(
        leaf_ptr(l) + (job.row_base(l.strides, l.offset, r0) + c0 * sl) * int64_t(isz), l.dtype, sl,
        out, nr, nc);
    return;
  }
  if (job.col_layout) {
    int64_t sk = l.strides[job.nk - 1];
    for_cols(job, r0, c0, nc, l.strides, l.offset, [&](int64_t j, int64_t off) {
      load_run<T>(leaf_ptr(l) + off * int64_t(isz), l.dtype, sk, out + j * nr, nr);
    });
    return;
  }
  int64_t sl = job.rank > job.nk ? l.strides[job.rank - 1] : 0;
  Job::Rows rows(job, l.strides, l.offset, r0);
  for (int64_t i = 0; i < nr; ++i, rows.next()) {
    const int64_t base = rows.off;
    for_runs(job, c0, nc, l.strides, [&](int64_t pos, int64_t off, int64_t len) {
      load_run<T>(leaf_ptr(l) + (base + off) * int64_t(isz), l.dtype, sl, out + i * nc + pos, len);
    });
  }
}

template <typename T>
void store_full_t(const Job& job, const GOutput& o, const T* src, int64_t r0, int64_t nr,
                  int64_t c0, int64_t nc) {
  DType dt = job.g.nodes[o.node].dtype;
  size_t isz = itemsize(dt);
  char* base_ptr = static_cast<char*>(o.st->data());
  if (job.col_layout) {
    int64_t sk = o.strides[job.nk - 1];
    for_cols(job, r0, c0, nc, o.strides, o.offset, [&](int64_t j, int64_t off) {
      store_run<T>(base_ptr + off * int64_t(isz), dt, sk, src + j * nr, nr);
    });
    return;
  }
  int64_t sl = job.rank > job.nk ? o.strides[job.rank - 1] : 0;
  bool nt = streams(job, o);
  Job::Rows rows(job, o.strides, o.offset, r0);
  for (int64_t i = 0; i < nr; ++i, rows.next()) {
    const int64_t base = rows.off;
    for_runs(job, c0, nc, o.strides, [&](int64_t pos, int64_t off, int64_t len) {
      char* dst = base_ptr + (base + off) * int64_t(isz);
      if (nt)
        stream_copy(dst, reinterpret_cast<const char*>(src + i * nc + pos), len * int64_t(isz));
      else
        store_run<T>(dst, dt, sl, src + i * nc + pos, len);
    });
  }
}

}  // namespace

void load_full(const Job& job, CT ct, const GLeaf& l, void* out, int64_t r0, int64_t nr, int64_t c0,
               int64_t nc) {
  dispatch_ct(ct, [&](auto t) {
    using T = decltype(t);
    load_full_t<T>(job, l, static_cast<T*>(out), r0, nr, c0, nc);
  });
}

void index_full(const Job& job, const GLeaf& l, int64_t* out, int64_t r0, int64_t nr, int64_t c0,
                int64_t nc) {
  if (job.col_layout) {
    int64_t sk = l.strides[job.nk - 1];
    for_cols(job, r0, c0, nc, l.strides, l.offset, [&](int64_t j, int64_t off) {
      for (int64_t i = 0; i < nr; ++i) out[j * nr + i] = off + i * sk;
    });
    return;
  }
  int64_t sl = job.rank > job.nk ? l.strides[job.rank - 1] : 0;
  Job::Rows rows(job, l.strides, l.offset, r0);
  for (int64_t i = 0; i < nr; ++i, rows.next()) {
    const int64_t base = rows.off;
    for_runs(job, c0, nc, l.strides, [&](int64_t pos, int64_t off, int64_t len) {
      int64_t* o = out + i * nc + pos;
      for (int64_t j = 0; j < len; ++j) o[j] = base + off + j * sl;
    });
  }
}

void store_full(const Job& job, CT ct, const GOutput& o, const void* src, int64_t r0, int64_t nr,
                int64_t c0, int64_t nc) {
  dispatch_ct(ct, [&](auto t) {
    using T = decltype(t);
    store_full_t<T>(job, o, static_cast<const T*>(src), r0, nr, c0, nc);
  });
}

}  // namespace loom::cpu::interp
