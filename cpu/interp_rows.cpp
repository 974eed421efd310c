// The passes of a tile program over a block of rows (whole rows in one tile, or long rows in
// chunks) and over one long row split into segments; reductions fold and outputs store as
// their values appear.
#include <immintrin.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <type_traits>

#include "cpu/interp_job.h"
#include "tensor/convert.h"
#include "tensor/error.h"

namespace loom::cpu::interp {
namespace {

// Elements of a chunk of a long row in a pass of step list sl: kWideChunk for few steps, but
// kConvChunk where one converts a load (a bfloat16 or float16 leaf widened into a register,
// which an L2-sized chunk writes to L2 and reads back), else kChunk. It depends on the program
// alone, so the order of a reduction's sums does not depend on the shape's split.
int64_t chunk_of(const Job& job, const StepList& sl) {
  if (int64_t(sl.nodes.size()) > kWideSteps) return kChunk;
  for (int id : sl.nodes) {
    const GNode& n = job.p.nodes[id];
    if (is_load(n) && compute_dtype(job.g.leaves[n.leaf].dtype) != job.g.leaves[n.leaf].dtype)
      return kConvChunk;
  }
  return kWideChunk;
}

// Adds the tile's rows of values v (compute type ct, nr rows of nc) into sums[0, nc), row by row.
void fold_sums(double* sums, CT ct, const void* v, int64_t nr, int64_t nc) {
  LOOM_CHECK(is_float(ct), Runtime, "cpu: a column sum of a non-float value");
  dispatch_ct(ct, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_floating_point_v<T>) {
      const T* x = static_cast<const T*>(v);
      for (int64_t i = 0; i < nr; ++i, x += nc)
        for (int64_t j = 0; j < nc; ++j) sums[j] += double(x[j]);
    }
  });
}

// Folds node id's values v into the reductions that read it and stores the outputs it is.
void consume(const Job& job, RowState& rs, int id, const void* v, std::vector<Acc>* accs,
             int64_t c0, int64_t nc, int pass) {
  const Program& p = job.p;
  for (int r : p.reduces) {
    const GNode& rn = p.nodes[r];
    if (rn.a != id || (pass >= 0 && p.nodes[id].pass != pass)) continue;
    if (job.col_layout) {
      fold_cols(rn.op, p.ct[id], v, rs.nr, rs.nr, nc, c0, rs.col(r));
      continue;
    }
    Acc* acc = accs ? accs->data() + p.acc_slot[r] : rs.acc(r);
    fold(rn.op, p.ct[id], p.ct[r], v, rs.nr, nc, c0, acc);
  }
  if (pass >= 0 && pass != p.last) return;
  const void* in_place = nullptr;
  bool looked = false;
  for (size_t k = 0; k < job.g.outputs.size(); ++k) {
    const GOutput& o = job.g.outputs[k];
    if (o.node != id) continue;
    if (o.colsum) {
      fold_sums(rs.sums + job.sum_slot[k] * job.sum_stride + c0, p.ct[id], v, rs.nr, nc);
      continue;
    }
    if (!looked) {
      in_place = direct_out(job, id, rs, c0, nc), looked = true;
      if (!in_place) in_place = stream_out(job, id, rs, c0);
    }
    if (v == in_place) continue;  // computed straight into the output
    store_full(job, p.ct[id], o, v, rs.r0, rs.nr, c0, nc);
  }
}

void rows_block_run(const Job& job, Scratch& s, RowState& rs, int64_t nr, bool whole,
                    Prefetch* pf) {
  const Program& p = job.p;
  const int64_t cols = job.cols;
  if (whole) {
    s.fit(p.single.slots, nr * cols);
    auto& full = s.full;
    full.assign(p.nodes.size(), nullptr);
    int64_t per = pf ? pf->lines / int64_t(p.single.nodes.size() + 1) + 1 : 0;
    // Whole rows: walk passes in order; each Full node is computed once.
    size_t k = 0;
    for (int pass = 0; pass < p.passes; ++pass) {
      row_pass_start(job, rs, pass);
      for (; k < p.single.nodes.size() && p.nodes[p.single.nodes[k]].pass == pass; ++k) {
        int id = p.single.nodes[k];
        void* out = direct_out(job, id, rs, 0, cols);
        float* st = out ? nullptr : stream_out(job, id, rs, 0);
        if (st) out = st;
        const void* v = eval_full(job, s, rs, full, id, out ? out : s.regs[p.single.reg[k]].data(),
                                  0, cols, st != nullptr);
        full[id] = v;
        consume(job, rs, id, v, nullptr, 0, cols, -1);
        if (pf) pf->step(per);
      }
    }
    if (pf) pf->step(pf->lines);
    store_rows(job, rs);
    return;
  }
  for (int pass = 0; pass < p.passes; ++pass) {
    row_pass_start(job, rs, pass);
    const StepList& sl = p.per_pass[pass];
    if (sl.nodes.empty()) continue;
    const int64_t chunk = chunk_of(job, sl);
    s.fit(sl.slots, nr * chunk);
    for (int64_t c0 = 0; c0 < cols; c0 += chunk)
      run_steps(job, s, rs, sl, pass, false, nullptr, c0, std::min(chunk, cols - c0));
  }
  store_rows(job, rs);
}

}  // namespace

