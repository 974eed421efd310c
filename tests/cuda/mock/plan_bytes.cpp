// The CUDA plan of a bfloat16 causal attention's forward and backward in one flush, on the
// stand-in driver (libcuda_mock.c, scripts/mock_cuda_check.sh): prints the bytes the flush
// moves, its kernels, and whether the plan computes a value again where it is read (Planner::
// mark_recompute). The script runs it with LOOM_RECOMPUTE=0 and with the default and compares:
// with recomputation the forward's softmax kernel no longer writes the float32 probabilities
// the backward's row kernel reads (it computes them from the recomputed scores). Then, last on
// the line, whether the plan of a bf16 linear + GELU's backward keeps the GELU's derivative out
// of its bias gradient's column sum (1: the sum reads the dx its pointwise kernel wrote; CUDA's
// column kernels run such a body slowly, BackendCaps::column_bodies). Last, how many matmuls of
// an attention over heads cut from one projection ([B, T, 3C] viewed as [B, H, T, d]) read an
// operand whose batch dims do not collapse into one stride (cuBLASLt would loop a launch per
// head; BackendCaps::gemm_one_batch_stride: 0). Kernels do not run here: no values.
#include <cstdio>
#include <functional>
#include <set>
#include <sstream>
#include <string>

#include "fusion/trace.h"
#include "loom.h"
#include "stderr_of.h"
using namespace loom;

namespace {

// The fusion log of a flush of `t`.
std::string flush_log(const Tensor& t) {
  return stderr_of([&] {
    set_log_fusion(true);
    loom::sync();
    (void)t;
    set_log_fusion(false);
  });
}

// Whether dims [0, nb) of view v collapse into one stride (size-1 dims aside).
bool batch_collapses(const View& v, int nb) {
  int64_t stride = 0, span = 0;
  for (int d = nb - 1; d >= 0; --d) {
    if (v.shape[size_t(d)] == 1) continue;
    if (span > 0 && v.strides[size_t(d)] != stride * span) return false;
    if (span == 0) stride = v.strides[size_t(d)];
    span = (span == 0 ? 1 : span) * v.shape[size_t(d)];
  }
  return true;
}

// The pending matmuls `ts` depend on that read an operand whose batch dims do not collapse.
int split_batch_matmuls(const std::vector<Tensor>& ts) {
  std::set<const Storage*> seen;
  int n = 0;
  std::function<void(const std::shared_ptr<Storage>&)> walk = [&](const auto& st) {
    if (!st || !st->node || !seen.insert(st.get()).second) return;
    const Node& node = *st->node;
    if (node.op == Op::MatMul)
      for (const Input& in : node.in)
        n += batch_collapses(in.view, int(in.view.shape.size()) - 2) ? 0 : 1;
    for (const Input& in : node.in) walk(in.st);
    if (node.base) walk(node.base);
  };
  for (const Tensor& t : ts) walk(t.storage());
  return n;
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
  // Heads cut from one projection, as a GPT's attention has them.
  Tensor qkv = randn({2, 32, 3 * 48}, {DType::Float32, d}).requires_grad_();
  loom::sync();
  auto heads = [&](int i) {
    return qkv.slice(2, i * 48, (i + 1) * 48).view({2, 32, 4, 12}).transpose(1, 2);
  };
  Tensor o = scaled_dot_product_attention(heads(0), heads(1), heads(2), std::nullopt, 0.0, true);
  (o * o).sum().backward();
  const int split = split_batch_matmuls({o, qkv.grad()});
  loom::sync();
  std::printf("%lld %lld %d %d %d\n", bytes, kernels,
              plan.find("computed again") != std::string::npos ? 1 : 0,
              log.find("leaves out a costly body") != std::string::npos ? 1 : 0, split);
  return 0;
}
