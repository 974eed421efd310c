// More than one CUDA device, stream priorities and the free list of wait events.
// "devices:" cases run everywhere: the per-device routing on two stand-in devices whose memory
// and kernels are the CPU's. "gpu: devices" cases need a GPU; those that need two GPUs say they
// were skipped (a MESSAGE) on a machine with one.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cuda/stream.h"
#include "device_checks.h"
#include "loom.h"

using namespace loom;
namespace lc = loom::cuda;

namespace loom {
Backend& cpu_backend();
}

namespace {

using loom::test::error_of;
using loom::test::mismatches;
using loom::test::values;

Device cuda_dev(int i) { return Device{DeviceKind::CUDA, i}; }

bool no_gpu() {
  if (backend_available(DeviceKind::CUDA)) return false;
  MESSAGE("CUDA unavailable, skipping the GPU device tests");
  return true;
}

// A small program with a reduction, a broadcast and an in-place update: run on `d`.
Tensor program(const Tensor& x, const Tensor& y) {
  Tensor z = (x * 1.5 + y).tanh();
  z.add_(z.sum({-1}, true) * (1.0 / double(x.shape().back())));
  return (z * y).exp();
}

// ---- two stand-in devices ---------------------------------------------------------------------

// A device "cuda:N" whose memory and kernels are the CPU's, recording what is asked of it.
struct StandIn : Backend {
  Backend& cpu = cpu_backend();
  int index = 0;
  int allocs = 0, peer_copies = 0, host_reads = 0, host_writes = 0;
  bool peer = true;  // whether copy_to_device takes the copy
  void* alloc(size_t b) override { return ++allocs, cpu.alloc(b); }
  void free(void* p, size_t b) override { cpu.free(p, b); }
  void copy_from_host(void* d, const void* s, size_t n) override {
    ++host_writes;
    cpu.copy_from_host(d, s, n);
  }
  void copy_to_host(void* d, const void* s, size_t n) override {
    ++host_reads;
    cpu.copy_to_host(d, s, n);
  }
  void copy_within(void* d, const void* s, size_t n) override { cpu.copy_within(d, s, n); }
  bool copy_to_device(Device to, void* d, const void* s, size_t n) override {
    if (!peer || to.kind != DeviceKind::CUDA || to.index == index) return false;
    ++peer_copies;
    cpu.copy_within(d, s, n);
    return true;
  }
  std::unique_ptr<Kernel> lower(const Group& g) override { return cpu.lower(g); }
  void run_opaque(const Group& g) override { cpu.run_opaque(g); }
  std::string name() const override { return "stand-in cuda:" + std::to_string(index); }
};

StandIn g_stand_ins[2];

// Two devices; a third raises like the CUDA backend does.
Backend& stand_in_for(int index) {
  LOOM_CHECK(index >= 0 && index < 2, Index, "CUDA device cuda:", index,
             " does not exist: this machine has 2 CUDA devices (cuda:0 .. cuda:1)");
  g_stand_ins[index].index = index;
  return g_stand_ins[index];
}

struct UseStandIns {
  UseStandIns() {
    loom::sync();
    for (StandIn& s : g_stand_ins) s.allocs = s.peer_copies = s.host_reads = s.host_writes = 0;
    register_backend_factory(DeviceKind::CUDA, stand_in_for);
    set_cuda_device_count(2);
  }
  ~UseStandIns() {
    loom::sync();
    set_cuda_device_count(-1);
    register_backend_factory(DeviceKind::CUDA, nullptr);
    clear_kernel_cache();  // CPU kernels cached under CUDA signatures
  }
};

}  // namespace

