#include "tensor/range_arena.h"

#include <algorithm>

#include "tensor/error.h"

namespace loom {

void RangeArena::insert(uintptr_t at, Range r) {
  by_addr_.emplace(at, r);
  by_size_.emplace(r.bytes, at);
  free_ += r.bytes;
  resident_ += r.resident;
}

void RangeArena::erase(Iter it) {
  by_size_.erase({it->second.bytes, it->first});
  free_ -= it->second.bytes;
  resident_ -= it->second.resident;
  by_addr_.erase(it);
}

// The free range at `it` becomes [at, at + r.bytes): its tree nodes are moved, not freed and
// made again (a training step takes and gives back hundreds of blocks).
void RangeArena::reshape(Iter it, uintptr_t at, Range r) {
  auto by_size = by_size_.extract({it->second.bytes, it->first});
  free_ = free_ - it->second.bytes + r.bytes;
  resident_ = resident_ - it->second.resident + r.resident;
  if (at == it->first) {
    it->second = r;
  } else {
    auto by_addr = by_addr_.extract(it);
    by_addr.key() = at;
    by_addr.mapped() = r;
    by_addr_.insert(std::move(by_addr));
  }
  by_size.value() = {r.bytes, at};
  by_size_.insert(std::move(by_size));
}

void RangeArena::add(uintptr_t base, size_t bytes) {
  if (bytes) put(base, {bytes, 0});
}

uintptr_t RangeArena::take(size_t bytes) {
  auto fit = by_size_.lower_bound({bytes, 0});
  if (fit == by_size_.end() || bytes == 0) return 0;
  Iter it = by_addr_.find(fit->second);
  const uintptr_t at = it->first;
  const Range r = it->second;
  // Where in a range its resident pages lie is not tracked: the block taken is counted as
  // taking them first (the count stays an upper bound for what remains).
  if (r.bytes > bytes)
    reshape(it, at + bytes, {r.bytes - bytes, r.resident - std::min(r.resident, bytes)});
  else
    erase(it);
  return at;
}

void RangeArena::give(uintptr_t p, size_t bytes) {
  if (bytes) put(p, {bytes, bytes});
}

void RangeArena::put(uintptr_t at, Range r) {
  const uintptr_t end = at + r.bytes;
  Iter next = by_addr_.lower_bound(at);
  LOOM_CHECK(next == by_addr_.end() || next->first >= end, Runtime,
             "range arena: a block given back overlaps a free range");
  Iter prev = by_addr_.end();
  if (next != by_addr_.begin()) {
    prev = std::prev(next);
    LOOM_CHECK(prev->first + prev->second.bytes <= at, Runtime,
               "range arena: a block given back overlaps a free range");
    if (prev->first + prev->second.bytes != at) prev = by_addr_.end();
  }
  if (next != by_addr_.end() && next->first != end) next = by_addr_.end();
  if (prev != by_addr_.end()) {
    Range merged{prev->second.bytes + r.bytes, prev->second.resident + r.resident};
    if (next != by_addr_.end()) {
      merged = {merged.bytes + next->second.bytes, merged.resident + next->second.resident};
      erase(next);
    }
    reshape(prev, prev->first, merged);
  } else if (next != by_addr_.end()) {
    reshape(next, at, {r.bytes + next->second.bytes, r.resident + next->second.resident});
  } else {
    insert(at, r);
  }
}

void RangeArena::trim(size_t keep, const std::function<void(uintptr_t, size_t)>& release) {
  while (resident_ > keep) {
    Iter most = by_addr_.end();
    for (Iter it = by_addr_.begin(); it != by_addr_.end(); ++it)
      if (most == by_addr_.end() || it->second.resident > most->second.resident) most = it;
    if (most == by_addr_.end() || most->second.resident == 0) return;
    release(most->first, most->second.bytes);
    resident_ -= most->second.resident;
    most->second.resident = 0;
  }
}

}  // namespace loom
