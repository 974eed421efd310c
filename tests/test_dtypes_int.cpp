// The integer dtypes, int16, uint16, uint32 and uint64 above all (and int8 and uint8, which
// compute in int32 as int16 and uint16 do): each op on random data with the extremes, fused and
// with fusion off, against plain C++ on the same values; the promotion lattice as its own table;
// casts to and from every dtype; creation, item, printing.
#include <cmath>
#include <limits>
#include <random>

#include "helpers.h"
#include "tensor/half.h"

using namespace loom;

namespace {


// Calls f(T{}) with the storage type of dtype dt (float16 / bfloat16: their uint16 bits).
template <typename F>
void with_storage(DType dt, F f) {
  switch (dt) {
    case DType::Float16:
    case DType::BFloat16:
      return f(uint16_t{});
#define LOOM_X(name, text, storage, size, category, compute, host) \
  LOOM_DTYPE_IF(host, case DType::name : return f(storage{});)
      LOOM_DTYPES(LOOM_X)
#undef LOOM_X
  }
}

constexpr double k2p63 = 9223372036854775808.0, k2p64 = 18446744073709551616.0;

// n values of S: the extremes first, then every third one small (so that equal values,
// small divisors and small shift counts occur), the rest over the whole range.
template <typename S>
std::vector<S> values(size_t n, uint64_t seed, bool zeros = false) {
  using L = std::numeric_limits<S>;
  std::mt19937_64 g(seed);
  std::vector<S> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i % 3 == 0 ? S(int64_t(g() % 11) - 5) : S(g());
  const S ex[] = {S(0),
                  S(1),
                  L::max(),
                  L::min(),
                  S(L::max() - 1),
                  S(L::min() + 1),
                  S(L::max() / 2 + 1),
                  S(-1),
                  S(L::max() / 2),
                  S(3)};
  for (size_t i = 0; i < std::size(ex) && i < n; ++i) v[i] = ex[(i + seed) % std::size(ex)];
  if (zeros)
    for (size_t i = 5; i < n; i += 7) v[i] = 0;
  return v;
}

// The wrapping arithmetic of S: in uint64 (mod 2^64), then truncated to S (mod 2^bits).
template <typename S>
S wadd(S a, S b) {
  return S(uint64_t(a) + uint64_t(b));
}
template <typename S>
S wsub(S a, S b) {
  return S(uint64_t(a) - uint64_t(b));
}
template <typename S>
S wmul(S a, S b) {
  return S(uint64_t(a) * uint64_t(b));
}
template <typename S>
S floor_div(S a, S b) {
  if (b == 0) return 0;  // loom: an integer zero divisor element gives 0
  if constexpr (std::is_signed_v<S>) {
    if (a == std::numeric_limits<S>::min() && b == S(-1)) return a;  // wraps
    S q = S(a / b);
    if (a % b != 0 && ((a < 0) != (b < 0))) --q;
    return q;
  }
  return S(a / b);
}
template <typename S>
S py_mod(S a, S b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<S>) {
    if (b == S(-1)) return 0;
    S r = S(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) r = S(r + b);
    return r;
  }
  return S(a % b);
}
template <typename S>
S c_fmod(S a, S b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<S>)
    if (b == S(-1)) return 0;
  return S(a % b);
}
// torch's shifts: a count of the width or more gives 0, or the sign's fill for a right shift.
template <typename S>
S shl(S a, S c) {
  constexpr uint64_t bits = sizeof(S) * 8;
  return uint64_t(c) >= bits ? S(0) : S(uint64_t(a) << uint64_t(c));
}
template <typename S>
S shr(S a, S c) {
  constexpr uint64_t bits = sizeof(S) * 8;
  if (uint64_t(c) >= bits) return a < 0 ? S(-1) : S(0);
  return S(a >> uint64_t(c));
}

template <typename T>
std::string show(T v) {
  if constexpr (std::is_same_v<T, bool>)
    return v ? "true" : "false";
  else
    return std::to_string(v);
}

