// cpu/group_slice.h: a range of a pointwise group's elements as boxes that cover it exactly
// once, whatever the range's ends (inside a row, across dims, the whole space, rank 0).
#include "../helpers.h"
#include "cpu/group_slice.h"

using namespace loom;

namespace {

// The elements (row-major indices of g's space) a box covers, read back from the box's
// space and the offset its contiguous leaf was moved to.
void cover(const Group& box, std::vector<int>& hits) {
  const Shape& s = box.space;
  const Strides& st = box.leaves[0].strides;
  int64_t n = numel(s);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = box.leaves[0].offset, rest = i;
    for (int d = int(s.size()) - 1; d >= 0; --d) {
      off += (rest % s[d]) * st[d];
      rest /= s[d];
    }
    hits.at(size_t(off))++;
  }
}

}  // namespace

TEST_CASE("group slice: every range of a [3, 4, 5] space is covered once, in few boxes") {
  Group g;
  g.space = {3, 4, 5};
  g.leaves.push_back({DType::Float32, {20, 5, 1}, 0, nullptr, Space::Full});
  g.outputs.push_back({0, nullptr, {20, 5, 1}, 7});
  for (int64_t e0 = 0; e0 <= 60; ++e0)
    for (int64_t e1 = e0; e1 <= 60; ++e1) {
      std::vector<int> hits(60, 0);
      int boxes = 0;
      cpu::for_each_slice(g, e0, e1, [&](Group& b) {
        ++boxes;
        CHECK(b.space.size() == 3);
        CHECK(b.outputs[0].offset - 7 == b.leaves[0].offset);  // outputs move the same way
        cover(b, hits);
      });
      for (int64_t e = 0; e < 60; ++e) REQUIRE(hits[size_t(e)] == (e >= e0 && e < e1 ? 1 : 0));
      CHECK(boxes <= 5);  // up to two a dim, less the outermost's second
    }
  // rows of the innermost dim are one box
  int boxes = 0;
  cpu::for_each_slice(g, 25, 40, [&](Group&) { ++boxes; });
  CHECK(boxes == 1);
  // rank 0: the one element
  Group s;
  s.leaves.push_back({DType::Float32, {}, 3, nullptr, Space::Full});
  boxes = 0;
  cpu::for_each_slice(s, 0, 1, [&](Group& b) {
    ++boxes;
    CHECK(b.leaves[0].offset == 3);
  });
  CHECK(boxes == 1);
}
