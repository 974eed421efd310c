// The host memory pool: best fit over coalesced free ranges (tensor/range_arena.h), checked
// against a byte map of made-up addresses on random sequences; and the CPU pool over mapped
// chunks (cpu/host_memory.h): page-aligned, writable, reused after free, and its free pages
// given back past the kept bound.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "cpu/host_memory.h"
#include "tensor/range_arena.h"

using loom::RangeArena;

namespace {

// The free ranges a byte map holds: maximal runs of free bytes.
std::vector<std::pair<size_t, size_t>> runs(const std::vector<char>& used) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < used.size();) {
    if (used[i]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < used.size() && !used[j]) ++j;
    out.push_back({i, j - i});
    i = j;
  }
  return out;
}

}  // namespace

TEST_CASE("range arena: best fit, split and merge agree with a byte map") {
  constexpr size_t kBase = 1 << 20, kSize = 1 << 14;
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    CAPTURE(round);
    RangeArena a;
    a.add(kBase, kSize);
    std::vector<char> used(kSize, 0);
    std::map<uintptr_t, size_t> live;
    for (int step = 0; step < 400; ++step) {
      if (live.empty() || rng() % 3 != 0) {
        const size_t n = 1 + rng() % 700;
        // The expected pick: the smallest free run that holds n, the lowest among equals.
        auto free_runs = runs(used);
        int64_t want = -1;
        size_t want_len = SIZE_MAX;
        for (auto [at, len] : free_runs)
          if (len >= n && len < want_len) want = int64_t(at), want_len = len;
        uintptr_t p = a.take(n);
        if (want < 0) {
          CHECK(p == 0);
          continue;
        }
        REQUIRE(p == kBase + uintptr_t(want));
        for (size_t i = 0; i < n; ++i) used[p - kBase + i] = 1;
        live[p] = n;
      } else {
        auto it = std::next(live.begin(), int64_t(rng() % live.size()));
        a.give(it->first, it->second);
        for (size_t i = 0; i < it->second; ++i) used[it->first - kBase + i] = 0;
        live.erase(it);
      }
      auto free_runs = runs(used);
      size_t free_bytes = 0;
      for (auto r : free_runs) free_bytes += r.second;
      REQUIRE(a.free_bytes() == free_bytes);
      REQUIRE(a.ranges() == free_runs.size());  // neighbours merged, nothing lost
      REQUIRE(a.resident_free() <= a.free_bytes());
    }
    for (auto [p, n] : live) a.give(p, n);
    CHECK(a.ranges() == 1);
    CHECK(a.free_bytes() == kSize);
    CHECK(a.take(kSize) == kBase);  // whole again
  }
}

TEST_CASE("range arena: resident bytes count what was given back until trimmed") {
  RangeArena a;
  a.add(0x10000, 0x10000);
  CHECK(a.resident_free() == 0);  // never touched
  uintptr_t p = a.take(0x4000), q = a.take(0x4000);
  CHECK(p == 0x10000);
  CHECK(q == 0x14000);
  a.give(p, 0x4000);
  CHECK(a.resident_free() == 0x4000);
  a.give(q, 0x4000);  // merges with p's range and the untouched rest
  CHECK(a.ranges() == 1);
  CHECK(a.resident_free() == 0x8000);
  std::vector<std::pair<uintptr_t, size_t>> released;
  a.trim(0x8000, [&](uintptr_t at, size_t n) { released.push_back({at, n}); });
  CHECK(released.empty());  // within the bound
  a.trim(0x1000, [&](uintptr_t at, size_t n) { released.push_back({at, n}); });
  REQUIRE(released.size() == 1);
  CHECK(released[0] == std::pair<uintptr_t, size_t>{0x10000, 0x10000});
  CHECK(a.resident_free() == 0);
  // A block given back next to a chunk added later merges across the two.
  a.add(0x20000, 0x1000);
  CHECK(a.ranges() == 1);
  CHECK(a.take(0x11000) == 0x10000);
}

TEST_CASE("range arena: a block given back twice is refused") {
  RangeArena a;
  a.add(0x1000, 0x4000);
  uintptr_t p = a.take(0x1000);
  a.give(p, 0x1000);
  CHECK_THROWS(a.give(p, 0x1000));
  CHECK(a.free_bytes() == 0x4000);
}

TEST_CASE("cpu host memory: aligned, writable, reused, and given back past the bound") {
  using loom::cpu::HostMemory;
  constexpr size_t kBig = HostMemory::kSmall + HostMemory::kPage;  // past the small lists
  HostMemory m(size_t(4) << 20);
  std::vector<void*> ps;
  for (size_t n : {kBig, kBig + 1, kBig, size_t(3) << 20}) {
    void* p = m.alloc(n);
    REQUIRE(p);
    CHECK(reinterpret_cast<uintptr_t>(p) % HostMemory::kPage == 0);
    std::memset(p, 0xab, n);
    ps.push_back(p);
  }
  CHECK(m.mapped() >= HostMemory::kChunk);
  // Freed blocks serve other sizes: after the three first ones go, a block of their summed
  // size fits where they were (merged), below the large one.
  const size_t three = 3 * kBig + HostMemory::kPage;  // kBig + 1 takes a page more
  m.free(ps[0], kBig);
  m.free(ps[1], kBig + 1);
  m.free(ps[2], kBig);
  CHECK(m.resident_free() == three);
  void* merged = m.alloc(three);
  CHECK(merged == ps[0]);
  m.free(merged, three);
  // Small blocks come back by size, the last freed first.
  void* a = m.alloc(100);
  void* b = m.alloc(5000);
  void* c = m.alloc(100);
  m.free(a, 100);
  m.free(c, 100);
  CHECK(m.alloc(4096) == c);
  CHECK(m.alloc(4000) == a);
  void* d = m.alloc(100);
  CHECK(d != b);
  for (void* q : {a, c, d}) m.free(q, 4096);
  m.free(b, 5000);
  m.free(ps[3], size_t(3) << 20);  // past the 4 MiB bound: pages go back
  CHECK(m.resident_free() <= (size_t(4) << 20));
  m.release_free();
  CHECK(m.resident_free() == 0);
  void* again = m.alloc(kBig);
  CHECK(again == ps[0]);  // lowest first: use stays packed
  m.free(again, kBig);
}
