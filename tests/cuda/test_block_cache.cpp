// The CUDA backend's cache of freed device blocks (cuda/block_cache.h): blocks come back only
// for the stream they were freed on and the exact size, within the byte bounds; drains hand
// every block back once. Pure bookkeeping: runs without a GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <thread>
#include <vector>

#include "cuda/block_cache.h"

using loom::cuda::BlockCache;

TEST_CASE("block cache: a block comes back for its stream and size only") {
  BlockCache c(1 << 20);
  CHECK(c.take(1, 4096) == 0);
  CHECK(c.put(1, 4096, 0x1000));
  CHECK(c.put(1, 4096, 0x2000));
  CHECK(c.put(2, 4096, 0x3000));
  CHECK(c.held_bytes() == 3 * 4096);
  CHECK(c.take(1, 4097) == 0);       // another size
  CHECK(c.take(3, 4096) == 0);       // another stream
  CHECK(c.take(1, 4096) == 0x2000);  // the most recently freed first
  CHECK(c.take(1, 4096) == 0x1000);
  CHECK(c.take(1, 4096) == 0);
  CHECK(c.take(2, 4096) == 0x3000);
  CHECK(c.held_bytes() == 0);
}

TEST_CASE("block cache: bounds on the bytes held and the block size") {
  BlockCache c(16 * 4096);
  CHECK_FALSE(c.put(1, 4096 + 1, 0x10));  // over max / 16
  CHECK_FALSE(c.put(1, 0, 0x10));
  for (uint64_t i = 0; i < 16; ++i) CHECK(c.put(1, 4096, 0x1000 * (i + 1)));
  CHECK_FALSE(c.put(1, 4096, 0x100000));  // full
  CHECK(c.held_bytes() == 16 * 4096);
  BlockCache off(0);
  CHECK_FALSE(off.put(1, 64, 0x10));
}

TEST_CASE("block cache: drains return every block once, by stream or all") {
  BlockCache c(1 << 20);
  c.put(1, 256, 0x100), c.put(1, 512, 0x200), c.put(2, 256, 0x300), c.put(3, 1024, 0x400);
  std::vector<std::pair<uint64_t, uint64_t>> freed;
  auto f = [&](uint64_t s, uint64_t p) { freed.push_back({s, p}); };
  c.drain(f, false, 1);
  std::sort(freed.begin(), freed.end());
  CHECK(freed == std::vector<std::pair<uint64_t, uint64_t>>{{1, 0x100}, {1, 0x200}});
  CHECK(c.held_bytes() == 256 + 1024);
  CHECK(c.take(1, 256) == 0);
  freed.clear();
  c.drain(f);
  std::sort(freed.begin(), freed.end());
  CHECK(freed == std::vector<std::pair<uint64_t, uint64_t>>{{2, 0x300}, {3, 0x400}});
  CHECK(c.held_bytes() == 0);
  CHECK(c.take(2, 256) == 0);
}

TEST_CASE("block cache: threads putting and taking never share a block") {
  BlockCache c(64 << 20);
  constexpr int kThreads = 4, kRounds = 2000;
  std::vector<std::vector<uint64_t>> got(kThreads);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      // Each thread owns its blocks while it holds them: put them back, take some again.
      std::vector<uint64_t> mine;
      for (int i = 0; i < 8; ++i) mine.push_back(uint64_t(t + 1) << 32 | uint64_t(i + 1) << 12);
      for (int r = 0; r < kRounds; ++r) {
        for (uint64_t p : mine) CHECK(c.put(7, 4096, p));
        mine.clear();
        for (int i = 0; i < 8; ++i)
          if (uint64_t p = c.take(7, 4096)) mine.push_back(p);
      }
      got[t] = mine;
    });
  for (auto& t : ts) t.join();
  std::set<uint64_t> all;
  size_t n = 0;
  for (auto& g : got) n += g.size(), all.insert(g.begin(), g.end());
  c.drain([&](uint64_t, uint64_t p) { ++n, all.insert(p); });
  CHECK(n == size_t(kThreads) * 8);  // no block lost or handed out twice
  CHECK(all.size() == n);
}
