#pragma once
// Plan cache: a flush whose live DAG has the same structure as an earlier one (ops, dtypes,
// shapes, views, which inputs are the same memory, which results are live) reuses that
// flush's groups instead of planning again, with this flush's storages and scalar values put
// in. The key is the DAG's full structural description (compared word for word on a hit, so
// a hash collision cannot run a wrong plan); sizes are part of it, unlike kernel signatures,
// because a plan holds concrete strides. DAGs with region writes, in-place reuse, opaque ops
// or bare allocations are planned every time (their plans depend on more than structure).
// LOOM_PLAN_CACHE=0 turns it off.
#include <memory>
#include <vector>

#include "fusion/group.h"

namespace loom {

// The groups for `dag` (as plan() returns them, with signatures for `target` set), from the
// cache or planned now (and cached when the DAG allows).
std::vector<Group> plan_cached(const std::vector<std::shared_ptr<Storage>>& dag,
                               const std::vector<std::shared_ptr<Storage>>& roots, bool fuse,
                               DeviceKind target);
size_t plan_cache_size();
void clear_plan_cache();

}  // namespace loom
