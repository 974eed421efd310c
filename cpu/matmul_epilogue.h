#pragma once
#include "fusion/group.h"
#include "tensor/backend.h"

namespace loom::cpu {

// How a matmul with an epilogue runs (LOOM_CPU_EPILOGUE_SPLIT): blocks of C's rows over oneTBB,
// each a one-thread GEMM and then the epilogue on the block, or the whole GEMM on BLAS's own
// threads and then the epilogue over all of C.
enum class EpilogueSplit { Rows, After };
EpilogueSplit epilogue_split(const Node& n);

// An opaque MatMul group with an epilogue (Group::epilogue), `k` its lowered kernel.
void run_matmul_epilogue(const Group& g, Kernel& k);

}  // namespace loom::cpu
