// The evaluation of one node of a tile program: over a tile (Full nodes) or over the task's
// rows (Row nodes), by the instruction its op and folds pick.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu/arith.h"
#include "cpu/interp_job.h"
#include "cpu/math.h"
#include "cpu/vmath.h"
#include "tensor/convert.h"

namespace loom::cpu::interp {
namespace {

// One pointwise op over `n` elements (Full tile or Row values).
// nt: `out` is a streamed output's memory (stream_out); only pair_unary_f32 gets it.
void apply_op(const Job& job, const GNode& n, CT out_ct, const Operand* a, void* out, int64_t len,
              bool nt) {
  const Program& p = job.p;
  Op op = n.op;
  const int id = int(&n - p.nodes.data());
  if (op == Op::Cast || (op == Op::Copy && n.a >= 0)) {
    CT in = p.ct[n.a];
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
      select<T>(static_cast<const uint8_t*>(a[0].p), a[0].s, static_cast<const T*>(a[1].p), a[1].s,
                static_cast<const T*>(a[2].p), a[2].s, static_cast<T*>(out), len);
    });
    return;
  }
  if (is_unary(op)) {
    CT in = p.ct[n.a];
    dispatch_ct(in, [&](auto t) {
      using T = decltype(t);
      const T* x = static_cast<const T*>(a[0].p);
      if constexpr (std::is_floating_point_v<T>) {
        if (op == Op::Exp && p.exp_sub[id]) {
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
      if (unary_kind(op) == UnaryKind::BoolOut)
        unary_bool<T>(op, src, static_cast<uint8_t*>(out), len);
      else
        unary<T>(op, src, static_cast<T*>(out), len);
    });
    return;
  }
  if (is_binary(op) && p.pair_f[id] != Op::Const) {  // float32, `b` a register (program.cpp)
    bool tail = p.tail_arg[id] >= 0;                 // then a[3] (a, b and c are all set)
    PreOps pre;  // f's input from `b` and constants (Program::pre)
    for (auto& st : p.pre[id]) {
      if (st.op == Op::Const) continue;
      // the value the Const node has as a float32 row value (eval_row)
      const Scalar& k = job.g.scalars[p.nodes[st.k].scalar];
      pre.op[pre.n] = st.op, pre.k_first[pre.n] = st.k_first;
      pre.k[pre.n++] = k.kind == Scalar::Kind::Float ? float(k.f) : float(k.i);
    }
    pair_unary_f32(p.pair_op[id], static_cast<const float*>(a[0].p), a[0].s,
                   static_cast<const float*>(a[2].p), a[2].s, op, p.pair_first[id], p.pair_f[id],
                   static_cast<const float*>(a[1].p), p.pair_relu[id], static_cast<float*>(out),
                   len, p.tail_op[id], p.tail_first[id],
                   tail ? static_cast<const float*>(a[3].p) : nullptr, tail ? a[3].s : 0, nt, pre);
    return;
  }
  if (is_binary(op) && p.pair_op[id] != Op::Const) {
    dispatch_ct(out_ct, [&](auto t) {
      using T = decltype(t);
      if constexpr (std::is_floating_point_v<T>)
        binary_pair<T>(p.pair_op[id], static_cast<const T*>(a[0].p), a[0].s,
                       static_cast<const T*>(a[2].p), a[2].s, op, p.pair_first[id],
                       static_cast<const T*>(a[1].p), a[1].s, p.pair_relu[id], static_cast<T*>(out),
                       len);
    });
    return;
  }
  if (is_binary(op)) {
    auto k = binary_kind(op);
    dispatch_ct(p.ct[n.a], [&](auto t) {
      using T = decltype(t);
      const T* x = static_cast<const T*>(a[0].p);
      const T* y = static_cast<const T*>(a[1].p);
      if (k == BinaryKind::Compare || k == BinaryKind::Logical)
        binary_bool<T>(op, x, a[0].s, y, a[1].s, static_cast<uint8_t*>(out), len);
      else
        binary<T>(op, x, a[0].s, y, a[1].s, static_cast<T*>(out), len);
    });
    return;
  }
}

// apply_op, then a narrow integer's values wrapped to its type (cpu/math.h wrap_run), as its
// store would wrap them: an int8 100 + 100 is -56 to a later op of the same kernel too. Cast
// and Copy wrap as they convert; Where picks values already of the type (a Const is not
// applied: eval_row fills it with the scalar as it is).
void apply(const Job& job, const GNode& n, CT out_ct, const Operand* a, void* out, int64_t len,
           bool nt = false) {
  apply_op(job, n, out_ct, a, out, len, nt);
  if (is_narrow_int(n.dtype) && n.op != Op::Cast && n.op != Op::Copy && n.op != Op::Where)
    wrap_run(out_ct, n.dtype, out, len);
}

void index_values(const Job& job, const GNode& n, const int64_t* idx, void* out, int64_t len) {
  if (n.op == Op::Iota) {
    std::memcpy(out, idx, size_t(len) * 8);
    return;
  }
  const auto& sc = job.g.scalars;
  uint64_t seed = uint64_t(sc[n.scalar].i), off = uint64_t(sc[n.scalar + 1].i);
  if (n.op == Op::Rand)
    philox_uniform(idx, seed, off, static_cast<float*>(out), len);
  else
    philox_normal(idx, seed, off, static_cast<float*>(out), len);
}

#if defined(__AVX512F__)
// out = x op r (r op x where row_first) for Add, Sub, Mul, Div of float32, x a tile of nr rows
// of nc and r one value per row, held in a register for its row: what binary() gives on the
// values spread over the tile, without the spread (a write and a read of the tile).
void rows_binary_f32(Op op, const float* x, const float* r, bool row_first, int64_t nr, int64_t nc,
                     float* out) {
  with_op<true>(op, row_first, [&](auto o, auto swap) {
    constexpr Op O = decltype(o)::value;
    constexpr bool Swap = decltype(swap)::value;
    const __mmask16 tail = __mmask16((1u << (nc % 16)) - 1);
    for (int64_t i = 0; i < nr; ++i, x += nc, out += nc) {
      const __m512 v = _mm512_set1_ps(r[i]);
      int64_t j = 0;
      for (; j + 16 <= nc; j += 16)
        _mm512_storeu_ps(out + j, arith<O, Swap>(_mm512_loadu_ps(x + j), v));
      if (j < nc)
        _mm512_mask_storeu_ps(out + j, tail, arith<O, Swap>(_mm512_maskz_loadu_ps(tail, x + j), v));
    }
  });
}
#endif

// d (nr rows of nc) = each row's value src[i] over its row: full-width vector stores, a
// masked one for a row's remainder, as a short row's tile does it once a row operand.
template <typename T>
void spread_rows(const T* src, int64_t nr, int64_t nc, T* d) {
#if defined(__AVX512F__)
  if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
    constexpr int64_t L = 64 / sizeof(T);
    const __mmask16 tail = __mmask16((1u << (nc % L)) - 1);
    for (int64_t i = 0; i < nr; ++i, d += nc) {
      uint64_t bits = 0;
      std::memcpy(&bits, src + i, sizeof(T));
      __m512i v =
          sizeof(T) == 4 ? _mm512_set1_epi32(int32_t(bits)) : _mm512_set1_epi64(int64_t(bits));
      int64_t j = 0;
      for (; j + L <= nc; j += L) _mm512_storeu_si512(d + j, v);
      if (j < nc) {
        if constexpr (sizeof(T) == 4)
          _mm512_mask_storeu_epi32(d + j, tail, v);
        else
          _mm512_mask_storeu_epi64(d + j, __mmask8(tail), v);
      }
    }
    return;
  }
#endif
  for (int64_t i = 0; i < nr; ++i) std::fill_n(d + i * nc, nc, src[i]);  // vector stores
}

}  // namespace

