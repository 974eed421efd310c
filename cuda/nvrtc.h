#pragma once
// NVRTC, opened at run time (dlopen) so loom has no link-time dependency on it. Compiles kernel
// source straight to a cubin for one GPU architecture; needs no GPU.
#include <string>
#include <vector>

namespace loom::cuda {

bool nvrtc_available();
std::string nvrtc_unavailable_reason();  // "" when available
std::string nvrtc_version();             // "13.0"; "" when unavailable

// Treat any warning in the compile log as an error (CI compiles every generated kernel this way).
// Starts from $LOOM_STRICT_WARNINGS (set and not "0" means on).
void set_strict_warnings(bool on);
bool strict_warnings();

// The full option list compile() passes: arch, -std=c++17, -default-device, --fmad=true (never
// --use_fast_math: precision matters), --minimal where supported, then `extra`. Use it for cache
// keys so they cover exactly what the compiler saw.
std::vector<std::string> compile_options(int cc_major, int cc_minor,
                                         const std::vector<std::string>& extra = {});

struct CompileResult {
  std::vector<char> cubin;  // an ELF image for sm_<cc_major><cc_minor>
  std::string log;
  double ms = 0;  // wall time of the compilation
};
// Throws loom::Error(Runtime) with the kernel name, the log and the numbered source lines around
// each error (or warning, when strict) if compilation fails or NVRTC is unavailable.
CompileResult compile(const std::string& source, const std::string& kernel_name_for_errors,
                      int cc_major, int cc_minor,
                      const std::vector<std::string>& extra_options = {});

// Compiles a trivial kernel once to pay NVRTC's first-call cost early; never throws.
void warm_up();

namespace fault {
// The next compile() throws a compile failure without calling NVRTC.
void fail_next_compile();
}  // namespace fault

}  // namespace loom::cuda
