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
// Starts from LOOM_STRICT_WARNINGS (tensor/knobs.h).
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

// Compiles a trivial kernel once to pay NVRTC's first-call cost early; never throws. With
// cc_major 0 it asks the driver for device 0's architecture (sm_90 without a GPU).
void warm_up(int cc_major = 0, int cc_minor = 0);
// Runs warm_up(cc_major, cc_minor) once on a background thread and returns at once; the thread is
// joined at exit. A user compile may run concurrently (NVRTC programs are independent and loom's
// NVRTC state is set up before the thread starts). The CUDA backend calls it when it starts with
// LOOM_NVRTC_WARMUP=1 (a process exiting mid-compile can crash inside NVRTC, whose lazily made
// statics are destroyed at exit before this join runs), so a machine without a GPU never pays it.
void warm_up_async(int cc_major, int cc_minor);
// True once a warm-up compile has finished (successfully or not).
bool warmed_up();

namespace fault {
// The next compile() throws a compile failure without calling NVRTC.
void fail_next_compile();
bool compile_fault_armed();  // fail_next_compile() set and not yet taken
}  // namespace fault

}  // namespace loom::cuda
