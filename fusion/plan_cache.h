#pragma once
// Plan cache: a flush whose live DAG has the same structure as an earlier one (ops, dtypes,
// shapes, views, which inputs are the same memory, which results are live) reuses that
// flush's groups instead of planning again, with this flush's storages and scalar values put
// in. The key is the DAG's full structural description (compared word for word on a hit, so
// a hash collision cannot run a wrong plan); sizes are part of it, unlike kernel signatures,
// because a plan holds concrete strides. What the planner's memory hand-overs depend on is
// part of the key too (saved tensors' storages, in-place updates' earlier versions, region
// writes' bases), so training steps (matmuls, in-place optimizer updates) hit it from their
// second step. LOOM_PLAN_CACHE=0 turns it off.
#include <memory>
#include <utility>
#include <vector>

#include "fusion/group.h"

namespace loom {

// One flush's groups. On a plan-cache hit they are the cache entry's own groups with this
// flush's storages and scalars put in, not a copy (copying a hundred groups was a fifth of a
// fusion-off memory hit's flush); the storages are taken out again when the FlushPlan
// goes, so the cache holds no memory between flushes. Use it within the flush that made it.
class FlushPlan {
 public:
  explicit FlushPlan(std::vector<Group> own) : own_(std::move(own)) {}
  explicit FlushPlan(std::vector<Group>* borrowed) : borrowed_(borrowed) {}
  FlushPlan(FlushPlan&& o) noexcept
      : own_(std::move(o.own_)), borrowed_(std::exchange(o.borrowed_, nullptr)) {}
  FlushPlan& operator=(FlushPlan&&) = delete;
  ~FlushPlan() { release(); }
  std::vector<Group>& groups() { return borrowed_ ? *borrowed_ : own_; }

 private:
  void release();
  std::vector<Group> own_;
  std::vector<Group>* borrowed_ = nullptr;
};

// The groups for `dag` (as plan() returns them, with signatures for `target` set), from the
// cache or planned now (and cached when the DAG allows). `use_cache` false: planned now and
// not kept (a caller that edits the groups).
FlushPlan plan_cached(const std::vector<std::shared_ptr<Storage>>& dag,
                      const std::vector<std::shared_ptr<Storage>>& roots, bool fuse,
                      DeviceKind target, bool use_cache = true);
size_t plan_cache_size();
void clear_plan_cache();

}  // namespace loom
