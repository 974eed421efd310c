// The tile program folds an Add/Sub/Mul (relu'd or not) of an instruction that computes
// exp/tanh/sigmoid in its loop into that loop (cpu/program.cpp fold_tails, chain8's `- 0.25`
// and relu): every tail op, both operand orders, scalar / tensor / per-row operands, the
// three forms of the instruction, short rows, long rows (one and several), tails of 16-lane
// vectors; against fusion-off and a float64 reference.
#include "../helpers.h"
#include "cpu/vmath.h"
#include "fold_ops.h"

using namespace loom;
using namespace lt::fold;

namespace {

// Whether the fold is on: the own kernels, and neither it nor the unary fold it builds on
// turned off (LOOM_CPU_TAIL_FOLD=0, LOOM_CPU_UNARY_FOLD=0).
// Read by the library's rule (tensor/env.h), so `=off` or `=false` agree with it too.
bool tail_fold_on() {
  return cpu::vmath_on() && knob_flag(Knob::CpuTailFold) && knob_flag(Knob::CpuUnaryFold);
}

}  // namespace

TEST_CASE("cpu tail fold: an op and relu after a folded exp/tanh/sigmoid") {
  uint32_t seed = 12000;
  // form (the instruction: a folded pair with f as its `b`; a plain f(x) op y would pair with
  // the tail op instead): 0 (y + z) * f(x), 1 f(x) - (y + z), 2 (y * z) + f(x);
  // other: 0 a scalar, 1 a tensor, 2 a row max
  for (Shape s : {Shape{3, 37}, Shape{70001}, Shape{2, 20003}, Shape{9, 16411}})
    for (char f : {'t', 's', 'e'})
      for (char op : {'+', '-', '*'})
        for (int form = 0; form < 3; ++form)
          for (int other = 0; other < 3; ++other)
            for (bool first : {true, false})
              for (bool relu_after : {false, true}) {
                if (numel(s) > 1000 && (f != 't' || form == 1) && (other != 1 || relu_after))
                  continue;  // large shapes: a subset (each op / order / operand kind still)
                if (s.size() == 1 && other == 2) continue;
                INFO("cols " << s.back() << " f " << f << " op " << op << " form " << form
                             << " other " << other << " first " << first << " relu " << relu_after);
                Tensor x = lt::random(s, DType::Float32, ++seed, -3, 3),
                       y = lt::random(s, DType::Float32, ++seed),
                       z = lt::random(s, DType::Float32, ++seed);
                int64_t last = int64_t(s.size()) - 1;
                auto prog = [&] {
                  Tensor fx = ft(f, x);
                  Tensor v = form == 0 ? (y + z) * fx : form == 1 ? fx - (y + z) : y * z + fx;
                  Tensor r;
                  if (other == 0) {
                    r = first ? arith(op, v, 0.25) : arith(op, 0.25, v);
                  } else {
                    Tensor w = other == 2 ? z.amax({last}, true) : z;
                    r = first ? arith(op, v, w) : arith(op, w, v);
                  }
                  return relu_after ? relu(r) : r;
                };
                std::vector<double> hx = lt::host(x), hy = lt::host(y), hz = lt::host(z);
                int64_t cols = s.back(), n = numel(s);
                std::vector<double> want(size_t(n), 0.0);
                for (int64_t r0 = 0; r0 < n; r0 += cols) {
                  double mx = *std::max_element(hz.begin() + r0, hz.begin() + r0 + cols);
                  for (int64_t i = r0; i < r0 + cols; ++i) {
                    size_t k = size_t(i);
                    double fx = f64(f, hx[k]);
                    double v = form == 0   ? (hy[k] + hz[k]) * fx
                               : form == 1 ? fx - (hy[k] + hz[k])
                                           : hy[k] * hz[k] + fx;
                    double w = other == 0 ? 0.25 : other == 1 ? hz[k] : mx;
                    double r = first ? arith(op, v, w) : arith(op, w, v);
                    want[k] = relu_after ? std::max(r, 0.0) : r;
                  }
                }
                // forms 0 and 1 round the same steps either way (the tail's fma is exact
                // but for the op's own rounding; form 2's y * z + f may contract to an
                // fma in the pair loop): bit for bit with the own kernels
                bool exact = cpu::vmath_on() && form < 2;
                // the fold took place (cpu/program.cpp prints it), where it is on
                if (tail_fold_on()) CHECK(explain(prog()).find(" tail %") != std::string::npos);
                std::vector<double> got = lt::check_fused_matches_unfused(prog, {}, exact);
                lt::check_close(lt::make(got, s, DType::Float64), want, lt::tol(DType::Float32));
              }
}

