#pragma once
// Shrinking a failing program: delete instructions (with everything that depends on them),
// bypass instructions, drop outputs and shrink input shapes while it still fails the same way.
#include <functional>
#include <string>

#include "program.h"

namespace loom::fuzz {

using FailFn = std::function<bool(const Program&)>;

// True when check(p, ro) reports a mismatch of class `what` ("fused-vs-unfused", ...).
FailFn same_failure(const std::string& what, const RunOptions& ro = {});

struct ShrinkStats {
  int tries = 0, accepted = 0;
};

// The smallest program found (values renumbered 0..n-1) that `fails`; stops after max_tries.
Program shrink(const Program& p, const FailFn& fails, int max_tries = 3000,
               ShrinkStats* stats = nullptr);

// Renumbers values 0..n-1 in order of definition.
Program compact(const Program& p);

}  // namespace loom::fuzz
