// Streams: per-stream traces, scoped current streams, events and cross-stream dependencies.
// The CPU cases (the CPU has only its default stream; API errors) run everywhere; the "gpu:"
// cases skip without a GPU and compare two-stream programs with the same program on the CPU
// device over many iterations (a missing cross-stream wait shows as wrong values).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cuda/stream.h"
#include "device_checks.h"
#include "loom.h"

using namespace loom;
namespace lc = loom::cuda;

namespace {

using loom::test::error_of;
using loom::test::mismatches;
using loom::test::values;

const Device kGPU{DeviceKind::CUDA, 0};

bool skip() {
  if (backend_available(DeviceKind::CUDA)) return false;
  MESSAGE("CUDA unavailable, skipping GPU stream tests");
  return true;
}

// Runs `f` with `s` as the current stream when given (the GPU run), else as is (the CPU run).
void on(const std::optional<lc::Stream>& s, const std::function<void()>& f) {
  if (!s) return f();
  lc::StreamGuard g(*s);
  f();
}

// LOOM_TEST_STREAM_ITERS / LOOM_TEST_STREAM_ROUNDS shorten the two-stream test (sanitizer runs).
int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

struct Result {
  Tensor x, y, r;
};

// Two streams hand tensors back and forth every iteration: reads of tensors pending or just
// written on the other stream, in-place updates of memory the other stream reads, and temporaries
// dropped while the other stream still reads them. On the CPU (no streams) it is the reference.
// On the GPU a matmul whose result is unused (kept alive, so it runs) starts each stream's work:
// it holds the stream long enough that a consumer not waiting for it would overtake it.
Result ping_pong(Device dev, std::optional<lc::Stream> s1, std::optional<lc::Stream> s2, int iters,
                 int64_t rows, int64_t cols) {
  Tensor x = tensor<double>(values(rows * cols, 11), {rows, cols}, Options(DType::Float32, dev));
  Tensor y = tensor<double>(values(rows * cols, 12), {rows, cols}, Options(DType::Float32, dev));
  Tensor r = zeros({rows}, Options(DType::Float32, dev));
  Tensor slow;
  std::vector<Tensor> keep;
  const int64_t m = env_int("LOOM_TEST_STREAM_SLOW", 2048);  // smaller under sanitizers
  if (s1 && m > 0) slow = tensor<double>(values(m * m, 13), {m, m}, Options(DType::Float32, dev));
  auto hold = [&] {
    if (slow.defined()) keep.push_back(matmul(slow, slow));
  };
  for (int i = 0; i < iters; ++i) {
    Tensor a, t;
    on(s1, [&] {
      hold();
      a = (x * 1.5 + y).tanh();              // reads y, written on s2 last iteration
      t = (x * x + 1.0 + 0.001 * i).sqrt();  // a temporary only s2 reads
    });
    on(s2, [&] {
      hold();
      y.mul_(0.5).add_(a);  // a pending on s1; y's memory read by s1
      r.add_((t * y).sum({-1}) * (1.0 / double(cols)));
    });
    t = Tensor();  // freed while s2 may still read it
    on(s1, [&] {
      hold();
      x.sub_(y * 0.01);  // reads y from s2, writes x that s2 read
    });
    if (i % 16 == 15) {
      // A sync point from the default stream in the middle of both streams' work.
      on(s2, [&] { r.div_(2.0); });
      CHECK(std::isfinite(r.sum().item<double>()));
      keep.clear();
    }
  }
  return {x, y, r};
}

// Elementwise differences between a GPU run and the CPU reference: float32 transcendentals
// differ in the last bits between the devices and iterating amplifies that a little, while a
// race (a stale or half-written tensor) is off by O(0.01 .. 1).
constexpr double kRtol = 1e-3, kAtol = 1e-3;

}  // namespace

// ---- CPU: runs everywhere ------------------------------------------------------------------

