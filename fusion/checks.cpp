// Deferred checks (fusion/checks.h): registered on the trace that computes their flag, read at
// the sync points of fusion/trace.cpp once that trace's flush ran.
#include "fusion/checks.h"

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>

#include "fusion/trace.h"
#include "fusion/trace_impl.h"
#include "tensor/backend.h"
#include "tensor/device.h"

namespace loom {

using namespace trace_impl;

void defer_check(std::shared_ptr<Buffer> flag, ErrorKind kind, std::string message) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  const Storage& st = *flag->cur;
  LOOM_CHECK(st.nbytes == 1, Runtime, "internal: a deferred check's flag must be one bool, got ",
             st.nbytes, " bytes (", message, ")");
  Trace* t = st.pending() ? find_trace(st.device, st.stream) : nullptr;
  Trace& tr = t ? *t : trace_for(current_stream(st.device));
  tr.checks.push_back({std::move(flag), kind, std::move(message)});
}

std::shared_ptr<Buffer> take_check(Device d, ErrorKind kind, const std::string& message) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  Trace& tr = is_host(d) ? cpu_trace() : trace_for(current_stream(d));
  for (auto it = tr.checks.begin(); it != tr.checks.end(); ++it)
    if (it->kind == kind && it->message == message) {
      std::shared_ptr<Buffer> flag = std::move(it->flag);
      tr.checks.erase(it);
      return flag;
    }
  return nullptr;
}

int64_t pending_checks() {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  int64_t n = 0;
  for (Trace* t : all_traces()) n += int64_t(t->checks.size());
  return n;
}

namespace trace_impl {

void raise_checks(Trace& tr) {
  if (tr.checks.empty()) return;
  std::optional<Error> failed;
  size_t kept = 0;
  for (size_t i = 0; i < tr.checks.size(); ++i) {
    DeferredCheck& c = tr.checks[i];
    const Storage& st = *c.flag->cur;
    if (st.pending()) {  // its flush has not run (or ran out of memory): read it later
      if (kept != i) tr.checks[kept] = std::move(c);
      ++kept;
      continue;
    }
    uint8_t v = 0;
    if (is_host(st.device)) {
      v = *static_cast<const uint8_t*>(st.data());
    } else {
      ActiveStreamScope active(tr.stream);  // ordered after the kernel that wrote it
      backend(st.device).copy_to_host_of(st, &v, st.data(), 1);
    }
    if (v && !failed) failed.emplace(c.kind, c.message);
  }
  tr.checks.erase(tr.checks.begin() + std::ptrdiff_t(kept), tr.checks.end());
  if (failed) throw *failed;
}

}  // namespace trace_impl
}  // namespace loom
