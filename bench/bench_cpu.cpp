// CPU microbenchmarks: loom fused vs loom fusion-off vs a hand-written fused Eigen + oneTBB
// loop (the ceiling), in one process. Prints a table; writes JSON rows with --json PATH.
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "loom.h"

using namespace loom;
using Clock = std::chrono::steady_clock;
using ArrF = Eigen::Array<float, Eigen::Dynamic, 1>;
using MapF = Eigen::Map<ArrF>;
using CMapF = Eigen::Map<const ArrF>;

struct Row {
  std::string work, impl;
  double ms, gbs, load;
};
std::vector<Row> rows;

// The 1-minute load average: the machine is shared, so every row records it.
double load1() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

// One implementation under test: `setup` runs untimed before each of its runs.
struct Impl {
  std::string name;
  std::function<void(int)> run;
  std::function<void()> setup = [] {};
};

// Medians (ms) of `reps` timed runs of each implementation, interleaved run by run so a
// load change on the shared machine affects all of them alike. Two warm-up runs each. Run
// i of implementation k gets argument i + k: inputs rotate between two sets by its parity,
// so no run reads what the run before it just read.
std::vector<double> medians(int reps, const std::vector<Impl>& impls) {
  for (auto& im : impls)
    for (int w = 0; w < 2; ++w) im.setup(), im.run(w);  // compile, first-touch pages
  std::vector<std::vector<double>> t(impls.size());
  for (int i = 0; i < reps; ++i)
    for (size_t k = 0; k < impls.size(); ++k) {
      impls[k].setup();
      auto t0 = Clock::now();
      impls[k].run(i + int(k));  // consecutive runs read different input sets
      t[k].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
  std::vector<double> m;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    m.push_back(v[v.size() / 2]);
  }
  return m;
}

void report(const std::string& work, const std::string& impl, double ms, double bytes) {
  rows.push_back({work, impl, ms, bytes / ms / 1e6, load1()});
  std::printf("%-22s %-18s %10.3f ms %8.2f GB/s  (load %.2f)\n", work.c_str(), impl.c_str(), ms,
              bytes / ms / 1e6, rows.back().load);
}

// Times hand, loom fused and loom fusion-off side by side and reports the three rows.
void run_three(const std::string& work, double bytes, int reps,
               const std::function<void(int)>& hand, const std::function<Tensor(int)>& f) {
  auto loom_run = [&](int i) {
    Tensor y = f(i);
    loom::sync();
  };
  auto m = medians(reps, {{"hand Eigen+TBB", hand},
                          {"loom fused", loom_run, [] { set_fusion(true); }},
                          {"loom fusion-off", loom_run, [] { set_fusion(false); }}});
  set_fusion(true);
  report(work, "hand Eigen+TBB", m[0], bytes);
  report(work, "loom fused", m[1], bytes);
  report(work, "loom fusion-off", m[2], bytes);
}

void check(const char* what, const std::vector<float>& a, const std::vector<float>& b, double tol) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i)
    err += (a[i] - b[i]) * double(a[i] - b[i]), ref += double(b[i]) * b[i];
  double rel = std::sqrt(err / std::max(ref, 1e-30));
  if (!(rel <= tol)) {
    std::fprintf(stderr, "MISMATCH in %s: relative error %g > %g\n", what, rel, tol);
    std::exit(1);
  }
}

Tensor chain8(const Tensor& x) { return relu(sigmoid(tanh(x * 1.5 + 0.5) * x) + x * x - 0.25); }

// Checks f's result with fusion on and off against the hand-written loop's.
void check_loom(const std::string& work, const std::function<Tensor(int)>& f,
                const std::vector<float>& ref, double tol) {
  for (bool fused : {true, false}) {
    set_fusion(fused);
    check((work + (fused ? " fused" : " unfused")).c_str(), f(0).to_vector<float>(), ref, tol);
  }
  set_fusion(true);
}

void write_json(const std::string& json) {
  if (!json.empty()) {
    std::ofstream f(json);
    f << "[\n";
    for (size_t i = 0; i < rows.size(); ++i)
      f << "  {\"work\": \"" << rows[i].work << "\", \"impl\": \"" << rows[i].impl
        << "\", \"ms\": " << rows[i].ms << ", \"gbs\": " << rows[i].gbs
        << ", \"load1\": " << rows[i].load << "}" << (i + 1 < rows.size() ? ",\n" : "\n");
    f << "]\n";
  }
}