TEST_CASE("streams: the CPU has only its default stream and one trace") {
  loom::sync();
  CHECK(current_stream(kCPU).id == 0);
  CHECK(active_stream(kCPU).id == 0);
  Tensor a = arange(0, 64, 1, DType::Float32);
  Tensor b = (a * 2.0 + 1.0).exp();
  CHECK(b.is_pending());
  CHECK(b.storage()->stream == 0);
  CHECK(pending_nodes(kCPU) >= 2);
  CHECK(pending_nodes(current_stream(kCPU)) == pending_nodes(kCPU));
  std::vector<uint64_t> ids = trace_streams(kCPU);
  REQUIRE(ids.size() == 1);
  CHECK(ids[0] == 0);
  flush_stream(current_stream(kCPU));
  CHECK_FALSE(b.is_pending());
  CHECK(pending_nodes(kCPU) == 0);
  CHECK(b.storage()->stream == 0);
  CHECK(b[3].item<double>() == doctest::Approx(std::exp(7.0)));
  // synchronize_stream on the CPU flushes and returns (the CPU runs synchronously).
  Tensor c = b.sum();
  synchronize_stream(current_stream(kCPU));
  CHECK_FALSE(c.is_pending());
  // A CPU "stream guard" for the default stream is allowed and changes nothing.
  {
    CurrentStreamGuard g(StreamRef{kCPU, 0, nullptr});
    CHECK(current_stream(kCPU).id == 0);
  }
  CHECK(trace_streams(kCPU).size() == 1);
}

TEST_CASE("streams: current-stream selection is scoped and per thread (bookkeeping only)") {
  // Stream refs with a stand-in handle: nothing is recorded on them, so no driver is needed.
  StreamRef s5{kGPU, 5, std::make_shared<int>(5)}, s7{kGPU, 7, std::make_shared<int>(7)};
  CHECK(current_stream(kGPU).id == 0);
  {
    CurrentStreamGuard g1(s5);
    CHECK(current_stream(kGPU).id == 5);
    CHECK(active_stream(kGPU).id == 5);
    {
      CurrentStreamGuard g2(s7);
      CHECK(current_stream(kGPU).id == 7);
      uint64_t other = 99;
      std::thread th([&] { other = current_stream(kGPU).id; });  // a new thread: the default
      th.join();
      CHECK(other == 0);
      {
        ActiveStreamScope a(s5);  // a flush of s5's trace
        CHECK(active_stream(kGPU).id == 5);
        CHECK(current_stream(kGPU).id == 7);
      }
      CHECK(active_stream(kGPU).id == 7);
    }
    CHECK(current_stream(kGPU).id == 5);
  }
  CHECK(current_stream(kGPU).id == 0);
  CHECK(current_stream(kCPU).id == 0);  // CUDA guards never touch the CPU's stream
  CHECK(new_stream_id() != new_stream_id());
}

TEST_CASE("streams: API errors name the stream, the device and the reason") {
  Tensor cpu_t = ones({2, 3});
  // The CPU has no streams besides its default one.
  CHECK_ERROR_HAS(set_current_stream(StreamRef{kCPU, 3, std::make_shared<int>(0)}),
                  "the cpu device has only its default stream");
  CHECK_ERROR_HAS(CurrentStreamGuard(StreamRef{kCPU, 3, nullptr}), "cpu");
  // A CUDA stream without a handle cannot be selected.
  CHECK_ERROR_HAS(set_current_stream(StreamRef{kGPU, 4, nullptr}), "cuda:0 stream 4");
  CHECK(current_stream(kGPU).id == 0);
  // A default-constructed stream is not a stream.
  CHECK_ERROR_HAS(lc::StreamGuard(lc::Stream{}), "StreamGuard: not a stream");
  CHECK_ERROR_HAS(lc::Stream{}.synchronize(), "Stream.synchronize: not a stream");
  // A CUDA stream with a CPU tensor (checked before any driver call).
  lc::Stream dflt{0, 0, nullptr};
  CHECK_ERROR_HAS(lc::record_stream(cpu_t, dflt), "the tensor is on cpu but the stream");
  CHECK_ERROR_HAS(lc::record_stream(cpu_t, dflt), "cuda:0");
  CHECK_ERROR_HAS(lc::stream_of(cpu_t), "stream_of: the tensor is on cpu");
  // Events that were never created.
  CHECK_ERROR_HAS(lc::Event{}.synchronize(), "Event.synchronize: the event was not created");
  CHECK_ERROR_HAS(lc::Event{}.elapsed_time(lc::Event{}), "Event.elapsed_time");
  CHECK_ERROR_HAS(lc::Event{}.record(dflt), "Event.record: the event was not created");
  if (!lc::is_available()) {
    // No driver: creating a stream or an event says why.
    CHECK_ERROR_HAS(lc::Stream::create(), "CUDA is unavailable");
    CHECK_ERROR_HAS(lc::Event::create(true), "CUDA is unavailable");
  }
  CHECK(current_stream(kGPU).id == 0);
}

