#pragma once
// Shared test helpers: seeded random tensors, float64 references over broadcast shapes,
// dtype-aware comparison, fused-vs-fusion-off differential runs and error checks.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "loom.h"
#include "tolerances.h"

namespace lt {

using loom::DType;
using loom::Shape;
using loom::Tensor;

// ---- random data --------------------------------------------------------------------------

// Uniform doubles in [lo, hi), each at least `min_abs` away from zero (non-zero data).
inline std::vector<double> uniform(int64_t n, double lo, double hi, uint32_t seed,
                                   double min_abs = 1e-3) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(size_t(n > 0 ? n : 0));
  for (auto& x : v) {
    do x = d(g);
    while (std::fabs(x) < min_abs && (lo < -min_abs || hi > min_abs));
  }
  return v;
}

// Uniform integers in [lo, hi], zero excluded unless the range is {0} or `allow_zero`.
inline std::vector<double> uniform_int(int64_t n, int64_t lo, int64_t hi, uint32_t seed,
                                       bool allow_zero = false) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int64_t> d(lo, hi);
  std::vector<double> v(size_t(n > 0 ? n : 0));
  for (auto& x : v) {
    do x = double(d(g));
    while (x == 0 && !allow_zero && !(lo == 0 && hi == 0));
  }
  return v;
}

inline Tensor make(const std::vector<double>& v, const Shape& s, DType dt = DType::Float32) {
  return loom::tensor<double>(v, s, loom::Options(dt));
}

// A random tensor: floats in [lo, hi) (non-zero); integers in [ceil(lo), floor(hi)] without 0;
// bools half true.
inline Tensor random(const Shape& s, DType dt, uint32_t seed, double lo = -2, double hi = 2) {
  int64_t n = loom::numel(s);
  if (dt == DType::Bool) return make(uniform_int(n, 0, 1, seed, true), s, dt);
  if (loom::is_integral(dt))
    return make(uniform_int(n, int64_t(std::ceil(lo)), int64_t(std::floor(hi)), seed), s, dt);
  return make(uniform(n, lo, hi, seed), s, dt);
}

// The values a tensor holds, row-major, as doubles (a sync point).
inline std::vector<double> host(const Tensor& t) { return t.to_vector<double>(); }

// ---- float64 references -------------------------------------------------------------------

// Row-major values `v` of shape `s` broadcast (numpy rules) to shape `out`.
inline std::vector<double> broadcast(const std::vector<double>& v, const Shape& s,
                                     const Shape& out) {
  int64_t n = loom::numel(out);
  std::vector<double> r(size_t(n > 0 ? n : 0));
  int ro = int(out.size()), rs = int(s.size());
  loom::Strides st = loom::contiguous_strides(s);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, src = 0;
    for (int d = ro - 1; d >= 0; --d) {
      int64_t idx = rem % out[d];
      rem /= out[d];
      int k = d - (ro - rs);
      if (k >= 0 && s[k] != 1) src += idx * st[k];
    }
    r[size_t(i)] = v[size_t(src)];
  }
  return r;
}

inline Shape broadcast_shape(const Shape& a, const Shape& b) {
  return loom::broadcast_shapes("test", a, b);
}

// f applied elementwise over the broadcast of (va: sa) and (vb: sb).
inline std::vector<double> ref_binary(const std::vector<double>& va, const Shape& sa,
                                      const std::vector<double>& vb, const Shape& sb,
                                      const std::function<double(double, double)>& f) {
  Shape out = broadcast_shape(sa, sb);
  auto a = broadcast(va, sa, out), b = broadcast(vb, sb, out);
  std::vector<double> r(a.size());
  for (size_t i = 0; i < r.size(); ++i) r[i] = f(a[i], b[i]);
  return r;
}

inline std::vector<double> ref_unary(const std::vector<double>& v,
                                     const std::function<double(double)>& f) {
  std::vector<double> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = f(v[i]);
  return r;
}

// Normalized, sorted dims of a rank-`rank` shape; empty `dims` means all of them.
inline std::vector<int> norm_dims(const std::vector<int64_t>& dims, int rank) {
  std::vector<int> r;
  if (dims.empty())
    for (int d = 0; d < rank; ++d) r.push_back(d);
  for (auto d : dims) r.push_back(int(d < 0 ? d + rank : d));
  std::sort(r.begin(), r.end());
  return r;
}

// f applied to the elements of each reduced slice (in row-major order of the reduced dims);
// results row-major over the kept dims (the same order with or without keepdim).
inline std::vector<double> ref_reduce(const std::vector<double>& v, const Shape& s,
                                      const std::vector<int64_t>& dims,
                                      const std::function<double(const std::vector<double>&)>& f) {
  int rank = int(s.size());
  std::vector<int> red = norm_dims(dims, rank);
  std::vector<bool> is_red(size_t(rank), false);
  for (int d : red) is_red[size_t(d)] = true;
  Shape kept;
  for (int d = 0; d < rank; ++d)
    if (!is_red[size_t(d)]) kept.push_back(s[size_t(d)]);
  int64_t nk = loom::numel(kept);
  std::vector<std::vector<double>> slices(static_cast<size_t>(nk));
  loom::Strides ks = loom::contiguous_strides(kept);
  int64_t n = loom::numel(s);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, k = 0;
    int kd = int(kept.size()) - 1;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t idx = rem % s[size_t(d)];
      rem /= s[size_t(d)];
      if (!is_red[size_t(d)]) k += idx * ks[size_t(kd--)];
    }
    slices[size_t(k)].push_back(v[size_t(i)]);
  }
  std::vector<double> out(static_cast<size_t>(nk));
  for (int64_t k = 0; k < nk; ++k) out[size_t(k)] = f(slices[size_t(k)]);
  return out;
}

