// Every kernel pattern the CUDA code generator emits compiles with NVRTC for sm_90 with warnings
// as errors, on machines without a GPU (no GPU is needed to build or test: docs/ARCHITECTURE.md,
// invariants). Groups come from the public API on the CPU device through plan_storage (nothing
// runs); each op of the op table is lowered for every dtype it takes, and every kernel kind and
// variant is generated. Identical sources are compiled once, on all cores.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>
#include <vector>

#include "cuda/codegen.h"
#include "cuda/cublaslt.h"
#include "cuda/index_kernels.h"
#include "cuda/launch.h"
#include "cuda/nvrtc.h"
#include "fusion/group.h"
#include "fusion/planner.h"
#include "fusion/trace.h"
#include "loom.h"
#include "ops/index_prims.h"

using namespace loom;
namespace lc = loom::cuda;

namespace {

// The groups that compute `t` (planned, not run), without column sums inside row kernels: the
// corpus generates every variant of a group, and column sums take whole-row kernels only
// (tests/cuda/test_codegen_colsum.cpp covers them).
std::vector<Group> cuda_plan(const Tensor& t) {
  const bool sums = column_sums_on();
  set_column_sums(false);
  std::vector<Group> gs = plan_storage(t.storage());
  set_column_sums(sums);
  return gs;
}

// The one group that computes `t`.
Group only(const Tensor& t) {
  std::vector<Group> gs = cuda_plan(t);
  REQUIRE(gs.size() == 1);
  return gs[0];
}

// The one reducing group of the plan that computes `t` (others may cast its weights).
Group reducing(const Tensor& t) {
  std::vector<Group> gs, all = cuda_plan(t);
  for (const Group& g : all)
    if (g.has_reduce()) gs.push_back(g);
  REQUIRE(gs.size() == 1);
  return gs[0];
}

// Occurrences of `what` in a generated source.
int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

const DType kDtypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                         DType::Int32,   DType::Int64,   DType::Bool,    DType::Int16,
                         DType::UInt16,  DType::UInt32,  DType::UInt64};

// Ready data of dtype `dt`. Its clone() is pending, so ops on the clone fuse into one group that
// loads the data (make every tensor's data first: making data syncs).
Tensor data(const Shape& s, DType dt, uint64_t seed = 1) {
  manual_seed(seed);
  Tensor base = rand(s) * 4.0 - 2.0;
  // Integers without 0 and bools all true: the corpus divides by them, and an integer zero
  // divisor would raise at a later sync point (fusion/checks.h).
  if (dt == DType::Bool)
    base = gt(base, -3.0);
  else
    base = cast(is_integral(dt) ? where(lt(abs(base), 0.1), 1.0, base * 10.0) : base, dt);
  loom::sync();
  return base;
}

// Sums everything `parts` hold into one float32 root, so one plan covers all of them.
Tensor join(const std::vector<Tensor>& parts) {
  Tensor acc;
  for (const Tensor& p : parts) {
    Tensor f = cast(p, DType::Float32);
    acc = acc.defined() ? acc + f : f;
  }
  return acc;
}

// A reduction of the table over `dim` (all dims when negative), whichever way it takes dims.
template <typename F>
Tensor reduce_by(F f, const Tensor& x, int dim) {
  if constexpr (std::is_invocable_v<F, const Tensor&, std::optional<int64_t>, bool>)
    return f(x, dim < 0 ? std::nullopt : std::optional<int64_t>(dim), false);
  else
    return f(x, dim < 0 ? Dims{} : Dims{dim}, false);
}

// The variant the launcher picks for a group; with `all`, every other kernel shape of the same
// structure too (scalar and vector loops; loop, split and persistent rows).
std::vector<lc::Variant> variants_for(const Group& g, bool all) {
  std::vector<lc::Variant> vs{lc::choose_variant(g, 132)};
  if (!all) return vs;
  lc::Layout l = lc::layout_of(g);
  if (!g.has_reduce()) {
    if (l == lc::Layout::PointwiseContiguous) {
      lc::Variant s;
      s.vec = 1;
      vs.push_back(s);
    }
    // Vector loops (1-D contiguous, or n-D along unit-stride rows): every unroll, both lane forms.
    int V = l == lc::Layout::PointwiseContiguous ? 4 : vs[0].vec;
    for (int u : {1, 2, 4})
      for (bool roll : {false, true})
        if (V > 1) {
          lc::Variant v;
          v.vec = V, v.unroll = u, v.roll = roll;
          vs.push_back(v);
        }
  } else {
    lc::Variant loop, split, persist;
    loop.reduce = split.reduce = persist.reduce = true;
    if (l == lc::Layout::Columns) {
      loop.tpr = split.tpr = persist.tpr = 1;
      loop.rpb = split.rpb = persist.rpb = 256;
      persist.k = 4;
    } else {
      loop.tpr = split.tpr = 256, persist.tpr = 32, persist.rpb = 8, persist.k = 8;
    }
    split.split = true;
    vs.push_back(loop), vs.push_back(split), vs.push_back(persist);
    // One contiguous reduced dim: the same kernels over 4-column vector chunks.
    if (l != lc::Layout::Columns && g.space.size() - g.n_kept == 1)
      for (lc::Variant w : {loop, split, persist}) {
        w.vw = 4, w.k = w.k > 0 ? 2 : 0;
        vs.push_back(w);
      }
    // Persistent rows that recompute cheap values from retained leaf vectors, with a register
    // cap (min blocks an SM), over single columns and 4-column chunks.
    if (l != lc::Layout::Columns)
      for (int vw : {1, 4}) {
        lc::Variant m = persist;
        m.minb = 2, m.vw = vw, m.k = vw == 1 ? 8 : 2;
        for (int r : {1, 2}) {
          m.remat = r;
          vs.push_back(m);
        }
      }
    // Launch knobs (cuda/launch_rows.cpp): one barrier a block-wide combine (loop and persistent
    // rows of 128 lanes), the next row prefetched (1: same registers, 2: a second set), and
    // column reductions loading 8 rows a step.
    if (l != lc::Layout::Columns && g.space.size() - g.n_kept == 1) {
      lc::Variant s1 = loop;
      s1.sync1 = true;
      vs.push_back(s1);
      for (int pf : {1, 2}) {
        lc::Variant m = persist;
        m.tpr = 128, m.rpb = 2, m.vw = 4, m.k = 2, m.minb = 4, m.remat = pf;
        m.sync1 = true, m.prefetch = pf;
        vs.push_back(m);
      }
      // f32 exp as ex2.approx (LOOM_CUDA_ROW_FASTEXP), in a persistent and a loop kernel.
      for (lc::Variant x : {persist, loop}) {
        x.fexp = true, x.vw = 4, x.k = x.k > 0 ? 2 : 0;
        vs.push_back(x);
      }
      // Peeled rows (LOOM_CUDA_ROW_PEEL): chunks of 8 on the grid of the first unit-stride
      // leaf, the others element-wise, in a persistent (remat 1) and a loop kernel.
      const int R = int(g.space.size());
      int ref = -1;
      for (int a = 0; a < int(g.leaves.size()) && ref < 0; ++a)
        if (g.leaves[a].st && g.leaves[a].space == Space::Full && g.leaves[a].strides[R - 1] == 1)
          ref = a;
      if (ref >= 0)
        for (lc::Variant x : {persist, loop}) {
          x.vw = 8, x.k = x.k > 0 ? 2 : 0, x.remat = x.k > 0 ? 1 : 0, x.shift = ref;
          x.novec = ~(uint64_t(1) << ref);
          vs.push_back(x);
          x.dshift = 3, x.shifted = uint64_t(1) << ref;  // its whole chunks realigned by 3
          vs.push_back(x);
        }
    }
    if (l == lc::Layout::Columns) {
      for (lc::Variant u : {loop, split}) {
        u.unroll = 8;
        vs.push_back(u);
      }
      // The split's batched combine (LOOM_CUDA_COL_COMBINE) and column slices
      // (LOOM_CUDA_COL_SLICES, LOOM_CUDA_COL_BLOCK): 64 columns x 4 slices, 256 x 4.
      lc::Variant b = split;
      b.unroll = 8, b.comb = 8;
      vs.push_back(b);
      // Column pairs (LOOM_CUDA_COL_PAIRS): 2 columns a thread, 8 rows a step and 1, and with
      // 4 slices of 64 pairs.
      if (g.n_kept >= 1)
        for (lc::Variant x : {loop, b}) {
          x.vec = 2, x.unroll = 8, x.minb = 8;
          vs.push_back(x);
          x.unroll = 1;
          vs.push_back(x);
          x.cs = 4, x.rpb = 64;
          vs.push_back(x);
        }
      for (int rpb : {64, 256})
        for (lc::Variant x : {loop, b}) {
          x.cs = 4, x.rpb = rpb, x.unroll = 8, x.comb = x.split ? 4 : 0;
          vs.push_back(x);
        }
    }
  }
  return vs;
}

class Corpus {
 public:
  // `all`: every variant (kernel kinds); otherwise the launcher's pick (op coverage).
  void add(const Tensor& t, const std::string& what, bool all = true) {
    std::vector<Group> gs = cuda_plan(t);
    int n = 0;
    for (const Group& g : gs) {
      if (g.opaque) continue;
      ++n;
      for (const lc::Variant& v : variants_for(g, all)) {
        lc::Generated k = lc::generate(g, v);
        CHECK_FALSE(k.entries.empty());
        sources_.emplace(k.source, what + " [" + v.key() + "]");
        ++generated_;
        if (!v.reduce && g.space.size() == 1) {  // the kernel of segments a 1-d one may run as
          sources_.emplace(lc::segments_source(k, 16), what + " [" + v.key() + " segments]");
          ++segments_;
        }
      }
    }
    CHECK_MESSAGE(n > 0, what << ": nothing to generate");
  }

  // Compiles every distinct source on all cores; returns the failures' messages.
  std::vector<std::string> compile_all(int* compiled) {
    std::vector<std::pair<std::string, std::string>> work(sources_.begin(), sources_.end());
    std::atomic<size_t> next{0};
    std::mutex m;
    std::vector<std::string> failures;
    unsigned nt = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < nt; ++t)
      threads.emplace_back([&] {
        for (size_t i; (i = next++) < work.size();) {
          try {
            lc::compile(work[i].first, "loom_test", 9, 0);
          } catch (const std::exception& e) {
            std::lock_guard<std::mutex> l(m);
            failures.push_back(work[i].second + ":\n" + e.what());
          }
        }
      });
    for (auto& t : threads) t.join();
    *compiled = int(work.size());
    // For reading what was generated, and for scripts/dump_kernels.sh: DIR/<hash of the
    // source>.cu, so two builds' corpora compare as two directories.
    if (const std::string dir = knob_str(Knob::DumpKernels); !dir.empty()) {
      for (auto& [src, what] : work) {
        uint64_t h = 0xcbf29ce484222325ull;
        for (unsigned char ch : src) h = (h ^ ch) * 0x100000001b3ull;
        char name[32];
        std::snprintf(name, sizeof name, "/%016llx.cu", static_cast<unsigned long long>(h));
        std::ofstream(std::string(dir) + name) << src;
      }
    }
    return failures;
  }
  void add_source(const std::string& src, const std::string& what) { sources_.emplace(src, what); }
  int generated() const { return generated_; }
  int segments() const { return segments_; }

 private:
  std::map<std::string, std::string> sources_;  // source -> what made it
  int generated_ = 0;
  int segments_ = 0;
};

