// Every binary row of the op table: float64 references, broadcasting, scalars on either side,
// type promotion (torch rules) and non-contiguous, size-1 and empty inputs.
#include <map>

#include "helpers.h"

using namespace loom;
using lt::check_close;
using lt::host;

namespace {

using BinFn = Tensor (*)(const Tensor&, const Tensor&);
using BinFnTS = Tensor (*)(const Tensor&, Scalar);
using BinFnST = Tensor (*)(Scalar, const Tensor&);

// One row of the table, expanded from LOOM_BINARY_OPS so new rows are covered automatically.
struct BinaryRow {
  const char* name;
  BinFn tt;
  BinFnTS ts;
  BinFnST st;
  BinaryKind kind;
};

const std::vector<BinaryRow>& binary_rows() {
  static const std::vector<BinaryRow> rows = {
#define LOOM_X(name, api, kind)                                            \
  {#api, static_cast<BinFn>(&loom::api), static_cast<BinFnTS>(&loom::api), \
   static_cast<BinFnST>(&loom::api), BinaryKind::kind},
      LOOM_BINARY_OPS(LOOM_X)
#undef LOOM_X
  };
  return rows;
}

double py_mod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// A float64 reference with the input domains of each side.
struct BinaryRef {
  double (*f)(double, double);
  double alo = -3, ahi = 3, blo = -3, bhi = 3;           // float inputs
  int64_t ailo = -20, aihi = 20, bilo = -20, bihi = 20;  // integer inputs
};

const std::map<std::string, BinaryRef>& binary_refs() {
  static const std::map<std::string, BinaryRef> refs = {
      {"add", {[](double a, double b) { return a + b; }}},
      {"sub", {[](double a, double b) { return a - b; }}},
      {"mul", {[](double a, double b) { return a * b; }}},
      {"div", {[](double a, double b) { return a / b; }}},
      {"floor_divide", {[](double a, double b) { return std::floor(a / b); }}},
      {"remainder", {py_mod}},
      {"pow", {[](double a, double b) { return std::pow(a, b); }, 0.1, 3, -2, 2, -5, 5, 0, 6}},
      {"maximum", {[](double a, double b) { return std::max(a, b); }}},
      {"minimum", {[](double a, double b) { return std::min(a, b); }}},
      {"atan2", {[](double a, double b) { return std::atan2(a, b); }}},
      {"eq", {[](double a, double b) { return double(a == b); }}},
      {"ne", {[](double a, double b) { return double(a != b); }}},
      {"lt", {[](double a, double b) { return double(a < b); }}},
      {"le", {[](double a, double b) { return double(a <= b); }}},
      {"gt", {[](double a, double b) { return double(a > b); }}},
      {"ge", {[](double a, double b) { return double(a >= b); }}},
      {"logical_and", {[](double a, double b) { return double(a != 0 && b != 0); }}},
      {"logical_or", {[](double a, double b) { return double(a != 0 || b != 0); }}},
      {"logical_xor", {[](double a, double b) { return double((a != 0) != (b != 0)); }}},
      {"bitwise_and", {[](double a, double b) { return double(int64_t(a) & int64_t(b)); }}},
      {"bitwise_or", {[](double a, double b) { return double(int64_t(a) | int64_t(b)); }}},
      {"bitwise_xor", {[](double a, double b) { return double(int64_t(a) ^ int64_t(b)); }}},
      // shifts by 0..10 (out-of-range counts: tests/test_math_ops.cpp): a * 2^b, floor(a / 2^b)
      {"bitwise_left_shift",
       {[](double a, double b) { return a * std::exp2(b); }, -3, 3, 0, 3, -20, 20, 0, 10}},
      {"bitwise_right_shift",
       {[](double a, double b) { return std::floor(a / std::exp2(b)); }, -3, 3, 0, 3, -5000, 5000,
        0, 10}},
      {"hypot", {[](double a, double b) { return std::hypot(a, b); }}},
      {"copysign", {[](double a, double b) { return std::copysign(a, b); }}},
      {"nextafter", {[](double a, double b) { return std::nextafter(a, b); }}},
      {"logaddexp", {[](double a, double b) { return std::log(std::exp(a) + std::exp(b)); }}},
      {"logaddexp2", {[](double a, double b) { return std::log2(std::exp2(a) + std::exp2(b)); }}},
      {"xlogy",
       {[](double a, double b) { return a == 0 ? 0.0 : a * std::log(b); }, -3, 3, 0.1, 3, -20, 20,
        1, 20}},
      {"fmod", {[](double a, double b) { return std::fmod(a, b); }, -3, 3, -3, 3, -20, 20, 1, 20}},
  };
  return refs;
}

const BinaryRef* ref_for(const char* name) {
  auto it = binary_refs().find(name);
  return it == binary_refs().end() ? nullptr : &it->second;
}

// The result dtype of a row for operands promoted to `pt`.
DType result_dtype(BinaryKind k, DType pt) {
  switch (k) {
    case BinaryKind::Compare:
    case BinaryKind::Logical:
      return DType::Bool;
    case BinaryKind::TrueDiv:
      return is_floating(pt) ? pt : DType::Float32;
    default:
      return pt;
  }
}

lt::Tol op_tol(DType out) {
  if (out == DType::Float32) return {1e-5, 1e-6};
  return lt::tol(out);
}

Tensor operand(const BinaryRef& r, bool left, const Shape& s, DType dt, uint32_t seed) {
  if (dt == DType::Bool) return lt::random(s, dt, seed);
  if (is_floating(dt)) return lt::random(s, dt, seed, left ? r.alo : r.blo, left ? r.ahi : r.bhi);
  return lt::random(s, dt, seed, double(left ? r.ailo : r.bilo), double(left ? r.aihi : r.bihi));
}

// Runs one row on (sa, dt) x (sb, dt) and checks values and dtype against the reference.
void check_row(const BinaryRow& row, const BinaryRef& r, DType dt, const Shape& sa, const Shape& sb,
               uint32_t seed) {
  std::string name = row.name;
  Tensor a = operand(r, true, sa, dt, seed), b = operand(r, false, sb, dt, seed + 1000);
  if (dt == DType::Bool && (name == "floor_divide" || name == "remainder" || name == "fmod"))
    b = ones(sb, DType::Bool);  // integer division by zero is not defined
  Tensor y = row.tt(a, b);
  DType pt = dt;
  if (dt == DType::Bool &&
      (name == "pow" || name == "floor_divide" || name == "remainder" || name == "fmod"))
    pt = DType::Int64;
  CHECK(y.dtype() == result_dtype(row.kind, pt));
  CHECK(y.shape() == lt::broadcast_shape(sa, sb));
  auto want = lt::ref_binary(host(a), sa, host(b), sb, r.f);
  if (y.dtype() == DType::Bool)
    for (auto& w : want) w = w != 0;
  check_close(y, want, op_tol(y.dtype()));
}

}  // namespace

