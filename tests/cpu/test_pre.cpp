// The tile program computes an exp/tanh/sigmoid's input in the same loop when it is an
// Add/Sub/Mul of a tensor by constants nothing else reads (cpu/program.cpp, Program::pre:
// chain8's tanh(x * 1.5 + 0.5)), and leaves f(x) * y + w to the unary and tail folds (one
// instruction) rather than the pair fold: every op, both operand orders, one op or a folded
// pair of them, the three instruction forms, short rows, long rows, vector tails; bit for
// bit against fusion-off (each op rounds as alone) and against a float64 reference.
#include "../helpers.h"
#include "cpu/vmath.h"
#include "fold_ops.h"

using namespace loom;
using namespace lt::fold;

namespace {

// Whether the fold is on: the own kernels and the unary fold it extends (the library's rule).
bool pre_fold_on() {
  return cpu::vmath_on() && knob_flag(Knob::CpuPreFold) && knob_flag(Knob::CpuUnaryFold);
}

// Instructions of a program with `loads` loads: the whole-rows line of explain() lists every
// computed node, loads included, as %id->rN.
int instructions(const std::string& text, int loads) {
  size_t at = text.find("whole rows:");
  REQUIRE(at != std::string::npos);
  std::string line = text.substr(at, text.find('\n', at) - at);
  int n = 0;
  for (size_t p = line.find("->r"); p != std::string::npos; p = line.find("->r", p + 1)) ++n;
  return n - loads;
}

}  // namespace

TEST_CASE("cpu pre fold: f(x op k) and f((x op k) op k') computed in f's loop") {
  uint32_t seed = 15000;
  const char ops[] = {'+', '-', '*'};
  for (Shape s : {Shape{3, 37}, Shape{70001}, Shape{2, 20003}})
    for (char f : {'t', 's', 'e'})
      for (char op1 : ops)
        for (char op2 : {'.', '+', '-', '*'})  // '.': one op only
          for (bool k1_first : {false, true})
            for (bool k2_first : {false, true})
              for (int form = 0; form < 3; ++form) {
                if (op2 == '.' && k2_first) continue;
                if (numel(s) > 1000 && (form != (op1 == '*' ? 0 : op1 == '+' ? 1 : 2) || f == 'e'))
                  continue;  // long rows: a subset (each op and order still)
                INFO("cols " << s.back() << " f " << f << " ops " << op1 << op2 << " k first "
                             << k1_first << k2_first << " form " << form);
                const double k1 = 1.5, k2 = -0.375;
                Tensor x = lt::random(s, DType::Float32, ++seed, -3, 3),
                       y = lt::random(s, DType::Float32, ++seed),
                       z = lt::random(s, DType::Float32, ++seed);
                auto prog = [&] {
                  Tensor u = k1_first ? arith(op1, k1, x) : arith(op1, x, k1);
                  if (op2 != '.') u = k2_first ? arith(op2, k2, u) : arith(op2, u, k2);
                  Tensor fu = ft(f, u);
                  // form: 0 y * f(u) (f the `b` of a plain op), 1 f(u) - y (f its `a`),
                  // 2 (y + z) * f(u) (a folded pair's `b`)
                  return form == 0 ? y * fu : form == 1 ? fu - y : (y + z) * fu;
                };
                std::vector<double> hx = lt::host(x), hy = lt::host(y), hz = lt::host(z),
                                    want(hx.size());
                for (size_t i = 0; i < hx.size(); ++i) {
                  double u = k1_first ? arith(op1, k1, hx[i]) : arith(op1, hx[i], k1);
                  if (op2 != '.') u = k2_first ? arith(op2, k2, u) : arith(op2, u, k2);
                  double fu = f64(f, u);
                  want[i] = form == 0 ? hy[i] * fu : form == 1 ? fu - hy[i] : (hy[i] + hz[i]) * fu;
                }
                std::string text = explain(prog());
                if (pre_fold_on()) {
                  CHECK(text.find(" pre ") != std::string::npos);
                  // (x op k) op k' and (y + z) * f are pairs first (LOOM_CPU_PAIRS)
                  if ((op2 == '.' && form < 2) || knob_flag(Knob::CpuPairs))
                    CHECK(instructions(text, form == 2 ? 3 : 2) == 1);
                }
                // each op rounds as alone where folded (a pair loop of its own may contract
                // x * k + k' to an fma)
                std::vector<double> got = lt::check_fused_matches_unfused(prog, {}, pre_fold_on());
                lt::check_close(lt::make(got, s, DType::Float64), want, lt::tol(DType::Float32));
              }
}