struct StrictGuard {
  bool old = lc::strict_warnings();
  StrictGuard() { lc::set_strict_warnings(true); }
  ~StrictGuard() { lc::set_strict_warnings(old); }
};

void build_corpus(Corpus& c) {
  // ---- every unary and binary op of the table x every dtype, one fused group per family ----
  for (DType dt : kDtypes) {
    std::string name = dtype_name(dt);
    Tensor xd = data({64, 100}, dt, 1), yd = data({64, 100}, dt, 2);
    Tensor x = xd.clone(), y = yd.clone();
    std::vector<Tensor> un, bin;
#define LOOM_X(op, api, ...)     \
  try {                          \
    un.push_back(loom::api(x));  \
  } catch (const loom::Error&) { \
  }
    LOOM_UNARY_OPS(LOOM_X)
#undef LOOM_X
#define LOOM_X(op, api, ...)        \
  try {                             \
    bin.push_back(loom::api(x, y)); \
    bin.push_back(loom::api(x, 3)); \
  } catch (const loom::Error&) {    \
  }
    LOOM_BINARY_OPS(LOOM_X)
#undef LOOM_X
    CHECK(un.size() >= 30);
    c.add(join(un), "unary ops " + name, false);
    c.add(join(bin), "binary ops " + name, false);
    c.add(where(gt(cast(x, DType::Float32), 0.0), x, y), "where " + name, false);
    std::vector<Tensor> casts;
    for (int to = 0; to < loom::kNumDTypes; ++to)  // into every dtype
      casts.push_back(cast(cast(x, DType(to)), DType::Float64));
    c.add(join(casts), "casts from " + name, false);
    // ---- reductions of the table: row, column, full; all of one input fuse into one group --
    for (int dim : {1, 0, -1}) {
      std::vector<Tensor> rs;
#define LOOM_X(op, api, ...)                                                                \
  try {                                                                                     \
    rs.push_back(reduce_by(                                                                 \
        [](auto&&... a) -> decltype(loom::api(a...)) { return loom::api(a...); }, x, dim)); \
  } catch (const loom::Error&) {                                                            \
  }
      LOOM_REDUCE_OPS(LOOM_X)
#undef LOOM_X
      c.add(join(rs), "reductions dim " + std::to_string(dim) + " " + name, dt == DType::Float32);
    }
  }
  // ---- pointwise layouts ----
  Tensor ready = data({64, 1000}, DType::Float32), bd = data({1000}, DType::Float32, 3);
  Tensor wd = data({64}, DType::Float32, 4);
  Tensor a = ready.clone(), b = bd.clone(), w64 = wd.clone();
  c.add(ready.t() * 2.0 + 1.0, "strided (transposed) input", false);
  c.add(ready + b, "broadcast row vector");
  c.add(gelu(ready + b, "tanh") * cast(gt(ready.slice(1, 0, 1), 0.0), DType::Float32),
        "row and column broadcast (vector rows, strided column)");
  c.add(ready + ready.slice(1, 0, 1), "broadcast column", false);
  c.add(ready.slice(1, 0, 500, 2).exp(), "strided slice", false);
  c.add(cast(ready, DType::Float16) * 0.5, "contiguous f32 -> f16 (vector)");
  // 64-bit indexing: more than 2^31 elements (planned only, never allocated).
  Tensor big = ones({1}).expand({(int64_t(1) << 31) + 64});
  c.add(big * 3.0, "index64 pointwise");
  c.add(big.sum(), "index64 full reduction");
  c.add(ready.reshape({1, 64000}).expand({40000, 64000}).sum({1}), "index64 row reduction");
  // ---- reductions with prologue and epilogue, row-space loads and index leaves ----
  c.add(sqrt(sum(a * a, {1})) + 1.0, "row reduction prologue+epilogue");
  c.add(sum(a * a, {0}) * 0.5, "column reduction prologue+epilogue");
  c.add(sum(exp(a)) / 3.0, "full reduction prologue+epilogue");
  c.add(amax(a, {1}) + w64, "epilogue with row-space load");
  c.add(sum(a, {1}) + cast(arange(64), DType::Float32), "epilogue with row-space iota");
  c.add(a.reshape({8, 8, 1000}).sum({0, 2}), "2 reduced dims");
  c.add(a.reshape({8, 8, 1000}).sum({1}), "2 kept dims");
  c.add(layer_norm(ready.reshape({64, 10, 100}).transpose(1, 2), {100, 10}),
        "normalization over 2 unmerged dims");
  c.add(a.var({1}), "var", false);
  c.add(a.logsumexp({1}), "logsumexp", false);
  c.add(a.norm(2, {1}), "norm", false);
  c.add(cumsum(a.slice(1, 0, 50), 1), "cumsum", false);
  c.add(cross_entropy(a, cast(arange(64) % 10, DType::Int64)), "cross_entropy", false);
  // ---- gather and scatter_add as the CUDA backend records them (no BackendCaps::gather):
  // masked reductions, with their producers and consumers, int64 and int32 indices ----
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Int32, DType::Float64}) {
    std::string name = dtype_name(dt);
    Tensor x = cast(a, dt);
    Tensor idx = (arange(64 * 50).reshape({64, 50}) * 7) % 100;  // pending int64
    Tensor idx32 = cast(idx, DType::Int32);
    c.add(gather_masked(x.slice(1, 0, 100), 1, idx), "gather dim 1 " + name, false);
    c.add(gather_masked(x.slice(0, 0, 8).t(), 0, idx32.slice(0, 0, 8).t()) * 2,
          "gather dim 0 of a transpose " + name, false);
    c.add(scatter_add_masked(x.slice(1, 0, 100), 1, idx, x.slice(1, 200, 250)),
          "scatter_add dim 1 " + name, false);
    c.add(scatter_add_masked(x.slice(1, 0, 100), 0, idx32.slice(1, 0, 16) % 64,
                             x.slice(1, 0, 16).abs()),
          "scatter_add dim 0, padded " + name, false);
  }
  // ---- normalizations ----
  for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64}) {
    Tensor xd = data({64, 1000}, dt, 5), wd = data({1000}, dt, 6), bd = data({1000}, dt, 7);
    Tensor x = xd.clone(), w = wd.clone(), bb = bd.clone();
    std::string name = dtype_name(dt);
    bool all = dt == DType::Float32;
    c.add(softmax(x, 1), "softmax " + name, all || dt == DType::BFloat16);
    c.add(log_softmax(x, 1), "log_softmax " + name, all);
    c.add(softmax(x, 0), "softmax dim 0 " + name, all);
    c.add(layer_norm(x, {1000}, w, bb), "layer_norm " + name, all);
    c.add(rms_norm(x, {1000}, w), "rms_norm " + name, all);
  }
  // ---- moments: a mean's sum of float32 values accumulates in double (ops/reduce.cpp), float64
  // data takes max and min beside it; rows, columns, all elements and rows past a block ----
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16, DType::Float64}) {
    Tensor xd = data({64, 1000}, dt, 13), ld = data({4, 40000}, dt, 14);
    Tensor x = xd.clone(), l = ld.clone();
    std::string name = dtype_name(dt);
    c.add(layer_norm(x, {1000}), "layer_norm, no weight or bias " + name);
    c.add(var(x, {1}), "var " + name);
    c.add(loom::std(x, {0}), "std over columns " + name);
    c.add(mean(x), "mean of all " + name);
    c.add(layer_norm(l, {40000}), "layer_norm of long rows " + name);
  }
  // ---- multi-output: an Adam step (parameter and both moments from one kernel) ----
  {
    Tensor p = data({4096}, DType::Float32, 8), g = data({4096}, DType::Float32, 9);
    Tensor m = data({4096}, DType::Float32, 10), v = data({4096}, DType::Float32, 11);
    m.mul_(0.9).add_(g * 0.1);
    v.mul_(0.999).addcmul_(g, g, 0.001);
    p.sub_(m / (v.sqrt() + 1e-8) * 1e-3);
    // Reading all three through matmuls makes each an output of the fused group.
    Tensor r = matmul(p.reshape({1, -1}), m.reshape({-1, 1})) +
               matmul(v.reshape({1, -1}), v.reshape({-1, 1}));
    c.add(r, "adam step (multi-output)");
  }
  // ---- random numbers and index leaves ----
  c.add(rand({64, 1000}) * 2.0, "rand", false);
  c.add(randn({64, 1000}, DType::Float16), "randn f16", false);
  c.add(dropout(a, 0.25), "dropout", false);
  c.add(arange(0, 1000, 3), "arange", false);
  c.add(eye(100), "eye", false);
  c.add(linspace(0, 1, 1000), "linspace", false);
  c.add(randint(0, 10, {1000}), "randint", false);
  // ---- the matmul fallback kernel (integer types, layouts cuBLASLt cannot take) ----
  for (DType dt :
       {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32, DType::Int64,
        DType::Int8, DType::UInt8, DType::Int16, DType::UInt16, DType::UInt32, DType::UInt64})
    c.add_source(lc::matmul_fallback_source(dt), std::string("matmul fallback ") + dtype_name(dt));
  // ---- gather and scatter-add (every element type, both index types) ----
  for (int t = 0; t < kNumDTypes; ++t)
    for (DType it : {DType::Int64, DType::Int32}) {
      std::string what = std::string(dtype_name(DType(t))) + " by " + dtype_name(it);
      c.add_source(lc::gather_source(DType(t), it), "gather " + what);
      c.add_source(lc::scatter_add_source(DType(t), it), "scatter_add " + what);
    }
  // ---- region writes ----
  {
    Tensor t = data({64, 1000}, DType::Float32, 12);
    t.index_put({Slice::range(0, 10), Slice::range(5, 50)}, 1.5);
    c.add(t, "region write (index_put)", false);
    Tensor u = cat({a, a}, 1);
    c.add(u, "cat", false);
  }
  // ---- backward patterns: each rule's kernels as a training step records them ----
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    std::string name = std::string("backward ") + dtype_name(dt) + " ";
    auto leaf = [&](const Shape& s, uint64_t seed) { return data(s, dt, seed).requires_grad_(); };
    auto grads = [&](const Tensor& out, const std::vector<Tensor>& xs, const std::string& what) {
      out.backward(data(out.shape(), dt, 99).clone());
      for (size_t i = 0; i < xs.size(); ++i)
        c.add(xs[i].grad(), name + what + " d" + std::to_string(i), false);
    };
    Tensor x = leaf({64, 1000}, 21), w = leaf({1000}, 22), b = leaf({1000}, 23);
    grads(softmax(x, 1), {x}, "softmax");
    x.set_grad(Tensor());
    grads(log_softmax(x, 1), {x}, "log_softmax");
    x.set_grad(Tensor());
    grads(layer_norm(x, {1000}, w, b), {x, w, b}, "layer_norm");
    x.set_grad(Tensor()), w.set_grad(Tensor());
    grads(rms_norm(x, {1000}, w), {x, w}, "rms_norm");
    x.set_grad(Tensor()), b.set_grad(Tensor());
    grads(gelu(x + b, "tanh") * silu(x), {x, b}, "gelu silu bias");
    x.set_grad(Tensor());
    grads(amax(x, {1}) + mean(x, {0}).sum() + loom::std(x, {1}), {x}, "amax mean std");
    Tensor m = leaf({64, 32}, 24), k = leaf({32, 48}, 25);
    grads(matmul(m, k) + b.slice(0, 0, 48), {m, k}, "matmul");
    Tensor logits = leaf({64, 100}, 26);
    Tensor target = randint(0, 100, {64});
    cross_entropy(logits, target).backward();
    c.add(logits.grad(), name + "cross_entropy", false);
    // the loss: each row's target logit a row gather in the log-sum-exp's kernel
    c.add(cross_entropy(logits.detach(), target), name + "cross_entropy loss", false);
    Tensor tt = logits.detach().t().contiguous().t();  // columns: the gather's stride is a value
    c.add(logsumexp(tt, {1}, true) - tt.gather(1, cast(target, DType::Int32).unsqueeze(1)),
          name + "row gather int32 strided", false);
    logits.set_grad(Tensor());
    CrossEntropyOptions ce;
    ce.weight = data({100}, DType::Float32, 27).abs();
    ce.ignore_index = 3;
    ce.label_smoothing = 0.1;
    ce.reduction = Reduction::Sum;
    cross_entropy(logits, target, ce).backward();
    c.add(logits.grad(), name + "cross_entropy weight ignore smoothing", false);
    Tensor q = leaf({2, 4, 16, 8}, 28), kk = leaf({2, 4, 16, 8}, 29), v = leaf({2, 4, 16, 8}, 30);
    grads(scaled_dot_product_attention(q, kk, v, {}, 0.0, true), {q, kk, v}, "causal attention");
  }
}

}  // namespace

