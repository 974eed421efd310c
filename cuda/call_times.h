#pragma once
// LOOM_CUDA_CALL_TIMES=1: every bound driver entry point named in a Timed<> list goes through a
// trampoline that counts its calls and wall time; the table prints to stderr at exit. It answers
// where a flush's host time goes on a real driver (no perf or strace on the GPU machine). Off:
// the Api table holds the driver's own pointers and nothing is timed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace loom::cuda::call_times {

struct CallStat {
  const char* name = "";
  std::atomic<uint64_t> calls{0}, ns{0};
};

inline std::vector<CallStat*>& call_stats() {
  static auto* v = new std::vector<CallStat*>();  // leaked: printed from atexit
  return *v;
}

inline void print_call_times() {
  std::vector<CallStat*> v = call_stats();
  std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->ns > b->ns; });
  std::fprintf(stderr, "[loom] driver call times (LOOM_CUDA_CALL_TIMES):\n");
  std::fprintf(stderr, "  %-28s %12s %14s %10s\n", "call", "calls", "total us", "us/call");
  for (CallStat* s : v)
    if (s->calls)
      std::fprintf(stderr, "  %-28s %12llu %14.1f %10.3f\n", s->name,
                   (unsigned long long)s->calls.load(), s->ns.load() / 1e3,
                   s->ns.load() / 1e3 / double(s->calls.load()));
}

// Timed<&Api::cuX>::wrap(api.cuX, "cuX") swaps the bound pointer for a counting trampoline.
template <auto M>
struct Timed;
template <typename Api, typename R, typename... A, R (*Api::*M)(A...)>
struct Timed<M> {
  static inline R (*orig)(A...) = nullptr;
  static inline CallStat stat;
  static R call(A... a) {
    auto t0 = std::chrono::steady_clock::now();
    R r = orig(a...);
    auto dt = std::chrono::steady_clock::now() - t0;
    stat.calls.fetch_add(1, std::memory_order_relaxed);
    stat.ns.fetch_add(uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(dt).count()),
                      std::memory_order_relaxed);
    return r;
  }
  static void wrap(Api& api, const char* name) {
    if (!(api.*M)) return;
    orig = api.*M;
    stat.name = name;
    call_stats().push_back(&stat);
    api.*M = &call;
  }
};

}  // namespace loom::cuda::call_times