TEST_CASE("cpu tail fold: signed zeros, NaN and infinities through the tail") {
  // exp(x) * w with w = 0, -0, inf, NaN; exp(x) - w with w = exp(x) (an exact +0); relu'd
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<double> xs = {0, -1, 2, -100, 100, NAN, 0, 1, -0.0, 3, 0.5, -2, 1, 1, 1, 1, 1, 1};
  std::vector<double> ws = {0, -0.0, inf, NAN, -inf, 1, -1, -0.0, 0, 2, -3, 5, 0, -0.0, 7, 8, 9, 1};
  Tensor x = lt::make(xs, {int64_t(xs.size())}), w = lt::make(ws, {int64_t(ws.size())});
  bool exact = cpu::vmath_on();
  lt::check_fused_matches_unfused([&] { return ((x + 0.0) * exp(x)) * w; }, {}, exact);
  lt::check_fused_matches_unfused([&] { return ((x + 0.0) * exp(x)) - w; }, {}, exact);
  lt::check_fused_matches_unfused([&] { return w + (exp(x) - (x + 0.0)); }, {}, exact);
  lt::check_fused_matches_unfused([&] { return relu(w - (x + 0.0) * sigmoid(x)); }, {}, exact);
  lt::check_fused_matches_unfused([&] { return (tanh(x) * (x + 0.0)) * -0.0; }, {}, exact);
  // a -0 result stays -0 without a relu: tanh(-0) * 1 - +0 = -0 + -0
  Tensor nz = lt::make({-0.0}, {1});
  std::vector<double> got =
      lt::check_fused_matches_unfused([&] { return (tanh(nz) * (nz + 1.0)) - 0.0; }, {}, exact);
  CHECK(got[0] == 0.0);
  CHECK(std::signbit(got[0]));
}

TEST_CASE("cpu tail fold: chain8 (the bench's program) in rows, folded and right") {
  for (Shape s : {Shape{33, 45}, Shape{3, 20011}}) {
    INFO("cols " << s.back());
    Tensor x = lt::random(s, DType::Float32, uint32_t(s.back()), -6, 6);
    auto chain8 = [&] { return relu(sigmoid(tanh(x * 1.5 + 0.5) * x) + x * x - 0.25); };
    if (tail_fold_on()) CHECK(explain(chain8()).find(" tail %") != std::string::npos);
    std::vector<double> hx = lt::host(x), want(hx.size());
    for (size_t i = 0; i < hx.size(); ++i) {
      double v = hx[i], sg = 1.0 / (1.0 + std::exp(-(std::tanh(v * 1.5 + 0.5) * v)));
      want[i] = std::max(sg + v * v - 0.25, 0.0);
    }
    std::vector<double> got = lt::check_fused_matches_unfused(chain8);
    lt::check_close(lt::make(got, s, DType::Float64), want, lt::tol(DType::Float32));
  }
}

// Outputs of 8 MB and more are streamed (cpu/interp_job.h); a pair_unary_f32 instruction then
// writes them itself with non-temporal stores where its run of the output is 64-byte aligned
// (LOOM_CPU_STREAM_DIRECT), else through a register and a copy: long rows, whole rows that
// start aligned (8192 columns) and rows that mostly do not (4099), vector tails.
TEST_CASE("cpu tail fold: large outputs written by the instruction itself") {
  for (Shape s : {Shape{2100003}, Shape{2, 1500007}, Shape{300, 8192}, Shape{600, 4099}}) {
    INFO("shape " << s.size() << "-d, cols " << s.back());
    Tensor x = lt::random(s, DType::Float32, uint32_t(s.back() + 5), -6, 6);
    Tensor y = lt::random(s, DType::Float32, uint32_t(s.back() + 6));
    auto chain8 = [&] { return relu(sigmoid(tanh(x * 1.5 + 0.5) * x) + x * x - 0.25); };
    auto other = [&] { return 0.5 - (y + 1.0) * exp(x * 0.25); };
    std::vector<double> hx = lt::host(x), hy = lt::host(y), want(hx.size()), want2(hx.size());
    for (size_t i = 0; i < hx.size(); ++i) {
      double v = hx[i], sg = 1.0 / (1.0 + std::exp(-(std::tanh(v * 1.5 + 0.5) * v)));
      want[i] = std::max(sg + v * v - 0.25, 0.0);
      want2[i] = 0.5 - (hy[i] + 1.0) * std::exp(v * 0.25);
    }
    std::vector<double> got = lt::check_fused_matches_unfused(chain8);
    lt::check_close(lt::make(got, s, DType::Float64), want, lt::tol(DType::Float32));
    got = lt::check_fused_matches_unfused(other, {}, cpu::vmath_on());
    lt::check_close(lt::make(got, s, DType::Float64), want2, lt::tol(DType::Float32));
  }
}
