#include "fusion/plan_cache.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "tensor/counters.h"
#include "fusion/planner.h"
#include "tensor/knobs.h"

namespace loom {
namespace {

constexpr int32_t kNoStorage = INT32_MIN;  // an index leaf (Iota, Rand): no memory

// A plan with its storages and scalars taken out: each leaf and output names its storage by
// a code (>= 0: dag index; < 0: -1 - the input class of a ready storage), each scalar slot
// the node it comes from.
struct Entry {
  std::vector<uint64_t> key;
  std::vector<Group> groups;  // storages null
  std::vector<std::vector<int32_t>> leaf_src, out_src;
  std::vector<std::vector<ScalarSrc>> scalar_src;
};

struct Cache {
  std::unordered_map<uint64_t, Entry> map;
  size_t words = 0;  // key words held
  bool on = knob_flag(Knob::PlanCache);
  // Scratch of the key walk, kept between flushes (no allocation once warm).
  std::vector<uint64_t> key;
  std::vector<const std::shared_ptr<Storage>*> ready;  // input classes of ready storages
  std::vector<char> root;
  // An entry's groups lent to a running flush (FlushPlan): while lent, entries are neither
  // lent again nor dropped (a flush within a flush copies and does not insert).
  bool lent = false;
  bool clear_when_returned = false;  // clear_plan_cache() while an entry was lent
};

Cache& cache() {
  static Cache c;
  return c;
}

// Distinct DAG structures kept, and their key words (a 4096-node trace's key is ~60K words):
// past either bound the cache starts over (a loop with new sizes every flush never hits).
constexpr size_t kMaxEntries = 512;
constexpr size_t kMaxWords = size_t(1) << 22;  // 32 MB of keys

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 32);
}

void put_dims(std::vector<uint64_t>& k, const SmallVec<int64_t, 6>& v) {
  k.push_back(v.size());
  for (int64_t x : v) k.push_back(uint64_t(x));
}

// How an input's view relates to its node's shape. The two common forms are fully determined
// by the node's shape (already in the key), so their view takes no key words: a 1-D scalar op
// was 16 words, 5 now (hashing and comparing the key was a fifth of a memory hit's flush).
enum ViewForm : uint64_t { kGeneral = 0, kDense = 1, kSplat = 2 };

ViewForm view_form(const View& v, const Shape& s) {
  size_t rank = s.size();
  if (v.offset != 0 || v.shape.size() != rank) return kGeneral;
  bool dense = true, splat = true;
  int64_t want = 1;
  for (size_t d = rank; d-- > 0;) {
    if (v.shape[d] != s[d]) return kGeneral;
    int64_t st = v.strides[d];
    dense &= st == want;
    splat &= st == 0;
    want *= s[d];
  }
  return dense ? kDense : splat ? kSplat : kGeneral;
}

// Writes the DAG's structure into c.key and numbers the ready inputs into c.ready (dag
// storages get mark = their index, ready inputs mark = -1 - class, under a fresh epoch).
// False when the DAG is not cacheable.
bool describe(Cache& c, const std::vector<std::shared_ptr<Storage>>& dag,
              const std::vector<std::shared_ptr<Storage>>& roots, bool fuse, DeviceKind target) {
  auto& k = c.key;
  k.clear();
  c.ready.clear();
  c.root.assign(dag.size(), 0);
  uint64_t e = next_mark_epoch();
  for (size_t i = 0; i < dag.size(); ++i) {
    Storage& st = *dag[i];
    const Node& n = *st.node;
    if (n.base || is_opaque(n.op) || prim_class(n.op) == PrimClass::Alloc) return false;
    // An in-place update's reuse (even an expired one) makes aliasing decisions: not cached.
    std::weak_ptr<Storage> none;
    if (n.reuse.owner_before(none) || none.owner_before(n.reuse)) return false;
    st.mark_epoch = e, st.mark = int64_t(i);
  }
  for (auto& r : roots)
    if (r->mark_epoch == e) c.root[size_t(r->mark)] = 1;
  k.push_back(uint64_t(target) | uint64_t(fuse) << 8 | uint64_t(dag.size()) << 16);
  for (size_t i = 0; i < dag.size(); ++i) {
    const Node& n = *dag[i]->node;
    uint64_t scalar_kind = prim_class(n.op) == PrimClass::Scalar ? uint64_t(n.value.kind) : 0;
    k.push_back(uint64_t(n.op) | uint64_t(n.dtype) << 16 | uint64_t(c.root[i]) << 24 |
                uint64_t(n.in.size()) << 32 | scalar_kind << 40 | uint64_t(uint32_t(n.dim)) << 48);
    k.push_back(uint64_t(n.shape.size()) | uint64_t(n.axes.size()) << 32);
    for (int64_t x : n.shape) k.push_back(uint64_t(x));
    for (int a : n.axes) k.push_back(uint64_t(a));
    for (auto& in : n.in) {
      if (!in.st) {  // the scalar operand: its dtype and kind (a signature holds the kind)
        k.push_back(uint64_t(in.dtype) << 32 | uint64_t(1) << 43 | uint64_t(n.value.kind) << 44);
        continue;
      }
      Storage& s = *in.st;
      if (s.mark_epoch != e) {  // a ready input (or pending elsewhere): its class
        s.mark_epoch = e;
        s.mark = -1 - int64_t(c.ready.size());
        c.ready.push_back(&in.st);
      }
      // Marks fit 32 bits (plan codes are int32): one word of separate fields.
      ViewForm f = view_form(in.view, n.shape);
      k.push_back(uint64_t(uint32_t(int32_t(s.mark))) | uint64_t(in.dtype) << 32 |
                  uint64_t(s.pending()) << 40 | uint64_t(f) << 41);
      if (f == kGeneral) {
        put_dims(k, in.view.shape);
        put_dims(k, in.view.strides);
        k.push_back(uint64_t(in.view.offset));
      }
    }
  }
  return true;
}

