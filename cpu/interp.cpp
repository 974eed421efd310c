#include "cpu/interp.h"

#include <immintrin.h>
#include <tbb/parallel_for.h>

#include <Eigen/Core>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "tensor/convert.h"
#include "cpu/math.h"
#include "cpu/prims.h"
#include "cpu/vmath.h"
#include "tensor/knobs.h"

namespace loom::cpu {
namespace {

constexpr int64_t kChunk = 2048;      // elements a chunk of a long row (L1-sized registers)
constexpr int64_t kRowBlock = 4096;   // short rows are packed into tiles of about this size
constexpr int64_t kWholeRow = 16384;  // rows up to this long stay in registers: one read
constexpr int64_t kSegment = 32;  // chunks per parallel task in a long row (fixed: deterministic)

// 8-byte slots, so a register can hold any compute type.
using Reg = std::vector<uint64_t>;

struct Operand {
  const void* p;
  int s;  // 1: a register, 0: one value broadcast
};

// LOOM_CPU_PREFETCH (tensor/knobs.h): 0 no software prefetch, 1 into L1 (prefetcht0), 2 into
// L2 (prefetcht1).
int prefetch_mode() { return int(knob_int(Knob::CpuPrefetch)); }

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

// Outputs at least this large are written with streaming (non-temporal) stores: they do not
// fit in cache anyway, and a normal store first reads each line (the write-allocate), a third
// of a pointwise kernel's memory traffic.
constexpr size_t kStreamBytes = size_t(8) << 20;

// dst = src (bytes), the 64-byte-aligned middle with non-temporal stores.
void stream_copy(char* dst, const char* src, int64_t bytes) {
  int64_t head =
      std::min<int64_t>(bytes, int64_t((64 - (reinterpret_cast<uintptr_t>(dst) & 63)) & 63));
  std::memcpy(dst, src, size_t(head));
  dst += head, src += head, bytes -= head;
  for (; bytes >= 64; dst += 64, src += 64, bytes -= 64) {
#if defined(__AVX512F__)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst),
                        _mm512_loadu_si512(reinterpret_cast<const void*>(src)));
#else
    for (int k = 0; k < 64; k += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + k),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k)));
#endif
  }
  std::memcpy(dst, src, size_t(bytes));
}

// Per-thread scratch: registers and broadcast buffers.
struct Scratch {
  std::vector<Reg> regs;
  Reg bc[4];
  std::vector<int64_t> idx;
  std::vector<const void*> full;
  // Row-state buffers handed from one rows_block to the next (no allocation per row).
  std::vector<uint64_t> row_vals;
  std::vector<Acc> row_accs;
  void fit(int slots, int64_t elems) {
    if (int(regs.size()) < slots) regs.resize(slots);
    for (auto& r : regs)
      if (int64_t(r.size()) < elems) r.resize(elems);
    for (auto& b : bc)
      if (int64_t(b.size()) < elems) b.resize(elems);
    if (int64_t(idx.size()) < elems) idx.resize(elems);
  }
};

Scratch& local_scratch() {
  thread_local Scratch s;
  return s;
}

class Runner {
 public:
  Runner(const Program& p, const Group& g) : p_(p), g_(g) {
    rank_ = int(g.space.size());
    nk_ = g.n_kept;
    rows_ = g.rows();
    cols_ = g.cols();
  }

