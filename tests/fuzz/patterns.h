#pragma once
// The in-place patterns a program holds (what the generator is weighted toward), counted by the
// suite's batch checks and reported by the loom_fuzz CLI.
#include "program.h"

namespace loom::fuzz {

// Whether the program reads a buffer between two writes of it within one flush: y computed
// from x, then x written in place (directly or through a view), then y updated in place from
// x (or a view of it). Aliasing comes from executing the program on placeholders.
bool reads_between_writes(const Program& p);
// Whether it updates in place a value computed earlier in the same flush (still pending).
bool updates_pending(const Program& p);

}  // namespace loom::fuzz