// Four independent multiply chains (the key is thousands of words for a long trace, and one
// dependent chain was a sixth of a memory hit's flush); a hit compares the whole key anyway.
uint64_t hash_of(const std::vector<uint64_t>& k) {
  uint64_t h[4] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull,
                   0x082efa98ec4e6c89ull};
  size_t i = 0;
  for (; i + 4 <= k.size(); i += 4)
    for (int j = 0; j < 4; ++j) h[j] = (h[j] ^ k[i + j]) * 0x9e3779b97f4a7c15ull;
  for (; i < k.size(); ++i) h[0] = (h[0] ^ k[i]) * 0x9e3779b97f4a7c15ull;
  uint64_t r = k.size();
  for (uint64_t x : h) r = mix(r, x);
  return r;
}

// The code of a storage of the plan (marks as set by describe; the planner keeps dag marks).
int32_t code_of(const Storage* s) { return s ? int32_t(s->mark) : kNoStorage; }

// Const, or a node's scalar operand: its value; Rand/Randn: seed, offset (as the builder adds
// them).
Scalar scalar_value(const Node& n, int part) {
  if (prim_class(n.op) == PrimClass::Random) return Scalar(int64_t(part == 0 ? n.seed : n.offset));
  return n.value;
}

}  // namespace

void FlushPlan::release() {
  if (!borrowed_) return;
  for (Group& g : *borrowed_) {
    for (GLeaf& l : g.leaves) l.st.reset();
    for (GOutput& o : g.outputs) o.st.reset();
  }
  borrowed_ = nullptr;
  Cache& c = cache();
  c.lent = false;
  if (c.clear_when_returned) c.clear_when_returned = false, clear_plan_cache();
}

FlushPlan plan_cached(const std::vector<std::shared_ptr<Storage>>& dag,
                      const std::vector<std::shared_ptr<Storage>>& roots, bool fuse,
                      DeviceKind target) {
  Cache& c = cache();
  if (!c.on || c.lent || !describe(c, dag, roots, fuse, target)) {
    auto groups = plan(dag, roots, fuse);
    for (auto& g : groups)
      if (!g.opaque) g.signature = signature(g, target);
    return FlushPlan(std::move(groups));
  }
  uint64_t h = hash_of(c.key);
  auto it = c.map.find(h);
  if (it != c.map.end() && it->second.key == c.key) {
    counters().plan_hits++;
    Entry& en = it->second;
    std::vector<Group>& groups = en.groups;
    auto storage = [&](int32_t code) -> std::shared_ptr<Storage> {
      if (code == kNoStorage) return nullptr;
      return code >= 0 ? dag[size_t(code)] : *c.ready[size_t(-1 - code)];
    };
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      Group& g = groups[gi];
      for (size_t i = 0; i < g.leaves.size(); ++i) g.leaves[i].st = storage(en.leaf_src[gi][i]);
      for (size_t i = 0; i < g.outputs.size(); ++i) g.outputs[i].st = storage(en.out_src[gi][i]);
      for (size_t i = 0; i < g.scalars.size(); ++i) {
        const ScalarSrc& s = en.scalar_src[gi][i];
        g.scalars[i] = scalar_value(*dag[size_t(s.node)]->node, s.part);
      }
    }
    c.lent = true;
    return FlushPlan(&groups);
  }
  // A miss: plan, then keep the plan with its storages replaced by codes. The planner
  // re-marks dag storages with their dag index; ready inputs keep describe's class marks.
  std::vector<std::vector<ScalarSrc>> srcs;
  auto groups = plan(dag, roots, fuse, {}, &srcs);
  Entry en;
  en.key = c.key;
  bool ok = srcs.size() == groups.size();
  auto code = [&](const std::shared_ptr<Storage>& st) {
    int32_t k = code_of(st.get());
    // Every storage must come back from its code, or the plan is not kept.
    const Storage* back =
        k == kNoStorage ? nullptr
        : k >= 0        ? (size_t(k) < dag.size() ? dag[size_t(k)].get() : nullptr)
                 : (size_t(-1 - k) < c.ready.size() ? c.ready[size_t(-1 - k)]->get() : nullptr);
    if (back != st.get()) ok = false;
    return k;
  };
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    Group& g = groups[gi];
    g.signature = signature(g, target);
    if (!ok) continue;
    if (srcs[gi].size() != g.scalars.size()) ok = false;
    Group t = g;
    en.leaf_src.emplace_back();
    en.out_src.emplace_back();
    for (auto& l : t.leaves) en.leaf_src.back().push_back(code(l.st)), l.st.reset();
    for (auto& o : t.outputs) {
      en.out_src.back().push_back(code(o.st));
      if (o.init || o.alias) ok = false;
      o.st.reset();
    }
    en.groups.push_back(std::move(t));
  }
  if (!ok) return FlushPlan(std::move(groups));
  en.scalar_src = std::move(srcs);
  if (c.map.size() >= kMaxEntries || c.words + c.key.size() > kMaxWords) c.map.clear(), c.words = 0;
  c.words += c.key.size();
  auto [slot, fresh] = c.map.try_emplace(h);
  if (!fresh) c.words -= slot->second.key.size();  // a collision: the newer plan replaces it
  slot->second = std::move(en);
  return FlushPlan(std::move(groups));
}

size_t plan_cache_size() { return cache().map.size(); }
void clear_plan_cache() {
  Cache& c = cache();
  if (c.lent) {  // a flush is running the lent entry's groups: clear when it returns them
    c.clear_when_returned = true;
    return;
  }
  c.map.clear();
  c.words = 0;
}

}  // namespace loom
