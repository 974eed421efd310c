#include "tensor/fault.h"

#include <atomic>

namespace loom::fault {
namespace {
std::atomic<bool> alloc_flag{false}, lower_flag{false};
}

void fail_next_alloc() { alloc_flag = true; }
void fail_next_lower() { lower_flag = true; }
bool take_alloc() { return alloc_flag.exchange(false); }
bool take_lower() { return lower_flag.exchange(false); }

}  // namespace loom::fault
