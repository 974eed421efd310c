// NVRTC through dlopen/dlsym with our own declarations of the few entry points, so loom builds
// without a CUDA toolkit and runs where libnvrtc is missing (CUDA then reports unavailable).
#include "cuda/nvrtc.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

#include "cuda/driver.h"
#include "tensor/error.h"
#include "tensor/knobs.h"

namespace loom::cuda {
namespace {

using nvrtcResult = int;
using nvrtcProgram = void*;
constexpr nvrtcResult kOk = 0;

struct Nvrtc {
  const char* (*GetErrorString)(nvrtcResult);
  nvrtcResult (*Version)(int*, int*);
  nvrtcResult (*CreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                               const char* const*);
  nvrtcResult (*DestroyProgram)(nvrtcProgram*);
  nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t*);
  nvrtcResult (*GetProgramLog)(nvrtcProgram, char*);
  nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t*);
  nvrtcResult (*GetCUBIN)(nvrtcProgram, char*);
};

struct Lib {
  Nvrtc fn{};
  bool ok = false;
  std::string reason, version;
  int major = 0, minor = 0;
};

std::atomic<bool> g_fail_next_compile{false};
std::atomic<bool> g_warmed{false};  // a warm-up compile has finished

std::atomic<bool> g_strict{knob_flag(Knob::StrictWarnings)};

void* open_first(std::string& tried) {
  std::vector<std::string> names;
  if (std::string p = knob_str(Knob::NvrtcPath); !p.empty()) names.push_back(p);
  // The loader's search path first (LD_LIBRARY_PATH, ldconfig), then the toolkit found at build.
  for (const char* n : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) names.push_back(n);
#ifdef LOOM_NVRTC_DIR
  for (const char* n : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
    names.push_back(std::string(LOOM_NVRTC_DIR) + "/" + n);
#endif
  for (const std::string& n : names) {
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    tried += (tried.empty() ? "" : ", ") + n;
  }
  return nullptr;
}

Lib* open_nvrtc() {
  auto* l = new Lib();
  std::string tried;
  void* h = open_first(tried);  // never closed: compiled code may be in flight at exit
  if (!h) {
    l->reason = "libnvrtc not found (tried " + tried + ")";
    return l;
  }
  const char* missing = nullptr;
  auto sym = [&](auto& fn, const char* name) {
    void* p = dlsym(h, name);
    if (!p && !missing) missing = name;
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  Nvrtc& f = l->fn;
  sym(f.GetErrorString, "nvrtcGetErrorString");
  sym(f.Version, "nvrtcVersion");
  sym(f.CreateProgram, "nvrtcCreateProgram");
  sym(f.DestroyProgram, "nvrtcDestroyProgram");
  sym(f.CompileProgram, "nvrtcCompileProgram");
  sym(f.GetProgramLogSize, "nvrtcGetProgramLogSize");
  sym(f.GetProgramLog, "nvrtcGetProgramLog");
  sym(f.GetCUBINSize, "nvrtcGetCUBINSize");
  sym(f.GetCUBIN, "nvrtcGetCUBIN");
  if (missing) {
    l->reason = std::string("libnvrtc lacks ") + missing + " (need CUDA 11.2 or newer)";
    return l;
  }
  if (f.Version(&l->major, &l->minor) != kOk) {
    l->reason = "nvrtcVersion failed";
    return l;
  }
  l->version = std::to_string(l->major) + "." + std::to_string(l->minor);
  l->ok = true;
  return l;
}

Lib& lib() {
  static Lib* l = open_nvrtc();  // leaked on purpose, like the driver
  return *l;
}

std::string program_name(const std::string& kernel) {
  std::string s = kernel.empty() ? "kernel" : kernel;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  return s + ".cu";
}

// A diagnostic is a warning for strict mode if NVRTC's front end or ptxas says so.
bool is_warning_line(const std::string& line) {
  return line.find("warning #") != std::string::npos ||
         line.find("warning:") != std::string::npos || line.find("warning :") != std::string::npos;
}

// Line numbers of the diagnostics "<prog>(N): error ..." (and warnings when `warnings`).
std::vector<int> diagnostic_lines(const std::string& log, const std::string& prog, bool warnings) {
  std::set<int> found;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, prog.size() + 1, prog + "(") != 0) continue;
    size_t i = prog.size() + 1;
    int n = 0;
    while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i])))
      n = n * 10 + (line[i++] - '0');
    bool err = line.find("error", i) != std::string::npos;
    if (n > 0 && (err || (warnings && is_warning_line(line)))) found.insert(n);
  }
  return {found.begin(), found.end()};
}

// Numbered source lines around the first few diagnostics, '>' marking each culprit.
std::string excerpt(const std::string& source, const std::vector<int>& at) {
  std::vector<std::string> lines;
  std::istringstream in(source);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  const int n = int(lines.size());
  std::set<int> marked(at.begin(), at.begin() + std::min<size_t>(at.size(), 5));
  std::vector<bool> show(n + 2, false);
  for (int m : marked)
    for (int i = std::max(1, m - 3); i <= std::min(n, m + 3); ++i) show[i] = true;
  std::string out;
  int last = 0;
  for (int i = 1; i <= n; ++i) {
    if (!show[i]) continue;
    if (last != 0 && i != last + 1) out += "  ...\n";
    char num[32];
    std::snprintf(num, sizeof(num), "%c%5d | ", marked.count(i) ? '>' : ' ', i);
    out += num + lines[i - 1] + "\n";
    last = i;
  }
  return out;
}

