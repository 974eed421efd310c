// The column layout of a reduction whose input is contiguous along the kept dims (a column sum
// of a row-major matrix, every bias gradient): a tile is a block of rows consecutive along the
// innermost kept dim times a few columns, each of its columns one run of memory, and each row's
// accumulator a lane of the fold (fold_cols). The row layout would walk each row at the stride
// of a whole matrix row, one cache line per element.
#include <immintrin.h>
#include <tbb/parallel_for.h>

#include <algorithm>

#include "cpu/interp_job.h"

namespace loom::cpu::interp {
namespace {

// The blocks of a job: kept rows in blocks of at most kColWidth along the innermost kept dim
// (a block never spans two of its runs), and the columns of each block in `nseg` segments of
// `seg` columns, each run as its own task when the blocks alone are too few to spread. Both
// depend on the shape alone, so the sums do not depend on the number of threads.
struct ColSplit {
  int64_t inner = 1;  // size of the innermost kept dim
  int64_t per = 1;    // blocks per run of it
  int64_t blocks = 1;
  int64_t nc = 1;  // columns of a tile
  int64_t seg = 1, nseg = 1;

  explicit ColSplit(const Job& job) {
    inner = job.g.space[job.nk - 1];
    int64_t width = std::min(inner, kColWidth);
    // Few columns (a sum over a short dim): narrower blocks, so one tile holds every column and
    // each accumulator is read and written once a block rather than once a tile.
    if (job.cols <= kColStreams)
      width = std::min(width, std::max<int64_t>(64, kColTile / job.cols));
    per = (inner + width - 1) / width;
    blocks = job.rows / inner * per;
    nc = std::max<int64_t>(4, kColTile / width);
    if (width >= 64) nc = std::min(nc, kColStreams);  // narrower: one run of 32 rows or less
    nc = std::min(nc, job.cols);
    seg = job.cols;
    if (blocks < kColTasks && job.rows * job.cols >= kColSplitMin) {
      int64_t want = std::min((kColTasks + blocks - 1) / blocks, job.cols / kColSegMin);
      if (want > 1) seg = ((job.cols + want - 1) / want + nc - 1) / nc * nc;
    }
    nseg = (job.cols + seg - 1) / seg;
  }
  void rows_of(int64_t b, int64_t& r0, int64_t& nr) const {
    int64_t run = b / per, k = b % per;
    int64_t width = (inner + per - 1) / per;
    r0 = run * inner + k * width;
    nr = std::min(width, inner - k * width);
  }
};

// The load a pass of reductions folds in place: a pass whose one step loads a leaf that only
// reductions read, in its compute type, its kept dim of unit stride and one reduced dim. The
// block's column j is then a run of memory at a fixed distance from column j - 1, so the
// column fold reads it where it is instead of copying it into a register first (a column sum
// of few columns of a wide matrix spent half its time copying). Returns the load's node, or -1.
int in_place_load(const Job& job, const StepList& sl, int pass) {
  const int id = job.rank - job.nk == 1 ? reduced_load(job, sl, pass) : -1;
  if (id < 0) return -1;
  const GLeaf& l = job.g.leaves[job.p.nodes[id].leaf];
  if (compute_dtype(l.dtype) != l.dtype || l.dtype == DType::Bool || l.strides[job.nk - 1] != 1)
    return -1;
  return id;
}

// Pass `pass` over columns [c0, c1) of the block rs holds, a tile of sp.nc columns at a time.
void cols_pass(const Job& job, Scratch& s, RowState& rs, const ColSplit& sp, int pass, int64_t c0,
               int64_t c1) {
  const StepList& sl = job.p.per_pass[pass];
  if (sl.nodes.empty()) return;
  if (int id = in_place_load(job, sl, pass); id >= 0) {
    const Program& p = job.p;
    const GLeaf& l = job.g.leaves[p.nodes[id].leaf];
    const int64_t ld = l.strides[job.rank - 1];
    const char* base =
        leaf_ptr(l) + job.row_base(l.strides, l.offset, rs.r0) * int64_t(itemsize(l.dtype));
    for (int64_t c = c0; c < c1; c += sp.nc)
      for (int r : p.reduces)
        if (p.nodes[r].a == id)
          fold_cols(p.nodes[r].op, p.ct[id], base + c * ld * int64_t(itemsize(l.dtype)), ld, rs.nr,
                    std::min(sp.nc, c1 - c), c, rs.col(r));
    return;
  }
  s.fit(sl.slots, rs.nr * sp.nc);
  for (int64_t c = c0; c < c1; c += sp.nc)
    run_steps(job, s, rs, sl, pass, false, nullptr, c, std::min(sp.nc, c1 - c));
}

// Every pass of one block, its columns in one task.
void cols_block(const Job& job, Scratch& s, const ColSplit& sp, int64_t b) {
  RowState& rs = s.col_rows;  // its buffers' capacity is kept from block to block
  int64_t r0, nr;
  sp.rows_of(b, r0, nr);
  init_rows(job, rs, r0, nr);
  for (int pass = 0; pass < job.p.passes; ++pass) {
    row_pass_start(job, rs, pass);
    cols_pass(job, s, rs, sp, pass, 0, job.cols);
    col_flush(job, rs, pass);
  }
  store_rows(job, rs);
}

// The accumulators of every (block, segment) task of a segmented run, task t's at t * n: kept
// by the thread that runs the job, so a flush allocates nothing.
struct SegAccs {
  std::vector<double> f;
  std::vector<int64_t> i, idx;
  int64_t n = 0;
  void fit(int64_t tasks, int64_t per) {
    n = per;
    size_t all = size_t(tasks * per);
    if (f.size() < all) f.resize(all), i.resize(all), idx.resize(all);
  }
  ColAcc at(int64_t t, int64_t off) {
    size_t o = size_t(t * n + off);
    return {f.data() + o, i.data() + o, idx.data() + o};
  }
};

// Few blocks of many columns: pass by pass, every (block, segment) a task; each segment's
// accumulators merge into its block's in segment order.
void cols_segmented(const Job& job, const ColSplit& sp) {
  const Program& p = job.p;
  // The calling thread's (named through references: a lambda that names a thread_local
  // reads the running thread's own).
  thread_local std::vector<RowState> rs_kept;
  thread_local SegAccs seg_kept;
  std::vector<RowState>& rs = rs_kept;
  SegAccs& seg = seg_kept;
  if (int64_t(rs.size()) < sp.blocks) rs.resize(size_t(sp.blocks));
  for (int64_t b = 0; b < sp.blocks; ++b) {
    int64_t r0, nr;
    sp.rows_of(b, r0, nr);
    init_rows(job, rs[b], r0, nr);
  }
  const int64_t tasks = sp.blocks * sp.nseg;
  const int64_t per = int64_t(p.reduces.size()) * rs[0].nr;
  seg.fit(tasks, per);
  for (int pass = 0; pass < p.passes; ++pass) {
    for (int64_t b = 0; b < sp.blocks; ++b) row_pass_start(job, rs[b], pass);
    if (p.per_pass[pass].nodes.empty()) continue;
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, tasks, 1), [&](auto range) {
      Scratch& s = local_scratch();
      for (int64_t t = range.begin(); t < range.end(); ++t) {
        int64_t b = t / sp.nseg, sg = t % sp.nseg;
        RowState& local = s.col_rows;
        local = rs[b];  // identity accumulators (only tasks fold); capacity kept
        int64_t c0 = sg * sp.seg;
        cols_pass(job, s, local, sp, pass, c0, std::min(job.cols, c0 + sp.seg));
        for (int r : p.reduces) {
          if (p.nodes[p.nodes[r].a].pass != pass) continue;
          ColAcc from = local.col(r), to = seg.at(t, p.acc_slot[r] * local.nr);
          std::copy_n(from.f, local.nr, to.f), std::copy_n(from.i, local.nr, to.i);
          std::copy_n(from.idx, local.nr, to.idx);
        }
      }
      _mm_sfence();
    });
    for (int64_t b = 0; b < sp.blocks; ++b) {
      for (int r : p.reduces) {
        if (p.nodes[p.nodes[r].a].pass != pass) continue;
        for (int64_t sg = 0; sg < sp.nseg; ++sg)
          combine_cols(p.nodes[r].op, p.ct[p.nodes[r].a], rs[b].col(r),
                       seg.at(b * sp.nseg + sg, p.acc_slot[r] * rs[b].nr), rs[b].nr);
      }
      col_flush(job, rs[b], pass);
    }
  }
  for (int64_t b = 0; b < sp.blocks; ++b) store_rows(job, rs[b]);
}

}  // namespace

