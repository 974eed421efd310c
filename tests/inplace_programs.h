#pragma once
// Short eager programs over a small alphabet of steps (pure ops, in-place updates of whole
// tensors and through views, clones, sync points) on two starting tensors, enumerated
// exhaustively, each run fused and with fusion off and checked exactly, every live tensor at the
// end, against each other and against a host model of eager semantics. Values are small
// integers, exact in float32, so a read of a wrong version shows as a different value.
// tests/test_inplace_programs.cpp runs them on the CPU, tests/cuda/test_gpu_inplace.cpp on a GPU.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "helpers.h"

namespace lt::inplace {

using loom::DType;
using loom::Tensor;

constexpr int64_t kRows = 3, kCols = 2;  // the starting tensors' shape

// The view an in-place update writes through (and reads its tensor operand through).
enum class Vw : uint8_t { Whole, T, Rows };
// The operand of an update: a scalar, another live tensor through the same view, or the first
// row of that view expanded over the view (a broadcast read).
enum class Opd : uint8_t { Scalar, Tensor, Expand };
// Scale: t_i * 2. Sum: t_i + t_j. Clone: t_i.clone(). Sync: loom::sync(). Add: t_i[v].add_(o).
// Mul: t_i[v].mul_(o). Copy: t_i[v].copy_(o) (fill_ for a scalar operand).
enum class Kind : uint8_t { Scale, Sum, Clone, Sync, Add, Mul, Copy };

inline bool is_update(Kind k) { return k == Kind::Add || k == Kind::Mul || k == Kind::Copy; }
// The scalar operand of each update kind.
inline double scalar_of(Kind k) { return k == Kind::Add ? 3 : k == Kind::Mul ? -2 : 9; }

struct Stmt {
  Kind k;
  int i = 0, j = 0;
  Vw v = Vw::Whole;
  Opd o = Opd::Scalar;
};

inline const char* view_text(Vw v) { return v == Vw::Whole ? "" : v == Vw::T ? ".t()" : "[1:]"; }

inline std::string text(const std::vector<Stmt>& p) {
  std::string s;
  int live = 2;
  for (const Stmt& st : p) {
    char buf[96];
    // (appended, not "t" + ...: GCC 12 warns falsely of an overflow in that operator+)
    std::string ti = "t", tj = "t";
    ti += std::to_string(st.i), tj += std::to_string(st.j);
    switch (st.k) {
      case Kind::Scale:
        std::snprintf(buf, sizeof buf, "t%d = %s * 2; ", live++, ti.c_str());
        break;
      case Kind::Sum:
        std::snprintf(buf, sizeof buf, "t%d = %s + %s; ", live++, ti.c_str(), tj.c_str());
        break;
      case Kind::Clone:
        std::snprintf(buf, sizeof buf, "t%d = %s.clone(); ", live++, ti.c_str());
        break;
      case Kind::Sync:
        std::snprintf(buf, sizeof buf, "sync; ");
        break;
      case Kind::Add:
      case Kind::Mul:
      case Kind::Copy: {
        const char* v = view_text(st.v);
        std::string o = st.o == Opd::Scalar   ? std::to_string(int(scalar_of(st.k)))
                        : st.o == Opd::Tensor ? tj + v
                                              : tj + v + "[0:1].expand";
        const char* op = st.k == Kind::Add   ? "add_"
                         : st.k == Kind::Mul ? "mul_"
                                             : (st.o == Opd::Scalar ? "fill_" : "copy_");
        std::snprintf(buf, sizeof buf, "%s%s.%s(%s); ", ti.c_str(), v, op, o.c_str());
        break;
      }
    }
    s += buf;
  }
  return s;
}

// ---- the host model: buffers of doubles and strided views of them ----------------------------

struct MView {
  int buf;
  int64_t off;
  std::array<int64_t, 2> shape, st;
};

struct Model {
  DType dt;  // each result is rounded to it, as one op of loom rounds once
  std::vector<std::vector<double>> bufs;
  std::vector<MView> live;

  double round(double x) const {
    if (dt == DType::Float32) return double(float(x));
    if (dt == DType::Int32) return double(int32_t(uint32_t(int64_t(x))));
    return x;
  }