// 100 tiny ops on 1024 elements on `dev`: µs per op, recording and flush (and, on a GPU, the
// launch and the wait) included; fused and fusion-off interleaved. Then the fused loop split:
// recording alone (µs per op) and the flush + wait of its one kernel (µs), medians of the same
// runs, so the per-op row is about (record * 100 + flush) / 100.
void tiny_ops(Device dev, int reps) {
  Tensor x = randn({1024}, Options(dev));
  loom::sync();
  auto ops = [&] {
    Tensor y = x;
    for (int k = 0; k < 100; ++k) y = (k % 2) ? y * 0.999 : y + 0.001;
    return y;
  };
  auto run = [&](int) {
    Tensor y = ops();
    loom::sync();
  };
  auto m = medians(reps * 20, {{"loom fused", run, [] { set_fusion(true); }},
                               {"loom fusion-off", run, [] { set_fusion(false); }}});
  set_fusion(true);
  std::string work = std::string("tiny ops (us/op)") + (dev == kCPU ? "" : " " + dev.str());
  for (int k = 0; k < 2; ++k) {
    const char* impl = k == 0 ? "loom fused" : "loom fusion-off";
    rows.push_back({work, impl, m[k] * 10.0, 0, load1()});
    std::printf("%-22s %-18s %10.3f us/op     (load %.2f)  [%s]\n", "tiny ops 100x1024", impl,
                m[k] * 10.0, rows.back().load, dev.str().c_str());
  }
  // flush+sync split on a GPU: loom::flush (the host's part: plan, allocations, launches; the
  // kernels run meanwhile) and the wait after it (the rest of the kernels and the sync).
  std::vector<double> rec, fl, host;
  int64_t kernels0 = counters().kernels.load();
  for (int i = 0; i < reps * 20; ++i) {
    auto t0 = Clock::now();
    Tensor y = ops();
    auto t1 = Clock::now();
    if (dev != kCPU) loom::flush(dev);
    auto t2 = Clock::now();
    loom::sync();
    auto t3 = Clock::now();
    rec.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / 100);
    fl.push_back(std::chrono::duration<double, std::micro>(t3 - t1).count());
    host.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
  }
  for (auto* v : {&rec, &fl, &host}) std::sort(v->begin(), v->end());
  double r = rec[rec.size() / 2], f = fl[fl.size() / 2], h = host[host.size() / 2];
  rows.push_back({work + " record", "loom fused", r, 0, load1()});
  rows.push_back({work + " flush+sync (us)", "loom fused", f, 0, load1()});
  std::printf("%-22s %-18s %10.3f us/op     (load %.2f)  [%s]\n", "  record only", "loom fused", r,
              rows.back().load, dev.str().c_str());
  // Kernels a flush: the flush+sync row divided by it is the overhead a kernel.
  double kpf = double(counters().kernels.load() - kernels0) / (reps * 20);
  std::printf("%-22s %-18s %10.3f us        (load %.2f)  [%s] %.1f kernels a flush\n",
              "  flush+sync", "loom fused", f, rows.back().load, dev.str().c_str(), kpf);
  if (dev != kCPU) {
    rows.push_back({work + " flush host part (us)", "loom fused", h, 0, load1()});
    std::printf("%-22s %-18s %10.3f us        (load %.2f)  [%s] (plan, allocate, launch)\n",
                "    of which flush", "loom fused", h, rows.back().load, dev.str().c_str());
  }
}

