// The CUDA launch memo's key (cuda/launch_memo.h): groups of one signature whose keys are equal
// get the same variant and grid from choose_variant / launch_config, so reusing an earlier
// launch's decisions is exact; and what those decisions read (sizes, view offsets, strides)
// changes the key. Groups come from the CPU device through plan_storage (no GPU needed).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cuda/launch_memo.h"
#include "fusion/trace.h"
#include "loom.h"

using namespace loom;
namespace lc = loom::cuda;

namespace {

struct Decided {
  uint64_t sig;
  std::vector<int64_t> key;
  std::string variant;
  lc::LaunchConfig cfg;
};

Decided decide(const Group& g, int sm) {
  Decided d{g.signature, {}, {}, {}};
  lc::launch_key(g, sm, d.key);
  lc::Variant v = lc::choose_variant(g, sm);
  d.variant = v.key();
  d.cfg = lc::launch_config(g, v, sm);
  return d;
}

// The decisions for every kernel of the plan that computes `t` (planned, not run).
void decide_all(const Tensor& t, int sm, std::vector<Decided>& out) {
  for (const Group& g : plan_storage(t.storage()))
    if (!g.opaque) out.push_back(decide(g, sm));
}

// The decisions for `t`'s plan of one kernel.
Decided decide(const Tensor& t, int sm) {
  std::vector<Group> gs = plan_storage(t.storage());
  REQUIRE(gs.size() == 1);
  return decide(gs[0], sm);
}

bool same_cfg(const lc::LaunchConfig& a, const lc::LaunchConfig& b) {
  return a.grid_x == b.grid_x && a.grid_y == b.grid_y && a.block == b.block &&
         a.seglen == b.seglen && a.empty == b.empty;
}

Tensor ready(const Shape& s, DType dt, uint64_t seed) {
  manual_seed(seed);
  Tensor t = cast(rand(s) * 2.0 - 1.0, dt);
  loom::sync();
  return t;
}

}  // namespace

TEST_CASE("launch memo: equal keys of one signature decide alike; what decides changes the key") {
  std::vector<Decided> all;
  const int sms[] = {132, 7};
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    for (int64_t n : {int64_t(1), int64_t(3), int64_t(1000), int64_t(1024), int64_t(70000)}) {
      for (uint64_t seed : {1u, 2u}) {  // other memory, other scalar values: same decisions
        Tensor x = ready({n}, dt, seed), w = ready({4, n}, dt, seed + 7);
        double c = seed == 1 ? 0.5 : 0.25;
        for (int sm : sms) {
          decide_all(x * c + 1.0, sm, all);                               // contiguous
          if (n > 1) decide_all(x.slice(0, 1, n) * c, sm, all);           // offset 1
          if (n > 2) decide_all(x.slice(0, 0, n, 2) * c, sm, all);        // strided
          decide_all(w * c + x, sm, all);                                 // broadcast row
          decide_all(sum(w * c, {1}), sm, all);                           // row reduction
          decide_all(sum(w * c, {0}), sm, all);                           // column reduction
          decide_all(softmax(w.slice(1, n > 1 ? 1 : 0, n), 1), sm, all);  // offset rows
        }
      }
    }
  }
  int equal_keys = 0;
  for (size_t i = 0; i < all.size(); ++i)
    for (size_t j = i + 1; j < all.size(); ++j) {
      if (all[i].sig != all[j].sig || all[i].key != all[j].key) continue;
      ++equal_keys;
      CHECK_EQ(all[i].variant, all[j].variant);
      CHECK(same_cfg(all[i].cfg, all[j].cfg));
    }
  CHECK(equal_keys > 20);  // the seeds' twins at least

  // Sizes, view offsets and the SM count each change the key of one signature.
  Tensor x = ready({1024}, DType::Float32, 3);
  Decided a = decide(x * 0.5, 132), b = decide(x.slice(0, 0, 1000) * 0.5, 132);
  Decided c = decide(x.slice(0, 1, 1001) * 0.5, 132), d = decide(x * 0.5, 7);
  REQUIRE(a.sig == b.sig);
  CHECK(a.key != b.key);
  CHECK(a.key != d.key);
  // A strided loop's grid follows the SM count (8 blocks an SM).
  Tensor big = ready({int64_t(1) << 20}, DType::Float32, 4);
  Decided s132 = decide(big.slice(0, 0, big.numel(), 2) * 0.5, 132);
  Decided s7 = decide(big.slice(0, 0, big.numel(), 2) * 0.5, 7);
  CHECK(s132.key != s7.key);
  CHECK(s132.cfg.grid_x != s7.cfg.grid_x);
  if (b.sig == c.sig) {
    CHECK(b.key != c.key);
    CHECK(b.variant != c.variant);  // vectors at offset 0, not at offset 1
  }
}

TEST_CASE("launch memo: finds an entry by its whole key, keeps the newest eight") {
  lc::LaunchMemo m;
  lc::Variant v;
  lc::LaunchConfig cfg;
  for (int64_t i = 0; i < 10; ++i) {
    v.vec = int(i);
    cfg.grid_x = unsigned(i + 1);
    m.put({7, i}, v, cfg);
  }
  CHECK(m.size() == 8);
  CHECK(m.find({7, 0}) == nullptr);  // the oldest two went
  CHECK(m.find({7, 1}) == nullptr);
  for (int64_t i = 2; i < 10; ++i) {
    const lc::LaunchMemo::Entry* e = m.find({7, i});
    REQUIRE(e != nullptr);
    CHECK(e->v.vec == i);
    CHECK(e->lc.grid_x == unsigned(i + 1));
  }
  CHECK(m.find({7}) == nullptr);  // a prefix is not a match
  CHECK(m.find({7, 2, 0}) == nullptr);
}
