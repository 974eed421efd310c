// Where the CUDA planner takes column sums (BackendCaps::column_sums, column_sum_cols), on the
// stand-in driver (libcuda_mock.c, scripts/mock_cuda_check.sh; kernels do not run): a norm's
// weight and bias gradients inside dx's row kernel for rows of up to 8192 elements, not past
// that; a loss's mean inside its rows' kernel; never inside a column reduction (a bias
// gradient, whose kernel must stay free to split its long columns), where the CPU's plan takes
// one; and a norm's backward over no rows still launches the kernel that writes its (zero)
// sums. Prints a line a check; exits 1 if any fails.
#include <dlfcn.h>

#include <cstdio>
#include <string>
#include <vector>

#include "fusion/trace.h"
#include "loom.h"
using namespace loom;

namespace {

// Column sum outputs in the plan of `ts` (planned, not run).
int sums(const std::vector<Tensor>& ts) {
  std::vector<std::shared_ptr<Storage>> roots;
  for (const Tensor& t : ts) roots.push_back(t.storage());
  int n = 0;
  for (const Group& g : plan_storages(roots))
    for (const GOutput& o : g.outputs) n += o.colsum;
  return n;
}

int failed = 0;
void check(bool ok, const char* what, int got) {
  std::printf("%s %s (got %d)\n", ok ? "ok  " : "FAIL", what, got);
  failed += !ok;
}

int norm_sums(Device d, int64_t rows, int64_t cols) {
  Tensor x = randn({rows, cols}, {DType::Float32, d}).requires_grad_();
  Tensor w = randn({cols}, {DType::Float32, d}).requires_grad_();
  Tensor b = randn({cols}, {DType::Float32, d}).requires_grad_();
  Tensor dy = randn({rows, cols}, {DType::Float32, d});
  Tensor y = layer_norm(x, {cols}, w, b);
  loom::sync();
  y.backward(dy);
  const int n = sums({x.grad(), w.grad(), b.grad()});
  loom::sync();
  return n;
}

// A bias gradient (a column reduction) and the clip's sum of its squares.
int column_group_sums(Device d) {
  Tensor g = randn({4096, 256}, {DType::Float32, d});
  loom::sync();
  Tensor b = g.sum({0});
  Tensor n = (b * b).sum();
  const int k = sums({b, n});
  loom::sync();
  return k;
}

int loss_sums(Device d) {
  Tensor x = randn({300, 1000}, {DType::Float32, d}).requires_grad_();
  Tensor t = randint(0, 1000, {300}, {DType::Int64, d});
  loom::sync();
  Tensor loss = cross_entropy(x, t);
  loss.backward();
  const int k = sums({loss, x.grad()});
  loom::sync();
  return k;
}

// Kernel launches (the stand-in driver's count) of a layer_norm backward over no rows: dx is
// empty, dgamma and dbeta are zeros that loom_colsum still writes.
long empty_rows_launches(Device d) {
  void* mock = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  const unsigned long* calls =
      mock ? static_cast<const unsigned long*>(dlsym(mock, "mock_calls")) : nullptr;
  const char** names = mock ? static_cast<const char**>(dlsym(mock, "mock_count_names")) : nullptr;
  if (!calls || !names) return -1;
  int launch = 0;  // the count of cuLaunchKernel, by name
  while (names[launch] && std::string(names[launch]) != "cuLaunchKernel") ++launch;
  if (!names[launch]) return -1;
  Tensor x = randn({0, 256}, {DType::Float32, d}).requires_grad_();
  Tensor w = randn({256}, {DType::Float32, d}).requires_grad_();
  Tensor b = randn({256}, {DType::Float32, d}).requires_grad_();
  loom::sync();
  layer_norm(x, {256}, w, b).backward(randn({0, 256}, {DType::Float32, d}));
  const unsigned long before = calls[launch];
  loom::sync();
  return long(calls[launch] - before);
}

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IONBF, 0);
  if (!backend_available(DeviceKind::CUDA)) return std::printf("no CUDA backend\n"), 2;
  const Device gpu{DeviceKind::CUDA, 0};
  manual_seed(1);
  int n = norm_sums(gpu, 512, 1024);
  check(n == 2, "layer_norm backward [512, 1024]: dgamma and dbeta in dx's kernel", n);
  n = norm_sums(gpu, 8, 16384);
  check(n == 0, "layer_norm backward [8, 16384]: rows past 8192, no column sums", n);
  n = column_group_sums(gpu);
  check(n == 0, "a bias gradient's column reduction takes no column sum on cuda", n);
  n = column_group_sums(kCPU);
  check(n == 1, "  (the CPU's plan sums the squares inside it)", n);
  n = loss_sums(gpu);
  check(n == 1, "cross_entropy: the mean inside the logits' row kernel", n);
  const long l = empty_rows_launches(gpu);
  check(l >= 1, "layer_norm backward [0, 256]: the zero sums' kernel launched", int(l));
  return failed ? 1 : 0;
}
