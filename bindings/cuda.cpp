// loom._loom's CUDA streams and events: the C++ objects of cuda/stream.h, wrapped by the
// torch-like classes of python/loom/cuda.py (Stream, Event, the stream() context manager).
#include "bindings/common.h"
#include "cuda/stream.h"

namespace loom::py {

void init_cuda(nb::module_& m) {
  using cuda::Event;
  using cuda::Stream;
  nb::class_<Stream>(m, "_CudaStream", "A CUDA stream with its own trace (see loom.cuda.Stream).")
      .def_static("create", &Stream::create, "device"_a = 0, "priority"_a = 0)
      .def_prop_ro("device_index", [](const Stream& s) { return s.device; })
      .def_prop_ro("priority", &Stream::priority)
      .def_prop_ro("id", [](const Stream& s) { return s.id; })
      .def_prop_ro("cuda_stream", [](const Stream& s) { return uintptr_t(s.raw()); })
      .def("synchronize", &Stream::synchronize)
      .def("query", &Stream::query)
      .def("wait_stream", &Stream::wait_stream, "other"_a)
      .def("__eq__", [](const Stream& a, const Stream& b) { return a == b; })
      .def("__hash__", [](const Stream& s) { return size_t(s.id) * 64 + size_t(s.device); });
  m.def("_cuda_device_count", &cuda::device_count);
  m.def(
      "_cuda_stream_priority_range",
      [](int dev) {
        cuda::PriorityRange r = cuda::stream_priority_range(dev);
        return std::make_pair(r.least, r.greatest);
      },
      "device"_a = 0);
  m.def(
      "_cuda_event_pool_stats",
      [](int dev) {
        cuda::EventPoolStats st = cuda::event_pool_stats(dev);
        return std::make_tuple(st.created, st.reused, st.idle);
      },
      "device"_a = 0);
  m.def(
      "_cuda_current_stream", [](int dev) { return cuda::current_stream(dev); }, "device"_a = 0);
  m.def(
      "_cuda_default_stream", [](int dev) { return cuda::default_stream(dev); }, "device"_a = 0);
  m.def("_cuda_set_current_stream", &cuda::set_current_stream, "stream"_a);
  m.def("_cuda_stream_of", &cuda::stream_of, "tensor"_a);
  m.def("_cuda_record_stream", &cuda::record_stream, "tensor"_a, "stream"_a);
  m.def(
      "_cuda_synchronize",
      [](int dev) {
        loom::sync();
        cuda::device_sync(dev);
      },
      "device"_a = 0);

  nb::class_<Event>(m, "_CudaEvent", "A CUDA event (see loom.cuda.Event).")
      .def_static("create", &Event::create, "timing"_a = false, "device"_a = 0)
      .def_prop_ro("timing", [](const Event& e) { return e.timing; })
      .def_prop_ro("device_index", [](const Event& e) { return e.device; })
      .def(
          "record",
          [](const Event& e, std::optional<Stream> s) {
            if (s)
              e.record(*s);
            else
              e.record();
          },
          "stream"_a = nb::none())
      .def(
          "wait",
          [](const Event& e, std::optional<Stream> s) {
            if (s)
              e.wait(*s);
            else
              e.wait();
          },
          "stream"_a = nb::none())
      .def("synchronize", &Event::synchronize)
      .def("query", &Event::query)
      .def("elapsed_time", &Event::elapsed_time, "end"_a);
}

}  // namespace loom::py
