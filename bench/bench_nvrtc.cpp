// Cold-compile cost of loom's generated CUDA kernels, on any machine with NVRTC: no
// GPU needed. Groups come from the public API on the CPU device through plan_storage (nothing
// runs), are lowered by loom's own code generator for the variant the launcher picks on an
// H200-sized GPU (132 SMs), and compiled by cuda::compile (NVRTC straight to an sm_90 cubin).
//
//   loom_bench_nvrtc [--reps N] [--threads T] [--warm-up] [--per-op] [--dump DIR]
//                    [--opt OPTION]... [--source FILE.cu]... [--suite-rows N]
//
// --warm-up starts cuda::warm_up_async (what the CUDA backend does when it starts) before the
// groups are planned and generated, as a program would record its first ops meanwhile.
// --per-op also times a 3-op kernel `op(x) * 0.5 + x` for each of the chain's unary ops.
// --suite-rows N compiles bench/suite.py's cold-compile programs (`8**5 + i * 7919`,
// i = 1..N, one kernel each) and reports the median over them, as the suite's row does.
// --source adds a kernel from a file (e.g. one --dump wrote from another commit, for A/B).
// Kernels are compiled round-robin, rep by rep, so load on a shared machine hits each alike;
// the pointwise kernels also appear in the other lane-loop form ("unrolled"/"rolled") and, when
// contiguous, as the scalar loop (one element a thread an iteration).
// Reports: NVRTC's dlopen, the first compile in the process (NVRTC's own start-up, on the chain
// kernel), then per kernel kind the source size, the median / min compile time over N and the
// cubin size; last, the wall time of compiling K distinct chain kernels on 1 thread and on T.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "cuda/codegen.h"
#include "cuda/launch.h"
#include "cuda/nvrtc.h"
#include "fusion/group.h"
#include "fusion/trace.h"
#include "loom.h"

using namespace loom;
namespace lc = loom::cuda;

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Ready data; its clone() is pending, so ops on the clone fuse into one group that loads it.
Tensor data(const Shape& s, DType dt) {
  Tensor base = rand(s) * 4.0 - 2.0;
  if (dt != DType::Float32) base = cast(base, dt);
  loom::sync();
  return base;
}

// suite.py's UNARY ops, in its order: a name and the op, in one table.
struct UnaryOp {
  const char* name;
  Tensor (*fn)(const Tensor&);
};
const UnaryOp kUnary[] = {
    {"tanh", [](const Tensor& y) { return tanh(y); }},
    {"sigmoid", [](const Tensor& y) { return sigmoid(y); }},
    {"exp", [](const Tensor& y) { return exp(y); }},
    {"sin", [](const Tensor& y) { return sin(y); }},
    {"cos", [](const Tensor& y) { return cos(y); }},
    {"relu", [](const Tensor& y) { return relu(y); }},
    {"abs", [](const Tensor& y) { return abs(y); }},
    {"neg", [](const Tensor& y) { return neg(y); }},
};
Tensor unary(int k, const Tensor& y) { return kUnary[k].fn(y); }

// bench/suite.py's compile rows: 6 x (unary, * 0.5, + x), the unary ops from the base-8 digits
// of i (a distinct signature per i), 18 ops over 4096 floats.
Tensor chain(const Tensor& x, int i) {
  Tensor y = x;
  for (int r = 0; r < 6; ++r) {
    y = unary(i % 8, y) * 0.5 + x;
    i /= 8;
  }
  return y;
}

// bench/suite.py's chain8 and Adam step (in place: parameter and both moments are outputs).
Tensor chain8(const Tensor& x) { return relu(sigmoid(tanh(x * 1.5 + 0.5) * x) + x * x - 0.25); }
Tensor adam(Tensor p, const Tensor& g, Tensor m, Tensor v) {
  m.mul_(0.9).add_(g, 0.1);
  v.mul_(0.999).add_(g * g, 0.001);
  p.sub_(1e-3 / 0.65 * m / (sqrt(v / 0.01) + 1e-8));
  // Reading all three through matmuls makes each an output of the fused group.
  return matmul(p.reshape({1, -1}), m.reshape({-1, 1})) +
         matmul(v.reshape({1, -1}), v.reshape({-1, 1}));
}

struct Gen {
  std::string name, source;
  std::string variant;
};