TEST_CASE("codegen: source depends on structure only, not values, sizes or device kind") {
  auto source = [](const Tensor& t) {
    std::vector<Group> gs = plan_storage(t.storage());
    REQUIRE(gs.size() == 1);
    return lc::generate(gs[0], lc::choose_variant(gs[0], 132)).source;
  };
  Tensor xd = data({1000}, DType::Float32), yd = data({1001}, DType::Float32);
  Tensor rd = data({64, 1000}, DType::Float32), sd = data({63, 996}, DType::Float32);
  Tensor x = xd.clone(), y = yd.clone(), r = rd.clone(), s = sd.clone();
  CHECK(source(x * 0.5) == source(x * 0.7));
  CHECK(source(x * 0.5) == source(y * 0.7));
  // Rows of the same geometry class (tpr, k, vector width) share a kernel; a row length that is
  // not a multiple of the vector width takes the single-column variant (tested below).
  CHECK(source(softmax(r, 1)) == source(softmax(s, 1)));
  // The signature's target differs between devices; the generated code must not.
  std::vector<Group> gs = plan_storage(softmax(r, 1).storage());
  REQUIRE(gs.size() == 1);
  Group g = gs[0];
  lc::Variant v = lc::choose_variant(g, 132);
  g.signature = signature(g, DeviceKind::CPU);
  std::string cpu = lc::generate(g, v).source;
  g.signature = signature(g, DeviceKind::CUDA);
  CHECK(lc::generate(g, v).source == cpu);
}

TEST_CASE("codegen: kernel kinds follow the group's structure") {
  Tensor ad = data({64, 1000}, DType::Float32), fd = data({1 << 20}, DType::Float32);
  Tensor a = ad.clone();
  CHECK(lc::layout_of(only(a * 2.0)) == lc::Layout::PointwiseContiguous);
  CHECK(lc::layout_of(only(ad.t() * 2.0)) == lc::Layout::Pointwise);
  CHECK(lc::layout_of(only(softmax(a, 1))) == lc::Layout::Rows);
  CHECK(lc::layout_of(only(sum(a, {0}))) == lc::Layout::Columns);
  // A persistent softmax row: one kernel, every pass inside it, the row cached in registers.
  Group sm = only(softmax(a, 1));
  lc::Variant v = lc::choose_variant(sm, 132);
  CHECK(v.reduce);
  CHECK_FALSE(v.split);
  CHECK(v.k > 0);
  CHECK(lc::generate(sm, v).entries.size() == 1);
  // Contiguous aligned rows are walked in 16-byte chunks: 4 f32 or 8 bf16 columns a lane;
  // an odd row length or an unaligned view falls back to single columns.
  CHECK(v.vw == 4);
  Tensor hd = cast(ad, DType::BFloat16);
  CHECK(lc::choose_variant(only(softmax(hd.clone(), 1)), 132).vw == 8);
  Tensor od = data({64, 999}, DType::Float32);
  CHECK(lc::choose_variant(only(softmax(od.clone(), 1)), 132).vw == 1);
  CHECK(lc::choose_variant(only(softmax(ad.slice(1, 1, 1000), 1)), 132).vw == 1);
  CHECK(lc::choose_variant(only(softmax(ad.slice(1, 2, 1000), 1)), 132).vw == 2);
  // A transposed input is read column by column; the contiguous output still takes vectors.
  CHECK(lc::choose_variant(only(softmax(ad.t(), 1)), 132).vw == 4);
  // Every lane's cached chunks fit the register budget, for short and long rows.
  for (int64_t cols : {128, 1000, 4096, 8192, 32768}) {
    Tensor rd = data({8, cols}, DType::Float32);
    lc::Variant rv = lc::choose_variant(only(softmax(rd.clone(), 1)), 132);
    CHECK(rv.tpr * rv.rpb <= 1024);
    if (rv.k > 0) CHECK(int64_t(rv.k) * rv.vw * rv.tpr >= cols);
  }
  // A row-broadcast bias: n-D pointwise with 16-byte vectors along the rows.
  Tensor bd = data({1000}, DType::Float32, 2);
  CHECK(lc::choose_variant(only(ad.clone() + bd), 132).vec == 4);
  CHECK(lc::choose_variant(only(ad.t() * 2.0), 132).vec == 0);
  CHECK(lc::choose_variant(only(od.clone() + data({999}, DType::Float32, 3)), 132).vec == 0);
  // Few long rows split into segments: one launch per pass.
  Group full = only(sum(fd.clone()));
  lc::Variant fv = lc::choose_variant(full, 132);
  CHECK(fv.split);
  CHECK(lc::launch_config(full, fv, 132).grid_y > 1);
}

TEST_CASE("codegen: pointwise vector loops") {
  // Cold compile: the element body appears once in the source (no scalar tail loop after the
  // vector loop), for either lane form; unroll and lane form are part of the key.
  Tensor xd = data({4099}, DType::Float32), hd = data({4099}, DType::Float16);
  Tensor md = data({64, 1000}, DType::Float32), bd = data({1000}, DType::Float32, 2);
  Group sin_g = only(sin(xd.clone()) * 0.5 + xd), sin_h = only(sin(hd.clone()) * 0.5);
  Group bias_g = only(tanh(md.clone() + bd));
  std::set<std::string> keys, sources;
  for (const Group* g : {&sin_g, &sin_h, &bias_g}) {
    lc::Variant v = lc::choose_variant(*g, 132);
    v.vec = std::max(v.vec, g == &sin_h ? 8 : 4);  // big f32 1-D bodies pick the scalar loop
    for (int u : {1, 2, 4})
      for (bool roll : {false, true}) {
        v.unroll = u, v.roll = roll;
        std::string src = lc::generate(*g, v).source;
        CHECK_MESSAGE(count(src, "sinf(") + count(src, "tanhf(") == 1, v.key() << "\n" << src);
        keys.insert(v.key());
        sources.insert(src);
      }
  }
  CHECK(keys.size() == 2 * 3 * 2);  // per vector width (4, 8), unroll and lane form
  CHECK(sources.size() == 3 * 3 * 2);
  CHECK(lc::choose_variant(only(hd.clone() * 0.5), 132).vec == 8);

  // The launcher's grid: with the default full grid, blocks of 256 threads, `unroll` vectors a
  // thread, exactly cover the vectors (the last one partial); with stride or the scalar loop (too
  // few elements for a vector), at most 8 an SM.
  bool stride = knob_str(Knob::CudaPwGrid) == "stride";
  for (int64_t n : {1, 3, 4, 1023, 4099, (1 << 20) + 5}) {
    Group g = only(exp(data({n}, DType::Float32).clone()));
    lc::Variant v = lc::choose_variant(g, 132);
    lc::LaunchConfig lcf = lc::launch_config(g, v, 132);
    int64_t per_block = int64_t(lcf.block) * v.unroll * std::max(1, v.vec);
    if (stride || v.vec <= 1) {
      CHECK(lcf.grid_x <= 8 * 132);
    } else {
      CHECK(int64_t(lcf.grid_x) * per_block >= n);
      CHECK(int64_t(lcf.grid_x - 1) * per_block < n);
    }
  }
  if (!knob_set(Knob::CudaPwUnroll) && !knob_set(Knob::CudaPwRoll)) {
    // Default unroll: about 4 vector loads in flight a thread (4, 2, 1 for 1, 2, 3+ inputs).
    CHECK(lc::choose_variant(only(exp(xd.clone()) * 0.5 + xd), 132).unroll == 4);
    Tensor p = data({4096}, DType::Float32, 3), gr = data({4096}, DType::Float32, 4);
    Tensor m = data({4096}, DType::Float32, 5);
    CHECK(lc::choose_variant(only(p.clone() + gr), 132).unroll == 2);
    CHECK(lc::choose_variant(only(p.clone() + gr * m), 132).unroll == 1);
    CHECK(lc::choose_variant(bias_g, 132).unroll == 2);  // x and the bias row
  }
  if (!knob_set(Knob::CudaPwRoll)) {
    // Lanes roll only for big bodies: a chain of cheap ops stays unrolled, a sin rolls them.
    CHECK_FALSE(lc::choose_variant(only(relu(xd.clone() * 1.5 + 0.5) * xd), 132).roll);
    CHECK_FALSE(lc::choose_variant(only(tanh(xd.clone()) * 0.5 + xd), 132).roll);
    // A big 1-D body of 4-byte elements takes the scalar loop; of 2-byte ones (a warp's scalar
    // access would be 64 bytes) and an n-D one the rolled vector loop, 1 a thread.
    CHECK(lc::choose_variant(sin_g, 132).vec == 1);
    lc::Variant hv = lc::choose_variant(sin_h, 132);
    CHECK(hv.vec == 8);
    CHECK(hv.roll);
    lc::Variant rv = lc::choose_variant(only(sin(md.clone() + bd)), 132);
    CHECK(rv.vec == 4);
    CHECK(rv.roll);
    if (!knob_set(Knob::CudaPwUnroll)) CHECK(rv.unroll == 1);
  }
  if (!lc::nvrtc_available()) return;
  StrictGuard strict;
  for (const Group* g : {&sin_g, &sin_h, &bias_g}) {
    lc::Variant v = lc::choose_variant(*g, 132);
    CHECK_FALSE(lc::compile(lc::generate(*g, v).source, "loom_vec", 9, 0).cubin.empty());
  }
}

