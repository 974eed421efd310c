// BlockAlloc (tensor/block_alloc.h): freed blocks are reused by the thread that freed them,
// blocks cross threads (made on one, freed on another, after the first has exited), and a
// thread's kept blocks are freed at its exit (ASan's leak check and use-after-free reports run
// over this in the sanitizer build).
#include <memory>
#include <thread>
#include <vector>

#include "helpers.h"
#include "tensor/block_alloc.h"

using namespace loom;

namespace {
struct Block {
  int64_t v[5];
};
}  // namespace

TEST_CASE("block_alloc: a freed block is the next one handed out on its thread") {
  BlockAlloc<Block> a;
  Block* p = a.allocate(1);
  Block* q = a.allocate(1);
  CHECK(p != q);
  a.deallocate(p, 1);
  CHECK(a.allocate(1) == p);  // last freed, first reused
  a.deallocate(q, 1);
  a.deallocate(p, 1);
  Block* r = a.allocate(1);
  Block* s = a.allocate(1);
  CHECK(r == p);
  CHECK(s == q);
  a.deallocate(r, 1);
  a.deallocate(s, 1);
  Block* arr = a.allocate(3);  // arrays go to the heap
  arr[2].v[4] = 7;
  CHECK(arr[2].v[4] == 7);
  a.deallocate(arr, 3);
}

TEST_CASE("block_alloc: blocks cross threads and outlive the thread that made them") {
  std::vector<std::shared_ptr<Block>> made;
  std::thread t([&] {
    for (int i = 0; i < 6000; ++i) {  // more than a thread keeps (4096)
      auto b = std::allocate_shared<Block>(BlockAlloc<Block>());
      b->v[0] = i;
      made.push_back(b);
    }
    made.resize(1000);  // frees 5000: 4096 kept (freed at this thread's exit), the rest now
  });
  t.join();
  REQUIRE(made.size() == 1000);
  for (int i = 0; i < 1000; ++i) CHECK(made[size_t(i)]->v[0] == i);
  std::thread u([&] { made.clear(); });  // freed on a third thread, kept there until it exits
  u.join();
  auto b = std::allocate_shared<Block>(BlockAlloc<Block>());
  b->v[0] = 1;
  CHECK(b->v[0] == 1);
}
