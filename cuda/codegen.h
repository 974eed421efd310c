#pragma once
// Group -> CUDA C++ source. The source depends only on what a group's signature hashes
// (structure, dtypes, ranks, stride classes, index width) plus a Variant: the launch-time
// choices that shape the code (vector width, threads per row, persistent-row bucket, split
// rows). Sizes, strides, offsets and scalar values are kernel arguments, never baked into the
// source, so the same ops on other sizes or constants hit one cached kernel (docs/ARCHITECTURE.md,
// invariants).
//
// Kernel kinds:
//   pointwise  no reductions. Contiguous 1-D groups get a grid-stride loop over `vec`
//              elements a thread with 16-byte loads and stores (vec > 1, chosen only when every
//              pointer is aligned) or a scalar loop (vec == 1). n-D groups whose accesses all
//              have unit or zero stride along the last dim (a bias row, a column slice) take
//              `vec` elements of one row a thread (vec > 1: unit-stride accesses as vectors, the
//              index decomposed once a vector); other groups (vec == 0) decompose the linear
//              index over the space per element, broadcast dims read at stride 0. Vector
//              loops take `unroll` vectors a thread per iteration (all loads first), and with
//              `roll` keep the lane loop rolled so the element body is compiled once.
//              (codegen_pointwise.cpp says how.)
//   rows       reductions and normalizations: a group of `tpr` threads per row (1: a thread per
//              row, for column reductions whose kept dim is the contiguous one; 32: a warp; up
//              to 1024: a block). A row is walked in chunks of `vw` columns, lane l taking
//              chunks l, l + tpr, ...; a unit-stride access of a chunk is one vector (16 bytes
//              of the narrowest unit-stride type, when the row is contiguous, cols % vw == 0 and
//              every pointer and row base is aligned; narrow rows that are not, peeled: chunks
//              on a reference access's 16-byte grid, a row's partial end chunks element by
//              element, see Variant::shift), and each lane loads all its chunks of an
//              iteration before any arithmetic (memory-level parallelism). With k > 0 each
//              thread caches its k chunks of every value a later pass needs in registers, so a
//              normalization reads its input once (persistent row); with `remat` a cached
//              value that is a cast/+/-/* of unit-stride loads is recomputed each pass from the
//              loaded vectors, which stay in registers in their storage type (bf16: half the
//              registers of the f32 values; layer_norm's x - mean: none; remat 2 recomputes a
//              softmax's exp too; a leaf with one value a row, a norm's saved rstd, is read
//              once a row and never held a column); with k == 0 every pass
//              re-walks the row, 4 chunks a lane at a time (2 in 1024-thread blocks; a thread
//              a row takes `unroll`). A block walks rows in a grid-stride loop; with `prefetch`
//              a persistent block loads its next row's retained vectors while this row reduces
//              and stores; with `sync1` a block-wide combine takes one barrier, not two.
//              Staged rows (`stage`, codegen_stage.cpp): a leaf whose reduced dim is strided
//              and whose innermost kept dim is unit-stride (a softmax of x.t()) is first
//              copied, `stage` adjacent kept rows of it a block, into dynamic shared memory with
//              coalesced loads; the loop passes then read its chunks there as vectors.
//   split      few rows, long columns (full reductions, [8, 32768] softmax): each row is cut
//              into gridDim.y segments; one launch per pass writes per-segment partials and
//              the last block of each row block combines them in segment order (deterministic).
//   column sums (GOutput::colsum, codegen_colsum.cpp): a rows kernel of whole rows (not split)
//              also sums values over its rows, one partial row a block, and the module's second
//              entry loom_colsum adds the blocks' partials in order.
#include <cstdint>
#include <string>
#include <vector>

#include "fusion/group.h"

