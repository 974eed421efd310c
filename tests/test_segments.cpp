// Horizontal fusion (fusion/segments.h): consecutive groups of one signature over disjoint memory
// run as one kernel. An optimizer's step over parameters of many sizes is one kernel a dtype and
// gives the bits of one kernel a parameter (set_segments(false)); a run stops at a group that reads
// or writes memory an earlier one of the run writes, at another signature and at a region write.
#include "fusion/segments.h"
#include "fusion/trace.h"
#include "helpers.h"

using namespace loom;

namespace {

// AdamW over float32 parameters of `shapes` and then float64 ones of `shapes64`, three steps
// with random gradients; the parameters after it, and the kernels of the last step's flush.
std::pair<std::vector<Tensor>, int64_t> adamw_steps(const std::vector<Shape>& shapes,
                                                    const std::vector<Shape>& shapes64) {
  std::vector<Tensor> ps;
  uint64_t seed = 30;
  for (const Shape& s : shapes)
    ps.push_back(lt::random(s, DType::Float32, seed++).requires_grad_());
  for (const Shape& s : shapes64)
    ps.push_back(lt::random(s, DType::Float64, seed++).requires_grad_());
  optim::AdamOptions o = optim::adamw_defaults();
  o.lr = 0.05;
  optim::AdamW opt(ps, o);
  loom::sync();
  int64_t kernels = 0;
  for (int step = 0; step < 3; ++step) {
    for (Tensor& p : ps) p.set_grad(lt::random(p.shape(), p.dtype(), seed++));
    loom::sync();
    reset_counters();
    opt.step();
    loom::sync();
    kernels = counters().kernels.load();
  }
  return {ps, kernels};
}

}  // namespace

TEST_CASE("segments: an optimizer step is one kernel a dtype, with each parameter's own bits") {
  const std::vector<Shape> f32{{7}, {128}, {33, 5}, {1000}, {3, 3, 3}};
  const std::vector<Shape> f64{{4, 4}, {300}, {1}};
  // A first run (kernels built on the way), then another: both the bits of a kernel a group.
  auto [cold, cold_kernels] = adamw_steps(f32, f64);
  auto [fused, kernels] = adamw_steps(f32, f64);
  // the float32 run and the float64 one; a one-element parameter is a 0-d group of its own
  CHECK(kernels == 3);
  set_segments(false);
  auto [apart, apart_kernels] = adamw_steps(f32, f64);
  set_segments(true);
  CHECK(apart_kernels == int64_t(f32.size() + f64.size()));
  CHECK(cold_kernels == kernels);
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO("parameter " << i);
    lt::check_close(fused[i], apart[i], lt::Tol{0, 0});
    lt::check_close(cold[i], apart[i], lt::Tol{0, 0});
  }
}

TEST_CASE("segments: a run stops where a group touches what another of it writes") {
  // Two independent groups of one signature: y = x * 2 + 1 over [100] and over [37].
  Tensor x1 = lt::random({100}, DType::Float32, 1), x2 = lt::random({37}, DType::Float32, 2);
  loom::sync();
  Tensor y1 = x1 * 2.0 + 1.0, y2 = x2 * 2.0 + 1.0;
  std::vector<Group> gs = plan_storages({y1.storage(), y2.storage()});
  REQUIRE(gs.size() == 2);
  REQUIRE(segmentable(gs[0]));
  CHECK(segment_run(gs, 0, DeviceKind::CPU) == 2);
  // The second reading the first's output.
  std::vector<Group> reads = gs;
  reads[1].leaves[0].st = reads[0].outputs[0].st;
  CHECK(segment_run(reads, 0, DeviceKind::CPU) == 1);
  // The second writing over memory the first reads.
  std::vector<Group> over = gs;
  over[1].outputs[0].alias = over[0].leaves[0].st;
  CHECK(segment_run(over, 0, DeviceKind::CPU) == 1);
  // Both writing one storage.
  std::vector<Group> same = gs;
  same[1].outputs[0].st = same[0].outputs[0].st;
  CHECK(segment_run(same, 0, DeviceKind::CPU) == 1);
  // Another signature (x * 2 - 1), and a region write.
  Tensor y3 = x2 * 2.0 - 1.0;
  std::vector<Group> other = plan_storages({y1.storage(), y3.storage()});
  REQUIRE(other.size() == 2);
  CHECK(segment_run(other, 0, DeviceKind::CPU) == 1);
  std::vector<Group> region = gs;
  region[1].outputs[0].init = region[1].leaves[0].st;
  CHECK(!segmentable(region[1]));
  CHECK(segment_run(region, 0, DeviceKind::CPU) == 1);
  // Nothing of this ran: the tensors still compute their values.
  lt::check_close(y1, lt::host(x1 * 2.0 + 1.0), lt::Tol{0, 0});
}
