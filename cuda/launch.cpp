// Launch-time decisions (cuda/launch.h): the variant a group's sizes and pointers call for, and
// its grid.
#include "cuda/launch.h"

#include <algorithm>
#include <string>

#include "cuda/launch_geometry.h"
#include "cuda/prims.h"
#include "tensor/error.h"
#include "tensor/knobs.h"

namespace loom::cuda {
namespace {

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
// unrolled; one sin or cos (each of V inlined copies compiles its slow path) or several
// exp/tanh/sigmoid roll it.
constexpr int kRollBudget = 160;

// Vector-loop shape of a pointwise variant with `V` lanes reading `nvec` arrays as vectors.
void pointwise_shape(const Group& g, int nvec, Variant& v) {
  const PwPolicy& p = pw_policy();
  // A big 1-D body of 4-byte elements takes the scalar loop (auto): it compiles once with no
  // vector scaffolding (faster to compile than the rolled vector loop), and a body that big is
  // bound by arithmetic, not by 16-byte accesses. Not 2-byte elements (8 lanes): a warp's scalar
  // access is then 64 bytes, and a bf16 gelu backward (3 reads, an exp and a division an
  // element) ran at half the memory's speed on an H100.
  if (p.roll < 0 && g.space.size() == 1 && v.vec <= 4 && v.vec * body_weight(g) > kRollBudget) {
    v.vec = 1;
    return;
  }
  // The lane loop is unrolled V times: past a budget, roll it so the body compiles once.
  v.roll = p.roll >= 0 ? p.roll == 1 : v.vec * body_weight(g) > kRollBudget;
  // A rolled (big) body is compute-heavy enough to cover memory latency with one vector a
  // thread, and every unrolled vector costs compile time.
  // Otherwise about 4 vector loads in flight a thread: a thread of a multi-input kernel (an
  // Adam step reads 4 arrays) has them at 1 vector, and each unrolled vector costs compile
  // time.
  v.unroll = p.unroll > 0 ? p.unroll : v.roll || nvec > 2 ? 1 : nvec == 2 ? 2 : 4;
}

}  // namespace

int64_t row_grid(int64_t blocks, const Variant& v, int sm, RowGrid mode) {
  if (mode == RowGrid::Auto) mode = v.tpr > 1 ? RowGrid::Rows : RowGrid::Stride;
  if (mode == RowGrid::Rows) return blocks;
  return std::min(blocks, int64_t(sm) * std::max(1, 2048 / v.block()) * 2);
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
    return itemsize(o.dtype(g.nodes)) < 4;
  });
  v.fexp = (kn.fexp >= 0 ? kn.fexp == 1 : narrow_out) &&
           std::any_of(g.nodes.begin(), g.nodes.end(),
                       [](const GNode& n) { return n.op == Op::Exp && n.dtype == DType::Float32; });
  int vw0 = 1;  // the chunk width without peeling
  // Column sums (cuda/codegen_colsum.cpp) take a row kernel of whole rows: not split, staged,
  // peeled, sliced or in column pairs.
  const bool sums = has_colsums(g);
  if (layout == Layout::Columns) {
    // One kept column a thread, its scalar loads of a warp one 128-byte line a row (f32). Vector
    // columns (vec adjacent columns a thread, see LOOM_CUDA_COL_UNROLL in launch_rows.cpp) lost,
    // likely by the launch shape, not the loads: with this kernel's segments a vector-column
    // launch has vec times fewer threads, too few warps an SM to cover the walk's latency. With
    // vec times the segments instead (as many threads), a thread of the split's last block
    // combines the partials of vec columns over vec times the segments in series. Pairs of bf16
    // columns (LOOM_CUDA_COL_PAIRS) keep the warps (twice the segments) and combine them in
    // batches (LOOM_CUDA_COL_COMBINE); slices (LOOM_CUDA_COL_SLICES) cut the segments instead.
    v.tpr = 1, v.cs = kn.col_slices;
    v.rpb = (v.cs > 1 ? kn.col_block : 256) / v.cs;
    v.vec = kn.col_pairs ? col_vector_width(g) : 0;
    // Pairs within 32 registers (8 blocks an SM): uncapped, ptxas gives a bf16 mean's split just
    // over that (6 blocks at the allocation's 8-register steps), and under the cap it spills
    // only a few bytes.
    if (sums) v.cs = 1, v.rpb = 256, v.vec = 0;
    v.minb = v.vec > 1 ? 2048 / v.block() : 0;
    v.unroll = col_unroll(cdiv(cols, v.cs));
  } else if (!sums && stage_variant(g, sm, v)) {
    return v;
  } else {
    v.vw = row_vector_width(g);
    // Peeled rows take one chunk more than the row's whole ones (a partial one at each end).
    vw0 = v.vw;
    const bool peel = !sums && peel_rows(g, kn.peel, v);
    row_geometry(g, peel ? cdiv(cols + v.vw - 1, v.vw) : cols / v.vw, v.vw, v);
    v.rpb = std::max(1, kn.rpb > 0 ? std::min(kn.rpb, 1024 / v.tpr) : 256 / v.tpr);
    if (sums) v.rpb = std::max(1, kn.colsum_block / v.tpr);  // (row_geometry's budget)
    // Prefetch only where its registers leave 1024 threads an SM (not a bf16 softmax: its e
    // values and both rows' inputs leave 2 blocks of 256), or where a 4-byte row takes a whole
    // 1024-thread block with prefetch 1 (the SM's only block, so no other block has loads in
    // flight while it reduces and stores; ptxas: no more registers than without prefetch).
    // Default on for rows of 4-byte types, off for narrow ones (measured: see
    // bench/RESULTS.md): under the stride grid prefetch 1 gained on f32 softmax, layer_norm and
    // rms_norm but lost on bf16 (its registers). Under the rows grid (the default) a block runs
    // one row group and the next-row load never fires, but the prefetching kernel's shape (the
    // first row loaded above the row loop) still schedules better on odd f32 rows.
    const int pf = kn.prefetch >= 0 ? kn.prefetch : narrow_rows(g) ? 0 : 1;
    v.prefetch = v.k > 0 && v.remat > 0 && !peel ? pf : 0;  // (a row's nch is its own)
    const bool whole_sm = v.block() >= 1024 && v.prefetch == 1 && !narrow_rows(g);
    if (v.prefetch && !whole_sm && row_min_blocks(g, v) * v.block() < 1024) v.prefetch = 0;
    v.minb = kn.minb < 0 ? row_min_blocks(g, v) : v.k > 0 ? std::min(kn.minb, 2048 / v.block()) : 0;
    v.sync1 = kn.sync1 && v.tpr > 32;
  }
  if (!sums && split_segments(g, v, sm) > 1) {
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
    v.k = cols <= 16 && k * (std::max(4, row_cache_bytes(g, 0)) + colsum_col_bytes(g)) <= 192
              ? int(k)
              : 0;
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
    // Column sums: one wave of blocks walking the rows, each leaving one partial row (a row
    // group's, looping) for loom_colsum to add up.
    const int64_t grid = has_colsums(g) ? std::min(blocks, int64_t(sm) * std::max(1, v.minb))
                                        : row_grid(blocks, v, sm, row_knobs().grid);
    lc.grid_x = unsigned(std::clamp<int64_t>(grid, 1, (int64_t(1) << 31) - 1));
    if (v.stage > 0) lc.smem = unsigned(cols * stage_col_bytes(g, v.stage));
  }
  return lc;
}

}  // namespace loom::cuda