namespace loom::cuda {

struct Variant {
  bool reduce = false;
  int vec = 0;  // pointwise: 0 strided n-D, 1 contiguous scalar, >1 contiguous vector width.
                // Column reductions (tpr 1, loop and split kernels), > 1: a thread takes
                // `vec` adjacent kept columns (rows of the group) whose Full leaves sit at unit
                // stride along the innermost kept dim as one vec-wide load a walked row, vec
                // accumulators, each column summed in its scalar order (LOOM_CUDA_COL_PAIRS)
  int tpr = 1;  // rows: threads per row (a power of two, at most 1024)
  int rpb = 1;  // rows: rows per block
  int k = 0;    // rows: persistent chunks per thread (a power of two); 0 loops every pass
  int vw = 1;   // rows: columns a chunk (a lane's unit-stride accesses are vw-wide vectors)
  bool split = false;
  // Column reductions (tpr 1), split: how the last block of a column block combines the
  // segments' partials (LOOM_CUDA_COL_COMBINE). 0: partials row-major ([column][segment]), one
  // load at a time; n > 0: segment-major ([segment][column]: a warp's 32 partials adjacent, and
  // its level-1 stores too), n loads in flight a thread, accumulated in segment order as before.
  uint8_t comb = 0;
  // Column reductions (tpr 1, not persistent): slices a block walks its columns in
  // (LOOM_CUDA_COL_SLICES). A block is rpb columns x cs slices (thread t: column t % rpb, slice
  // t / rpb); slice l takes the walked rows l, l + cs, ... of its column (a block's warps read
  // adjacent rows), and the slices' accumulators combine through shared memory, slice order.
  uint8_t cs = 1;
  int unroll = 1;     // pointwise vectors (vec > 1): vectors a thread per iteration, loads first;
                      // loop and split rows of one thread a row (tpr 1, column reductions):
                      // chunks a thread loads per step (in order, so sums stay bit-identical)
  bool roll = false;  // pointwise vectors: lane loop rolled, the element body emitted once
  int remat = 0;      // rows, k > 0: recompute cheap values (2: and exp) from retained leaf vectors
  int minb = 0;       // rows: min blocks an SM for __launch_bounds__ (caps registers); 0 none
  bool sync1 = false;  // rows (not split), tpr > 32: one __syncthreads a block-wide combine, its
                       // shared slots double-buffered by row-loop parity (else two: write, read)
  int prefetch = 0;    // persistent rows with retained vectors: load the block's next row while
                       // this one reduces (1: into the same registers after their last read;
                       // 2: into a second set at the row's start)
  bool fexp = false;   // rows: f32 exp as ex2.approx of x log2 e (LOOM_CUDA_ROW_FASTEXP)
  // rows (not split), misaligned narrow rows (LOOM_CUDA_ROW_PEEL): access `shift` (a leaf)
  // fixes each row's chunk grid to 16-byte boundaries of memory: sh = its row base % vw, chunk
  // ch covers columns ch * vw - sh .. + vw - 1, so the first and last chunks of a row are
  // partial (element loads and stores, guarded by column) and the rest whole vectors. Accesses
  // in `novec` (bit = access id: rows at another alignment, a weight row) stay element accesses.
  // Leaves in `shifted` sit `dshift` elements (1 .. vw - 1) past that grid on every row (a view
  // offset by an element): a whole chunk of theirs is two aligned vectors, realigned in registers.
  int shift = -1;
  uint64_t novec = 0;
  int dshift = 0;
  // rows (not split, k 0), staged tile (LOOM_CUDA_ROW_STAGE, cuda/codegen_stage.cpp): a block's
  // `stage` (= rpb) kept rows of every leaf whose one reduced dim is strided and whose innermost
  // kept dim is unit-stride (a softmax of x.t()) are copied into dynamic shared memory first,
  // coalesced along the kept dim; the passes then read them there. 0: not staged.
  int stage = 0;
  uint64_t shifted = 0;
  int block() const { return reduce ? tpr * rpb * cs : 256; }
  // Every field takes part: two variants that differ anywhere run different code.
  bool operator==(const Variant&) const = default;
  std::string key() const;  // short tag, e.g. "pw_v4_u2", "pw_v4_u4_roll", "row_t128_r2_k4_w4_m",
                            // "split_t256_r1_k0_w4", "split_t1_r256_k0_w1_u8", "row_t256_..._s1",
                            // "row_t128_r2_k4_w8_m_h0n4" (peeled: shift 0, novec 0x4),
                            // "row_..._h1n0d1s1" (leaf 0 realigned by 1),
                            // "row_t256_r4_k0_w1_g4" (a staged tile of 4 rows),
                            // "split_t1_r64_k0_w1_u8_c8_l4" (columns: combine 8 at once, 4 slices),
                            // "split_t1_r256_k0_w1_u8_v2_c8" (2 adjacent columns a thread)
};

// A runtime value the kernel reads from its parameter block (p.v[i]).
struct ValueSlot {
  // Blocks: the grid of the launch whose parameters these are (a column sum's combine reads
  // the row kernel's partials, one a block).
  enum Kind : uint8_t { N, Rows, Cols, Size, Stride, Offset, SegLen, Blocks } kind;
  int access = -1;  // leaves 0..L-1, then outputs L..L+O-1
  int dim = -1;
  bool operator==(const ValueSlot& o) const {
    return kind == o.kind && access == o.access && dim == o.dim;
  }
};

// Pointer slots: an access id, or scratch areas of split kernels.
inline constexpr int kPartials = -1, kFinals = -2, kCounters = -3;

// How the host fills the one parameter struct, laid out as
//   struct P { const void* p[ptrs.size()]; union {double f; long long i;} s[scalars];
//              I v[values.size()]; }   (I = int, or long long with index64; empty parts omitted)
struct ParamSpec {
  std::vector<int> ptrs;
  int scalars = 0;
  std::vector<ValueSlot> values;
  bool index64 = false;
  size_t bytes() const;
  size_t values_offset() const { return 8 * (ptrs.size() + size_t(scalars)); }
};

struct Generated {
  std::string source;
  std::vector<std::string> entries;  // one kernel; split variants: one per pass
  ParamSpec params;
  int reduces = 0;          // split: accumulator slots per row in the scratch areas
  bool final_rows = false;  // split: the last pass only writes row outputs (folded into pass n-2)
  // Column sums (GOutput::colsum): the row kernel leaves partial sums in the scratch (a row of
  // colsum_cols * cols + colsum_ones elements of colsum_bytes each, per block or row group);
  // the module's second entry, "loom_colsum", adds them up in order, a thread an element of
  // that row (launched over it after the row kernel, the same parameters).
  int colsum_cols = 0, colsum_ones = 0, colsum_bytes = 0;
};

// Which kernel structure a group's signature allows.
enum class Layout : uint8_t { Pointwise, PointwiseContiguous, Rows, Columns };
Layout layout_of(const Group& g);

Generated generate(const Group& g, const Variant& v);

// A pointwise kernel's source with a second entry, "loom_kernel_seg", that runs up to `k`
// groups of its signature in one grid (Kernel::run_segments): its parameter holds each group's
// parameter block (as the single entry takes it), the prefix of blocks where each group's share
// starts (k + 1 of them, the last the grid) and how many groups there are.
std::string segments_source(const Generated& pointwise, int k);

// Register bytes a persistent row kernel spends per column it holds (values a later pass reads,
// or with `remat` the retained leaf vectors they are recomputed from), so the launcher can keep
// k * vw * bytes within the register budget. With `vw` > 0, a retained vector of vw columns
// counts whole 32-bit registers (a single bf16 column takes one).
// With `retained_only`, just the retained leaf vectors (what a prefetch 2 kernel holds twice).
// `novec`: accesses a peeled row reads element by element (Variant::novec), never retained.
// Bytes of dynamic shared memory a staged row kernel of `rows` tile rows takes a reduced index
// (all its staged leaves' tiles; times cols for the launch); 0 where no leaf is staged.
int stage_col_bytes(const Group& g, int rows);

int row_cache_bytes(const Group& g, int remat, int vw = 0, bool retained_only = false,
                    uint64_t novec = 0);
// Registers of the widest pass's own chunk arrays in a persistent row kernel of variant v: the
// unit-stride leaves a pass loads for itself alone, live beside the held values while it
// computes (a lane's k chunks of each; one chunk of a leaf every row reads alike, a norm's
// weight, which RowWalk::walk loads at its chunk).
int row_walk_regs(const Group& g, const Variant& v);

}  // namespace loom::cuda