// t's values are `want`, element for element.
template <typename T>
void expect(const Tensor& t, const std::vector<T>& want, const std::string& what) {
  INFO(what << " (" << std::string(dtype_name(t.dtype())) << " " << shape_str(t.shape()) << ")");
  std::vector<T> got = t.to_vector<T>();
  REQUIRE(got.size() == want.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i]) && !(std::isnan(double(got[i])) && std::isnan(double(want[i]))))
      first = bad++ ? first : i;
  if (bad)
    FAIL_CHECK(bad << " of " << got.size() << " differ; first at " << first << ": got "
                   << show(T(got[first])) << ", want " << show(T(want[first])));
}

template <typename S, typename R, typename F>
std::vector<R> map2(const std::vector<S>& a, const std::vector<S>& b, F f) {
  std::vector<R> r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = R(f(a[i], b[i]));
  return r;
}
template <typename S, typename R, typename F>
std::vector<R> map1(const std::vector<S>& a, F f) {
  std::vector<R> r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = R(f(a[i]));
  return r;
}

// Pointwise ops and fused chains of them over 2 x 151 values of S.
template <typename S>
void check_pointwise(uint64_t seed) {
  constexpr DType dt = dtype_of<S>();
  const size_t n = 302;
  std::vector<S> va = values<S>(n, seed), vb = values<S>(n, seed + 1, true),
                 vc = values<S>(n, seed + 2);
  std::vector<S> vk(n);  // shift counts: 0 to the width + 1, and 70 where it fits
  for (size_t i = 0; i < n; ++i) vk[i] = S(i % (sizeof(S) * 8 + 2));
  if (std::numeric_limits<S>::max() >= 70) vk[7] = S(70);
  const Shape sh{2, int64_t(n / 2)};
  Tensor a = tensor<S>(va, sh), b = tensor<S>(vb, sh), c = tensor<S>(vc, sh), k = tensor<S>(vk, sh);
  REQUIRE(a.dtype() == dt);
  using B = bool;
  // Each result is computed before any is read, so that with fusion on they share kernels.
  std::vector<std::pair<Tensor, std::function<void(const Tensor&)>>> cases;
  auto same = [&](const char* what, Tensor t, std::vector<S> want) {
    CHECK(t.dtype() == dt);
    cases.push_back({t, [want, what](const Tensor& r) { expect(r, want, what); }});
  };
  auto boolean = [&](const char* what, Tensor t, std::vector<B> want) {
    CHECK(t.dtype() == DType::Bool);
    cases.push_back({t, [want, what](const Tensor& r) { expect(r, want, what); }});
  };
  same("add", a + b, map2<S, S>(va, vb, wadd<S>));
  same("sub", a - b, map2<S, S>(va, vb, wsub<S>));
  same("mul", a * b, map2<S, S>(va, vb, wmul<S>));
  same("floor_divide", floor_divide(a, b), map2<S, S>(va, vb, floor_div<S>));
  same("remainder", remainder(a, b), map2<S, S>(va, vb, py_mod<S>));
  same("fmod", fmod(a, b), map2<S, S>(va, vb, c_fmod<S>));
  same("maximum", maximum(a, b), map2<S, S>(va, vb, [](S x, S y) { return x > y ? x : y; }));
  same("minimum", minimum(a, b), map2<S, S>(va, vb, [](S x, S y) { return x < y ? x : y; }));
  same("bitwise_and", a & b, map2<S, S>(va, vb, [](S x, S y) { return S(x & y); }));
  same("bitwise_or", a | b, map2<S, S>(va, vb, [](S x, S y) { return S(x | y); }));
  same("bitwise_xor", a ^ b, map2<S, S>(va, vb, [](S x, S y) { return S(x ^ y); }));
  same("bitwise_not", bitwise_not(a), map1<S, S>(va, [](S x) { return S(~uint64_t(x)); }));
  same("left shift", a << k, map2<S, S>(va, vk, shl<S>));
  same("right shift", a >> k, map2<S, S>(va, vk, shr<S>));
  same("neg", -a, map1<S, S>(va, [](S x) { return wsub<S>(0, x); }));
  same("abs", abs(a), map1<S, S>(va, [](S x) { return x < 0 ? wsub<S>(0, x) : x; }));
  same("sign", sign(a), map1<S, S>(va, [](S x) { return S((x > 0) - (x < 0)); }));
  same("where", where(gt(a, b), a, c), [&] {
    std::vector<S> r(n);
    for (size_t i = 0; i < n; ++i) r[i] = va[i] > vb[i] ? va[i] : vc[i];
    return r;
  }());
  boolean("eq", eq(a, b), map2<S, B>(va, vb, [](S x, S y) { return x == y; }));
  boolean("ne", ne(a, b), map2<S, B>(va, vb, [](S x, S y) { return x != y; }));
  boolean("lt", loom::lt(a, b), map2<S, B>(va, vb, [](S x, S y) { return x < y; }));
  boolean("le", le(a, b), map2<S, B>(va, vb, [](S x, S y) { return x <= y; }));
  boolean("gt", gt(a, b), map2<S, B>(va, vb, [](S x, S y) { return x > y; }));
  boolean("ge", ge(a, b), map2<S, B>(va, vb, [](S x, S y) { return x >= y; }));
  // Chains: a wrapped value read by a later op of the same kernel.
  boolean("(a + b) > c", gt(a + b, c), [&] {
    std::vector<B> r(n);
    for (size_t i = 0; i < n; ++i) r[i] = wadd(va[i], vb[i]) > vc[i];
    return r;
  }());
  same("(a * b) >> k", (a * b) >> k, [&] {
    std::vector<S> r(n);
    for (size_t i = 0; i < n; ++i) r[i] = shr(wmul(va[i], vb[i]), vk[i]);
    return r;
  }());
  same("(a - b) // c", floor_divide(a - b, c), [&] {
    std::vector<S> r(n);
    for (size_t i = 0; i < n; ++i) r[i] = floor_div(wsub(va[i], vb[i]), vc[i]);
    return r;
  }());
  same("max(-a, c) % b", remainder(maximum(-a, c), b), [&] {
    std::vector<S> r(n);
    for (size_t i = 0; i < n; ++i) r[i] = py_mod(std::max(wsub<S>(0, va[i]), vc[i]), vb[i]);
    return r;
  }());
  same("~(a << k) + 1", bitwise_not(a << k) + 1, [&] {
    std::vector<S> r(n);
    for (size_t i = 0; i < n; ++i) r[i] = wadd(S(~uint64_t(shl(va[i], vk[i]))), S(1));
    return r;
  }());
  // b has zero elements: the divisions by it raise at the sync point that runs them
  // (fusion/checks.h), and their quotients hold 0 there, as the C++ references say.
  CHECK_THROWS_WITH_AS(loom::sync(), doctest::Contains("integer division by zero"), Error);
  for (auto& [t, check] : cases) check(t);
}