  int64_t numel(const MView& v) const { return v.shape[0] * v.shape[1]; }
  std::vector<double> read(const MView& v) const {
    std::vector<double> r;
    for (int64_t a = 0; a < v.shape[0]; ++a)
      for (int64_t b = 0; b < v.shape[1]; ++b)
        r.push_back(bufs[v.buf][v.off + a * v.st[0] + b * v.st[1]]);
    return r;
  }
  void write(const MView& v, const std::vector<double>& x) {
    size_t k = 0;
    for (int64_t a = 0; a < v.shape[0]; ++a)
      for (int64_t b = 0; b < v.shape[1]; ++b)
        bufs[v.buf][v.off + a * v.st[0] + b * v.st[1]] = x[k++];
  }
  void fresh(std::vector<double> x) {
    bufs.push_back(std::move(x));
    live.push_back({int(bufs.size()) - 1, 0, {kRows, kCols}, {kCols, 1}});
  }
  static MView view(MView t, Vw v) {
    if (v == Vw::T) std::swap(t.shape[0], t.shape[1]), std::swap(t.st[0], t.st[1]);
    if (v == Vw::Rows) t.off += t.st[0], t.shape[0] -= 1;
    return t;
  }
  // The operand's values over the target view's shape.
  std::vector<double> operand(const Stmt& s, double scalar) const {
    MView t = view(live[s.i], s.v);
    if (s.o == Opd::Scalar) return std::vector<double>(size_t(numel(t)), scalar);
    MView u = view(live[s.j], s.v);
    std::vector<double> r = read(u);
    if (s.o == Opd::Expand)
      for (size_t k = 0; k < r.size(); ++k) r[k] = r[k % size_t(u.shape[1])];
    return r;
  }
  void run(const Stmt& s) {
    switch (s.k) {
      case Kind::Scale: {
        auto x = read(live[s.i]);
        for (auto& e : x) e = round(e * 2);
        fresh(x);
        break;
      }
      case Kind::Sum: {
        auto x = read(live[s.i]), y = read(live[s.j]);
        for (size_t k = 0; k < x.size(); ++k) x[k] = round(x[k] + y[k]);
        fresh(x);
        break;
      }
      case Kind::Clone:
        fresh(read(live[s.i]));
        break;
      case Kind::Sync:
        break;
      case Kind::Add:
      case Kind::Mul: {
        MView t = view(live[s.i], s.v);
        auto x = read(t), o = operand(s, scalar_of(s.k));
        for (size_t k = 0; k < x.size(); ++k)
          x[k] = round(s.k == Kind::Add ? x[k] + o[k] : x[k] * o[k]);
        write(t, x);
        break;
      }
      case Kind::Copy:
        write(view(live[s.i], s.v), operand(s, scalar_of(s.k)));
        break;
    }
  }
};

// ---- the same program in loom ----------------------------------------------------------------

inline Tensor view_of(const Tensor& t, Vw v) {
  if (v == Vw::T) return t.t();
  if (v == Vw::Rows) return t.slice(0, 1, std::nullopt);
  return t;
}

inline void run(std::vector<Tensor>& live, const Stmt& s) {
  switch (s.k) {
    case Kind::Scale:
      live.push_back(live[s.i] * 2);
      break;
    case Kind::Sum:
      live.push_back(live[s.i] + live[s.j]);
      break;
    case Kind::Clone:
      live.push_back(live[s.i].clone());
      break;
    case Kind::Sync:
      loom::sync();
      break;
    case Kind::Add:
    case Kind::Mul:
    case Kind::Copy: {
      Tensor t = view_of(live[s.i], s.v);
      if (s.o == Opd::Scalar) {
        int64_t k = int64_t(scalar_of(s.k));  // an int: an int32 tensor's update stays int32
        s.k == Kind::Add ? (void)t.add_(k) : s.k == Kind::Mul ? (void)t.mul_(k) : (void)t.fill_(k);
        break;
      }
      Tensor o = view_of(live[s.j], s.v);
      if (s.o == Opd::Expand) o = o.slice(0, 0, 1).expand({t.size(0), t.size(1)});
      s.k == Kind::Add ? (void)t.add_(o) : s.k == Kind::Mul ? (void)t.mul_(o) : (void)t.copy_(o);
      break;
    }
  }
}

inline const std::vector<double> kStart0 = {1, 2, 3, 4, 5, 6},
                                 kStart1 = {-10, 20, -30, 40, -50, 60};

// Runs `p` in loom on `dev` (fusion as currently set) and returns every live tensor's values.
inline std::vector<std::vector<double>> run_loom(const std::vector<Stmt>& p, DType dt,
                                                 loom::Device dev) {
  std::vector<Tensor> live = {lt::make(kStart0, {kRows, kCols}, dt).to(dev),
                              lt::make(kStart1, {kRows, kCols}, dt).to(dev)};
  loom::sync();
  for (const Stmt& s : p) run(live, s);
  std::vector<std::vector<double>> out;
  for (auto& t : live) out.push_back(lt::host(t));
  return out;
}

inline std::vector<std::vector<double>> run_model(const std::vector<Stmt>& p, DType dt) {
  Model m{dt};
  m.fresh(kStart0);
  m.fresh(kStart1);
  for (const Stmt& s : p) m.run(s);
  std::vector<std::vector<double>> out;
  for (auto& v : m.live) out.push_back(m.read(v));
  return out;
}

// Every statement that may follow a program with `live` tensors. The full alphabet: every
// pure op, clone and update (three kinds, three views, every operand). The short alphabet, which
// the longest programs use: sums of unordered pairs, add_ and copy_ only, no update with its own
// tensor as operand, copies through the whole tensor or a row slice, broadcast reads of whole
// tensors only.
inline std::vector<Stmt> next_statements(int live, bool prev_sync, bool first, bool full) {
  std::vector<Stmt> out;
  for (int i = 0; i < live; ++i) {
    out.push_back({Kind::Scale, i});
    out.push_back({Kind::Clone, i});
    for (int j = full ? 0 : i + 1; j < live; ++j)
      if (j != i) out.push_back({Kind::Sum, i, j});
    for (Kind k : {Kind::Add, Kind::Mul, Kind::Copy})
      for (Vw v : {Vw::Whole, Vw::T, Vw::Rows}) {
        if (!full && k == Kind::Mul) continue;
        if (!full && k == Kind::Copy && v == Vw::T) continue;
        out.push_back({k, i, 0, v, Opd::Scalar});
        for (int j = 0; j < live; ++j) {
          if (!full && j == i) continue;
          out.push_back({k, i, j, v, Opd::Tensor});
          if (full || (k == Kind::Add && v == Vw::Whole)) out.push_back({k, i, j, v, Opd::Expand});
        }
      }
  }
  // A sync point only between two other statements (at the start or the end, or twice in a
  // row, it changes nothing: the final reads are sync points).
  if (!prev_sync && !first) out.push_back({Kind::Sync});
  return out;
}

inline int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

struct Enumeration {
  DType dt;
  loom::Device dev;
  bool full;  // the alphabet
  int min_len, max_len;
  int shard = 0, shards = 1;
  int64_t index = 0, checked = 0, with_pending_update = 0;
  int failures = 0;