TEST_CASE("codegen: persistent rows hold narrow rows in their storage type") {
  // 1024 rows: enough row blocks for 132 SMs, so no split.
  Tensor fd = data({1024, 4096}, DType::Float32), hd = data({1024, 4096}, DType::BFloat16);
  Tensor wd = data({4096}, DType::Float32, 2), bd = data({4096}, DType::Float32, 3);
  Group sm_f32 = only(softmax(fd.clone(), 1)), sm_bf16 = only(softmax(hd.clone(), 1));
  Group ln_f32 = only(layer_norm(fd.clone(), {4096}, wd, bd));
  Group ln_bf16 = only(layer_norm(hd.clone(), {4096}));
  // Held bytes a column. remat 0: the compute-type values later passes read (softmax: x and
  // e = exp(x - max); layer_norm: x and x - mean); 1: the input vector in its storage type,
  // plus e; 2: the input vector alone.
  CHECK(lc::row_cache_bytes(sm_f32, 0) == 8);
  CHECK(lc::row_cache_bytes(sm_f32, 1) == 8);
  CHECK(lc::row_cache_bytes(sm_f32, 2) == 4);
  CHECK(lc::row_cache_bytes(sm_bf16, 0) == 8);
  CHECK(lc::row_cache_bytes(sm_bf16, 1) == 6);
  CHECK(lc::row_cache_bytes(sm_bf16, 2) == 2);
  CHECK(lc::row_cache_bytes(ln_f32, 0) == 8);
  CHECK(lc::row_cache_bytes(ln_f32, 1) == 4);
  CHECK(lc::row_cache_bytes(ln_bf16, 0) == 8);
  CHECK(lc::row_cache_bytes(ln_bf16, 1) == 2);
  // In registers a single bf16 column takes a whole one; 8 share 4.
  CHECK(lc::row_cache_bytes(sm_bf16, 1, 8) == 6);
  CHECK(lc::row_cache_bytes(sm_bf16, 1, 1) == 8);
  CHECK(lc::row_cache_bytes(ln_bf16, 1, 1) == 4);
  // A 4096-column bf16 row: 8-column chunks, 4 a lane (64 bytes in flight, as f32 has), so
  // 128 lanes a row and 2 rows a 256-thread block. Its e values (32 registers) and inputs (16)
  // leave 4 blocks an SM; a layer_norm lane fits 32 registers: 8 blocks.
  lc::Variant v = lc::choose_variant(sm_bf16, 132);
  CHECK(v.remat == 1);
  CHECK(v.vw == 8);
  CHECK(v.k == 4);
  CHECK(v.tpr == 128);
  CHECK(v.rpb == 2);
  CHECK(v.minb == 4);
  CHECK(lc::choose_variant(ln_bf16, 132).minb == 8);
  // f32 rows recompute the exps too (twice the instructions an element to spare): 8 blocks.
  lc::Variant vf = lc::choose_variant(sm_f32, 132);
  CHECK(vf.remat == 2);
  CHECK(vf.k * vf.vw == 16);
  CHECK(vf.minb == 8);
  // The input is read from memory once a row and held as storage vectors (lr), only what
  // cannot be recomputed cheaply as f32 (c); the output is stored once.
  struct Want {
    const Group* g;
    int remat, cached;
  };
  for (Want w :
       {Want{&sm_bf16, 0, 2}, Want{&sm_bf16, 1, 1}, Want{&sm_bf16, 2, 0}, Want{&ln_bf16, 0, 2},
        Want{&ln_bf16, 1, 0}, Want{&ln_f32, 0, 2}, Want{&ln_f32, 2, 0}}) {
    lc::Variant r = lc::choose_variant(*w.g, 132);
    r.remat = w.remat, r.prefetch = 0;  // (prefetching rows load x twice: checked below)
    std::string src = lc::generate(*w.g, r).source;
    INFO(r.key() << "\n" << src);
    REQUIRE(r.k > 0);
    CHECK(count(src, "float c") == w.cached);
    CHECK(count(src, "> lr0[") == (w.remat > 0 ? 1 : 0));               // declared once
    CHECK(count(src, "= *(const lm_vec") == (w.g == &ln_f32 ? 3 : 1));  // x (and w, b) once
    CHECK(count(src, ") = ow") + count(src, ") = op") == 1);
  }
  // sm_80+ instructions where the portable helpers take several (the helpers stay for older
  // GPUs): bf16 columns converted two at a time, a NaN-propagating max in one, in the column
  // accumulate and in both stages of the combine (shuffles, then the warps' shared slots; no
  // lm_max branches between a row's shuffles).
  REQUIRE(v.tpr > 32);
  REQUIRE(vf.tpr > 32);
  std::string bf = lc::generate(sm_bf16, v).source, f32 = lc::generate(sm_f32, vf).source;
  CHECK(count(bf, "cvt.rn.bf16x2.f32") == 1);
  CHECK(count(bf, "max.NaN.f32") == 3);
  // The packed pair, the three maxes, and lm_f2b's single conversion (codegen.cpp's helper).
  CHECK(count(bf, "#if __CUDA_ARCH__ >= 800") == 5);
  CHECK(count(bf, "cvt.rn.bf16.f32") == 1);
  CHECK(bf.find("lm_f2b(") != std::string::npos);
  CHECK(count(f32, "max.NaN.f32") == 3);
  CHECK(count(f32, "lm_max(") == 4);  // the helper, kept for pre-sm_80 in the 3 places
  CHECK(f32.find("cvt.rn") == std::string::npos);
  // Every row length keeps the held values within the register budget. 32768 columns stay on
  // chip (a bf16 softmax with its exps recomputed; f32 in 1024 lanes of 8 chunks).
  for (DType dt : {DType::Float32, DType::BFloat16})
    for (int64_t cols : {128, 1000, 1001, 4096, 8192, 32768}) {
      for (int op = 0; op < 2; ++op) {
        Tensor x = data({1024, cols}, dt).clone();
        Group g = only(op == 0 ? softmax(x, 1) : rms_norm(x, {cols}));
        lc::Variant r = lc::choose_variant(g, 132);
        INFO(dtype_name(dt) << " " << cols << " " << r.key());
        CHECK(r.tpr * r.rpb <= 1024);
        CHECK(r.minb * r.tpr * r.rpb <= 2048);
        if (r.k > 0) CHECK(int64_t(r.k) * r.vw * r.tpr >= cols);
        if (r.k > 0) CHECK(int64_t(r.k) * r.vw * lc::row_cache_bytes(g, r.remat) <= 192);
        if (cols == 32768) CHECK(r.k > 0);
        if (cols == 32768 && dt == DType::BFloat16) CHECK(r.remat == (op == 0 ? 2 : 1));
        CHECK((r.tpr & (r.tpr - 1)) == 0);
        // Odd f32 rows take single columns; odd bf16 rows 8-column chunks, peeled.
        const bool peeled = cols % 2 && dt == DType::BFloat16 && knob_int(Knob::CudaRowPeel) > 0;
        CHECK(r.vw == (peeled ? 8 : cols % 2 ? 1 : dt == DType::Float32 ? 4 : 8));
        CHECK(r.shift == (peeled ? 1 : -1));  // the output's grid
        if (r.k > 0) CHECK(int64_t(r.k) * r.tpr >= (cols + (peeled ? 2 : 1) * (r.vw - 1)) / r.vw);
        // f32 rows take the prefetching kernel at every length, a 32768-column row too: its
        // 1024 lanes are the SM's only block, so nothing else loads while it reduces.
        if (!knob_set(Knob::CudaRowPrefetch))
          CHECK(r.prefetch == (dt == DType::Float32 && !peeled ? 1 : 0));
        if (cols == 32768 && dt == DType::Float32) CHECK(r.tpr * r.rpb == 1024);
      }
    }
  // The register cap is part of the kernel and its key.
  lc::Variant capped = v;
  capped.minb = 6;
  CHECK(lc::generate(sm_bf16, capped).source.find("__launch_bounds__(256, 6)") !=
        std::string::npos);
  CHECK(capped.key() != v.key());
  if (!lc::nvrtc_available()) return;
  StrictGuard strict;
  CHECK_FALSE(lc::compile(lc::generate(sm_bf16, capped).source, "loom_rows", 9, 0).cubin.empty());
}

TEST_CASE("codegen: a held row's register cap leaves room for the weights it loads") {
  // A transformer block's residual add and layer_norm: a bf16 branch into the f32 stream, f32
  // weight and bias. Its rows hold both inputs; the
  // weight and bias, read alike by every row, load at their chunk in the last pass, and the
  // cap (__launch_bounds__' min blocks) counts that chunk: ptxas keeps it all in registers.
  for (int64_t cols : {384, 768, 1024}) {
    Tensor x = data({16384, cols}, DType::Float32), r = data({16384, cols}, DType::BFloat16, 2);
    Tensor w = data({cols}, DType::Float32, 3), b = data({cols}, DType::Float32, 4);
    Tensor y = layer_norm(x.clone() + cast(r.clone(), DType::Float32), {cols}, w, b);
    Group g = reducing(y);
    lc::Variant v = lc::choose_variant(g, 132);
    INFO(cols << " " << v.key());
    REQUIRE(v.k > 0);
    // Two f32 leaves of one chunk each (bias and weight: 2 * vw registers).
    CHECK(lc::row_walk_regs(g, v) == 2 * v.vw);
    CHECK(v.minb >= 2);
    const std::string src = lc::generate(g, v).source;
    // Loaded inside the loop that computes each chunk, not all chunks up front.
    const size_t compute = src.rfind("#pragma unroll\n      for (int k = 0;");
    REQUIRE(compute != std::string::npos);
    std::istringstream lines(src.substr(compute));
    int late = 0;
    for (std::string l; std::getline(lines, l);)
      late += l.find(" lw") != std::string::npos && l.find("[k] = *(const lm_vec<float") != l.npos;
    CHECK(late == 2);
    if (!lc::nvrtc_available()) continue;
    lc::CompileResult c = lc::compile(src, "loom_ln_regs", 9, 0, {"--ptxas-options=-v"});
    INFO(c.log);
    REQUIRE_FALSE(c.cubin.empty());
    CHECK(c.log.find(" 0 bytes spill stores") != std::string::npos);
  }
}

