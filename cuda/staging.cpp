#include "cuda/staging.h"

#include <algorithm>
#include <cstring>

#include "tensor/error.h"

namespace loom::cuda {

bool Staging::ready(int dev) {
  if (bufs_[0].host) return dev == dev_;  // pinned memory is portable, events are per device
  try {
    for (Buf& b : bufs_) b.host = host_alloc(kChunk, dev);
  } catch (const Error&) {
    for (Buf& b : bufs_)
      host_free(b.host, dev), b.host = nullptr;  // pinned memory is scarce: go direct
    return false;
  }
  dev_ = dev;
  return true;
}

void Staging::wait(Buf& b) {
  if (b.pending) event_sync(b.done);
  b.pending = false;
}

// Each buffer keeps one event, re-recorded for every chunk (event_sync waits for the latest
// record), instead of creating and destroying one a chunk.
void Staging::mark(Buf& b, const Stream& s) {
  if (!b.done.raw()) b.done = create_event(s.device, false);
  record_event(b.done, s);
  b.pending = true;
}

void Staging::to_host(void* dst, DevicePtr src, size_t bytes, const Stream& s) {
  if (bytes < kDirect || !ready(s.device)) return copy_d2h(dst, src, bytes, s);
  char* out = static_cast<char*>(dst);
  size_t prev_off = 0, prev_len = 0;
  int k = 0;
  for (size_t off = 0; off < bytes || prev_len; off += kChunk, k ^= 1) {
    size_t len = off < bytes ? std::min(kChunk, bytes - off) : 0;
    Buf& b = bufs_[k];
    if (len) {
      wait(b);
      copy_d2h_async(b.host, src + off, len, s);
      mark(b, s);
    }
    if (prev_len) {  // the other buffer's chunk: copy it out while this one transfers
      Buf& p = bufs_[k ^ 1];
      wait(p);
      std::memcpy(out + prev_off, p.host, prev_len);
    }
    prev_off = off, prev_len = len;
  }
}

void Staging::to_device(DevicePtr dst, const void* src, size_t bytes, const Stream& s) {
  if (bytes < kDirect || !ready(s.device)) return copy_h2d(dst, src, bytes, s);
  const char* in = static_cast<const char*>(src);
  int k = 0;
  for (size_t off = 0; off < bytes; off += kChunk, k ^= 1) {
    size_t len = std::min(kChunk, bytes - off);
    Buf& b = bufs_[k];
    wait(b);  // its previous chunk has left the buffer
    std::memcpy(b.host, in + off, len);
    copy_h2d(dst + off, b.host, len, s);
    mark(b, s);
  }
}

Staging::~Staging() {
  try {
    for (Buf& b : bufs_) {
      wait(b);
      host_free(b.host, dev_);
    }
  } catch (...) {
  }
}

}  // namespace loom::cuda