TEST_CASE("devices: each device index gets its own backend, made by the factory") {
  if (backend_available(DeviceKind::CUDA)) {
    MESSAGE("a real CUDA backend is registered: the gpu: devices tests cover this");
    return;
  }
  {
    UseStandIns use;
    StandIn &d0 = g_stand_ins[0], &d1 = g_stand_ins[1];
    CHECK(&backend(cuda_dev(0)) == &d0);
    CHECK(&backend(cuda_dev(1)) == &d1);
    CHECK_ERROR_HAS(backend(cuda_dev(2)), "cuda:2 does not exist");
    CHECK_ERROR_HAS(ones({3}).to(cuda_dev(2)), "2 CUDA devices");
    // Recording on a missing device raises at once (no trace is made for it).
    CHECK_ERROR_HAS(ones({3}, Options(DType::Float32, cuda_dev(2))), "cuda:2 does not exist");
    CHECK_ERROR_HAS(ones({3}, Options(DType::Float32, cuda_dev(2))), "2 CUDA devices");
    CHECK_ERROR_HAS(CurrentStreamGuard(StreamRef{cuda_dev(5), 0, nullptr}), "cuda:5");
    std::vector<uint64_t> on2 = trace_streams(cuda_dev(2));
    CHECK(on2.empty());

    std::vector<double> xv = values(32 * 48, 1), yv = values(32 * 48, 2);
    Tensor xc = tensor<double>(xv, {32, 48}), yc = tensor<double>(yv, {32, 48});
    Tensor want = program(xc, yc);

    // cuda:0 -> cuda:1 by the source backend's device-to-device copy.
    Tensor x0 = xc.to(cuda_dev(0)), y0 = yc.to(cuda_dev(0));
    int a0 = d0.allocs, a1 = d1.allocs;
    Tensor x1 = x0.to(cuda_dev(1)), y1 = y0.to(cuda_dev(1));
    CHECK(x1.device() == cuda_dev(1));
    CHECK(d0.peer_copies == 2);
    CHECK(d1.allocs == a1 + 2);  // the destination allocates
    CHECK(d0.allocs == a0);
    Tensor r1 = program(x1, y1);
    loom::sync();
    CHECK(d1.allocs > a1 + 2);  // the program ran on cuda:1's backend
    CHECK(d0.allocs == a0);
    CHECK(mismatches(r1, want) == 0);
    // And back, through the host when the source cannot copy directly.
    d1.peer = false;
    int reads = d1.host_reads, writes = d0.host_writes;
    Tensor r0 = r1.to(cuda_dev(0));
    CHECK(d1.host_reads == reads + 1);
    CHECK(d0.host_writes == writes + 1);
    CHECK(mismatches(r0, want) == 0);
    d1.peer = true;

    // Mixing devices in one op raises, naming both.
    CHECK_ERROR_HAS(x0 + x1, "cuda:0 and cuda:1");
    // The current stream is per device: selecting one on cuda:1 leaves cuda:0's alone.
    StreamRef s1{cuda_dev(1), new_stream_id(), std::make_shared<int>(1)};
    {
      CurrentStreamGuard g(s1);
      CHECK(current_stream(cuda_dev(1)).id == s1.id);
      CHECK(current_stream(cuda_dev(0)).id == 0);
      Tensor w = x1 * 2.0;
      CHECK(w.storage()->stream == s1.id);
      Tensor v = x0 * 2.0;
      CHECK(v.storage()->stream == 0);
    }
    CHECK(current_stream(cuda_dev(1)).id == 0);
  }
  CHECK_FALSE(backend_available(DeviceKind::CUDA));
}

TEST_CASE("devices: without a GPU, cuda:N and the stream API say CUDA is unavailable") {
  if (lc::is_available()) return;
  CHECK(lc::device_count() == 0);
  CHECK_ERROR_HAS(lc::stream_priority_range(0), "CUDA is unavailable");
  CHECK_ERROR_HAS(lc::Stream::create(1, -1), "CUDA is unavailable");
  CHECK_ERROR_HAS(lc::event_pool_stats(0), "CUDA is unavailable");
  if (!backend_available(DeviceKind::CUDA)) CHECK_ERROR_HAS(ones({2}).to(cuda_dev(1)), "cuda:1");
}

// ---- one GPU ----------------------------------------------------------------------------------

