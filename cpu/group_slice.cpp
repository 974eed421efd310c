#include "cpu/group_slice.h"

#include <algorithm>
#include <vector>

#include "tensor/error.h"

namespace loom::cpu {

void for_each_slice(const Group& g, int64_t e0, int64_t e1, const std::function<void(Group&)>& f) {
  LOOM_CHECK(!g.has_reduce(), Runtime, "for_each_slice: a group with reductions");
  const int r = int(g.space.size());
  // inner[d]: elements of one step along dim d (the product of the dims after it).
  std::vector<int64_t> inner(size_t(r) + 1, 1);
  for (int d = r - 1; d >= 0; --d) inner[d] = inner[d + 1] * g.space[d];
  e1 = std::min(e1, inner[0]);
  Group sub = g;
  std::vector<int64_t> at(size_t(r), 0);
  for (int64_t e = e0; e < e1;) {
    // The outermost dim whose steps start at e and of which at least one fits: the box spans
    // it from e's index, the dims before it held at e's index, the dims after it whole.
    int d = 0;
    while (d < r && (e % inner[d + 1] != 0 || e + inner[d + 1] > e1)) ++d;
    int64_t n = 1;
    for (int k = 0; k < r; ++k) {
      at[k] = k <= d ? (e / inner[k + 1]) % g.space[k] : 0;
      sub.space[k] = k < d ? 1 : g.space[k];
    }
    if (d < r) {
      n = std::min((e1 - e) / inner[d + 1], g.space[d] - at[d]);
      sub.space[d] = n;
    }
    auto moved = [&](int64_t off, const Strides& st) {
      for (int k = 0; k < r; ++k) off += at[k] * st[k];
      return off;
    };
    for (size_t l = 0; l < g.leaves.size(); ++l)
      sub.leaves[l].offset = moved(g.leaves[l].offset, g.leaves[l].strides);
    for (size_t o = 0; o < g.outputs.size(); ++o)
      sub.outputs[o].offset = moved(g.outputs[o].offset, g.outputs[o].strides);
    f(sub);
    e += d < r ? n * inner[d + 1] : 1;
  }
}

}  // namespace loom::cpu
