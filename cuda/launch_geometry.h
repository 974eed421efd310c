#pragma once
// Internal to the launcher (cuda/launch*.cpp): a group's accesses as a kernel receives them, the
// shapes a group's sizes and alignment allow (launch_geometry.cpp) and the row kernels' choices
// under their knobs (launch_rows.cpp).
#include <cstdint>

#include "cuda/codegen.h"
#include "cuda/launch.h"

namespace loom::cuda {

inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline int64_t pow2ceil(int64_t x) {
  int64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

// Elements from the 16-byte boundary at or below `st`'s data pointer to it. A zero-copy view
// (DLPack from torch: base[:, 1:]) arrives as a pointer to its first element, so its
// misalignment is in the pointer, not in the offset; kernels get the pointer rounded down and
// the offset raised by this (the same addresses), so every alignment decision reads offsets.
inline int64_t ptr_residue(const Storage* st, DType dt) {
  const uintptr_t p = st ? reinterpret_cast<uintptr_t>(st->data()) : 0;
  const size_t isz = itemsize(dt);
  return p % isz == 0 ? int64_t((p % 16) / isz) : 0;
}

inline const Strides& access_strides(const Group& g, int a) {
  int L = int(g.leaves.size());
  return a < L ? g.leaves[a].strides : g.outputs[a - L].strides;
}
// Access `a`'s element type, storage (null for index leaves) and offset (leaves 0..L-1, then
// outputs), and its offset and pointer as a kernel receives them (ptr_residue moved over).
inline DType access_dtype(const Group& g, int a) {
  int L = int(g.leaves.size());
  return a < L ? g.leaves[a].dtype : g.outputs[a - L].dtype(g.nodes);
}
inline const Storage* access_storage(const Group& g, int a) {
  int L = int(g.leaves.size());
  return a < L ? g.leaves[a].st.get() : g.outputs[a - L].st.get();
}
inline int64_t access_offset(const Group& g, int a) {
  int L = int(g.leaves.size());
  return a < L ? g.leaves[a].offset : g.outputs[a - L].offset;
}
inline int64_t kernel_offset(const Group& g, int a) {
  return access_offset(g, a) + ptr_residue(access_storage(g, a), access_dtype(g, a));
}
inline uint64_t kernel_ptr(const Group& g, int a) {
  const Storage* st = access_storage(g, a);
  const DType dt = access_dtype(g, a);
  return uint64_t(reinterpret_cast<uintptr_t>(st->data())) -
         uint64_t(ptr_residue(st, dt) * int64_t(itemsize(dt)));
}

// ---- what a group's sizes and alignment allow (launch_geometry.cpp) ---------------------------
int64_t split_segments(const Group& g, const Variant& v, int sm);
int row_vector_width(const Group& g);
int col_vector_width(const Group& g);
bool peel_rows(const Group& g, int level, Variant& v);
bool narrow_rows(const Group& g);
int inner_vector_width(const Group& g);

// ---- row kernels (launch_rows.cpp) -------------------------------------------------------------
// The row kernels' knobs (rows of tensor/knobs.h), read once; launch_rows.cpp says what each does
// and why its default is what it is.
struct RowKnobs {
  int tpr = 0, rpb = 0, chunks = 4, minb = -1;
  int remat = -1;
  RowGrid grid = RowGrid::Auto;
  bool sync1 = false;
  int fexp = -1;                      // -1: on where every output is narrow
  int col_unroll = 0, prefetch = -1;  // col_unroll 0: by walk length; prefetch -1: 1 on rows
                                      // of 4-byte types, 0 on narrow rows
  int peel = 2;
  int peel_remat = 2;
  bool stage = true;
  int stage_rows = 0, stage_block = 1024;
  int col_combine = 8, col_slices = 4, col_block = 256, col_pairs = 1;
  int colsum_block = 1024;
};
const RowKnobs& row_knobs();
// Column sums (GOutput::colsum, cuda/codegen_colsum.cpp): register bytes a held column costs
// a persistent row for its Full sums (0: none), and whether the group has any sum.
int colsum_col_bytes(const Group& g);
bool has_colsums(const Group& g);
void row_geometry(const Group& g, int64_t nch, int vw, Variant& v);
int row_min_blocks(const Group& g, const Variant& v);
int col_unroll(int64_t len);
bool stage_variant(const Group& g, int sm, Variant& v);

}  // namespace loom::cuda
