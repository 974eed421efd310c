#pragma once
// Which BLAS the CPU matmuls call: the OpenBLAS loom links, or Intel MKL when it is installed
// (PyPI's `mkl` wheel; scripts/deps.sh) and LOOM_CPU_BLAS allows it. MKL is found and opened at
// run time, privately and single-threaded (loom splits each GEMM over its own TBB threads), so
// building, linking and installing loom never depend on it. Its GEMM is the faster one at a
// training step's shapes (bench/RESULTS.md, "Training steps: MKL, ...").
#include <optional>
#include <string>

namespace loom::cpu {

// cblas_sgemm / cblas_dgemm with CBLAS's enums as the ints they are (row-major 101,
// no-transpose 111, transpose 112).
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
using DgemmFn = void (*)(int, int, int, int, int, int, double, const double*, int, const double*,
                         int, double, double*, int);

struct BlasLib {
  std::string name;  // "openblas", "mkl (the file it came from)", or "eigen" (no BLAS built)
  SgemmFn sgemm = nullptr;
  DgemmFn dgemm = nullptr;
  // Sets the library's own thread count; null for a single-threaded library, whose every
  // GEMM the caller splits over TBB.
  void (*set_threads)(int) = nullptr;
};

// Picked at the first call (LOOM_CPU_BLAS, LOOM_MKL); throws when LOOM_CPU_BLAS=mkl and no MKL
// loads.
const BlasLib& blas_lib();

// Each library by itself (builds with OpenBLAS): the one blas_lib() picks among them.
BlasLib openblas_lib();
std::optional<BlasLib> mkl_lib();  // none where no MKL loads from LOOM_MKL's places

}  // namespace loom::cpu
