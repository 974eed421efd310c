#pragma once
// Horizontal fusion at run time: consecutive groups of one signature that touch disjoint memory
// run as one kernel (Kernel::run_segments), each group a segment. An optimizer's step updates
// each parameter with the same program over its own memory, one group a parameter; together
// they are one kernel a dtype, where the planner's vertical fusion cannot join them (their
// iteration spaces differ).
#include <cstddef>
#include <vector>

#include "fusion/group.h"

namespace loom {

// Whether runs of segments run as one kernel (LOOM_SEGMENTS, default on); set_segments changes
// it for the process (the oracle of tests: the same groups one kernel each).
bool segments_on();
void set_segments(bool on);

// Whether `g` may be a segment: pointwise over one (collapsed) dim, every memory leaf read element
// for element or as one value, every output written element for element, no region write, no
// index leaf. (What a kernel of segments needs on every backend: a segment is its own pointers,
// length and scalars under one program.)
bool segmentable(const Group& g);

// How many groups from `first` on form one run of segments (1: none): consecutive, segmentable,
// of `first`'s signature (computed where unset), none writing memory another of them reads or
// writes, at most kMaxSegments.
inline constexpr size_t kMaxSegments = 1024;
size_t segment_run(std::vector<Group>& groups, size_t first, DeviceKind target);

}  // namespace loom