[[noreturn]] void fail(const std::string& kernel, int cc_major, int cc_minor,
                       const std::string& what, const std::string& log, const std::string& source,
                       bool warnings) {
  std::string msg = detail::cat("NVRTC failed to compile kernel '", kernel, "' for sm_", cc_major,
                                cc_minor, ": ", what);
  if (!log.empty()) msg += "\n--- log ---\n" + log;
  std::vector<int> at = diagnostic_lines(log, program_name(kernel), warnings);
  if (!at.empty()) msg += "\n--- source ---\n" + excerpt(source, at);
  throw Error(ErrorKind::Runtime, msg);
}

CompileResult compile_impl(const std::string& source, const std::string& kernel, int cc_major,
                           int cc_minor, const std::vector<std::string>& extra, bool strict) {
  Lib& l = lib();
  LOOM_CHECK(l.ok, Runtime, "cannot compile kernel '", kernel, "': NVRTC unavailable: ", l.reason);
  const Nvrtc& f = l.fn;
  auto t0 = std::chrono::steady_clock::now();

  std::vector<std::string> opts = compile_options(cc_major, cc_minor, extra);
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());

  nvrtcProgram prog = nullptr;
  std::string pname = program_name(kernel);
  nvrtcResult r = f.CreateProgram(&prog, source.c_str(), pname.c_str(), 0, nullptr, nullptr);
  if (r != kOk) fail(kernel, cc_major, cc_minor, f.GetErrorString(r), "", source, false);
  struct Destroy {
    const Nvrtc& f;
    nvrtcProgram& p;
    ~Destroy() { f.DestroyProgram(&p); }
  } destroy{f, prog};

  nvrtcResult cr = f.CompileProgram(prog, int(argv.size()), argv.data());
  CompileResult out;
  size_t n = 0;
  if (f.GetProgramLogSize(prog, &n) == kOk && n > 1) {
    out.log.resize(n);
    if (f.GetProgramLog(prog, out.log.data()) != kOk) out.log.clear();
    while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n'))
      out.log.pop_back();
  }
  if (cr != kOk) fail(kernel, cc_major, cc_minor, f.GetErrorString(cr), out.log, source, false);
  if (strict) {
    std::istringstream in(out.log);
    for (std::string line; std::getline(in, line);)
      if (is_warning_line(line))
        fail(kernel, cc_major, cc_minor, "warnings are errors (strict mode)", out.log, source,
             true);
  }
  r = f.GetCUBINSize(prog, &n);
  if (r != kOk) fail(kernel, cc_major, cc_minor, f.GetErrorString(r), out.log, source, false);
  out.cubin.resize(n);
  r = f.GetCUBIN(prog, out.cubin.data());
  if (r != kOk || n == 0)
    fail(kernel, cc_major, cc_minor, r != kOk ? f.GetErrorString(r) : "empty cubin", out.log,
         source, false);
  out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace

bool nvrtc_available() { return lib().ok; }
std::string nvrtc_unavailable_reason() { return lib().ok ? "" : lib().reason; }
std::string nvrtc_version() { return lib().version; }

void set_strict_warnings(bool on) { g_strict = on; }
bool strict_warnings() { return g_strict; }

std::vector<std::string> compile_options(int cc_major, int cc_minor,
                                         const std::vector<std::string>& extra) {
  std::vector<std::string> o = {detail::cat("--gpu-architecture=sm_", cc_major, cc_minor),
                                "-std=c++17", "-default-device", "--fmad=true"};
  // --minimal (NVRTC 12.4+) drops runtime-API declarations our header-free kernels never use and
  // cuts roughly a third off a small kernel's compile time.
  const Lib& l = lib();
  if (l.ok && (l.major > 12 || (l.major == 12 && l.minor >= 4))) o.push_back("--minimal");
  o.insert(o.end(), extra.begin(), extra.end());
  return o;
}

CompileResult compile(const std::string& source, const std::string& kernel_name_for_errors,
                      int cc_major, int cc_minor, const std::vector<std::string>& extra_options) {
  if (g_fail_next_compile.exchange(false))
    fail(kernel_name_for_errors, cc_major, cc_minor, "injected by fault::fail_next_compile", "",
         source, false);
  return compile_impl(source, kernel_name_for_errors, cc_major, cc_minor, extra_options,
                      strict_warnings());
}

void warm_up(int cc_major, int cc_minor) {
  static std::once_flag once;
  std::call_once(once, [cc_major, cc_minor] {
    if (!nvrtc_available()) return;
    int major = cc_major, minor = cc_minor;
    try {
      if (major == 0) {
        major = 9, minor = 0;  // sm_90 when no GPU: every NVRTC since 11.8 knows it
        if (is_available()) {
          major = properties(0).cc_major;
          minor = properties(0).cc_minor;
        }
      }
      compile_impl("extern \"C\" __global__ void loom_warm_up(int* p) { if (p) *p = 0; }\n",
                   "loom_warm_up", major, minor, {}, false);
    } catch (const Error&) {
      // Best effort: a real compile reports any problem with full context.
    }
    g_warmed = true;
  });
}

bool warmed_up() { return g_warmed; }

void warm_up_async(int cc_major, int cc_minor) {
  // Joined at exit so the thread never runs inside NVRTC while the process tears down.
  struct Joiner {
    std::thread t;
    ~Joiner() {
      if (t.joinable()) t.join();
    }
  };
  static std::once_flag once;
  std::call_once(once, [cc_major, cc_minor] {
    if (!nvrtc_available()) return;  // opens libnvrtc here, not on the thread
    static Joiner j;
    try {
      j.t = std::thread([cc_major, cc_minor] { warm_up(cc_major, cc_minor); });
    } catch (const std::system_error&) {
      // No thread to spare: the first compile pays NVRTC's start-up as before.
    }
  });
}

namespace fault {
void fail_next_compile() { g_fail_next_compile = true; }
bool compile_fault_armed() { return g_fail_next_compile.load(); }
}  // namespace fault

}  // namespace loom::cuda
