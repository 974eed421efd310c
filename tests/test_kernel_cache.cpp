// The in-memory kernel cache's LRU bound: ever-new signatures keep the cache at its limit,
// evicted programs are lowered again (a miss) and still compute the right values, and kernels
// in use every iteration are never the ones evicted.
#include "helpers.h"

using namespace loom;

namespace {

// A pointwise chain of `len` rounds: one fused kernel whose signature differs for each length.
Tensor chain(const Tensor& x, int len) {
  Tensor y = x;
  for (int i = 0; i < len; ++i) y = y * 0.75 + 0.125;
  return y;
}

std::vector<double> chain_ref(const std::vector<double>& x, int len) {
  std::vector<double> r = x;
  for (double& v : r)
    for (int i = 0; i < len; ++i) v = v * 0.75 + 0.125;
  return r;
}

Tensor hot(const Tensor& x) { return (x.exp() - x).abs(); }

// Restores the limit and empties the cache (other tests count misses from a known state).
struct LimitScope {
  size_t was = kernel_cache_limit();
  explicit LimitScope(size_t n) {
    loom::sync();
    clear_kernel_cache();
    set_kernel_cache_limit(n);
  }
  ~LimitScope() {
    set_kernel_cache_limit(was);
    clear_kernel_cache();
  }
};

}  // namespace

TEST_CASE("kernel cache: distinct signatures past the limit keep the count at the limit") {
  REQUIRE(fusion_enabled());
  const size_t limit = 8;
  const int programs = 20;
  LimitScope scope(limit);
  Tensor x = lt::random({1000}, DType::Float32, 61, -1, 1);
  std::vector<double> xv = lt::host(x);
  loom::sync();
  clear_kernel_cache();  // making x may have lowered a kernel
  reset_counters();

  std::vector<double> hot_first = lt::host(hot(x));
  for (int len = 1; len <= programs; ++len) {
    lt::check_close(chain(x, len), chain_ref(xv, len));
    CHECK(kernel_cache_size() <= limit);
    // The hot program runs between every new one: always recently used, never evicted.
    std::vector<double> h = lt::host(hot(x));
    CHECK(h == hot_first);
  }
  auto& c = counters();
  CHECK(kernel_cache_size() == limit);
  CHECK(c.cache_misses.load() == programs + 1);  // each chain once, the hot program once
  CHECK(c.kernel_evictions.load() == programs + 1 - int64_t(limit));
  CHECK(c.cache_hits.load() == programs);  // every hot run after the first

  // The first chain was evicted long ago: it is lowered again and computes the same values
  // as fusion off (and a float64 reference).
  int64_t misses = c.cache_misses.load();
  lt::check_close(chain(x, 1), chain_ref(xv, 1));
  CHECK(c.cache_misses.load() == misses + 1);
  CHECK(kernel_cache_size() == limit);
  lt::check_fused_matches_unfused([&] { return chain(x, 1); });
  lt::check_fused_matches_unfused([&] { return chain(x, programs); });
}

TEST_CASE("kernel cache: lowering the limit evicts the least recently used at once") {
  LimitScope scope(16);
  Tensor x = lt::random({257}, DType::Float32, 62, -1, 1);
  std::vector<double> xv = lt::host(x);
  clear_kernel_cache();  // making x may have lowered a kernel
  for (int len = 1; len <= 6; ++len) lt::host(chain(x, len));
  REQUIRE(kernel_cache_size() == 6);
  lt::host(chain(x, 1));  // now the most recently used
  reset_counters();
  set_kernel_cache_limit(2);
  CHECK(kernel_cache_size() == 2);
  CHECK(counters().kernel_evictions.load() == 4);
  lt::check_close(chain(x, 1), chain_ref(xv, 1));  // kept: a hit
  lt::check_close(chain(x, 6), chain_ref(xv, 6));  // kept: a hit
  CHECK(counters().cache_misses.load() == 0);
  lt::check_close(chain(x, 3), chain_ref(xv, 3));  // evicted: lowered again
  CHECK(counters().cache_misses.load() == 1);
  CHECK(kernel_cache_size() == 2);
  LT_CHECK_ERROR(set_kernel_cache_limit(0), "set_kernel_cache_limit", "0");
}

TEST_CASE("kernel cache: a limit of one still runs multi-kernel flushes correctly") {
  // Each group's kernel is looked up, run, then may be evicted by the next group's lookup.
  LimitScope scope(1);
  Tensor x = lt::random({64, 33}, DType::Float32, 63, -2, 2);
  for (int i = 0; i < 3; ++i) {
    lt::check_fused_matches_unfused([&] { return softmax(x * 0.5, -1).sum({0}) + x.mean(); });
    CHECK(kernel_cache_size() == 1);
  }
}
