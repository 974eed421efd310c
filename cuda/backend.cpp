// The CUDA backend: stream-ordered memory from the driver's pool on the device's default stream,
// generated kernels (codegen -> memory cache -> disk cache -> NVRTC), matmul through cuBLASLt.
// Registers itself only when a driver, a GPU and NVRTC are present (DESIGN invariant 7).
#include "tensor/backend.h"

#include <chrono>
#include <iostream>
#include <memory>
#include <unordered_map>

#include "cuda/codegen.h"
#include "cuda/cublaslt.h"
#include "cuda/disk_cache.h"
#include "cuda/driver.h"
#include "cuda/launch.h"
#include "cuda/nvrtc.h"
#include "fusion/counters.h"
#include "fusion/kernel_cache.h"
#include "fusion/trace.h"

#ifndef LOOM_VERSION
#define LOOM_VERSION "dev"
#endif

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Loaded {
  cuda::Module module;
  std::vector<cuda::Function> fns;
};

class CudaBackend;

// One signature's kernel: the variants its launches have needed so far (vector width, threads
// per row, persistent bucket, split), each compiled on first use.
class CudaKernel : public Kernel {
 public:
  explicit CudaKernel(CudaBackend& be) : be_(be) {}
  void prepare(const Group& g);
  void run(const Group& g) override;
  std::string source() const override { return source_; }

 private:
  struct Compiled {
    cuda::Generated gen;
    std::shared_ptr<Loaded> mod;
  };
  Compiled& get(const Group& g, const cuda::Variant& v);
  CudaBackend& be_;
  std::unordered_map<std::string, Compiled> variants_;
  std::string source_;
};

class CudaBackend : public Backend {
 public:
  CudaBackend() : stream_(cuda::default_stream(0)) {
    const cuda::DeviceProps& p = cuda::properties(0);
    sm_ = p.sm_count;
    cc_major_ = p.cc_major, cc_minor_ = p.cc_minor;
    arch_ = "sm_" + std::to_string(cc_major_) + std::to_string(cc_minor_);
    matmul_ = std::make_unique<cuda::Matmul>(
        0, stream_,
        [this](const std::string& src, const std::vector<std::string>& entries,
               const std::string& tag) { return load(src, entries, tag)->fns; });
  }

  void* alloc(size_t bytes) override {
    return reinterpret_cast<void*>(uintptr_t(cuda::alloc(bytes, stream_)));
  }
  void free(void* p, size_t) override { cuda::free(cuda::DevicePtr(uintptr_t(p)), stream_); }
  void copy_from_host(void* dst, const void* src, size_t n) override {
    cuda::copy_h2d(cuda::DevicePtr(uintptr_t(dst)), src, n, stream_);
  }
  void copy_to_host(void* dst, const void* src, size_t n) override {
    cuda::copy_d2h(dst, cuda::DevicePtr(uintptr_t(src)), n, stream_);
  }
  void copy_within(void* dst, const void* src, size_t n) override {
    cuda::copy_d2d(cuda::DevicePtr(uintptr_t(dst)), cuda::DevicePtr(uintptr_t(src)), n, stream_);
  }
  std::unique_ptr<Kernel> lower(const Group& g) override {
    auto k = std::make_unique<CudaKernel>(*this);
    k->prepare(g);  // compile now: a failure falls back to unfused kernels before memory is touched
    return k;
  }
  void run_opaque(const Group& g) override { matmul_->run(g); }
  void synchronize() override { cuda::stream_sync(stream_); }
  std::string name() const override { return "cuda"; }
  size_t memory_capacity() const override { return cuda::properties(0).total_mem; }

  int sm() const { return sm_; }
  const cuda::Stream& stream() const { return stream_; }

