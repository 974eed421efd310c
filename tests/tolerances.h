#pragma once
// Forward tolerances per stored dtype: the one table every test's default comparison reads.
// Integer and bool results are exact.
//   ref     a result against its float64 reference, or fused against fusion off on one device
//           (lt::tol; tests/helpers.h)
//   device  a CUDA result against the CPU's (lt::device_tol; tests/cuda/test_gpu_ops.cpp): the
//           GPU's math library (libdevice) and its fused multiply-adds (NVRTC --fmad=true) round
//           differently from the CPU's kernels, so float32 and float64 get a looser rtol
#include "tensor/dtype.h"

// X(dtype, ref rtol, ref atol, device rtol, device atol)
#define LT_TOLERANCES(X)                 \
  X(Float64, 1e-12, 1e-12, 1e-10, 1e-12) \
  X(Float32, 1e-5, 1e-6, 2e-5, 1e-6)     \
  X(Float16, 1e-2, 1e-3, 1e-2, 1e-3)     \
  X(BFloat16, 2e-2, 1e-2, 2e-2, 1e-2)

namespace lt {

struct Tol {
  double rtol, atol;
};

inline Tol tol(loom::DType dt) {
  switch (dt) {
#define LT_X(t, rr, ra, dr, da) \
  case loom::DType::t:          \
    return {rr, ra};
    LT_TOLERANCES(LT_X)
#undef LT_X
    default:
      return {0, 0};
  }
}

inline Tol device_tol(loom::DType dt) {
  switch (dt) {
#define LT_X(t, rr, ra, dr, da) \
  case loom::DType::t:          \
    return {dr, da};
    LT_TOLERANCES(LT_X)
#undef LT_X
    default:
      return {0, 0};
  }
}

}  // namespace lt
