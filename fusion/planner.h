#pragma once
// The fuser's planner: live DAG of a flush -> groups (one kernel each), in run order.
#include <memory>
#include <vector>

#include "fusion/group.h"

namespace loom {

// Ops a kernel by default: LOOM_MAX_GROUP_NODES (tensor/knobs.h). Scalar operands and
// loads are not ops here. The default keeps a chain of 100 tiny ops in one kernel a flush: one
// long kernel compiles in about the time of the two shorter ones it replaces (bench/RESULTS.md).
int default_max_group_nodes();

// Column sums (GOutput::colsum) where the backend has them (BackendCaps::column_sums):
// LOOM_COLUMN_SUMS at start; set_column_sums() changes it for the plans made after it (a test
// that plans CPU tensors to generate another backend's kernels). The norms' backward rule reads
// it too.
bool column_sums_on();
void set_column_sums(bool on);

struct PlanLimits {
  int max_nodes = default_max_group_nodes();  // ops per kernel
  int max_leaves = 24;                        // memory inputs per kernel (kernel-parameter bytes)
};

// Where a group's scalar slot takes its value from: node `node` of the dag (its Const value or
// scalar operand, or for Rand/Randn its seed (`part` 0) and counter offset (`part` 1)).
struct ScalarSrc {
  int node;
  int part;
};

// `dag`: pending storages in topological order (producers first); `roots`: those a live
// tensor holds. Returns groups in an order that respects every dependency.
std::vector<Group> plan(const std::vector<std::shared_ptr<Storage>>& dag,
                        const std::vector<std::shared_ptr<Storage>>& roots, bool fuse,
                        const PlanLimits& limits = {},
                        std::vector<std::vector<ScalarSrc>>* scalar_srcs = nullptr);

}  // namespace loom
