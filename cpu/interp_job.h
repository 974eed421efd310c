#pragma once
// The interpreter's parts (cpu/interp.h runs them): the job (a program over one group), the
// per-thread and per-row state its passes share and where a node's values are read and
// written; then the functions of each file: cpu/interp_tile.cpp the memory of a tile (loads,
// stores, prefetch), cpu/interp_eval.cpp the evaluation of one node, cpu/interp_rows.cpp the
// passes over a block of rows or a long row, cpu/interp.cpp the spread of those over threads.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cpu/prims.h"
#include "cpu/program.h"
#include "tensor/knobs.h"
#include "tensor/storage.h"

namespace loom::cpu::interp {

constexpr int64_t kChunk = 2048;       // elements a chunk of a long row (L1-sized registers)
constexpr int64_t kRowBlock = 4096;    // short rows are packed into tiles of about this size,
constexpr int64_t kTileBytes = 32768;  // or fewer, so that the memory a tile touches fits in L1
// ... unless the group has at most kSmallGroup elements (its inputs are cache-resident: a
// training step's [2048, 128] activations): then each instruction's call costs more than L1
// misses do, and tiles are 8x that, L2-resident (figures: bench/RESULTS.md).
constexpr int64_t kSmallGroup = int64_t(1) << 20;
constexpr int64_t kSmallRowBlock = 8 * kRowBlock;
constexpr int64_t kSmallTileBytes = 8 * kTileBytes;
constexpr int64_t kTransRows = 16;            // rows of a tile that reads a transposed view
constexpr int64_t kTransTileBytes = 1 << 20;  // the memory such a tile touches, at the most
// An op of a tile of rows at least this long with a per-row operand runs one call a row with
// that operand a scalar; shorter rows spread the values over the tile first (fewer calls).
constexpr int64_t kRowCall = 256;
constexpr int64_t kWholeRow = 16384;  // rows up to this long stay in registers: one read
// So do longer ones, where there are rows enough to spread (kRowsSpread) and the tile (cols x
// Program::tile_bytes) fits in this many bytes, L2-resident: each pass re-reading the row in
// chunks cost 1.2x (figures: bench/RESULTS.md). Fewer rows split each row instead.
constexpr int64_t kWholeRowBytes = int64_t(1) << 20;
constexpr int64_t kRowsSpread = 8;
constexpr int64_t kSegment = 32;  // chunks per parallel task in a long row (fixed: deterministic)
// A pass of few steps runs a long row in chunks of kWideChunk: its registers (kWideSteps of
// them at the most, 128 KiB each in f32) stay in L2, and the fixed cost of a chunk (the step
// loop, the fold's lane tree) is spread over 16x the elements; a pass of many steps keeps
// kChunk, L1-resident, as its registers are reread by every step (figures: bench/RESULTS.md).
constexpr int64_t kWideChunk = 32768;
constexpr int64_t kConvChunk = 4096;  // ... unless a load converts (interp_rows.cpp chunk_of)
constexpr int kWideSteps = 4;
// The column layout (cpu/interp_cols.cpp); every split depends on the shape alone. A tile is
// a block of rows (the elements of one read of a column: long, so the reads stream) by a few
// columns; its fold walks 32 rows at a time down all its columns, each column a stream the
// prefetchers follow, so a wide block gets few columns (figures: bench/RESULTS.md).
constexpr int64_t kColWidth = 16384;     // rows of a block at the most
constexpr int64_t kColTile = 32768;      // elements of a tile, at least 4 columns
constexpr int64_t kColStreams = 32;      // columns of a tile at the most, where blocks are wide
constexpr int64_t kColMinInner = 4;      // an innermost kept dim shorter than this: row layout
constexpr int64_t kColTasks = 16;        // fewer blocks than this: their columns split too
constexpr int64_t kColSplitMin = 65536;  // elements of work below which nothing splits
constexpr int64_t kColSegMin = 256;      // columns of a segment at the fewest

// 8-byte slots, so a register can hold any compute type.
using Reg = std::vector<uint64_t>;

struct Operand {
  const void* p;
  int s;  // 1: a register, 0: one value broadcast
};

// One program over one group: what every pass reads.
struct Job {
  const Program& p;
  const Group& g;
  int rank, nk;  // dims of the iteration space; the first nk are the kept (row) dims
  int64_t rows, cols;
  // The column layout (cpu/interp_cols.cpp): a tile's nr rows are consecutive along the
  // innermost kept dim and its element (row i, column j) sits at j * nr + i, so the values of
  // one column of the tile are one run of memory where the kept dim is the contiguous one.
  // Otherwise element (i, j) sits at i * nc + j.
  bool col_layout = false;
  // Column sums (GOutput::colsum): per output its slot among them (else -1), and their count.
  // A task folds its rows into RowState::sums, [nsums][cols] partial sums of its own.
  SmallVec<int, 8> sum_slot;  // (inline: every run of every group builds a Job)
  int nsums = 0;
  int64_t sum_stride = 1;  // doubles a column sum takes: cols (at least 1: a row value's sum)

