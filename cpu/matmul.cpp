#include "cpu/matmul.h"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <Eigen/Core>
#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>

#include "cpu/ctype.h"
#include "tensor/convert.h"

#ifdef LOOM_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace loom::cpu {
namespace {

int64_t batch_offset(const View& v, int64_t b) {
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

Shapes shapes_of(const Node& n) {
  int r = int(n.shape.size());
  Shapes s{1, n.shape[r - 2], n.shape[r - 1], n.in[0].view.shape[r - 1]};
  for (int d = 0; d < r - 2; ++d) s.batch *= n.shape[d];
  return s;
}

// Integers (no BLAS has them) and builds without a BLAS: Eigen's GEMM on gathered row-major
// copies, one batch entry per TBB task.
template <typename T>
void matmul_eigen(const Node& n, void* out_mem) {
  const Input &A = n.in[0], &B = n.in[1];
  Shapes s = shapes_of(n);
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  char* out = static_cast<char*>(out_mem);
  size_t osz = itemsize(n.dtype);
  tbb::parallel_for(int64_t(0), s.batch, [&](int64_t b) {
    Mat a(s.M, s.K), bm(s.K, s.N);
    gather<T>(A, batch_offset(A.view, b), s.M, s.K, a.data());
    gather<T>(B, batch_offset(B.view, b), s.K, s.N, bm.data());
    Mat c = a * bm;
    store_run<T>(out + b * s.M * s.N * int64_t(osz), n.dtype, 1, c.data(), s.M * s.N);
  });
}

#ifdef LOOM_HAVE_OPENBLAS

// Threads: one pool at a time owns the cores. A batch of at least as many matrices as TBB has
// threads runs as a TBB loop over the batch with OpenBLAS on one thread each (a threaded GEMM
// inside a TBB task would run threads x threads). Fewer, bigger matrices run one after the
// other on OpenBLAS's own threads: its threaded GEMM shares the packed panels of B between
// threads, where blocks of C split over TBB each pack all of B again (measured slower, most at
// 4096^3; bench/RESULTS.md). Debian's OpenBLAS (0.3.21) has only the process-wide
// openblas_set_num_threads, so each call sets the count it needs first; that is safe because
// CPU groups run one at a time under the runtime lock (fusion/trace.h). Dropping back to one
// thread after each threaded call would make the next small GEMM wake OpenBLAS's workers
// again (measured: 128^3 took 1.5x as long). It is set on every call, not cached, because
// another user of the same OpenBLAS in the process may change it. Either Debian build (pthread
// or OpenMP, the system's libopenblas.so.0 alternative) behaves the same under an explicit
// count.
void blas_threads(int n) { openblas_set_num_threads(n); }

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

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m),
              int(n), int(k), 1.f, a, int(lda), b, int(ldb), 0.f, c, int(ldc));
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
          const double* b, int64_t ldb, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m),
              int(n), int(k), 1.0, a, int(lda), b, int(ldb), 0.0, c, int(ldc));
}

// T: float or double, the type BLAS computes in. The output is written in place when its
// dtype is T, else through a T buffer and converted (float16/bfloat16).
template <typename T>
void matmul_blas(const Node& n, void* out_mem) {
  Shapes s = shapes_of(n);
  char* out = static_cast<char*>(out_mem);
  size_t osz = itemsize(n.dtype);
  if (s.M == 0 || s.N == 0) return;
  if (s.K == 0) {
    std::memset(out, 0, size_t(s.batch * s.M * s.N) * osz);
    return;
  }
  Operand<T> A(n.in[0], s.batch, s.M, s.K), B(n.in[1], s.batch, s.K, s.N);
  bool direct_out = n.dtype == (sizeof(T) == 8 ? DType::Float64 : DType::Float32);
  // One B for every batch entry (a linear layer's weight) and the A matrices one after the
  // other: one GEMM of batch * M rows, split into a block of rows per TBB thread, each
  // single-threaded (B packed once a thread instead of once an entry: x [32, 64, 128] @
  // w [128, 384] as 32 GEMMs of 64 rows took 1.6x the time). Not OpenBLAS's own threads:
  // they spin after each call and slow the fused kernels that follow (bench/RESULTS.md).
  if (s.batch > 1 && direct_out && !A.trans && B.stacks_none() && A.stacks(s.M) &&
      s.batch * s.M <= INT_MAX) {
    const int64_t rows = s.batch * s.M;
    const int parts = tbb::this_task_arena::max_concurrency();
    const int64_t per = (rows + parts - 1) / parts;
    const T* a = A.matrix(0, s.M, s.K);
    const T* b = B.matrix(0, s.K, s.N);
    T* c = reinterpret_cast<T*>(out);
    blas_threads(1);
    tbb::parallel_for(0, parts, [&](int t) {
      const int64_t r0 = t * per, m = std::min(per, rows - r0);
      if (m > 0) gemm(false, B.trans, m, s.N, s.K, a + r0 * A.ld, A.ld, b, B.ld, c + r0 * s.N, s.N);
    });
    return;
  }
  auto one = [&](int64_t b, T* tmp) {
    T* c = direct_out ? reinterpret_cast<T*>(out) + b * s.M * s.N : tmp;
    gemm(A.trans, B.trans, s.M, s.N, s.K, A.matrix(b, s.M, s.K), A.ld, B.matrix(b, s.K, s.N), B.ld,
         c, s.N);
    if (!direct_out) store_run<T>(out + b * s.M * s.N * int64_t(osz), n.dtype, 1, tmp, s.M * s.N);
  };
  int threads = tbb::this_task_arena::max_concurrency();
  std::unique_ptr<T[]> tmp;
  if (s.batch >= threads && s.batch > 1) {
    blas_threads(1);
    tbb::parallel_for(int64_t(0), s.batch, [&](int64_t b) {
      std::unique_ptr<T[]> buf(direct_out ? nullptr : new T[size_t(s.M * s.N)]);
      one(b, buf.get());
    });
    return;
  }
  if (!direct_out) tmp.reset(new T[size_t(s.M * s.N)]);
  blas_threads(threads);
  for (int64_t b = 0; b < s.batch; ++b) one(b, tmp.get());
}

#endif  // LOOM_HAVE_OPENBLAS

}  // namespace

void run_matmul(const Group& g) {
  const Node& n = *g.opaque;
  void* out = g.outputs[0].st->data();
  switch (ct_of(n.dtype)) {
#ifdef LOOM_HAVE_OPENBLAS
    case CT::F32:
      return matmul_blas<float>(n, out);
    case CT::F64:
      return matmul_blas<double>(n, out);
#else
    case CT::F32:
      return matmul_eigen<float>(n, out);
    case CT::F64:
      return matmul_eigen<double>(n, out);
#endif
    case CT::I64:
      return matmul_eigen<int64_t>(n, out);
    case CT::U64:
      return matmul_eigen<uint64_t>(n, out);
    default:
      return matmul_eigen<int32_t>(n, out);
  }
}

}  // namespace loom::cpu
