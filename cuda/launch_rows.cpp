// The row kernels' choices: their knobs, threads a row and persistent chunks, min blocks an
// SM, column unrolling and staged tiles.
#include <algorithm>
#include <string>

#include "cuda/launch_geometry.h"
#include "tensor/knobs.h"

namespace loom::cuda {

// Knobs for A/B runs of row kernels on the GPU (rows of tensor/knobs.h), and why each default is
// what it is (the A/B runs behind them: bench/RESULTS.md):
//   LOOM_CUDA_ROW_TPR=n    threads per row (power of two, 1..1024) for every rows variant
//   LOOM_CUDA_ROW_RPB=n    rows per block (default 256 / tpr, at least 1; block <= 1024)
//   LOOM_CUDA_ROW_CHUNKS=n target 16-byte chunks a lane of a vector row (default 4)
//   LOOM_CUDA_ROW_REMAT=n  0: cache every value a later pass reads in f32/f64; 1: recompute
//                          casts and +,-,* from the retained storage vectors; 2: exp too; unset:
//                          2 for rows of 4-byte and wider types, else 1 (a bf16 element has half
//                          the instructions per byte to spare)
//   LOOM_CUDA_ROW_MINB=n   __launch_bounds__ min blocks an SM for persistent rows (caps
//                          registers); 0 none; unset: row_min_blocks
//   LOOM_CUDA_ROW_GRID=rows|stride  grid of (not split) row and column kernels. Unset: rows for
//                          row kernels, stride for a thread a row (column reductions, where the
//                          stride grid measured faster). rows: a block a row group, as Triton
//                          launches a persistent reduction: the hardware hands each free slot
//                          the next row, no tail of blocks with one row more; stride: at most 2
//                          waves (2 x the blocks an SM's 2048 threads hold) walking the rows in a
//                          grid-stride loop. (One even wave of resident blocks lost to rows and
//                          was removed.)
//   LOOM_CUDA_ROW_SYNC=1|2 __syncthreads a block-wide combine (tpr > 32, not split): 2
//                          (default) write, barrier, read, barrier; 1 parity-buffered slots
//                          and no barrier after the reads (Variant::sync1)
//   LOOM_CUDA_ROW_PREFETCH=0|1|2  persistent rows holding their input vectors (remat): the
//                          block's next row loads while this one reduces and stores (a block
//                          otherwise has no load in flight from its row's first reduction to
//                          its next row). Default 1 on rows of 4-byte types, 0 on narrow ones
//                          (where its registers cost more than it gains); 0: none; 1: into the
//                          same registers, each chunk right after the last pass reads it (no
//                          registers more; the loads overlap the last pass, the row outputs and
//                          the loop); 2: into a second set at the top of the row (overlaps every
//                          reduction; twice the held registers, so fewer blocks an SM under the
//                          min-blocks cap)
//   LOOM_CUDA_ROW_FASTEXP=0|1  f32 exp in row kernels as ex2.approx of x log2 e (Variant::fexp,
//                          lm_fexp: 2 SASS instructions against expf's ~9). Unset: on where every
//                          output is narrow (bf16, f16: the error is far below their rounding,
//                          and a long bf16 softmax row is bound by its instructions, not its
//                          bytes), off elsewhere. A softmax lane evaluates an exp an element in
//                          each pass that needs e (remat 2 recomputes e for the stores), so the
//                          exps are a large part of its row loop; with REMAT=2 a bf16 softmax
//                          recomputes e instead of caching it, in half the registers. Error:
//                          ex2.approx's ~2 ulp plus the rounding of x log2 e, |x| 2^-24 relative
//                          (as Triton)
//   LOOM_CUDA_ROW_PEEL=0|1|2  narrow (bf16, f16) rows whose chunks cannot all be 16-byte vectors
//                          (odd row lengths, offset views; Variant::shift, peel_rows): 0 element
//                          loads; 1 chunks on the output's (or input's) 16-byte grid, the
//                          partial first and last chunk of each row element by element, weights
//                          at another alignment element-wise (odd row lengths); 2 (default) also
//                          inputs offset from that grid by d elements on every row as two
//                          vectors a chunk, realigned in registers (an offset view)
//   LOOM_CUDA_ROW_PEEL_REMAT=1|2  narrow peeled rows with an exp (a bf16 softmax of odd length or
//                          of an offset view): 1 remat 1 like the other narrow rows; 2 (default)
//                          remat 2, its exps recomputed: half the registers (ptxas, with
//                          bench/row_regs.cpp and LOOM_ROW_REGS_OFFSET=1), so twice the blocks
//                          and rows in flight an SM, for an exp of 2 instructions (fast exp, on
//                          for narrow outputs). LOOM_CUDA_ROW_REMAT overrides both
//   LOOM_CUDA_COL_UNROLL=n column reductions (a thread a kept column, loop and split): rows a
//                          thread loads a step, unguarded whole steps first so the n strided
//                          loads issue together (order of the sum unchanged, so results are
//                          bit-identical). Unset: 8 where a thread walks at least 256 rows (its
//                          split segment or the whole column), else 1 (short walks lost with 8).
//                          Tried and removed: a thread taking 16 bytes of adjacent columns (4
//                          f32, 8 bf16) as one vector a row, with a thread a column's segments
//                          or vec times them: it lost on every column mean measured
//   LOOM_CUDA_ROW_STAGE=0|1  row groups whose input rows are strided along the reduced dim and
//                          unit-stride along the kept one (softmax / layer_norm / rms_norm over
//                          the last dim of x.t(); Variant::stage, cuda/codegen_stage.cpp): 1
//                          (default) a block copies `stage` adjacent kept rows into dynamic shared
//                          memory with coalesced loads, then runs the loop row kernel on them; 0
//                          the plain row kernels, which fetch a 32-byte sector for each 2-4 byte
//                          element. Needs the launch to pass LaunchConfig::smem (a kernel given
//                          less reads global memory as the plain loop kernel does, so results
//                          never depend on it)
//   LOOM_CUDA_ROW_STAGE_ROWS=n  tile rows (power of two) for every staged group; unset: the most
//                          of 32..64 bytes of the narrowest staged element a reduced index whose
//                          tile leaves 2 blocks an SM (at most 112 KiB), else (f32 only) 32
//                          bytes' worth at up to 160 KiB (one block an SM), else 16 bytes' worth
//                          at up to 112 KiB, then 160 KiB, else not staged
//   LOOM_CUDA_ROW_STAGE_BLOCK=n  threads of a staged block (default 1024: the copy's loads in
//                          flight are the block's threads times 8; lanes a row = n / rows)
//   LOOM_CUDA_COL_COMBINE=n  split column reductions: partials the last block's threads load
//                          at once (Variant::comb). 0: a loop over row-major partials (a warp's
//                          32 loads of a segment 32 sectors apart; nvcc already unrolls it with
//                          the loads grouped); n > 0: partials segment-major (a warp's 32
//                          adjacent: half the sectors, level-1 stores coalesced too), n loads in
//                          flight a thread by construction, added in segment order (the same
//                          sums bit for bit). Default 8 (no more registers than 0). Its gain is
//                          small; the level-2 chain of dependent batches is what COL_SLICES cuts
//   LOOM_CUDA_COL_SLICES=s column reductions (loop and split, not the persistent <= 16 rows):
//                          a block walks its columns as s slices of interleaved rows (Variant::cs;
//                          slice l: rows l, l + s, ...), combined through shared memory at the
//                          end; a block is LOOM_CUDA_COL_BLOCK threads (default 256) = block / s
//                          columns x s slices. Fewer columns a block: s times the blocks across,
//                          so the split needs s times fewer segments for its wave (at most one:
//                          floor), and each column's partials are s times fewer and combined s at
//                          a time. Default 4 (it gained on the contiguous column means, lost a
//                          little on an offset view)
//   LOOM_CUDA_COL_PAIRS=0|1 column reductions of 2-byte columns (bf16, f16; col_vector_width):
//                          1: a thread takes 2 adjacent columns as one 4-byte load a walked row
//                          (a warp 128 bytes a row, as f32, where 2-byte loads take 64: half the
//                          bytes in flight an SM at the same warps and registers), 2
//                          accumulators, each column summed in the scalar order (bit-identical);
//                          a split takes twice the segments (as many threads; each thread
//                          combines 2 columns' partials, COL_COMBINE at a time). With slices too
//                          (a block's column pairs x s slices). Default 1 (odd column counts and
//                          offset views do not qualify and keep a thread a column). (Vector
//                          columns of 16 bytes lost, see COL_UNROLL above: 8x fewer warps, or 8x
//                          the partials a thread combines; pairs keep the warps.)
//   LOOM_CUDA_COLSUM_BLOCK=n  threads a block of a row kernel with column sums (GOutput::colsum;
//                          default 1024: one block an SM at 64 registers, one partial row
//                          each, so the partials cost least)
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
    r.colsum_block = int(pow2ceil(get(Knob::CudaColsumBlock, 256, 1024)));
    r.col_slices = std::min<int>(int(pow2ceil(get(Knob::CudaColSlices, 1, 32))),
                                 r.col_block / 32);  // at least a warp of columns
    return r;
  }();
  return k;
}

