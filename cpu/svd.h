#pragma once
#include "fusion/group.h"

namespace loom::cpu {

// The singular values of an opaque Svdvals group's matrices (the input's last two dims, any
// strides, float32 or float64), in descending order into the contiguous output [..., min(m, n)].
// Computed in float64 and rounded once; a matrix with a NaN or an infinity gives NaNs.
void run_svdvals(const Group& g);

}  // namespace loom::cpu
