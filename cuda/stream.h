#pragma once
// Streams and events as a user concept. Each CUDA device ("cuda:N") has a default stream; a
// thread's current stream of each device (thread-local, the default one unless a StreamGuard
// selects another) is where its ops on that device record and run. Streams and events belong to
// the device they were made on; a stream may wait for an event of another device. Each stream
// has its own trace of pending ops. A tensor remembers the stream that produced it; using it on
// another stream makes that stream wait for the producer (an event on the device), and freeing
// memory other streams used waits for them too.
//
//   loom::cuda::Stream s = loom::cuda::Stream::create();  // or create(dev, priority)
//   {
//     loom::cuda::StreamGuard g(s);
//     y = (x * 2).exp();   // recorded on s's trace, runs on s
//   }
//   s.synchronize();       // submits s's pending ops and waits for s
#include "cuda/driver.h"
#include "ops/tensor.h"

namespace loom::cuda {

// The calling thread's current stream of device `dev`.
Stream current_stream(int dev = 0);
// Makes `s` the calling thread's current stream of its device.
void set_current_stream(const Stream& s);

// Selects a current stream for a scope, restoring the previous one on exit.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& s);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  StreamRef prev_;
};

// The stream `t` was produced on (recorded on, for a pending tensor). Throws for a CPU tensor.
Stream stream_of(const Tensor& t);
// Tells loom that `t`'s memory is used on `s` outside loom (a library reading it there): its free
// then waits for `s`. Throws when t is not a tensor of s's device.
void record_stream(const Tensor& t, const Stream& s);

// The runtime's view of a CUDA stream, and back (the default stream has id 0).
StreamRef to_ref(const Stream& s);
Stream from_ref(const StreamRef& r);

}  // namespace loom::cuda
