// The row kernels' choices: their knobs, threads a row and persistent chunks, min blocks an
// SM, column unrolling and staged tiles.
#include <algorithm>
#include <string>

#include "cuda/launch_geometry.h"
#include "tensor/knobs.h"

namespace loom::cuda {

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

// Rows a column-reduction thread loads a step when it walks `len` rows (LOOM_CUDA_COL_UNROLL).
int col_unroll(int64_t len) {
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

}  // namespace loom::cuda