  Job(const Program& prog, const Group& group, bool cols_first = false)
      : p(prog),
        g(group),
        rank(int(group.space.size())),
        nk(group.n_kept),
        rows(group.rows()),
        cols(group.cols()),
        col_layout(cols_first) {
    sum_stride = std::max<int64_t>(cols, 1);
    sum_slot.assign(group.outputs.size(), -1);
    for (size_t k = 0; k < group.outputs.size(); ++k)
      if (group.outputs[k].colsum) sum_slot[k] = nsums++;
  }

  // Whether the tile of rows [r0, r0 + nr) x columns [c0, c0 + nc) is one unit-stride run
  // under strides st (row layout): one row's run, or whole rows that follow each other in
  // memory (every kept dim of more than one element laid out row-major behind the row).
  bool one_run(const Strides& st, int64_t nr, int64_t c0, int64_t nc) const {
    if (rank == nk || st[rank - 1] != 1) return false;
    // Several reduced dims (another tensor's view kept them apart): one row's run where they
    // are laid out row-major.
    if (rank - nk > 1) return nr == 1 && row_major(st, nk, rank, 1);
    if (nr == 1) return true;
    return c0 == 0 && nc == cols && row_major(st, 0, nk, cols);
  }

  // Whether consecutive rows sit at consecutive elements under strides st (a row output laid
  // out row-major over the kept dims).
  bool rows_follow(const Strides& st) const { return row_major(st, 0, nk, 1); }

  // Whether strides st lay the space's dims [d0, d1) out row-major, the innermost of them
  // (of more than one element) `step` elements apart.
  bool row_major(const Strides& st, int d0, int d1, int64_t step) const {
    for (int d = d1 - 1; d >= d0; --d) {
      if (g.space[d] == 1) continue;
      if (st[d] != step) return false;
      step *= g.space[d];
    }
    return true;
  }

  // Whether the rows [r0, r0 + nr) under strides st are a transposed view's: one reduced dim
  // not of unit stride, and the rows consecutive elements of the innermost kept dim (which
  // has unit stride), so a column of them is one run of memory.
  bool transposed(const Strides& st, int64_t r0, int64_t nr) const {
    if (rank - nk != 1 || nk < 1 || nr < 2 || st[rank - 1] == 1 || st[nk - 1] != 1) return false;
    const int64_t inner = g.space[nk - 1];
    return r0 % inner + nr <= inner;
  }

  // The element offsets of rows r0, r0 + 1, ... under strides st, from `off`, one after the
  // other without row_base's division per kept dim: next() moves to the following row.
  struct Rows {
    const Job& job;
    const Strides& st;
    int64_t off;
    SmallVec<int64_t, 6> idx;
    Rows(const Job& j, const Strides& s, int64_t off0, int64_t r0)
        : job(j), st(s), off(off0), idx(size_t(j.nk)) {
      for (int d = job.nk - 1; d >= 0; --d) {
        int64_t sz = job.g.space[d];
        idx[d] = r0 % sz;
        off += idx[d] * st[d];
        r0 /= sz;
      }
    }
    void next() {
      for (int d = job.nk - 1; d >= 0; --d) {
        off += st[d];
        if (++idx[d] < job.g.space[d] || d == 0) return;
        off -= st[d] * job.g.space[d];
        idx[d] = 0;
      }
    }
  };

