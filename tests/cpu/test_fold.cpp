// The CPU interpreter folds an Add/Sub/Mul into the Add/Sub/Mul that alone reads it, and a
// Relu into the op it alone reads (cpu/program.cpp fuse_pairs): every op pair, both argument
// orders, scalar / tensor / per-row operands, short and long rows, float32 and float64, must
// match fusion-off and a float64 reference.
#include "../helpers.h"
#include "fold_ops.h"

using namespace loom;
using namespace lt::fold;

namespace {

// The operand the outer op combines with the inner result.
enum class Other { Scalar, Tensor, RowMax };

void check_fold(const Shape& s, DType dt, char inner, char outer, bool inner_first, Other other,
                bool relu_after, uint32_t seed) {
  INFO("shape " << s.size() << "-d, " << numel(s) << " elements, dtype " << dtype_name(dt));
  INFO("(x " << inner << " y) " << outer << " other, inner first " << inner_first << ", other "
             << int(other) << ", relu " << relu_after);
  Tensor x = lt::random(s, dt, seed), y = lt::random(s, dt, seed + 1),
         z = lt::random(s, dt, seed + 2);
  auto f = [&] {
    Tensor w = other == Other::RowMax ? z.amax({int64_t(s.size()) - 1}, true) : z;
    Tensor in = arith(inner, x, y);
    Tensor r = other == Other::Scalar ? (inner_first ? (outer == '+'   ? in + 0.75
                                                        : outer == '-' ? in - 0.75
                                                                       : in * 0.75)
                                                     : (outer == '+'   ? 0.75 + in
                                                        : outer == '-' ? 0.75 - in
                                                                       : 0.75 * in))
                                      : (inner_first ? arith(outer, in, w) : arith(outer, w, in));
    return relu_after ? relu(r) : r;
  };
  // float64 reference
  std::vector<double> hx = lt::host(x), hy = lt::host(y), hz = lt::host(z);
  int64_t cols = s.back(), n = numel(s);
  std::vector<double> want(static_cast<size_t>(n)), row_max(static_cast<size_t>(n / cols));
  for (int64_t r0 = 0; r0 < n; r0 += cols)  // once a row (per element it was quadratic)
    row_max[size_t(r0 / cols)] = *std::max_element(hz.begin() + r0, hz.begin() + r0 + cols);
  for (int64_t i = 0; i < n; ++i) {
    double w = 0.75;
    if (other == Other::Tensor) w = hz[size_t(i)];
    if (other == Other::RowMax) w = row_max[size_t(i / cols)];
    double in = arith(inner, hx[size_t(i)], hy[size_t(i)]);
    double r = inner_first ? arith(outer, in, w) : arith(outer, w, in);
    want[size_t(i)] = relu_after ? std::max(r, 0.0) : r;
  }
  std::vector<double> got = lt::check_fused_matches_unfused(f);
  lt::check_close(lt::make(got, s, DType::Float64), want, lt::tol(dt));
}

}  // namespace

TEST_CASE("cpu fold: op pairs and a trailing relu match fusion-off and float64") {
  uint32_t seed = 7000;
  const char ops[] = {'+', '-', '*'};
  for (const Shape& s : {Shape{37, 45}, Shape{70001}})
    for (DType dt : {DType::Float32, DType::Float64})
      for (char inner : ops)
        for (char outer : ops)
          for (bool first : {true, false})
            for (Other o : {Other::Scalar, Other::Tensor, Other::RowMax})
              for (bool r : {false, true}) check_fold(s, dt, inner, outer, first, o, r, seed += 3);
}

TEST_CASE("cpu fold: relu of a plain op, NaN kept, and a folded value read twice") {
  Tensor x = lt::make({-1, 2, NAN, 0.5, -3, 4}, {6});
  Tensor y = lt::make({1, 1, 1, -2, 1, -5}, {6});
  // relu(x * y): NaN stays NaN, negatives become 0
  std::vector<double> got =
      lt::check_fused_matches_unfused([&] { return relu(x * y); }, lt::Tol{0, 0});
  lt::check_close(lt::make(got, {6}, DType::Float64), {0, 2, NAN, 0, 0, 0});
  // x * y + 1 read by two consumers: not folded into either, both right
  std::vector<double> got2 = lt::check_fused_matches_unfused([&] {
    Tensor t = x * y - 1.0;
    return t * 2.0 + relu(t);
  });
  lt::check_close(lt::make(got2, {6}, DType::Float64), {-4, 3, NAN, -4, -8, -42});
}