// ---- GPU -----------------------------------------------------------------------------------

TEST_CASE("gpu: streams two streams with cross-stream dependencies match the CPU") {
  if (skip()) return;
  const int iters = env_int("LOOM_TEST_STREAM_ITERS", 64);
  const int64_t rows = 256, cols = 4096;  // 4 MiB tensors: kernels long enough to overlap
  Result want = ping_pong(kCPU, {}, {}, iters, rows, cols);
  lc::Stream s1 = lc::Stream::create(), s2 = lc::Stream::create();
  CHECK(s1.id != 0);
  CHECK(s1.id != s2.id);
  for (int round = 0; round < env_int("LOOM_TEST_STREAM_ROUNDS", 3); ++round) {
    CAPTURE(round);
    Result got = ping_pong(kGPU, s1, s2, iters, rows, cols);
    CHECK(lc::stream_of(got.x).id == s1.id);
    CHECK(lc::stream_of(got.y).id == s2.id);
    CHECK(mismatches(got.x, want.x, kRtol, kAtol) == 0);
    CHECK(mismatches(got.y, want.y, kRtol, kAtol) == 0);
    CHECK(mismatches(got.r, want.r, kRtol, kAtol) == 0);
  }
  loom::sync();
  CHECK(s1.query());
  CHECK(s2.query());
}

TEST_CASE("gpu: streams without the cross-stream waits the same program races (control)") {
  // The waits switched off: the same comparison usually fails. Only reported, since a race
  // need not show in a given run; it shows the test above can see a missing wait.
  if (skip()) return;
  const int iters = 64;
  const int64_t rows = 256, cols = 4096;
  Result want = ping_pong(kCPU, {}, {}, iters, rows, cols);
  lc::Stream s1 = lc::Stream::create(), s2 = lc::Stream::create();
  set_stream_waits(false);
  Result got;
  try {
    got = ping_pong(kGPU, s1, s2, iters, rows, cols);
    loom::sync();
  } catch (...) {
    set_stream_waits(true);
    throw;
  }
  set_stream_waits(true);
  int64_t bad = mismatches(got.x, want.x, kRtol, kAtol) + mismatches(got.y, want.y, kRtol, kAtol);
  MESSAGE("without cross-stream waits: " << bad << " of " << 2 * rows * cols
                                         << " elements differ from the CPU");
}

TEST_CASE("gpu: streams flushing one stream leaves the other pending") {
  if (skip()) return;
  loom::sync();
  lc::Stream s1 = lc::Stream::create(), s2 = lc::Stream::create();
  Tensor base = tensor<double>(values(1 << 16, 3), {1 << 16}, Options(DType::Float32, kGPU));
  Tensor a, b;
  {
    lc::StreamGuard g(s1);
    CHECK(lc::current_stream().id == s1.id);
    a = (base * 3.0).exp();
  }
  {
    lc::StreamGuard g(s2);
    b = (base * 2.0).sin();
  }
  CHECK(lc::current_stream().id == 0);
  CHECK(pending_nodes(lc::to_ref(s1)) > 0);
  CHECK(pending_nodes(lc::to_ref(s2)) > 0);
  CHECK(a.storage()->stream == s1.id);
  CHECK(b.storage()->stream == s2.id);
  CHECK_FALSE(s1.query());  // pending work is not done work
  s1.synchronize();
  CHECK(pending_nodes(lc::to_ref(s1)) == 0);
  CHECK_FALSE(a.is_pending());
  CHECK(s1.query());
  CHECK(pending_nodes(lc::to_ref(s2)) > 0);
  CHECK(b.is_pending());
  // A sync point on a tensor of s2 from the default stream flushes s2 only as far as needed.
  std::vector<double> bv = b.to_vector<double>(), av = a.to_vector<double>();
  std::vector<double> src = values(1 << 16, 3);
  for (size_t i = 0; i < src.size(); i += 997) {
    CHECK(bv[i] == doctest::Approx(std::sin(2.0 * float(src[i]))).epsilon(1e-5));
    CHECK(av[i] == doctest::Approx(std::exp(3.0 * float(src[i]))).epsilon(1e-5));
  }
  // loom::sync flushes every stream.
  Tensor c;
  {
    lc::StreamGuard g(s2);
    c = b * 2.0;
  }
  loom::sync();
  CHECK(pending_nodes(lc::to_ref(s2)) == 0);
  CHECK_FALSE(c.is_pending());
  CHECK(s2.query());
}

