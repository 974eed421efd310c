// GEMM throughput of the BLAS libraries Debian ships (OpenBLAS and BLIS, each as its pthread
// and its OpenMP build; oneDNN) against Eigen and loom's own matmul, in one process.
//
// Each library is dlopen'ed privately (RTLD_LOCAL | RTLD_DEEPBIND) from its own folder, so
// several cblas_sgemm exporters coexist and the system's libblas alternative does not decide
// what is measured. Libraries are timed in blocks (not interleaved run by run) with a pause
// between blocks: a BLAS's worker threads keep spinning for a while after a call, and would
// steal the other core from the next library's run. The rounds rotate the order so a load
// change on the shared machine spreads over all of them.
//
// Batched shapes run two ways per library and report the better: a serial loop over the batch
// with the library's own threads, and a TBB loop over the batch with the library on one
// thread. The `how` column says which won (lib = its threads, tbb = TBB over the batch).
#include <dlfcn.h>
#include <tbb/parallel_for.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "loom.h"

using Clock = std::chrono::steady_clock;

// The OpenBLAS that loom itself links, when it does: dlopen of the same file returns that
// copy, so a library block here that sets its thread count also sets loom's.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace {

enum { kRowMajor = 101, kNoTrans = 111, kTrans = 112 };
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
using DgemmFn = void (*)(int, int, int, int, int, int, double, const double*, int, const double*,
                         int, double, double*, int);
using DnnlSgemmFn = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t,
                            const float*, int64_t, float, float*, int64_t);

// One library under test: its GEMM entry points and how to set its thread count.
struct Lib {
  std::string name;
  SgemmFn sgemm = nullptr;
  DgemmFn dgemm = nullptr;
  DnnlSgemmFn dnnl_sgemm = nullptr;
  std::function<void(int)> set_threads;  // affects later calls from this thread (at least)
  bool per_thread = false;               // set_threads must run on each calling thread
};

void* open_lib(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!h) std::fprintf(stderr, "skip %s: %s\n", path, dlerror());
  return h;
}

template <typename F>
F sym(void* h, const char* name) {
  return reinterpret_cast<F>(dlsym(h, name));
}

std::vector<Lib> load_libs() {
  std::vector<Lib> libs;
  const std::string dir = "/usr/lib/x86_64-linux-gnu/";
  for (const char* v : {"pthread", "openmp"}) {
    if (void* h = open_lib((dir + "openblas-" + v + "/libopenblas.so.0").c_str())) {
      auto set = sym<void (*)(int)>(h, "openblas_set_num_threads");
      libs.push_back({std::string("openblas-") + v, sym<SgemmFn>(h, "cblas_sgemm"),
                      sym<DgemmFn>(h, "cblas_dgemm"), nullptr, [set](int n) { set(n); }});
    }
  }
  for (const char* v : {"pthread", "openmp"}) {
    if (void* h = open_lib((dir + "blis-" + v + "/libblis.so.4").c_str())) {
      auto set = sym<void (*)(int64_t)>(h, "bli_thread_set_num_threads");
      libs.push_back({std::string("blis-") + v, sym<SgemmFn>(h, "cblas_sgemm"),
                      sym<DgemmFn>(h, "cblas_dgemm"), nullptr, [set](int n) { set(n); }});
    }
  }
  if (void* h = open_lib((dir + "libdnnl.so.2").c_str())) {
    // oneDNN (Debian: the OpenMP build) has no dgemm; its thread count is OpenMP's, which is
    // per calling thread.
    auto set = sym<void (*)(int)>(h, "omp_set_num_threads");
    libs.push_back({"onednn", nullptr, nullptr, sym<DnnlSgemmFn>(h, "dnnl_sgemm"),
                    [set](int n) { set(n); }, true});
  }
  return libs;
}

struct Case {
  std::string name;
  int64_t batch, M, K, N;
  bool ta, tb;  // operand stored transposed (a .t() view of a row-major buffer)
};

template <typename T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// C = op(A) @ op(B) for one row-major matrix, with Eigen on this thread.
template <typename T>
void eigen_gemm(const Case& c, const T* a, const T* b, T* out, int64_t m0, int64_t m1) {
  using Map = Eigen::Map<const Mat<T>>;
  Eigen::Map<Mat<T>> C(out + m0 * c.N, m1 - m0, c.N);
  Map A(a, c.ta ? c.K : c.M, c.ta ? c.M : c.K), B(b, c.tb ? c.N : c.K, c.tb ? c.K : c.N);
  if (c.ta && c.tb)
    C.noalias() = A.transpose().middleRows(m0, m1 - m0) * B.transpose();
  else if (c.ta)
    C.noalias() = A.transpose().middleRows(m0, m1 - m0) * B;
  else if (c.tb)
    C.noalias() = A.middleRows(m0, m1 - m0) * B.transpose();
  else
    C.noalias() = A.middleRows(m0, m1 - m0) * B;
}