// Reductions over rows, columns and everything, and cumsum, of 9 x 29 values of S.
template <typename S>
void check_reductions(uint64_t seed) {
  constexpr DType dt = dtype_of<S>();
  const int64_t R = 9, C = 29;
  std::vector<S> v = values<S>(size_t(R * C), seed);
  Tensor x = tensor<S>(v, {R, C});
  Tensor x2 = x * x;  // a prologue: the wrapped squares are reduced
  // sums and products: int64 (uint64 for uint64), wrapping; compared as their 64 bits
  using W = std::conditional_t<std::is_same_v<S, uint64_t>, uint64_t, int64_t>;
  const DType wt = dtype_of<W>();
  auto at = [&](int64_t i, int64_t j) { return v[size_t(i * C + j)]; };
  std::vector<W> sum_r(R, 0), prod_r(R, 1), sq_r(R, 0), cum(v.size());
  std::vector<S> max_r(R, v[0]), min_r(R, v[0]), max_c(C), min_c(C);
  std::vector<int64_t> amax_r(R, 0), amin_r(R, 0);
  for (int64_t i = 0; i < R; ++i) {
    max_r[i] = min_r[i] = at(i, 0);
    W run = 0;
    for (int64_t j = 0; j < C; ++j) {
      S e = at(i, j);
      sum_r[i] = W(uint64_t(sum_r[i]) + uint64_t(W(e)));
      prod_r[i] = W(uint64_t(prod_r[i]) * uint64_t(W(e)));
      sq_r[i] = W(uint64_t(sq_r[i]) + uint64_t(W(wmul(e, e))));
      run = W(uint64_t(run) + uint64_t(W(e)));
      cum[size_t(i * C + j)] = run;
      if (e > max_r[i]) max_r[i] = e, amax_r[i] = j;
      if (e < min_r[i]) min_r[i] = e, amin_r[i] = j;
    }
  }
  for (int64_t j = 0; j < C; ++j) {
    max_c[j] = min_c[j] = at(0, j);
    for (int64_t i = 0; i < R; ++i)
      max_c[j] = std::max(max_c[j], at(i, j)), min_c[j] = std::min(min_c[j], at(i, j));
  }
  Tensor s = sum(x, {1}), p = prod(x, {1}), q = sum(x2, {1}), cs = cumsum(x, 1);
  Tensor mr = amax(x, {1}), nr = amin(x, {1}), mc = amax(x, {0}), nc = amin(x, {0});
  Tensor ar = argmax(x, 1), nr_i = argmin(x, 1), all_max = amax(x), all_min = amin(x);
  CHECK(s.dtype() == wt);
  CHECK(cs.dtype() == wt);
  CHECK(mr.dtype() == dt);
  expect(s, sum_r, "sum over rows");
  expect(p, prod_r, "prod over rows");
  expect(q, sq_r, "sum of the wrapped squares over rows");
  expect(cs, cum, "cumsum over rows");
  expect(mr, max_r, "amax over rows");
  expect(nr, min_r, "amin over rows");
  expect(mc, max_c, "amax over columns");
  expect(nc, min_c, "amin over columns");
  expect(ar, amax_r, "argmax over rows");
  expect(nr_i, amin_r, "argmin over rows");
  expect(all_max, std::vector<S>{*std::max_element(v.begin(), v.end())}, "amax of all");
  expect(all_min, std::vector<S>{*std::min_element(v.begin(), v.end())}, "amin of all");
}

