// The extension module loom._loom: error translation, runtime controls, then every init_xxx.
#include "bindings/common.h"
#include "cpu/blas_lib.h"

namespace loom::py {
namespace {

PyObject* exception_for(ErrorKind k) {
  switch (k) {
    case ErrorKind::Value:
      return PyExc_ValueError;
    case ErrorKind::Type:
      return PyExc_TypeError;
    case ErrorKind::Index:
      return PyExc_IndexError;
    case ErrorKind::Memory:
      return PyExc_MemoryError;
    case ErrorKind::Runtime:
      return PyExc_RuntimeError;
  }
  return PyExc_RuntimeError;
}

nb::dict counters_dict() {
  Counters& c = counters();
  nb::dict d;
  d["flushes"] = c.flushes.load();
  d["groups"] = c.groups.load();
  d["kernels"] = c.kernels.load();
  d["cache_hits"] = c.cache_hits.load();
  d["cache_misses"] = c.cache_misses.load();
  d["disk_hits"] = c.disk_hits.load();
  d["compiled_ahead"] = c.compiled_ahead.load();
  d["kernel_evictions"] = c.kernel_evictions.load();
  d["plan_hits"] = c.plan_hits.load();
  d["plan_ns"] = c.plan_ns.load();
  d["run_ns"] = c.run_ns.load();
  d["col_kernels"] = c.col_kernels.load();
  d["bytes_moved"] = c.bytes_moved.load();
  d["materialized"] = c.materialized.load();
  d["nodes_recorded"] = c.nodes_recorded.load();
  d["bytes_live"] = c.bytes_live.load();
  d["bytes_peak"] = c.bytes_peak.load();
  d["saved_bytes"] = c.saved_bytes.load();
  d["saved_bytes_peak"] = c.saved_bytes_peak.load();
  return d;
}

}  // namespace

void init_runtime(nb::module_& m) {
  m.def("sync", &sync, "Runs all pending work on every device and waits (a sync point).");
  m.def(
      "_cpu_blas", [] { return loom::cpu::blas_lib().name; },
      "The BLAS the CPU's float matmuls call: 'mkl (its file)', 'openblas' or 'eigen' "
      "(LOOM_CPU_BLAS picks it at the first call).");
  m.def("flush", nb::overload_cast<>(&loom::flush),
        "Runs the pending work of every stream (submits it on a GPU) without waiting for it.");
  m.def("set_fusion", &set_fusion, "enabled"_a,
        "Turns fusion on or off (off: one kernel per primitive, the eager oracle). Syncs first.");
  m.def("fusion_enabled", &fusion_enabled, "True when fusion is on (LOOM_FUSION=0 turns it off).");
  m.def("explain", &explain, "tensor"_a,
        "The plan that would compute tensor: its groups, signatures and kernel programs, "
        "without running anything.");
  m.def("counters", &counters_dict,
        "What loom did: flushes, groups, kernels, cache hits/misses, bytes moved, memory.");
  m.def("reset_counters", &reset_counters,
        "Zeroes the counters (bytes_peak restarts at bytes_live).");
  m.def("set_log_fusion", &set_log_fusion, "enabled"_a,
        "Print each flush's groups, signatures and cache hits (like LOOM_LOG=fusion).");
  m.def("kernel_cache_size", &kernel_cache_size, "Number of kernels in the in-memory cache.");
  m.def("clear_kernel_cache", &clear_kernel_cache, "Empties the in-memory kernel cache.");
  m.def("kernel_cache_limit", &kernel_cache_limit,
        "Most kernels the in-memory cache keeps (starts at LOOM_KERNEL_CACHE_MAX).");
  m.def(
      "set_kernel_cache_limit",
      [](int64_t n) {
        LOOM_CHECK(n >= 1, Value, "set_kernel_cache_limit: the limit must be at least 1, got ", n);
        set_kernel_cache_limit(size_t(n));
      },
      "n"_a,
      "Bounds the in-memory kernel cache to n kernels; the least recently used are evicted "
      "(counters()['kernel_evictions']) and recompiled or loaded from disk when used again.");
  m.def(
      "cuda_is_available", [] { return backend_available(DeviceKind::CUDA); },
      "True when a CUDA driver and GPU were found.");
  // Fault injection for the Python tests (tensor/fault.h); underscored: not part of the API.
  m.def(
      "_testing_fail_allocs_above",
      [](int64_t nbytes) {
        LOOM_CHECK(nbytes >= 0, Value, "_testing_fail_allocs_above: nbytes must be >= 0, got ",
                   nbytes);
        fault::fail_allocs_above(size_t(nbytes));
      },
      "nbytes"_a,
      "Testing only: every allocation of more than nbytes raises MemoryError, as on a device "
      "with little memory, until _testing_fail_allocs_above(0).");
}

}  // namespace loom::py

NB_MODULE(_loom, m) {
  using namespace loom::py;
  m.doc() = "loom: an eager-mode tensor runtime whose ops record lazily and run as fused kernels.";
  // Test frameworks keep dtype singletons and tensors alive past nanobind's shutdown check
  // (parametrize ids, tracebacks); the report would only be noise for users.
  nb::set_leak_warnings(false);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const loom::Error& e) {
      PyErr_SetString(exception_for(e.kind()), e.what());
    }
  });
  init_dtype(m);
  init_tensor(m);
  init_autograd(m);
  init_optim(m);
  init_loss(m);
  init_nn_ops(m);
  init_autocast(m);
  init_index(m);
  init_index_ops(m);
  init_operators(m);
  init_ops(m);
  init_reduce(m);
  init_creation(m);
  init_interop(m);
  init_runtime(m);
  init_knobs(m);
  init_cuda(m);
  init_checkpoint(m);
  m.attr("__version__") = LOOM_PY_VERSION;
}
