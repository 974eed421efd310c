// The CPU matmul's BLAS library (cpu/blas_lib.h).
#include "cpu/blas_lib.h"

#ifdef LOOM_HAVE_OPENBLAS
#include <cblas.h>
#include <dlfcn.h>

#include <optional>
#include <vector>

#include "tensor/env.h"
#include "tensor/error.h"
#include "tensor/knobs.h"

namespace loom::cpu {

BlasLib openblas_lib() {
  BlasLib b;
  b.name = "openblas";
  b.sgemm = [](int o, int ta, int tb, int m, int n, int k, float al, const float* a, int lda,
               const float* x, int ldb, float be, float* c, int ldc) {
    cblas_sgemm(CBLAS_ORDER(o), CBLAS_TRANSPOSE(ta), CBLAS_TRANSPOSE(tb), m, n, k, al, a, lda, x,
                ldb, be, c, ldc);
  };
  b.dgemm = [](int o, int ta, int tb, int m, int n, int k, double al, const double* a, int lda,
               const double* x, int ldb, double be, double* c, int ldc) {
    cblas_dgemm(CBLAS_ORDER(o), CBLAS_TRANSPOSE(ta), CBLAS_TRANSPOSE(tb), m, n, k, al, a, lda, x,
                ldb, be, c, ldc);
  };
  b.set_threads = [](int n) { openblas_set_num_threads(n); };
  return b;
}

namespace {

// The files MKL's single dynamic library may be: LOOM_MKL (a file, or a folder holding it),
// then the loader's own search, then the folders pip and conda install it into.
std::vector<std::string> mkl_candidates() {
  const char* names[] = {"libmkl_rt.so.3", "libmkl_rt.so.2", "libmkl_rt.so"};
  std::vector<std::string> out;
  auto in = [&](const std::string& dir) {
    for (const char* n : names) out.push_back(dir + "/" + n);
  };
  std::string given = knob_str(Knob::Mkl);
  if (!given.empty()) {
    out.push_back(given);
    in(given);
    return out;  // where the user points, and nowhere else
  }
  for (const char* n : names) out.push_back(n);
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char* p = env_text(var)) in(std::string(p) + "/lib");
  in("/usr/local/lib");
  if (const char* home = env_text("HOME")) in(std::string(home) + "/.local/lib");
  return out;
}

}  // namespace

// Opened privately (its cblas_* do not replace OpenBLAS's for the rest of the process) and set
// to its sequential layer before any other call, as its threading layer may be chosen only
// first.
std::optional<BlasLib> mkl_lib() {
  for (const std::string& path : mkl_candidates()) {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) continue;
    auto layer = reinterpret_cast<int (*)(int)>(dlsym(h, "MKL_Set_Threading_Layer"));
    auto s = reinterpret_cast<SgemmFn>(dlsym(h, "cblas_sgemm"));
    auto d = reinterpret_cast<DgemmFn>(dlsym(h, "cblas_dgemm"));
    if (!layer || !s || !d) {
      dlclose(h);
      continue;
    }
    constexpr int kSequential = 1;  // MKL_THREADING_SEQUENTIAL
    layer(kSequential);
    BlasLib b;
    b.name = "mkl (" + path + ")";
    b.sgemm = s;
    b.dgemm = d;
    return b;
  }
  return std::nullopt;
}

namespace {

BlasLib pick() {
  std::string want = knob_str(Knob::CpuBlas);
  LOOM_CHECK(want == "auto" || want == "mkl" || want == "openblas", Value,
             "matmul: LOOM_CPU_BLAS must be auto, mkl or openblas, got '", want, "'");
  if (want == "openblas") return openblas_lib();
  std::optional<BlasLib> mkl = mkl_lib();
  LOOM_CHECK(mkl || want == "auto", Runtime,
             "matmul: LOOM_CPU_BLAS=mkl but no MKL library loads (pip install mkl, or point "
             "LOOM_MKL at libmkl_rt)");
  return mkl ? *mkl : openblas_lib();
}

}  // namespace

const BlasLib& blas_lib() {
  static const BlasLib lib = pick();
  return lib;
}

}  // namespace loom::cpu

#else  // a build without a BLAS: Eigen's GEMM (cpu/matmul.cpp)

namespace loom::cpu {
const BlasLib& blas_lib() {
  static const BlasLib lib{"eigen"};
  return lib;
}
}  // namespace loom::cpu

#endif  // LOOM_HAVE_OPENBLAS
