#pragma once
// A range of a pointwise group's elements as groups of their own, so a kernel lowered for the
// group runs over part of it (a matmul's epilogue over the block of rows just computed).
#include <cstdint>
#include <functional>

#include "fusion/group.h"

namespace loom::cpu {

// Calls `f` with the elements [e0, e1) of `g`'s space, in row-major order, cut into boxes: each
// a copy of g whose space is the box and whose leaves and outputs start at the box's first
// element (their strides, and so the signature's stride classes up to sizes, unchanged). A
// range of whole inner rows is one box; a range that starts or ends inside one takes up to two
// boxes a dim. `g` has no reductions. `f` may change the copy; each call resets the offsets.
void for_each_slice(const Group& g, int64_t e0, int64_t e1, const std::function<void(Group&)>& f);

}  // namespace loom::cpu
