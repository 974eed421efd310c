#pragma once
// Launch decisions remembered per kernel, so a loop of small launches does not pay for them
// each time. choose_variant builds an Emitter over the whole group (thousands of instructions a
// launch for a large kernel), yet for one signature (one CudaKernel) its answer, and
// launch_config's, depend only on runtime values: the iteration space, each access's strides,
// offset, storage presence and pointer alignment, and the SM count. A launch writes those into a
// key of a few words and reuses the variant and grid of an earlier launch with the same key. The
// key is never the signature alone.
//
// Every pointer rule in cuda/launch*.cpp reads an address modulo at most 16 bytes (a 16-byte
// vector, ptr_residue's 16-byte boundary, itemsize); kAlignBytes must stay >= the largest.
// LOOM_CUDA_LAUNCH_MEMO=0 decides every launch afresh, for A/B runs.
#include <cstdint>
#include <cstring>
#include <vector>

#include "cuda/launch.h"
#include "fusion/group.h"
#include "tensor/knobs.h"

namespace loom::cuda {

constexpr uint64_t kAlignBytes = 16;

inline bool launch_memo_enabled() {
  static const bool on = knob_flag(Knob::CudaLaunchMemo);
  return on;
}

// What choose_variant and launch_config read of `g` beyond its signature, into `key`.
inline void launch_key(const Group& g, int sm, std::vector<int64_t>& key) {
  key.clear();
  key.push_back(int64_t(sm) | int64_t(g.n_kept) << 32 | int64_t(g.index64) << 48 |
                int64_t(g.space.size()) << 52);
  for (int64_t s : g.space) key.push_back(s);
  auto access = [&](const Storage* st, const Strides& strides, int64_t offset, DType dt,
                    Space space) {
    const uint64_t p = st ? uint64_t(reinterpret_cast<uintptr_t>(st->data())) : 0;
    key.push_back(int64_t(st != nullptr) | int64_t(p != 0) << 1 | int64_t(space) << 2 |
                  int64_t(dt) << 8 | int64_t(p % kAlignBytes) << 16 |
                  int64_t(strides.size()) << 32);
    key.push_back(offset);
    for (int64_t s : strides) key.push_back(s);
  };
  key.push_back(int64_t(g.leaves.size()) | int64_t(g.outputs.size()) << 32);
  for (const GLeaf& l : g.leaves) access(l.st.get(), l.strides, l.offset, l.dtype, l.space);
  for (const GOutput& o : g.outputs) {
    const GNode& n = g.nodes[size_t(o.node)];
    key.push_back(o.node);
    access(o.st.get(), o.strides, o.offset, n.dtype, n.space);
  }
}

// A few keys' decisions (a loop launches a kernel at one or two shapes); the oldest goes first.
class LaunchMemo {
 public:
  struct Entry {
    std::vector<int64_t> key;
    Variant v;
    LaunchConfig lc;
  };
  const Entry* find(const std::vector<int64_t>& key) const {
    for (const Entry& e : entries_)
      if (e.key.size() == key.size() &&
          std::memcmp(e.key.data(), key.data(), key.size() * sizeof(int64_t)) == 0)
        return &e;
    return nullptr;
  }
  void put(const std::vector<int64_t>& key, const Variant& v, const LaunchConfig& lc) {
    if (entries_.size() < kMax) {
      entries_.push_back({key, v, lc});
      return;
    }
    entries_[next_] = {key, v, lc};
    next_ = (next_ + 1) % kMax;
  }
  size_t size() const { return entries_.size(); }

 private:
  static constexpr size_t kMax = 8;
  std::vector<Entry> entries_;
  size_t next_ = 0;
};

}  // namespace loom::cuda