// What loom defines a float's cast to integer dtype `to` (storage S) to be: NaN 0; a signed
// type saturates at its compute type's range (int32 for int8 and int16), then wraps; an unsigned
// one wraps through int64 (clamped to +-9.2e18 in the float's compute type F), and uint64
// saturates from 2^64.
template <typename S, typename F>
S float_to(F v) {
  if (v != v) return 0;
  if constexpr (std::is_unsigned_v<S>) {
    if (std::is_same_v<S, uint64_t> && double(v) >= k2p63)
      return double(v) >= k2p64 ? std::numeric_limits<S>::max() : S(uint64_t(v));
    F c = std::fmax(std::fmin(v, F(9.2e18)), F(-9.2e18));
    return S(int64_t(c));
  } else {
    using C = std::conditional_t<sizeof(S) == 8, int64_t, int32_t>;
    if (double(v) >= double(std::numeric_limits<C>::max())) return S(std::numeric_limits<C>::max());
    if (double(v) <= double(std::numeric_limits<C>::min())) return S(std::numeric_limits<C>::min());
    return S(C(v));
  }
}

// A value as dtype `to` (float16 / bfloat16 through float32, as loom rounds them), as a double.
template <typename T>
double as_float(T v, DType to) {
  switch (to) {
    case DType::Float16:
      return f16_to_f32(f32_to_f16(float(v)));
    case DType::BFloat16:
      return bf16_to_f32(f32_to_bf16(float(v)));
    case DType::Float32:
      return float(v);
    default:
      return double(v);
  }
}

