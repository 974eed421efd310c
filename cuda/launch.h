#pragma once
// Launch-time decisions for a generated kernel: which variant the group's sizes and pointers
// call for, the grid, and the bytes of the parameter block. Everything here reads runtime
// values; nothing here changes the signature.
#include <cstdint>
#include <vector>

#include "cuda/codegen.h"

namespace loom::cuda {

struct LaunchConfig {
  unsigned grid_x = 1, grid_y = 1, block = 256;
  int64_t seglen = 0;  // split: columns a segment
  unsigned smem = 0;   // dynamic shared memory bytes (staged row tiles, Variant::stage)
  bool empty = false;  // nothing to do (no elements, or no rows)
};

Variant choose_variant(const Group& g, int sm_count);

// Blocks of a (not split) row or column launch over `blocks` row groups, by the grid mode
// LOOM_CUDA_ROW_GRID picks (cuda/launch_rows.cpp says what each does).
// Auto: Rows for row kernels (tpr > 1), Stride for a thread a row (column reductions).
enum class RowGrid { Auto, Stride, Rows };
int64_t row_grid(int64_t blocks, const Variant& v, int sm_count, RowGrid mode);
LaunchConfig launch_config(const Group& g, const Variant& v, int sm_count);

// Scratch of a split launch: partial and final accumulators, then per-row-block counters.
struct SplitScratch {
  size_t partial_bytes = 0, final_bytes = 0, counter_bytes = 0;
};
SplitScratch split_scratch(const Group& g, const Generated& k, const LaunchConfig& lc);

// The parameter block into `out` (resized to it; its capacity is reused launch after launch);
// `scratch` holds the device pointers for kPartials, kFinals, kCounters.
void pack_params(const Group& g, const ParamSpec& spec, const LaunchConfig& lc,
                 const uint64_t scratch[3], std::vector<char>& out);

}  // namespace loom::cuda
