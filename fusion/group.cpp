#include "fusion/group.h"

#include <sstream>

namespace loom {

bool Group::has_reduce() const {
  for (auto& n : nodes)
    if (is_reduce(n.op)) return true;
  return false;
}

int64_t Group::rows() const {
  int64_t r = 1;
  for (int d = 0; d < n_kept; ++d) r *= space[d];
  return r;
}

int64_t Group::cols() const {
  int64_t c = 1;
  for (size_t d = n_kept; d < space.size(); ++d) c *= space[d];
  return c;
}

namespace {

// 0: broadcast, 1: unit stride, 2: contiguous for its place in the space, 3: other.
int stride_class(const Strides& st, const Shape& sp, size_t d) {
  if (st[d] == 0) return 0;
  if (st[d] == 1) return 1;
  int64_t c = 1;
  for (size_t k = d + 1; k < sp.size(); ++k) c *= sp[k];
  return st[d] == c ? 2 : 3;
}

// A word-at-a-time mix (multiply, xor-shift): signatures are computed on every flush.
struct Hasher {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
};

}  // namespace

const char* rule_name(Rule r) {
  switch (r) {
#define LOOM_X(name, text) \
  case Rule::name:         \
    return text;
    LOOM_FUSE_RULES(LOOM_X)
#undef LOOM_X
  }
  return "?";
}

const char* split_reason(Split s) {
  switch (s) {
#define LOOM_X(name, text) \
  case Split::name:        \
    return text;
    LOOM_SPLIT_REASONS(LOOM_X)
#undef LOOM_X
  }
  return "?";
}

uint64_t signature(const Group& g, DeviceKind target) {
  Hasher H;
  H.add(uint64_t(target));
  H.add(g.space.size());
  H.add(g.n_kept);
  H.add(g.passes);
  H.add(g.index64);
  for (auto& n : g.nodes) {
    H.add(uint64_t(n.op) | uint64_t(n.dtype) << 16 | uint64_t(n.space) << 24 |
          uint64_t(n.pass) << 32);
    H.add(uint64_t(uint32_t(n.a)) | uint64_t(uint32_t(n.b)) << 32);
    H.add(uint64_t(uint32_t(n.c)) | uint64_t(uint32_t(n.leaf)) << 32);
    H.add(uint64_t(uint32_t(n.scalar)));
    if (prim_class(n.op) == PrimClass::Scalar) H.add(uint64_t(g.scalars[n.scalar].kind));
  }
  auto strides = [&](const Strides& st) {
    for (size_t d = 0; d < st.size(); ++d) H.add(stride_class(st, g.space, d));
  };
  for (auto& l : g.leaves) {
    H.add(uint64_t(l.dtype) | uint64_t(l.space) << 8 | uint64_t(l.st != nullptr) << 16);
    strides(l.strides);
  }
  for (auto& o : g.outputs) {
    H.add(uint64_t(o.node) | uint64_t(uint32_t(o.overwrites)) << 32);
    H.add(uint64_t(o.colsum) | uint64_t(o.cast) << 1 | uint64_t(o.cast_to) << 8);
    strides(o.strides);
  }
  return H.h;
}

std::string Group::str() const {
  std::ostringstream os;
  if (opaque) {
    os << "opaque " << op_name(opaque->op) << " -> " << shape_str(opaque->shape)
       << (epilogue && (outputs.empty() || outputs[0].st != epilogue->leaves[c_leaf].st)
               ? " (kept in cache, not written)"
               : "")
       << "\n";
    if (epilogue) os << "  epilogue (C is leaf" << c_leaf << "): " << epilogue->str();
    return os.str();
  }
  os << "space " << shape_str(space) << " kept " << n_kept << " passes " << passes
     << (index64 ? " idx64" : " idx32") << "\n";
  for (size_t i = 0; i < nodes.size(); ++i) {
    const GNode& n = nodes[i];
    os << "  %" << i << " = " << (is_load(n) ? "load" : op_name(n.op)) << "." << dtype_name(n.dtype)
       << (n.space == Space::Row ? " row" : "") << " p" << n.pass;
    for (int a : {n.a, n.b, n.c})
      if (a >= 0) os << " %" << a;
    if (n.leaf >= 0) os << " leaf" << n.leaf << " strides" << shape_str(leaves[n.leaf].strides);
    if (prim_class(n.op) == PrimClass::Scalar) os << " $" << n.scalar;
    for (auto& o : outputs)
      if (o.node == int(i)) {
        os << (o.colsum ? "  -> column sum strides" : "  -> out strides") << shape_str(o.strides);
        if (o.cast) os << " as " << dtype_name(o.cast_to);
        if (o.overwrites >= 0) os << " over leaf" << o.overwrites;
      }
    if (n.rule != Rule::None) {
      os << "  [" << rule_name(n.rule);
      if (n.split != Split::None)
        os << ": not after " << op_name(n.split_from) << ", " << split_reason(n.split);
      os << "]";
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace loom