void eval_row(const Job& job, RowState& rs, int id) {
  const GNode& n = job.p.nodes[id];
  void* out = rs.val(id);
  CT ct = job.p.ct[id];
  if (n.op == Op::Const) {
    const Scalar& s = job.g.scalars[n.scalar];
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
    const GLeaf& l = job.g.leaves[n.leaf];
    dispatch_ct(ct, [&](auto t) {
      using T = decltype(t);
      if (job.col_layout) {  // the rows are consecutive along the innermost kept dim
        load_run<T>(
            leaf_ptr(l) + job.row_base(l.strides, l.offset, rs.r0) * int64_t(itemsize(l.dtype)),
            l.dtype, l.strides[job.nk - 1], static_cast<T*>(out), rs.nr);
        return;
      }
      for (int64_t i = 0; i < rs.nr; ++i)
        load_run<T>(
            leaf_ptr(l) + job.row_base(l.strides, l.offset, rs.r0 + i) * int64_t(itemsize(l.dtype)),
            l.dtype, 1, static_cast<T*>(out) + i, 1);
    });
    return;
  }
  if (n.op == Op::Gather) {  // a row gather (Rule::RowGather): x[row, clamp(t)] from memory
    const GLeaf& l = job.g.leaves[job.p.nodes[n.a].leaf];
    const int64_t len = job.rank > job.nk ? job.cols : 1;  // (a reduced dim of 1 is dropped)
    const int64_t step = job.rank > job.nk ? l.strides[job.rank - 1] : 0;
    dispatch_ct(job.p.ct[n.b], [&](auto it) {
      using I = decltype(it);
      if constexpr (std::is_integral_v<I>) {
        const I* t = reinterpret_cast<const I*>(rs.val(n.b));
        const bool varies = job.p.nodes[n.b].op != Op::Const;
        dispatch_ct(ct, [&](auto vt) {
          using T = decltype(vt);
          for (int64_t i = 0; i < rs.nr; ++i) {
            const int64_t k = std::clamp<int64_t>(int64_t(t[varies ? i : 0]), 0, len - 1);
            const int64_t at = job.row_base(l.strides, l.offset, rs.r0 + i) + k * step;
            load_run<T>(leaf_ptr(l) + at * int64_t(itemsize(l.dtype)), l.dtype, 1,
                        static_cast<T*>(out) + i, 1);
          }
        });
      }
    });
    return;
  }
  if (n.leaf >= 0) {  // index leaves in row space
    const GLeaf& l = job.g.leaves[n.leaf];
    std::vector<int64_t> idx(rs.nr);
    for (int64_t i = 0; i < rs.nr; ++i) idx[i] = job.row_base(l.strides, l.offset, rs.r0 + i);
    index_values(job, n, idx.data(), out, rs.nr);
    return;
  }
  Operand ops[3];
  int k = 0;
  for (int a : {n.a, n.b, n.c})
    if (a >= 0) ops[k++] = {rs.val(a), 1};
  apply(job, n, ct, ops, out, rs.nr);
}

