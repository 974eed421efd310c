// cuBLASLt through dlopen with our own declarations of the few entry points (loom builds with no
// CUDA toolkit), plus a generated fallback kernel.
//
// Row-major C[M,N] = A[M,K] B[K,N] is column-major C^T = B^T A^T: cuBLAS's "A" is our B and its
// "B" is our A. A row-major operand (unit column stride) is its own transpose in column-major
// terms (op N); a column-major one (unit row stride) is used with op T.
#include "cuda/cublaslt.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "cuda/codegen_emit.h"
#include "tensor/error.h"
#include "tensor/knobs.h"

namespace loom::cuda {
namespace {

using Status = int;
using Handle = void*;
struct Algo {
  uint64_t data[8];
};
struct Heuristic {
  Algo algo;
  size_t workspace;
  Status state;
  float waves;
  int reserved[4];
};

// Values from cublasLt.h / cublas_api.h / library_types.h (CUDA 12 and 13 agree).
constexpr int kCompute32F = 68, kCompute64F = 70;
constexpr int kR32F = 0, kR64F = 1, kR16F = 2, kR16BF = 14;
constexpr int kDescTransA = 3, kDescTransB = 4;
constexpr int kLayoutBatchCount = 5, kLayoutBatchStride = 6;
constexpr int kPrefMaxWorkspace = 1;
constexpr size_t kWorkspace = size_t(32) << 20;

struct Api {
  Status (*Create)(Handle*);
  Status (*DescCreate)(void**, int, int);
  Status (*DescDestroy)(void*);
  Status (*DescSet)(void*, int, const void*, size_t);
  Status (*LayoutCreate)(void**, int, uint64_t, uint64_t, int64_t);
  Status (*LayoutDestroy)(void*);
  Status (*LayoutSet)(void*, int, const void*, size_t);
  Status (*PrefCreate)(void**);
  Status (*PrefDestroy)(void*);
  Status (*PrefSet)(void*, int, const void*, size_t);
  Status (*GetHeuristic)(Handle, void*, void*, void*, void*, void*, void*, int, Heuristic*, int*);
  Status (*Matmul)(Handle, void*, const void*, const void*, void*, const void*, void*, const void*,
                   const void*, void*, void*, void*, const Algo*, void*, size_t, void*);
};

std::optional<Api> open_api() {
  void* h = nullptr;
  for (const char* n : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"})
    if ((h = dlopen(n, RTLD_NOW | RTLD_LOCAL))) break;
  if (!h) return std::nullopt;  // never closed: handles may live until exit
  Api a{};
  bool ok = true;
  auto sym = [&](auto& fn, const char* name) {
    void* p = dlsym(h, name);
    ok = ok && p;
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  sym(a.Create, "cublasLtCreate");
  sym(a.DescCreate, "cublasLtMatmulDescCreate");
  sym(a.DescDestroy, "cublasLtMatmulDescDestroy");
  sym(a.DescSet, "cublasLtMatmulDescSetAttribute");
  sym(a.LayoutCreate, "cublasLtMatrixLayoutCreate");
  sym(a.LayoutDestroy, "cublasLtMatrixLayoutDestroy");
  sym(a.LayoutSet, "cublasLtMatrixLayoutSetAttribute");
  sym(a.PrefCreate, "cublasLtMatmulPreferenceCreate");
  sym(a.PrefDestroy, "cublasLtMatmulPreferenceDestroy");
  sym(a.PrefSet, "cublasLtMatmulPreferenceSetAttribute");
  sym(a.GetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
  sym(a.Matmul, "cublasLtMatmul");
  if (!ok) return std::nullopt;
  return a;
}

// A column-major matrix as BLAS sees it: rows x cols with leading dim ld, used as op(T) or not.
struct Mat {
  int64_t rows, cols, ld;
  bool trans;
};

// X^T for a row-major logical X [R, C] with strides (sr, sc), if BLAS can express it.
std::optional<Mat> transposed(int64_t R, int64_t C, int64_t sr, int64_t sc) {
  if ((C == 1 || sc == 1) && (R == 1 || sr >= std::max<int64_t>(C, 1)))
    return Mat{C, R, R == 1 ? std::max<int64_t>(C, 1) : sr, false};
  if ((R == 1 || sr == 1) && (C == 1 || sc >= std::max<int64_t>(R, 1)))
    return Mat{R, C, C == 1 ? std::max<int64_t>(R, 1) : sc, true};
  return std::nullopt;
}

// The batch dims [i, j) one cuBLASLt call covers, how many matrices that is, and A's and B's
// stride over them.
struct BatchRun {
  int i = 0, j = 0;
  int64_t count = 1, sa = 0, sb = 0;
};

// Fallback kernel: one thread an output element, any strides and batch broadcast.
struct NaiveParams {
  uint64_t a, b, c;
  int64_t m, n, k, asr, asc, bsr, bsc, nb, total, aoff, boff;
  int64_t bsize[8], astr[8], bstr[8];
};

}  // namespace

std::string matmul_fallback_source(DType t) {
  Group g;  // only for the emitter's type and conversion helpers
  gen::Emitter e(g);
  std::string st = gen::Emitter::storage_type(t), ct = gen::Emitter::ctype(t);
  std::string la = e.load(t, "A[ao + r * p.asr + q * p.asc]");
  std::string lb = e.load(t, "B[bo + q * p.bsr + j * p.bsc]");
  std::string sc = e.store(t, "acc");
  std::string pre = e.prelude();
  pre = pre.substr(0, pre.find("struct P {"));  // the helpers, not the group's parameter struct
  std::ostringstream os;
  os << pre << "typedef long long ll;\n"
     << "struct MP {\n  const void* a;\n  const void* b;\n  void* c;\n"
     << "  ll m, n, k, asr, asc, bsr, bsc, nb, total, aoff, boff;\n"
     << "  ll bsize[8], astr[8], bstr[8];\n};\n"
     << "extern \"C\" __global__ void __launch_bounds__(256) loom_matmul(const MP p) {\n"
     << "  const " << st << "* A = (const " << st << "*)p.a;\n"
     << "  const " << st << "* B = (const " << st << "*)p.b;\n"
     << "  " << st << "* C = (" << st << "*)p.c;\n"
     << "  for (ll i = (ll)blockIdx.x * blockDim.x + threadIdx.x; i < p.total;\n"
     << "       i += (ll)blockDim.x * gridDim.x) {\n"
     << "    const ll j = i % p.n, t = i / p.n, r = t % p.m;\n"
     << "    ll b = t / p.m, ao = p.aoff, bo = p.boff;\n"
     << "    for (int d = (int)p.nb - 1; d >= 0; --d) {\n"
     << "      const ll x = b % p.bsize[d];\n      b /= p.bsize[d];\n"
     << "      ao += x * p.astr[d];\n      bo += x * p.bstr[d];\n    }\n"
     << "    " << ct << " acc = 0;\n"
     << "    for (ll q = 0; q < p.k; ++q) acc += (" << ct << ")(" << la << " * " << lb << ");\n"
     << "    C[i] = " << sc << ";\n  }\n}\n";
  return os.str();
}

struct Matmul::Lt {
  Api api;
  Handle handle = nullptr;
  // One workspace per stream: matmuls on two streams may run at the same time.
  std::unordered_map<uint64_t, DevicePtr> workspaces;
  std::unordered_map<std::string, Heuristic> algos;
};

Matmul::Matmul(int dev, Stream stream, CompileFn compile)
    : dev_(dev), stream_(std::move(stream)), compile_(std::move(compile)) {
  if (knob_flag(Knob::DisableCublas)) return;
  auto api = open_api();
  if (!api) return;
  ensure_context(dev_);
  auto lt = std::make_unique<Lt>();
  lt->api = *api;
  if (lt->api.Create(&lt->handle) != 0) return;
  lt_ = std::move(lt);
}

Matmul::~Matmul() = default;  // leaked with the process: the backend lives until exit

bool Matmul::cublaslt_available() const { return lt_ != nullptr; }

void Matmul::retire(uint64_t id, const Stream& on) {
  if (!lt_) return;
  auto it = lt_->workspaces.find(id);
  if (it == lt_->workspaces.end()) return;
  free(it->second, on);
  lt_->workspaces.erase(it);
}

void Matmul::run(const Group& g, const Stream& stream) {
  stream_ = stream;
  const Node& n = *g.opaque;
  void* out = g.outputs[0].st->data();
  int64_t K = n.in[0].view.shape.back();
  if (numel(n.shape) == 0) return;
  if (K == 0) {  // an empty sum: zeros
    memset_d8(DevicePtr(reinterpret_cast<uintptr_t>(out)), 0,
              size_t(numel(n.shape)) * itemsize(n.dtype), stream_);
    return;
  }
  if (lt_ && is_floating(n.dtype) && run_lt(n, out)) return;
  run_naive(n, out);
}

bool Matmul::run_lt(const Node& n, void* out) {
  const Input &A = n.in[0], &B = n.in[1];
  const int r = int(n.shape.size()), nb = r - 2;
  const int64_t M = n.shape[r - 2], N = n.shape[r - 1], K = A.view.shape[r - 1];
  auto ma = transposed(M, K, A.view.strides[r - 2], A.view.strides[r - 1]);
  auto mb = transposed(K, N, B.view.strides[r - 2], B.view.strides[r - 1]);
  if (!ma || !mb) return false;
  DevicePtr& workspace = lt_->workspaces[stream_.id];
  if (!workspace) workspace = alloc(kWorkspace, stream_);
  Shape bs(n.shape.begin(), n.shape.begin() + nb);
  // cuBLASLt takes one batch stride an operand. The run of batch dims [i, j) it covers is the one
  // that collapses to a single stride in A and B with the most matrices (C is contiguous: every
  // run collapses there); the other batch dims are a loop of launches. Attention's heads split
  // from one projection ([B, H, T, d] with strides [T 3C, d, 3C, 1]) collapse over B or H
  // alone, not both: batching B loops H times, where batching the trailing run looped B times.
  BatchRun run;
  for (int i = 0; i < nb; ++i)
    for (int j = i + 1; j <= nb; ++j) {
      auto sa = collapsed_stride(bs, A.view.strides, i, j),
           sb = collapsed_stride(bs, B.view.strides, i, j);
      if (!sa || !sb) continue;
      int64_t count = 1;
      for (int d = i; d < j; ++d) count *= bs[d];
      if (count >= run.count) run = {i, j, count, *sa, *sb};
    }
  if (run.count > INT32_MAX) return false;
  Strides cst(size_t(nb), 0);  // C's batch strides, in elements
  int64_t span = M * N;
  for (int d = nb - 1; d >= 0; --d) cst[d] = span, span *= bs[d];
  const int64_t sc = run.j > run.i ? cst[run.j - 1] : M * N;
  int64_t outer = 1;
  for (int d = 0; d < nb; ++d)
    if (d < run.i || d >= run.j) outer *= bs[d];

  int type = 0, compute = kCompute32F, scale = kR32F;
  switch (n.dtype) {
    case DType::Float64:
      type = kR64F, compute = kCompute64F, scale = kR64F;
      break;
    case DType::Float16:
      type = kR16F;
      break;
    case DType::BFloat16:
      type = kR16BF;
      break;
    default:
      type = kR32F;
      break;
  }
  const Api& api = lt_->api;
  struct Owned {
    const Api& api;
    void *desc = nullptr, *la = nullptr, *lb = nullptr, *lc = nullptr, *pref = nullptr;
    ~Owned() {
      if (desc) api.DescDestroy(desc);
      for (void* l : {la, lb, lc})
        if (l) api.LayoutDestroy(l);
      if (pref) api.PrefDestroy(pref);
    }
  } o{api};
  ensure_context(dev_);
  bool ok = api.DescCreate(&o.desc, compute, scale) == 0;
  int32_t ta = mb->trans, tb = ma->trans;  // BLAS's A is our B
  ok = ok && api.DescSet(o.desc, kDescTransA, &ta, 4) == 0;
  ok = ok && api.DescSet(o.desc, kDescTransB, &tb, 4) == 0;
  ok = ok && api.LayoutCreate(&o.la, type, mb->rows, mb->cols, mb->ld) == 0;
  ok = ok && api.LayoutCreate(&o.lb, type, ma->rows, ma->cols, ma->ld) == 0;
  ok = ok && api.LayoutCreate(&o.lc, type, N, M, N) == 0;
  if (!ok) return false;
  if (run.count > 1) {
    int32_t count = int32_t(run.count);
    int64_t s[3] = {run.sb, run.sa, sc};
    void* ls[3] = {o.la, o.lb, o.lc};
    for (int i = 0; i < 3 && ok; ++i) {
      ok = api.LayoutSet(ls[i], kLayoutBatchCount, &count, 4) == 0;
      ok = ok && api.LayoutSet(ls[i], kLayoutBatchStride, &s[i], 8) == 0;
    }
    if (!ok) return false;
  }
  std::ostringstream key;
  key << int(n.dtype) << ' ' << M << ' ' << N << ' ' << K << ' ' << ma->ld << ' ' << ma->trans
      << ' ' << mb->ld << ' ' << mb->trans << ' ' << run.count << ' ' << run.sa << ' ' << run.sb
      << ' ' << sc;
  auto it = lt_->algos.find(key.str());
  if (it == lt_->algos.end()) {
    ok = api.PrefCreate(&o.pref) == 0;
    uint64_t ws = kWorkspace;
    ok = ok && api.PrefSet(o.pref, kPrefMaxWorkspace, &ws, 8) == 0;
    Heuristic h{};
    int found = 0;
    ok = ok &&
         api.GetHeuristic(lt_->handle, o.desc, o.la, o.lb, o.lc, o.lc, o.pref, 1, &h, &found) == 0;
    if (!ok || found < 1 || h.state != 0) return false;
    it = lt_->algos.emplace(key.str(), h).first;
  }
  const Heuristic& h = it->second;
  float one32 = 1, zero32 = 0;
  double one64 = 1, zero64 = 0;
  const void* alpha = scale == kR64F ? static_cast<const void*>(&one64) : &one32;
  const void* beta = scale == kR64F ? static_cast<const void*>(&zero64) : &zero32;
  size_t isz = itemsize(n.dtype);
  const char* pa = static_cast<const char*>(A.st->data());
  const char* pb = static_cast<const char*>(B.st->data());
  char* pc = static_cast<char*>(out);
  for (int64_t ob = 0; ob < outer; ++ob) {
    int64_t offa = A.view.offset, offb = B.view.offset, offc = 0, rest = ob;
    for (int d = nb - 1; d >= 0; --d) {
      if (d >= run.i && d < run.j) continue;
      int64_t x = rest % bs[d];
      rest /= bs[d];
      offa += x * A.view.strides[d];
      offb += x * B.view.strides[d];
      offc += x * cst[d];
    }
    char* c = pc + offc * int64_t(isz);
    Status s = api.Matmul(lt_->handle, o.desc, alpha, pb + offb * int64_t(isz), o.la,
                          pa + offa * int64_t(isz), o.lb, beta, c, o.lc, c, o.lc, &h.algo,
                          reinterpret_cast<void*>(workspace), kWorkspace, stream_.raw());
    LOOM_CHECK(s == 0 || ob == 0, Runtime, "cublasLtMatmul failed with status ", s);
    if (s != 0) return false;
  }
  return true;
}

void Matmul::run_naive(const Node& n, void* out) {
  LOOM_CHECK(n.dtype != DType::Bool, Type, "matmul: not supported for bool tensors");
  const Input &A = n.in[0], &B = n.in[1];
  const int r = int(n.shape.size()), nb = r - 2;
  LOOM_CHECK(nb <= 8, Value, "matmul: at most 8 batch dims on CUDA, got ", nb);
  NaiveParams p{};
  p.a = uint64_t(reinterpret_cast<uintptr_t>(A.st->data()));
  p.b = uint64_t(reinterpret_cast<uintptr_t>(B.st->data()));
  p.c = uint64_t(reinterpret_cast<uintptr_t>(out));
  p.m = n.shape[r - 2], p.n = n.shape[r - 1], p.k = A.view.shape[r - 1];
  p.asr = A.view.strides[r - 2], p.asc = A.view.strides[r - 1];
  p.bsr = B.view.strides[r - 2], p.bsc = B.view.strides[r - 1];
  p.nb = nb, p.total = numel(n.shape), p.aoff = A.view.offset, p.boff = B.view.offset;
  for (int d = 0; d < nb; ++d)
    p.bsize[d] = n.shape[d], p.astr[d] = A.view.strides[d], p.bstr[d] = B.view.strides[d];
  Functions f = compile_(matmul_fallback_source(n.dtype), {"loom_matmul"},
                         std::string("matmul_") + dtype_name(n.dtype));
  void* args[] = {&p};
  int sm = properties(dev_).sm_count;
  unsigned grid = unsigned(std::clamp<int64_t>((p.total + 255) / 256, 1, int64_t(sm) * 8));
  launch((*f)[0], {grid, 1, 1}, {256, 1, 1}, 0, stream_, args);
}

}  // namespace loom::cuda
