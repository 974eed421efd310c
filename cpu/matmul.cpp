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
  int threads = tbb::this_task_arena::max_concurrency();
  // One matrix below kSplitMacs multiply-adds: blocks of C along its longer side over TBB,
  // OpenBLAS on one thread each. OpenBLAS's own threads spin (sched_yield) for a long while
  // after each call, taking a core from the fused kernels and GEMMs that follow: a training
  // step alternates them (bench/RESULTS.md, "Training steps: host overheads"). Past kSplitMacs
  // the GEMM is long enough that sharing packed panels between OpenBLAS's threads wins (see
  // "CPU matmul: the BLAS choice").
  constexpr double kSplitMacs = double(1 << 30);
  if (s.batch == 1 && direct_out && threads > 1 &&
      double(s.M) * double(s.N) * double(s.K) < kSplitMacs) {
    const T* a = A.matrix(0, s.M, s.K);
    const T* b = B.matrix(0, s.K, s.N);
    T* c = reinterpret_cast<T*>(out);
    const bool by_rows = s.M >= s.N;
    const int64_t len = by_rows ? s.M : s.N;
    const int parts = int(std::min<int64_t>(threads, std::max<int64_t>(len / 16, 1)));
    const int64_t per = ((len + parts - 1) / parts + 15) / 16 * 16;
    blas_threads(1);
    tbb::parallel_for(
        0, parts,
        [&](int t) {
          const int64_t i0 = t * per, w = std::min(per, len - i0);
          if (w <= 0) return;
          if (by_rows)
            gemm(A.trans, B.trans, w, s.N, s.K, a + (A.trans ? i0 : i0 * A.ld), A.ld, b, B.ld,
                 c + i0 * s.N, s.N);
          else
            gemm(A.trans, B.trans, s.M, w, s.K, a, A.ld, b + (B.trans ? i0 * B.ld : i0), B.ld,
                 c + i0, s.N);
        },
        tbb::static_partitioner());
    return;
  }
  auto one = [&](int64_t b, T* tmp) {
    T* c = direct_out ? reinterpret_cast<T*>(out) + b * s.M * s.N : tmp;
    gemm(A.trans, B.trans, s.M, s.N, s.K, A.matrix(b, s.M, s.K), A.ld, B.matrix(b, s.K, s.N), B.ld,
         c, s.N);
    if (!direct_out) store_run<T>(out + b * s.M * s.N * int64_t(osz), n.dtype, 1, tmp, s.M * s.N);
  };
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
