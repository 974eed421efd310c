// Streams and events of the driver wrapper (cuda/driver.h), and the free list of wait events.
#include <mutex>

#include "cuda/driver.h"
#include "cuda/driver_api.h"
#include "tensor/device.h"
#include "tensor/error.h"

namespace loom::cuda {

using namespace driver_impl;

Stream default_stream(int dev) { return device(dev).stream; }

Stream create_stream(int dev, int priority) {
  enter(dev);
  CUstream st = nullptr;
  check(api().cuStreamCreateWithPriority(&st, kStreamNonBlocking, priority),
        "cuStreamCreateWithPriority", "device ", dev, ", priority ", priority);
  return Stream{dev, new_stream_id(), owned(st, dev, [](void* p) { api().cuStreamDestroy(p); })};
}

PriorityRange stream_priority_range(int dev) {
  enter(dev);
  PriorityRange r;
  check(api().cuCtxGetStreamPriorityRange(&r.least, &r.greatest), "cuCtxGetStreamPriorityRange",
        "device ", dev);
  return r;
}

int stream_priority(const Stream& s) {
  enter(s.device);
  int p = 0;
  check(api().cuStreamGetPriority(s.raw(), &p), "cuStreamGetPriority", "device ", s.device);
  return p;
}

void stream_sync(const Stream& s) {
  enter(s.device);
  check(api().cuStreamSynchronize(s.raw()), "cuStreamSynchronize", "device ", s.device);
}

bool stream_done(const Stream& s) {
  enter(s.device);
  CUresult r = api().cuStreamQuery(s.raw());
  if (r == kNotReady) return false;
  check(r, "cuStreamQuery", "device ", s.device);
  return true;
}

void device_sync(int dev) {
  enter(dev);
  check(api().cuCtxSynchronize(), "cuCtxSynchronize", "device ", dev);
}

Event create_event(int dev, bool timing) {
  enter(dev);
  CUevent ev = nullptr;
  check(api().cuEventCreate(&ev, timing ? kEventDefault : kEventDisableTiming), "cuEventCreate",
        "device ", dev);
  return Event{dev, timing, owned(ev, dev, [](void* p) { api().cuEventDestroy(p); })};
}

void record_event(const Event& e, const Stream& s) {
  LOOM_CHECK(e.raw(), Value, "Event.record: the event was not created (use Event::create)");
  LOOM_CHECK(e.device == s.device, Value, "Event.record: an event of cuda:", e.device,
             " cannot be recorded on a stream of cuda:", s.device);
  enter(s.device);
  check(api().cuEventRecord(e.raw(), s.raw()), "cuEventRecord", "device ", s.device);
}

Event record_event(const Stream& s, bool timing) {
  Event e = create_event(s.device, timing);
  record_event(e, s);
  return e;
}

void stream_wait_event(const Stream& s, const Event& e) {
  enter(s.device);
  check(api().cuStreamWaitEvent(s.raw(), e.raw(), 0), "cuStreamWaitEvent");
}

void stream_wait_stream(const Stream& waiter, const Stream& producer) {
  DeviceState& pd = enter(producer.device);
  EventPool& pool = pd.events;
  CUevent ev = nullptr;
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    if (!pool.idle.empty()) {
      ev = pool.idle.back();
      pool.idle.pop_back();
      pool.reused++;
    }
  }
  if (!ev) {
    check(api().cuEventCreate(&ev, kEventDisableTiming), "cuEventCreate", "device ",
          producer.device, " (wait event)");
    std::lock_guard<std::mutex> lock(pool.mu);
    pool.created++;
  }
  // Back to the list whatever happens: the enqueued wait (if any) already captured the event.
  struct Return {
    EventPool& pool;
    CUevent ev;
    ~Return() {
      std::lock_guard<std::mutex> lock(pool.mu);
      pool.idle.push_back(ev);
    }
  } ret{pool, ev};
  check(api().cuEventRecord(ev, producer.raw()), "cuEventRecord", "device ", producer.device);
  enter(waiter.device);  // a stream may wait for another context's event
  check(api().cuStreamWaitEvent(waiter.raw(), ev, 0), "cuStreamWaitEvent", "cuda:", waiter.device,
        " waiting for cuda:", producer.device);
}

EventPoolStats event_pool_stats(int dev) {
  EventPool& pool = device(dev).events;
  std::lock_guard<std::mutex> lock(pool.mu);
  return EventPoolStats{pool.created, pool.reused, pool.idle.size()};
}

float elapsed_ms(const Event& start, const Event& end) {
  LOOM_CHECK(start.timing && end.timing, Runtime,
             "elapsed_ms needs events recorded with timing=true");
  enter(start.device);
  float ms = 0;
  check(api().cuEventElapsedTime(&ms, start.raw(), end.raw()), "cuEventElapsedTime");
  return ms;
}

void event_sync(const Event& e) {
  enter(e.device);
  check(api().cuEventSynchronize(e.raw()), "cuEventSynchronize");
}

bool event_done(const Event& e) {
  enter(e.device);
  CUresult r = api().cuEventQuery(e.raw());
  if (r == kNotReady) return false;
  check(r, "cuEventQuery");
  return true;
}

}  // namespace loom::cuda
