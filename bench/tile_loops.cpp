// Where chain8's time goes on the CPU: its two tile instructions (cpu/vmath.h
// pair_unary_f32) timed alone on an L1-resident tile, in sequence over tiles of several sizes,
// over 16M floats streamed from memory (one thread, then oneTBB), against loom's own chain8
// (one thread and all). Cycles are TSC ticks; the frequency probe says how many core cycles
// a tick is (a chain of dependent adds, 1 cycle each), idle and right after AVX-512 work.
// Not built by default: ninja -C build loom_tile_loops && build/bench/loom_tile_loops
#include <sys/mman.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <x86intrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <thread>
#include <vector>

#include "cpu/vmath.h"
#include "loom.h"

using namespace loom;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kN = int64_t(16) << 20;
constexpr int64_t kChunk = 2048;  // the interpreter's tile of a long row (cpu/interp_job.h)
constexpr int64_t kSegment = 32;  // chunks per parallel task there

// Best of `reps` runs of f, in TSC ticks, wall ns and process CPU ns. The box is shared: short
// timed windows and the minimum keep other processes' time slices out.
struct Time {
  double ticks, ns, cpu_ns;
};
double cpu_now() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e9 + double(t.tv_nsec);
}
Time best(int reps, const std::function<void()>& f) {
  Time b{1e300, 1e300, 1e300};
  for (int r = 0; r < reps; ++r) {
    double c = cpu_now();
    auto t0 = Clock::now();
    uint64_t c0 = __rdtsc();
    f();
    uint64_t c1 = __rdtsc();
    double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    b.ticks = std::min(b.ticks, double(c1 - c0));
    b.ns = std::min(b.ns, ns);
    b.cpu_ns = std::min(b.cpu_ns, cpu_now() - c);
  }
  return b;
}

// TSC ticks per core cycle: 2000 dependent imuls a round (3 cycles each on Intel cores since
// Sandy Bridge; Golden Cove folds chains of immediate adds, so not those).
double ticks_per_cycle() {
  uint64_t x = 3;
  Time t = best(50, [&] {
    for (int i = 0; i < 20; ++i) __asm__ volatile(".rept 100\n\timul %0, %0\n\t.endr" : "+r"(x));
  });
  return t.ticks / 6000.0;
}

// chain8's two instructions as the tile program runs them (checked against loom's result in
// main): v = tanh(x * 1.5 + 0.5) * x; out = relu(x * x + sigmoid(v) - 0.25).
struct Chain8 {
  const float k = 0.25f;
  cpu::PreOps pre;
  Chain8() {
    pre.n = 2;
    pre.op[0] = Op::Mul, pre.k[0] = 1.5f;
    pre.op[1] = Op::Add, pre.k[1] = 0.5f;
  }
  void a(const float* x, float* v, int64_t n) const {
    cpu::pair_unary_f32(Op::Copy, x, 1, x, 1, Op::Mul, false, Op::Tanh, x, false, v, n, Op::Const,
                        true, nullptr, 0, false, pre);
  }
  void b(const float* x, const float* v, float* out, int64_t n, bool stream) const {
    cpu::pair_unary_f32(Op::Mul, x, 1, x, 1, Op::Add, false, Op::Sigmoid, v, true, out, n, Op::Sub,
                        true, &k, 0, stream);
  }
};
// One thread over [c0, c1) chunks of x: both instructions a chunk at a time, v in a tile.
void stream_chunks(const Chain8& c, const float* x, float* out, int64_t c0, int64_t c1, bool stream,
                   float* v) {
  for (int64_t ch = c0; ch < c1; ++ch) {
    int64_t i = ch * kChunk, n = std::min(kChunk, kN - i);
    c.a(x + i, v, n);
    c.b(x + i, v, out + i, n, stream);
  }
  _mm_sfence();
}

