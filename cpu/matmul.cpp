#include "cpu/matmul.h"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <Eigen/Core>
#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <mutex>

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

// OpenBLAS runs on one thread for every call and loom splits the work over TBB instead:
// over the batch, and over blocks of rows (or columns) of C for a big matrix. OpenBLAS's own
// pool would otherwise compete with TBB's for the same cores: a batch loop in TBB that calls
// a threaded GEMM oversubscribes (threads x threads), and after each call OpenBLAS's workers
// keep spinning for a while, taking a core from the fused kernel that runs next under TBB.
// OpenBLAS has no per-call thread count in the Debian release (only the process-wide
// openblas_set_num_threads), so the setting is made once. Either Debian build (pthread or
// OpenMP, chosen at run time by update-alternatives) then runs the caller's thread only.
void blas_single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

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
  // Element (i, j) of batch entry b's matrix.
  const T* at(int64_t b, int64_t R, int64_t C, int64_t i, int64_t j) const {
    if (copy) return copy.get() + b * R * C + i * ld + j;
    int64_t off = batch_offset(in->view, b) + (trans ? j * ld + i : i * ld + j);
    return reinterpret_cast<const T*>(base) + off;
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

// A matrix is cut into blocks of rows (or columns) of C only while each block keeps at least
// kMinBlock of them and kMinTaskFlops of work: every block packs the whole of the other operand
// again, and a TBB task costs a few microseconds.
constexpr int64_t kMinBlock = 64;
constexpr double kMinTaskFlops = 2e6;

// T: float or double, the type BLAS computes in. The output is written in place when its
// dtype is T, else through a T buffer per task and converted (float16/bfloat16).
template <typename T>
void matmul_blas(const Node& n, void* out_mem) {
  blas_single_threaded();
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
  // Tasks: every batch entry, each cut into `parts` blocks along the longer side of C when the
  // batch alone gives the threads too few tasks (two per thread, for balance when another
  // process holds a core).
  int64_t threads = tbb::this_task_arena::max_concurrency();
  bool split_rows = s.M >= s.N;
  int64_t side = split_rows ? s.M : s.N;
  int64_t want = (2 * threads + s.batch - 1) / s.batch;
  double flops = 2.0 * double(s.M) * double(s.N) * double(s.K);
  int64_t by_flops = int64_t(flops / kMinTaskFlops);
  int64_t parts = std::clamp<int64_t>(std::min({want, side / kMinBlock, by_flops}), 1, side);
  tbb::parallel_for(int64_t(0), s.batch * parts, [&](int64_t task) {
    int64_t b = task / parts, p = task % parts;
    int64_t lo = side * p / parts, hi = side * (p + 1) / parts;
    int64_t i0 = split_rows ? lo : 0, j0 = split_rows ? 0 : lo;
    int64_t m = split_rows ? hi - lo : s.M, nn = split_rows ? s.N : hi - lo;
    char* c0 = out + ((b * s.M + i0) * s.N + j0) * int64_t(osz);
    std::unique_ptr<T[]> tmp;
    T* c = reinterpret_cast<T*>(c0);
    int64_t ldc = s.N;
    if (!direct_out) {
      tmp.reset(new T[size_t(m * nn)]);
      c = tmp.get();
      ldc = nn;
    }
    gemm(A.trans, B.trans, m, nn, s.K, A.at(b, s.M, s.K, i0, 0), A.ld, B.at(b, s.K, s.N, 0, j0),
         B.ld, c, ldc);
    if (!direct_out)
      for (int64_t i = 0; i < m; ++i)
        store_run<T>(c0 + i * s.N * int64_t(osz), n.dtype, 1, c + i * nn, nn);
  });
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
    default:
      return matmul_eigen<int32_t>(n, out);
  }
}

}  // namespace loom::cpu