TEST_CASE("codegen: a looping row's step loads at most 256 bytes of chunks a thread") {
  // Eight float32 rows summed: a row too long to hold, so the kernel loops, each step loading
  // its chunks of every leaf before computing. At 1024 threads (64 registers a thread) two
  // chunks of eight 16-byte vectors spilled; the step takes one, and ptxas keeps it in
  // registers.
  std::vector<Tensor> xs;
  for (int i = 0; i < 8; ++i) xs.push_back(data({256, 65536}, DType::Float32, 11 + i).clone());
  Tensor t = xs[0];
  for (int i = 1; i < 8; ++i) t = t + xs[i];
  Group g = only(sum(t, {1}));
  lc::Variant v = lc::choose_variant(g, 132);
  INFO(v.key());
  REQUIRE(v.k == 0);
  const std::string src = lc::generate(g, v).source;
  INFO(src);
  CHECK(count(src, "for (int k = 0; k < 1; ++k)") > 0);
  CHECK(count(src, "for (int k = 0; k < 4; ++k)") == 0);
  // One leaf: two chunks a step at 1024 threads, as before.
  Group one = only(sum(xs[0] * 2.0, {1}));
  lc::Variant v1 = lc::choose_variant(one, 132);
  CHECK(v1.block() == 1024);
  CHECK(count(lc::generate(one, v1).source, "for (int k = 0; k < 2; ++k)") > 0);
  if (!lc::nvrtc_available()) return;
  lc::CompileResult c = lc::compile(src, "loom_loop_regs", 9, 0, {"--ptxas-options=-v"});
  INFO(c.log);
  REQUIRE_FALSE(c.cubin.empty());
  CHECK(count(c.log, " 0 bytes spill stores") == count(c.log, "bytes spill stores"));
}

TEST_CASE("codegen: misaligned bf16 rows peel a partial chunk at each end") {
  if (knob_set(Knob::CudaRowPeel)) return;  // the defaults below
  // 1001 columns: row r starts at element 1001 r, 2-byte aligned only; its 16-byte grid moves
  // with r. A weight and a bias row ([1001], the same for every row) sit at another alignment.
  Tensor hd = data({1024, 1001}, DType::BFloat16), fd = data({1024, 1001}, DType::Float32);
  Tensor wd = data({1001}, DType::BFloat16, 2), bd = data({1001}, DType::BFloat16, 3);
  Group sm = only(softmax(hd.clone(), 1)), rms = only(rms_norm(hd.clone(), {1001}));
  Group ln = reducing(layer_norm(hd.clone(), {1001}, wd, bd));
  Group smf = only(softmax(fd.clone(), 1));
  // Views offset by 1 and 2 elements of 4104-column rows (row starts at 4104 r + 1): the input
  // sits 1 (2) elements past the 16-byte grid of its fresh output on every row.
  Tensor wide = data({1024, 4104}, DType::BFloat16), w4 = data({4096}, DType::BFloat16, 4);
  Group off = only(softmax(wide.slice(1, 1, 4097), 1));
  Group off2 = only(softmax(wide.slice(1, 2, 4098), 1));
  Group offln = reducing(layer_norm(wide.slice(1, 1, 4097), {4096}, w4, w4));
  std::vector<std::string> srcs;
  for (const Group* g : {&sm, &rms, &ln}) {
    lc::Variant v = lc::choose_variant(*g, 132);
    std::string src = lc::generate(*g, v).source;
    INFO(v.key() << "\n" << src);
    const int out = int(g->leaves.size());  // the output: the grid's reference
    CHECK(v.shift == out);
    CHECK(v.shifted == 0);
    CHECK(v.vw == 8);
    CHECK(v.prefetch == 0);
    CHECK(v.k > 0);
    CHECK(int64_t(v.k) * v.tpr * v.vw >= 1001 + 7);  // a lane's chunks cover a shifted row
    CHECK(v.key().find("_h" + std::to_string(out) + "n") != std::string::npos);
    // Weight and bias are read element by element (their rows keep one alignment); x and the
    // output share the output's grid: 16-byte chunks.
    CHECK(v.novec == (g == &ln ? 0x6u : 0u));
    CHECK(count(src, "const U sh = (U)b" + std::to_string(out) + " & 7u;") == 1);
    CHECK(count(src, "fc1 = (cols + sh) / 8u;") == 1);
    CHECK(count(src, "const U nch = (cols + sh + 7u) / 8u;") == 1);
    CHECK(count(src, "lr0[k] = *(const lm_vec<unsigned, 4>*)(L0 + (b0 - (I)sh") == 1);
    // The partial chunks load, compute and store column by column, guarded.
    CHECK(count(src, "if (col < cols) {") >= 2);
    CHECK(count(src, "t[e] = c < cols ? L0[b0 + (I)c]") == 1);
    CHECK(count(src, ") = op") == 1);  // whole chunks: one packed 16-byte store
    if (g == &ln) CHECK(count(src, "L1[b1 + (I)col]") >= 2);  // the weight, element-wise
    srcs.push_back(src);
  }
  // f32 rows are not peeled (their 4-byte loads already run near the copy's bandwidth).
  CHECK(lc::choose_variant(smf, 132).shift == -1);
  CHECK(lc::choose_variant(smf, 132).vw == 1);
  // Offset views (LOOM_CUDA_ROW_PEEL=2): chunks on the output's grid; the input's whole chunks
  // are two aligned vectors realigned in registers (odd shift: a byte permute a word; even:
  // whole words), whole only while the second vector stays in the row.
  for (const Group* g : {&off, &off2, &offln}) {
    lc::Variant o = lc::choose_variant(*g, 132);
    const int d = g == &off2 ? 2 : 1;
    std::string os = lc::generate(*g, o).source;
    INFO(o.key() << "\n" << os);
    CHECK(o.shift == int(g->leaves.size()));
    CHECK(o.vw == 8);
    CHECK(o.shifted == 1);
    CHECK(o.dshift == d);
    CHECK(o.novec == 0);  // the weights share the output's grid (4096 columns)
    CHECK(o.key().find("d" + std::to_string(d) + "s1") != std::string::npos);
    CHECK(count(os, "x0 = *(const lm_vec<unsigned, 4>*)(L0 + (b0 - (I)sh - " + std::to_string(d) +
                        " + (I)(ch * 8u)));") == 1);
    CHECK(count(os, "fc1 = (cols + sh + " + std::to_string(d) + "u) / 8u - 1u;") == 1);
    if (d == 1) {
      CHECK(count(os, "__byte_perm(") == 4);
      CHECK(count(os, "lr0[k].v[3] = __byte_perm(x0.v[3], x1.v[0], 0x5432);") == 1);
    } else {
      CHECK(count(os, "__byte_perm(") == 0);
      CHECK(count(os, "lr0[k].v[3] = x1.v[0];") == 1);
    }
    CHECK(count(os, "t[e] = c < cols ? L0[b0 + (I)c]") == 1);  // partial chunks
    CHECK(count(os, ") = op") == 1);                           // whole 16-byte stores
    srcs.push_back(os);
  }
  // Peeled softmax rows recompute their exps (LOOM_CUDA_ROW_PEEL_REMAT, default 2): 32 instead
  // of 64 registers, 8 blocks an SM, as the peeled norms (remat 1) have; contiguous ones keep
  // remat 1 (4 blocks of 2 rows).
  if (!knob_set(Knob::CudaRowPeelRemat) && !knob_set(Knob::CudaRowRemat)) {
    for (const Group* g : {&sm, &off, &off2}) {
      lc::Variant o = lc::choose_variant(*g, 132);
      CHECK(o.remat == 2);
      CHECK(o.minb == 8);
    }
    for (const Group* g : {&rms, &ln, &offln}) CHECK(lc::choose_variant(*g, 132).remat == 1);
    CHECK(lc::choose_variant(only(softmax(wide.slice(1, 0, 4096).clone(), 1)), 132).remat == 1);
  }
  // An output at another alignment than a row's input cannot be the reference when the input
  // is: with the output stored element by element (novec, a non-default variant) it compiles.
  lc::Variant o2 = lc::choose_variant(off, 132);
  o2.shift = 0, o2.novec = 0x2, o2.dshift = 0, o2.shifted = 0;
  std::string os = lc::generate(off, o2).source;
  INFO(os);
  CHECK(count(os, "lr0[k] = *(const lm_vec<unsigned, 4>*)(L0 + (b0 - (I)sh") == 1);
  CHECK(count(os, ") = op") + count(os, ") = ow") == 0);  // no vector store
  CHECK(count(os, "O0[b1 + (I)col] = ") == 2);            // whole and partial chunks
  srcs.push_back(os);
  // A loop (k = 0) peeled kernel: each pass walks the row's nch chunks.
  lc::Variant lp = lc::choose_variant(sm, 132);
  lp.k = 0, lp.remat = 0, lp.minb = 0;
  std::string ls = lc::generate(sm, lp).source;
  CHECK(count(ls, "for (U cb = lane; cb < nch;") >= 2);
  srcs.push_back(ls);
  if (!lc::nvrtc_available()) return;
  StrictGuard strict;
  for (const std::string& src : srcs)
    CHECK_FALSE(lc::compile(src, "loom_row_peel", 9, 0).cubin.empty());
}

