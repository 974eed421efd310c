// How many kernels a composite's backward takes, and the memory it moves (counters), on the
// CPU and, where one is found, on cuda:0 (the planner is the same; the backends' capabilities
// differ): softmax / log_softmax backward one kernel reading y and dy once; layer_norm and
// rms_norm backward dx, dgamma and dbeta in one row kernel where the backend sums over rows
// inside it (caps.column_sums), else dx in one row kernel plus dgamma and dbeta together in
// one column kernel that reads x and dy again rather than products written for it;
// cross_entropy forward + backward one kernel over the logits (each row's target logit picked in
// it where the backend can, else a gather of one element a row: never a pass), and with column
// sums two kernels in all (the targets' count, then the logits' row kernel, which sums the mean).
#include "helpers.h"

using namespace loom;

namespace {

struct Step {
  int64_t kernels, bytes;
};

// Runs f (which records a backward) between two syncs; the counter deltas.
Step measure(const std::function<void()>& f) {
  loom::sync();
  reset_counters();
  f();
  loom::sync();
  return {counters().kernels.load(), counters().bytes_moved.load()};
}

Tensor leaf(const Shape& s, uint32_t seed, Device d, DType t = DType::Float32) {
  return lt::random(s, t, seed).to(d).requires_grad_();
}

void backward_kernels(Device d) {
  const int64_t R = 256, C = 1000, N = R * C * 4;  // bytes of one [R, C] float32 tensor
  Tensor dy = lt::random({R, C}, DType::Float32, 300).to(d);
  SUBCASE("softmax and log_softmax: one kernel reading y and dy once, writing dx") {
    for (bool log : {false, true}) {
      Tensor x = leaf({R, C}, 301, d);
      Tensor y = log ? log_softmax(x, 1) : softmax(x, 1);
      loom::sync();
      Step s = measure([&] { y.backward(dy); });
      CHECK(s.kernels == 1);
      CHECK(s.bytes <= 3 * N + 4096);
    }
  }
  SUBCASE("layer_norm and rms_norm: dx, dgamma and dbeta in one row kernel, or two kernels") {
    // Column sums: x and g read once, dx written (3 passes over [R, C]). Else the column kernel
    // computes xhat g again from x and g (5 passes), rather than reading float32 products dx's
    // kernel wrote for it (6 passes; 16-bit x and g: 11 passes of their size, the upcast g and the
    // product each written and read at 4 bytes).
    const bool sums = backend(d).caps().column_sums;
    const int64_t rest = 64 * (R + C);  // row statistics, weights and their gradients
    for (DType t : {DType::Float32, DType::BFloat16}) {
      CAPTURE(dtype_name(t));
      const int64_t n = R * C * int64_t(itemsize(t));
      Tensor g = dy.to(t);
      Tensor x = leaf({R, C}, 302, d, t), w = leaf({C}, 303, d, t), b = leaf({C}, 304, d, t);
      Tensor y;
      // The forward one row kernel too: 16-bit weights' float32 upcasts (read broadcast over
      // the rows) are cast where the row kernel reads them, not written by kernels of their own.
      Step s = measure([&] { y = layer_norm(x, {C}, w, b); });
      CHECK(s.kernels == 1);
      s = measure([&] { y.backward(g); });
      // Without column sums the casts of dgamma and dbeta to 16 bits join their column kernel.
      const int64_t most = sums ? 1 : 2;
      CHECK(s.kernels <= most);
      CHECK(s.bytes <= (sums ? 3 : 5) * n + rest);
      Tensor x2 = leaf({R, C}, 305, d, t), w2 = leaf({C}, 306, d, t);
      Tensor y2;
      s = measure([&] { y2 = rms_norm(x2, {C}, w2); });
      CHECK(s.kernels == 1);
      s = measure([&] { y2.backward(g); });
      CHECK(s.kernels <= most);
      CHECK(s.bytes <= (sums ? 3 : 5) * n + rest);
    }
  }
  SUBCASE("cross_entropy forward + backward: the logits read once, dx written once") {
    Tensor x = leaf({R, C}, 307, d);
    std::vector<double> tv(static_cast<size_t>(R), 0.0);
    for (int64_t i = 0; i < R; ++i) tv[size_t(i)] = double((i * 7919) % C);
    tv[3] = -100;  // ignored
    Tensor t = lt::make(tv, {R}, DType::Int64).to(d);
    loom::sync();
    Tensor loss;  // kept: the flush computes the loss too
    Step s = measure([&] {
      loss = cross_entropy(x, t);
      loss.backward();
    });
    // the targets' count (with their range check), the row kernel, the mean where the backend
    // does not sum the rows' terms inside the row kernel (column sums); and the gather of each
    // row's target logit where it does not pick it there (BackendCaps::row_gather)
    const BackendCaps c = backend(d).caps();
    CHECK(s.kernels <= 2 + !c.column_sums + !c.row_gather);
    CHECK(s.bytes <= 2 * N + 64 * R);  // x read, dx written, the rest per row
  }
}

}  // namespace

TEST_CASE("backward kernels: softmax, norms and cross_entropy on the CPU") {
  backward_kernels(Device{DeviceKind::CPU, 0});
}

TEST_CASE("gpu: backward kernels: softmax, norms and cross_entropy on cuda:0") {
  if (!backend_available(DeviceKind::CUDA)) {
    MESSAGE("CUDA unavailable, skipping");
    return;
  }
  backward_kernels(Device{DeviceKind::CUDA, 0});
}
