// The interpreter's driver: spreads the row blocks of a group (or the segments of each long
// row) over oneTBB. Short rows are packed into tiles of about kRowBlock elements; rows up to
// kWholeRow (or kWholeRowBytes) stay in registers for every pass; longer rows run pass by pass
// in chunks, split into segments where they are few.
#include "cpu/interp.h"

#include <immintrin.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <vector>

#include "cpu/interp_job.h"
#include "tensor/convert.h"
#include "tensor/counters.h"

namespace loom::cpu {

namespace {

// Whether a Full leaf of the job is a transposed view (Job::transposed) big enough to matter.
bool transposed_input(const interp::Job& job) {
  for (auto& l : job.g.leaves)
    if (l.st && l.space == Space::Full && job.transposed(l.strides, 0, 2) &&
        l.st->nbytes >= (size_t(1) << 20))
      return true;
  return false;
}

// Whether rows of the job stay in registers for every pass (else each pass walks them in
// chunks).
bool whole_rows(const interp::Job& job) {
  using namespace interp;
  return job.cols <= kWholeRow ||
         (job.rows >= kRowsSpread && job.cols * job.p.tile_bytes <= kWholeRowBytes);
}

// Rows of a block of whole rows.
int64_t block_rows(const interp::Job& job) {
  using namespace interp;
  const int64_t rows = job.rows, cols = job.cols, tb = job.p.tile_bytes;
  const bool small = rows * cols <= kSmallGroup;
  const int64_t elems =
      small ? std::min(kSmallRowBlock, kSmallTileBytes / tb) : std::min(kRowBlock, kTileBytes / tb);
  int64_t nr = std::max<int64_t>(1, elems / std::max<int64_t>(cols, 1));
  // A transposed input is read a column of kTransRows rows at a time (one cache line of
  // floats): such tiles are that tall, and held in L2 rather than L1.
  if (nr < kTransRows && transposed_input(job))
    nr = std::clamp<int64_t>(kTransTileBytes / (cols * tb), nr, kTransRows);
  return std::min(nr, rows);
}

// Element offset of column c (over the reduced dims) of output o.
int64_t column_offset(const interp::Job& job, const GOutput& o, int64_t c) {
  int64_t off = o.offset;
  for (int d = job.rank - 1; d >= job.nk && c > 0; --d) {  // (column 0: a dim may be empty)
    off += (c % job.g.space[d]) * o.strides[d];
    c /= job.g.space[d];
  }
  return off;
}

// Column sums: at most this many partial sums, each of a fixed run of blocks of rows, and at
// most this many bytes of them (long rows get fewer).
constexpr int64_t kSumParts = 64;
constexpr int64_t kSumBytes = int64_t(8) << 20;

}  // namespace

namespace interp {

void run_with_sums(const Job& job) {
  const int64_t rows = job.rows, cols = job.cols;
  const size_t width = size_t(job.nsums) * size_t(job.sum_stride);
  int64_t parts = 1;
  std::vector<double> part;
  auto sums_of = [&](int64_t k) { return part.data() + size_t(k) * width; };
  const int64_t most =
      std::clamp<int64_t>(kSumBytes / int64_t(8 * std::max<size_t>(width, 1)), 1, kSumParts);
  if (rows > 0 && whole_rows(job)) {
    // Blocks of rows as run_program's, a fixed run of them a partial sum.
    const int64_t nr = block_rows(job), blocks = (rows + nr - 1) / nr;
    const int64_t per = (blocks + most - 1) / most;
    parts = (blocks + per - 1) / per;
    part.assign(size_t(parts) * width, 0.0);
    tbb::parallel_for(int64_t(0), parts, [&](int64_t k) {
      Scratch& s = local_scratch();
      const int64_t b1 = std::min(blocks, (k + 1) * per);
      for (int64_t b = k * per; b < b1; ++b) {
        Prefetch pf;
        if (b + 1 < b1)
          plan_prefetch(job, pf, b * nr + nr, std::min(nr, rows - b * nr - nr), 0, cols);
        rows_block(job, s, b * nr, std::min(nr, rows - b * nr), true, &pf, sums_of(k));
      }
      _mm_sfence();
    });
  } else if (rows >= kRowsSpread) {
    const int64_t per = (rows + most - 1) / most;
    parts = (rows + per - 1) / per;
    part.assign(size_t(parts) * width, 0.0);
    tbb::parallel_for(int64_t(0), parts, [&](int64_t k) {
      Scratch& s = local_scratch();
      for (int64_t row = k * per; row < std::min(rows, (k + 1) * per); ++row)
        rows_block(job, s, row, 1, false, nullptr, sums_of(k));
      _mm_sfence();
    });
  } else {
    part.assign(width, 0.0);
    for (int64_t row = 0; row < rows; ++row) long_row_parallel(job, row, sums_of(0));
  }
  // The partial sums in order; no rows: zeros.
  for (size_t o = 0; o < job.g.outputs.size(); ++o) {
    const int slot = job.sum_slot[o];
    if (slot < 0) continue;
    const GOutput& out = job.g.outputs[o];
    const DType dt = out.dtype(job.g.nodes);
    // A cast of the sum (GOutput::cast): rounded to the sum's own dtype first.
    const bool round32 = out.cast && job.g.nodes[out.node].dtype == DType::Float32;
    char* base = static_cast<char*>(out.st->data());
    const int64_t n = job.g.nodes[out.node].space == Space::Row ? 1 : cols;  // a row value's: one
    for (int64_t c = 0; c < n; ++c) {
      double v = 0;
      for (int64_t k = 0; k < parts; ++k)
        v += sums_of(k)[size_t(slot) * size_t(job.sum_stride) + size_t(c)];
      if (round32) v = double(float(v));
      store_run<double>(base + column_offset(job, out, c) * int64_t(itemsize(dt)), dt, 1, &v, 1);
    }
  }
}

}  // namespace interp

void run_program(const Program& p, const Group& g) {
  using namespace interp;
  const Job job(p, g);
  if (job.nsums) return run_with_sums(job);
  if (g.rows() > 0 && use_col_layout(g)) {
    counters().col_kernels++;
    return run_cols(Job(p, g, true));
  }
  const int64_t rows = job.rows, cols = job.cols;
  if (rows == 0) return;
  if (whole_rows(job)) {
    const int64_t nr = block_rows(job);
    int64_t blocks = (rows + nr - 1) / nr;
    if (blocks == 1) {
      Scratch& s = local_scratch();
      rows_block(job, s, 0, rows, true);
      _mm_sfence();
      return;
    }
    int64_t grain = std::max<int64_t>(1, 32768 / (nr * std::max<int64_t>(cols, 1)));
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, blocks, grain), [&](auto r) {
      Scratch& s = local_scratch();
      for (int64_t b = r.begin(); b < r.end(); ++b) {
        Prefetch pf;
        if (b + 1 < r.end())
          plan_prefetch(job, pf, b * nr + nr, std::min(nr, rows - b * nr - nr), 0, cols);
        rows_block(job, s, b * nr, std::min(nr, rows - b * nr), true, &pf);
      }
      _mm_sfence();  // streamed stores are visible before the task counts as done
    });
    return;
  }
  if (rows >= kRowsSpread) {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows), [&](auto r) {
      Scratch& s = local_scratch();
      for (int64_t row = r.begin(); row < r.end(); ++row) rows_block(job, s, row, 1, false);
      _mm_sfence();
    });
    return;
  }
  for (int64_t row = 0; row < rows; ++row) long_row_parallel(job, row);
}

}  // namespace loom::cpu