// A view handed over as DLPack does (torch's x[:, 1:]): a zero-copy tensor whose pointer is its
// first element, 2 bytes past a 16-byte boundary, with offset 0. The launcher reads the
// misalignment from the pointer: the same variant and kernel as the offset view of the same
// memory, and parameters with the pointer rounded down and the offset raised (same addresses).
TEST_CASE("codegen: a zero-copy view with a misaligned pointer is realigned like an offset view") {
  if (knob_set(Knob::CudaRowPeel)) return;  // the defaults below
  Tensor wide = data({1024, 4104}, DType::BFloat16);
  const char* base = static_cast<const char*>(wide.data_ptr());
  REQUIRE(reinterpret_cast<uintptr_t>(base) % 16 == 0);
  Tensor ext = from_external(const_cast<char*>(base) + 2, {1024, 4096}, {4104, 1}, DType::BFloat16,
                             kCPU, [wide] {});
  Group gv = only(softmax(wide.slice(1, 1, 4097), 1)), ge = only(softmax(ext, 1));
  lc::Variant vv = lc::choose_variant(gv, 132), ve = lc::choose_variant(ge, 132);
  CHECK(ve.key() == vv.key());
  CHECK(ve.dshift == 1);
  lc::Generated kv = lc::generate(gv, vv), ke = lc::generate(ge, ve);
  CHECK(ke.source == kv.source);
  // Leaf 0's pointer and offset as the kernel receives them.
  auto leaf0 = [](const Group& g, const lc::Generated& k, const lc::Variant& v) {
    std::vector<char> b;
    const uint64_t scratch[3] = {0, 0, 0};
    lc::pack_params(g, k.params, lc::launch_config(g, v, 132), scratch, b);
    uint64_t ptr = 0;
    int64_t off = -1;
    for (size_t i = 0; i < k.params.ptrs.size(); ++i)
      if (k.params.ptrs[i] == 0) std::memcpy(&ptr, b.data() + 8 * i, 8);
    for (size_t i = 0; i < k.params.values.size(); ++i) {
      const lc::ValueSlot& s = k.params.values[i];
      if (s.kind != lc::ValueSlot::Offset || s.access != 0) continue;
      const char* at = b.data() + k.params.values_offset() + i * (k.params.index64 ? 8 : 4);
      int32_t o32 = 0;
      if (k.params.index64)
        std::memcpy(&off, at, 8);
      else
        std::memcpy(&o32, at, 4), off = o32;
    }
    return std::pair<uint64_t, int64_t>{ptr, off};
  };
  auto [pv, ov] = leaf0(gv, kv, vv);
  auto [pe, oe] = leaf0(ge, ke, ve);
  CHECK(pv == uint64_t(reinterpret_cast<uintptr_t>(base)));
  CHECK(ov == 1);
  CHECK(pe == pv);  // rounded down to the 16-byte boundary
  CHECK(oe == 1);   // the residue moved into the offset
}

// The index arithmetic the peeled kernels emit (sh, nch, fc0, fc1, the realigned vectors'
// start), checked on the host over many row starts: every column of a row in exactly one chunk;
// whole chunks' vectors 16-byte aligned and inside the row (a realigned leaf's second vector too:
// a view's last row may end at its storage's end); partial chunks' columns in the row.
TEST_CASE("codegen: peeled chunk grids cover each column once and stay in the row") {
  const int64_t W = 8;
  for (int64_t cols : {64, 67, 1001, 4095, 4096})
    for (int64_t d = 0; d < W; ++d)
      for (int64_t ba = 0; ba < 3 * W; ++ba) {
        // A leaf row at element ba of a 16-byte aligned storage, d past the reference's grid
        // (d = 0: on it); the reference's row base is ba - d modulo W.
        INFO(cols << " columns, d " << d << ", row base " << ba);
        const int64_t sh = ((ba - d) % W + W) % W, nch = (cols + sh + W - 1) / W;
        const int64_t fc0 = sh ? 1 : 0, fc1 = d ? (cols + sh + d) / W - 1 : (cols + sh) / W;
        std::vector<int> seen(size_t(cols), 0);
        bool ok = true;
        for (int64_t ch = 0; ch < nch; ++ch) {
          const bool whole = fc0 <= ch && ch < fc1;
          for (int64_t e = 0; e < W; ++e) {
            const int64_t col = ch * W + e - sh;
            if (whole) ok = ok && col >= 0 && col < cols;
            if (col >= 0 && col < cols) ++seen[size_t(col)];
          }
          if (whole) {
            const int64_t x0 = ba - sh - d + ch * W;  // first element of the first vector
            ok = ok && x0 % W == 0 && x0 >= 0 && x0 + (d ? 2 * W : W) <= ba + cols;
            ok = ok && x0 + d == ba + ch * W - sh;  // column ch W - sh is its element d
          }
        }
        CHECK(ok);
        CHECK(std::count(seen.begin(), seen.end(), 1) == cols);
        CHECK(fc1 - fc0 >= nch - 3);  // at most 3 partial chunks a row
      }
}

// The column knobs as the launcher reads them (defaults: pairs on, 4 slices).
bool pairs_on() { return std::clamp<long long>(knob_int(Knob::CudaColPairs), 0, 1) == 1; }
int col_slices() { return int(knob_int(Knob::CudaColSlices)); }

TEST_CASE("codegen: row knobs: one barrier a combine, next-row prefetch, column unroll") {
  Tensor fd = data({1024, 4096}, DType::Float32), hd = data({1024, 4096}, DType::BFloat16);
  Group sm = only(softmax(fd.clone(), 1)), ln = only(layer_norm(fd.clone(), {4096}));
  Group rms = only(rms_norm(hd.clone(), {4096}));
  const lc::Variant chosen = lc::choose_variant(sm, 132);
  lc::Variant v = chosen;
  v.prefetch = 0;
  REQUIRE(v.tpr > 32);
  REQUIRE(v.k > 0);
  std::vector<std::string> srcs;
  // Two combines (max, sum): 2 barriers each by default, 1 each with parity-buffered slots.
  lc::Variant s1 = v;
  s1.sync1 = true;
  std::string a = lc::generate(sm, v).source, b = lc::generate(sm, s1).source;
  CHECK(count(a, "__syncthreads();") == 4);
  CHECK(count(b, "__syncthreads();") == 2);
  CHECK(count(b, "[2][") == 2);
  CHECK(s1.key() == v.key() + "_s1");
  srcs.push_back(b);
  // Prefetch: the input is loaded before the row loop and then once a row for the next row,
  // never by the passes; 1 reloads lr in the last pass that reads it, 2 loads nx up front.
  for (const Group* g : {&sm, &ln, &rms}) {
    lc::Variant d = lc::choose_variant(*g, 132);
    REQUIRE(d.remat > 0);
    for (int pf : {1, 2}) {
      lc::Variant p = d;
      p.prefetch = pf;
      std::string src = lc::generate(*g, p).source;
      INFO(p.key() << "\n" << src);
      CHECK(count(src, "lr0[k] = *(const lm_vec") == (pf == 1 ? 2 : 1));
      CHECK(count(src, "nx0[k] = *(const lm_vec") == (pf == 2 ? 1 : 0));
      CHECK(count(src, "lr0[k] = nx0[k];") == (pf == 2 ? 1 : 0));
      CHECK(count(src, "if (nrv) lr0[k]") == (pf == 1 ? 1 : 0));
      CHECK(count(src, "const U nrow = row + (U)gridDim.x") == 1);
      // The output is stored once a row, by the last pass.
      CHECK(count(src, ") = ow") + count(src, ") = op") == 1);
      srcs.push_back(src);
    }
  }
  // By default the launcher prefetches f32 rows (prefetch 1) but not narrow ones (their
  // registers: measured slower), unless LOOM_CUDA_ROW_PREFETCH says otherwise.
  if (!knob_set(Knob::CudaRowPrefetch)) {
    CHECK(chosen.prefetch == 1);
    CHECK(chosen.key().find("_p1") != std::string::npos);
    CHECK(lc::choose_variant(rms, 132).prefetch == 0);
    CHECK(lc::choose_variant(rms, 132).key().find("_p") == std::string::npos);
  }
  CHECK_FALSE(chosen.sync1);
  // Column mean over [65536, 64]: a thread a column; 8 rows a step: whole unguarded steps
  // first, then guarded ones; the same in-order sum (one accumulate a row).
  Tensor cd = data({65536, 64}, DType::Float32);
  Group cm = only(mean(cd.clone(), Dims{0}, false));
  lc::Variant c = lc::choose_variant(cm, 132);
  REQUIRE(c.tpr == 1);
  CHECK(c.unroll == 1);  // 1024 segments of 64 rows
  // By default a thread that walks 256 rows or more loads 8 a step (132 blocks of 256 columns:
  // no split, each thread walks the whole column; with slices a slice walks a part).
  if (!knob_set(Knob::CudaColUnroll) && col_slices() == 1) {
    Tensor tall = data({256, 33792}, DType::Float32), flat = data({64, 33792}, DType::Float32);
    lc::Variant t = lc::choose_variant(only(mean(tall.clone(), Dims{0}, false)), 132);
    lc::Variant f = lc::choose_variant(only(mean(flat.clone(), Dims{0}, false)), 132);
    CHECK_FALSE(t.split);
    CHECK(t.unroll == 8);
    CHECK(f.unroll == 1);
  }
  lc::Variant c8 = c;
  c8.unroll = 8;
  std::string c1s = lc::generate(cm, c).source, c8s = lc::generate(cm, c8).source;
  CHECK(c8.key().find("_u8") != std::string::npos);
  CHECK(c.key().find("_u") == std::string::npos);
  CHECK(count(c1s, "u < ch") == 0);
  // (A slice steps over the other slices' rows: cs times the stride.)
  const std::string st = std::to_string(8 * c.cs) + "u)";
  CHECK(count(c8s, "for (; cb + " + std::to_string(7 * c.cs) + "u < ch1; cb += " + st) == 1);
  CHECK(count(c8s, "for (; cb < ch1; cb += " + st) == 1);
  srcs.push_back(c8s);
  if (!lc::nvrtc_available()) return;
  StrictGuard strict;
  for (const std::string& src : srcs)
    CHECK_FALSE(lc::compile(src, "loom_row_knobs", 9, 0).cubin.empty());
}