// A Div pairs with an Add/Sub/Mul on either side (a / (b + c), (a + b) / c, c - a / b, k * m / d,
// relu(a / b + c)), tensor or scalar operands: each op rounds as alone, so bit for bit against
// fusion-off, and close to float64.
TEST_CASE("cpu fold: division pairs match fusion-off bit for bit and float64") {
  uint32_t seed = 9100;
  for (const Shape& s : {Shape{37, 45}, Shape{70001}})
    for (DType dt : {DType::Float32, DType::Float64})
      for (char inner : {'+', '-', '*', '/'})
        for (char outer : {'+', '-', '*', '/'}) {
          if (inner != '/' && outer != '/') continue;
          for (bool first : {true, false})
            for (bool scalar : {false, true})
              for (bool r : {false, true}) {
                INFO(numel(s) << " elements, " << dtype_name(dt) << ": (a " << inner << " b) "
                              << outer << " c, inner first " << first << ", scalar " << scalar
                              << ", relu " << r);
                seed += 3;
                // operands in [0.5, 2]: no quotient near a pole
                Tensor a = lt::random(s, dt, seed, 0.5, 2), b = lt::random(s, dt, seed + 1, 0.5, 2),
                       c = lt::random(s, dt, seed + 2, 0.5, 2);
                auto f = [&] {
                  Tensor in = arith(inner, a, b);
                  Tensor o = scalar ? (first ? arith(outer, in, 1.25) : arith(outer, 1.25, in))
                                    : (first ? arith(outer, in, c) : arith(outer, c, in));
                  return r ? relu(o) : o;
                };
                if (knob_flag(Knob::CpuPairs)) {
                  std::string text = explain(f());
                  CHECK(text.find("pair:") != std::string::npos);
                }
                std::vector<double> got = lt::check_fused_matches_unfused(f, {}, true);
                std::vector<double> ha = lt::host(a), hb = lt::host(b), hc = lt::host(c),
                                    want(ha.size());
                for (size_t i = 0; i < ha.size(); ++i) {
                  double w = scalar ? 1.25 : hc[i], in = arith(inner, ha[i], hb[i]);
                  double o = first ? arith(outer, in, w) : arith(outer, w, in);
                  want[i] = r ? std::max(o, 0.0) : o;
                }
                lt::check_close(lt::make(got, s, DType::Float64), want, lt::tol(dt));
              }
        }
}

// A plain op of tile values and one value per row (the row's max, in the same kernel) in either
// argument order: rows short enough to pack many into a tile (the value held in a register per
// row, or spread over the tile), rows of kRowCall and more (a call a row) and odd lengths with
// a remainder. Bit for bit against fusion-off (each op rounds once), and close to float64.
TEST_CASE("cpu fold: plain ops of per-row values in both orders match fusion-off and float64") {
  uint32_t seed = 9700;
  for (const Shape& s : {Shape{300, 16}, Shape{97, 64}, Shape{40, 45}, Shape{33, 300},
                         Shape{9, 1000}, Shape{2, 3, 129}})
    for (DType dt : {DType::Float32, DType::Float64})
      for (char op : {'+', '-', '*', '/'})
        for (bool row_first : {false, true}) {
          INFO(numel(s) << " elements, rows of " << s.back() << ", " << dtype_name(dt) << ", op "
                        << op << ", row value first " << row_first);
          seed += 2;
          Tensor x = lt::random(s, dt, seed, 0.5, 2), z = lt::random(s, dt, seed + 1, 0.5, 2);
          const int64_t last = int64_t(s.size()) - 1;
          auto f = [&] {
            Tensor m = z.amax({last}, true);
            return row_first ? arith(op, m, x) : arith(op, x, m);
          };
          std::vector<double> got = lt::check_fused_matches_unfused(f, {}, true);
          std::vector<double> hx = lt::host(x), hz = lt::host(z), want(hx.size());
          const size_t cols = size_t(s.back());
          for (size_t r0 = 0; r0 < hx.size(); r0 += cols) {
            double m = *std::max_element(hz.begin() + long(r0), hz.begin() + long(r0 + cols));
            for (size_t j = r0; j < r0 + cols; ++j)
              want[j] = row_first ? arith(op, m, hx[j]) : arith(op, hx[j], m);
          }
          lt::check_close(lt::make(got, s, DType::Float64), want, lt::tol(dt));
        }
}
