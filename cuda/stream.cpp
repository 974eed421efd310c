// The user API of streams and events (cuda/stream.h): thin wrappers that keep the per-stream
// traces (fusion/trace.h) and the device queues in step.
#include "cuda/stream.h"

#include "fusion/trace.h"
#include "tensor/error.h"

namespace loom::cuda {
namespace {

Device device_of(int dev) { return Device{DeviceKind::CUDA, dev}; }

void require_stream(const Stream& s, const char* what) {
  LOOM_CHECK(s.device >= 0 && (s.id == 0 || s.handle), Value, what,
             ": not a stream (default-constructed or moved-from; use Stream::create())");
}

}  // namespace

StreamRef to_ref(const Stream& s) {
  return StreamRef{device_of(s.device), s.id, s.id == 0 ? nullptr : s.handle};
}

Stream from_ref(const StreamRef& r) {
  LOOM_CHECK(r.device.kind == DeviceKind::CUDA, Value, "stream: ", r.str(),
             " is not a CUDA stream");
  if (r.id == 0) return default_stream(r.device.index);
  LOOM_CHECK(r.native, Runtime, "stream: ", r.str(), " no longer exists (it was retired)");
  return Stream{r.device.index, r.id, r.native};
}

Stream Stream::create(int device, int priority) { return create_stream(device, priority); }

int Stream::priority() const {
  require_stream(*this, "Stream.priority");
  return stream_priority(id == 0 ? default_stream(device) : *this);
}

void Stream::synchronize() const {
  require_stream(*this, "Stream.synchronize");
  synchronize_stream(to_ref(*this));
}

bool Stream::query() const {
  require_stream(*this, "Stream.query");
  if (pending_nodes(to_ref(*this)) > 0) return false;
  return stream_done(id == 0 ? default_stream(device) : *this);
}

void Stream::wait_stream(const Stream& other) const {
  require_stream(*this, "Stream.wait_stream");
  require_stream(other, "Stream.wait_stream");
  loom::wait_stream(to_ref(*this), to_ref(other));
}

Stream current_stream(int dev) { return from_ref(loom::current_stream(device_of(dev))); }

void set_current_stream(const Stream& s) {
  require_stream(s, "set_current_stream");
  loom::set_current_stream(to_ref(s));
}

StreamGuard::StreamGuard(const Stream& s) {
  require_stream(s, "StreamGuard");
  prev_ = loom::current_stream(device_of(s.device));
  loom::set_current_stream(to_ref(s));
}

StreamGuard::~StreamGuard() { loom::set_current_stream(prev_); }

Stream stream_of(const Tensor& t) {
  LOOM_CHECK(t.defined(), Value, "stream_of: undefined tensor");
  LOOM_CHECK(t.device().kind == DeviceKind::CUDA, Value, "stream_of: the tensor is on ",
             t.device().str(), ", which has no CUDA streams (shape ", shape_str(t.shape()), ")");
  StreamRef r = loom::stream_of(*t.storage());
  if (r.id != 0 && !r.native) return Stream{r.device.index, r.id, nullptr};  // retired
  return from_ref(r);
}

void record_stream(const Tensor& t, const Stream& s) {
  require_stream(s, "record_stream");
  LOOM_CHECK(t.device() == device_of(s.device), Value, "record_stream: the tensor is on ",
             t.device().str(), " but the stream is a stream of cuda:", s.device, " (shape ",
             shape_str(t.shape()), ")");
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  StreamRef ref = to_ref(s);
  CurrentStreamGuard g(ref);
  ActiveStreamScope a(ref);   // keeps a pointer to `ref`
  ensure_ready(t.storage());  // ordered after the producer; the stream becomes a user
}

// ---- events -------------------------------------------------------------------------------

Event Event::create(bool timing, int device) { return create_event(device, timing); }

void Event::record() const { record(current_stream(device)); }

void Event::record(const Stream& s) const {
  require_stream(s, "Event.record");
  LOOM_CHECK(raw(), Value, "Event.record: the event was not created (use Event::create)");
  LOOM_CHECK(s.device == device, Value, "Event.record: an event of cuda:", device,
             " cannot be recorded on a stream of cuda:", s.device);
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  flush_stream(to_ref(s));
  record_event(*this, s.id == 0 ? default_stream(s.device) : s);
}

void Event::wait() const { wait(current_stream(device)); }

void Event::wait(const Stream& s) const {
  require_stream(s, "Event.wait");
  LOOM_CHECK(raw(), Value, "Event.wait: the event was not created (use Event::create)");
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  flush_stream(to_ref(s));  // ops recorded before the wait need not wait
  stream_wait_event(s.id == 0 ? default_stream(s.device) : s, *this);
}

void Event::synchronize() const {
  LOOM_CHECK(raw(), Value, "Event.synchronize: the event was not created (use Event::create)");
  event_sync(*this);
}

bool Event::query() const {
  LOOM_CHECK(raw(), Value, "Event.query: the event was not created (use Event::create)");
  return event_done(*this);
}

float Event::elapsed_time(const Event& end) const {
  LOOM_CHECK(raw() && end.raw(), Value, "Event.elapsed_time: an event was not created");
  LOOM_CHECK(timing && end.timing, Value,
             "Event.elapsed_time: both events must be created with timing enabled "
             "(Event::create(true), Python enable_timing=True)");
  return elapsed_ms(*this, end);
}

}  // namespace loom::cuda