// Casts of S values into every dtype, and of every dtype's values into S.
template <typename S>
void check_casts(uint64_t seed) {
  constexpr DType dt = dtype_of<S>();
  std::vector<S> v = values<S>(200, seed);
  Tensor x = tensor<S>(v, {200});
  for (int d = 0; d < kNumDTypes; ++d) {
    const DType to = DType(d);
    INFO("cast " << std::string(dtype_name(dt)) << " -> " << std::string(dtype_name(to)));
    Tensor y = cast(x, to), y2 = cast(x + 0, to);  // a load's cast, and an op's value cast
    if (to == DType::Bool) {
      expect(y, map1<S, bool>(v, [](S e) { return e != 0; }), "into bool");
      expect(y2, map1<S, bool>(v, [](S e) { return e != 0; }), "into bool (fused)");
    } else if (is_floating(to)) {
      std::vector<double> want = map1<S, double>(v, [to](S e) { return as_float(e, to); });
      expect(y, want, "into a float");
      expect(y2, want, "into a float (fused)");
    } else {
      with_storage(to, [&](auto t) {
        using T = decltype(t);
        expect(y, map1<S, T>(v, [](S e) { return T(e); }), "into an integer (mod 2^bits)");
        expect(y2, map1<S, T>(v, [](S e) { return T(e); }), "into an integer (fused)");
      });
    }
  }
  // Into S from every dtype: integers and bool by value, floats by float_to.
  const std::vector<double> fv = {0,
                                  -0.0,
                                  0.5,
                                  -0.5,
                                  1.5,
                                  -1.7,
                                  127.9,
                                  128,
                                  255.5,
                                  256,
                                  -129,
                                  32767.5,
                                  32768,
                                  65535.9,
                                  65536,
                                  -32769,
                                  2147483647.0,
                                  2147483648.0,
                                  4294967295.0,
                                  4294967296.0,
                                  -2147483649.0,
                                  9007199254740993.0,
                                  k2p63,
                                  1.5 * k2p63,
                                  k2p64,
                                  1e19,
                                  1e20,
                                  -1e19,
                                  -1e20,
                                  3e38,
                                  -3e38,
                                  INFINITY,
                                  -INFINITY,
                                  NAN,
                                  12345.678,
                                  -98765.4};
  for (int d = 0; d < kNumDTypes; ++d) {
    const DType from = DType(d);
    INFO("cast " << std::string(dtype_name(from)) << " -> " << std::string(dtype_name(dt)));
    Tensor src;
    if (is_floating(from)) {
      src = tensor<double>(fv, {int64_t(fv.size())}, Options(from));
    } else {
      with_storage(from, [&](auto t) {
        using T = decltype(t);
        std::vector<T> sv = values<T>(64, seed + 7);
        src = tensor<T>(sv, {64});
      });
    }
    Tensor y = cast(src, dt), y2 = cast(src * 1, dt);
    std::vector<S> want;
    if (is_floating(from)) {
      for (double e : src.to_vector<double>())  // the values the source dtype holds
        want.push_back(from == DType::Float64 ? float_to<S>(e) : float_to<S>(float(e)));
    } else {
      with_storage(from, [&](auto t) {
        using T = decltype(t);
        for (T e : src.to_vector<T>()) want.push_back(S(e));
      });
    }
    expect(y, want, "from another dtype");
    if (from != DType::Bool) expect(y2, want, "from another dtype (after an op)");
    // the cast's value as a later op of its kernel reads it: wrapped to S already
    Tensor w = tensor<S>(want, {int64_t(want.size())});
    expect(eq(cast(src, dt), w), std::vector<bool>(want.size(), true), "read after the cast");
  }
}

