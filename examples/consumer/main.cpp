// Built against an installed loom (cmake --install, then find_package(loom)).
#include <loom/loom.h>

#include <cmath>
#include <cstdio>

int main() {
  loom::Tensor x = loom::arange(0, 6, 1, loom::DType::Float32).reshape({2, 3});
  float s = loom::softmax(x, -1).sum().item<float>();
  std::printf("sum of two softmax rows = %.4f\n", s);
  return std::fabs(s - 2.0f) < 1e-5f ? 0 : 1;
}