TEST_CASE("cpu pre fold: signed zeros, infinities, NaN, integer constants") {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<double> xs = {0,      -0.0, inf, -inf, NAN, 1,   -1,   0.5, 1e30,
                            -1e-30, 3,    -3,  20,   -20, 100, -100, 7};
  Tensor x = lt::make(xs, {int64_t(xs.size())}), y = lt::make(xs, {int64_t(xs.size())}) + 0.0;
  bool exact = pre_fold_on();
  // -0 * k + -0 keeps -0 (tanh(-0) = -0); inf * 0 = NaN; inf - inf = NaN; 0 - 0 = +0
  lt::check_fused_matches_unfused([&] { return tanh(x * 0.0 + -0.0) * y; }, {}, exact);
  lt::check_fused_matches_unfused([&] { return tanh(x * -0.0 - 0.0) * y; }, {}, exact);
  lt::check_fused_matches_unfused([&] { return exp(inf - x * 2.0) - y; }, {}, exact);
  lt::check_fused_matches_unfused([&] { return sigmoid(0.0 - (x - 0.0)) * y; }, {}, exact);
  lt::check_fused_matches_unfused([&] { return y + exp(x * 2 + 1); }, {}, exact);  // int scalars
  // -0 through the whole instruction: tanh(-0 * 1 - 0) * 1 = -0
  Tensor nz = lt::make({-0.0}, {1});
  std::vector<double> got =
      lt::check_fused_matches_unfused([&] { return tanh(nz * 1.0 - 0.0) * (nz + 1.0); }, {}, exact);
  CHECK(got[0] == 0.0);
  CHECK(std::signbit(got[0]));
}

TEST_CASE("cpu pre fold: not folded where the input is read twice or not constant") {
  for (Shape s : {Shape{5, 33}, Shape{40009}}) {
    Tensor x = lt::random(s, DType::Float32, uint32_t(s.back()), -3, 3),
           y = lt::random(s, DType::Float32, uint32_t(s.back() + 1));
    int64_t last = int64_t(s.size()) - 1;
    // u read by tanh and by the add: computed once, tanh's loop does not recompute it
    auto twice = [&] {
      Tensor u = x * 1.5 + 0.5;
      return tanh(u) * y + u;
    };
    std::string text = explain(twice());
    CHECK(text.find(" pre ") == std::string::npos);
    std::vector<double> got = lt::check_fused_matches_unfused(twice);
    std::vector<double> hx = lt::host(x), hy = lt::host(y), want(hx.size());
    for (size_t i = 0; i < hx.size(); ++i) {
      double u = hx[i] * 1.5 + 0.5;
      want[i] = std::tanh(u) * hy[i] + u;
    }
    lt::check_close(lt::make(got, s, DType::Float64), want, lt::tol(DType::Float32));
    // x - rowmax: a per-row value, not a constant; x * y: two tensors
    auto rows = [&] { return tanh(x - x.amax({last}, true)) * y + sigmoid(x * y) * x; };
    CHECK(explain(rows()).find(" pre ") == std::string::npos);
    got = lt::check_fused_matches_unfused(rows);
    int64_t cols = s.back();
    for (int64_t r0 = 0; r0 < int64_t(hx.size()); r0 += cols) {
      double mx = *std::max_element(hx.begin() + r0, hx.begin() + r0 + cols);
      for (int64_t i = r0; i < r0 + cols; ++i) {
        size_t k = size_t(i);
        want[k] = std::tanh(hx[k] - mx) * hy[k] + 1.0 / (1.0 + std::exp(-hx[k] * hy[k])) * hx[k];
      }
    }
    lt::check_close(lt::make(got, s, DType::Float64), want, lt::tol(DType::Float32));
  }
}