// Creation, element access and printing.
template <typename S>
void check_creation() {
  constexpr DType dt = dtype_of<S>();
  using L = std::numeric_limits<S>;
  expect(full({3}, L::max(), Options(dt)), std::vector<S>(3, L::max()), "full of the max");
  expect(full({2}, L::min(), Options(dt)), std::vector<S>(2, L::min()), "full of the min");
  expect(zeros({4}, Options(dt)), std::vector<S>(4, 0), "zeros");
  expect(ones({4}, Options(dt)), std::vector<S>(4, 1), "ones");
  expect(arange(0, 5, 1, dt), std::vector<S>{0, 1, 2, 3, 4}, "arange");
  std::vector<S> v = values<S>(16, 5);
  Tensor t = tensor<S>(v, {4, 4});
  CHECK(t.dtype() == dt);
  expect(t, v, "tensor<S> round trip");
  CHECK(t.index({Slice::at(0), Slice::at(2)}).item<S>() == v[2]);
  Tensor z = full({}, L::max(), Options(dt));
  CHECK(z.item<S>() == L::max());
  std::string s = tensor<S>({L::min(), L::max()}, {2}).str();
  CHECK(s.find(std::to_string(L::min())) != std::string::npos);
  CHECK(s.find(std::to_string(L::max())) != std::string::npos);
  CHECK(s.find(std::string("dtype=") + dtype_name(dt)) != std::string::npos);
}

template <typename S>
void check_all(uint64_t seed) {
  INFO("dtype " << std::string(dtype_name(dtype_of<S>())));
  check_pointwise<S>(seed);
  check_reductions<S>(seed);
  check_casts<S>(seed);
  check_creation<S>();
  lt::FusionOff off;
  INFO("fusion off");
  check_pointwise<S>(seed);
  check_reductions<S>(seed);
  check_casts<S>(seed);
}

}  // namespace

TEST_CASE("dtypes: int16 ops, reductions and casts against C++, fused and fusion off") {
  check_all<int16_t>(11);
}
TEST_CASE("dtypes: uint16 ops, reductions and casts against C++, fused and fusion off") {
  check_all<uint16_t>(12);
}
TEST_CASE("dtypes: uint32 ops, reductions and casts against C++, fused and fusion off") {
  check_all<uint32_t>(13);
}
TEST_CASE("dtypes: uint64 ops, reductions and casts against C++, fused and fusion off") {
  check_all<uint64_t>(14);
}
TEST_CASE("dtypes: int8 and uint8 wrap inside fused kernels as they do stored") {
  check_all<int8_t>(15);
  check_all<uint8_t>(16);
}
TEST_CASE("dtypes: column extremes of int32 and int64 start from their type's limits") {
  check_reductions<int32_t>(17);  // an int32 column amin came out -1: int32(INT64_MAX)
  check_reductions<int64_t>(18);
  lt::FusionOff off;
  check_reductions<int32_t>(17);
}

