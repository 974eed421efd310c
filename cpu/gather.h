#pragma once
#include "fusion/group.h"

namespace loom::cpu {

// An opaque Gather group: out (contiguous, in the index's shape) takes the input's element at
// the index's position along the node's `dim`. Elements are copied as bytes (the result has the
// input's dtype); an index is clamped into the dim's range, and an input with no elements along
// the dim gives zeros (every index is then out of range, which the op layer reports).
void run_gather(const Group& g);

}  // namespace loom::cpu
