#include "fusion/plan_cache.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "fusion/planner.h"
#include "tensor/backend.h"
#include "tensor/counters.h"
#include "tensor/knobs.h"

namespace loom {
namespace {

constexpr int32_t kNoStorage = INT32_MIN;  // an index leaf (Iota, Rand): no memory

// Where a group's storages come from, as codes (>= 0: dag index; < 0: -1 - the input class
// of a ready storage; kNoStorage: none): its leaves, its outputs and their init / alias
// storages, the opaque op's node (by its storage), and the same for a matmul's epilogue.
struct GroupCodes {
  std::vector<int32_t> leaves, outs, inits, aliases;
  int32_t opaque = kNoStorage;
  std::unique_ptr<GroupCodes> epilogue;
};

// A plan with its storages and scalars taken out: each group's storage codes, and each scalar
// slot the node it comes from.
struct Entry {
  std::vector<uint64_t> key;
  std::vector<Group> groups;  // storages null
  std::vector<GroupCodes> codes;
  std::vector<std::vector<ScalarSrc>> scalar_src;
};

struct Cache {
  std::unordered_map<uint64_t, Entry> map;
  size_t words = 0;  // key words held
  bool on = knob_flag(Knob::PlanCache);
  // Scratch of the key walk, kept between flushes (no allocation once warm).
  std::vector<uint64_t> key;
  std::vector<std::shared_ptr<Storage>> ready;  // input classes of ready storages
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

// Writes the DAG's structure into c.key and numbers the ready storages it touches into c.ready
// (dag storages get mark = their index, ready ones mark = -1 - class, under a fresh epoch).
// Besides ops, shapes and views, the key holds what the planner's memory decisions read: which
// storages a saved tensor keeps, region writes' bases and regions, and each in-place update's
// earlier version (none, freed, or which storage), so a plan that hands memory over is only
// reused where the same hand-overs are safe.
void describe(Cache& c, const std::vector<std::shared_ptr<Storage>>& dag,
              const std::vector<std::shared_ptr<Storage>>& roots, bool fuse, DeviceKind target) {
  auto& k = c.key;
  k.clear();
  c.ready.clear();
  c.root.assign(dag.size(), 0);
  uint64_t e = next_mark_epoch();
  for (size_t i = 0; i < dag.size(); ++i) dag[i]->mark_epoch = e, dag[i]->mark = int64_t(i);
  for (auto& r : roots)
    if (r->mark_epoch == e) c.root[size_t(r->mark)] = 1;
  // One word naming a storage: its mark (a ready one gets its class now), kept, pending.
  auto storage_word = [&](const std::shared_ptr<Storage>& sp) {
    Storage& s = *sp;
    if (s.mark_epoch != e) {  // a ready input (or pending elsewhere): its class
      s.mark_epoch = e;
      s.mark = -1 - int64_t(c.ready.size());
      c.ready.push_back(sp);
    }
    // Marks fit 32 bits (plan codes are int32).
    return uint64_t(uint32_t(int32_t(s.mark))) | uint64_t(s.pending()) << 40 |
           uint64_t(s.kept) << 44;
  };
  k.push_back(uint64_t(target) | uint64_t(fuse) << 8 | uint64_t(dag.size()) << 16);
  for (size_t i = 0; i < dag.size(); ++i) {
    const Node& n = *dag[i]->node;
    uint64_t scalar_kind = prim_class(n.op) == PrimClass::Scalar ? uint64_t(n.value.kind) : 0;
    k.push_back(uint64_t(n.op) | uint64_t(n.dtype) << 16 | uint64_t(c.root[i]) << 24 |
                uint64_t(n.in.size()) << 32 | scalar_kind << 40 | uint64_t(uint32_t(n.dim)) << 48);
    // 0: no earlier version, 1: freed, 2: alive (its storage word follows)
    std::shared_ptr<Storage> prev = n.reuse.lock();
    std::weak_ptr<Storage> none;
    uint64_t reuse = prev ? 2 : (n.reuse.owner_before(none) || none.owner_before(n.reuse)) ? 1 : 0;
    // A matmul's epilogue is the backend's to allow (a knob read at each flush).
    bool epilogue = fuse && n.op == Op::MatMul && device_caps(n.device).matmul_epilogue;
    k.push_back(uint64_t(n.shape.size()) | uint64_t(n.axes.size()) << 16 |
                uint64_t(dag[i]->kept) << 32 | uint64_t(n.base != nullptr) << 33 | reuse << 34 |
                uint64_t(epilogue) << 36);
    for (int64_t x : n.shape) k.push_back(uint64_t(x));
    for (int a : n.axes) k.push_back(uint64_t(a));
    if (prev) k.push_back(storage_word(prev));
    if (n.base) {
      k.push_back(storage_word(n.base));
      put_dims(k, n.region->shape);
      put_dims(k, n.region->strides);
      k.push_back(uint64_t(n.region->offset));
    }
    for (auto& in : n.in) {
      if (!in.st) {  // the scalar operand: its dtype and kind (a signature holds the kind)
        k.push_back(uint64_t(in.dtype) << 32 | uint64_t(1) << 43 | uint64_t(n.value.kind) << 44);
        continue;
      }
      ViewForm f = view_form(in.view, n.shape);
      k.push_back(storage_word(in.st) | uint64_t(in.dtype) << 32 | uint64_t(f) << 41);
      if (f == kGeneral) {
        put_dims(k, in.view.shape);
        put_dims(k, in.view.strides);
        k.push_back(uint64_t(in.view.offset));
      }
    }
  }
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

// Takes every storage (and the opaque node) out of a cached group, its epilogue included.
void strip(Group& g) {
  for (GLeaf& l : g.leaves) l.st.reset();
  for (GOutput& o : g.outputs) o.st.reset(), o.init.reset(), o.alias.reset();
  g.opaque.reset();
  if (g.epilogue) strip(*g.epilogue);
}

}  // namespace

void FlushPlan::release() {
  if (!borrowed_) return;
  for (Group& g : *borrowed_) strip(g);
  borrowed_ = nullptr;
  Cache& c = cache();
  c.lent = false;
  if (c.clear_when_returned) c.clear_when_returned = false, clear_plan_cache();
}

namespace {

// Puts this flush's storages into a cached group (and its epilogue) from their codes.
void fill(Group& g, const GroupCodes& gc, const std::vector<std::shared_ptr<Storage>>& dag,
          const Cache& c) {
  auto storage = [&](int32_t code) -> std::shared_ptr<Storage> {
    if (code == kNoStorage) return nullptr;
    return code >= 0 ? dag[size_t(code)] : c.ready[size_t(-1 - code)];
  };
  for (size_t i = 0; i < g.leaves.size(); ++i) g.leaves[i].st = storage(gc.leaves[i]);
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    g.outputs[i].st = storage(gc.outs[i]);
    g.outputs[i].init = storage(gc.inits[i]);
    g.outputs[i].alias = storage(gc.aliases[i]);
  }
  if (gc.opaque != kNoStorage) g.opaque = dag[size_t(gc.opaque)]->node;
  if (g.epilogue) fill(*g.epilogue, *gc.epilogue, dag, c);
}

// The codes of a planned group's storages; false when one does not come back from its code
// (the plan is then not kept). `t` is the group's copy for the cache: its storages are taken
// out, its epilogue made its own.
bool codes_of(Group& t, GroupCodes& gc, const std::vector<std::shared_ptr<Storage>>& dag,
              const Cache& c) {
  bool ok = true;
  auto code = [&](const std::shared_ptr<Storage>& st) {
    int32_t k = code_of(st.get());
    const Storage* back =
        k == kNoStorage ? nullptr
        : k >= 0        ? (size_t(k) < dag.size() ? dag[size_t(k)].get() : nullptr)
                 : (size_t(-1 - k) < c.ready.size() ? c.ready[size_t(-1 - k)].get() : nullptr);
    if (back != st.get()) ok = false;
    return k;
  };
  for (auto& l : t.leaves) gc.leaves.push_back(code(l.st));
  for (auto& o : t.outputs) {
    gc.outs.push_back(code(o.st));
    gc.inits.push_back(code(o.init));
    gc.aliases.push_back(code(o.alias));
  }
  if (t.opaque) {
    // The opaque node by the dag storage it computes.
    gc.opaque = kNoStorage;
    for (size_t i = 0; i < dag.size(); ++i)
      if (dag[i]->node == t.opaque) gc.opaque = int32_t(i);
    if (gc.opaque == kNoStorage) ok = false;
  }
  if (t.epilogue) {
    t.epilogue = std::make_shared<Group>(*t.epilogue);
    gc.epilogue = std::make_unique<GroupCodes>();
    ok = codes_of(*t.epilogue, *gc.epilogue, dag, c) && ok;
  }
  strip(t);
  return ok;
}

}  // namespace

FlushPlan plan_cached(const std::vector<std::shared_ptr<Storage>>& dag,
                      const std::vector<std::shared_ptr<Storage>>& roots, bool fuse,
                      DeviceKind target, bool use_cache) {
  Cache& c = cache();
  if (!c.on || c.lent || !use_cache) {
    auto groups = plan(dag, roots, fuse);
    for (auto& g : groups)
      if (!g.opaque) g.signature = signature(g, target);
    return FlushPlan(std::move(groups));
  }
  describe(c, dag, roots, fuse, target);
  // The groups take what they need from c.ready: the cache keeps no storage alive after.
  struct ClearReady {
    Cache& c;
    ~ClearReady() { c.ready.clear(); }
  } clear_ready{c};
  uint64_t h = hash_of(c.key);
  auto it = c.map.find(h);
  if (it != c.map.end() && it->second.key == c.key) {
    counters().plan_hits++;
    Entry& en = it->second;
    std::vector<Group>& groups = en.groups;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      Group& g = groups[gi];
      fill(g, en.codes[gi], dag, c);
      // A matmul's scalars are its epilogue's.
      std::vector<Scalar>& sc = g.epilogue ? g.epilogue->scalars : g.scalars;
      for (size_t i = 0; i < sc.size(); ++i) {
        const ScalarSrc& s = en.scalar_src[gi][i];
        sc[i] = scalar_value(*dag[size_t(s.node)]->node, s.part);
      }
    }
    c.lent = true;
    return FlushPlan(&groups);
  }
  // A miss: plan, then keep the plan with its storages replaced by codes. The planner
  // re-marks dag storages with their dag index; ready storages keep describe's class marks.
  std::vector<std::vector<ScalarSrc>> srcs;
  auto groups = plan(dag, roots, fuse, {}, &srcs);
  Entry en;
  en.key = c.key;
  bool ok = srcs.size() == groups.size();
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    Group& g = groups[gi];
    if (!g.opaque) g.signature = signature(g, target);
    if (!ok) continue;
    const Group* sg = g.epilogue ? g.epilogue.get() : &g;
    if (srcs[gi].size() != sg->scalars.size() || (g.epilogue && !g.scalars.empty())) ok = false;
    Group t = g;
    en.codes.emplace_back();
    ok = codes_of(t, en.codes.back(), dag, c) && ok;
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
