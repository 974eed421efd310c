// Runs of groups that run as one kernel (fusion/segments.h).
#include "fusion/segments.h"

#include <algorithm>
#include <atomic>
#include <unordered_set>

#include "tensor/knobs.h"

namespace loom {
namespace {

std::atomic<bool>& segments_flag() {
  static std::atomic<bool> on{knob_flag(Knob::Segments)};
  return on;
}

}  // namespace

bool segments_on() { return segments_flag().load(std::memory_order_relaxed); }
void set_segments(bool on) { segments_flag() = on; }

bool segmentable(const Group& g) {
  if (g.opaque || g.epilogue || g.space.size() != 1 || g.has_reduce()) return false;
  for (const GLeaf& l : g.leaves)
    if (!l.st || (l.strides[0] != 1 && l.strides[0] != 0)) return false;
  for (const GOutput& o : g.outputs)
    if (o.init || o.strides[0] != 1) return false;
  return !g.outputs.empty();
}

size_t segment_run(std::vector<Group>& groups, size_t first, DeviceKind target) {
  auto sig = [&](Group& g) {
    if (!g.signature) g.signature = signature(g, target);
    return g.signature;
  };
  if (!segments_on() || !segmentable(groups[first])) return 1;
  // Memory by storage: views of one buffer share it, so any two accesses of a buffer count as
  // overlapping. An in-place output writes its own storage and the one whose memory it takes.
  std::unordered_set<const Storage*> read, written;
  size_t n = 0;
  for (size_t j = first; j < groups.size() && n < kMaxSegments; ++j, ++n) {
    Group& g = groups[j];
    if (j > first && (!segmentable(g) || sig(g) != sig(groups[first]))) break;
    bool ok = true;
    for (const GLeaf& l : g.leaves) ok = ok && !written.count(l.st.get());
    for (const GOutput& o : g.outputs)
      for (const Storage* s : {o.st.get(), o.alias.get()})
        ok = ok && (!s || (!written.count(s) && !read.count(s)));
    if (!ok) break;
    for (const GLeaf& l : g.leaves) read.insert(l.st.get());
    for (const GOutput& o : g.outputs) {
      written.insert(o.st.get());
      if (o.alias) written.insert(o.alias.get());
    }
  }
  return std::max<size_t>(n, 1);
}

}  // namespace loom
