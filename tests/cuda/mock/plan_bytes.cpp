// The CUDA plan of a bfloat16 causal attention's forward and backward in one flush, on the
// stand-in driver (libcuda_mock.c, scripts/mock_cuda_check.sh): prints the bytes the flush
// moves, its kernels, and whether the plan computes a value again where it is read (Planner::
// mark_recompute). The script runs it with LOOM_RECOMPUTE=0 and with the default and compares:
// with recomputation the forward's softmax kernel no longer writes the float32 probabilities
// the backward's row kernel reads (it computes them from the recomputed scores). Kernels do not
// run here: no values.
#include <cstdio>
#include <string>

#include "loom.h"
using namespace loom;

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
  std::printf("%lld %lld %d\n", static_cast<long long>(counters().bytes_moved.load()),
              static_cast<long long>(counters().kernels.load()),
              plan.find("computed again") != std::string::npos ? 1 : 0);
  return 0;
}
