// The CPU backend: aligned host memory, the tile interpreter, and Eigen matmul.
#include <cstdlib>
#include <cstring>

#include "cpu/interp.h"
#include "cpu/matmul.h"
#include "tensor/backend.h"
#include "tensor/error.h"

namespace loom {
namespace {

struct CpuKernel : Kernel {
  cpu::Program prog;
  explicit CpuKernel(const Group& g) : prog(cpu::build_program(g)) {}
  void run(const Group& g) override { cpu::run_program(prog, g); }
  std::string source() const override { return prog.text(); }
};

struct CpuBackend : Backend {
  void* alloc(size_t bytes) override {
    size_t n = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, n);
    LOOM_CHECK(p, Memory, "cpu: out of memory allocating ", bytes, " bytes");
    return p;
  }
  void free(void* p, size_t) override { std::free(p); }
  void copy_from_host(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void copy_to_host(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void copy_within(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  std::unique_ptr<Kernel> lower(const Group& g) override { return std::make_unique<CpuKernel>(g); }
  void run_opaque(const Group& g) override { cpu::run_matmul(g); }
  std::string name() const override { return "cpu"; }
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend b;
  return b;
}

}  // namespace loom
