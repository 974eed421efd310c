// Two CUDA devices on the stand-in driver (libcuda_mock.c, scripts/mock_cuda_check.sh): copies
// between the host and cuda:0/cuda:1 (direct, staged, peer or through the host), stream
// priorities, recycled wait events, cross-device event waits and errors for a missing device,
// with every driver call made in the right context. Values are checked only where no kernel runs.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "cuda/stream.h"
#include "loom.h"
using namespace loom;
namespace lc = loom::cuda;
#define EXPECT(c)                                      \
  do {                                                 \
    if (!(c)) {                                        \
      std::printf("FAIL line %d: %s\n", __LINE__, #c); \
      fails++;                                         \
    } else                                             \
      passes++;                                        \
  } while (0)
int main() {
  setvbuf(stdout, nullptr, _IONBF, 0);
  int fails = 0, passes = 0;
  EXPECT(backend_available(DeviceKind::CUDA));
  void* mock = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!mock) return std::printf("mock not loaded\n"), 2;
  EXPECT(lc::device_count() == 2);
  int* peer_copies = (int*)dlsym(mock, "n_peer_copies");
  int* events = (int*)dlsym(mock, "n_events_created");
  int* waits = (int*)dlsym(mock, "n_stream_waits");
  for (int64_t n : {1000, 300000, 3000000}) {
    std::vector<double> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = double(i % 1000) * 0.5 - 7;
    Tensor x = tensor<double>(v, {n}, Options(DType::Float32));
    int pc = *peer_copies;
    Tensor a = x.to(Device{DeviceKind::CUDA, 1});
    Tensor b = a.to(Device{DeviceKind::CUDA, 0});
    EXPECT(*peer_copies == pc + (getenv("MOCK_NO_PEER") || !knob_flag(Knob::CudaPeer) ? 0 : 1));
    Tensor c = b.to(kCPU);
    std::vector<double> got = c.to_vector<double>(), want = x.to_vector<double>();
    EXPECT(got == want);
    EXPECT(a.device().index == 1 && b.device().index == 0);
    std::vector<double> g1 = a.to_vector<double>();
    EXPECT(g1 == want);
  }
  auto r = lc::stream_priority_range(1);
  EXPECT(r.least == 0 && r.greatest == -5);
  lc::Stream s1 = lc::Stream::create(1, -3), s0 = lc::Stream::create(0, -100);
  EXPECT(s1.priority() == -3 && s1.device == 1);
  EXPECT(s0.priority() == -5);
  EXPECT(lc::default_stream(1).priority() == 0);
  // waits recycle events
  lc::Stream s1b = lc::Stream::create(1);
  auto st0 = lc::event_pool_stats(1);
  int ev0 = *events, w0 = *waits;
  for (int i = 0; i < 50; ++i) lc::stream_wait_stream(s1b, s1);
  for (int i = 0; i < 50; ++i) lc::stream_wait_stream(s1, s0);  // cross-device: s0's pool
  auto st1 = lc::event_pool_stats(1);
  EXPECT(*waits == w0 + 100);
  EXPECT(*events - ev0 <= 2);
  EXPECT(st1.created - st0.created <= 1 && st1.reused - st0.reused >= 49);
  EXPECT(lc::event_pool_stats(0).reused >= 49);
  // events across devices
  lc::Event e = lc::Event::create(false, 0);
  e.record(s0);
  e.wait(s1);
  bool threw = false;
  try {
    e.record(s1);
  } catch (const Error& err) {
    threw = std::strstr(err.what(), "cuda:0") != nullptr;
  }
  EXPECT(threw);
  // missing device
  std::string msg;
  try {
    ones({3}).to(Device{DeviceKind::CUDA, 2});
  } catch (const Error& err) {
    msg = err.what();
  }
  EXPECT(msg.find("cuda:2 does not exist: this machine has 2 CUDA devices") != std::string::npos);
  msg.clear();
  try {
    lc::Stream::create(2);
  } catch (const Error& err) {
    msg = err.what();
  }
  EXPECT(msg.find("2 CUDA devices") != std::string::npos);
  // stream guards per device, a copy on a side stream of cuda:1
  {
    lc::StreamGuard g(s1);
    Tensor y = ones({1000}).to(Device{DeviceKind::CUDA, 1});
    EXPECT(lc::stream_of(y) == s1);
    EXPECT(lc::current_stream(0).id == 0);
  }
  loom::sync();
  std::printf("%d passed, %d failed\n", passes, fails);
  return fails != 0;
}
