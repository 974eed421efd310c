#include "cpu/matmul.h"

#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <Eigen/Core>
#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>

#include "cpu/blas.h"

namespace loom::cpu {
namespace {

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

// C = A B of one [m, k] x [k, n] product split into blocks of C along its longer side (rows
// when m >= n; multiples of 16), one block per TBB thread with the BLAS on one thread in each.
template <typename T>
void gemm_split(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                const T* b, int64_t ldb, T* c, int64_t ldc, int threads) {
  const bool by_rows = m >= n;
  const int64_t len = by_rows ? m : n;
  const int parts = int(std::min<int64_t>(threads, std::max<int64_t>(len / 16, 1)));
  const int64_t per = ((len + parts - 1) / parts + 15) / 16 * 16;
  blas_threads(1);
  tbb::parallel_for(
      0, parts,
      [&](int t) {
        const int64_t i0 = t * per, w = std::min(per, len - i0);
        if (w <= 0) return;
        if (by_rows)
          gemm(ta, tb, w, n, k, a + (ta ? i0 : i0 * lda), lda, b, ldb, c + i0 * ldc, ldc);
        else
          gemm(ta, tb, m, w, k, a, lda, b + (tb ? i0 * ldb : i0), ldb, c + i0, ldc);
      },
      tbb::static_partitioner());
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
  const int threads = tbb::this_task_arena::max_concurrency();
  // One B for every batch entry (a linear layer's weight) and the A matrices one after the
  // other: one GEMM of batch * M rows, split over TBB (B packed once a thread instead of once
  // an entry: x [32, 64, 128] @ w [128, 384] as 32 GEMMs of 64 rows took 1.6x the time). Not
  // OpenBLAS's own threads: they spin after each call and slow the fused kernels that follow
  // (bench/RESULTS.md).
  if (s.batch > 1 && direct_out && !A.trans && B.stacks_none() && A.stacks(s.M) &&
      s.batch * s.M <= INT_MAX) {
    gemm_split(false, B.trans, s.batch * s.M, s.N, s.K, A.matrix(0, s.M, s.K), A.ld,
               B.matrix(0, s.K, s.N), B.ld, reinterpret_cast<T*>(out), s.N, threads);
    return;
  }
  // A single matrix is split over TBB below kSplitMacs multiply-adds (OpenBLAS's own threads
  // spin in sched_yield for a long while after each call, taking a core from the fused kernels
  // and GEMMs that follow: bench/RESULTS.md, "Training steps: host overheads"); past it, the
  // GEMM is long enough that sharing packed panels between OpenBLAS's threads wins ("CPU
  // matmul: the BLAS choice"). A single-threaded BLAS (MKL) is split always.
  constexpr double kSplitMacs = double(1 << 30);
  const bool split =
      threads > 1 &&
      (!blas_threaded() || (s.batch == 1 && double(s.M) * double(s.N) * double(s.K) < kSplitMacs));
  auto one = [&](int64_t b, T* tmp, bool split_it) {
    T* c = direct_out ? reinterpret_cast<T*>(out) + b * s.M * s.N : tmp;
    const T* a = A.matrix(b, s.M, s.K);
    const T* bm = B.matrix(b, s.K, s.N);
    if (split_it)
      gemm_split(A.trans, B.trans, s.M, s.N, s.K, a, A.ld, bm, B.ld, c, s.N, threads);
    else
      gemm(A.trans, B.trans, s.M, s.N, s.K, a, A.ld, bm, B.ld, c, s.N);
    if (!direct_out) store_run<T>(out + b * s.M * s.N * int64_t(osz), n.dtype, 1, c, s.M * s.N);
  };
  if (s.batch >= threads && s.batch > 1) {
    blas_threads(1);
    tbb::parallel_for(int64_t(0), s.batch, [&](int64_t b) {
      std::unique_ptr<T[]> buf(direct_out ? nullptr : new T[size_t(s.M * s.N)]);
      one(b, buf.get(), false);
    });
    return;
  }
  std::unique_ptr<T[]> tmp(direct_out ? nullptr : new T[size_t(s.M * s.N)]);
  if (!split) blas_threads(threads);
  for (int64_t b = 0; b < s.batch; ++b) one(b, tmp.get(), split);
}

#endif  // LOOM_HAVE_OPENBLAS

}  // namespace

void run_matmul(const Group& g) { run_matmul_into(*g.opaque, g.outputs[0].st->data()); }

void run_matmul_into(const Node& n, void* out) {
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
