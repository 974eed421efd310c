#pragma once
// The seam between memory and the scheduler above it: work submitted to a stream outside a
// flush (a copy into a new ready storage) must be known to whoever orders the streams, which is
// the fuser's trace (fusion/trace.cpp installs the handler). The tensor floor only reports it.
#include "tensor/device.h"

namespace loom {

using StreamWorkHandler = void (*)(const StreamRef& s);
// Installed once, before any stream but the CPU's exists; nullptr: nothing to tell.
void set_stream_work_handler(StreamWorkHandler h);
void note_stream_work(const StreamRef& s);

}  // namespace loom
