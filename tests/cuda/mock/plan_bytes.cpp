// The CUDA plan of a bfloat16 causal attention's forward and backward in one flush, on the
// stand-in driver (libcuda_mock.c, scripts/mock_cuda_check.sh): prints the bytes the flush
// moves, its kernels, and whether the plan computes a value again where it is read (Planner::
// mark_recompute). The script runs it with LOOM_RECOMPUTE=0 and with the default and compares:
// with recomputation the forward's softmax kernel no longer writes the float32 probabilities
// the backward's row kernel reads (it computes them from the recomputed scores). Then, last on
// the line, whether the plan of a bf16 linear + GELU's backward keeps the GELU's derivative out
// of its bias gradient's column sum (1: the sum reads the dx its pointwise kernel wrote; CUDA's
// column kernels run such a body slowly, BackendCaps::column_bodies). Kernels do not run here:
// no values.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "fusion/trace.h"
#include "loom.h"
using namespace loom;

namespace {

// The fusion log of a flush of `t`, captured from stderr.
std::string flush_log(const Tensor& t) {
  std::fflush(stderr);
  char path[] = "/tmp/loom_plan_log_XXXXXX";
  const int fd = mkstemp(path), saved = dup(2);
  dup2(fd, 2);
  set_log_fusion(true);
  loom::sync();
  (void)t;
  set_log_fusion(false);
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  std::remove(path);
  return s.str();
}

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IONBF, 0);
  if (!backend_available(DeviceKind::CUDA)) return std::printf("no CUDA backend\n"), 2;
  const Device d{DeviceKind::CUDA, 0};
  manual_seed(1);
  auto leaf = [&] {
    return randn({4, 6, 128, 64}, {DType::Float32, d}).to(DType::BFloat16).requires_grad_();
  };
  Tensor q = leaf(), k = leaf(), v = leaf();
  loom::sync();
  reset_counters();
  Tensor y = scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, true);
  // The loss's gradient reads y: the backward's kernels come after the forward's.
  Tensor yf = y.to(DType::Float32);
  (yf * yf).sum().backward();
  const std::string plan = explain(q.grad());
  loom::sync();
  const long long bytes = counters().bytes_moved.load(), kernels = counters().kernels.load();
  Tensor x = randn({8, 64, 96}, {DType::Float32, d}).requires_grad_();
  Tensor w = randn({96, 96}, {DType::Float32, d}).requires_grad_();
  Tensor b = randn({96}, {DType::Float32, d}).requires_grad_();
  loom::sync();
  {
    AutocastGuard bf16(DeviceKind::CUDA, true, DType::BFloat16);
    Tensor h = gelu(linear(x, w, b), "none").to(DType::Float32);
    (h * h).sum().backward();
  }
  const std::string log = flush_log(b.grad());
  std::printf("%lld %lld %d %d\n", bytes, kernels,
              plan.find("computed again") != std::string::npos ? 1 : 0,
              log.find("leaves out a costly body") != std::string::npos ? 1 : 0);
  return 0;
}