TEST_CASE("binary: every op table row has a reference") {
  for (auto& row : binary_rows()) {
    INFO("op " << std::string(row.name));
    CHECK_MESSAGE(ref_for(row.name) != nullptr, "add a float64 reference for the new row");
  }
}

TEST_CASE("binary: every row on float32/float64 with broadcasting") {
  uint32_t seed = 300;
  for (auto& row : binary_rows()) {
    const BinaryRef* r = ref_for(row.name);
    if (!r) continue;
    for (DType dt : {DType::Float32, DType::Float64}) {
      INFO("op " << std::string(row.name) << " dtype " << std::string(dtype_name(dt)));
      if (row.kind == BinaryKind::Bitwise) {
        Tensor a = lt::random({3}, dt, 1);
        LT_CHECK_ERROR(row.tt(a, a), row.name, dtype_name(dt), "[3]");
        continue;
      }
      check_row(row, *r, dt, {4, 5}, {4, 5}, ++seed);
      check_row(row, *r, dt, {3, 1, 4}, {5, 1}, ++seed);  // -> [3, 5, 4]
      check_row(row, *r, dt, {1}, {2, 3}, ++seed);
    }
  }
}

TEST_CASE("binary: every row on int32, int64 and bool") {
  uint32_t seed = 400;
  for (auto& row : binary_rows()) {
    const BinaryRef* r = ref_for(row.name);
    if (!r) continue;
    for (DType dt : {DType::Int32, DType::Int64, DType::Bool}) {
      INFO("op " << std::string(row.name) << " dtype " << std::string(dtype_name(dt)));
      std::string name = row.name;
      if (dt == DType::Bool && name == "sub") {
        Tensor a = lt::random({4}, dt, 1);
        LT_CHECK_ERROR(sub(a, a), "sub", "bool");
        continue;
      }
      bool shift = name == "bitwise_left_shift" || name == "bitwise_right_shift";
      if ((dt == DType::Bool && shift) || row.kind == BinaryKind::Floating) {  // ints / floats only
        Tensor a = lt::random({4}, dt, 1);
        LT_CHECK_ERROR(row.tt(a, a), row.name, dtype_name(dt), "[4]");
        continue;
      }
      check_row(row, *r, dt, {6, 7}, {6, 7}, ++seed);
      check_row(row, *r, dt, {3, 1, 4}, {5, 1}, ++seed);
    }
  }
}