bool use_col_layout(const Group& g) {
  static const bool on = knob_flag(Knob::CpuCols);
  const int rank = int(g.space.size()), nk = g.n_kept;
  if (!on || nk < 1 || rank <= nk || !g.has_reduce()) return false;
  if (g.space[nk - 1] < kColMinInner || g.cols() == 0) return false;  // empty columns: rows
  // Bytes the Full leaves and outputs span (a leaf broadcast along a dim spans it once), by
  // the dim along which they are contiguous.
  int64_t along_kept = 0, along_reduced = 0;
  auto count = [&](DType dt, const Strides& st) {
    int64_t b = int64_t(itemsize(dt));
    for (int d = 0; d < rank; ++d)
      if (st[d] != 0) b *= g.space[d];
    if (st[rank - 1] == 1)
      along_reduced += b;
    else if (st[nk - 1] == 1)
      along_kept += b;
  };
  for (auto& l : g.leaves)
    if (l.st && l.space == Space::Full) count(l.dtype, l.strides);
  for (auto& o : g.outputs)
    if (g.nodes[o.node].space == Space::Full) count(o.dtype(g.nodes), o.strides);
  return along_kept > along_reduced;
}

void col_flush(const Job& job, RowState& rs, int pass) {
  const Program& p = job.p;
  for (int r : p.reduces) {
    if (pass >= 0 && p.nodes[p.nodes[r].a].pass != pass) continue;
    ColAcc c = rs.col(r);
    Acc* a = rs.acc(r);
    for (int64_t i = 0; i < rs.nr; ++i) a[i] = {c.f[i], c.i[i], c.idx[i]};
  }
}

void run_cols(const Job& job) {
  const ColSplit sp(job);
  if (sp.nseg > 1) return cols_segmented(job, sp);
  int64_t per_block = job.rows / sp.blocks * job.cols;
  int64_t grain = std::max<int64_t>(1, kColSplitMin / std::max<int64_t>(per_block, 1));
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, sp.blocks, grain), [&](auto r) {
    Scratch& s = local_scratch();
    for (int64_t b = r.begin(); b < r.end(); ++b) cols_block(job, s, sp, b);
    _mm_sfence();
  });
}

}  // namespace loom::cpu::interp
