#pragma once
#include "fusion/group.h"

namespace loom::cpu {

// Batched matmul of an opaque MatMul group: inputs [..., M, K] and [..., K, N] (batch dims
// already broadcast), output contiguous [..., M, N].
void run_matmul(const Group& g);
// The same for matmul node `n`, writing its result (n.dtype, contiguous) at `out`.
void run_matmul_into(const Node& n, void* out);

}  // namespace loom::cpu