template <typename T>
void lib_gemm(const Lib& L, const Case& c, const T* a, const T* b, T* out) {
  int lda = int(c.ta ? c.M : c.K), ldb = int(c.tb ? c.K : c.N);
  if constexpr (std::is_same_v<T, float>) {
    if (L.dnnl_sgemm) {
      L.dnnl_sgemm(c.ta ? 'T' : 'N', c.tb ? 'T' : 'N', c.M, c.N, c.K, 1.f, a, lda, b, ldb, 0.f, out,
                   c.N);
      return;
    }
    L.sgemm(kRowMajor, c.ta ? kTrans : kNoTrans, c.tb ? kTrans : kNoTrans, int(c.M), int(c.N),
            int(c.K), 1.f, a, lda, b, ldb, 0.f, out, int(c.N));
  } else {
    L.dgemm(kRowMajor, c.ta ? kTrans : kNoTrans, c.tb ? kTrans : kNoTrans, int(c.M), int(c.N),
            int(c.K), 1.0, a, lda, b, ldb, 0.0, out, int(c.N));
  }
}

struct Stat {
  double min_ms = 1e30, med_ms = 0;
  std::vector<double> runs;
  void finish() {
    std::sort(runs.begin(), runs.end());
    min_ms = runs.front();
    med_ms = runs[runs.size() / 2];
  }
};

// Runs f until `budget_s` has passed (at least `lo`, at most `hi` runs), after a warm-up run
// unless the runs are long enough to need none (`warm` false).
void time_block(const std::function<void()>& f, Stat& s, double budget_s, int lo, int hi,
                bool warm) {
  if (warm) f();
  auto start = Clock::now();
  for (int i = 0; i < hi; ++i) {
    auto t0 = Clock::now();
    f();
    s.runs.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (i + 1 >= lo && std::chrono::duration<double>(Clock::now() - start).count() > budget_s)
      break;
  }
}

struct Impl {
  std::string name;
  std::function<void()> run;
  Stat stat;
  std::string how;
};

