// Built against an installed loom (cmake --install, then find_package(loom)).
#include <loom/loom.h>

#include <cmath>
#include <cstdio>

int main() {
  loom::Tensor x = loom::arange(0, 6, 1, loom::DType::Float32).reshape({2, 3});
  float s = loom::softmax(x, -1).sum().item<float>();
  std::printf("sum of two softmax rows = %.4f\n", s);
  if (loom::cuda::is_available()) {  // the streams API is installed too
    loom::cuda::Stream st = loom::cuda::Stream::create();
    loom::cuda::StreamGuard g(st);
    float t = loom::softmax(x.to(loom::Device::parse("cuda")), -1).sum().item<float>();
    std::printf("on a side stream: %.4f\n", t);
    if (std::fabs(t - 2.0f) > 1e-5f) return 1;
  }
  return std::fabs(s - 2.0f) < 1e-5f ? 0 : 1;
}
