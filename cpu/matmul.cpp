#include "cpu/matmul.h"

#include <tbb/parallel_for.h>

#include <Eigen/Core>

#include "tensor/convert.h"
#include "cpu/ctype.h"

namespace loom::cpu {
namespace {

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

int64_t batch_offset(const View& v, int64_t b) {
  int r = int(v.shape.size());
  int64_t off = v.offset;
  for (int d = r - 3; d >= 0; --d) {
    off += (b % v.shape[d]) * v.strides[d];
    b /= v.shape[d];
  }
  return off;
}

template <typename T>
void matmul_typed(const Node& n, void* out_mem) {
  const Input &A = n.in[0], &B = n.in[1];
  int r = int(n.shape.size());
  int64_t M = n.shape[r - 2], N = n.shape[r - 1], K = A.view.shape[r - 1];
  int64_t batch = 1;
  for (int d = 0; d < r - 2; ++d) batch *= n.shape[d];
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  char* out = static_cast<char*>(out_mem);
  size_t osz = itemsize(n.dtype);
  tbb::parallel_for(int64_t(0), batch, [&](int64_t b) {
    Mat a(M, K), bm(K, N);
    gather<T>(A, batch_offset(A.view, b), M, K, a.data());
    gather<T>(B, batch_offset(B.view, b), K, N, bm.data());
    Mat c = a * bm;
    store_run<T>(out + b * M * N * int64_t(osz), n.dtype, 1, c.data(), M * N);
  });
}

}  // namespace

void run_matmul(const Group& g) {
  const Node& n = *g.opaque;
  void* out = g.outputs[0].st->data();
  switch (ct_of(n.dtype)) {
    case CT::F32: return matmul_typed<float>(n, out);
    case CT::F64: return matmul_typed<double>(n, out);
    case CT::I64: return matmul_typed<int64_t>(n, out);
    default: return matmul_typed<int32_t>(n, out);
  }
}

}  // namespace loom::cpu