namespace {

// Program::idx_eq: eq / ne of the position along the row and a value per row, set a row at a
// time (the compare's values exactly: each row matches at most one position).
void index_compare(const Job& job, const RowState& rs, const std::vector<const void*>& full, int id,
                   void* out, int64_t c0, int64_t nc) {
  const Program& p = job.p;
  const GNode& n = p.nodes[id];
  const bool ne = n.op == Op::Ne;
  const int64_t nr = rs.nr;
  uint8_t* o = static_cast<uint8_t*>(out);
  std::memset(o, ne ? 1 : 0, size_t(nr * nc));
  const int64_t first = job.g.leaves[size_t(p.idx_eq[id])].offset + c0;  // column c0's position
  const GNode& t = p.nodes[n.a];
  const bool full_t = t.space == Space::Full, varies = !full_t && t.op != Op::Const;
  dispatch_ct(p.ct[n.a], [&](auto ty) {
    using T = decltype(ty);
    if constexpr (std::is_integral_v<T>) {
      const T* v =
          full_t ? static_cast<const T*>(full[n.a]) : reinterpret_cast<const T*>(rs.val(n.a));
      for (int64_t i = 0; i < nr; ++i) {
        // A Full value is the same across the row: its column 0 (row layout: the row's first
        // element; column layout: the rows of column 0 are the first nr values).
        const int64_t k =
            int64_t(v[full_t ? (job.col_layout ? i : i * nc) : (varies ? i : 0)]) - first;
        if (k >= 0 && k < nc) o[job.col_layout ? k * nr + i : i * nc + k] = ne ? 0 : 1;
      }
    }
  });
}

}  // namespace

