// A matmul with its epilogue (Group::epilogue): the pointwise consumers of C run over each block
// of C's rows right after BLAS wrote it, while the block is in this core's L2, instead of a pass
// of their own that reads C back from memory.
#include "cpu/matmul_epilogue.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <cstdlib>
#include <cstring>

#include "cpu/blas.h"
#include "cpu/group_slice.h"
#include "cpu/matmul.h"
#include "tensor/error.h"
#include "tensor/knobs.h"
#include "tensor/storage.h"

namespace loom::cpu {
namespace {

// Bytes of C a block of rows holds at the most: with the packed panels BLAS keeps beside it,
// the block stays in a core's L2 (kL2Bytes on the machines measured) until its epilogue read it.
constexpr int64_t kBlockBytes = int64_t(512) << 10;
constexpr int64_t kL2Bytes = int64_t(2) << 20;
// ... but never fewer rows than this (where there are as many): each block's GEMM packs all of
// B again, a cost only a tall block spreads thin (a block of C may then pass kBlockBytes).
constexpr int64_t kMinBlockRows = 128;

// A Storage over memory it does not own (C's block in a thread's scratch), for a leaf.
std::shared_ptr<Storage> borrowed(void* p, size_t bytes) {
  auto st = std::make_shared<Storage>();
  st->nbytes = bytes;
  st->mem = std::make_shared<Memory>(p, bytes, kCPU);
  st->mem->deleter = [] {};
  return st;
}

// Runs the epilogue over C's elements [e0, e1) (row-major over C's shape). `c`: where C's
// values are; null: C's own storage, else memory holding C from element `c_first` on.
void epilogue_range(const Group& g, Kernel& k, int64_t e0, int64_t e1,
                    const std::shared_ptr<Storage>& c, int64_t c_first) {
  for_each_slice(*g.epilogue, e0, e1, [&](Group& sub) {
    if (c) {
      GLeaf& l = sub.leaves[size_t(g.c_leaf)];
      l.st = c;
      l.offset -= c_first;
    }
    k.run(sub);
  });
}

bool c_in_memory(const Group& g) {
  return !g.outputs.empty() && g.outputs[0].st == g.epilogue->leaves[size_t(g.c_leaf)].st;
}

// The whole matmul into C (its own memory, or a temporary one where nothing outside the group
// needs C), then the epilogue over all of it: any dtype, any split.
void after(const Group& g, Kernel& k) {
  const Storage& c = *g.epilogue->leaves[size_t(g.c_leaf)].st;
  if (c_in_memory(g)) {
    run_matmul_into(*g.opaque, c.data());
    epilogue_range(g, k, 0, INT64_MAX, nullptr, 0);
    return;
  }
  std::shared_ptr<Memory> tmp = allocate(kCPU, c.nbytes);
  run_matmul_into(*g.opaque, tmp->ptr);
  epilogue_range(g, k, 0, INT64_MAX, borrowed(tmp->ptr, c.nbytes), 0);
}

// Blocks of rows for `mats` matrices of `rows` rows of `c_row` bytes of C: as tall as
// kBlockBytes allows (kMinBlockRows at the fewest), and at least two a thread where there are
// rows enough, their count a multiple of the threads (no thread waits on another's last block).
struct BlockPlan {
  int64_t per;   // blocks a matrix
  int64_t rows;  // rows a block (the last one of a matrix may have fewer)
};
BlockPlan plan_blocks(int64_t mats, int64_t rows, int64_t c_row) {
  const int threads = tbb::this_task_arena::max_concurrency();
  const int64_t most = std::max(kMinBlockRows, kBlockBytes / std::max<int64_t>(c_row, 1));
  int64_t per = (rows + most - 1) / most;
  if (mats < threads) {
    int64_t want = (2 * threads + mats - 1) / mats;
    per = std::max(per, std::min(want, (rows + 15) / 16));
    int64_t all = (mats * per + threads - 1) / threads * threads;
    per = std::max<int64_t>(1, all / mats);
  }
  const int64_t br = (rows + per - 1) / per;
  return {(rows + br - 1) / br, br};
}

#ifdef LOOM_HAVE_OPENBLAS

// A thread's block of C where C is not written to memory, kept between calls.
template <typename T>
T* block_scratch(int64_t elems) {
  struct Buf {
    T* p = nullptr;
    int64_t n = 0;
    ~Buf() { std::free(p); }
  };
  thread_local Buf b;
  if (b.n < elems) {
    std::free(b.p);
    b.p = static_cast<T*>(
        std::aligned_alloc(64, size_t((elems * int64_t(sizeof(T)) + 63) / 64 * 64)));
    LOOM_CHECK(b.p, Memory, "cpu: out of memory for a matmul's block of rows");
    b.n = elems;
  }
  return b.p;
}

// Blocks of rows over oneTBB, each a one-thread GEMM into the block (C's memory, or the
// thread's scratch) and then the epilogue over the block's rows.
template <typename T>
void rows(const Group& g, Kernel& k) {
  const Node& n = *g.opaque;
  Shapes s = shapes_of(n);
  Operand<T> A(n.in[0], s.batch, s.M, s.K), B(n.in[1], s.batch, s.K, s.N);
  const bool in_mem = c_in_memory(g);
  const Storage& cst = *g.epilogue->leaves[size_t(g.c_leaf)].st;
  // One B for the whole batch and the A matrices one after the other: one matrix of batch * M
  // rows, cut into blocks across batch entries. Otherwise blocks of each entry's rows.
  const bool flat =
      s.batch > 1 && !A.trans && B.stacks_none() && A.stacks(s.M) && s.batch * s.M <= INT_MAX;
  const int64_t mats = flat ? 1 : s.batch, rows = flat ? s.batch * s.M : s.M;
  const int64_t c_row = s.N * int64_t(sizeof(T));
  const auto [per, br] = plan_blocks(mats, rows, c_row);
  // Whole matrices a block (small batch entries): several a block, up to kBlockBytes and at
  // least two blocks a thread, so the epilogue's fixed cost a call is spread over them.
  const int threads = tbb::this_task_arena::max_concurrency();
  int64_t mpb = 1;
  if (per == 1)
    mpb = std::clamp<int64_t>(
        std::min(kBlockBytes / std::max<int64_t>(rows * c_row, 1), mats / (2 * int64_t(threads))),
        1, mats);
  const int64_t units = per == 1 ? (mats + mpb - 1) / mpb : mats * per;
  blas_threads(1);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, units, 1), [&](auto range) {
    for (int64_t u = range.begin(); u < range.end(); ++u) {
      // Matrices [b0, b1), rows [r0, r0 + m) of each: C's elements [first, first + len).
      const int64_t b0 = per == 1 ? u * mpb : u / per,
                    b1 = per == 1 ? std::min(mats, b0 + mpb) : b0 + 1;
      const int64_t r0 = per == 1 ? 0 : (u % per) * br, m = std::min(br, rows - r0);
      const int64_t first = (b0 * rows + r0) * s.N, len = (b1 - b0) * m * s.N;
      T* c = in_mem ? static_cast<T*>(cst.data()) + first : block_scratch<T>(len);
      for (int64_t b = b0; b < b1; ++b) {
        const T* a = A.matrix(b, s.M, s.K) + r0 * (A.trans ? 1 : A.ld);
        gemm(A.trans, B.trans, m, s.N, s.K, a, A.ld, B.matrix(b, s.K, s.N), B.ld,
             c + (b - b0) * m * s.N, s.N);
      }
      // Isolated: waiting inside the epilogue, this thread must not start another block, whose
      // GEMM would overwrite the scratch this one still reads.
      tbb::this_task_arena::isolate([&] {
        epilogue_range(g, k, first, first + len,
                       in_mem ? nullptr : borrowed(c, size_t(len) * sizeof(T)), first);
      });
    }
  });
}

