// The interpreter's driver: spreads the row blocks of a group (or the segments of each long
// row) over oneTBB. Short rows are packed into tiles of about kRowBlock elements; rows up to
// kWholeRow (or kWholeRowBytes) stay in registers for every pass; longer rows run pass by pass
// in chunks, split into segments where they are few.
#include "cpu/interp.h"

#include <immintrin.h>
#include <tbb/parallel_for.h>

#include <algorithm>

#include "cpu/interp_job.h"
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

}  // namespace

void run_program(const Program& p, const Group& g) {
  using namespace interp;
  if (g.rows() > 0 && use_col_layout(g)) {
    counters().col_kernels++;
    return run_cols(Job(p, g, true));
  }
  const Job job(p, g);
  const int64_t rows = job.rows, cols = job.cols;
  if (rows == 0) return;
  if (cols <= kWholeRow || (rows >= kRowsSpread && cols * p.tile_bytes <= kWholeRowBytes)) {
    const bool small = rows * cols <= kSmallGroup;
    const int64_t elems = small ? std::min(kSmallRowBlock, kSmallTileBytes / p.tile_bytes)
                                : std::min(kRowBlock, kTileBytes / p.tile_bytes);
    int64_t nr = std::max<int64_t>(1, elems / std::max<int64_t>(cols, 1));
    // A transposed input is read a column of kTransRows rows at a time (one cache line of
    // floats): such tiles are that tall, and held in L2 rather than L1.
    if (nr < kTransRows && transposed_input(job))
      nr = std::clamp<int64_t>(kTransTileBytes / (cols * p.tile_bytes), nr, kTransRows);
    nr = std::min(nr, rows);
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
