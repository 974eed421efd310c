#pragma once
// Host <-> device copies of pageable host memory through pinned staging buffers: a few chunks
// of page-locked memory, double-buffered so the host's memcpy of one chunk overlaps the DMA of
// the next. Small copies go directly (the driver stages them itself). Not thread-safe: the
// backend calls it under the runtime mutex.
#include <cstddef>

#include "cuda/driver.h"

namespace loom::cuda {

class Staging {
 public:
  // Returns on completion: `dst` holds the data.
  void to_host(void* dst, DevicePtr src, size_t bytes, const Stream& s);
  // Returns once `src` may be reused (the last chunks may still be in flight on `s`).
  void to_device(DevicePtr dst, const void* src, size_t bytes, const Stream& s);
  ~Staging();

  static constexpr size_t kChunk = size_t(4) << 20;     // bytes a buffer
  static constexpr size_t kDirect = size_t(256) << 10;  // smaller copies skip staging

 private:
  struct Buf {
    void* host = nullptr;
    Event done;            // recorded after the last copy using it
    bool pending = false;  // `done` was recorded and not yet waited for
  };
  bool ready(int dev);
  void wait(Buf& b);
  void mark(Buf& b, const Stream& s);
  Buf bufs_[2];
  int dev_ = -1;
};

}  // namespace loom::cuda
