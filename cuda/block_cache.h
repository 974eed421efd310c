#pragma once
// Device blocks freed on a stream, kept for that stream's next allocation of the same size: a
// loop's flush frees and allocates the same few sizes every time, and cuMemFreeAsync +
// cuMemAllocAsync for each of them would be driver calls a kernel. Stream-ordered like
// the driver's pool: a block freed on stream S (after every other stream that used it was
// made to wait, CudaBackend::release) is handed out only for work later submitted to S, which
// runs after everything S did with it, so no host sync is needed. Pure bookkeeping (no driver
// calls), thread safe: memory is freed by whichever thread drops its last reference.
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace loom::cuda {

class BlockCache {
 public:
  // Keeps at most `max_bytes` in all, and no block larger than max_bytes / 16 (a large
  // tensor's kernel time dwarfs two driver calls; holding it would only keep memory from other
  // sizes and streams). 0 keeps nothing.
  explicit BlockCache(size_t max_bytes) : max_(max_bytes) {}

  // A kept block of exactly `bytes` freed on `stream` (the most recently freed: warm in L2),
  // or 0 when there is none.
  uint64_t take(uint64_t stream, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = lists_.find(Key{stream, bytes});
    if (it == lists_.end() || it->second.empty()) return 0;
    uint64_t p = it->second.back();
    it->second.pop_back();
    held_ -= bytes;
    return p;
  }

  // Keeps `ptr` (freed on `stream`) for reuse; false when it is not kept (the caller frees it).
  bool put(uint64_t stream, size_t bytes, uint64_t ptr) {
    if (bytes == 0 || bytes > max_ / 16) return false;
    std::lock_guard<std::mutex> lock(mu_);
    if (held_ + bytes > max_) return false;
    lists_[Key{stream, bytes}].push_back(ptr);
    held_ += bytes;
    return true;
  }

  // Removes every kept block (of one stream, or of all when `all`), calling
  // free(stream, ptr) for each outside the lock.
  template <class Free>
  void drain(Free&& free, bool all = true, uint64_t stream = 0) {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = lists_.begin(); it != lists_.end();) {
        if (!all && it->first.stream != stream) {
          ++it;
          continue;
        }
        for (uint64_t p : it->second) out.push_back({it->first.stream, p});
        held_ -= it->first.bytes * it->second.size();
        it = lists_.erase(it);
      }
    }
    for (auto& [s, p] : out) free(s, p);
  }

  size_t held_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return held_;
  }

 private:
  struct Key {
    uint64_t stream;
    size_t bytes;
    bool operator==(const Key& o) const { return stream == o.stream && bytes == o.bytes; }
  };
  struct Hash {
    size_t operator()(const Key& k) const {
      return size_t((k.stream * 0x9e3779b97f4a7c15ull) ^ k.bytes);
    }
  };
  mutable std::mutex mu_;
  std::unordered_map<Key, std::vector<uint64_t>, Hash> lists_;
  size_t held_ = 0;
  size_t max_;
};

}  // namespace loom::cuda
