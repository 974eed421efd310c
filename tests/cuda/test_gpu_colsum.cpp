// Column sums inside a row kernel on the GPU (cuda/codegen_colsum.cpp): a norm's weight and
// bias gradients summed over the rows in the kernel of dx, and a loss's mean of its rows' terms
// in theirs, against the same backward on the CPU. Shapes where a block walks many rows and
// several row groups share a block, rows of odd lengths (single-column chunks), several leading
// dims, rows past the CUDA limit (column sums off there), no rows at all (the sums are zeros,
// written though the row kernel has nothing to do: last, so the pool's memory holds earlier
// results), f32 and bf16. Skips itself where CUDA
// is unavailable.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "../helpers.h"
#include "loom.h"

using namespace loom;

namespace {

const Device kGPU{DeviceKind::CUDA, 0};

// Tolerance for sums over many rows: relative to the reference's largest magnitude.
lt::Tol sum_tol(const std::vector<double>& want, DType t) {
  double m = 0;
  for (double v : want) m = std::max(m, std::fabs(v));
  const double r = t == DType::Float32 ? 2e-4 : 2e-2;
  return lt::Tol{r, r * m};
}

// The gradients of layer_norm (with weight and bias) or rms_norm (weight) of x under dy.
std::vector<Tensor> norm_grads(bool layer, const Tensor& x0, const Tensor& w0, const Tensor& b0,
                               const Tensor& dy, Device d) {
  Tensor x = x0.to(d).requires_grad_(), w = w0.to(d).requires_grad_();
  Tensor b = b0.to(d).requires_grad_();
  const int64_t C = x0.shape().back();
  Tensor y = layer ? layer_norm(x, {C}, w, b) : rms_norm(x, {C}, w);
  y.backward(dy.to(d));
  std::vector<Tensor> g{x.grad(), w.grad()};
  if (layer) g.push_back(b.grad());
  return g;
}

}  // namespace

TEST_CASE("gpu: norms' weight and bias gradients summed in dx's row kernel match the CPU") {
  if (!backend_available(DeviceKind::CUDA)) {
    MESSAGE("CUDA unavailable, skipping");
    return;
  }
  const std::vector<Shape> shapes = {{7, 33},     {300, 1000}, {1000, 4096}, {2, 50, 512},
                                     {40, 8192},  {9, 16384},  {5000, 64},   {333, 1001},
                                     {4100, 128}, {1, 2, 256}, {0, 512},     {2, 0, 64}};
  uint32_t seed = 900;
  for (const Shape& s : shapes)
    for (DType t : {DType::Float32, DType::BFloat16})
      for (bool layer : {true, false}) {
        CAPTURE(shape_str(s));
        CAPTURE(dtype_name(t));
        CAPTURE(layer);
        const int64_t C = s.back();
        Tensor x = lt::random(s, t, ++seed), dy = lt::random(s, t, ++seed);
        Tensor w = lt::random({C}, t, ++seed, 0.5, 1.5), b = lt::random({C}, t, ++seed);
        std::vector<Tensor> want = norm_grads(layer, x, w, b, dy, kCPU);
        std::vector<Tensor> got = norm_grads(layer, x, w, b, dy, kGPU);
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          CAPTURE(i);  // dx, dw, db
          const std::vector<double> ref = lt::host(want[i]);
          lt::check_close(got[i].to(kCPU), ref, i == 0 ? lt::tol(t) : sum_tol(ref, t));
        }
      }
}

TEST_CASE("gpu: a cross entropy's mean summed in the logits' row kernel matches the CPU") {
  if (!backend_available(DeviceKind::CUDA)) {
    MESSAGE("CUDA unavailable, skipping");
    return;
  }
  for (Shape s : {Shape{300, 1000}, Shape{64, 32000}, Shape{3000, 17}}) {
    CAPTURE(shape_str(s));
    const int64_t R = s[0], C = s[1];
    std::vector<double> tv(static_cast<size_t>(R));
    for (int64_t i = 0; i < R; ++i) tv[size_t(i)] = double((i * 7919) % C);
    tv[1] = -100;  // ignored
    Tensor x0 = lt::random(s, DType::Float32, 77), t0 = lt::make(tv, {R}, DType::Int64);
    std::vector<double> loss, grad;
    for (Device d : {kCPU, kGPU}) {
      Tensor x = x0.to(d).requires_grad_();
      Tensor l = cross_entropy(x, t0.to(d));
      l.backward();
      loss.push_back(l.item<double>());
      if (d == kCPU) grad = lt::host(x.grad());
      if (d == kGPU) lt::check_close(x.grad().to(kCPU), grad);
    }
    CHECK(loss[1] == doctest::Approx(loss[0]).epsilon(1e-5));
  }
}
