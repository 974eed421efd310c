// What a group's sizes, strides and pointers allow a kernel: vector widths of rows, columns and
// n-D pointwise loops, peeled rows, split segments.
#include "cuda/launch_geometry.h"

#include <algorithm>
#include <vector>

namespace loom::cuda {

// Split rows when the row blocks cannot fill the machine and the rows are long enough to cut:
// segments enough for about 8 blocks of 256 threads an SM (a full wave; 2 an SM left a full sum
// well short of the copy's bandwidth). Partials stay small: rows times segments is about
// rpb * 8 * SMs.
int64_t split_segments(const Group& g, const Variant& v, int sm) {
  int64_t rows = g.rows(), cols = g.cols();
  // Column pairs (vector columns, Variant::vec): segments for their own blocks (as many threads
  // as a thread a column: vec times the segments, each thread's partials vec columns' worth).
  if (v.vec > 1 && v.tpr == 1) rows /= v.vec;
  int64_t blocks = cdiv(rows, v.rpb);
  int64_t min_seg = v.tpr == 1 ? 64 * v.cs : 2048;
  if (blocks >= sm || cols < 2 * min_seg) return 1;
  if (v.cs > 1)  // column slices (blocks of any size): at most one wave of the SMs' 2048 threads
    return std::max<int64_t>(1,
                             std::min(int64_t(sm) * (2048 / v.block()) / blocks, cols / min_seg));
  return std::max<int64_t>(1, std::min(cdiv(8 * int64_t(sm), blocks), cols / min_seg));
}

namespace {

// Whether access `a` (leaves, then outputs) of a rows group with one reduced dim walks it at
// unit stride as a Full tensor (a column sum's output is stored element by element: not).
bool unit_access(const Group& g, int a) {
  const int R = int(g.space.size()), L = int(g.leaves.size());
  if (a < L && (!g.leaves[a].st || g.leaves[a].space != Space::Full)) return false;
  if (a >= L && g.outputs[a - L].colsum) return false;
  return access_strides(g, a)[R - 1] == 1;
}

// The itemsize of the narrowest unit-stride access (16: none).
size_t narrowest_unit(const Group& g) {
  size_t min_isz = 16;
  for (int a = 0; a < int(g.leaves.size() + g.outputs.size()); ++a)
    if (unit_access(g, a)) min_isz = std::min(min_isz, itemsize(access_dtype(g, a)));
  return min_isz;
}

}  // namespace

// Columns a chunk of a rows group: 16 bytes of the narrowest unit-stride access when the one
// reduced dim is walked at unit stride, cols is a multiple of the width, and every unit-stride
// pointer, offset and kept-dim stride keeps each chunk aligned; else 1 (odd rows, views).
int row_vector_width(const Group& g) {
  int R = int(g.space.size()), K = g.n_kept, L = int(g.leaves.size());
  if (R - K != 1) return 1;
  auto unit = [&](int a) { return unit_access(g, a); };
  auto dtype = [&](int a) { return access_dtype(g, a); };
  int n_acc = L + int(g.outputs.size());
  const size_t min_isz = narrowest_unit(g);
  if (min_isz == 16) return 1;  // no unit-stride access
  int W = int(std::min<size_t>(8, 16 / min_isz));
  auto fits = [&](int W) {
    if (g.cols() % W != 0) return false;
    for (int a = 0; a < n_acc; ++a) {
      if (!unit(a)) continue;
      const Strides& st = access_strides(g, a);
      for (int d = 0; d < K; ++d)
        if (st[d] % W != 0) return false;
      const Storage* mem = access_storage(g, a);
      int64_t off = access_offset(g, a);
      if (off % W != 0) return false;
      size_t align = std::min<size_t>(16, W * itemsize(dtype(a)));
      // Outputs not yet allocated count as aligned (allocations are 256-byte aligned).
      if (mem && mem->data() && uint64_t(reinterpret_cast<uintptr_t>(mem->data())) % align != 0)
        return false;
    }
    return true;
  };
  while (W > 1 && !fits(W)) W /= 2;
  return W;
}

// Kept columns a column-reduction thread takes as one load a walked row (Variant::vec,
// LOOM_CUDA_COL_PAIRS): 4 bytes of the narrowest Full leaf at unit stride along the innermost
// kept dim (2 bf16 / f16 columns; wider types 0), when every Full leaf is either that or
// constant along it (a leaf at another stride: 0), that dim's size is a multiple of the width
// (a thread's columns share the outer kept indices), and each such leaf's pointer, offset and
// other strides keep every pair aligned; else 0 (a thread a column). Row leaves and outputs (a
// value a column) are accessed element by element either way.
int col_vector_width(const Group& g) {
  int R = int(g.space.size()), K = g.n_kept, L = int(g.leaves.size());
  if (K < 1) return 0;
  size_t min_isz = 16;
  std::vector<int> vec;
  for (int a = 0; a < L; ++a) {
    const GLeaf& l = g.leaves[a];
    if (!l.st || l.space != Space::Full || l.strides[K - 1] == 0) continue;
    if (l.strides[K - 1] != 1) return 0;
    vec.push_back(a);
    min_isz = std::min(min_isz, itemsize(l.dtype));
  }
  if (vec.empty() || min_isz > 2) return 0;
  const int W = int(4 / min_isz);
  if (g.space[K - 1] % W != 0) return 0;
  for (int a : vec) {
    const GLeaf& l = g.leaves[a];
    if (reinterpret_cast<uintptr_t>(l.st->data()) % itemsize(l.dtype) != 0) return 0;
    if (kernel_offset(g, a) % W != 0) return 0;  // (its pointer: 16-byte aligned)
    for (int d = 0; d < R; ++d)
      if (d != K - 1 && l.strides[d] % W != 0) return 0;
  }
  return W;
}

// Peeled chunks (Variant::shift) for a narrow row that row_vector_width cannot take in 16-byte
// vectors (odd row lengths, views offset by an element): chunks on the 16-byte grid of the
// reference, the first narrowest unit-stride access that advances with the row (an output if
// one does: its stores stay whole vectors), each row's first and last chunk partial. Every
// unit-stride access whose pointer is 16-byte aligned and whose offset and kept-dim strides
// equal the reference's modulo the width shares its grid and is taken in vectors. At `level`
// 2 a leaf whose offset alone differs, by the same d for all such leaves, is realigned (two
// vectors a chunk, Variant::shifted). The rest are read element by element (novec) when they
// do not advance with the row (a weight or bias row, L1-resident); else no peeling (element
// stores from 16-byte chunks would write each sector in 8 pieces). Rows of 4-byte types are
// not peeled (their 4-byte loads already run near the copy's bandwidth).
bool peel_rows(const Group& g, int level, Variant& v) {
  int R = int(g.space.size()), K = g.n_kept, L = int(g.leaves.size());
  int n_acc = L + int(g.outputs.size());
  if (level <= 0 || R - K != 1 || n_acc > 64) return false;
  auto unit = [&](int a) { return unit_access(g, a); };
  auto dtype = [&](int a) { return access_dtype(g, a); };
  const size_t min_isz = narrowest_unit(g);
  if (min_isz > 2) return false;
  const int W = int(std::min<size_t>(8, 16 / min_isz));
  // (Short rows stay as they are: their partial chunks would be much of the row.)
  if (g.cols() < 8 * W || row_vector_width(g) >= W) return false;
  // The reference: a leaf that advances with the row (not a weight row read by every row).
  auto streams = [&](int a) {
    for (int d = 0; d < K; ++d)
      if (g.space[d] > 1 && access_strides(g, a)[d] != 0) return true;
    return false;
  };
  int ref = -1;
  for (int a = L; a < n_acc && ref < 0; ++a)
    if (unit(a) && itemsize(dtype(a)) == min_isz && streams(a)) ref = a;
  for (int a = 0; a < L && ref < 0; ++a)
    if (unit(a) && itemsize(dtype(a)) == min_isz && streams(a)) ref = a;
  if (ref < 0) return false;
  // Offsets from the 16-byte boundary below each pointer (ptr_residue: pack_params passes the
  // same); outputs not yet allocated count as aligned (256 bytes).
  auto off = [&](int a) { return kernel_offset(g, a); };
  auto aligned = [&](int a) {
    const Storage* m = access_storage(g, a);
    return !m || !m->data() || reinterpret_cast<uintptr_t>(m->data()) % itemsize(dtype(a)) == 0;
  };
  auto same = [&](int64_t x, int64_t y) { return ((x - y) % W + W) % W == 0; };
  if (!aligned(ref)) return false;
  const Strides& rs = access_strides(g, ref);
  uint64_t novec = 0, shifted = 0;
  int dshift = 0;
  for (int a = 0; a < n_acc; ++a) {
    if (!unit(a)) continue;
    const Strides& st = access_strides(g, a);
    bool grid = aligned(a);  // the same alignment on every row, up to its offset
    for (int d = 0; d < K; ++d)
      if (g.space[d] > 1) grid = grid && same(st[d], rs[d]);
    const int d = int(((off(a) - off(ref)) % W + W) % W);
    if (grid && d == 0) continue;
    if (grid && a < L && level >= 2 && (dshift == 0 || dshift == d)) {
      dshift = d, shifted |= uint64_t(1) << a;
      continue;
    }
    if (streams(a)) return false;
    novec |= uint64_t(1) << a;
  }
  v.shift = ref, v.novec = novec, v.vw = W, v.dshift = dshift, v.shifted = shifted;
  return true;
}

// Whether a row group reads or writes memory of a type narrower than 4 bytes (bf16, f16, int8).
bool narrow_rows(const Group& g) {
  for (const GLeaf& l : g.leaves)
    if (l.st && itemsize(l.dtype) < 4) return true;
  for (const GOutput& o : g.outputs)
    if (itemsize(o.dtype(g.nodes)) < 4) return true;
  return false;
}

// Vector width of an n-D pointwise group whose every memory access has unit or zero stride
// along the last dim (each output unit): 16 bytes of the narrowest unit-stride type, when the
// last dim is a multiple of it and every unit-stride offset, outer stride and pointer keeps the
// vectors aligned; 0 (the scalar n-D loop) otherwise.
int inner_vector_width(const Group& g) {
  int R = int(g.space.size()), L = int(g.leaves.size()), n_acc = L + int(g.outputs.size());
  if (R < 2) return 0;
  auto dtype = [&](int a) { return access_dtype(g, a); };
  size_t min_isz = 16;
  for (int a = 0; a < n_acc; ++a) {
    if (a < L && !g.leaves[a].st) continue;
    int64_t s = access_strides(g, a)[R - 1];
    if (s != 1 && (a >= L || s != 0)) return 0;
    if (s == 1) min_isz = std::min(min_isz, itemsize(dtype(a)));
  }
  int V = int(std::min<size_t>(8, 16 / min_isz));
  auto fits = [&](int V) {
    if (g.space[R - 1] % V != 0) return false;
    for (int a = 0; a < n_acc; ++a) {
      if (a < L && !g.leaves[a].st) continue;
      const Strides& st = access_strides(g, a);
      if (st[R - 1] != 1) continue;
      for (int d = 0; d < R - 1; ++d)
        if (st[d] % V != 0) return false;
      const Storage* mem = access_storage(g, a);
      int64_t off = access_offset(g, a);
      if (off % V != 0) return false;
      size_t align = std::min<size_t>(16, V * itemsize(dtype(a)));
      if (mem && mem->data() && uint64_t(reinterpret_cast<uintptr_t>(mem->data())) % align != 0)
        return false;
    }
    return true;
  };
  while (V > 1 && !fits(V)) V /= 2;
  return V > 1 ? V : 0;
}

}  // namespace loom::cuda