// Sum over chunk segments of each segment's best time (TSC ticks) over `reps` sweeps of
// seg(0..nseg): a whole-array time with other processes' slices filtered out piecewise.
double segmented(int reps, int64_t nseg, const std::function<void(int64_t)>& seg) {
  std::vector<double> lo(size_t(nseg), 1e300);
  for (int r = 0; r < reps; ++r)
    for (int64_t s = 0; s < nseg; ++s) {
      uint64_t c0 = __rdtsc();
      seg(s);
      lo[size_t(s)] = std::min(lo[size_t(s)], double(__rdtsc() - c0));
    }
  double t = 0;
  for (double v : lo) t += v;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 7;
  const bool loom_only = argc > 2 && !std::strcmp(argv[2], "--loom");  // its rows alone
  double load[1] = {0};
  getloadavg(load, 1);
  const Chain8 c;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  double tpc_idle = ticks_per_cycle();
  Time cal = best(3, [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
  const double ghz = cal.ticks / cal.ns;  // TSC ticks per ns
  std::printf("load %.2f, reps %d; TSC %.3f GHz\n", load[0], reps, ghz);

  // ---- one tile in L1, each instruction alone and both in sequence ----------------------
  std::vector<float> xs(kChunk * 8), v(kChunk * 8), out(kChunk * 8);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = float((int64_t(i) * 7919 % 6001) - 3000) / 1000.f;
  if (!loom_only) {
    for (int64_t n : {int64_t(256), int64_t(1024), kChunk, kChunk * 4, kChunk * 8}) {
      int rep_in = int(std::max<int64_t>(1, 32768 / n));  // 32K floats (~2048 vectors) a window
      double vecs = double(rep_in) * double(n) / 16;
      int r = reps * 60;
      Time ta = best(r, [&] {
        for (int k = 0; k < rep_in; ++k) c.a(xs.data(), v.data(), n);
      });
      Time tb = best(r, [&] {
        for (int k = 0; k < rep_in; ++k) c.b(xs.data(), v.data(), out.data(), n, false);
      });
      Time tab = best(r, [&] {
        for (int k = 0; k < rep_in; ++k) {
          c.a(xs.data(), v.data(), n);
          c.b(xs.data(), v.data(), out.data(), n, false);
        }
      });
      std::printf(
          "tile %6lld floats (%4lld KiB x,v,out): A %5.1f  B %5.1f  A;B %5.1f ticks/16 floats\n",
          (long long)n, (long long)(n * 12 / 1024), ta.ticks / vecs, tb.ticks / vecs,
          tab.ticks / vecs);
    }
    double tpc_hot = ticks_per_cycle();
    std::printf("TSC ticks per core cycle: %.3f idle, %.3f right after AVX-512 loops\n", tpc_idle,
                tpc_hot);
  }

  // ---- 16M floats from memory ------------------------------------------------------------
  Tensor xt = randn({kN});
  loom::sync();
  std::vector<float> x = xt.to_vector<float>();
  float* o = static_cast<float*>(std::aligned_alloc(64, size_t(kN) * 4));
  std::memset(o, 0, size_t(kN) * 4);
  const double vecs = double(kN) / 16;
  const int64_t nch = (kN + kChunk - 1) / kChunk, nseg = (nch + kSegment - 1) / kSegment;
  auto seg_row = [&](const char* what, double ticks) {
    std::printf("%-46s %7.2f ms (segments' best)  %6.1f ticks/16 floats\n", what, ticks / ghz / 1e6,
                ticks / vecs);
  };
  auto row = [&](const char* what, Time t) {
    std::printf("%-46s %7.2f ms wall, %7.2f ms CPU  %6.1f ticks/16 floats\n", what, t.ns / 1e6,
                t.cpu_ns / 1e6, t.ticks / vecs);
  };
  std::vector<float> vt(kChunk), mine;
  if (!loom_only) {
    auto chunks = [&](int64_t s, bool stream) {
      stream_chunks(c, x.data(), o, s * kSegment, std::min(nch, (s + 1) * kSegment), stream,
                    vt.data());
    };
    seg_row("copy x+1 (read, stream store), 1 thread", segmented(reps, nseg, [&](int64_t s) {
              int64_t i0 = s * kSegment * kChunk, i1 = std::min(kN, i0 + kSegment * kChunk);
              for (int64_t i = i0; i < i1; i += 16)
                _mm512_stream_ps(o + i,
                                 _mm512_add_ps(_mm512_loadu_ps(x.data() + i), _mm512_set1_ps(1)));
              _mm_sfence();
            }));
    seg_row("A;B per 2048 chunk, 1 thread, stream",
            segmented(reps, nseg, [&](int64_t s) { chunks(s, true); }));
    mine.assign(o, o + kN);
    seg_row("A;B per 2048 chunk, 1 thread, plain store",
            segmented(reps, nseg, [&](int64_t s) { chunks(s, false); }));
    std::vector<float> ol(kChunk);
    seg_row("A;B, x from memory, out to one L1 tile", segmented(reps, nseg, [&](int64_t s) {
              for (int64_t ch = s * kSegment; ch < std::min(nch, (s + 1) * kSegment); ++ch) {
                c.a(x.data() + ch * kChunk, vt.data(), kChunk);
                c.b(x.data() + ch * kChunk, vt.data(), ol.data(), kChunk, false);
              }
            }));
    seg_row("A;B, x from one L1 tile, out streamed", segmented(reps, nseg, [&](int64_t s) {
              for (int64_t ch = s * kSegment; ch < std::min(nch, (s + 1) * kSegment); ++ch) {
                c.a(xs.data(), vt.data(), kChunk);
                c.b(xs.data(), vt.data(), o + ch * kChunk, kChunk, true);
              }
              _mm_sfence();
            }));
    // software prefetch of x `dist` floats ahead, a few lines before each 256-float piece of A
    for (int64_t dist : {int64_t(2048), int64_t(4096), int64_t(8192)}) {
      char what[80];
      std::snprintf(what, sizeof what, "A;B stream, prefetcht0 x %lld floats ahead",
                    (long long)dist);
      seg_row(what, segmented(reps, nseg, [&](int64_t s) {
                for (int64_t ch = s * kSegment; ch < std::min(nch, (s + 1) * kSegment); ++ch) {
                  const float* xc = x.data() + ch * kChunk;
                  for (int64_t p = 0; p < kChunk; p += 256) {
                    for (int64_t l = 0; l < 256; l += 16)
                      _mm_prefetch(xc + p + dist + l, _MM_HINT_T0);
                    c.a(xc + p, vt.data() + p, 256);
                  }
                  c.b(xc, vt.data(), o + ch * kChunk, kChunk, true);
                }
                _mm_sfence();
              }));
    }
    {  // the same over x and out on 2 MiB pages (madvise: THP is opt-in on this box)
      auto huge = [&] {
        void* p = std::aligned_alloc(size_t(2) << 20, size_t(kN) * 4);
        madvise(p, size_t(kN) * 4, MADV_HUGEPAGE);
        std::memset(p, 0, size_t(kN) * 4);
        return static_cast<float*>(p);
      };
      float *hx = huge(), *ho = huge();
      std::memcpy(hx, x.data(), size_t(kN) * 4);
      seg_row("A;B per 2048 chunk, stream, 2 MiB pages", segmented(reps, nseg, [&](int64_t s) {
                stream_chunks(c, hx, ho, s * kSegment, std::min(nch, (s + 1) * kSegment), true,
                              vt.data());
              }));
      seg_row("copy x+1, 2 MiB pages", segmented(reps, nseg, [&](int64_t s) {
                int64_t i0 = s * kSegment * kChunk, i1 = std::min(kN, i0 + kSegment * kChunk);
                for (int64_t i = i0; i < i1; i += 16)
                  _mm512_stream_ps(ho + i,
                                   _mm512_add_ps(_mm512_loadu_ps(hx + i), _mm512_set1_ps(1)));
                _mm_sfence();
              }));
      std::free(hx);
      std::free(ho);
    }
    std::vector<float> vall(static_cast<size_t>(kN));
    seg_row("A over a segment, then B, 1 thread", segmented(reps, nseg, [&](int64_t s) {
              int64_t i0 = s * kSegment * kChunk, n = std::min(kN, i0 + kSegment * kChunk) - i0;
              c.a(x.data() + i0, vall.data() + i0, n);
              c.b(x.data() + i0, vall.data() + i0, o + i0, n, true);
              _mm_sfence();
            }));
    row("A;B per 2048 chunk, 1 thread, stream", best(reps, [&] {
          for (int64_t s = 0; s < nseg; ++s) chunks(s, true);
        }));
    row("A;B per 2048 chunk, TBB segments of 32", best(reps, [&] {
          tbb::parallel_for(tbb::blocked_range<int64_t>(0, nseg), [&](auto r) {
            thread_local std::vector<float> t(kChunk);
            for (int64_t s = r.begin(); s < r.end(); ++s)
              stream_chunks(c, x.data(), o, s * kSegment, std::min(nch, (s + 1) * kSegment), true,
                            t.data());
          });
        }));
  }
  auto chain8 = [&] {
    Tensor y = relu(sigmoid(tanh(xt * 1.5 + 0.5) * xt) + xt * xt - 0.25);
    loom::sync();
    return y;
  };
  std::vector<float> theirs = chain8().to_vector<float>();
  int64_t diff = 0;
  for (int64_t i = 0; i < kN && !loom_only; ++i)
    diff += std::memcmp(&theirs[size_t(i)], &mine[size_t(i)], 4) != 0;
  if (!loom_only)
    std::printf("(these loops vs loom's chain8: %lld of %lld results differ)\n", (long long)diff,
                (long long)kN);
  {
    tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
    row("loom chain8 fused, 1 thread", best(reps, [&] { chain8(); }));
    set_fusion(false);
    row("loom chain8 fusion-off, 1 thread", best(reps, [&] { chain8(); }));
    set_fusion(true);
  }
  row("loom chain8 fused, TBB", best(reps, [&] { chain8(); }));
  std::free(o);
  return diff ? 1 : 0;
}