TEST_CASE("binary: scalar on either side of every row") {
  uint32_t seed = 500;
  for (auto& row : binary_rows()) {
    const BinaryRef* r = ref_for(row.name);
    if (!r) continue;
    bool bitwise = row.kind == BinaryKind::Bitwise;
    DType dt = bitwise ? DType::Int64 : DType::Float64;
    INFO("op " << std::string(row.name));
    Tensor a = operand(*r, true, {2, 9}, dt, ++seed);
    Tensor b = operand(*r, false, {2, 9}, dt, ++seed);
    auto va = host(a), vb = host(b);
    // tensor (op) scalar: the scalar is a right-hand operand value in the domain
    double sb = vb[3], sa = va[5];
    Tensor y1 = bitwise ? row.ts(a, int64_t(sb)) : row.ts(a, sb);
    Tensor y2 = bitwise ? row.st(int64_t(sa), b) : row.st(sa, b);
    std::vector<double> w1(va.size()), w2(vb.size());
    for (size_t i = 0; i < va.size(); ++i) w1[i] = r->f(va[i], sb), w2[i] = r->f(sa, vb[i]);
    if (y1.dtype() == DType::Bool)
      for (auto* w : {&w1, &w2})
        for (auto& v : *w) v = v != 0;
    check_close(y1, w1, op_tol(y1.dtype()));
    check_close(y2, w2, op_tol(y2.dtype()));
  }
}

TEST_CASE("binary: fused chain of every row equals fusion off") {
  Tensor a = lt::random({33, 40}, DType::Float32, 21, 0.5, 2);
  Tensor b = lt::random({40}, DType::Float32, 22, 0.5, 2);
  Tensor ia = lt::random({33, 40}, DType::Int32, 23, -50, 50);
  Tensor ib = lt::random({33, 1}, DType::Int32, 24, -9, 9);
  lt::check_fused_matches_unfused([&] {
    Tensor acc = zeros({33, 40});
    for (auto& row : binary_rows()) {
      if (row.kind == BinaryKind::Bitwise) continue;
      acc = acc + cast(row.tt(a, b), DType::Float32);
    }
    return acc;
  });
  lt::check_fused_matches_unfused([&] {  // integer results: bitwise equal
    Tensor acc = zeros({33, 40}, DType::Int32);
    for (auto& row : binary_rows()) {
      std::string n = row.name;
      if (row.kind == BinaryKind::TrueDiv || row.kind == BinaryKind::Floating || n == "pow")
        continue;
      acc = acc + cast(row.tt(ia, ib), DType::Int32);
    }
    return acc;
  });
}

