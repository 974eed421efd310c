#pragma once
// The blocked interpreter: runs a Program over tiles of a group's iteration space,
// spreading row blocks (or the chunks of a long row) over oneTBB.
#include "cpu/program.h"

namespace loom::cpu {

void run_program(const Program& p, const Group& g);

}  // namespace loom::cpu