void init_rows(const Job& job, RowState& rs, int64_t r0, int64_t nr) {
  const Program& p = job.p;
  rs.r0 = r0, rs.nr = nr, rs.p = &p;
  rs.vals.assign(size_t(p.n_row * nr), 0);
  rs.accs.resize(p.reduces.size() * nr);
  for (int r : p.reduces) std::fill_n(rs.acc(r), nr, acc_init(p.nodes[r].op));
  if (!job.col_layout) return;
  size_t n = p.reduces.size() * size_t(nr);
  rs.cf.resize(n), rs.ci.resize(n), rs.cx.resize(n);
  for (int r : p.reduces) {
    Acc a = acc_init(p.nodes[r].op);
    ColAcc c = rs.col(r);
    std::fill_n(c.f, nr, a.f), std::fill_n(c.i, nr, a.i), std::fill_n(c.idx, nr, a.idx);
  }
}

// A pass whose one step loads float16 or bfloat16 values only reductions read (reduced_load,
// as the column layout's in_place_load): its folds widen them in registers where they lie, with
// the lanes and order of the fold over their float32 tile, so the same bits. Widening the tile
// first was most of a bfloat16 sum's time: the tile's loads waited on memory between folds.
bool narrow_pass(const Job& job, RowState& rs, const StepList& sl, int pass, std::vector<Acc>* accs,
                 int64_t c0, int64_t nc) {
  const int id = job.col_layout ? -1 : reduced_load(job, sl, pass);
  if (id < 0) return false;
  const Program& p = job.p;
  const GLeaf& l = job.g.leaves[p.nodes[id].leaf];
  if (p.ct[id] != CT::F32 || (l.dtype != DType::BFloat16 && l.dtype != DType::Float16) ||
      !job.one_run(l.strides, rs.nr, c0, nc))
    return false;
  int readers = 0;
  for (int r : p.reduces)
    if (p.nodes[r].a == id && (++readers, !narrow_foldable(p.nodes[r].op, p.ct[r]))) return false;
  if (readers == 0) return false;
  const char* src = leaf_ptr(l) + (job.row_base(l.strides, l.offset, rs.r0) + c0) * 2;
  for (int r : p.reduces)
    if (p.nodes[r].a == id)
      fold_narrow(l.dtype, src, rs.nr, nc, accs ? accs->data() + p.acc_slot[r] : rs.acc(r));
  return true;
}

void run_steps(const Job& job, Scratch& s, RowState& rs, const StepList& sl, int pass, bool whole,
               std::vector<Acc>* accs, int64_t c0, int64_t nc, Prefetch* pf) {
  const Program& p = job.p;
  if (!whole && narrow_pass(job, rs, sl, pass, accs, c0, nc)) return;
  auto& full = s.full;
  full.assign(p.nodes.size(), nullptr);
  int64_t per = pf ? pf->lines / int64_t(sl.nodes.size() + 1) + 1 : 0;
  for (size_t k = 0; k < sl.nodes.size(); ++k) {
    int id = sl.nodes[k];
    if (!whole && p.nodes[id].pass > pass) continue;
    void* out = direct_out(job, id, rs, c0, nc);
    float* st = out ? nullptr : stream_out(job, id, rs, c0);
    if (st) out = st;
    const void* v = eval_full(job, s, rs, full, id, out ? out : s.regs[sl.reg[k]].data(), c0, nc,
                              st != nullptr);
    full[id] = v;
    consume(job, rs, id, v, accs, c0, nc, whole ? -1 : pass);
    if (pf) pf->step(per);
  }
  if (pf) pf->step(pf->lines);
}

