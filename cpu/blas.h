#pragma once
// What the CPU matmuls share: the operands' batch entries and layouts as BLAS takes them, and
// the BLAS calls (cpu/matmul.cpp runs a whole matmul, cpu/matmul_epilogue.cpp one with its
// epilogue in blocks of rows).
#include <tbb/parallel_for.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>

#include "cpu/blas_lib.h"
#include "cpu/ctype.h"
#include "fusion/node.h"
#include "tensor/convert.h"

namespace loom::cpu {

inline int64_t batch_offset(const View& v, int64_t b) {
  int r = int(v.shape.size());
  int64_t off = v.offset;
  for (int d = r - 3; d >= 0; --d) {
    off += (b % v.shape[d]) * v.strides[d];
    b /= v.shape[d];
  }
  return off;
}

// Gathers one [R, C] matrix of a strided view into a row-major compute buffer.
template <typename T>
void gather(const Input& in, int64_t base, int64_t R, int64_t C, T* out) {
  size_t isz = itemsize(in.dtype);
  int r = int(in.view.shape.size());
  int64_t sr = in.view.strides[r - 2], sc = in.view.strides[r - 1];
  const char* p = static_cast<const char*>(in.st->data());
  for (int64_t i = 0; i < R; ++i)
    load_run<T>(p + (base + i * sr) * int64_t(isz), in.dtype, sc, out + i * C, C);
}

struct Shapes {
  int64_t batch = 1, M, N, K;
};

inline Shapes shapes_of(const Node& n) {
  int r = int(n.shape.size());
  Shapes s{1, n.shape[r - 2], n.shape[r - 1], n.in[0].view.shape[r - 1]};
  for (int d = 0; d < r - 2; ++d) s.batch *= n.shape[d];
  return s;
}

#ifdef LOOM_HAVE_OPENBLAS

// Threads: one pool at a time owns the cores. A batch of at least as many matrices as TBB has
// threads runs as a TBB loop over the batch with the BLAS on one thread each (a threaded GEMM
// inside a TBB task would run threads x threads). With OpenBLAS, fewer, bigger matrices run
// one after the other on its own threads: its threaded GEMM shares the packed panels of B
// between threads, where blocks of C split over TBB each pack all of B again (measured slower,
// most at 4096^3; bench/RESULTS.md). Debian's OpenBLAS (0.3.21) has only the process-wide
// openblas_set_num_threads, so each call sets the count it needs first; that is safe because
// CPU groups run one at a time under the runtime lock (fusion/trace.h). Dropping back to one
// thread after each threaded call would make the next small GEMM wake OpenBLAS's workers
// again (measured: 128^3 took 1.5x as long). It is set on every call, not cached, because
// another user of the same OpenBLAS in the process may change it. MKL is opened sequential
// (cpu/blas_lib.h): every GEMM is split over TBB.
inline void blas_threads(int n) {
  if (auto set = blas_lib().set_threads) set(n);
}
// Whether the BLAS runs threads of its own (else the caller splits every GEMM).
inline bool blas_threaded() { return blas_lib().set_threads != nullptr; }

// One operand's [R, C] matrices as BLAS sees them: a base pointer per batch entry, the
// transpose flag and the leading dimension. A view whose last two strides are (ld, 1) is
// row-major, (1, ld) is a transposed row-major buffer; anything else (both strides > 1,
// negative or too small to be a leading dimension) is gathered into a row-major copy first,
// as are float16/bfloat16 (BLAS computes in float32) and anything past BLAS's int sizes.
template <typename T>
struct Operand {
  const char* base = nullptr;  // element 0 of batch entry 0's matrix (direct views)
  const Input* in = nullptr;
  bool trans = false;
  int64_t ld = 0;
  std::unique_ptr<T[]> copy;  // [batch, R, C] row-major, when gathered

  Operand(const Input& x, int64_t batch, int64_t R, int64_t C) : in(&x) {
    int r = int(x.view.shape.size());
    int64_t sr = x.view.strides[r - 2], sc = x.view.strides[r - 1];
    bool same_type = x.dtype == (sizeof(T) == 8 ? DType::Float64 : DType::Float32);
    // A dim of size 1 never steps, so its stride is free to be whatever the layout needs.
    bool rows = (sc == 1 || C == 1) && (R == 1 || sr >= std::max<int64_t>(C, 1));
    bool cols = (sr == 1 || R == 1) && (C == 1 || sc >= std::max<int64_t>(R, 1));
    int64_t ldr = R == 1 ? std::max<int64_t>(C, 1) : sr;
    int64_t ldc = C == 1 ? std::max<int64_t>(R, 1) : sc;
    if (same_type && rows && ldr <= INT_MAX) {
      ld = ldr;
    } else if (same_type && cols && ldc <= INT_MAX) {
      trans = true;
      ld = ldc;
    } else {
      ld = std::max<int64_t>(C, 1);
      copy.reset(new T[size_t(std::max<int64_t>(batch * R * C, 1))]);
      tbb::parallel_for(int64_t(0), batch, [&](int64_t b) {
        gather<T>(x, batch_offset(x.view, b), R, C, copy.get() + b * R * C);
      });
      return;
    }
    base = static_cast<const char*>(x.st->data());
  }
  // Whether every batch entry is the same matrix (its batch dims broadcast).
  bool stacks_none() const {
    if (copy) return false;
    const View& v = in->view;
    for (int d = 0; d + 2 < int(v.shape.size()); ++d)
      if (v.shape[d] != 1 && v.strides[d] != 0) return false;
    return true;
  }
  // Whether the batch entries' R rows follow each other at the leading dimension, so the
  // whole batch is one matrix of batch * R rows (row-major operands only).
  bool stacks(int64_t R) const {
    if (trans) return false;
    if (copy) return true;  // gathered as [batch, R, C]
    const View& v = in->view;
    int64_t expect = R * ld;
    for (int d = int(v.shape.size()) - 3; d >= 0; --d) {
      if (v.shape[d] == 1) continue;
      if (v.strides[d] != expect) return false;
      expect *= v.shape[d];
    }
    return true;
  }
  // Element (0, 0) of batch entry b's [R, C] matrix.
  const T* matrix(int64_t b, int64_t R, int64_t C) const {
    if (copy) return copy.get() + b * R * C;
    return reinterpret_cast<const T*>(base) + batch_offset(in->view, b);
  }
};

inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float* c, int64_t ldc) {
  blas_lib().sgemm(101, ta ? 112 : 111, tb ? 112 : 111, int(m), int(n), int(k), 1.f, a, int(lda), b,
                   int(ldb), 0.f, c, int(ldc));
}
inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
                 const double* b, int64_t ldb, double* c, int64_t ldc) {
  blas_lib().dgemm(101, ta ? 112 : 111, tb ? 112 : 111, int(m), int(n), int(k), 1.0, a, int(lda), b,
                   int(ldb), 0.0, c, int(ldc));
}

#endif  // LOOM_HAVE_OPENBLAS

}  // namespace loom::cpu
