// check_later (ops/record.h): a value check deferred to the next sync point.
#include "fusion/checks.h"
#include "ops/record.h"

namespace loom {

void check_later(const Tensor& bad, ErrorKind kind, std::string message) {
  RuntimeLock lock;  // the take and the new flag's record are one step for other threads
  Tensor flag = any(bad);
  if (std::shared_ptr<Buffer> prev = take_check(flag.device(), kind, message))
    flag = logical_or(flag, Tensor(std::move(prev), View{}, DType::Bool, flag.device()));
  defer_check(flag.buffer(), kind, std::move(message));
}

}  // namespace loom