TEST_CASE("dtypes: the integer promotion lattice") {
  // The array API's lattice (numpy's for these): one signedness promotes to the wider; mixed,
  // to the smallest signed type holding both; uint64 with a signed type has none (E).
  const DType E = DType::Bool;  // marks an error
  const DType u8 = DType::UInt8, u16 = DType::UInt16, u32 = DType::UInt32, u64 = DType::UInt64;
  const DType i8 = DType::Int8, i16 = DType::Int16, i32 = DType::Int32, i64 = DType::Int64;
  const DType order[] = {u8, u16, u32, u64, i8, i16, i32, i64};
  const DType want[8][8] = {
      //  u8   u16  u32  u64  i8   i16  i32  i64
      {u8, u16, u32, u64, i16, i16, i32, i64},   // u8
      {u16, u16, u32, u64, i32, i32, i32, i64},  // u16
      {u32, u32, u32, u64, i64, i64, i64, i64},  // u32
      {u64, u64, u64, u64, E, E, E, E},          // u64
      {i16, i32, i64, E, i8, i16, i32, i64},     // i8
      {i16, i32, i64, E, i16, i16, i32, i64},    // i16
      {i32, i32, i64, E, i32, i32, i32, i64},    // i32
      {i64, i64, i64, E, i64, i64, i64, i64},    // i64
  };
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c) {
      const DType a = order[r], b = order[c];
      INFO(std::string(dtype_name(a)) << " with " << std::string(dtype_name(b)));
      if (want[r][c] == E) {
        LT_CHECK_ERROR(promote_types(a, b), "promote_types", dtype_name(a), dtype_name(b));
        CHECK_THROWS_AS(promote_types(a, b), Error);
        try {
          promote_types(a, b);
        } catch (const Error& e) {
          CHECK(e.kind() == ErrorKind::Type);
        }
        // an op on tensors of the two raises at the call, naming both
        Tensor x = zeros({2}, Options(a)), y = zeros({3, 2}, Options(b));
        LT_CHECK_ERROR(x + y, dtype_name(a), dtype_name(b));
      } else {
        CHECK(promote_types(a, b) == want[r][c]);
        CHECK((zeros({2}, Options(a)) + zeros({2}, Options(b))).dtype() == want[r][c]);
      }
    }
  // Bool promotes to any integer, any integer to a float; a Python-like integer scalar keeps
  // the tensor's integer type.
  for (DType t : order) {
    CHECK(promote_types(DType::Bool, t) == t);
    CHECK(promote_types(t, DType::Float32) == DType::Float32);
    CHECK(promote_types(DType::Float16, t) == DType::Float16);
    CHECK((zeros({2}, Options(t)) + 3).dtype() == t);
  }
}

TEST_CASE("dtypes: uint64 values past 2^63 as scalars, sums, extremes and text") {
  const uint64_t big = (uint64_t(1) << 63) + 12345, top = std::numeric_limits<uint64_t>::max();
  Tensor u = tensor<uint64_t>({big, 7, top, 0, uint64_t(1) << 63}, {5});
  // a scalar past int64's range is a uint64
  Scalar s(top);
  CHECK(s.u64);
  CHECK(s.default_dtype() == DType::UInt64);
  expect(u + s, std::vector<uint64_t>{big - 1, 6, top - 1, top, (uint64_t(1) << 63) - 1}, "+ max");
  expect(gt(u, Scalar(big)), std::vector<bool>{false, false, true, false, false}, "> 2^63 + k");
  LT_CHECK_ERROR(zeros({2}, Options(DType::Int64)) + Scalar(top), "add", "out of range", "int64");
  expect(full({2}, Scalar(top), Options(DType::UInt64)), std::vector<uint64_t>{top, top}, "full");
  CHECK(amax(u).item<uint64_t>() == top);
  CHECK(amin(u).item<uint64_t>() == 0);
  CHECK(argmax(u).item<int64_t>() == 2);
  CHECK(sum(u).item<uint64_t>() == big + 7 + top + (uint64_t(1) << 63));  // mod 2^64
  CHECK(sum(u).dtype() == DType::UInt64);
  expect(cast(u, DType::Float64), std::vector<double>{double(big), 7, double(top), 0, k2p63},
         "as float64");
  expect(bitwise_right_shift(u, Scalar(63)), std::vector<uint64_t>{1, 0, 1, 0, 1},
         "logical right shift");
  std::string text = u.str();
  CHECK(text.find("18446744073709551615") != std::string::npos);
  CHECK(text.find("9223372036854788153") != std::string::npos);
  expect(arange(Scalar(big), Scalar(big + 3), 1, DType::UInt64),
         std::vector<uint64_t>{big, big + 1, big + 2}, "arange past 2^63");
  // integer matmul wraps mod 2^64, as the other integer types
  Tensor m = tensor<uint64_t>({top, 2, 3, 4}, {2, 2});
  expect(matmul(m, m),
         std::vector<uint64_t>{top * top + 2 * 3, top * 2 + 2 * 4, 3 * top + 4 * 3, 3 * 2 + 4 * 4},
         "matmul");
}
