#pragma once
// Shapes and strides (in elements), broadcasting and dim normalization.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensor/small_vec.h"

namespace loom {

using Shape = SmallVec<int64_t, 6>;
using Strides = SmallVec<int64_t, 6>;

int64_t numel(const Shape& s);
Strides contiguous_strides(const Shape& s);
void contiguous_strides(const Shape& s, Strides& out);  // in place (the record path: no copy)
std::string shape_str(const Shape& s);                  // "[2, 3]"

// Broadcast two shapes (numpy rules); throws naming `op` when they do not match.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);

// Wrap a possibly negative dim into [0, rank); throws IndexError naming `op`.
int normalize_dim(const char* op, int64_t dim, int rank);
// The same for a dim of a tensor of `shape`; the error names the shape. `extra` widens the
// range for ops that address a new dim (unsqueeze, stack: rank + 1 positions).
int normalize_dim(const char* op, int64_t dim, const Shape& shape, int extra = 0);

// Checks a user-given size list: no negative sizes, no overflow of int64 numel.
void check_sizes(const char* op, const Shape& s);

bool is_contiguous(const Shape& shape, const Strides& strides);
// The one stride dims [i0, i1) of (shape, strides) walk as a single dim, size-1 dims aside (0
// when all have size 1), or nullopt where they do not collapse into one.
std::optional<int64_t> collapsed_stride(const Shape& shape, const Strides& strides, int i0, int i1);
// Strides that let `shape` (as many elements) view memory laid out as (old_shape, old_strides)
// in the same row-major order, if any: a reshape without a copy.
std::optional<Strides> view_strides(const Shape& old_shape, const Strides& old_strides,
                                    const Shape& shape);

}  // namespace loom