  // Does the program update in place a value that is still pending when it is updated?
  static bool updates_pending(const std::vector<Stmt>& p) {
    std::vector<bool> pending = {false, false};
    for (const Stmt& s : p) {
      if (s.k == Kind::Sync) std::fill(pending.begin(), pending.end(), false);
      if (s.k == Kind::Scale || s.k == Kind::Sum || s.k == Kind::Clone) pending.push_back(true);
      if (is_update(s.k) && pending[s.i]) return true;
      if (is_update(s.k)) pending[s.i] = true;
    }
    return false;
  }

  void check(const std::vector<Stmt>& p) {
    if (index++ % shards != shard) return;
    ++checked;
    with_pending_update += updates_pending(p);
    auto want = run_model(p, dt);
    std::vector<std::vector<double>> fused, unfused;
    try {
      fused = run_loom(p, dt, dev);
      lt::FusionOff off;
      unfused = run_loom(p, dt, dev);
    } catch (const std::exception& e) {
      if (++failures <= 5) FAIL_CHECK(text(p) << ": threw " << std::string(e.what()));
      return;
    }
    for (size_t t = 0; t < want.size(); ++t) {
      if (fused[t] == want[t] && unfused[t] == want[t]) continue;
      if (++failures <= 5) {
        std::string f, u, w;
        for (size_t k = 0; k < want[t].size(); ++k)
          f += std::to_string(int64_t(fused[t][k])) + " ",
              u += std::to_string(int64_t(unfused[t][k])) + " ",
              w += std::to_string(int64_t(want[t][k])) + " ";
        FAIL_CHECK(text(p) << "\n  t" << t << ": fused [" << f << "] fusion-off [" << u
                           << "] eager model [" << w << "]");
      }
      return;
    }
  }

  void walk(std::vector<Stmt>& p, int live) {
    if (int(p.size()) >= min_len) check(p);
    if (int(p.size()) == max_len || failures > 5) return;
    bool prev_sync = !p.empty() && p.back().k == Kind::Sync;
    for (const Stmt& s : next_statements(live, prev_sync, p.empty(), full)) {
      // a sync point as the last statement is the same program without it
      if (s.k == Kind::Sync && int(p.size()) + 1 == max_len) continue;
      p.push_back(s);
      bool grows = s.k == Kind::Scale || s.k == Kind::Sum || s.k == Kind::Clone;
      walk(p, live + grows);
      p.pop_back();
    }
  }
};

// Runs each enumeration (sharded by LOOM_INPLACE_SHARD=k/n) and reports what it checked.
inline void check_all(std::vector<Enumeration> runs) {
  int shard = 0, shards = 1;
  if (const char* v = std::getenv("LOOM_INPLACE_SHARD")) std::sscanf(v, "%d/%d", &shard, &shards);
  REQUIRE((shards >= 1 && shard >= 0 && shard < shards));
  int64_t total = 0, compiled = loom::counters().cache_misses;
  for (Enumeration& e : runs) {
    if (e.min_len > e.max_len) continue;
    e.shard = shard, e.shards = shards;
    std::vector<Stmt> p;
    e.walk(p, 2);
    total += e.checked;
    MESSAGE(e.checked << " of " << e.index << " " << std::string(loom::dtype_name(e.dt))
                      << " programs of " << e.min_len << "-" << e.max_len << " statements over the "
                      << std::string(e.full ? "full" : "short") << " alphabet on " << e.dev.str()
                      << " checked (" << e.with_pending_update
                      << " update a pending value in place)");
    CHECK(e.failures == 0);
  }
  MESSAGE((loom::counters().cache_misses - compiled) << " kernels compiled");
  CHECK(total > 0);
}

}  // namespace lt::inplace