  // The module for `source`: from this process's cache, the disk cache, or NVRTC.
  std::shared_ptr<Loaded> load(const std::string& source, const std::vector<std::string>& entries,
                               const std::string& tag) {
    auto t0 = Clock::now();
    std::vector<std::string> opts = cuda::compile_options(cc_major_, cc_minor_);
    std::string key =
        cuda::disk_cache::cache_key(source, opts, arch_, cuda::nvrtc_version(), LOOM_VERSION);
    auto it = modules_.find(key);
    if (it != modules_.end()) {
      if (log_fusion()) std::cerr << "[loom] cuda " << tag << ": memory hit\n";
      return it->second;
    }
    auto m = std::make_shared<Loaded>();
    const char* how = "compiled";
    bool disk = cuda::disk_cache::enabled();
    if (disk) {
      if (auto bytes = cuda::disk_cache::load(key)) {
        try {
          m->module = cuda::Module(0, bytes->data());
          how = "disk hit";
          counters().disk_hits++;
        } catch (const Error&) {
          // A valid entry the driver rejects (another driver's cubin): rebuild it below.
        }
      }
    }
    if (!m->module.raw()) {
      cuda::CompileResult r = cuda::compile(source, "loom_" + tag, cc_major_, cc_minor_);
      if (disk) cuda::disk_cache::store(key, r.cubin);
      m->module = cuda::Module(0, r.cubin.data());
    }
    for (const std::string& e : entries) m->fns.push_back(cuda::get_function(m->module, e.c_str()));
    if (log_fusion())
      std::cerr << "[loom] cuda " << tag << ": " << how << " " << ms_since(t0) << " ms\n";
    modules_.emplace(key, m);
    return m;
  }

  // Scratch for split launches; grows, never shrinks. Counters start at zero and every launch
  // leaves them at zero (the last block of each row block resets its own).
  void scratch(const cuda::SplitScratch& s, uint64_t out[3]) {
    size_t data = s.partial_bytes + s.final_bytes;
    if (data > data_bytes_) {
      if (data_) cuda::free(data_, stream_);
      data_ = cuda::alloc(data, stream_);
      data_bytes_ = data;
    }
    if (s.counter_bytes > counter_bytes_) {
      if (counters_) cuda::free(counters_, stream_);
      counters_ = cuda::alloc(s.counter_bytes, stream_);
      cuda::memset_d8(counters_, 0, s.counter_bytes, stream_);
      counter_bytes_ = s.counter_bytes;
    }
    out[0] = data_, out[1] = data_ + s.partial_bytes, out[2] = counters_;
  }

 private:
  cuda::Stream stream_;
  int sm_ = 0, cc_major_ = 0, cc_minor_ = 0;
  std::string arch_;
  std::unordered_map<std::string, std::shared_ptr<Loaded>> modules_;
  std::unique_ptr<cuda::Matmul> matmul_;
  cuda::DevicePtr data_ = 0, counters_ = 0;
  size_t data_bytes_ = 0, counter_bytes_ = 0;
};

CudaKernel::Compiled& CudaKernel::get(const Group& g, const cuda::Variant& v) {
  std::string key = v.key();
  auto it = variants_.find(key);
  if (it != variants_.end()) return it->second;
  Compiled c;
  c.gen = cuda::generate(g, v);
  c.mod = be_.load(c.gen.source, c.gen.entries, key);
  source_ = c.gen.source;
  return variants_.emplace(key, std::move(c)).first->second;
}

void CudaKernel::prepare(const Group& g) { get(g, cuda::choose_variant(g, be_.sm())); }

void CudaKernel::run(const Group& g) {
  cuda::Variant v = cuda::choose_variant(g, be_.sm());
  cuda::LaunchConfig lc = cuda::launch_config(g, v, be_.sm());
  if (lc.empty) return;
  Compiled* c;
  try {
    c = &get(g, v);
  } catch (const LowerError&) {
    throw;
  } catch (const Error& e) {  // a variant first needed now: fall back like a failed lowering
    throw LowerError(e.kind(), e.what());
  }
  uint64_t scratch[3] = {0, 0, 0};
  if (v.split) be_.scratch(cuda::split_scratch(g, c->gen, lc), scratch);
  std::vector<char> params = cuda::pack_params(g, c->gen.params, lc, scratch);
  void* args[] = {params.data()};
  for (const cuda::Function& f : c->mod->fns)
    cuda::launch(f, {lc.grid_x, lc.grid_y, 1}, {lc.block, 1, 1}, 0, be_.stream(), args);
  if (log_fusion())
    std::cerr << "[loom] cuda launch " << v.key() << " x" << c->mod->fns.size() << " grid ("
              << lc.grid_x << "," << lc.grid_y << ") block " << lc.block << "\n";
}

}  // namespace

bool init_cuda_backend() {
  if (!cuda::is_available() || !cuda::nvrtc_available()) return false;
  try {
    static CudaBackend* b = new CudaBackend();  // leaked: memory may be freed until exit
    register_backend(DeviceKind::CUDA, b);
    return true;
  } catch (const Error& e) {
    if (log_fusion()) std::cerr << "[loom] CUDA backend unavailable: " << e.what() << "\n";
    return false;
  }
}

}  // namespace loom
