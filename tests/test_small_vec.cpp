// SmallVec: copies and moves of inline and heap contents (ranges are copied in one go and an
// inline move moves the elements at once): values, sizes and, for elements that own something,
// reference counts (a lost or doubled element shows there).
#include <memory>
#include <vector>

#include "helpers.h"
#include "tensor/small_vec.h"

using namespace loom;

TEST_CASE("small_vec: copies and moves keep values, inline and on the heap") {
  for (size_t n : {size_t(0), size_t(3), size_t(6), size_t(7), size_t(13)}) {
    std::vector<int64_t> src;
    for (size_t i = 0; i < n; ++i) src.push_back(int64_t(i * 7919 % 101) - 50);
    SmallVec<int64_t, 6> a(src.begin(), src.end());
    CHECK(std::vector<int64_t>(a) == src);
    SmallVec<int64_t, 6> b(a);  // copy
    CHECK(std::vector<int64_t>(b) == src);
    SmallVec<int64_t, 6> c(std::move(b));  // move (inline: element-wise; heap: the pointer)
    CHECK(std::vector<int64_t>(c) == src);
    CHECK(b.empty());
    SmallVec<int64_t, 6> d{1, 2};
    d = c;  // copy-assign over existing contents
    CHECK(std::vector<int64_t>(d) == src);
    d = SmallVec<int64_t, 6>{9};
    CHECK(std::vector<int64_t>(d) == std::vector<int64_t>{9});
    SmallVec<int64_t, 6> e(src);  // from a std::vector (a counted range)
    e.insert(e.begin(), {-1, -2});
    std::vector<int64_t> want{-1, -2};
    want.insert(want.end(), src.begin(), src.end());
    CHECK(std::vector<int64_t>(e) == want);
  }
}

TEST_CASE("small_vec: elements that own something are neither lost nor doubled") {
  auto p = std::make_shared<int>(5);
  for (size_t n : {size_t(1), size_t(2), size_t(3), size_t(5)}) {
    {
      std::vector<std::shared_ptr<int>> src(n, p);
      SmallVec<std::shared_ptr<int>, 2> a(src.begin(), src.end());
      CHECK(p.use_count() == long(1 + 2 * n));
      SmallVec<std::shared_ptr<int>, 2> b(a);
      CHECK(p.use_count() == long(1 + 3 * n));
      SmallVec<std::shared_ptr<int>, 2> c(std::move(a));
      CHECK(p.use_count() == long(1 + 3 * n));
      CHECK(a.empty());
      CHECK(c.size() == n);
      for (auto& q : c) CHECK(q == p);
      b = c;
      CHECK(p.use_count() == long(1 + 3 * n));
    }
    CHECK(p.use_count() == 1);
  }
}

TEST_CASE("small_vec: == compares sizes and every element") {
  for (size_t n : {size_t(1), size_t(4), size_t(6), size_t(9)}) {
    SmallVec<int64_t, 6> a;
    for (size_t i = 0; i < n; ++i) a.push_back(int64_t(i) * 3 + 1);
    SmallVec<int64_t, 6> b(a);
    CHECK(a == b);
    for (size_t i = 0; i < n; ++i) {  // a difference at any position
      SmallVec<int64_t, 6> c(a);
      c[i] = -c[i];
      CHECK_FALSE(a == c);
      CHECK(a != c);
    }
    SmallVec<int64_t, 6> shorter(a.begin(), a.end() - 1);  // a prefix is not equal
    CHECK_FALSE(a == shorter);
    b.push_back(0);
    CHECK_FALSE(a == b);
  }
  CHECK(SmallVec<int64_t, 6>() == SmallVec<int64_t, 6>());
}