  // The element offset of row `row` (over the kept dims) under strides st, from `off`.
  int64_t row_base(const Strides& st, int64_t off, int64_t row) const {
    for (int d = nk - 1; d >= 0; --d) {
      int64_t sz = g.space[d];
      off += (row % sz) * st[d];
      row /= sz;
    }
    return off;
  }
};

inline const char* leaf_ptr(const GLeaf& l) { return static_cast<const char*>(l.st->data()); }

// LOOM_CPU_PREFETCH (tensor/knobs.h): 0 no software prefetch, 1 into L1 (prefetcht0), 2 into
// L2 (prefetcht1).
inline int prefetch_mode() { return int(knob_int(Knob::CpuPrefetch)); }

// Memory the next tile will touch, asked for a few cache lines at a time between this
// tile's instructions: the interpreter reads a tile in its first instructions and then only
// computes, so without it the memory wait and the compute of a tile never overlap, and
// asking for a whole tile at once stalls on the line fill buffers instead.
struct Prefetch {
  static constexpr int kMax = 16;
  const char* p[kMax];
  int64_t bytes[kMax];
  bool write[kMax];
  int n = 0, cur = 0;
  int64_t off = 0, lines = 0;
  void add(const char* ptr, int64_t b, bool w) {
    if (n == kMax || b <= 0) return;
    p[n] = ptr, bytes[n] = b, write[n] = w, ++n;
    lines += (b + 63) / 64;
  }
  void step(int64_t k) {
    static const int mode = prefetch_mode();
    if (mode == 0) return;
    for (; k > 0 && cur < n; --k) {
      if (mode == 2)
        write[cur] ? __builtin_prefetch(p[cur] + off, 1, 2)
                   : __builtin_prefetch(p[cur] + off, 0, 2);
      else
        write[cur] ? __builtin_prefetch(p[cur] + off, 1) : __builtin_prefetch(p[cur] + off, 0);
      off += 64;
      if (off >= bytes[cur]) ++cur, off = 0;
    }
  }
};

// Row state of the rows a task handles: one flat buffer for every Row node's values and
// one for every reduction's accumulators (no allocation per node).
struct RowState {
  int64_t r0 = 0, nr = 0;
  const Program* p = nullptr;
  Reg vals;
  std::vector<Acc> accs;
  uint64_t* val(int id) { return vals.data() + p->row_slot[id] * nr; }
  const uint64_t* val(int id) const { return vals.data() + p->row_slot[id] * nr; }
  Acc* acc(int id) { return accs.data() + p->acc_slot[id] * nr; }
  // The column layout's accumulators (fold_cols), moved into accs when a pass ends (col_flush).
  std::vector<double> cf;
  std::vector<int64_t> ci, cx;
  double* sums = nullptr;  // the task's column sums (Job::sum_slot), where the group has them
  ColAcc col(int id) {
    size_t o = size_t(p->acc_slot[id] * nr);
    return {cf.data() + o, ci.data() + o, cx.data() + o};
  }
};

// Per-thread scratch: registers and broadcast buffers.
struct Scratch {
  std::vector<Reg> regs;
  Reg bc[4];
  std::vector<int64_t> idx;
  std::vector<const void*> full;
  // Row-state buffers handed from one rows_block to the next (no allocation per row).
  std::vector<uint64_t> row_vals;
  std::vector<Acc> row_accs;
  // The column layout's block state, its buffers reused from block to block (cpu/interp_cols.cpp).
  RowState col_rows;
  void fit(int slots, int64_t elems) {
    if (int(regs.size()) < slots) regs.resize(slots);
    for (auto& r : regs)
      if (int64_t(r.size()) < elems) r.resize(elems);
    for (auto& b : bc)
      if (int64_t(b.size()) < elems) b.resize(elems);
    if (int64_t(idx.size()) < elems) idx.resize(elems);
  }
};

Scratch& local_scratch();

// ---- cpu/interp_tile.cpp: the memory of a tile (r0, nr) x (c0, nc) ----
// out (compute type ct, nr rows of nc) = leaf l's values over the tile; idx: their offsets.
void load_full(const Job& job, CT ct, const GLeaf& l, void* out, int64_t r0, int64_t nr, int64_t c0,
               int64_t nc);
void index_full(const Job& job, const GLeaf& l, int64_t* out, int64_t r0, int64_t nr, int64_t c0,
                int64_t nc);
// Output o over the tile = src (compute type ct).
void store_full(const Job& job, CT ct, const GOutput& o, const void* src, int64_t r0, int64_t nr,
                int64_t c0, int64_t nc);

// ---- where a node's values are read and written, and the prefetch of the next tile (inline:
// asked for each node of each tile) ----
// Outputs at least this large are written with streaming (non-temporal) stores: they do not
// fit in cache anyway, and a normal store first reads each line (the write-allocate), a third
// of a pointwise kernel's memory traffic.
constexpr size_t kStreamBytes = size_t(8) << 20;

// The load of a pass that only reductions read: the pass's one step (reductions are not steps),
// loaded in this pass, not copied first and not an output. Returns its node, or -1. The
// column and row layouts then fold it where it lies.
inline int reduced_load(const Job& job, const StepList& sl, int pass) {
  if (sl.nodes.size() != 1) return -1;
  const int id = sl.nodes[0];
  const GNode& n = job.p.nodes[id];
  if (!is_load(n) || n.pass != pass || job.p.load_copy[id]) return -1;
  for (auto& o : job.g.outputs)
    if (o.node == id) return -1;
  return id;
}

// A load that can read memory in place: same type as computed, one unit-stride run.
inline const void* direct(const Job& job, int id, const RowState& rs, int64_t c0, int64_t nc) {
  const GNode& n = job.p.nodes[id];
  if (job.p.load_copy[id]) return nullptr;
  const GLeaf& l = job.g.leaves[n.leaf];
  if (compute_dtype(l.dtype) != l.dtype || l.dtype == DType::Bool) return nullptr;
  // The column layout's tile is one run where its rows are contiguous and its columns follow
  // each other (the block spans the whole innermost kept dim of a row-major matrix).
  if (job.col_layout && job.rank - job.nk == 1 && l.strides[job.nk - 1] == 1 &&
      l.strides[job.rank - 1] == rs.nr) {
    int64_t off = job.row_base(l.strides, l.offset, rs.r0) + c0 * rs.nr;
    return leaf_ptr(l) + off * int64_t(itemsize(l.dtype));
  }
  if ((job.col_layout && rs.nr != 1) || !job.one_run(l.strides, rs.nr, c0, nc)) return nullptr;
  int64_t off = job.row_base(l.strides, l.offset, rs.r0) + c0;
  return leaf_ptr(l) + off * int64_t(itemsize(l.dtype));
}

// A large output in the compute type, unit stride along the tile: streamed (see kStreamBytes).
// Its writes need an sfence before others read them (end of each task). An output that
// overwrites memory the group reads (an in-place update) is not: its lines are in the cache
// already, read there, so a plain store costs no extra read.
inline bool streams(const Job& job, const GOutput& o) {
  const int rank = job.rank;
  DType dt = job.g.nodes[o.node].dtype;
  return o.overwrites < 0 && o.st->nbytes >= kStreamBytes && rank - job.nk == 1 &&
         o.strides[rank - 1] == 1 && compute_dtype(dt) == dt && dt != DType::Bool &&
         job.p.nodes[o.node].space == Space::Full;
}

// Where output node `id` can be computed in place: its memory for this tile, when the tile
// is one unit-stride run of it in the compute type (no store pass afterwards), else null.
inline void* direct_out(const Job& job, int id, const RowState& rs, int64_t c0, int64_t nc) {
  const int rank = job.rank;
  if ((job.col_layout && rs.nr != 1) || job.p.nodes[id].space != Space::Full) return nullptr;
  for (auto& o : job.g.outputs) {
    if (o.node != id || o.colsum) continue;
    if (streams(job, o)) return nullptr;  // computed in a register, then streamed out
    DType dt = job.g.nodes[id].dtype;
    if (!job.one_run(o.strides, rs.nr, c0, nc) || compute_dtype(dt) != dt || dt == DType::Bool)
      return nullptr;
    int64_t off = job.row_base(o.strides, o.offset, rs.r0) + c0;
    return static_cast<char*>(o.st->data()) + off * int64_t(itemsize(dt));
  }
  return nullptr;
}

// A streamed output (streams()) that its own instruction writes with non-temporal stores,
// instead of computing it into a register and copying that out (a pass over the tile):
// pair_unary_f32 instructions, one 64-byte-aligned unit-stride run of the output. Its memory
// for this tile, else null. LOOM_CPU_STREAM_DIRECT=0 turns it off.
inline float* stream_out(const Job& job, int id, const RowState& rs, int64_t c0) {
  static const bool on = knob_flag(Knob::CpuStreamDirect);
  if (!on || rs.nr != 1 || job.rank - job.nk != 1 || job.p.pair_f[id] == Op::Const) return nullptr;
  float* hit = nullptr;
  for (auto& o : job.g.outputs) {
    if (o.node != id || o.colsum) continue;
    if (hit || !streams(job, o)) return nullptr;  // stored twice, or not streamed
    hit = static_cast<float*>(o.st->data()) + job.row_base(o.strides, o.offset, rs.r0) + c0;
  }
  return reinterpret_cast<uintptr_t>(hit) & 63 ? nullptr : hit;
}

// Plans the prefetch of the tile (r0, nr) x (c0, nc): its unit-stride leaves and outputs.
// Inline, as Prefetch::step is: a Prefetch whose address escapes into a call is kept in memory,
// and its step loop then waits on its own stores.
inline void plan_prefetch(const Job& job, Prefetch& pf, int64_t r0, int64_t nr, int64_t c0,
                          int64_t nc) {
  const int rank = job.rank;
  if (rank - job.nk != 1 || nc <= 0) return;
  // The tile's rows of one tensor: one range where they follow each other in memory.
  auto rows = [&](const char* base, const Strides& st, int64_t off, int64_t isz, bool write) {
    // the same row for every row (a norm's weight): its lines once, not once a row
    const bool same =
        std::all_of(st.begin(), st.begin() + job.nk, [](int64_t v) { return v == 0; });
    if (same || job.one_run(st, nr, c0, nc)) {
      pf.add(base + (job.row_base(st, off, r0) + c0) * isz, (same ? 1 : nr) * nc * isz, write);
      return;
    }
    for (int64_t i = 0; i < nr && pf.n < Prefetch::kMax; ++i)
      pf.add(base + (job.row_base(st, off, r0 + i) + c0) * isz, nc * isz, write);
  };
  for (auto& l : job.g.leaves) {
    if (!l.st || l.strides[rank - 1] != 1 || l.space != Space::Full) continue;
    rows(leaf_ptr(l), l.strides, l.offset, int64_t(itemsize(l.dtype)), false);
  }
  for (auto& o : job.g.outputs) {
    if (o.colsum || o.strides[rank - 1] != 1 || job.p.nodes[o.node].space != Space::Full ||
        streams(job, o))
      continue;
    rows(static_cast<const char*>(o.st->data()), o.strides, o.offset,
         int64_t(itemsize(job.g.nodes[o.node].dtype)), true);
  }
}

// ---- cpu/interp_eval.cpp: one node over a tile (Full) or over the task's rows (Row) ----
// Row-space node `id` over the task's rows.
void eval_row(const Job& job, RowState& rs, int id);
// Full node `id` over the tile (r0, nr) x (c0, nc); returns where its values are (`out`, or
// the input memory itself for a load that needs no conversion). nt: `out` is a streamed
// output's memory (stream_out).
const void* eval_full(const Job& job, Scratch& s, const RowState& rs,
                      const std::vector<const void*>& full, int id, void* out, int64_t c0,
                      int64_t nc, bool nt = false);

// ---- cpu/interp_rows.cpp: the passes ----
// The rows [r0, r0+nr) of a task: Row values zeroed, accumulators at their identity (the
// column layout's too, where the job has it).
void init_rows(const Job& job, RowState& rs, int64_t r0, int64_t nr);
// The Row nodes a pass starts with; the Row outputs stored once every pass has run.
void row_pass_start(const Job& job, RowState& rs, int pass);
void store_rows(const Job& job, RowState& rs);
// Pass `pass`'s steps (every pass where `whole`) over the tile (rs's rows) x [c0, c0+nc);
// reductions fold into `accs` where given (a long row's segment), else into rs.
void run_steps(const Job& job, Scratch& s, RowState& rs, const StepList& sl, int pass, bool whole,
               std::vector<Acc>* accs, int64_t c0, int64_t nc, Prefetch* pf = nullptr);
// Rows [r0, r0+nr): every pass, whole rows in one tile or long rows in chunks.
// sums: the task's column sums (Job::sum_slot), where the group has them.
void rows_block(const Job& job, Scratch& s, int64_t r0, int64_t nr, bool whole,
                Prefetch* pf = nullptr, double* sums = nullptr);
// One long row: each pass splits the row into fixed segments run in parallel (each its own
// columns, so they fold into one set of column sums).
void long_row_parallel(const Job& job, int64_t row, double* sums = nullptr);
// The column sums of a group with them: its rows in blocks (rows_block, long_row_parallel)
// whose partial sums add up in block order, then stored.
void run_with_sums(const Job& job);

// ---- cpu/interp_cols.cpp: the column layout ----
// Whether group g runs in the column layout: most of the bytes it moves are contiguous along
// the kept dims and not along the reduced ones (a column sum of a row-major matrix).
bool use_col_layout(const Group& g);
// Every pass of the job (its col_layout set) over blocks of rows, spread over threads.
void run_cols(const Job& job);
// The column layout's accumulators of the reductions pass `pass` folds (every pass: -1) into
// rs.accs, where acc_values() reads them.
void col_flush(const Job& job, RowState& rs, int pass);

}  // namespace loom::cpu::interp