#endif  // LOOM_HAVE_OPENBLAS

}  // namespace

EpilogueSplit epilogue_split(const Node& n) {
  std::string k = knob_str(Knob::CpuEpilogueSplit);
  if (k == "rows") return EpilogueSplit::Rows;
  if (k == "after") return EpilogueSplit::After;
  Shapes s = shapes_of(n);
  // Blocks of rows over oneTBB pack the B panels again for every block (one-thread GEMMs),
  // where one threaded GEMM shares them between its threads; what blocks save is the
  // epilogue's pass over C in memory. A block re-packs K * N elements of B and saves a pass
  // over its rows * N elements of C: blocks pay where the block of C is the larger, K at most
  // the block's rows, and while a block of kMinBlockRows rows fits in L2 (bench/RESULTS.md,
  // "CPU matmul epilogue"). The block plan is taken as if B were one matrix for the batch.
  const int64_t c_row = s.N * int64_t(itemsize(n.dtype));
  bool b_shared = true;
  const View& bv = n.in[1].view;
  for (int d = 0; d + 2 < int(bv.shape.size()); ++d)
    if (bv.shape[d] != 1 && bv.strides[d] != 0) b_shared = false;
  const BlockPlan bp =
      b_shared ? plan_blocks(1, s.batch * s.M, c_row) : plan_blocks(s.batch, s.M, c_row);
  return s.K <= bp.rows && c_row * kMinBlockRows <= kL2Bytes ? EpilogueSplit::Rows
                                                             : EpilogueSplit::After;
}

void run_matmul_epilogue(const Group& g, Kernel& k) {
  const Node& n = *g.opaque;
  Shapes s = shapes_of(n);
  if (s.batch * s.M * s.N == 0) return;
#ifdef LOOM_HAVE_OPENBLAS
  if (s.K > 0 && epilogue_split(n) == EpilogueSplit::Rows) {
    if (n.dtype == DType::Float32) return rows<float>(g, k);
    if (n.dtype == DType::Float64) return rows<double>(g, k);
  }
#endif
  after(g, k);
}

}  // namespace loom::cpu
