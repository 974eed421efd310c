// NVRTC compiles loom-style header-free kernels to sm_90 cubins with no GPU present; failures carry
// the kernel name, the log and numbered source lines.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>

#include "cuda/nvrtc.h"
#include "tensor/error.h"

namespace lc = loom::cuda;

namespace {

const char* kSaxpy = R"(extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

bool skip_without_nvrtc() {
  if (lc::nvrtc_available()) return false;
  MESSAGE("NVRTC unavailable, skipping: " << lc::nvrtc_unavailable_reason());
  return true;
}

// Restores the global strict flag however the test ends.
struct StrictGuard {
  bool old = lc::strict_warnings();
  explicit StrictGuard(bool on) { lc::set_strict_warnings(on); }
  ~StrictGuard() { lc::set_strict_warnings(old); }
};

std::string compile_error(const std::string& src, const std::string& name) {
  try {
    lc::compile(src, name, 9, 0);
  } catch (const loom::Error& e) {
    CHECK(e.kind() == loom::ErrorKind::Runtime);
    return e.what();
  }
  FAIL("expected a compile error for " << name);
  return "";
}

}  // namespace

TEST_CASE("nvrtc: reports availability and version") {
  if (skip_without_nvrtc()) return;
  CHECK(lc::nvrtc_unavailable_reason().empty());
  std::string v = lc::nvrtc_version();
  CHECK(v.find('.') != std::string::npos);
  CHECK(std::stoi(v) >= 11);
}

TEST_CASE("nvrtc: options are precise and name the arch") {
  if (skip_without_nvrtc()) return;
  auto opts = lc::compile_options(9, 0, {"-DLOOM_X=1"});
  auto has = [&](const std::string& o) {
    for (const auto& x : opts)
      if (x == o) return true;
    return false;
  };
  CHECK(has("--gpu-architecture=sm_90"));
  CHECK(has("-std=c++17"));
  CHECK(has("--fmad=true"));
  CHECK(has("-DLOOM_X=1"));
  CHECK_FALSE(has("--use_fast_math"));
  CHECK(opts.back() == "-DLOOM_X=1");  // extra options come last so they can override
}

TEST_CASE("nvrtc: compiles a kernel to an sm_90 ELF cubin") {
  if (skip_without_nvrtc()) return;
  lc::CompileResult r = lc::compile(kSaxpy, "saxpy", 9, 0);
  REQUIRE(r.cubin.size() > 64);
  CHECK(r.cubin[0] == 0x7f);
  CHECK(std::string(r.cubin.data() + 1, 3) == "ELF");
  CHECK(r.ms > 0);
  // The kernel's name is in the ELF symbol table.
  CHECK(std::string(r.cubin.begin(), r.cubin.end()).find("saxpy") != std::string::npos);
}

TEST_CASE("nvrtc: a syntax error names the kernel and shows the line") {
  if (skip_without_nvrtc()) return;
  std::string src =
      "extern \"C\" __global__ void broken(float* y) {\n"
      "  int i = threadIdx.x;\n"
      "  y[i] = 1.0f +;\n"
      "}\n";
  std::string msg = compile_error(src, "my_broken_kernel");
  CHECK(msg.find("my_broken_kernel") != std::string::npos);
  CHECK(msg.find("sm_90") != std::string::npos);
  CHECK(msg.find("error") != std::string::npos);
  CHECK(msg.find(">    3 |   y[i] = 1.0f +;") != std::string::npos);        // the culprit, marked
  CHECK(msg.find("     2 |   int i = threadIdx.x;") != std::string::npos);  // and its context
}

TEST_CASE("nvrtc: strict mode turns warnings into errors") {
  if (skip_without_nvrtc()) return;
  std::string src =
      "extern \"C\" __global__ void warns(float* y) {\n"
      "  int unused = 3;\n"
      "  y[threadIdx.x] = 0.0f;\n"
      "}\n";
  {
    StrictGuard g(false);
    lc::CompileResult r = lc::compile(src, "warns", 9, 0);
    CHECK_FALSE(r.cubin.empty());
    CHECK(r.log.find("warning") != std::string::npos);  // #177-D: declared but never referenced
  }
  {
    StrictGuard g(true);
    std::string msg = compile_error(src, "warns_strict");
    CHECK(msg.find("warns_strict") != std::string::npos);
    CHECK(msg.find("strict") != std::string::npos);
    CHECK(msg.find(">    2 |   int unused = 3;") != std::string::npos);
    // A clean kernel still compiles in strict mode.
    CHECK_FALSE(lc::compile(kSaxpy, "saxpy", 9, 0).cubin.empty());
  }
}

TEST_CASE("nvrtc: fail_next_compile injects exactly one failure") {
  if (skip_without_nvrtc()) return;
  lc::fault::fail_next_compile();
  std::string msg = compile_error(kSaxpy, "injected_kernel");
  CHECK(msg.find("injected_kernel") != std::string::npos);
  CHECK_FALSE(lc::compile(kSaxpy, "saxpy", 9, 0).cubin.empty());
}

TEST_CASE("nvrtc: a background warm-up runs beside a user compile") {
  // What the CUDA backend does when it starts: the thread compiles a trivial kernel while the
  // caller compiles its own; both succeed, and a second start does nothing.
  CHECK_NOTHROW(lc::warm_up_async(9, 0));
  CHECK_NOTHROW(lc::warm_up_async(9, 0));
  if (skip_without_nvrtc()) return;
  CHECK_FALSE(lc::compile(kSaxpy, "saxpy", 9, 0).cubin.empty());
  for (int i = 0; i < 600 && !lc::warmed_up(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(lc::warmed_up());
}

TEST_CASE("nvrtc: warm_up never throws") {
  CHECK_NOTHROW(lc::warm_up());
  CHECK_NOTHROW(lc::warm_up());
}