int main(int argc, char** argv) {
  std::string json;
  bool quick = false;
  int reps = 0;
  std::string device = "cpu";
  bool tiny_only = false;
  bool chain8_only = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
    if (!std::strcmp(argv[i], "--tiny")) tiny_only = true;
    if (!std::strcmp(argv[i], "--chain8")) chain8_only = true;  // its three rows alone (A/B runs)
  }
  if (reps <= 0) reps = quick ? 3 : 15;
  manual_seed(1);
  // --device cuda: only the tiny-ops rows, on that device (the other rows compare with
  // hand-written CPU loops); --tiny: only the tiny-ops rows on the CPU.
  if (device != "cpu" || tiny_only) {
    tiny_ops(Device::parse(device), reps);
    write_json(json);
    return 0;
  }

  // ---- chain8 on 16M float32 --------------------------------------------------------------
  {
    int64_t n = quick ? (1 << 20) : (16 << 20);
    Tensor xs[2] = {randn({n}), randn({n})};
    loom::sync();
    std::vector<float> in[2] = {xs[0].to_vector<float>(), xs[1].to_vector<float>()};
    std::vector<float> out(n);
    auto hand = [&](int i) {
      const float* x = in[i & 1].data();
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 1 << 14), [&](auto r) {
        int64_t len = r.end() - r.begin();
        CMapF a(x + r.begin(), len);
        MapF o(out.data() + r.begin(), len);
        o = ((((a * 1.5f + 0.5f).tanh() * a).logistic() + a * a - 0.25f)).max(0.0f);
      });
    };
    hand(0);
    std::vector<float> ref = out;
    double bytes = 8.0 * n;
    auto f = [&](int i) { return chain8(xs[i & 1]); };
    check_loom("chain8 16M", f, ref, 1e-5);
    run_three("chain8 16M", bytes, reps, hand, f);
  }
  if (chain8_only) {
    write_json(json);
    return 0;
  }

  // ---- softmax and layer_norm over the last dim of [4096, 4096] ------------------------------
  {
    int64_t R = quick ? 1024 : 4096, C = 4096;
    Tensor xs[2] = {randn({R, C}), randn({R, C})};
    loom::sync();
    std::vector<float> in[2] = {xs[0].to_vector<float>(), xs[1].to_vector<float>()};
    std::vector<float> out(R * C);
    double bytes = 8.0 * R * C;
    auto hand_softmax = [&](int i) {
      const float* x = in[i & 1].data();
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, R, 8), [&](auto r) {
        for (int64_t row = r.begin(); row < r.end(); ++row) {
          CMapF a(x + row * C, C);
          MapF o(out.data() + row * C, C);
          float m = a.maxCoeff();
          o = (a - m).exp();
          o *= 1.0f / o.sum();
        }
      });
    };
    hand_softmax(0);
    std::vector<float> ref = out;
    auto fs = [&](int i) { return softmax(xs[i & 1], -1); };
    check_loom("softmax 4096x4096", fs, ref, 1e-5);
    run_three("softmax 4096x4096", bytes, reps, hand_softmax, fs);

    auto hand_ln = [&](int i) {
      const float* x = in[i & 1].data();
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, R, 8), [&](auto r) {
        for (int64_t row = r.begin(); row < r.end(); ++row) {
          CMapF a(x + row * C, C);
          MapF o(out.data() + row * C, C);
          float mu = a.sum() / float(C);
          o = a - mu;
          float var = o.square().sum() / float(C);
          o *= 1.0f / std::sqrt(var + 1e-5f);
        }
      });
    };
    hand_ln(0);
    ref = out;
    auto fl = [&](int i) { return layer_norm(xs[i & 1], {C}); };
    check_loom("layer_norm 4096x4096", fl, ref, 1e-4);
    run_three("layer_norm 4096x4096", bytes, reps, hand_ln, fl);
  }

  // ---- sum of 16M --------------------------------------------------------------------------
  {
    int64_t n = quick ? (1 << 20) : (16 << 20);
    Tensor xs[2] = {randn({n}), randn({n})};
    loom::sync();
    std::vector<float> in[2] = {xs[0].to_vector<float>(), xs[1].to_vector<float>()};
    float result = 0;
    auto hand = [&](int i) {
      const float* x = in[i & 1].data();
      result = float(tbb::parallel_reduce(
          tbb::blocked_range<int64_t>(0, n, 1 << 16), 0.0,
          [&](auto r, double acc) {
            return acc + double(CMapF(x + r.begin(), r.end() - r.begin()).sum());
          },
          std::plus<double>()));
    };
    hand(0);
    double bytes = 4.0 * n;
    auto f = [&](int i) { return xs[i & 1].sum(); };
    check_loom("sum 16M", f, {result}, 1e-4);
    run_three("sum 16M", bytes, reps, hand, f);
  }

  tiny_ops(kCPU, reps);

  write_json(json);
  return 0;
}