TEST_CASE("gpu: devices an index past the device count raises naming the device and the count") {
  if (no_gpu()) return;
  const int n = lc::device_count();
  REQUIRE(n >= 1);
  const std::string dev = "cuda:" + std::to_string(n);
  const std::string count = "this machine has " + std::to_string(n) + " CUDA device";
  CHECK_ERROR_HAS(ones({4}).to(cuda_dev(n)), dev);
  CHECK_ERROR_HAS(ones({4}).to(cuda_dev(n)), count);
  CHECK_ERROR_HAS(ones({4}, Options(DType::Float32, cuda_dev(n))), count);
  CHECK_ERROR_HAS(lc::Stream::create(n), dev);
  CHECK_ERROR_HAS(lc::Event::create(false, n), count);
  // The failures left the devices that exist working.
  Tensor x = tensor<double>(values(1000, 3), {1000}, Options(DType::Float32, cuda_dev(n - 1)));
  CHECK(mismatches((x * 2.0).exp(), (tensor<double>(values(1000, 3), {1000}) * 2.0).exp()) == 0);
}

TEST_CASE("gpu: devices stream priorities are applied and run work") {
  if (no_gpu()) return;
  lc::PriorityRange r = lc::stream_priority_range(0);
  MESSAGE("stream priority range of cuda:0: least " << r.least << ", greatest " << r.greatest);
  CHECK(r.greatest <= r.least);
  lc::Stream hi = lc::Stream::create(0, r.greatest), lo = lc::Stream::create(0, r.least);
  CHECK(hi.priority() == r.greatest);
  CHECK(lo.priority() == r.least);
  CHECK(lc::Stream::create(0).priority() == 0);
  // Out of range: the driver clamps into the range.
  CHECK(lc::Stream::create(0, r.greatest - 100).priority() == r.greatest);
  CHECK(lc::Stream::create(0, r.least + 100).priority() == r.least);
  CHECK(lc::default_stream(0).priority() == 0);
  // Both streams compute, with a cross-stream dependency, the same as the CPU.
  const int64_t rows = 64, cols = 4096;
  std::vector<double> xv = values(rows * cols, 4), yv = values(rows * cols, 5);
  Tensor want = program(tensor<double>(xv, {rows, cols}), tensor<double>(yv, {rows, cols}));
  Tensor x = tensor<double>(xv, {rows, cols}, Options(DType::Float32, cuda_dev(0)));
  Tensor y = tensor<double>(yv, {rows, cols}, Options(DType::Float32, cuda_dev(0)));
  Tensor a, got;
  {
    lc::StreamGuard g(lo);
    a = x * 1.0;
  }
  {
    lc::StreamGuard g(hi);
    got = program(a, y);
  }
  CHECK(lc::stream_of(got) == hi);
  CHECK(mismatches(got, want, 1e-4, 1e-5) == 0);
}

TEST_CASE("gpu: devices cross-stream waits reuse their events and still order work") {
  if (no_gpu()) return;
  loom::sync();
  lc::Stream s1 = lc::Stream::create(), s2 = lc::Stream::create();
  const int64_t rows = 128, cols = 4096;
  std::vector<double> xv = values(rows * cols, 6);
  Tensor x = tensor<double>(xv, {rows, cols}, Options(DType::Float32, cuda_dev(0)));
  Tensor xc = tensor<double>(xv, {rows, cols});
  lc::EventPoolStats before = lc::event_pool_stats(0);
  const int iters = 200;
  for (int i = 0; i < iters; ++i) {
    // Each step reads what the other stream just wrote: one wait a step.
    {
      lc::StreamGuard g(i % 2 ? s1 : s2);
      x = (x * 0.999 + 0.001 * i).sin();
    }
    xc = (xc * 0.999 + 0.001 * i).sin();
  }
  loom::sync();
  lc::EventPoolStats after = lc::event_pool_stats(0);
  uint64_t waits = (after.created - before.created) + (after.reused - before.reused);
  MESSAGE("wait events: " << after.created - before.created << " created, "
                          << after.reused - before.reused << " reused, " << after.idle << " idle");
  CHECK(waits >= uint64_t(iters - 1));         // every hand-over waited
  CHECK(after.created - before.created <= 2);  // ... on recycled events
  CHECK(after.idle >= 1);                      // all back in the list
  CHECK(mismatches(x, xc, 1e-4, 1e-4) == 0);   // and the waits ordered the work
}

