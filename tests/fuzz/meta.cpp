// Constant-dim masks through broadcasts, reshapes and indexing.
#include "meta.h"

namespace loom::fuzz {

Meta Meta::fresh(const Shape& s, double bound) {
  Meta m;
  m.bound = m.hist = bound;
  m.cmask.assign(s.size(), 0);
  cm_fix(m.cmask, s);
  return m;
}

bool Meta::constant_over(const std::vector<int>& dims, const Shape& s) const {
  int64_t n = 1;
  for (int d : dims) {
    if (!cmask[size_t(d)]) return false;
    n *= s[size_t(d)];
  }
  return n > 1;
}

void cm_fix(std::vector<char>& m, const Shape& s) {
  m.resize(s.size(), 0);
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == 1) m[i] = 1;
}

std::vector<char> cm_broadcast(const std::vector<char>& a, const std::vector<char>& b,
                               const Shape& out) {
  size_t r = out.size();
  std::vector<char> m(r, 1);
  for (size_t i = 0; i < r; ++i) {
    size_t k = r - 1 - i;
    if (i < a.size() && !a[a.size() - 1 - i]) m[k] = 0;
    if (i < b.size() && !b[b.size() - 1 - i]) m[k] = 0;
  }
  cm_fix(m, out);
  return m;
}

std::vector<char> cm_reshape(const std::vector<char>& a, const Shape& from, const Shape& to) {
  std::vector<char> m(to.size(), 0);
  if (numel(from) == 0 || numel(to) == 0) {
    cm_fix(m, to);
    return m;
  }
  // Walk both shapes in groups of equal products; a group is constant if all its sources are.
  size_t i = 0, j = 0;
  while (i < from.size() || j < to.size()) {
    size_t i0 = i, j0 = j;
    int64_t pf = 1, pt = 1;
    if (i < from.size()) pf *= from[i++];
    if (j < to.size()) pt *= to[j++];
    while (pf != pt && (i < from.size() || j < to.size())) {
      if ((pf < pt && i < from.size()) || j >= to.size())
        pf *= from[i++];
      else
        pt *= to[j++];
    }
    char c = 1;
    for (size_t k = i0; k < i; ++k) c = c && a[k];
    for (size_t k = j0; k < j; ++k) m[k] = c;
  }
  cm_fix(m, to);
  return m;
}

std::vector<char> cm_index(const std::vector<char>& a, const std::vector<Slice>& idx) {
  int specified = 0;
  for (auto& s : idx)
    if (s.kind == Slice::Kind::Index || s.kind == Slice::Kind::Range) ++specified;
  std::vector<char> m;
  size_t d = 0;
  for (auto& s : idx) {
    switch (s.kind) {
      case Slice::Kind::Index:
        ++d;
        break;
      case Slice::Kind::Range:
        m.push_back(a[d++]);
        break;
      case Slice::Kind::NewAxis:
        m.push_back(1);
        break;
      case Slice::Kind::Ellipsis:
        for (int k = 0; k < int(a.size()) - specified; ++k) m.push_back(a[d++]);
        break;
    }
  }
  while (d < a.size()) m.push_back(a[d++]);
  return m;
}

}  // namespace loom::fuzz