// f(x) * y + w (and relu of it, and w first): one instruction, the unary fold computing f in
// the multiply's loop and the tail fold the add, not a pair (x * y) + w that leaves f apart.
TEST_CASE("cpu pre fold: f(x) * y + w is one instruction, not a pair and f") {
  uint32_t seed = 16000;
  for (Shape s : {Shape{3, 37}, Shape{70001}})
    for (char f : {'t', 's', 'e'})
      for (char op : {'+', '-', '*'})
        for (bool f_first : {true, false})
          for (bool w_first : {true, false})
            for (bool relu_after : {false, true}) {
              INFO("cols " << s.back() << " f " << f << " op " << op << " f first " << f_first
                           << " w first " << w_first << " relu " << relu_after);
              Tensor x = lt::random(s, DType::Float32, ++seed, -3, 3),
                     y = lt::random(s, DType::Float32, ++seed),
                     w = lt::random(s, DType::Float32, ++seed);
              auto prog = [&] {
                Tensor fy = f_first ? ft(f, x) * y : y * ft(f, x);
                Tensor r = w_first ? (op == '+'   ? w + fy
                                      : op == '-' ? w - fy
                                                  : w * fy)
                                   : (op == '+'   ? fy + w
                                      : op == '-' ? fy - w
                                                  : fy * w);
                return relu_after ? relu(r) : r;
              };
              std::vector<double> hx = lt::host(x), hy = lt::host(y), hw = lt::host(w),
                                  want(hx.size());
              for (size_t i = 0; i < hx.size(); ++i) {
                double fy = f64(f, hx[i]) * hy[i];
                double r = w_first ? arith(op, hw[i], fy) : arith(op, fy, hw[i]);
                want[i] = relu_after ? std::max(r, 0.0) : r;
              }
              bool folds =
                  cpu::vmath_on() && knob_flag(Knob::CpuUnaryFold) && knob_flag(Knob::CpuTailFold);
              // the relu fold is the pair fold's (LOOM_CPU_PAIRS)
              if (folds && (!relu_after || knob_flag(Knob::CpuPairs)))
                CHECK(instructions(explain(prog()), 3) == 1);
              // the tail's fma is exact but for the op's own rounding: bit for bit (a pair
              // loop of f(x) * y and w may contract to an fma)
              std::vector<double> got = lt::check_fused_matches_unfused(prog, {}, folds);
              lt::check_close(lt::make(got, s, DType::Float64), want, lt::tol(DType::Float32));
            }
}

// relu(f(x) op y) and relu(y op f(x)): the relu fold leaves the op's node in place, dead; the
// reader counts see only live nodes, so f still has one reader and folds (in either operand).
TEST_CASE("cpu pre fold: relu of an op with an f operand is one instruction") {
  uint32_t seed = 17000;
  for (Shape s : {Shape{3, 37}, Shape{70001}})
    for (char f : {'t', 's', 'e'})
      for (char op : {'+', '-', '*'})
        for (bool f_first : {true, false}) {
          INFO("cols " << s.back() << " f " << f << " op " << op << " f first " << f_first);
          Tensor x = lt::random(s, DType::Float32, ++seed, -3, 3),
                 y = lt::random(s, DType::Float32, ++seed);
          auto prog = [&] {
            Tensor fx = ft(f, x);
            Tensor r = f_first ? (op == '+'   ? fx + y
                                  : op == '-' ? fx - y
                                              : fx * y)
                               : (op == '+'   ? y + fx
                                  : op == '-' ? y - fx
                                              : y * fx);
            return relu(r);
          };
          std::vector<double> hx = lt::host(x), hy = lt::host(y), want(hx.size());
          for (size_t i = 0; i < hx.size(); ++i) {
            double fx = f64(f, hx[i]);
            want[i] = std::max(f_first ? arith(op, fx, hy[i]) : arith(op, hy[i], fx), 0.0);
          }
          bool folds = cpu::vmath_on() && knob_flag(Knob::CpuUnaryFold);
          if (folds && knob_flag(Knob::CpuPairs)) CHECK(instructions(explain(prog()), 2) == 1);
          std::vector<double> got = lt::check_fused_matches_unfused(prog, {}, cpu::vmath_on());
          lt::check_close(lt::make(got, s, DType::Float64), want, lt::tol(DType::Float32));
        }
}
