#pragma once
#include "fusion/group.h"

namespace loom::cpu {

// An opaque ScatterAdd group: out (contiguous, in the node's shape and dtype) is the input with
// each src element added at its index's position along the node's `dim`. Deterministic: every
// output element is owned by one task, which adds into it in increasing position of the index,
// each add rounded to the dtype (as torch's CPU kernel does). An index is clamped into the
// dim's range.
void run_scatter_add(const Group& g);

}  // namespace loom::cpu