// ---- two GPUs -----------------------------------------------------------------------------------

TEST_CASE("gpu: devices two GPUs: copies, per-device streams, kernels and cross-device waits") {
  if (no_gpu()) return;
  if (lc::device_count() < 2) {
    MESSAGE("only " << lc::device_count() << " CUDA device: the two-GPU cases were skipped");
    return;
  }
  const Device g0 = cuda_dev(0), g1 = cuda_dev(1);
  MESSAGE("peer access cuda:0 -> cuda:1: " << lc::peer_access(0, 1)
                                           << " (LOOM_CUDA_PEER=0 forces the host path)");
  const int64_t rows = 96, cols = 3000;
  std::vector<double> xv = values(rows * cols, 7), yv = values(rows * cols, 8);
  Tensor want = program(tensor<double>(xv, {rows, cols}), tensor<double>(yv, {rows, cols}));
  Tensor x0 = tensor<double>(xv, {rows, cols}, Options(DType::Float32, g0));
  Tensor y0 = tensor<double>(yv, {rows, cols}, Options(DType::Float32, g0));
  // The same program on both devices: its kernels are compiled once, loaded into each context.
  Tensor r0 = program(x0, y0);
  // Pending on cuda:0's side stream when copied: the copy is a sync point of that stream.
  lc::Stream s0 = lc::Stream::create(0);
  Tensor x0s;
  {
    lc::StreamGuard g(s0);
    x0s = x0 * 1.0;
  }
  Tensor x1 = x0s.to(g1), y1 = y0.to(g1);
  CHECK(x1.device() == g1);
  CHECK(mismatches(x1, x0) == 0);
  Tensor r1 = program(x1, y1);
  CHECK(r1.device() == g1);
  CHECK(mismatches(r0, want, 1e-4, 1e-5) == 0);
  CHECK(mismatches(r1, want, 1e-4, 1e-5) == 0);
  CHECK(mismatches(r1.to(g0), r0, 1e-6, 1e-7) == 0);
  CHECK_ERROR_HAS(x0 + x1, "cuda:0 and cuda:1");
  // Streams and current streams per device.
  CHECK_FALSE(lc::default_stream(0) == lc::default_stream(1));
  lc::Stream s1 = lc::Stream::create(1, lc::stream_priority_range(1).greatest);
  CHECK(s1.device == 1);
  {
    lc::StreamGuard g(s1);
    CHECK(lc::current_stream(1) == s1);
    CHECK(lc::current_stream(0).id == 0);
    Tensor w = program(x1, y1);
    CHECK(lc::stream_of(w) == s1);
    CHECK(mismatches(w, want, 1e-4, 1e-5) == 0);
  }
  // A stream of cuda:1 waits for an event of cuda:0 (the driver allows it across contexts).
  lc::Event e = lc::Event::create(false, 0);
  CHECK(e.device == 0);
  {
    lc::StreamGuard g(s0);
    Tensor z = (x0 * 3.0).cos();
    e.record();
  }
  e.wait(s1);
  s1.synchronize();
  CHECK(e.query());
  // The wait-event list of each device serves waits between its streams.
  lc::Stream s1b = lc::Stream::create(1);
  s1b.wait_stream(s1);
  s1b.synchronize();
  CHECK(lc::event_pool_stats(1).idle >= 1);
  // Round trips in a loop: copies, work on each device, copies back.
  Tensor a = x0, ac = tensor<double>(xv, {rows, cols});
  for (int i = 0; i < 8; ++i) {
    a = (a.to(i % 2 ? g0 : g1) * 0.9 + 0.1).sin();
    ac = (ac * 0.9 + 0.1).sin();
  }
  CHECK(mismatches(a, ac, 1e-4, 1e-5) == 0);
  loom::sync();
}