template <typename T>
void run_case(const Case& c, const std::vector<Lib>& libs, int rounds, double budget,
              const std::string& dname) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  int64_t sa = c.M * c.K, sb = c.K * c.N, sc = c.M * c.N;
  std::vector<T> A(size_t(c.batch * sa)), B(size_t(c.batch * sb)), ref(size_t(c.batch * sc));
  for (auto& x : A) x = T(u(rng));
  for (auto& x : B) x = T(u(rng));
  for (int64_t q = 0; q < c.batch; ++q)
    eigen_gemm<T>(c, A.data() + q * sa, B.data() + q * sb, ref.data() + q * sc, 0, c.M);
  std::vector<T> C(ref.size());
  double flops = 2.0 * double(c.batch) * double(c.M) * double(c.N) * double(c.K);
  bool batched = c.batch > 1;

  std::vector<Impl> impls;
  // Eigen: a TBB loop over the batch, or over two row halves of one matrix (Eigen's own GEMM
  // threads only under OpenMP, which loom does not build with).
  impls.push_back(
      {"eigen", [&] {
         if (batched) {
           tbb::parallel_for(int64_t(0), c.batch, [&](int64_t q) {
             eigen_gemm<T>(c, A.data() + q * sa, B.data() + q * sb, C.data() + q * sc, 0, c.M);
           });
         } else {
           int64_t parts = c.M >= 64 ? 2 : 1;
           tbb::parallel_for(int64_t(0), parts, [&](int64_t p) {
             eigen_gemm<T>(c, A.data(), B.data(), C.data(), c.M * p / parts, c.M * (p + 1) / parts);
           });
         }
       }});
  // loom's matmul over the same memory (zero-copy views), including its flush.
  loom::DType ldt = std::is_same_v<T, float> ? loom::DType::Float32 : loom::DType::Float64;
  auto view = [&](T* p, int64_t r, int64_t cc, bool tr) {
    loom::Shape sh = c.batch > 1 ? loom::Shape{c.batch, tr ? cc : r, tr ? r : cc}
                                 : loom::Shape{tr ? cc : r, tr ? r : cc};
    loom::Strides st =
        c.batch > 1 ? loom::Strides{r * cc, tr ? r : cc, 1} : loom::Strides{tr ? r : cc, 1};
    loom::Tensor t = loom::from_external(p, sh, st, ldt, loom::kCPU, [] {});
    return tr ? t.transpose(-1, -2) : t;
  };
  loom::Tensor la = view(A.data(), c.M, c.K, c.ta), lb = view(B.data(), c.K, c.N, c.tb);
  impls.push_back({"loom", [&, la, lb] {
                     loom::Tensor r = loom::matmul(la, lb);
                     r.data_ptr();
                   }});
  for (const Lib& L : libs) {
    if (std::is_same_v<T, double> && !L.dgemm) continue;
    impls.push_back({L.name, [&c, &L, &A, &B, &C, sa, sb, sc, batched] {
                       if (!batched) return lib_gemm<T>(L, c, A.data(), B.data(), C.data());
                       for (int64_t q = 0; q < c.batch; ++q)
                         lib_gemm<T>(L, c, A.data() + q * sa, B.data() + q * sb, C.data() + q * sc);
                     }});
    impls.back().how = "lib";
  }
  // The TBB-over-batch variants, run with each library set to one thread.
  std::vector<Impl> tbb_impls;
  if (batched)
    for (const Lib& L : libs) {
      if (std::is_same_v<T, double> && !L.dgemm) continue;
      tbb_impls.push_back({L.name, [&c, &L, &A, &B, &C, sa, sb, sc] {
                             tbb::parallel_for(int64_t(0), c.batch, [&](int64_t q) {
                               if (L.per_thread) L.set_threads(1);
                               lib_gemm<T>(L, c, A.data() + q * sa, B.data() + q * sb,
                                           C.data() + q * sc);
                             });
                             if (L.per_thread) L.set_threads(2);
                           }});
    }

  auto lib_of = [&](const std::string& n) -> const Lib* {
    for (auto& L : libs)
      if (L.name == n) return &L;
    return nullptr;
  };
  auto check = [&](const std::string& n) {
    double err = 0, mag = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      err = std::max(err, std::abs(double(C[i]) - double(ref[i])));
      mag = std::max(mag, std::abs(double(ref[i])));
    }
    if (err > mag * (std::is_same_v<T, float> ? 1e-4 : 1e-10))
      std::printf("  !! %s %s: max error %.3g (magnitude %.3g)\n", n.c_str(), c.name.c_str(), err,
                  mag);
  };
  for (int r = 0; r < rounds; ++r) {
    size_t n = impls.size() + tbb_impls.size();
    for (size_t j = 0; j < n; ++j) {
      size_t k = (j + size_t(r) * 3) % n;
      Impl& im = k < impls.size() ? impls[k] : tbb_impls[k - impls.size()];
      const Lib* L = lib_of(im.name);
      bool is_tbb = k >= impls.size();
      if (L) L->set_threads(is_tbb ? 1 : 2);
      if (im.name == "loom" && openblas_set_num_threads) openblas_set_num_threads(1);
      std::fill(C.begin(), C.end(), T(0));
      time_block(im.run, im.stat, budget, 2, 40, flops < 2e10);
      if (im.name != "loom") check(im.name);
      if (L) L->set_threads(2);
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
    }
  }
  for (auto& im : impls) im.stat.finish();
  for (auto& im : tbb_impls) {
    im.stat.finish();
    for (auto& o : impls)
      if (o.name == im.name && im.stat.min_ms < o.stat.min_ms) {
        o.stat = im.stat;
        o.how = "tbb";
      }
  }
  for (auto& im : impls)
    std::printf("%-5s %-24s %-16s %-4s %8.1f %8.1f   (min %.3f ms, median %.3f ms, n=%zu)\n",
                dname.c_str(), c.name.c_str(), im.name.c_str(), im.how.c_str(),
                flops / im.stat.min_ms / 1e6, flops / im.stat.med_ms / 1e6, im.stat.min_ms,
                im.stat.med_ms, im.stat.runs.size());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 2;
  double budget = 0.4;
  std::string only_dtype, only_case, only_libs;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc)
      rounds = std::atoi(argv[++i]);
    else if (a == "--budget" && i + 1 < argc)
      budget = std::atof(argv[++i]);
    else if (a == "--dtype" && i + 1 < argc)
      only_dtype = argv[++i];
    else if (a == "--case" && i + 1 < argc)
      only_case = argv[++i];
    else if (a == "--libs" && i + 1 < argc)
      only_libs = "," + std::string(argv[++i]) + ",";
  }
  std::vector<Lib> libs = load_libs();
  if (!only_libs.empty())
    std::erase_if(libs, [&](const Lib& L) {
      return only_libs.find("," + L.name + ",") == std::string::npos;
    });
  std::vector<Case> cases = {
      {"4096x4096x4096", 1, 4096, 4096, 4096, false, false},
      {"1024x1024x1024", 1, 1024, 1024, 1024, false, false},
      {"2048x768x768", 1, 2048, 768, 768, false, false},
      {"2048x128x384", 1, 2048, 128, 384, false, false},
      {"128x128x128", 1, 128, 128, 128, false, false},
      {"64x64x64", 1, 64, 64, 64, false, false},
      {"[128]64x32x64", 128, 64, 32, 64, false, false},
      {"[128]64x64x32", 128, 64, 64, 32, false, false},
      {"1024^3 A.t()", 1, 1024, 1024, 1024, true, false},
      {"1024^3 B.t()", 1, 1024, 1024, 1024, false, true},
      {"2048x768x768 B.t()", 1, 2048, 768, 768, false, true},
      {"[128]64x32x64 B.t()", 128, 64, 32, 64, false, true},
  };
  std::printf("%-5s %-24s %-16s %-4s %8s %8s   GFLOP/s from the min and the median run\n", "dtype",
              "shape (MxKxN)", "impl", "how", "min", "median");
  for (const char* d : {"f32", "f64"}) {
    if (!only_dtype.empty() && only_dtype != d) continue;
    for (const Case& c : cases) {
      if (!only_case.empty() && c.name.find(only_case) == std::string::npos) continue;
      if (std::string(d) == "f32")
        run_case<float>(c, libs, rounds, budget, d);
      else
        run_case<double>(c, libs, rounds, budget, d);
    }
  }
  return 0;
}