const void* eval_full(const Job& job, Scratch& s, const RowState& rs,
                      const std::vector<const void*>& full, int id, void* out, int64_t c0,
                      int64_t nc, bool nt) {
  const Program& p = job.p;
  const GNode& n = p.nodes[id];
  int64_t len = rs.nr * nc;
  CT ct = p.ct[id];
  if (is_load(n)) {
    if (const void* d = direct(job, id, rs, c0, nc)) return d;
    load_full(job, ct, job.g.leaves[n.leaf], out, rs.r0, rs.nr, c0, nc);
    return out;
  }
  if (p.store_cast[id]) return full[n.a];  // the store rounds (Program::store_cast)
  if (n.leaf >= 0) {
    index_full(job, job.g.leaves[n.leaf], s.idx.data(), rs.r0, rs.nr, c0, nc);
    index_values(job, n, s.idx.data(), out, len);
    return out;
  }
  if (p.idx_eq[id] >= 0) {
    index_compare(job, rs, full, id, out, c0, nc);
    return out;
  }
  Operand ops[4];
  int k = 0;
  const int args[4] = {n.a, n.b, n.c, p.tail_arg[id]};
  // A per-row operand whose rows differ: a Row node but a Const (the same in every row, read
  // as one value broadcast).
  auto varies = [&](int a) {
    return a >= 0 && p.nodes[a].space != Space::Full && p.nodes[a].op != Op::Const;
  };
#if defined(__AVX512F__)
  // A plain float32 Add/Sub/Mul/Div of tile values and per-row values over short rows.
  if (rs.nr > 1 && !job.col_layout && ct == CT::F32 && n.c < 0 && p.tail_arg[id] < 0 &&
      p.pair_op[id] == Op::Const && p.pair_f[id] == Op::Const && !p.pair_relu[id] &&
      (n.op == Op::Add || n.op == Op::Sub || n.op == Op::Mul || n.op == Op::Div) &&
      p.ct[n.a] == CT::F32 && p.ct[n.b] == CT::F32) {
    const bool ra = varies(n.a), rb = varies(n.b);
    if (ra != rb && p.nodes[ra ? n.b : n.a].space == Space::Full) {
      rows_binary_f32(n.op, static_cast<const float*>(full[ra ? n.b : n.a]),
                      reinterpret_cast<const float*>(rs.val(ra ? n.a : n.b)), ra, rs.nr, nc,
                      static_cast<float*>(out));
      return out;
    }
  }
#endif
  if (rs.nr > 1 && !job.col_layout && nc >= kRowCall) {
    bool per_row = false;
    for (int a : args) per_row |= varies(a);
    if (per_row) {  // long enough rows: one call a row, its per-row values as scalars
      for (int64_t i = 0; i < rs.nr; ++i) {
        k = 0;
        for (int a : args) {
          if (a < 0) continue;
          size_t w = ct_width(p.ct[a]);
          ops[k++] = p.nodes[a].space == Space::Full
                         ? Operand{static_cast<const char*>(full[a]) + i * nc * int64_t(w), 1}
                         : Operand{reinterpret_cast<const char*>(rs.val(a)) +
                                       (varies(a) ? i * int64_t(w) : 0),
                                   0};
        }
        apply(job, n, ct, ops, static_cast<char*>(out) + i * nc * int64_t(ct_width(ct)), nc, nt);
      }
      return out;
    }
  }
  for (int a : args) {
    if (a < 0) continue;
    if (p.nodes[a].space == Space::Full) {
      ops[k] = {full[a], 1};
    } else if (rs.nr == 1 || !varies(a)) {
      ops[k] = {rs.val(a), 0};
    } else {  // one value per row: spread each over its row of the tile
      void* dst = s.bc[k].data();
      dispatch_ct(p.ct[a], [&](auto t) {
        using T = decltype(t);
        const T* src = reinterpret_cast<const T*>(rs.val(a));
        T* d = static_cast<T*>(dst);
        if (job.col_layout)  // each column of the tile is the rows' values in order
          for (int64_t j = 0; j < nc; ++j) std::copy_n(src, rs.nr, d + j * rs.nr);
        else
          spread_rows(src, rs.nr, nc, d);
      });
      ops[k] = {dst, 1};
    }
    ++k;
  }
  apply(job, n, ct, ops, out, len, nt);
  return out;
}

}  // namespace loom::cpu::interp
