#pragma once
#include "fusion/group.h"

namespace loom::cpu {

// Inclusive prefix sum of an opaque CumSum group along the node's `dim`: input any dtype and
// any strides, output contiguous in the node's shape and dtype. Floats accumulate in double,
// integers and bool in int64 (wrapping), so a long row loses no precision before the final
// rounding to the result dtype.
void run_scan(const Group& g);

}  // namespace loom::cpu