// The kernel of `t`'s plan: the reduction group when there is one (layer_norm's is the row
// kernel), else the largest pointwise one. With `other_lanes`, a pointwise vector kernel's
// other lane-loop form (rolled <-> unrolled) as a second entry.
std::vector<Gen> lower(const Tensor& t, const std::string& name, bool other_lanes = false) {
  std::vector<Group> gs = plan_storage(t.storage());
  std::stable_sort(gs.begin(), gs.end(), [](const Group& a, const Group& b) {
    return a.has_reduce() > b.has_reduce() ||
           (a.has_reduce() == b.has_reduce() && a.nodes.size() > b.nodes.size());
  });
  for (const Group& g : gs) {
    if (g.opaque) continue;
    lc::Variant v = lc::choose_variant(g, 132);
    std::vector<Gen> out = {{name, lc::generate(g, v).source, v.key()}};
    if (other_lanes && !v.reduce && v.vec > 1) {
      v.roll = !v.roll;
      out.push_back(
          {name + (v.roll ? " rolled" : " unrolled"), lc::generate(g, v).source, v.key()});
      if (lc::layout_of(g) == lc::Layout::PointwiseContiguous) {
        lc::Variant sc;
        sc.vec = 1;
        out.push_back({name + " scalar", lc::generate(g, sc).source, sc.key()});
      }
    }
    return out;
  }
  std::fprintf(stderr, "%s: no kernel\n", name.c_str());
  std::exit(1);
}

int lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 15;
  unsigned threads = std::max(2u, std::thread::hardware_concurrency());
  std::string dump;
  bool warm = false, per_op = false;
  int suite_rows = 0;
  std::vector<std::string> opts, files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--threads" && i + 1 < argc) {
      threads = unsigned(std::max(1, std::atoi(argv[++i])));
    } else if (a == "--per-op") {
      per_op = true;
    } else if (a == "--warm-up") {
      warm = true;
    } else if (a == "--dump" && i + 1 < argc) {
      dump = argv[++i];
    } else if (a == "--opt" && i + 1 < argc) {
      opts.push_back(argv[++i]);
    } else if (a == "--suite-rows" && i + 1 < argc) {
      suite_rows = std::max(0, std::atoi(argv[++i]));
    } else if (a == "--source" && i + 1 < argc) {
      files.push_back(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--reps N] [--threads T] [--warm-up] [--per-op] [--dump DIR] [--opt "
                   "OPTION]... [--source FILE.cu]... [--suite-rows N]\n",
                   argv[0]);
      return 2;
    }
  }

  auto t0 = Clock::now();
  if (!lc::nvrtc_available()) {
    std::fprintf(stderr, "NVRTC unavailable: %s\n", lc::nvrtc_unavailable_reason().c_str());
    return 1;
  }
  double open_ms = ms_since(t0);
  if (warm) lc::warm_up_async(9, 0);
  auto tg = Clock::now();

  manual_seed(1);
  Tensor x = data({4096}, DType::Float32), m = data({1024, 4096}, DType::Float32);
  Tensor mb = data({1024, 4096}, DType::BFloat16), w = data({4096}, DType::BFloat16);
  Tensor bb = data({4096}, DType::BFloat16);
  Tensor bias = data({4096}, DType::Float32), p = data({4096}, DType::Float32);
  Tensor gr = data({4096}, DType::Float32), m1 = data({4096}, DType::Float32);
  Tensor m2 = data({4096}, DType::Float32);
  std::vector<Gen> ks;
  auto add = [&](std::vector<Gen> g) { ks.insert(ks.end(), g.begin(), g.end()); };
  add(lower(chain(x.clone(), 32768 + 7919), "chain18 f32", true));
  add(lower(chain8(x.clone()), "chain8 f32", true));
  add(lower(gelu(m.clone() + bias, "tanh"), "gelu+bias f32", true));
  add(lower(adam(p, gr, m1, m2), "adam f32", true));
  add(lower(softmax(m.clone(), 1), "softmax f32"));
  add(lower(sum(m.clone()), "sum f32 (full)"));
  add(lower(layer_norm(mb.clone(), {4096}, w, bb), "layer_norm bf16"));
  add(lower(mean(m.clone(), {0}), "column mean f32"));
  // NVRTC's floor: the warm-up kernel.
  ks.push_back(
      {"trivial", "extern \"C\" __global__ void loom_warm_up(int* p) { if (p) *p = 0; }\n", "-"});
  for (const std::string& f : files) {
    std::ifstream in(f);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", f.c_str());
      return 2;
    }
    std::string src((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ks.push_back({f.substr(f.find_last_of('/') + 1), src, "file"});
  }
  double gen_ms = ms_since(tg);
  if (!dump.empty())
    for (size_t i = 0; i < ks.size(); ++i)
      std::ofstream(dump + "/k" + std::to_string(i) + ".cu") << ks[i].source;

  std::string extra;
  for (const auto& o : opts) extra += " " + o;
  std::printf("NVRTC %s, sm_90, options:", lc::nvrtc_version().c_str());
  for (const auto& o : lc::compile_options(9, 0, opts)) std::printf(" %s", o.c_str());
  std::printf("\n");
  std::printf("dlopen + version: %.1f ms; planning and generating %zu kernels: %.1f ms\n", open_ms,
              ks.size() - 1, gen_ms);

  // The first compile in the process pays NVRTC's own start-up.
  lc::CompileResult first = lc::compile(ks[0].source, "loom_bench", 9, 0, opts);
  std::printf("first compile in process (%s)%s: %.1f ms\n", ks[0].name.c_str(),
              !warm             ? ""
              : lc::warmed_up() ? ", warm-up done"
                                : ", warm-up running",
              first.ms);

  std::printf("\n%-24s %-20s %7s %6s %9s %9s %8s\n", "kernel", "variant", "bytes", "lines",
              "median_ms", "min_ms", "cubin");
  std::vector<std::vector<double>> t(ks.size());
  std::vector<size_t> cubin(ks.size());
  for (int r = 0; r < reps; ++r)
    for (size_t i = 0; i < ks.size(); ++i) {
      lc::CompileResult c = lc::compile(ks[i].source, "loom_bench", 9, 0, opts);
      t[i].push_back(c.ms);
      cubin[i] = c.cubin.size();
    }
  for (size_t i = 0; i < ks.size(); ++i) {
    const Gen& k = ks[i];
    std::printf("%-24s %-20s %7zu %6d %9.1f %9.1f %8zu\n", k.name.c_str(), k.variant.c_str(),
                k.source.size(), lines(k.source), median(t[i]),
                *std::min_element(t[i].begin(), t[i].end()), cubin[i]);
  }

  if (per_op) {
    std::printf("\none op a kernel, op(x) * 0.5 + x on 4096 f32:\n");
    for (int k = 0; k < 8; ++k) {
      std::string src = lower(unary(k, x.clone()) * 0.5 + x, kUnary[k].name)[0].source;
      std::vector<double> t;
      for (int r = 0; r < reps; ++r) t.push_back(lc::compile(src, "loom_bench", 9, 0, opts).ms);
      std::printf("%-8s median %6.1f ms  min %6.1f ms\n", kUnary[k].name, median(t),
                  *std::min_element(t.begin(), t.end()));
    }
  }

  if (suite_rows > 0) {
    std::vector<double> t;
    std::vector<std::string> keys;
    for (int i = 1; i <= suite_rows; ++i) {
      Gen k = lower(chain(x.clone(), 32768 + i * 7919), "")[0];
      if (!dump.empty()) std::ofstream(dump + "/s" + std::to_string(i) + ".cu") << k.source;
      t.push_back(lc::compile(k.source, "loom_bench", 9, 0, opts).ms);
      keys.push_back(k.variant);
    }
    std::printf("\nsuite compile rows, %d programs: median %.1f ms, min %.1f, max %.1f; variants:",
                suite_rows, median(t), *std::min_element(t.begin(), t.end()),
                *std::max_element(t.begin(), t.end()));
    std::sort(keys.begin(), keys.end());
    for (size_t i = 0; i < keys.size(); ++i)
      if (i == 0 || keys[i] != keys[i - 1])
        std::printf(" %s x%d", keys[i].c_str(), int(std::count(keys.begin(), keys.end(), keys[i])));
    std::printf("\n");
  }

  // A flush with several new groups: distinct chain kernels compiled serially, then on T threads.
  const int K = 8;
  std::vector<std::string> srcs;
  for (int i = 0; i < K; ++i) srcs.push_back(lower(chain(x.clone(), 1000 + 37 * i), "")[0].source);
  auto ts = Clock::now();
  for (const auto& s : srcs) lc::compile(s, "loom_bench", 9, 0, opts);
  double serial = ms_since(ts);
  auto tp = Clock::now();
  std::vector<std::thread> pool;
  std::atomic<int> next{0};
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i; (i = next++) < K;) lc::compile(srcs[i], "loom_bench", 9, 0, opts);
    });
  for (auto& t : pool) t.join();
  double par = ms_since(tp);
  std::printf(
      "\n%d distinct chain kernels: serial %.0f ms (%.1f each), %u threads %.0f ms (%.2fx)\n", K,
      serial, serial / K, threads, par, serial / par);
  return 0;
}