  void run() {
    if (rows_ == 0) return;
    if (cols_ <= kWholeRow) {
      int64_t nr = std::max<int64_t>(1, kRowBlock / std::max<int64_t>(cols_, 1));
      nr = std::min(nr, rows_);
      int64_t blocks = (rows_ + nr - 1) / nr;
      if (blocks == 1) {
        Scratch& s = local_scratch();
        rows_block(s, 0, rows_, true);
        _mm_sfence();
        return;
      }
      int64_t grain = std::max<int64_t>(1, 32768 / (nr * std::max<int64_t>(cols_, 1)));
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, blocks, grain), [&](auto r) {
        Scratch& s = local_scratch();
        for (int64_t b = r.begin(); b < r.end(); ++b) {
          Prefetch pf;
          if (b + 1 < r.end())
            plan_prefetch(pf, b * nr + nr, std::min(nr, rows_ - b * nr - nr), 0, cols_);
          rows_block(s, b * nr, std::min(nr, rows_ - b * nr), true, &pf);
        }
        _mm_sfence();  // streamed stores are visible before the task counts as done
      });
      return;
    }
    if (rows_ >= 8) {
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows_), [&](auto r) {
        Scratch& s = local_scratch();
        for (int64_t row = r.begin(); row < r.end(); ++row) rows_block(s, row, 1, false);
        _mm_sfence();
      });
      return;
    }
    for (int64_t row = 0; row < rows_; ++row) long_row_parallel(row);
  }

 private:
  const Program& p_;
  const Group& g_;
  int rank_, nk_;
  int64_t rows_, cols_;

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
  };

  void init_rows(RowState& rs, int64_t r0, int64_t nr) const {
    rs.r0 = r0, rs.nr = nr, rs.p = &p_;
    rs.vals.assign(size_t(p_.n_row * nr), 0);
    rs.accs.resize(p_.reduces.size() * nr);
    for (int r : p_.reduces)
      std::fill_n(rs.acc(r), nr, acc_init(p_.nodes[r].op));
  }

  int64_t row_base(const Strides& st, int64_t off, int64_t row) const {
    for (int d = nk_ - 1; d >= 0; --d) {
      int64_t sz = g_.space[d];
      off += (row % sz) * st[d];
      row /= sz;
    }
    return off;
  }

  // Calls f(pos, col_offset_for(strides), len) over runs of the innermost dim.
  template <typename F>
  void for_runs(int64_t c0, int64_t nc, const Strides& st, F f) const {
    if (nc <= 0) return;
    int cr = rank_ - nk_;
    if (cr == 0) {
      f(0, int64_t(0), nc);
      return;
    }
    int64_t idx[16];
    int64_t c = c0;
    for (int k = cr - 1; k >= 0; --k) {
      int64_t sz = g_.space[nk_ + k];
      idx[k] = c % sz;
      c /= sz;
    }
    int64_t last = g_.space[rank_ - 1];
    int64_t pos = 0;
    while (pos < nc) {
      int64_t off = 0;
      for (int k = 0; k < cr; ++k) off += idx[k] * st[nk_ + k];
      int64_t len = std::min(nc - pos, last - idx[cr - 1]);
      f(pos, off, len);
      pos += len;
      idx[cr - 1] += len;
      for (int k = cr - 1; k > 0 && idx[k] >= g_.space[nk_ + k]; --k) idx[k] = 0, idx[k - 1]++;
    }
  }

  const char* leaf_ptr(const GLeaf& l) const { return static_cast<const char*>(l.st->data()); }

  // Plans the prefetch of the tile (r0, nr) x (c0, nc): its unit-stride leaves and outputs.
  void plan_prefetch(Prefetch& pf, int64_t r0, int64_t nr, int64_t c0, int64_t nc) const {
    if (rank_ - nk_ != 1 || nc <= 0) return;
    auto lines = [&](const char* p, int64_t bytes, bool write) { pf.add(p, bytes, write); };
    for (int64_t i = 0; i < nr; ++i) {
      for (auto& l : g_.leaves) {
        if (!l.st || l.strides[rank_ - 1] != 1 || l.space != Space::Full) continue;
        int64_t isz = int64_t(itemsize(l.dtype));
        lines(leaf_ptr(l) + (row_base(l.strides, l.offset, r0 + i) + c0) * isz, nc * isz, false);
      }
      for (auto& o : g_.outputs) {
        if (o.strides[rank_ - 1] != 1 || p_.nodes[o.node].space != Space::Full || streams(o))
          continue;
        int64_t isz = int64_t(itemsize(g_.nodes[o.node].dtype));
        lines(static_cast<const char*>(o.st->data()) +
                  (row_base(o.strides, o.offset, r0 + i) + c0) * isz,
              nc * isz, true);
      }
    }
  }

  // ---- evaluation of one node over a tile (Full) or over the task's rows (Row) ----------
  template <typename T>
  void load_full(const GLeaf& l, T* out, int64_t r0, int64_t nr, int64_t c0, int64_t nc) const {
    size_t isz = itemsize(l.dtype);
    int64_t sl = rank_ > nk_ ? l.strides[rank_ - 1] : 0;
    for (int64_t i = 0; i < nr; ++i) {
      int64_t base = row_base(l.strides, l.offset, r0 + i);
      for_runs(c0, nc, l.strides, [&](int64_t pos, int64_t off, int64_t len) {
        load_run<T>(leaf_ptr(l) + (base + off) * int64_t(isz), l.dtype, sl, out + i * nc + pos,
                    len);
      });
    }
  }

  void index_full(const GLeaf& l, int64_t* out, int64_t r0, int64_t nr, int64_t c0,
                  int64_t nc) const {
    int64_t sl = rank_ > nk_ ? l.strides[rank_ - 1] : 0;
    for (int64_t i = 0; i < nr; ++i) {
      int64_t base = row_base(l.strides, l.offset, r0 + i);
      for_runs(c0, nc, l.strides, [&](int64_t pos, int64_t off, int64_t len) {
        int64_t* o = out + i * nc + pos;
        for (int64_t j = 0; j < len; ++j) o[j] = base + off + j * sl;
      });
    }
  }

  template <typename T>
  void store_full(const GOutput& o, const T* src, int64_t r0, int64_t nr, int64_t c0,
                  int64_t nc) const {
    DType dt = g_.nodes[o.node].dtype;
    size_t isz = itemsize(dt);
    char* base_ptr = static_cast<char*>(o.st->data());
    int64_t sl = rank_ > nk_ ? o.strides[rank_ - 1] : 0;
    bool nt = streams(o);
    for (int64_t i = 0; i < nr; ++i) {
      int64_t base = row_base(o.strides, o.offset, r0 + i);
      for_runs(c0, nc, o.strides, [&](int64_t pos, int64_t off, int64_t len) {
        char* dst = base_ptr + (base + off) * int64_t(isz);
        if (nt)
          stream_copy(dst, reinterpret_cast<const char*>(src + i * nc + pos), len * int64_t(isz));
        else
          store_run<T>(dst, dt, sl, src + i * nc + pos, len);
      });
    }
  }

  // One pointwise op over `n` elements (Full tile or Row values).
  // nt: `out` is a streamed output's memory (stream_out); only pair_unary_f32 gets it.
  void apply(const GNode& n, CT out_ct, const Operand* a, void* out, int64_t len,
             bool nt = false) const {
    Op op = n.op;
    const int id = int(&n - p_.nodes.data());
    if (op == Op::Cast || (op == Op::Copy && n.a >= 0)) {
      CT in = p_.ct[n.a];
      if (op == Op::Copy && in == out_ct && a[0].s == 1) {
        std::memcpy(out, a[0].p, size_t(len) * ct_width(out_ct));
        return;
      }
      cast(in, a[0].p, a[0].s, n.dtype, out, len);
      return;
    }
    if (op == Op::Where) {
      dispatch_ct(out_ct, [&](auto t) {
        using T = decltype(t);
        select<T>(static_cast<const uint8_t*>(a[0].p), a[0].s, static_cast<const T*>(a[1].p),
                  a[1].s, static_cast<const T*>(a[2].p), a[2].s, static_cast<T*>(out), len);
      });
      return;
    }
    if (is_unary(op)) {
      CT in = p_.ct[n.a];
      dispatch_ct(in, [&](auto t) {
        using T = decltype(t);
        const T* x = static_cast<const T*>(a[0].p);
        if constexpr (std::is_floating_point_v<T>) {
          if (op == Op::Exp && p_.exp_sub[id]) {
            exp_sub<T>(x, a[0].s, static_cast<const T*>(a[1].p), a[1].s, static_cast<T*>(out), len);
            return;
          }
        }
        const T* src = x;
        std::vector<T> tmp;
        if (a[0].s == 0) {
          tmp.assign(size_t(len), x[0]);
          src = tmp.data();
        }
        pointwise<T>(op, src, 1, nullptr, 0, out, len);
      });
      return;
    }
    if (is_binary(op) && p_.pair_f[id] != Op::Const) {  // float32, `b` a register (program.cpp)
      bool tail = p_.tail_arg[id] >= 0;                 // then a[3] (a, b and c are all set)
      PreOps pre;  // f's input from `b` and constants (Program::pre)
      for (auto& st : p_.pre[id]) {
        if (st.op == Op::Const) continue;
        // the value the Const node has as a float32 row value (eval_row)
        const Scalar& k = g_.scalars[p_.nodes[st.k].scalar];
        pre.op[pre.n] = st.op, pre.k_first[pre.n] = st.k_first;
        pre.k[pre.n++] = k.kind == Scalar::Kind::Float ? float(k.f) : float(k.i);
      }
      pair_unary_f32(p_.pair_op[id], static_cast<const float*>(a[0].p), a[0].s,
                     static_cast<const float*>(a[2].p), a[2].s, op, p_.pair_first[id],
                     p_.pair_f[id], static_cast<const float*>(a[1].p), p_.pair_relu[id],
                     static_cast<float*>(out), len, p_.tail_op[id], p_.tail_first[id],
                     tail ? static_cast<const float*>(a[3].p) : nullptr, tail ? a[3].s : 0, nt,
                     pre);
      return;
    }
    if (is_binary(op) && p_.pair_op[id] != Op::Const) {
      dispatch_ct(out_ct, [&](auto t) {
        using T = decltype(t);
        if constexpr (std::is_floating_point_v<T>)
          binary_pair<T>(p_.pair_op[id], static_cast<const T*>(a[0].p), a[0].s,
                         static_cast<const T*>(a[2].p), a[2].s, op, p_.pair_first[id],
                         static_cast<const T*>(a[1].p), a[1].s, p_.pair_relu[id],
                         static_cast<T*>(out), len);
      });
      return;
    }
    if (is_binary(op)) {
      dispatch_ct(p_.ct[n.a], [&](auto t) {
        using T = decltype(t);
        pointwise<T>(op, static_cast<const T*>(a[0].p), a[0].s, static_cast<const T*>(a[1].p),
                     a[1].s, out, len);
      });
      return;
    }
  }

  // Row-space node over the task's rows.
  void eval_row(RowState& rs, int id) const {
    const GNode& n = p_.nodes[id];
    void* out = rs.val(id);
    CT ct = p_.ct[id];
    if (n.op == Op::Const) {
      const Scalar& s = g_.scalars[n.scalar];
      dispatch_ct(ct, [&](auto t) {
        using T = decltype(t);
        T v = s.kind == Scalar::Kind::Float ? T(s.f) : T(s.i);
        if constexpr (std::is_same_v<T, uint8_t>)
          v = s.kind == Scalar::Kind::Float ? s.f != 0 : s.i != 0;
        std::fill_n(static_cast<T*>(out), rs.nr, v);
      });
      return;
    }
    if (is_reduce(n.op)) {
      acc_values(n.op, ct, rs.acc(id), rs.nr, out);
      return;
    }
    if (is_load(n)) {
      const GLeaf& l = g_.leaves[n.leaf];
      dispatch_ct(ct, [&](auto t) {
        using T = decltype(t);
        for (int64_t i = 0; i < rs.nr; ++i)
          load_run<T>(
              leaf_ptr(l) + row_base(l.strides, l.offset, rs.r0 + i) * int64_t(itemsize(l.dtype)),
              l.dtype, 1, static_cast<T*>(out) + i, 1);
      });
      return;
    }
    if (n.leaf >= 0) {  // index leaves in row space
      const GLeaf& l = g_.leaves[n.leaf];
      std::vector<int64_t> idx(rs.nr);
      for (int64_t i = 0; i < rs.nr; ++i) idx[i] = row_base(l.strides, l.offset, rs.r0 + i);
      index_values(n, idx.data(), out, rs.nr);
      return;
    }
    Operand ops[3];
    int k = 0;
    for (int a : {n.a, n.b, n.c})
      if (a >= 0) ops[k++] = {rs.val(a), 1};
    apply(n, ct, ops, out, rs.nr);
  }

  void index_values(const GNode& n, const int64_t* idx, void* out, int64_t len) const {
    if (n.op == Op::Iota) {
      std::memcpy(out, idx, size_t(len) * 8);
      return;
    }
    uint64_t seed = uint64_t(g_.scalars[n.scalar].i), off = uint64_t(g_.scalars[n.scalar + 1].i);
    if (n.op == Op::Rand)
      philox_uniform(idx, seed, off, static_cast<float*>(out), len);
    else
      philox_normal(idx, seed, off, static_cast<float*>(out), len);
  }

  // A load that can read memory in place: same type as computed, one unit-stride run.
  const void* direct(int id, const RowState& rs, int64_t c0) const {
    const GNode& n = p_.nodes[id];
    if (p_.load_copy[id]) return nullptr;
    const GLeaf& l = g_.leaves[n.leaf];
    if (rs.nr != 1 || rank_ - nk_ != 1 || l.strides[rank_ - 1] != 1) return nullptr;
    if (compute_dtype(l.dtype) != l.dtype || l.dtype == DType::Bool) return nullptr;
    int64_t off = row_base(l.strides, l.offset, rs.r0) + c0;
    return leaf_ptr(l) + off * int64_t(itemsize(l.dtype));
  }

  // A large output in the compute type, unit stride along the tile: streamed (see
  // kStreamBytes). Its writes need an sfence before others read them (end of each task).
  bool streams(const GOutput& o) const {
    DType dt = g_.nodes[o.node].dtype;
    return o.st->nbytes >= kStreamBytes && rank_ - nk_ == 1 && o.strides[rank_ - 1] == 1 &&
           compute_dtype(dt) == dt && dt != DType::Bool && p_.nodes[o.node].space == Space::Full;
  }

  // Where output node `id` can be computed in place: its memory for this tile, when the tile
  // is one unit-stride run of it in the compute type (no store pass afterwards), else null.
  void* direct_out(int id, const RowState& rs, int64_t c0) const {
    if (rs.nr != 1 || rank_ - nk_ != 1 || p_.nodes[id].space != Space::Full) return nullptr;
    for (auto& o : g_.outputs) {
      if (o.node != id) continue;
      if (streams(o)) return nullptr;  // computed in a register, then streamed out
      DType dt = g_.nodes[id].dtype;
      if (o.strides[rank_ - 1] != 1 || compute_dtype(dt) != dt || dt == DType::Bool) return nullptr;
      int64_t off = row_base(o.strides, o.offset, rs.r0) + c0;
      return static_cast<char*>(o.st->data()) + off * int64_t(itemsize(dt));
    }
    return nullptr;
  }

  // A streamed output (streams()) that its own instruction writes with non-temporal stores,
  // instead of computing it into a register and copying that out (a pass over the tile):
  // pair_unary_f32 instructions, one 64-byte-aligned unit-stride run of the output. Its
  // memory for this tile, else null. LOOM_CPU_STREAM_DIRECT=0 turns it off.
  float* stream_out(int id, const RowState& rs, int64_t c0) const {
    static const bool on = knob_flag(Knob::CpuStreamDirect);
    if (!on || rs.nr != 1 || rank_ - nk_ != 1 || p_.pair_f[id] == Op::Const) return nullptr;
    float* hit = nullptr;
    for (auto& o : g_.outputs) {
      if (o.node != id) continue;
      if (hit || !streams(o)) return nullptr;  // stored twice, or not streamed: as before
      hit = static_cast<float*>(o.st->data()) + row_base(o.strides, o.offset, rs.r0) + c0;
    }
    return reinterpret_cast<uintptr_t>(hit) & 63 ? nullptr : hit;
  }

  // Full node over the tile (r0, nr) x (c0, nc); returns where its values are (`out`, or
  // the input memory itself for a load that needs no conversion). nt: see apply().
  const void* eval_full(Scratch& s, const RowState& rs, const std::vector<const void*>& full,
                        int id, void* out, int64_t c0, int64_t nc, bool nt = false) const {
    const GNode& n = p_.nodes[id];
    int64_t len = rs.nr * nc;
    CT ct = p_.ct[id];
    if (is_load(n)) {
      if (const void* p = direct(id, rs, c0)) return p;
      dispatch_ct(ct, [&](auto t) {
        using T = decltype(t);
        load_full<T>(g_.leaves[n.leaf], static_cast<T*>(out), rs.r0, rs.nr, c0, nc);
      });
      return out;
    }
    if (n.leaf >= 0) {
      index_full(g_.leaves[n.leaf], s.idx.data(), rs.r0, rs.nr, c0, nc);
      index_values(n, s.idx.data(), out, len);
      return out;
    }
    Operand ops[4];
    int k = 0;
    for (int a : {n.a, n.b, n.c, p_.tail_arg[id]}) {
      if (a < 0) continue;
      if (p_.nodes[a].space == Space::Full) {
        ops[k] = {full[a], 1};
      } else if (rs.nr == 1) {
        ops[k] = {rs.val(a), 0};
      } else {  // one value per row: spread each over its row of the tile
        size_t w = ct_width(p_.ct[a]);
        char* dst = reinterpret_cast<char*>(s.bc[k].data());
        const char* src = reinterpret_cast<const char*>(rs.val(a));
        for (int64_t i = 0; i < rs.nr; ++i)
          for (int64_t j = 0; j < nc; ++j) std::memcpy(dst + (i * nc + j) * w, src + i * w, w);
        ops[k] = {dst, 1};
      }
      ++k;
    }
    apply(n, ct, ops, out, len, nt);
    return out;
  }

  // Runs steps over one tile; reductions accumulate and outputs store as values appear.
  void run_steps(Scratch& s, RowState& rs, const StepList& sl, int pass, bool whole,
                 std::vector<Acc>* accs, int64_t c0, int64_t nc, Prefetch* pf = nullptr) const {
    auto& full = s.full;
    full.assign(p_.nodes.size(), nullptr);
    int64_t per = pf ? pf->lines / int64_t(sl.nodes.size() + 1) + 1 : 0;
    for (size_t k = 0; k < sl.nodes.size(); ++k) {
      int id = sl.nodes[k];
      if (!whole && p_.nodes[id].pass > pass) continue;
      void* out = direct_out(id, rs, c0);
      float* st = out ? nullptr : stream_out(id, rs, c0);
      if (st) out = st;
      const void* v =
          eval_full(s, rs, full, id, out ? out : s.regs[sl.reg[k]].data(), c0, nc, st != nullptr);
      full[id] = v;
      consume(rs, id, v, accs, c0, nc, whole ? -1 : pass);
      if (pf) pf->step(per);
    }
    if (pf) pf->step(pf->lines);
  }

  void consume(RowState& rs, int id, const void* v, std::vector<Acc>* accs, int64_t c0, int64_t nc,
               int pass) const {
    for (int r : p_.reduces) {
      const GNode& rn = p_.nodes[r];
      if (rn.a != id || (pass >= 0 && p_.nodes[id].pass != pass)) continue;
      Acc* acc = accs ? accs->data() + p_.acc_slot[r] : rs.acc(r);
      fold(rn.op, p_.ct[id], p_.ct[r], v, rs.nr, nc, c0, acc);
    }
    if (pass >= 0 && pass != p_.last) return;
    const void* in_place = nullptr;
    bool looked = false;
    for (auto& o : g_.outputs) {
      if (o.node != id) continue;
      if (!looked) {
        in_place = direct_out(id, rs, c0), looked = true;
        if (!in_place) in_place = stream_out(id, rs, c0);
      }
      if (v == in_place) continue;  // computed straight into the output
      dispatch_ct(p_.ct[id], [&](auto t) {
        using T = decltype(t);
        store_full<T>(o, static_cast<const T*>(v), rs.r0, rs.nr, c0, nc);
      });
    }
  }

  void row_pass_start(RowState& rs, int pass) const {
    for (int id : p_.row_nodes[pass]) eval_row(rs, id);
  }

  void store_rows(RowState& rs) const {
    for (auto& o : g_.outputs) {
      if (p_.nodes[o.node].space != Space::Row) continue;
      DType dt = p_.nodes[o.node].dtype;
      char* base = static_cast<char*>(o.st->data());
      dispatch_ct(p_.ct[o.node], [&](auto t) {
        using T = decltype(t);
        const T* v = reinterpret_cast<const T*>(rs.val(o.node));
        for (int64_t i = 0; i < rs.nr; ++i)
          store_run<T>(base + row_base(o.strides, o.offset, rs.r0 + i) * int64_t(itemsize(dt)), dt,
                       1, v + i, 1);
      });
    }
  }

  // Rows [r0, r0+nr): every pass, whole rows in one tile or long rows in chunks.
  void rows_block(Scratch& s, int64_t r0, int64_t nr, bool whole, Prefetch* pf = nullptr) {
    RowState rs;
    rs.vals.swap(s.row_vals);  // reuse the last block's capacity; given back at the end
    rs.accs.swap(s.row_accs);
    init_rows(rs, r0, nr);
    rows_block_run(s, rs, nr, whole, pf);
    rs.vals.swap(s.row_vals);
    rs.accs.swap(s.row_accs);
  }

  void rows_block_run(Scratch& s, RowState& rs, int64_t nr, bool whole, Prefetch* pf) {
    if (whole) {
      s.fit(p_.single.slots, nr * cols_);
      auto& full = s.full;
      full.assign(p_.nodes.size(), nullptr);
      int64_t per = pf ? pf->lines / int64_t(p_.single.nodes.size() + 1) + 1 : 0;
      // Whole rows: walk passes in order; each Full node is computed once.
      size_t k = 0;
      for (int pass = 0; pass < p_.passes; ++pass) {
        row_pass_start(rs, pass);
        for (; k < p_.single.nodes.size() && p_.nodes[p_.single.nodes[k]].pass == pass; ++k) {
          int id = p_.single.nodes[k];
          void* out = direct_out(id, rs, 0);
          float* st = out ? nullptr : stream_out(id, rs, 0);
          if (st) out = st;
          const void* v = eval_full(s, rs, full, id, out ? out : s.regs[p_.single.reg[k]].data(), 0,
                                    cols_, st != nullptr);
          full[id] = v;
          consume(rs, id, v, nullptr, 0, cols_, -1);
          if (pf) pf->step(per);
        }
      }
      if (pf) pf->step(pf->lines);
      store_rows(rs);
      return;
    }
    for (int pass = 0; pass < p_.passes; ++pass) {
      row_pass_start(rs, pass);
      const StepList& sl = p_.per_pass[pass];
      if (sl.nodes.empty()) continue;
      s.fit(sl.slots, nr * kChunk);
      for (int64_t c0 = 0; c0 < cols_; c0 += kChunk)
        run_steps(s, rs, sl, pass, false, nullptr, c0, std::min(kChunk, cols_ - c0));
    }
    store_rows(rs);
  }

  // One long row: each pass splits the row into fixed segments run in parallel; partial
  // reductions combine in segment order, so results do not depend on the thread count.
  void long_row_parallel(int64_t row) {
    RowState rs;
    init_rows(rs, row, 1);
    int64_t nchunks = (cols_ + kChunk - 1) / kChunk;
    int64_t nseg = (nchunks + kSegment - 1) / kSegment;
    for (int pass = 0; pass < p_.passes; ++pass) {
      row_pass_start(rs, pass);
      const StepList& sl = p_.per_pass[pass];
      if (sl.nodes.empty()) continue;
      std::vector<std::vector<Acc>> part(nseg);
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, nseg), [&](auto r) {
        Scratch& s = local_scratch();
        s.fit(sl.slots, kChunk);
        for (int64_t sg = r.begin(); sg < r.end(); ++sg) {
          auto& acc = part[sg];
          for (int id : p_.reduces) acc.push_back(acc_init(p_.nodes[id].op));
          RowState local = rs;
          int64_t end = std::min(nchunks, (sg + 1) * kSegment);
          for (int64_t ch = sg * kSegment; ch < end; ++ch) {
            int64_t c0 = ch * kChunk;
            Prefetch pf;
            if (ch + 1 < end)
              plan_prefetch(pf, row, 1, c0 + kChunk, std::min(kChunk, cols_ - c0 - kChunk));
            run_steps(s, local, sl, pass, false, &acc, c0, std::min(kChunk, cols_ - c0), &pf);
          }
        }
        _mm_sfence();
      });
      for (int id : p_.reduces) {
        if (p_.nodes[p_.nodes[id].a].pass != pass) continue;
        for (auto& pa : part)
          combine(p_.nodes[id].op, p_.ct[p_.nodes[id].a], rs.acc(id)[0], pa[p_.acc_slot[id]]);
      }
    }
    store_rows(rs);
  }
};

}  // namespace

void run_program(const Program& p, const Group& g) { Runner(p, g).run(); }

}  // namespace loom::cpu