TEST_CASE("binary: integer semantics of floor_divide, remainder and pow") {
  Tensor a = lt::make({7, -7, 7, -7, 0, 5}, {6}, DType::Int64);
  Tensor b = lt::make({2, 2, -2, -2, 3, 1}, {6}, DType::Int64);
  lt::check_equal(floor_divide(a, b), {3, -4, -4, 3, 0, 5});
  lt::check_equal(remainder(a, b), {1, 1, -1, -1, 0, 0});
  lt::check_equal(a % b, {1, 1, -1, -1, 0, 0});
  lt::check_equal(pow(a, b), {49, 49, 0, 0, 0, 5});  // integer pow: 7^-2 truncates to 0
  // Tensor exponents may be negative (torch computes them elementwise; only a negative
  // scalar exponent is an error): 1 for base 1, +-1 for base -1 by parity, else 0.
  for (DType dt : {DType::Int32, DType::Int64}) {
    Tensor base = lt::make(lt::uniform_int(40, -3, 3, 230, true), {8, 5}, dt);
    Tensor ex = lt::make(lt::uniform_int(5, -4, 4, 231, true), {5}, dt);
    auto ref =
        lt::ref_binary(host(base), base.shape(), host(ex), ex.shape(), [](double x, double e) {
          if (e >= 0) return std::pow(x, e);
          if (x == 1) return 1.0;
          if (x == -1) return std::fmod(-e, 2.0) != 0 ? -1.0 : 1.0;
          return 0.0;
        });
    lt::check_equal(pow(base, ex), ref);
    lt::check_fused_matches_unfused([&] { return pow(base, ex) + pow(2, ex); });
  }
  Tensor f = lt::make({7.5, -7.5}, {2}, DType::Float64);
  check_close(floor_divide(f, 2.0), {3, -4});
  check_close(remainder(f, 2.0), {1.5, 0.5});
  check_close(remainder(f, -2.0), {-0.5, -1.5});
  // operators map to the table rows
  Tensor x = lt::make({1, 2, 3}, {3}), y = lt::make({3, 2, 1}, {3});
  lt::check_equal(x + y, {4, 4, 4});
  lt::check_equal(x - y, {-2, 0, 2});
  lt::check_equal(x * y, {3, 4, 3});
  check_close(x / y, {1.0 / 3, 1, 3});
  lt::check_equal(x == y, {0, 1, 0});
  lt::check_equal(x != y, {1, 0, 1});
  lt::check_equal(x < y, {1, 0, 0});
  lt::check_equal(x <= y, {1, 1, 0});
  lt::check_equal(x > y, {0, 0, 1});
  lt::check_equal(x >= y, {0, 1, 1});
  Tensor i = lt::make({12, 10}, {2}, DType::Int32), j = lt::make({10, 6}, {2}, DType::Int32);
  lt::check_equal(i & j, {8, 2});
  lt::check_equal(i | j, {14, 14});
  lt::check_equal(i ^ j, {6, 12});
  lt::check_equal(~i, {-13, -11});
}

TEST_CASE("binary: maximum/minimum propagate NaN") {
  double nan = std::nan("");
  Tensor a = lt::make({nan, 1, 2}, {3}), b = lt::make({0, nan, 1}, {3});
  check_close(maximum(a, b), {nan, nan, 2});
  check_close(minimum(a, b), {nan, nan, 1});
}

TEST_CASE("binary: type promotion") {
  Tensor i32 = lt::make({1, 2, 3}, {3}, DType::Int32);
  Tensor i64 = lt::make({1, 2, 3}, {3}, DType::Int64);
  Tensor f16 = lt::make({1, 2, 3}, {3}, DType::Float16);
  Tensor bf16 = lt::make({1, 2, 3}, {3}, DType::BFloat16);
  Tensor f32 = lt::make({1, 2, 3}, {3}, DType::Float32);
  Tensor f64 = lt::make({1, 2, 3}, {3}, DType::Float64);
  Tensor bl = lt::make({1, 0, 1}, {3}, DType::Bool);
  Tensor u8 = lt::make({1, 2, 3}, {3}, DType::UInt8);
  Tensor i8 = lt::make({1, 2, 3}, {3}, DType::Int8);

  SUBCASE("tensor with python scalar: scalar promotes only a lower category") {
    Tensor r = i32 + 2.5;  // float scalar: default float dtype
    CHECK(r.dtype() == DType::Float32);
    check_close(r, {3.5, 4.5, 5.5});
    CHECK((i32 * 2.5).dtype() == DType::Float32);
    check_close(i32 * 2.5, {2.5, 5, 7.5});
    CHECK((i32 + 2).dtype() == DType::Int32);  // int scalar keeps int32
    CHECK((f16 * 2.5).dtype() == DType::Float16);
    check_close(f16 * 2.5, {2.5, 5, 7.5});
    CHECK((bf16 * 2.5).dtype() == DType::BFloat16);
    CHECK((f32 + 1e10).dtype() == DType::Float32);
    CHECK((bl + 1).dtype() == DType::Int64);
    lt::check_equal(bl + 1, {2, 1, 2});
    CHECK((bl + 1.5).dtype() == DType::Float32);
    CHECK((2.5 - i64).dtype() == DType::Float32);
    check_close(2.5 - i64, {1.5, 0.5, -0.5});
    CHECK((i64 < 2.5).dtype() == DType::Bool);
    lt::check_equal(i64 < 2.5, {1, 1, 0});  // compared as floats, not truncated
    CHECK((i32 / 2).dtype() == DType::Float32);
    check_close(i32 / 2, {0.5, 1, 1.5});
  }
  SUBCASE("tensor with tensor") {
    CHECK((i32 + i64).dtype() == DType::Int64);
    CHECK((i32 + f16).dtype() == DType::Float16);
    CHECK((f16 + bf16).dtype() == DType::Float32);
    CHECK((f16 + f32).dtype() == DType::Float32);
    CHECK((f32 + f64).dtype() == DType::Float64);
    CHECK((u8 + i8).dtype() == DType::Int16);  // as torch
    CHECK((bl + bl).dtype() == DType::Bool);
    lt::check_equal(bl + bl, {1, 0, 1});  // bool add is logical or
    lt::check_equal(bl * bl, {1, 0, 1});
    CHECK((bl + i32).dtype() == DType::Int32);
    lt::check_equal(bl + i32, {2, 2, 4});
    check_close(i32 + f64, {2, 4, 6});
  }
  SUBCASE("0-dim tensors promote like torch") {
    Tensor z64 = scalar_tensor(2.5, DType::Float64);
    Tensor zi = scalar_tensor(int64_t(7), DType::Int64);
    CHECK(z64.dim() == 0);
    CHECK((i32 + z64).dtype() == DType::Float64);  // higher category: the 0-dim's dtype
    check_close(i32 + z64, {3.5, 4.5, 5.5});
    CHECK((f32 + z64).dtype() == DType::Float32);  // same category: dimensioned wins
    CHECK((f16 + z64).dtype() == DType::Float16);
    CHECK((i32 + zi).dtype() == DType::Int32);
    lt::check_equal(i32 + zi, {8, 9, 10});
    CHECK((z64 + zi).dtype() == DType::Float64);  // both 0-dim: ordinary promotion
    CHECK((z64 + zi).dim() == 0);
    CHECK((z64 + zi).item<double>() == 9.5);
    CHECK((bl + zi).dtype() == DType::Int64);
  }
  SUBCASE("promotion is value-exact for large int64") {
    int64_t big = (int64_t(1) << 53) + 1;
    Tensor t = loom::tensor<int64_t>({big, -big}, {2});
    CHECK((t + 1).to_vector<int64_t>() == std::vector<int64_t>{big + 1, -big + 1});
    CHECK((t + loom::tensor<int32_t>({1, 1}, {2})).to_vector<int64_t>() ==
          std::vector<int64_t>{big + 1, -big + 1});
  }
}