TEST_CASE("gpu: streams events record and order and time stream work") {
  if (skip()) return;
  lc::Stream s1 = lc::Stream::create(), s2 = lc::Stream::create();
  lc::Event start = lc::Event::create(true), stop = lc::Event::create(true);
  Tensor x = tensor<double>(values(1 << 20, 5), {1 << 20}, Options(DType::Float32, kGPU));
  Tensor y;
  {
    lc::StreamGuard g(s1);
    start.record();  // on s1, the current stream
    y = x;
    for (int i = 0; i < 20; ++i) y = (y * 0.999 + 0.001).sin();
    stop.record();  // flushes s1's trace first: the event follows the 20 kernels
  }
  CHECK(pending_nodes(lc::to_ref(s1)) == 0);
  stop.synchronize();
  CHECK(stop.query());
  float ms = start.elapsed_time(stop);
  CHECK(ms > 0.0f);
  CHECK(ms < 10000.0f);
  // An event orders a library's use of memory across streams: s2 waits for s1 by the event.
  lc::Event e = lc::Event::create(false);
  Tensor z;
  {
    lc::StreamGuard g(s1);
    z = (x * 4.0).cos();
    e.record();
  }
  e.wait(s2);
  CHECK_ERROR_HAS(e.elapsed_time(stop), "timing");
  {
    lc::StreamGuard g(s2);
    Tensor w = z + 1.0;
    std::vector<double> wv = w.to_vector<double>(), xv = x.to_vector<double>();
    for (size_t i = 0; i < wv.size(); i += 4099)
      CHECK(wv[i] == doctest::Approx(std::cos(4.0 * xv[i]) + 1.0).epsilon(1e-5));
  }
  // Stream::wait_stream: s2 waits for everything recorded on s1 so far.
  s2.wait_stream(s1);
  s2.synchronize();
}

TEST_CASE("gpu: streams memory freed on one stream while another reads it") {
  if (skip()) return;
  lc::Stream s1 = lc::Stream::create(), s2 = lc::Stream::create();
  const int64_t n = 1 << 22;
  std::vector<Tensor> sums;
  for (int i = 0; i < 48; ++i) {
    Tensor big;
    {
      lc::StreamGuard g(s1);
      big = full({n}, double(i % 7 + 1), Options(DType::Float32, kGPU)) * 1.0;
    }
    {
      lc::StreamGuard g(s2);
      sums.push_back((big * big).sum());  // reads big (pending on s1 -> s1 flushed, s2 waits)
      flush_stream(lc::to_ref(s2));       // s2's reading kernel is submitted
    }
    big = Tensor();  // freed on s1 (its allocating stream) only after s2 has passed its read
    {
      lc::StreamGuard g(s1);  // s1 reuses the memory at once for new values
      Tensor junk = full({n}, -1000.0, Options(DType::Float32, kGPU)) * 1.0;
      flush_stream(lc::to_ref(s1));
    }
  }
  loom::sync();
  for (int i = 0; i < 48; ++i) {
    double v = double(i % 7 + 1);
    CAPTURE(i);
    CHECK(sums[size_t(i)].item<double>() == doctest::Approx(v * v * double(n)).epsilon(1e-6));
  }
}

TEST_CASE("gpu: streams host threads each on its own stream or the default one") {
  if (skip()) return;
  auto work = [](Device dev, int seed) {
    Tensor w =
        tensor<double>(values(64 * 257, uint32_t(seed)), {64, 257}, Options(DType::Float32, dev));
    Tensor m = zeros({64, 257}, Options(DType::Float32, dev));
    for (int i = 0; i < 30; ++i) {
      Tensor g = softmax(w * (1.0 + 0.01 * i), -1) - w.tanh() * 0.1;
      m.mul_(0.9).add_(g * 0.1);
      w.sub_(m * 0.01);
    }
    return w.to(kCPU);
  };
  const int T = 4;
  std::vector<Tensor> want(T), got(T);
  for (int t = 0; t < T; ++t) want[t] = work(kCPU, t + 1);
  std::vector<std::thread> th;
  std::atomic<int> errors{0};
  for (int t = 0; t < T; ++t)
    th.emplace_back([&, t] {
      try {
        if (t % 2 == 0) {
          lc::Stream s = lc::Stream::create();
          lc::StreamGuard g(s);
          got[t] = work(kGPU, t + 1);
        } else {
          got[t] = work(kGPU, t + 1);  // the default stream, shared
        }
      } catch (const std::exception&) {
        errors++;
      }
    });
  for (auto& x : th) x.join();
  REQUIRE(errors.load() == 0);
  for (int t = 0; t < T; ++t) {
    CAPTURE(t);
    CHECK(mismatches(got[t], want[t], 1e-4, 1e-5) == 0);
  }
}