int colsum_col_bytes(const Group& g) {
  int b = 0;
  for (const GOutput& o : g.outputs)
    if (o.colsum && g.nodes[o.node].space == Space::Full) b += int(itemsize(g.nodes[o.node].dtype));
  return b;
}
bool has_colsums(const Group& g) {
  return std::any_of(g.outputs.begin(), g.outputs.end(), [](const GOutput& o) { return o.colsum; });
}

// Threads per row and persistent chunks per lane for `nch` chunks of `vw` columns. Bytes in
// flight are what a row kernel lives on (a bf16 row with fewer chunks a lane took as long as an
// f32 row of twice its bytes): a vector lane takes about 4 chunks (64 bytes; at least 16
// columns), a scalar lane 8 columns; more lanes while a lane would hold over twice that or its
// held values pass the register budget: bytes at most 192, and with remat the registers a
// thread has at the block size less 24 (what the longest f32 row held at 1024 threads without
// spills, per ptxas); without remat (load vectors and cached values both live) 3/2 of them
// (more spilled). k = 0 (loop every pass) when even 1024 lanes cannot hold the row. A narrow row
// that fits only when its exps are recomputed too (a long bf16 softmax row) takes remat 2: an
// exp an element again costs less than walking the row three times.
void row_geometry(const Group& g, int64_t nch, int vw, Variant& v) {
  const RowKnobs& kn = row_knobs();
  const int64_t target = vw > 1 ? std::max<int64_t>(16, int64_t(kn.chunks) * vw) : 8;
  const int tpr0 =
      kn.tpr > 0 ? kn.tpr : int(std::clamp<int64_t>(pow2ceil(cdiv(nch * vw, target)), 1, 1024));
  // A row with column sums holds them too (registers a column), in blocks of 1024 threads
  // (LOOM_CUDA_COLSUM_BLOCK): a block's rows add theirs together before its partial row goes to
  // memory, so the fewer blocks, the fewer partial rows.
  const int csb = colsum_col_bytes(g);
  const bool sums = has_colsums(g);
  auto fit = [&](int remat) {
    const int64_t bytes = std::max(1, row_cache_bytes(g, remat, vw, false, v.novec) + csb);
    v.remat = remat, v.tpr = tpr0, v.k = 0;
    for (int tpr = tpr0; tpr <= (kn.tpr > 0 ? kn.tpr : 1024); tpr *= 2) {
      int64_t k = pow2ceil(std::max<int64_t>(1, cdiv(nch, tpr)));
      int64_t block = sums ? std::max(kn.colsum_block, tpr) : std::max(256, tpr);
      int64_t regs = 65536 / block;
      // (A row with sums keeps 16 registers beside its held words, not 24: ptxas fits the
      // norms' backward at 1024 threads so, where 24 left them looping.)
      const int64_t spare = sums ? 16 : 24;
      int64_t budget = std::min<int64_t>(192, remat > 0 ? (regs - spare) * 4 : regs * 3 / 2);
      if (k * vw <= 2 * target && k * vw * bytes <= budget) {
        v.tpr = tpr, v.k = int(k);
        return true;
      }
    }
    v.remat = 0;  // nothing held: keep the loop kernels' key
    return false;
  };
  // Peeled narrow rows with an exp (a softmax; LOOM_CUDA_ROW_PEEL_REMAT): remat 2. Their extra
  // chunk spreads a row over more lanes of fewer chunks each, and at remat 1 each lane also
  // holds its exps: twice remat 2's registers, so half the blocks and rows in flight an SM.
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
// 2048 threads allow while a thread keeps the registers its held values and its widest pass's
// own chunk arrays take, plus 16 (ptxas -v, bench/row_regs.cpp: layer_norm, rms_norm and
// softmax lanes fit that without spills, so more blocks an SM than ptxas picks uncapped; a
// layer_norm with f32 weight and bias spilled 600 bytes a thread when their arrays were left
// out). 0 (no cap) where that leaves one block.
int row_min_blocks(const Group& g, const Variant& v) {
  if (v.k == 0) return 0;  // the loop kernels spill under any cap
  int64_t held = cdiv(int64_t(v.k) * v.vw *
                          (row_cache_bytes(g, v.remat, v.vw, false, v.novec) + colsum_col_bytes(g)),
                      4);
  held += row_walk_regs(g, v);
  // Prefetch holds the next row's vectors too: 2 always; 1 on narrow rows, where ptxas hoists
  // the reloads above the current chunk's conversions (f32 rows stay within their held words
  // plus a few). Narrow prefetching rows keep 24 registers beside the held words for their
  // conversions (16 spilled).
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
    // bytes at two (not for bf16, where two blocks of 16 bytes beat one of 32); else 16 bytes at
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
  // 1024 threads two blocks need 32 registers a thread, which the staged softmax, layer_norm and
  // rms_norm take uncapped without spills (ptxas -v, bench/row_regs.cpp with
  // LOOM_ROW_REGS_TRANS=1); one more would leave a tile's SM one block.
  const int64_t by_smem = (228 * 1024) / (bytes(rt) + 1024), by_threads = 2048 / v.block();
  const int64_t mb = std::min(by_smem, by_threads);
  v.minb = mb >= 2 ? int(mb) : 0;
  v.shift = -1, v.novec = 0, v.dshift = 0, v.shifted = 0;
  v.sync1 = kn.sync1 && tpr > 32;
  return true;
}

}  // namespace loom::cuda
