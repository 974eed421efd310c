#include "cuda/launch.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda/prims.h"
#include "tensor/error.h"
#include "tensor/knobs.h"

namespace loom::cuda {
namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Elements from the 16-byte boundary at or below `st`'s data pointer to it. A zero-copy view
// (DLPack from torch: base[:, 1:]) arrives as a pointer to its first element, so its
// misalignment is in the pointer, not in the offset; kernels get the pointer rounded down and
// the offset raised by this (the same addresses), so every alignment decision reads offsets.
int64_t ptr_residue(const Storage* st, DType dt) {
  const uintptr_t p = st ? reinterpret_cast<uintptr_t>(st->data()) : 0;
  const size_t isz = itemsize(dt);
  return p % isz == 0 ? int64_t((p % 16) / isz) : 0;
}

// Pointwise launch policy (A/B runs on the GPU); the knobs are rows of tensor/knobs.h:
//   LOOM_CUDA_PW_UNROLL=1|2|4     vectors a thread per iteration (default: 4 / 2 / 1 for
//                                 1 / 2 / more arrays read as vectors; 1 when the lanes roll)
//   LOOM_CUDA_PW_GRID=full|stride vector loops. full (default): one block per 256 * unroll
//                                 vectors, the grid covers the tensor; stride: at most 8
//                                 blocks an SM (the 2048-thread limit) walking the tensor in a
//                                 grid-stride loop (what scalar and strided loops always do)
//   LOOM_CUDA_PW_ROLL=auto|0|1    roll the lane loop of a vector kernel: auto when the body is
//                                 big (compile time; a 1-D big body takes the scalar loop)
struct PwPolicy {
  int unroll = 0;  // 0: by the number of vector inputs
  bool full = true;
  int roll = -1;  // -1 auto
};
const PwPolicy& pw_policy() {
  static const PwPolicy p = [] {
    PwPolicy p;
    std::string u = knob_str(Knob::CudaPwUnroll), g = knob_str(Knob::CudaPwGrid);
    std::string r = knob_str(Knob::CudaPwRoll);
    if (u == "1" || u == "2" || u == "4") p.unroll = u[0] - '0';
    if (g == "stride") p.full = false;
    if (r == "0" || r == "1") p.roll = r[0] - '0';
    return p;
  }();
  return p;
}

// Compile cost of one element of a pointwise body, in units of a simple op (cuda/prims.cpp:
// math-library calls are inlined from libdevice, sin/cos/tan with their slow-path argument
// reduction).
int body_weight(const Group& g) {
  int w = 0;
  for (const GNode& n : g.nodes) w += gen::cuda_prim(n.op).weight;
  return w;
}

// Past this V * body_weight the lanes roll: the suite's chain8 (about 100 at V = 4) stays
// unrolled; one sin or cos (40: `sin(x) * 0.5 + x` compiled 4x slower than `neg(x) * 0.5 + x`
// with 5 inlined copies) or several exp/tanh/sigmoid (6) roll it.
constexpr int kRollBudget = 160;

// Vector-loop shape of a pointwise variant with `V` lanes reading `nvec` arrays as vectors.
void pointwise_shape(const Group& g, int nvec, Variant& v) {
  const PwPolicy& p = pw_policy();
  // A big 1-D body takes the scalar loop (auto): it compiles once with no vector scaffolding
  // (the suite's 18-op sin chain: 59 ms against 80 rolled, 2026-11-29), and a body that big
  // is bound by arithmetic, not by 16-byte accesses.
  if (p.roll < 0 && g.space.size() == 1 && v.vec * body_weight(g) > kRollBudget) {
    v.vec = 1;
    return;
  }
  // The lane loop is unrolled V times: past a budget, roll it so the body compiles once.
  v.roll = p.roll >= 0 ? p.roll == 1 : v.vec * body_weight(g) > kRollBudget;
  // A rolled (big) body is compute-heavy enough to cover memory latency with one vector a
  // thread, and every unrolled vector costs compile time (the suite's 18-op sin chain: 1.3x
  // NVRTC time at 4 vectors than at 1, 2026-11-29).
  // Otherwise about 4 vector loads in flight a thread: a thread of a multi-input kernel (an
  // Adam step reads 4 arrays) has them at 1 vector, and each unrolled vector costs compile
  // time (the suite's chain8: 1.2x NVRTC time at 4 vectors than at 1; Adam 1.4x at 4).
  v.unroll = p.unroll > 0 ? p.unroll : v.roll || nvec > 2 ? 1 : nvec == 2 ? 2 : 4;
}

int64_t pow2ceil(int64_t x) {
  int64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

const Strides& access_strides(const Group& g, int a) {
  int L = int(g.leaves.size());
  return a < L ? g.leaves[a].strides : g.outputs[a - L].strides;
}
// Access `a`'s element type, storage (null for index leaves) and offset (leaves 0..L-1, then
// outputs), and its offset and pointer as a kernel receives them (ptr_residue moved over).
DType access_dtype(const Group& g, int a) {
  int L = int(g.leaves.size());
  return a < L ? g.leaves[a].dtype : g.nodes[g.outputs[a - L].node].dtype;
}
const Storage* access_storage(const Group& g, int a) {
  int L = int(g.leaves.size());
  return a < L ? g.leaves[a].st.get() : g.outputs[a - L].st.get();
}
int64_t access_offset(const Group& g, int a) {
  int L = int(g.leaves.size());
  return a < L ? g.leaves[a].offset : g.outputs[a - L].offset;
}
int64_t kernel_offset(const Group& g, int a) {
  return access_offset(g, a) + ptr_residue(access_storage(g, a), access_dtype(g, a));
}
uint64_t kernel_ptr(const Group& g, int a) {
  const Storage* st = access_storage(g, a);
  const DType dt = access_dtype(g, a);
  return uint64_t(reinterpret_cast<uintptr_t>(st->data())) -
         uint64_t(ptr_residue(st, dt) * int64_t(itemsize(dt)));
}

// Split rows when the row blocks cannot fill the machine and the rows are long enough to cut:
// segments enough for about 8 blocks of 256 threads an SM (a full wave; 2 an SM measured at
// 1.97 TB/s for a 64M-element sum on the H200, 2026-11-29). Partials stay small: rows times
// segments is about rpb * 8 * SMs.
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

// Columns a chunk of a rows group: 16 bytes of the narrowest unit-stride access when the one
// reduced dim is walked at unit stride, cols is a multiple of the width, and every unit-stride
// pointer, offset and kept-dim stride keeps each chunk aligned; else 1 (odd rows, views).
int row_vector_width(const Group& g) {
  int R = int(g.space.size()), K = g.n_kept, L = int(g.leaves.size());
  if (R - K != 1) return 1;
  auto unit = [&](int a) {
    if (a < L && (!g.leaves[a].st || g.leaves[a].space != Space::Full)) return false;
    return access_strides(g, a)[R - 1] == 1;
  };
  auto dtype = [&](int a) { return access_dtype(g, a); };
  int n_acc = L + int(g.outputs.size());
  size_t min_isz = 16;
  for (int a = 0; a < n_acc; ++a)
    if (unit(a)) min_isz = std::min(min_isz, itemsize(dtype(a)));
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
// not peeled (they reach 94-100% of copy at 4-byte loads).
bool peel_rows(const Group& g, int level, Variant& v) {
  int R = int(g.space.size()), K = g.n_kept, L = int(g.leaves.size());
  int n_acc = L + int(g.outputs.size());
  if (level <= 0 || R - K != 1 || n_acc > 64) return false;
  auto unit = [&](int a) {
    if (a < L && (!g.leaves[a].st || g.leaves[a].space != Space::Full)) return false;
    return access_strides(g, a)[R - 1] == 1;
  };
  auto dtype = [&](int a) { return access_dtype(g, a); };
  size_t min_isz = 16;
  for (int a = 0; a < n_acc; ++a)
    if (unit(a)) min_isz = std::min(min_isz, itemsize(dtype(a)));
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
    if (itemsize(g.nodes[o.node].dtype) < 4) return true;
  return false;
}

// Knobs for A/B runs of row kernels on the GPU (rows of tensor/knobs.h; the defaults are the
// best guess without a GPU on the build machine), and why each default is what it is:
//   LOOM_CUDA_ROW_TPR=n    threads per row (power of two, 1..1024) for every rows variant
//   LOOM_CUDA_ROW_RPB=n    rows per block (default 256 / tpr, at least 1; block <= 1024)
//   LOOM_CUDA_ROW_CHUNKS=n target 16-byte chunks a lane of a vector row (default 4; before
//                          2026-11-29: 2 for bf16, 4 for f32)
//   LOOM_CUDA_ROW_REMAT=n  0: cache every value a later pass reads in f32/f64 (before
//                          2026-11-29); 1: recompute casts and +,-,* from the retained storage
//                          vectors; 2: exp too; unset: 2 for rows of 4-byte and wider types,
//                          else 1 (a bf16 element has half the instructions per byte to spare)
//   LOOM_CUDA_ROW_MINB=n   __launch_bounds__ min blocks an SM for persistent rows (caps
//                          registers); 0 none (before 2026-11-29); unset: row_min_blocks
//   LOOM_CUDA_ROW_GRID=rows|stride  grid of (not split) row and column kernels. Unset:
//                          rows for row kernels, stride for a thread a row (column reductions:
//                          H200 [65536, 4096] f32 column mean 93% of copy with rows, 96% with
//                          stride). rows (row kernels since 2026-11-29 19:00): a block a row group,
//                          as Triton launches a persistent reduction: the hardware hands each free
//                          slot the next row, no tail of blocks with one row more (H200, [65536,
//                          4096]: the six row cases 90-93% -> 95-97% of copy); stride: at most
//                          2 waves (2 x the blocks an SM's 2048 threads hold) walking the rows
//                          in a grid-stride loop (65536 rows: 31 or 32 each). (One even wave
//                          of resident blocks lost 6-9 points to rows, H200 2026-11-29: removed)
//   LOOM_CUDA_ROW_SYNC=1|2 __syncthreads a block-wide combine (tpr > 32, not split): 2
//                          (default) write, barrier, read, barrier; 1 parity-buffered slots
//                          and no barrier after the reads (Variant::sync1)
//   LOOM_CUDA_ROW_PREFETCH=0|1|2  persistent rows holding their input vectors (remat): the
//                          block's next row loads while this one reduces and stores (a block
//                          otherwise has no load in flight from its row's first reduction to
//                          its next row). Default 1 on rows of 4-byte types, 0 on narrow ones
//                          (H200 A/B); 0: none; 1: into the same registers, each
//                          chunk right after the last pass reads it (no registers more; the
//                          loads overlap the last pass, the row outputs and the loop); 2: into
//                          a second set at the top of the row (overlaps every reduction; twice
//                          the held registers, so fewer blocks an SM under the min-blocks cap)
//   LOOM_CUDA_ROW_FASTEXP=0|1  f32 exp in row kernels as ex2.approx of x log2 e (Variant::fexp,
//                          lm_fexp: 2 SASS instructions; expf ~9). Unset: on where every
//                          output is narrow (bf16, f16: the error is far below their rounding;
//                          H200 2026-11-29 22:25 UTC, bf16 softmax of 32768 columns 86% -> 100%
//                          of copy; 4096 columns unchanged), off elsewhere. A 4096-column
//                          f32 softmax lane evaluates 32 exps a row (remat 2 recomputes e for
//                          the stores): its kernel, mostly the row loop, 752 -> 440 SASS
//                          instructions (~38 -> ~18 an element of a lane's 16, division
//                          slow paths aside; the H200 issues ~64 an element at copy speed); bf16
//                          696 -> 496 (nvcc 13.0 + nvdisasm, sm_90, static counts). With
//                          REMAT=2 a bf16 softmax recomputes e instead of caching it: 64 -> 32
//                          registers, 4 -> 8 blocks an SM (624 instructions). Error: ex2.approx's
//                          ~2 ulp plus the rounding of x log2 e, |x| 2^-24 relative (as Triton)
//   LOOM_CUDA_ROW_PEEL=0|1|2  narrow (bf16, f16) rows whose chunks cannot all be 16-byte vectors
//                          (odd row lengths, offset views; Variant::shift, peel_rows): 0 the
//                          element loads of before (H200, 2026-11-29: 1001 bf16 columns softmax /
//                          layer_norm / rms_norm 59 / 63 / 56% of copy, an offset-1 view 66-77%);
//                          1 chunks on the output's (or input's) 16-byte grid, the partial first
//                          and last chunk of each row element by element, weights at another
//                          alignment element-wise (odd row lengths); 2 (default) also inputs
//                          offset from that grid by d elements on every row as two vectors a
//                          chunk, realigned in registers (an offset view)
//   LOOM_CUDA_ROW_PEEL_REMAT=1|2  narrow peeled rows with an exp (a bf16 softmax of odd length or
//                          of an offset view): 1 remat 1 like the other narrow rows (before
//                          2026-11-30; H200 offset-1 [65536, 4096] bf16 softmax 54-59% of copy,
//                          layer_norm 82%, rms_norm 88%); 2 (default) remat 2, its exps
//                          recomputed: ptxas sm_90 64 -> 32 registers, 4 -> 8 blocks an SM, 4 ->
//                          8 rows (32 -> 64 KB) in flight an SM at 4096 columns, 32 -> 64 rows at
//                          1001 (bench/row_regs.cpp with LOOM_ROW_REGS_OFFSET=1); an exp is
//                          2 instructions (fast exp, on for narrow outputs). LOOM_CUDA_ROW_REMAT
//                          overrides both
//   LOOM_CUDA_COL_UNROLL=n column reductions (a thread a kept column, loop and split): rows a
//                          thread loads a step, unguarded whole steps first so the n strided
//                          loads issue together (order of the sum unchanged, so results are
//                          bit-identical). Unset: 8 where a thread walks at least 256 rows (its
//                          split segment or the whole column), else 1 (H200, 2026-11-29, f32
//                          col_mean: [65536, 4096], 66 segments of 993 rows, 93-96% of copy
//                          at 1, 98% at 8; [4096, 4096], segments of 64 rows, 62% at 1, 51%
//                          at 8). Tried and removed (2026-11-30, h-cols 07d42f9): a thread
//                          taking 16 bytes of adjacent columns (4 f32, 8 bf16) as one vector a
//                          row (LOOM_CUDA_COL_VEC 1: segments as a thread a column; 2: vec times
//                          the segments) lost on every H200 col_mean (rows_sweep A/B, % of copy):
//                          level 1 f32 1000 77 -> 66, 4096 95 -> 91, bf16 1000 61 -> 35, 4096
//                          68 -> 62; level 2 f32 1000 75 -> 24, 4096 98 -> 51, bf16 4096 69 -> 17
//   LOOM_CUDA_ROW_STAGE=0|1  row groups whose input rows are strided along the reduced dim and
//                          unit-stride along the kept one (softmax / layer_norm / rms_norm over
//                          the last dim of x.t(); Variant::stage, cuda/codegen_stage.cpp): 1
//                          (default) a block copies `stage` adjacent kept rows into dynamic shared
//                          memory with coalesced loads, then runs the loop row kernel on them; 0
//                          the row kernels of before (H200, [65536, 4096] of x.t(): f32 24%,
//                          bf16 14-15% of copy: a 32-byte sector a 2-4 byte element). Needs the
//                          launch to pass LaunchConfig::smem (a kernel given less reads global
//                          memory as the plain loop kernel does, so results never depend on it)
//   LOOM_CUDA_ROW_STAGE_ROWS=n  tile rows (power of two) for every staged group; unset: the most
//                          of 32..64 bytes of the narrowest staged element a reduced index whose
//                          tile leaves 2 blocks an SM (at most 112 KiB), else (f32 only) 32
//                          bytes' worth at up to 160 KiB (one block an SM), else 16 bytes' worth
//                          at up to 112 KiB, then 160 KiB, else not staged
//   LOOM_CUDA_ROW_STAGE_BLOCK=n  threads of a staged block (default 1024: the copy's loads in
//                          flight are the block's threads times 8; lanes a row = n / rows)
//   LOOM_CUDA_COL_COMBINE=n  split column reductions: partials the last block's threads load
//                          at once (Variant::comb). 0: the loop of before over row-major
//                          partials (a warp's 32 loads of a segment 32 sectors apart; nvcc 13
//                          unrolls it 16 deep with the loads grouped, nvdisasm sm_90, so not the
//                          serial L2 round trips first suspected); n > 0: partials segment-major
//                          (a warp's 32 adjacent: half the sectors, level-1 stores coalesced
//                          too), n loads in flight a thread by construction, added in segment
//                          order (the same sums bit for bit). Default 8 (ptxas sm_90: 32
//                          registers, as 0, for the f32 and bf16 means of row_regs). Expected
//                          gain small; the level-2 chain (264 partials a column at 1000 f32
//                          columns, ~17 dependent batches) is what COL_SLICES cuts
//   LOOM_CUDA_COL_SLICES=s column reductions (loop and split, not the persistent <= 16 rows):
//                          a block walks its columns as s slices of interleaved rows (Variant::cs;
//                          slice l: rows l, l + s, ...), combined through shared memory at the
//                          end; a block is LOOM_CUDA_COL_BLOCK threads (default 256) = block / s
//                          columns x s slices. Fewer columns a block: s times the blocks across
//                          (1000 columns: 16 not 4 at s 4), so the split needs s times fewer
//                          segments for its wave (at most one: floor), and each column's
//                          partials are s times fewer and combined s at a time. Default 4
//                          (H200 2026-11-30 rows_sweep, % of copy, 1 -> 4: f32 [268435, 1000]
//                          82 -> 87, [65536, 4096] 102 -> 104, bf16 +1..+5; f32 offset-1 view
//                          87 -> 83, slice 88 -> 87)
//   LOOM_CUDA_COL_PAIRS=0|1 column reductions of 2-byte columns (bf16, f16; col_vector_width):
//                          1: a thread takes 2 adjacent columns as one 4-byte load a walked row
//                          (a warp 128 bytes a row, as f32; bf16 now loads 64 with 2-byte
//                          loads: half the bytes in flight an SM at the same warps and
//                          registers), 2 accumulators, each column summed in the scalar order
//                          (bit-identical); a split takes twice the segments (as many threads;
//                          each thread combines 2 columns' partials, COL_COMBINE at a time).
//                          With slices too (a block's column pairs x s slices). Default 1
//                          (H200 2026-11-30, with 4 slices, % of copy: bf16 [65536, 4096] 70 ->
//                          104, [268435, 1000] 64 -> 87, slice view 71 -> 90; 1001 columns and
//                          offset-1 views do not qualify and stay at 65-73).
//                          (Vector columns of 16 bytes lost, see COL_UNROLL above: 8x fewer
//                          warps, or 8x the partials a thread combines; pairs keep the warps.)
//   LOOM_CUDA_COL_BLOCK=n  threads a column block with slices (256, 512 or 1024; s 4 at 1024
//                          keeps 256 columns a block, its 4 warps of a column group on adjacent
//                          rows)
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
};
const RowKnobs& row_knobs() {
  static const RowKnobs k = [] {
    RowKnobs r;
    // A set knob clamped to [lo, hi]; an unset one its default (which may lie outside).
    auto get = [](KnobOf<KnobType::Int> k, int lo, int hi) {
      const long long v = knob_int(k);
      return knob_set(k.k) ? int(std::clamp<long long>(v, lo, hi)) : int(v);
    };
    int tpr = get(Knob::CudaRowTpr, 0, 1024);
    r.tpr = tpr > 0 ? int(pow2ceil(tpr)) : 0;
    r.rpb = get(Knob::CudaRowRpb, 0, 1024);
    r.chunks = int(pow2ceil(get(Knob::CudaRowChunks, 1, 16)));
    r.minb = get(Knob::CudaRowMinb, 0, 32);
    r.remat = get(Knob::CudaRowRemat, 0, 2);
    const std::string gs = knob_str(Knob::CudaRowGrid);
    r.grid = gs == "stride" ? RowGrid::Stride : gs == "rows" ? RowGrid::Rows : RowGrid::Auto;
    r.sync1 = get(Knob::CudaRowSync, 1, 2) == 1;
    r.prefetch = get(Knob::CudaRowPrefetch, 0, 2);
    r.fexp = get(Knob::CudaRowFastexp, 0, 1);
    const int cu = get(Knob::CudaColUnroll, 0, 16);  // 0: by walk length
    r.col_unroll = cu > 0 ? int(pow2ceil(cu)) : 0;
    r.peel = get(Knob::CudaRowPeel, 0, 2);
    r.peel_remat = get(Knob::CudaRowPeelRemat, 1, 2);
    r.stage = get(Knob::CudaRowStage, 0, 1) == 1;
    const int sr = get(Knob::CudaRowStageRows, 0, 128);
    r.stage_rows = sr > 0 ? int(pow2ceil(sr)) : 0;
    r.stage_block = int(pow2ceil(get(Knob::CudaRowStageBlock, 64, 1024)));
    r.col_combine = get(Knob::CudaColCombine, 0, 32);
    r.col_pairs = get(Knob::CudaColPairs, 0, 1);
    r.col_block = int(pow2ceil(get(Knob::CudaColBlock, 256, 1024)));
    r.col_slices = std::min<int>(int(pow2ceil(get(Knob::CudaColSlices, 1, 32))),
                                 r.col_block / 32);  // at least a warp of columns
    return r;
  }();
  return k;
}

// Threads per row and persistent chunks per lane for `nch` chunks of `vw` columns. Bytes in
// flight are what a row kernel lives on (a bf16 softmax with 2 chunks a lane ran at the f32
// time for half the bytes, 2026-11-29): a vector lane takes about 4 chunks (64 bytes; at least
// 16 columns), a scalar lane 8 columns; more lanes while a lane would hold over twice that or
// its held values pass the register budget: bytes at most 192, and with remat the registers a
// thread has at the block size less 24 (160 bytes at 1024 threads: a 32768-column f32 row held
// in 59-62 registers, no spills); without remat (load vectors and cached values both live) 3/2
// of them (96 at 1024 threads, where more spilled for a 32768 f32 rms_norm). k = 0 (loop every
// pass) when even 1024 lanes cannot hold the row. A narrow row that
// fits only when its exps are recomputed too (32768 bf16 softmax columns) takes remat 2: an exp an
// element again costs less than walking the row three times.
void row_geometry(const Group& g, int64_t nch, int vw, Variant& v) {
  const RowKnobs& kn = row_knobs();
  const int64_t target = vw > 1 ? std::max<int64_t>(16, int64_t(kn.chunks) * vw) : 8;
  const int tpr0 =
      kn.tpr > 0 ? kn.tpr : int(std::clamp<int64_t>(pow2ceil(cdiv(nch * vw, target)), 1, 1024));
  auto fit = [&](int remat) {
    const int64_t bytes = std::max(1, row_cache_bytes(g, remat, vw, false, v.novec));
    v.remat = remat, v.tpr = tpr0, v.k = 0;
    for (int tpr = tpr0; tpr <= (kn.tpr > 0 ? kn.tpr : 1024); tpr *= 2) {
      int64_t k = pow2ceil(std::max<int64_t>(1, cdiv(nch, tpr)));
      int64_t block = std::max(256, tpr), regs = 65536 / block;
      int64_t budget = std::min<int64_t>(192, remat > 0 ? (regs - 24) * 4 : regs * 3 / 2);
      if (k * vw <= 2 * target && k * vw * bytes <= budget) {
        v.tpr = tpr, v.k = int(k);
        return true;
      }
    }
    v.remat = 0;  // nothing held: keep the loop kernels' key
    return false;
  };
  // Peeled narrow rows with an exp (a softmax; LOOM_CUDA_ROW_PEEL_REMAT): remat 2. Their extra
  // chunk takes a 4096-column row to 256 lanes of about 2 chunks each, so at remat 1's 64
  // registers 4 blocks an SM hold 4 rows (32 KB) against the norms' 8; remat 2 keeps 32.
  const bool peel_exp =
      kn.peel_remat == 2 && v.shift >= 0 &&
      std::any_of(g.nodes.begin(), g.nodes.end(), [](auto& n) { return n.op == Op::Exp; });
  if (kn.remat >= 0) {
    fit(kn.remat);
  } else if (!narrow_rows(g)) {
    fit(2);
  } else if (!fit(peel_exp ? 2 : 1)) {
    fit(2);
  }
}

// Min blocks an SM that __launch_bounds__ asks of a persistent row kernel: as many as the SM's
// 2048 threads allow while a thread keeps the registers its held values take plus 16 (ptxas -v
// for sm_90, bench/row_regs.cpp: lanes holding 16 words of a layer_norm or rms_norm row fit 32
// registers without spills, so 8 blocks of 256 threads instead of 4-6; a softmax lane holding
// 32 words needs 48). 0 (no cap) where that leaves one block.
int row_min_blocks(const Group& g, const Variant& v) {
  if (v.k == 0) return 0;  // the loop kernels spill under any cap (32768 columns: 48-78 used)
  int64_t held = cdiv(int64_t(v.k) * v.vw * row_cache_bytes(g, v.remat, v.vw, false, v.novec), 4);
  // Prefetch holds the next row's vectors too: 2 always; 1 on narrow rows, where ptxas hoists
  // the reloads above the current chunk's conversions (sm_90, uncapped: a 4096 bf16 rms_norm
  // 32 -> 58 registers; f32 rows stay within 32 + 8). Narrow prefetching rows keep 24
  // registers beside the held words for their conversions (16 spilled 60-112 bytes).
  const bool narrow = narrow_rows(g);
  if (v.prefetch == 2 || (v.prefetch == 1 && narrow))
    held += cdiv(int64_t(v.k) * v.vw * row_cache_bytes(g, v.remat, v.vw, true, v.novec), 4);
  const int64_t spare = v.prefetch > 0 && narrow ? 24 : 16;
  int64_t need = (held + spare + 7) / 8 * 8, block = v.block();
  int64_t b = std::min(2048 / block, 65536 / (need * block));
  return b >= 2 ? int(b) : 0;
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

}  // namespace

int64_t row_grid(int64_t blocks, const Variant& v, int sm, RowGrid mode) {
  if (mode == RowGrid::Auto) mode = v.tpr > 1 ? RowGrid::Rows : RowGrid::Stride;
  if (mode == RowGrid::Rows) return blocks;
  return std::min(blocks, int64_t(sm) * std::max(1, 2048 / v.block()) * 2);
}

// Rows a column-reduction thread loads a step when it walks `len` rows (LOOM_CUDA_COL_UNROLL).
static int col_unroll(int64_t len) {
  const int u = row_knobs().col_unroll;
  return u > 0 ? u : len >= 256 ? 8 : 1;
}

// Shared memory a staged block may take: two blocks an SM at up to kStageTwo, one at up to
// kStageOne (within the opt-in limit of sm_80 (163 KiB) and sm_90 (227 KiB) GPUs).
constexpr int64_t kStageTwo = 112 * 1024, kStageOne = 160 * 1024;

// A staged tile variant (LOOM_CUDA_ROW_STAGE) for a row group with staged leaves, where a
// tile fits and the tiles make at least a block an SM; false otherwise.
bool stage_variant(const Group& g, int sm, Variant& v) {
  const RowKnobs& kn = row_knobs();
  const int R = int(g.space.size()), K = g.n_kept;
  if (!kn.stage || R - K != 1 || K < 1 || stage_col_bytes(g, 1) == 0) return false;
  const int64_t rows = g.rows(), cols = g.cols();
  // Rows the tile takes: 16 to 64 bytes of the narrowest staged element a reduced index.
  size_t isz = 8;
  for (const GLeaf& l : g.leaves)
    if (l.st && l.space == Space::Full && l.strides[R - 1] != 1 && l.strides[K - 1] == 1)
      isz = std::min(isz, itemsize(l.dtype));
  const int lo = int(16 / isz), hi = int(64 / isz);
  auto bytes = [&](int r) { return cols * stage_col_bytes(g, r); };
  int rt = 0;
  if (kn.stage_rows > 0) {
    rt = bytes(kn.stage_rows) <= kStageOne ? kn.stage_rows : 0;
  } else {
    // 32 bytes or more at two blocks an SM; for f32, else 32 bytes at one block, which beat 16
    // bytes at two (H200 2026-11-30, x.t() of [65536, 4096] f32: 53-55% -> 62-70% of copy) —
    // but not for bf16 (16 rows at one block 49-60% against 8 at two 61-66%); else 16 bytes at
    // two blocks, else at one.
    for (int r = hi; r >= 2 * lo && rt == 0; r /= 2)
      if (bytes(r) <= kStageTwo) rt = r;
    if (rt == 0 && isz == 4 && bytes(2 * lo) <= kStageOne) rt = 2 * lo;
    if (rt == 0 && bytes(lo) <= kStageOne) rt = lo;
  }
  if (rt == 0 || rt > kn.stage_block || cdiv(rows, rt) < sm) return false;
  // Chunks: 16-byte vectors of the outputs and unit-stride leaves where they align (the tile
  // takes any width); lanes a row: the block's threads over its rows, at most one per 4 chunks.
  v.vw = row_vector_width(g);
  const int64_t nch = cols / v.vw;
  const int tpr =
      int(std::min<int64_t>(kn.stage_block / rt, std::max<int64_t>(1, pow2ceil(cdiv(nch, 4)))));
  v.tpr = tpr, v.rpb = rt, v.stage = rt;
  v.k = 0, v.remat = 0, v.prefetch = 0, v.unroll = 1;
  // As many blocks an SM as threads and tiles allow, asked of ptxas (__launch_bounds__): at
  // 1024 threads two blocks need 32 registers a thread (sm_90 ptxas -v: the staged softmax,
  // layer_norm and rms_norm take 32 uncapped, no spills, bench/row_regs.cpp with
  // LOOM_ROW_REGS_TRANS=1); one more would leave a tile's SM one block.
  const int64_t by_smem = (228 * 1024) / (bytes(rt) + 1024), by_threads = 2048 / v.block();
  const int64_t mb = std::min(by_smem, by_threads);
  v.minb = mb >= 2 ? int(mb) : 0;
  v.shift = -1, v.novec = 0, v.dshift = 0, v.shifted = 0;
  v.sync1 = kn.sync1 && tpr > 32;
  return true;
}

Variant choose_variant(const Group& g, int sm) {
  Variant v;
  Layout layout = layout_of(g);
  if (!g.has_reduce()) {
    // Arrays a vector loop reads as vectors: unit stride along the last dim.
    auto vector_inputs = [&] {
      int c = 0, R = int(g.space.size());
      for (const GLeaf& l : g.leaves) c += l.st && l.space == Space::Full && l.strides[R - 1] == 1;
      return c;
    };
    if (layout == Layout::Pointwise) {
      v.vec = inner_vector_width(g);
      if (v.vec > 1) pointwise_shape(g, vector_inputs(), v);
      return v;
    }
    // Contiguous: as many elements a thread as fill a 16-byte access of the narrowest type,
    // when every unit-stride pointer is aligned for it.
    v.vec = 1;
    if (g.space.size() != 1) return v;
    size_t min_isz = 16;
    int n_acc = int(g.leaves.size() + g.outputs.size()), L = int(g.leaves.size());
    for (int a = 0; a < n_acc; ++a) {
      if (a < L && !g.leaves[a].st) continue;
      int64_t s = access_strides(g, a)[0];
      if (a >= L && s != 1) return v;
      if (s != 1) continue;
      min_isz = std::min(min_isz, itemsize(access_dtype(g, a)));
    }
    int V = int(std::min<size_t>(8, 16 / min_isz));
    if (V <= 1 || g.space[0] < V) return v;
    for (int a = 0; a < n_acc; ++a) {
      if (a < L && !g.leaves[a].st) continue;
      if (access_strides(g, a)[0] != 1) continue;
      const Storage* st = access_storage(g, a);
      DType dt = access_dtype(g, a);
      int64_t off = access_offset(g, a);
      size_t align = std::min<size_t>(16, V * itemsize(dt));
      uint64_t addr = uint64_t(reinterpret_cast<uintptr_t>(st->data())) + off * itemsize(dt);
      if (st->data() && addr % align != 0) return v;  // outputs not yet allocated count as aligned
    }
    v.vec = V;
    pointwise_shape(g, vector_inputs(), v);
    return v;
  }
  v.reduce = true;
  int64_t cols = g.cols();
  const RowKnobs& kn = row_knobs();
  const bool narrow_out = std::all_of(g.outputs.begin(), g.outputs.end(), [&](const GOutput& o) {
    return itemsize(g.nodes[o.node].dtype) < 4;
  });
  v.fexp = (kn.fexp >= 0 ? kn.fexp == 1 : narrow_out) &&
           std::any_of(g.nodes.begin(), g.nodes.end(),
                       [](const GNode& n) { return n.op == Op::Exp && n.dtype == DType::Float32; });
  int vw0 = 1;  // the chunk width without peeling
  if (layout == Layout::Columns) {
    // One kept column a thread, its scalar loads of a warp one 128-byte line a row (f32). Vector
    // columns (vec adjacent columns a thread, see LOOM_CUDA_COL_UNROLL above) lost on the H200,
    // likely by the launch shape, not the loads: with this kernel's segments a [2^28/1000, 1000]
    // f32 mean ran 1 x 264 blocks of 250 threads, 2 an SM (16 warps; bf16 at vec 8: 8) where
    // this one runs 4 x 264 blocks of 256, 8 an SM (64 warps): too few warps to cover the
    // walk's latency. With vec times the segments instead (as many threads), a thread of the
    // split's last block combines the partials of vec columns over vec times the segments in
    // series (1056 segments x 4 columns against 264 x 1). Pairs of bf16 columns
    // (LOOM_CUDA_COL_PAIRS) keep the warps (twice the segments) and combine them in batches
    // (LOOM_CUDA_COL_COMBINE); slices (LOOM_CUDA_COL_SLICES) cut the segments instead.
    v.tpr = 1, v.cs = kn.col_slices;
    v.rpb = (v.cs > 1 ? kn.col_block : 256) / v.cs;
    v.vec = kn.col_pairs ? col_vector_width(g) : 0;
    // Pairs within 32 registers (8 blocks an SM): ptxas sm_90 gave a bf16 mean split 34 (6
    // blocks at the allocation's 8-register steps), 32 under the cap with 4 bytes spilled.
    v.minb = v.vec > 1 ? 2048 / v.block() : 0;
    v.unroll = col_unroll(cdiv(cols, v.cs));
  } else if (stage_variant(g, sm, v)) {
    return v;
  } else {
    v.vw = row_vector_width(g);
    // Peeled rows take one chunk more than the row's whole ones (a partial one at each end).
    vw0 = v.vw;
    const bool peel = peel_rows(g, kn.peel, v);
    row_geometry(g, peel ? cdiv(cols + v.vw - 1, v.vw) : cols / v.vw, v.vw, v);
    v.rpb = std::max(1, kn.rpb > 0 ? std::min(kn.rpb, 1024 / v.tpr) : 256 / v.tpr);
    // Prefetch only where its registers leave 1024 threads an SM (not a 4096 bf16 softmax:
    // its e values and both rows' inputs leave 2 blocks of 256), or where a 4-byte row takes a
    // whole 1024-thread block with prefetch 1 (32768 f32 columns: the SM's only block, so no
    // other block has loads in flight while it reduces and stores; sm_90 ptxas: 59-64
    // registers, no spills, as without prefetch).
    // Default (H200, 2026-11-29, [65536, 4096], % of copy): under the stride grid prefetch 1
    // took f32 softmax / layer_norm / rms_norm 88/89/90 -> 91/92/93 but bf16 90/89/93 ->
    // 85/80/82 (its registers). Under the rows grid (the default) a block runs one row group
    // and the next-row load never fires, but the prefetching kernel's shape (the first row
    // loaded above the row loop) still schedules better: H200 21:58 UTC, rms_norm f32 of 1001
    // columns 81-82% of copy without it, 96% with; [65536, 4096] f32 within noise either way.
    const int pf = kn.prefetch >= 0 ? kn.prefetch : narrow_rows(g) ? 0 : 1;
    v.prefetch = v.k > 0 && v.remat > 0 && !peel ? pf : 0;  // (a row's nch is its own)
    const bool whole_sm = v.block() >= 1024 && v.prefetch == 1 && !narrow_rows(g);
    if (v.prefetch && !whole_sm && row_min_blocks(g, v) * v.block() < 1024) v.prefetch = 0;
    v.minb = kn.minb < 0 ? row_min_blocks(g, v) : v.k > 0 ? std::min(kn.minb, 2048 / v.block()) : 0;
    v.sync1 = kn.sync1 && v.tpr > 32;
  }
  if (split_segments(g, v, sm) > 1) {
    Variant s = v;
    s.split = true, s.k = 0;
    s.remat = 0, s.minb = 0, s.sync1 = false, s.prefetch = 0;
    if (layout != Layout::Columns) s.tpr = 256, s.rpb = 1;
    if (s.shift >= 0) s.shift = -1, s.novec = 0, s.vw = vw0;  // segments: not peeled
    const int64_t S = split_segments(g, s, sm);
    if (layout == Layout::Columns) {
      s.unroll = col_unroll(cdiv(cdiv(cols, std::max<int64_t>(1, S)), s.cs));
      s.comb = kn.col_combine;
      s.minb = v.minb;
    }
    if (S > 1) return s;
  }
  if (layout == Layout::Columns) {  // a thread a row: persistent for rows of up to 16 columns
    int64_t k = pow2ceil(std::max<int64_t>(1, cols));
    v.k = cols <= 16 && k * std::max(4, row_cache_bytes(g, 0)) <= 192 ? int(k) : 0;
    if (v.k > 0) v.unroll = 1, v.cs = 1, v.rpb = 256, v.vec = 0, v.minb = 0;  // persistent
  }
  return v;
}

LaunchConfig launch_config(const Group& g, const Variant& v, int sm) {
  LaunchConfig lc;
  lc.block = unsigned(v.block());
  if (!v.reduce) {
    int64_t n = numel(g.space);
    lc.empty = n == 0;
    // Threads' work items: vectors (with the 1-D masked last one) or elements.
    int64_t work = v.vec > 1 ? cdiv(n, v.vec) : n;
    int64_t per_block = int64_t(lc.block) * (v.vec > 1 ? std::max(1, v.unroll) : 1);
    // The scalar and strided loops keep the grid-stride launch of 8 blocks an SM they had.
    int64_t cap = pw_policy().full && v.vec > 1 ? (int64_t(1) << 31) - 1 : int64_t(sm) * 8;
    lc.grid_x = unsigned(std::clamp<int64_t>(cdiv(work, per_block), 1, cap));
    return lc;
  }
  int64_t rows = g.rows(), cols = g.cols();
  lc.empty = rows == 0;
  // (Column pairs: a thread takes vec rows; vec divides rows, see col_vector_width.)
  int64_t blocks = cdiv(v.vec > 1 ? rows / v.vec : rows, v.rpb);
  if (v.split) {
    LOOM_CHECK(blocks < (int64_t(1) << 31), Runtime, "cuda: too many rows for a split launch");
    int64_t S = split_segments(g, v, sm);
    lc.grid_x = unsigned(std::max<int64_t>(1, blocks));
    lc.seglen = std::max<int64_t>(1, cdiv(cols, S));
    lc.seglen = cdiv(lc.seglen, v.vw) * v.vw;  // whole chunks a segment
    lc.grid_y = unsigned(std::max<int64_t>(1, cdiv(cols, lc.seglen)));
  } else {
    lc.grid_x = unsigned(
        std::clamp<int64_t>(row_grid(blocks, v, sm, row_knobs().grid), 1, (int64_t(1) << 31) - 1));
    if (v.stage > 0) lc.smem = unsigned(cols * stage_col_bytes(g, v.stage));
  }
  return lc;
}

SplitScratch split_scratch(const Group& g, const Generated& k, const LaunchConfig& lc) {
  SplitScratch s;
  size_t rows = size_t(g.rows()), nr = size_t(std::max(1, k.reduces));
  s.partial_bytes = rows * lc.grid_y * nr * 16;
  s.final_bytes = rows * nr * 16;
  s.counter_bytes = size_t(lc.grid_x) * 4;
  return s;
}

void pack_params(const Group& g, const ParamSpec& spec, const LaunchConfig& lc,
                 const uint64_t scratch[3], std::vector<char>& b) {
  b.assign(spec.bytes(), 0);
  int L = int(g.leaves.size());
  for (size_t i = 0; i < spec.ptrs.size(); ++i) {
    int a = spec.ptrs[i];
    uint64_t p;
    if (a == kPartials)
      p = scratch[0];
    else if (a == kFinals)
      p = scratch[1];
    else if (a == kCounters)
      p = scratch[2];
    else
      p = kernel_ptr(g, a);
    std::memcpy(b.data() + 8 * i, &p, 8);
  }
  for (int s = 0; s < spec.scalars; ++s) {
    const Scalar& sc = g.scalars[s];
    char* dst = b.data() + 8 * (spec.ptrs.size() + s);
    if (sc.kind == Scalar::Kind::Float)
      std::memcpy(dst, &sc.f, 8);
    else
      std::memcpy(dst, &sc.i, 8);
  }
  for (size_t i = 0; i < spec.values.size(); ++i) {
    const ValueSlot& vs = spec.values[i];
    int64_t x = 0;
    switch (vs.kind) {
      case ValueSlot::N:
        x = numel(g.space);
        break;
      case ValueSlot::Rows:
        x = g.rows();
        break;
      case ValueSlot::Cols:
        x = g.cols();
        break;
      case ValueSlot::Size:
        x = g.space[vs.dim];
        break;
      case ValueSlot::Stride:
        x = access_strides(g, vs.access)[vs.dim];
        break;
      case ValueSlot::Offset:  // (with the pointer's residue, as kernel_ptr)
        x = kernel_offset(g, vs.access);
        break;
      case ValueSlot::SegLen:
        x = lc.seglen;
        break;
    }
    char* dst = b.data() + spec.values_offset() + i * (spec.index64 ? 8 : 4);
    if (spec.index64) {
      std::memcpy(dst, &x, 8);
    } else {
      int32_t y = int32_t(x);
      std::memcpy(dst, &y, 4);
    }
  }
}

}  // namespace loom::cuda