// Column reductions: a thread a kept column (tpr 1, no vector of adjacent columns: that lost, see
// LOOM_CUDA_COL_UNROLL in cuda/launch_rows.cpp), whatever the columns' dtype, width,
// alignment or row stride; the launch covers each column once. Columns no access walks at unit
// stride (every other column) are a row kernel instead.
TEST_CASE("codegen: column reductions take one column a thread, strided columns a row kernel") {
  auto mean0 = [](const Tensor& x) { return only(mean(x, Dims{0}, false)); };
  Tensor f = data({4096, 1000}, DType::Float32), h = data({4096, 4096}, DType::BFloat16);
  Tensor f4 = data({4096, 4096}, DType::Float32), d = data({512, 1000}, DType::Float64);
  Tensor o = data({4096, 1001}, DType::Float32), ho = data({4096, 1001}, DType::BFloat16);
  struct Want {
    Group g;
    lc::Layout layout;
    std::string what;
  };
  const lc::Layout C = lc::Layout::Columns;
  const std::vector<Want> wants = {
      {mean0(f.clone()), C, "f32 1000"},
      {mean0(f4.clone()), C, "f32 4096"},
      {mean0(h.clone()), C, "bf16 4096"},
      {mean0(h.slice(1, 0, 1000)), C, "bf16 1000 columns of 4096"},
      {mean0(d.clone()), C, "f64 1000"},
      {mean0(o.clone()), C, "f32 1001"},
      {mean0(ho.clone()), C, "bf16 1001"},
      {mean0(f.slice(1, 1, 997)), C, "offset 1"},
      {mean0(f.slice(1, 4, 1000)), C, "offset 4"},
      {mean0(f.slice(0, 0, 4096, 2)), C, "every other row"},
      {mean0(f.slice(1, 0, 1000, 2)), lc::Layout::Rows, "every other column"},
      // A Full leaf constant along the kept dim and weights per column (a Row leaf).
      {only(sum(f.clone() * data({4096, 2}, DType::Float32, 5).slice(1, 0, 1), {0})), C,
       "row-broadcast factor"},
      {only(sum(f.clone(), {0}) * data({1000}, DType::Float32, 6)), C, "column weights"},
  };
  std::vector<std::string> srcs;
  for (const Want& w : wants) {
    lc::Variant v = lc::choose_variant(w.g, 132);
    INFO(w.what << ": " << v.key());
    REQUIRE(lc::layout_of(w.g) == w.layout);
    if (w.layout != C) {
      CHECK(v.tpr > 1);  // a group of threads walks each strided column
      continue;
    }
    CHECK(v.tpr == 1);
    // Pairs (LOOM_CUDA_COL_PAIRS=1, the ctest col_pairs entry): contiguous aligned bf16
    // columns only (an even count, every row base even).
    const bool pairs = pairs_on() && w.what.rfind("bf16", 0) == 0 && w.what != "bf16 1001";
    CHECK(v.vec == (pairs ? 2 : 0));
    CHECK(v.vw == 1);
    CHECK(v.k == 0);  // 4096 or 512 rows: a loop or split walk, not persistent
    const std::string src = lc::generate(w.g, v).source;
    INFO(src);
    // Scalar loads (a thread's one column a walked row), or one 4-byte load of a pair.
    CHECK((count(src, "lm_vec<unsigned, 1>") > 0) == pairs);
    CHECK((count(src, "lm_vec") == 0) == !pairs);
    const int vc = std::max(1, v.vec);  // columns a thread
    lc::LaunchConfig c = lc::launch_config(w.g, v, 132);
    CHECK(c.block == unsigned(v.rpb * v.cs));  // rpb column groups a block (x cs slices)
    CHECK(int64_t(c.grid_x) * v.rpb * vc >= w.g.rows());
    CHECK(int64_t(c.grid_x - 1) * v.rpb * vc < w.g.rows());
    srcs.push_back(src);
  }
  // A persistent column kernel (rows of up to 16) keeps a thread a column too.
  Tensor shortc = data({8, 1024}, DType::Float32);
  lc::Variant p = lc::choose_variant(mean0(shortc.clone()), 132);
  CHECK(p.k > 0);
  CHECK(p.tpr == 1);
  CHECK(p.vec == 0);
  if (!lc::nvrtc_available()) return;
  StrictGuard strict;
  for (const std::string& src : srcs)
    CHECK_FALSE(lc::compile(src, "loom_col_scalar", 9, 0).cubin.empty());
}

TEST_CASE("codegen: row knobs: fast exp, grid modes") {
  Tensor fd = data({1024, 4096}, DType::Float32), hd = data({1024, 4096}, DType::BFloat16);
  Tensor dd = data({64, 1000}, DType::Float64);
  Group sf = only(softmax(fd.clone(), 1)), sh = only(softmax(hd.clone(), 1));
  Group sd = only(softmax(dd.clone(), 1)), ls = only(log_softmax(fd.clone(), 1));
  Group ln = only(layer_norm(fd.clone(), {4096}));
  std::vector<std::string> srcs;
  // FASTEXP: every f32 exp of the kernel (softmax: the sum pass and the store pass; log_softmax:
  // the sum) becomes lm_fexp, defined once; double exps and groups without exp are untouched.
  // By default only where every output is narrow (a bf16 softmax): the error is far below
  // the output's rounding.
  if (!knob_set(Knob::CudaRowFastexp)) {
    for (const Group* g : {&sf, &sd, &ln}) CHECK_FALSE(lc::choose_variant(*g, 132).fexp);
    CHECK(lc::choose_variant(sh, 132).fexp);
    CHECK(lc::choose_variant(sh, 132).key().find("_x") != std::string::npos);
    // A bf16 input whose softmax is stored as f32 keeps expf.
    CHECK_FALSE(lc::choose_variant(only(softmax(cast(hd.clone(), DType::Float32), 1)), 132).fexp);
  }
  for (const Group* g : {&sf, &sh, &ls}) {
    lc::Variant v = lc::choose_variant(*g, 132), x = v;
    v.fexp = false, x.fexp = true;
    std::string a = lc::generate(*g, v).source, b = lc::generate(*g, x).source;
    INFO(x.key() << "\n" << b);
    CHECK(x.key() == v.key() + "_x");
    CHECK(count(a, "lm_fexp") == 0);
    CHECK(count(b, "expf(") == 0);
    CHECK(count(b, "lm_fexp(") == count(a, "expf(") + 1);  // + the definition
    CHECK(count(b, "ex2.approx.ftz.f32") == 1);
    srcs.push_back(b);
  }
  {
    lc::Variant v = lc::choose_variant(sd, 132);
    v.fexp = true;
    std::string src = lc::generate(sd, v).source;
    CHECK(count(src, "lm_fexp") == 0);
    CHECK(count(src, "exp(") > 0);
  }
  // Grid modes for 65536 rows of the f32 softmax (256 threads, 8 blocks an SM, 132 SMs):
  // stride 2 waves (2112 blocks: 64 of them take a 32nd row), rows one a block.
  lc::Variant v = lc::choose_variant(sf, 132);
  REQUIRE(v.block() == 256);
  REQUIRE(v.rpb == 1);
  REQUIRE(v.minb == 8);
  CHECK(lc::row_grid(65536, v, 132, lc::RowGrid::Stride) == 2112);
  CHECK(lc::row_grid(65536, v, 132, lc::RowGrid::Rows) == 65536);
  CHECK(lc::row_grid(65536, v, 132, lc::RowGrid::Auto) == 65536);  // a row kernel: rows
  lc::Variant col = v;
  col.tpr = 1, col.rpb = 256;  // a thread a row, as column reductions launch: stride
  CHECK(lc::row_grid(65536, col, 132, lc::RowGrid::Auto) ==
        lc::row_grid(65536, col, 132, lc::RowGrid::Stride));
  // 8192 rows of 32768 f32 columns: 1024 lanes of 8 chunks, uncapped, one block an SM.
  Tensor wd = data({160, 32768}, DType::Float32);  // rows enough not to split
  lc::Variant w = lc::choose_variant(only(softmax(wd.clone(), 1)), 132);
  REQUIRE(w.block() == 1024);
  REQUIRE(w.k > 0);
  CHECK(w.minb == 0);
  CHECK(lc::row_grid(8192, w, 132, lc::RowGrid::Stride) == 528);
  if (!lc::nvrtc_available()) return;
  StrictGuard strict;
  for (const std::string& src : srcs)
    CHECK_FALSE(lc::compile(src, "loom_row_fexp", 9, 0).cubin.empty());
}

TEST_CASE("codegen: a kernel carries only the helpers it uses") {
  // Cold-compile time: no header, and no conversion, Philox or math helper a kernel does not
  // call. Each helper's definition appears only with a use.
  auto source = [](const Tensor& t) {
    std::vector<Group> gs = plan_storage(t.storage());
    REQUIRE(gs.size() == 1);
    return lc::generate(gs[0], lc::choose_variant(gs[0], 132)).source;
  };
  Tensor fd = data({64, 1000}, DType::Float32), bd = data({64, 1000}, DType::BFloat16);
  std::string f32 = source(softmax(fd.clone(), 1)), bf16 = source(softmax(bd.clone(), 1));
  std::string rnd = source(rand({64, 1000}) * 2.0);
  CHECK(f32.find("#include") == std::string::npos);
  for (const char* h : {"lm_b2f", "lm_f2b", "lm_h2f", "lm_f2h", "lm_philox", "lm_rand", "lm_fdiv"})
    CHECK_MESSAGE(f32.find(h) == std::string::npos, h);
  CHECK(bf16.find("lm_b2f") != std::string::npos);
  CHECK(bf16.find("lm_f2b") != std::string::npos);
  CHECK(bf16.find("lm_h2f") == std::string::npos);
  CHECK(bf16.find("lm_philox") == std::string::npos);
  CHECK(rnd.find("lm_philox") != std::string::npos);
  CHECK(rnd.find("lm_randn") == std::string::npos);
  CHECK(rnd.find("lm_b2f") == std::string::npos);
  // gelu: the float form carries the argument's rounding (a pair and an exp); a bf16 or f16
  // result, rounded past that error, takes the plain erfc.
  std::string gf = source(gelu(fd.clone(), "none")), gb = source(gelu(bd.clone(), "none"));
  std::string gh = source(gelu(cast(bd.clone(), DType::Float16), "none"));
  CHECK(gf.find("lm_gelu(") != std::string::npos);
  CHECK(gf.find("lm_gelu_narrow") == std::string::npos);
  for (const std::string* s : {&gb, &gh}) {
    CHECK(s->find("lm_gelu_narrow(") != std::string::npos);
    CHECK(s->find("lm_exp_tail") == std::string::npos);
  }
  if (!lc::nvrtc_available()) return;
  StrictGuard strict;
  for (const std::string* s : {&f32, &bf16, &rnd, &gf, &gb, &gh})
    CHECK_FALSE(lc::compile(*s, "loom_helpers", 9, 0).cubin.empty());
}

TEST_CASE("codegen: every op, dtype and kernel kind compiles for sm_90 without warnings") {
  if (!lc::nvrtc_available()) {
    MESSAGE("NVRTC unavailable, skipping: " << lc::nvrtc_unavailable_reason());
    return;
  }
  StrictGuard strict;
  Corpus c;
  build_corpus(c);
  int compiled = 0;
  std::vector<std::string> failures = c.compile_all(&compiled);
  MESSAGE(c.generated() << " kernels generated, " << compiled << " distinct sources compiled");
  CHECK(c.segments() > 10);  // pointwise bodies compiled as kernels of segments too
  for (const std::string& f : failures) FAIL_CHECK(f);
  CHECK(compiled > 60);
}