// The shape a reduction over `dims` gives.
inline Shape reduced_shape(const Shape& s, const std::vector<int64_t>& dims, bool keepdim) {
  std::vector<int> red = norm_dims(dims, int(s.size()));
  Shape out;
  for (int d = 0; d < int(s.size()); ++d) {
    bool r = std::find(red.begin(), red.end(), d) != red.end();
    if (!r)
      out.push_back(s[size_t(d)]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

// ---- comparison ---------------------------------------------------------------------------

// Tol and tol(dtype): tests/tolerances.h.

inline bool close(double got, double want, Tol t) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= t.atol + t.rtol * std::fabs(want);
}

// Checks `got` (any dtype) against reference values, reporting the first mismatch.
inline void check_close(const Tensor& got, const std::vector<double>& want,
                        std::optional<Tol> t = {}) {
  Tol tt = t ? *t : tol(got.dtype());
  std::vector<double> g = host(got);
  REQUIRE(g.size() == want.size());
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < g.size(); ++i)
    if (!close(g[i], want[i], tt)) {
      if (first < 0) first = int64_t(i);
      ++bad;
    }
  if (bad) {
    std::ostringstream os;
    os.precision(17);
    os << bad << " of " << g.size() << " elements differ; first at " << first << ": got "
       << g[size_t(first)] << ", want " << want[size_t(first)] << " (dtype "
       << loom::dtype_name(got.dtype()) << ", shape " << loom::shape_str(got.shape()) << ")";
    FAIL_CHECK(os.str());
  }
}

inline void check_close(const Tensor& got, const Tensor& want, std::optional<Tol> t = {}) {
  CHECK(got.shape() == want.shape());
  CHECK(got.dtype() == want.dtype());
  check_close(got, host(want), t);
}

// Exact comparison (integers, bools, or values that must match bit for bit).
inline void check_equal(const Tensor& got, const std::vector<double>& want) {
  check_close(got, want, Tol{0, 0});
}

// ---- fused vs fusion off ------------------------------------------------------------------

// Turns fusion off for a scope (the oracle), restoring it afterwards even on failure.
struct FusionOff {
  bool was = loom::fusion_enabled();
  FusionOff() { loom::set_fusion(false); }
  ~FusionOff() { loom::set_fusion(was); }
};

// Runs `f` fused and with fusion off; the results must agree (bitwise for integer and bool
// results, and for floats when `bitwise`). Returns the fused result's values.
inline std::vector<double> check_fused_matches_unfused(const std::function<Tensor()>& f,
                                                       std::optional<Tol> t = {},
                                                       bool bitwise = false) {
  REQUIRE(loom::fusion_enabled());
  Tensor a = f();
  std::vector<double> va = host(a);
  Tensor b;
  std::vector<double> vb;
  {
    FusionOff off;
    b = f();
    vb = host(b);
  }
  CHECK(a.shape() == b.shape());
  CHECK(a.dtype() == b.dtype());
  bool exact = bitwise || !loom::is_floating(a.dtype());
  Tol tt = exact ? Tol{0, 0} : t ? *t : tol(a.dtype());
  check_close(a, vb, tt);
  return va;
}

// ---- errors -------------------------------------------------------------------------------

// Calls `f`, which records an op with a deferred value check (fusion/checks.h), and checks
// that it neither raised nor flushed and that a check is pending.
template <typename F>
auto recorded_without_flush(F&& f) {
  loom::sync();
  int64_t flushes = loom::counters().flushes.load();
  auto r = f();
  CHECK(loom::counters().flushes.load() == flushes);
  CHECK(loom::pending_checks() >= 1);
  return r;
}

// `f` must throw loom::Error at the call (no flush runs first, so the error cannot come
// from a sync point) with every one of `parts` in its message.
inline void check_error_at_call(const std::function<void()>& f,
                                std::initializer_list<std::string> parts, const char* file,
                                int line, bool allow_flush = false) {
  INFO("error check at " << std::string(file) << ":" << line);
  loom::sync();
  int64_t flushes = loom::counters().flushes.load();
  bool threw = false;
  try {
    f();
  } catch (const loom::Error& e) {
    threw = true;
    std::string msg = e.what();
    INFO("message: " << msg);
    for (auto& p : parts) CHECK_MESSAGE(msg.find(p) != std::string::npos, "missing '" << p << "'");
  } catch (const std::exception& e) {
    FAIL_CHECK("threw a non-loom exception: " << e.what());
    threw = true;
  }
  CHECK_MESSAGE(threw, "no loom::Error was thrown");
  if (!allow_flush)
    CHECK_MESSAGE(loom::counters().flushes.load() == flushes, "error came after a flush");
}

}  // namespace lt

// LT_CHECK_ERROR(expression, "part", ...): the expression throws loom::Error at the call,
// naming every part.
#define LT_CHECK_ERROR(expr, ...) \
  ::lt::check_error_at_call([&] { (void)(expr); }, {__VA_ARGS__}, __FILE__, __LINE__)