TEST_CASE("gpu: streams transfers through pinned staging on a side stream") {
  if (skip()) return;
  lc::Stream s = lc::Stream::create();
  // Sizes around the staging chunk (4 MiB) and the direct-copy threshold, odd byte counts.
  for (int64_t n : {int64_t(1000), int64_t(65537), int64_t(1048576), int64_t(2500001)}) {
    CAPTURE(n);
    std::vector<double> v = values(n, uint32_t(n));
    Tensor h = tensor<double>(v, {n}, Options(DType::Float64));
    Tensor d, back;
    {
      lc::StreamGuard g(s);
      d = h.to(kGPU);                   // host -> pinned -> device on s
      back = (d * 2.0 - 1.0).to(kCPU);  // computed on s, device -> pinned -> host
    }
    CHECK(lc::stream_of(d).id == s.id);
    std::vector<double> got = back.to_vector<double>();
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i)
      if (got[size_t(i)] != v[size_t(i)] * 2.0 - 1.0) ++bad;
    CHECK(bad == 0);
    // The default stream reads what s wrote (an event orders it).
    CHECK(d.to(kCPU).to_vector<double>() == v);
  }
}

// ---- the stream machinery on a stand-in device (runs without a GPU) ------------------------

namespace loom {
Backend& cpu_backend();
}

namespace {

// A "cuda:0" whose memory and kernels are the CPU's, recording what the runtime asks of it:
// cross-stream waits, frees with their allocating stream and other users, retired streams.
struct StandIn : Backend {
  Backend& cpu = cpu_backend();
  std::vector<std::pair<uint64_t, uint64_t>> waits;  // (waiter, producer)
  struct Free {
    uint64_t owner;
    std::vector<uint64_t> users;
    void* ptr;
  };
  std::vector<Free> frees;
  std::vector<uint64_t> retired;
  void* alloc(size_t b) override { return cpu.alloc(b); }
  void free(void* p, size_t b) override { cpu.free(p, b); }
  void release(Memory& m) override {
    Free f{m.stream.id, {}, m.ptr};
    for (auto& u : m.users) f.users.push_back(u.id);
    frees.push_back(f);
    Backend::release(m);
  }
  void copy_from_host(void* d, const void* s, size_t n) override { cpu.copy_from_host(d, s, n); }
  void copy_to_host(void* d, const void* s, size_t n) override { cpu.copy_to_host(d, s, n); }
  void copy_within(void* d, const void* s, size_t n) override { cpu.copy_within(d, s, n); }
  std::unique_ptr<Kernel> lower(const Group& g) override { return cpu.lower(g); }
  void run_opaque(const Group& g) override { cpu.run_opaque(g); }
  void stream_wait(const StreamRef& w, const StreamRef& p) override {
    waits.push_back({w.id, p.id});
  }
  void stream_retired(const StreamRef& s) override { retired.push_back(s.id); }
  std::string name() const override { return "stand-in cuda"; }
  size_t waits_for(uint64_t w, uint64_t p) const {
    return size_t(std::count(waits.begin(), waits.end(), std::make_pair(w, p)));
  }
};

// Registers the stand-in as the CUDA backend for a scope.
struct UseStandIn {
  StandIn dev;
  UseStandIn() {
    loom::sync();
    register_backend(DeviceKind::CUDA, &dev);
  }
  ~UseStandIn() {
    loom::sync();
    register_backend(DeviceKind::CUDA, nullptr);
    clear_kernel_cache();  // CPU kernels cached under CUDA signatures
  }
};

}  // namespace