// The split column kernel's last block: partials segment-major and LOOM_CUDA_COL_COMBINE (8)
// loaded at once, added in segment order; 0 the row-major serial loop of before. Column slices
// (LOOM_CUDA_COL_SLICES): a block = rpb columns x cs slices of interleaved rows, combined
// through shared memory in slice order; the split keeps to one wave of the SMs' threads.
TEST_CASE("codegen: column reductions: batched split combine, column slices") {
  Tensor f = data({4096, 1000}, DType::Float32), f4 = data({4096, 4096}, DType::Float32);
  Tensor h = data({4096, 4096}, DType::BFloat16);
  Group cm = only(mean(f.clone(), Dims{0}, false));
  Group cv = only(var(h.clone(), Dims{0}));
  Group ca = only(argmax(f.clone(), 0));
  Group c4 = only(mean(f4.clone(), Dims{0}, false));
  const lc::Variant d = lc::choose_variant(cm, 132);
  REQUIRE(d.split);
  REQUIRE(d.tpr == 1);
  if (!knob_set(Knob::CudaColCombine)) CHECK(d.comb == 8);
  CHECK(d.cs == col_slices());
  if (d.cs > 1) {
    CHECK(d.block() == int(knob_int(Knob::CudaColBlock)));
  }
  std::vector<std::string> srcs;
  lc::Variant s0 = d, s8 = d;
  s0.comb = 0, s0.cs = 1, s0.rpb = 256;
  s8.comb = 8, s8.cs = 1, s8.rpb = 256;
  CHECK(s8.key() == s0.key() + "_c8");
  for (const Group* g : {&cm, &cv, &ca}) {
    lc::Variant a = lc::choose_variant(*g, 132), b = a;
    REQUIRE(a.split);
    a.comb = 0, a.cs = 1, a.rpb = 256, a.vec = 0, a.minb = 0;  // (a column a thread)
    b.comb = 8, b.cs = 1, b.rpb = 256, b.vec = 0, b.minb = 0;
    const std::string x = lc::generate(*g, a).source, y = lc::generate(*g, b).source;
    INFO(b.key() << "\n" << y);
    // Row-major partials, one at a time, before; segment-major, 8 at a time, then the rest.
    CHECK(count(x, "row * gridDim.y + blockIdx.y") > 0);
    const int combines = count(x, "if (lm_ticket == gridDim.y - 1) {");
    CHECK(combines >= 1);
    CHECK(count(x, "for (U s = 0; s < gridDim.y; s += 1u)") == combines);
    CHECK(count(y, "row * gridDim.y") == 0);
    CHECK(count(y, "((unsigned long long)blockIdx.y * rows + row)") > 0);
    CHECK(count(y, "for (; s + 7u * 1u < gridDim.y; s += 8u * 1u) {") ==
          count(x, "for (U s = 0; s < gridDim.y"));
    CHECK(count(y, "for (; s < gridDim.y; s += 1u) {") == count(x, "for (U s = 0; s < gridDim.y"));
    // argmax carries its index words too.
    if (g == &ca) CHECK(count(y, "wi") > 0);
    srcs.push_back(x), srcs.push_back(y);
  }
  // Slices: 64 columns x 4 slices (a 256-thread block) and 256 x 4 (1024), loop and split.
  for (const Group* g : {&cm, &cv, &ca, &c4})
    for (int rpb : {64, 256})
      for (bool split : {false, true}) {
        lc::Variant v = lc::choose_variant(*g, 132);
        v.cs = 4, v.rpb = rpb, v.split = split, v.comb = split ? 8 : 0, v.vec = 0, v.minb = 0;
        const std::string src = lc::generate(*g, v).source;
        INFO(v.key() << "\n" << src);
        CHECK(v.key().find("_l4") != std::string::npos);
        CHECK(v.block() == 4 * rpb);
        CHECK(count(src, "const int lane = (int)(threadIdx.x / " + std::to_string(rpb) + "u);") >
              0);
        CHECK(count(src, "const U grp = threadIdx.x % " + std::to_string(rpb) + "u;") > 0);
        CHECK(count(src, "for (int w = 1; w < 4; ++w) {") > 0);
        CHECK(count(src, "[threadIdx.x] = a") > 0);
        // A slice's walk steps over the other slices' rows.
        if (split) CHECK(count(src, "s += 1u") == 0);
        srcs.push_back(src);
        if (!split) continue;
        // The split keeps the grid to one wave of the SMs' 2048 threads.
        lc::LaunchConfig c = lc::launch_config(*g, v, 132);
        CHECK(c.block == unsigned(4 * rpb));
        CHECK(int64_t(c.grid_x) * c.grid_y * c.block <= 132 * 2048);
        CHECK(int64_t(c.grid_x) * rpb >= g->rows());
      }
  if (!lc::nvrtc_available()) return;
  StrictGuard strict;
  for (const std::string& src : srcs)
    CHECK_FALSE(lc::compile(src, "loom_col_comb", 9, 0).cubin.empty());
}

// Column pairs (Variant::vec 2, LOOM_CUDA_COL_PAIRS): a thread takes 2 adjacent bf16 columns
// as one 4-byte load a walked row (ld.global.u32), an accumulator each in the scalar order; a
// split's partials and finals a column each, combined column by column in segment order.
TEST_CASE("codegen: column pairs load 2 bf16 columns as one word") {
  Tensor h = data({4096, 4096}, DType::BFloat16), h1 = data({4096, 1000}, DType::BFloat16);
  Tensor w = data({1000}, DType::BFloat16, 7);
  std::vector<Group> gs = {only(mean(h.clone(), Dims{0}, false)), only(var(h1.clone(), Dims{0})),
                           only(argmax(h1.clone(), 0)),
                           only(sum(h1.clone() * h1.clone(), {0}) * 0.5 * w)};
  std::vector<std::string> srcs;
  for (const Group& g : gs) {
    lc::Variant d = lc::choose_variant(g, 132);
    REQUIRE(d.tpr == 1);
    if (pairs_on()) CHECK(d.vec == 2);
    if (pairs_on()) CHECK(d.minb == 2048 / d.block());
    for (bool split : {false, true})
      for (int comb : {0, 8}) {
        if (!split && comb) continue;
        lc::Variant v = d;
        v.cs = 1, v.rpb = 256, v.vec = 2, v.minb = 8, v.unroll = 8, v.split = split, v.comb = comb;
        const std::string src = lc::generate(g, v).source;
        INFO(v.key() << "\n" << src);
        CHECK(v.key().find("_v2") != std::string::npos);
        // Whole and guarded steps, in each kernel that walks (var: two passes).
        const int loads = count(src, "lw0[k] = *(const lm_vec<unsigned, 1>*)");
        CHECK(loads > 0);
        CHECK(loads % 2 == 0);
        CHECK(count(src, "for (int e = 0; e < 2; ++e) {") >= 3);
        CHECK(count(src, "__launch_bounds__(256, 8)") > 0);
        if (split) {
          CHECK(count(src, "const U row = ((U)blockIdx.x * 256u + grp) * 2u;") > 0);
          CHECK(count(src, "(row + (U)e)") > 0);  // a slot a column
          if (comb) CHECK(count(src, "for (; s + 7u * 1u < gridDim.y; s += 8u * 1u) {") > 0);
        } else {
          CHECK(count(src, "rb < rows / 2u") == 1);
        }
        srcs.push_back(src);
      }
    // With 4 slices of 64 pairs: a slice's walk steps over the others' rows, and the slices
    // combine a column of the pair at a time.
    for (bool split : {false, true}) {
      lc::Variant v = d;
      v.cs = 4, v.rpb = 64, v.vec = 2, v.minb = 8, v.unroll = 8, v.split = split;
      v.comb = split ? 8 : 0;
      const std::string src = lc::generate(g, v).source;
      INFO(v.key() << "\n" << src);
      if (split) CHECK(count(src, "const U row = ((U)blockIdx.x * 64u + grp) * 2u;") > 0);
      CHECK(count(src, "const U ch = cb + (U)(k * 4);") > 0);
      CHECK(count(src, "for (int w = 1; w < 4; ++w) {") > 0);
      CHECK(count(src, "& a") > 0);  // (a pair's accumulators bound one at a time)
      srcs.push_back(src);
      lc::LaunchConfig c = lc::launch_config(g, v, 132);
      CHECK(c.block == 256u);
      CHECK(int64_t(c.grid_x) * 64 * 2 >= g.rows());
      if (split) CHECK(int64_t(c.grid_x) * c.grid_y <= 132 * 8);
    }
    // The launch covers each pair once; a split keeps as many threads as a column a thread
    // (twice the segments, at most a wave).
    lc::Variant v = d;
    v.cs = 1, v.rpb = 256, v.vec = 2, v.split = true;
    lc::Variant one = v;
    one.vec = 0;
    lc::LaunchConfig c = lc::launch_config(g, v, 132), c1 = lc::launch_config(g, one, 132);
    CHECK(int64_t(c.grid_x) * 256 * 2 >= g.rows());
    CHECK(int64_t(c.grid_x - 1) * 256 * 2 < g.rows());
    CHECK(int64_t(c.grid_x) * c.grid_y <= int64_t(c1.grid_x) * c1.grid_y + c.grid_y);
  }
  if (!lc::nvrtc_available()) return;
  StrictGuard strict;
  for (const std::string& src : srcs) {
    lc::CompileResult r = lc::compile(src, "loom_col_pairs", 9, 0, {"--ptxas-options=-v"});
    CHECK_FALSE(r.cubin.empty());
  }
}

TEST_CASE("codegen: an output that overwrites a leaf stores after every read of it") {
  // y = x * 2; x.add_(1); y.mul_(x): one group writes x over the memory it reads x from
  // (GOutput::overwrites). Every loop form must load x's element before storing over it: the
  // loads sit in registers, so the text order of the loop body is the order of the accesses.
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::Int32})
    for (const Shape& s : {Shape{4099}, Shape{64, 1000}, Shape{1000, 3}}) {
      Tensor x = data(s, dt);
      Tensor y = x * 2;
      x.add_(1);
      y.mul_(x);
      std::vector<Group> gs = plan_storages({y.storage(), x.storage()});
      REQUIRE(gs.size() == 1);
      const Group& g = gs[0];
      int out = -1;
      for (int o = 0; o < int(g.outputs.size()); ++o)
        if (g.outputs[o].overwrites >= 0) out = o;
      REQUIRE(out >= 0);
      std::string leaf = "L" + std::to_string(g.outputs[out].overwrites);
      std::string o = "O" + std::to_string(out);
      lc::Variant base = lc::choose_variant(g, 132);
      for (int vec : {0, 1, 4})
        for (int u : {1, 2, 4})
          for (bool roll : {false, true}) {
            lc::Variant v = base;
            v.vec = vec, v.unroll = u, v.roll = roll;
            std::string src = lc::generate(g, v).source;
            size_t body = src.find("for (U");
            REQUIRE(body != std::string::npos);
            size_t last_read = src.rfind(leaf), first_write = std::string::npos;
            for (const std::string& w : {o + "[", "(" + o + " + "}) {
              size_t p = src.find(w, body);
              if (p < first_write) first_write = p;
            }
            REQUIRE(first_write != std::string::npos);
            CHECK_MESSAGE(last_read < first_write, v.key() << "\n" << src);
          }
    }
}
