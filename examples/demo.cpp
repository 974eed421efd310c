// loom demo: plain eager code; loom records it and runs it as a few fused kernels.
#include <cstdio>

#include "loom.h"

int main() {
  using namespace loom;
  manual_seed(0);
  Tensor x = randn({4, 8});
  Tensor w = ones({8}), b = zeros({8});

  reset_counters();
  Tensor y = layer_norm(x, {8}, w, b);  // mean, variance, normalize: one kernel
  Tensor p = softmax(y * 2.0, -1);      // max, sum, divide, plus the scaling: one kernel
  std::printf("softmax rows sum to %.6f\n", p.sum({-1}).mean().item<float>());
  std::printf("kernels run: %lld for %lld recorded ops\n", (long long)counters().kernels.load(),
              (long long)counters().nodes_recorded.load());
  std::printf("%s\n", p.str().c_str());
  std::printf("\nThe plan for softmax(x, -1):\n%s", explain(softmax(x, -1)).c_str());
  return 0;
}