TEST_CASE("streams: per-stream traces, waits and frees on a stand-in device") {
  if (backend_available(DeviceKind::CUDA)) {
    MESSAGE("a real CUDA backend is registered: the gpu: stream tests cover this");
    return;
  }
  Tensor keep_a;
  std::vector<uint64_t> retired;
  uint64_t id1 = 0, id2 = 0;
  {
    UseStandIn use;
    StandIn& dev = use.dev;
    StreamRef s1{kGPU, new_stream_id(), std::make_shared<int>(1)};
    StreamRef s2{kGPU, new_stream_id(), std::make_shared<int>(2)};
    id1 = s1.id, id2 = s2.id;
    std::vector<double> xv = values(4096, 21);
    Tensor x = tensor<double>(xv, {64, 64}, Options(DType::Float32, kGPU));
    CHECK(x.storage()->stream == 0);  // made on the default stream
    Tensor a, b, c;
    {
      CurrentStreamGuard g(s1);
      a = (x * 2.0).exp();
    }
    CHECK(a.storage()->stream == s1.id);
    CHECK(pending_nodes(s1) >= 2);  // mul and exp (and the constant)
    CHECK(pending_nodes(s2) == 0);
    CHECK(dev.waits_for(s1.id, 0) == 1);  // s1 read x, written on the default stream
    {
      CurrentStreamGuard g(s2);
      b = a + 1.0;  // a pending on s1: s1's trace is flushed, s2 waits for s1
      CHECK_FALSE(a.is_pending());
      CHECK(pending_nodes(s1) == 0);
      CHECK(dev.waits_for(s2.id, s1.id) == 1);
      c = a * 3.0;  // nothing new on s1 since: no second wait
      CHECK(dev.waits_for(s2.id, s1.id) == 1);
    }
    CHECK(b.is_pending());
    CHECK(pending_nodes(s2) >= 2);
    // Flushing s1 leaves s2 pending; flushing s2 runs it.
    flush_stream(s1);
    CHECK(b.is_pending());
    flush_stream(s2);
    CHECK_FALSE(b.is_pending());
    CHECK(b.storage()->stream == s2.id);
    // a's memory was allocated on s1 and used by s2.
    const Memory& am = *a.storage()->mem;
    CHECK(am.stream.id == s1.id);
    REQUIRE(am.users.size() == 1);
    CHECK(am.users[0].id == s2.id);
    // New work on s1, then s2 reads a again: a wait again (s1 has submitted since).
    {
      CurrentStreamGuard g(s1);
      Tensor d = x - 1.0;
      flush_stream(s1);
    }
    {
      CurrentStreamGuard g(s2);
      c = a - 1.0;
      CHECK(dev.waits_for(s2.id, s1.id) == 2);
    }
    // An in-place update on s2 of x (allocated on the default stream, read by s1): s2 waits for
    // every stream that used x's memory.
    size_t before0 = dev.waits_for(s2.id, 0);
    {
      CurrentStreamGuard g(s2);
      x.add_(1.0);
    }
    CHECK(dev.waits_for(s2.id, 0) == before0 + 1);
    CHECK(x.storage()->stream == s2.id);
    // Values: the same as on the CPU device.
    std::vector<double> got = c.to_vector<double>(), xs = x.to_vector<double>();
    for (size_t i = 0; i < got.size(); i += 97) {
      CHECK(got[i] == doctest::Approx(std::exp(2.0 * double(float(xv[i]))) - 1.0).epsilon(1e-5));
      CHECK(xs[i] == doctest::Approx(double(float(xv[i])) + 1.0).epsilon(1e-6));
    }
    // Dropping a: its memory is freed with s1 as the owner and s2 among the users.
    void* aptr = a.storage()->mem->ptr;
    a = b = c = Tensor();
    bool found = false;
    for (auto& f : dev.frees)
      if (f.ptr == aptr && f.owner == s1.id) {
        found = true;
        CHECK(std::find(f.users.begin(), f.users.end(), s2.id) != f.users.end());
      }
    CHECK(found);
    // Streams nothing refers to are retired by loom::sync().
    x = Tensor();
    s1.native.reset(), s2.native.reset();
    s1 = s2 = StreamRef{};
    loom::sync();
    retired = dev.retired;
    std::vector<uint64_t> left = trace_streams(kGPU);
    CHECK(std::find(left.begin(), left.end(), id1) == left.end());
    CHECK(std::find(left.begin(), left.end(), id2) == left.end());
  }
  CHECK(std::find(retired.begin(), retired.end(), id1) != retired.end());
  CHECK(std::find(retired.begin(), retired.end(), id2) != retired.end());
  CHECK_FALSE(backend_available(DeviceKind::CUDA));
  loom::sync();  // the stand-in's default trace stays; sync must not need its backend
}