TEST_CASE("binary: non-contiguous, size-1 and empty inputs") {
  Tensor a = lt::random({6, 8}, DType::Float64, 31);
  Tensor b = lt::random({8, 6}, DType::Float64, 32);
  auto add = [](double x, double y) { return x + y; };
  auto mul = [](double x, double y) { return x * y; };
  SUBCASE("transposed operand") {
    Tensor bt = b.t();  // [6, 8] with strides [1, 6]
    CHECK_FALSE(bt.is_contiguous());
    check_close(a + bt, lt::ref_binary(host(a), {6, 8}, host(bt), {6, 8}, add));
    check_close(bt * bt, lt::ref_binary(host(bt), {6, 8}, host(bt), {6, 8}, mul));
  }
  SUBCASE("step slices and negative-start slices") {
    Tensor s1 = a.slice(1, 1, std::nullopt, 2);                  // [6, 4]
    Tensor s2 = a.slice(0, -4, std::nullopt).slice(1, 0, 8, 2);  // [4, 4]
    Tensor s3 = a.slice(0, 0, 6, 3).slice(1, 4, 8);              // [2, 4]
    check_close(s1.slice(0, 0, 4) * s2,
                lt::ref_binary(host(s1.slice(0, 0, 4)), {4, 4}, host(s2), {4, 4}, mul));
    check_close(s3 + s1.slice(0, 2, 4),
                lt::ref_binary(host(s3), {2, 4}, host(s1.slice(0, 2, 4)), {2, 4}, add));
  }
  SUBCASE("expanded (stride 0) operand and size-1 dims") {
    Tensor col = lt::random({6, 1}, DType::Float64, 33);
    Tensor e = col.expand({6, 8});
    check_close(a - e, lt::ref_binary(host(a), {6, 8}, host(col), {6, 1},
                                      [](double x, double y) { return x - y; }));
    Tensor one = lt::random({1, 1, 1}, DType::Float64, 34);
    check_close(a * one, lt::ref_binary(host(a), {6, 8}, host(one), {1, 1, 1}, mul));
    CHECK((a * one).shape() == Shape{1, 6, 8});
  }
  SUBCASE("empty dims broadcast to empty results") {
    Tensor z = zeros({0, 8}, DType::Float64);
    Tensor r = z + a.slice(0, 0, 1);
    CHECK(r.shape() == Shape{0, 8});
    CHECK(r.numel() == 0);
    CHECK(host(r).empty());
    Tensor z2 = zeros({3, 0}) * ones({1, 1});
    CHECK(z2.shape() == Shape{3, 0});
    CHECK((zeros({0}) + zeros({1})).shape() == Shape{0});
  }
  SUBCASE("0-dim with 0-dim stays 0-dim") {
    Tensor r = full({}, 2.0) * full({}, 3.0);
    CHECK(r.dim() == 0);
    CHECK(r.item<float>() == 6.0f);
  }
}