void row_pass_start(const Job& job, RowState& rs, int pass) {
  for (int id : job.p.row_nodes[pass]) eval_row(job, rs, id);
}

void store_rows(const Job& job, RowState& rs) {
  for (size_t k = 0; k < job.g.outputs.size(); ++k) {
    const GOutput& o = job.g.outputs[k];
    if (job.p.nodes[o.node].space != Space::Row) continue;
    if (o.colsum) {  // a row value summed over the rows: one value
      fold_sums(rs.sums + job.sum_slot[k] * job.sum_stride, job.p.ct[o.node], rs.val(o.node), rs.nr,
                1);
      continue;
    }
    DType dt = job.p.nodes[o.node].dtype;
    char* base = static_cast<char*>(o.st->data());
    dispatch_ct(job.p.ct[o.node], [&](auto t) {
      using T = decltype(t);
      const T* v = reinterpret_cast<const T*>(rs.val(o.node));
      if (job.col_layout) {  // the rows are consecutive along the innermost kept dim
        store_run<T>(base + job.row_base(o.strides, o.offset, rs.r0) * int64_t(itemsize(dt)), dt,
                     o.strides[job.nk - 1], v, rs.nr);
        return;
      }
      if (job.rows_follow(o.strides)) {  // one run for the task's rows
        store_run<T>(base + job.row_base(o.strides, o.offset, rs.r0) * int64_t(itemsize(dt)), dt, 1,
                     v, rs.nr);
        return;
      }
      for (int64_t i = 0; i < rs.nr; ++i)
        store_run<T>(base + job.row_base(o.strides, o.offset, rs.r0 + i) * int64_t(itemsize(dt)),
                     dt, 1, v + i, 1);
    });
  }
}

Scratch& local_scratch() {
  thread_local Scratch s;
  return s;
}

void rows_block(const Job& job, Scratch& s, int64_t r0, int64_t nr, bool whole, Prefetch* pf,
                double* sums) {
  RowState rs;
  rs.vals.swap(s.row_vals);  // reuse the last block's capacity; given back at the end
  rs.accs.swap(s.row_accs);
  init_rows(job, rs, r0, nr);
  rs.sums = sums;
  rows_block_run(job, s, rs, nr, whole, pf);
  rs.vals.swap(s.row_vals);
  rs.accs.swap(s.row_accs);
}

// Partial reductions combine in segment order, so results do not depend on the thread count.
void long_row_parallel(const Job& job, int64_t row, double* sums) {
  const Program& p = job.p;
  const int64_t cols = job.cols;
  RowState rs;
  init_rows(job, rs, row, 1);
  rs.sums = sums;
  for (int pass = 0; pass < p.passes; ++pass) {
    row_pass_start(job, rs, pass);
    const StepList& sl = p.per_pass[pass];
    if (sl.nodes.empty()) continue;
    const int64_t chunk = chunk_of(job, sl);
    const int64_t per_seg = std::max<int64_t>(1, kSegment * kChunk / chunk);
    const int64_t nchunks = (cols + chunk - 1) / chunk;
    const int64_t nseg = (nchunks + per_seg - 1) / per_seg;
    std::vector<std::vector<Acc>> part(nseg);
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, nseg), [&](auto r) {
      Scratch& s = local_scratch();
      s.fit(sl.slots, chunk);
      for (int64_t sg = r.begin(); sg < r.end(); ++sg) {
        auto& acc = part[sg];
        for (int id : p.reduces) acc.push_back(acc_init(p.nodes[id].op));
        RowState local = rs;
        int64_t end = std::min(nchunks, (sg + 1) * per_seg);
        // No software prefetch: a long row is a few unit-stride streams the hardware
        // prefetchers follow, and the prefetch instructions cost more than they hide here
        // (measured: bench/RESULTS.md).
        for (int64_t ch = sg * per_seg; ch < end; ++ch) {
          int64_t c0 = ch * chunk;
          run_steps(job, s, local, sl, pass, false, &acc, c0, std::min(chunk, cols - c0));
        }
      }
      _mm_sfence();
    });
    for (int id : p.reduces) {
      if (p.nodes[p.nodes[id].a].pass != pass) continue;
      for (auto& pa : part)
        combine(p.nodes[id].op, p.ct[p.nodes[id].a], rs.acc(id)[0], pa[p.acc_slot[id]]);
    }
  }
  store_rows(job, rs);
}

}  // namespace loom::cpu::interp
