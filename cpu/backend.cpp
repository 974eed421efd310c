// The CPU backend: host memory from a pool of mapped chunks, the tile interpreter, and Eigen
// matmul.
#include "tensor/backend.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "cpu/gather.h"
#include "cpu/host_memory.h"
#include "cpu/interp.h"
#include "cpu/matmul.h"
#include "cpu/matmul_epilogue.h"
#include "cpu/scan.h"
#include "cpu/scatter.h"
#include "cpu/svd.h"
#include "tensor/error.h"
#include "tensor/knobs.h"

namespace loom {
namespace {

struct CpuKernel : Kernel {
  cpu::Program prog;
  explicit CpuKernel(const Group& g) : prog(cpu::build_program(g)) {}
  void run(const Group& g) override { cpu::run_program(prog, g); }
  // The groups spread over the threads at once, tasks of at least kSegmentWork elements (a
  // task a parameter's 128 elements cost more than the update); a large group spreads further,
  // isolated so that a thread waiting inside it does not take up another group meanwhile.
  int run_segments(const std::vector<const Group*>& gs) override {
    int64_t total = 0;
    for (const Group* g : gs) total += numel(g->space);
    const size_t grain = size_t(std::clamp<int64_t>(
        int64_t(gs.size()) * kSegmentWork / std::max<int64_t>(total, 1), 1, int64_t(gs.size())));
    tbb::parallel_for(tbb::blocked_range<size_t>(0, gs.size(), grain), [&](const auto& r) {
      for (size_t i = r.begin(); i < r.end(); ++i)
        tbb::this_task_arena::isolate([&] { cpu::run_program(prog, *gs[i]); });
    });
    return 1;
  }
  static constexpr int64_t kSegmentWork = 32768;
  std::string source() const override { return prog.text(); }
};

struct CpuBackend : Backend {
  cpu::HostMemory memory{size_t(knob_int(Knob::CpuCacheBytes))};
  void* alloc(size_t bytes) override {
    void* p = memory.alloc(bytes);
    LOOM_CHECK(p, Memory, "cpu: out of memory allocating ", bytes, " bytes");
    return p;
  }
  void free(void* p, size_t bytes) override { memory.free(p, bytes); }
  void copy_from_host(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void copy_to_host(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void copy_within(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  std::unique_ptr<Kernel> lower(const Group& g) override { return std::make_unique<CpuKernel>(g); }
  void run_opaque(const Group& g) override {
    if (g.opaque->op == Op::CumSum)
      cpu::run_scan(g);
    else if (g.opaque->op == Op::Svdvals)
      cpu::run_svdvals(g);
    else if (g.opaque->op == Op::Gather)
      cpu::run_gather(g);
    else if (g.opaque->op == Op::ScatterAdd)
      cpu::run_scatter_add(g);
    else
      cpu::run_matmul(g);
  }
  void run_opaque_epilogue(const Group& g, Kernel& epilogue) override {
    cpu::run_matmul_epilogue(g, epilogue);
  }
  std::string name() const override { return "cpu"; }
  size_t memory_capacity() const override {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
  }
  BackendCaps caps() const override {
    return {.scan = true,
            .svd = true,
            .gather = true,
            .row_gather = true,
            .matmul_epilogue = knob_flag(Knob::CpuMatmulEpilogue),
            .segments = true,
            .column_sums = true};
  }
};

}  // namespace

// Never destroyed: tensors in other static objects may give memory back during exit, and the
// cached blocks stay reachable (LeakSanitizer reported them as leaks when the cache died first).
Backend& cpu_backend() {
  static auto* b = new CpuBackend;
  return *b;
}

void loom_register_backend_cpu() { register_backend(DeviceKind::CPU, &cpu_backend()); }

}  // namespace loom