TEST_CASE("binary: where, clamp, lerp, addcmul, addcdiv, rsub against float64") {
  Tensor a = lt::random({5, 7}, DType::Float64, 41);
  Tensor b = lt::random({7}, DType::Float64, 42);
  Tensor c = a > 0.0;
  auto va = host(a), vb = lt::broadcast(host(b), {7}, {5, 7});
  std::vector<double> w(va.size()), cl(va.size()), lp(va.size()), acm(va.size()), acd(va.size()),
      rs(va.size());
  for (size_t i = 0; i < va.size(); ++i) {
    w[i] = va[i] > 0 ? va[i] : vb[i];
    cl[i] = std::min(std::max(va[i], -0.5), 0.75);
    lp[i] = va[i] + (vb[i] - va[i]) * 0.3;
    acm[i] = va[i] + va[i] * vb[i] * 2;
    acd[i] = va[i] + va[i] / vb[i] * 0.5;
    rs[i] = 1.5 - va[i];
  }
  check_close(where(c, a, b), w);
  check_close(where(c, a, 0.0), lt::ref_unary(va, [](double x) { return x > 0 ? x : 0.0; }));
  CHECK(where(c, 1, 0).dtype() == DType::Int64);
  lt::check_equal(where(c, 1, 0), lt::ref_unary(va, [](double x) { return double(x > 0); }));
  check_close(clamp(a, Scalar(-0.5), Scalar(0.75)), cl);
  check_close(clamp(a, std::optional<Tensor>(full({}, -0.5, DType::Float64)),
                    std::optional<Tensor>(full({}, 0.75, DType::Float64))),
              cl);
  check_close(lerp(a, b.expand({5, 7}), 0.3), lp);
  check_close(addcmul(a, a, b, 2), acm);
  check_close(addcdiv(a, a, b, 0.5), acd);
  check_close(rsub(a, 1.5), rs);
}

TEST_CASE("binary: pow by a scalar 2, 1 or -1 (a vector loop) is IEEE pow rounded once") {
  // Special values, subnormals and random magnitudes; the reference is pow in long double,
  // where the square and reciprocal of a float or double are exact before the one rounding.
  std::vector<double> xs = {0.0,
                            -0.0,
                            1.0,
                            -1.0,
                            3.0,
                            -2.5,
                            1e-40,
                            -1e-310,
                            1e30,
                            -3e200,
                            std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::quiet_NaN()};
  std::mt19937 g(11);
  std::uniform_real_distribution<double> e(-60, 60);
  for (int i = 0; i < 200; ++i) xs.push_back((g() & 1 ? -1 : 1) * std::exp2(e(g)) * 1.37);
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = lt::make(xs, {int64_t(xs.size())}, dt);
    std::vector<double> xv = host(x);  // as the dtype holds them
    for (double y : {2.0, 1.0, -1.0}) {
      std::vector<double> want;
      for (double v : xv) {
        long double r = std::pow((long double)v, (long double)y);
        want.push_back(dt == DType::Float32 ? double(float(r)) : double(r));
      }
      for (bool fused : {false, true}) {
        INFO(dtype_name(dt) << " ** " << y << (fused ? " fused" : " fusion off"));
        std::optional<lt::FusionOff> off;
        if (!fused) off.emplace();
        std::vector<double> got = host(fused ? pow(x * 1.0, y) * 1.0 : pow(x, y));
        for (size_t i = 0; i < want.size(); ++i) {
          CAPTURE(xv[i]);
          CHECK((std::isnan(want[i])
                     ? std::isnan(got[i])
                     : std::bit_cast<uint64_t>(got[i]) == std::bit_cast<uint64_t>(want[i])));
        }
      }
    }
  }
}
