// The CUDA backend: stream-ordered memory from the driver's pool, generated kernels (codegen ->
// memory cache -> disk cache -> NVRTC), matmul through cuBLASLt. Everything goes to the active
// stream (the stream whose trace is flushing, else the thread's current stream); memory is freed
// on the stream that allocated it after every other stream that used it has passed its use.
// One backend object per GPU ("cuda:N"), made on the device's first use: its context, default
// stream, staging buffers, split scratch, cuBLASLt handle and loaded modules. Registers itself
// only when a driver, a GPU and NVRTC are present, so a machine without them builds, tests and
// runs loom on the CPU (docs/ARCHITECTURE.md, invariants).
#include "tensor/backend.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "cuda/block_cache.h"
#include "cuda/codegen.h"
#include "cuda/cublaslt.h"
#include "cuda/disk_cache.h"
#include "cuda/driver.h"
#include "cuda/index_kernels.h"
#include "cuda/launch.h"
#include "cuda/launch_geometry.h"
#include "cuda/launch_memo.h"
#include "cuda/nvrtc.h"
#include "cuda/staging.h"
#include "fusion/kernel_cache.h"
#include "fusion/trace.h"
#include "tensor/counters.h"
#include "tensor/knobs.h"
#include "tensor/storage.h"

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

// Cubins by cache key, kept only with more than one GPU: a kernel compiled for one device is
// loaded into another device's context of the same architecture without NVRTC or the disk.
// Used under the runtime mutex (lowering and flushing hold it).
std::unordered_map<std::string, std::shared_ptr<const std::vector<char>>>& shared_cubins() {
  static auto* m = new std::unordered_map<std::string, std::shared_ptr<const std::vector<char>>>();
  return *m;
}

CudaBackend& cuda_backend(int dev);

// One signature's kernel: the variants its launches have needed so far (vector width, threads
// per row, persistent bucket, split), each compiled on first use. The kernel cache keys by device
// kind, so one CudaKernel serves every GPU: a variant's module is loaded into the context of each
// device that runs it (the compiled cubin comes from the caches after the first device).
class CudaKernel : public Kernel {
 public:
  void prepare(CudaBackend& be, const Group& g);
  void run(const Group& g) override;
  int run_segments(const std::vector<const Group*>& gs) override;
  std::string source() const override { return source_; }

 private:
  struct Compiled {
    cuda::Generated gen;
    std::shared_ptr<Loaded> mod;
  };
  Compiled& get(CudaBackend& be, const Group& g, const cuda::Variant& v);
  // get(), where an error is a LowerError: a variant first needed at launch falls back to the
  // unfused path like a failed lowering.
  Compiled& get_lowered(CudaBackend& be, const Group& g, const cuda::Variant& v) {
    try {
      return get(be, g, v);
    } catch (const LowerError&) {
      throw;
    } catch (const Error& e) {
      throw LowerError(e.kind(), e.what());
    }
  }
  std::unordered_map<std::string, Compiled> variants_;  // by device and variant
  // The same, found without building key strings: a memory hit's launch compares a few ints
  // (a loop runs one or two variants a kernel). Pointers into variants_ stay valid.
  struct Known {
    int dev;
    cuda::Variant v;
    Compiled* c;
  };
  std::vector<Known> known_;
  // This kernel's variant and grid by the launch's sizes, strides and alignment (the Emitter
  // choose_variant builds walks every node: ~8K instructions a launch of a 100-op chain).
  cuda::LaunchMemo memo_;
  std::string source_;
  // The module with the kernel of segments (cuda::segments_source), by device and variant.
  std::unordered_map<std::string, std::shared_ptr<Loaded>> segments_;
};

// Groups a launch of the kernel of segments takes: K parameter blocks in its parameter, within
// its 32 KB.
int segments_per_launch(const cuda::Generated& gen) {
  return int(std::clamp<size_t>(24576 / gen.params.bytes(), 1, 128));
}

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(int dev) : dev_(dev), default_(cuda::default_stream(dev)) {
    const cuda::DeviceProps& p = cuda::properties(dev);
    sm_ = p.sm_count;
    cc_major_ = p.cc_major, cc_minor_ = p.cc_minor;
    arch_ = "sm_" + std::to_string(cc_major_) + std::to_string(cc_minor_);
    // NVRTC's start-up (loading its builtins, the first program) costs about as much as a
    // kernel; LOOM_NVRTC_WARMUP=1 pays it on another core while the program records its first
    // ops. Off by default: a process that exits while that compile runs can crash in NVRTC
    // (its lazily made statics are destroyed at exit before the thread can be joined).
    static std::once_flag warm;
    if (knob_flag(Knob::NvrtcWarmup))
      std::call_once(warm, [&] { cuda::warm_up_async(cc_major_, cc_minor_); });
    cuda::CompileFn compile = [this](const std::string& src,
                                     const std::vector<std::string>& entries,
                                     const std::string& tag) {
      std::shared_ptr<Loaded> m = load(src, entries, tag);
      return cuda::Functions(m, &m->fns);  // shares the module's ownership
    };
    matmul_ = std::make_unique<cuda::Matmul>(dev, default_, compile);
    index_ = std::make_unique<cuda::IndexKernels>(dev, compile);
  }

  // The driver stream behind a runtime stream (id 0: the device's default stream).
  cuda::Stream resolve(const StreamRef& r) const {
    if (r.id == 0) return r.device.index == dev_ ? default_ : cuda::default_stream(r.device.index);
    return cuda::Stream{r.device.index, r.id, r.native};
  }
  cuda::Stream active() const { return resolve(active_stream(Device{DeviceKind::CUDA, dev_})); }

  void* alloc(size_t bytes) override {
    cuda::Stream s = active();
    if (!cuda::fault::alloc_would_fail(bytes))
      if (uint64_t p = blocks_.take(s.id, bytes)) return reinterpret_cast<void*>(uintptr_t(p));
    try {
      return reinterpret_cast<void*>(uintptr_t(cuda::alloc(bytes, s)));
    } catch (const Error& e) {
      // Out of memory with blocks kept: give them back to the pool (cuda::alloc trims it on
      // its retry) and try once more.
      if (e.kind() != ErrorKind::Memory || blocks_.held_bytes() == 0) throw;
      drain_blocks();
      return reinterpret_cast<void*>(uintptr_t(cuda::alloc(bytes, s)));
    }
  }
  void free(void* p, size_t) override { cuda::free(cuda::DevicePtr(uintptr_t(p)), active()); }
  void release(Memory& m) override {
    // Runs in destructors: a driver error here (the process is exiting) must not terminate.
    try {
      cuda::Stream owner = resolve(m.stream);
      if (m.deleter) {
        // Foreign memory: its owner may reuse it at once, so every stream that used it (the
        // default one included) must have finished.
        cuda::stream_sync(owner);
        for (auto& u : m.users) cuda::stream_sync(resolve(u));
        m.deleter();
        return;
      }
      for (auto& u : m.users) cuda::stream_wait_stream(owner, resolve(u));
      // Kept for the owner stream's next allocation of this size (cuda/block_cache.h): work on
      // `owner` submitted from now on runs after every use of the block.
      if (blocks_.put(owner.id, m.bytes, uint64_t(uintptr_t(m.ptr)))) return;
      cuda::free(cuda::DevicePtr(uintptr_t(m.ptr)), owner);
    } catch (const Error& e) {
      if (log_fusion()) std::cerr << "[loom] cuda free failed: " << e.what() << "\n";
    }
  }
  void stream_wait(const StreamRef& waiter, const StreamRef& producer) override {
    cuda::stream_wait_stream(resolve(waiter), resolve(producer));
  }
  void synchronize_stream(const StreamRef& s) override { cuda::stream_sync(resolve(s)); }
  void stream_retired(const StreamRef& s) override {
    // The stream is idle (synchronized): its kept blocks go back to the pool on the default one.
    blocks_.drain([&](uint64_t, uint64_t p) { cuda::free(p, default_); }, false, s.id);
    auto it = scratch_.find(s.id);
    if (it != scratch_.end()) {
      cuda::free(it->second.data, default_);  // the stream is idle: it was synchronized
      cuda::free(it->second.counters, default_);
      scratch_.erase(it);
    }
    matmul_->retire(s.id, default_);
  }
  // Through pinned staging buffers (cuda/staging.h); small copies go directly.
  void copy_from_host(void* dst, const void* src, size_t n) override {
    staging_.to_device(cuda::DevicePtr(uintptr_t(dst)), src, n, active());
  }
  void copy_to_host(void* dst, const void* src, size_t n) override {
    staging_.to_host(dst, cuda::DevicePtr(uintptr_t(src)), n, active());
  }
  void mark_written(Storage& st) override {
    st.written = std::make_shared<cuda::Event>(cuda::record_event(active()));
  }
  // After the event alone, on a stream of its own: the active stream still runs the flush's
  // later work (a step's backward and update after the loss the host reads).
  void copy_to_host_of(const Storage& st, void* dst, const void* src, size_t n) override {
    const auto* ev = static_cast<const cuda::Event*>(st.written.get());
    if (!ev) return copy_to_host(dst, src, n);
    cuda::event_sync(*ev);
    if (!reader_.handle) reader_ = cuda::create_stream(dev_);
    staging_.to_host(dst, cuda::DevicePtr(uintptr_t(src)), n, reader_);
  }
  void copy_within(void* dst, const void* src, size_t n) override {
    cuda::copy_d2d(cuda::DevicePtr(uintptr_t(dst)), cuda::DevicePtr(uintptr_t(src)), n, active());
  }
  bool copy_to_device(Device to, void* dst, const void* src, size_t n) override;
  std::unique_ptr<Kernel> lower(const Group& g) override {
    auto k = std::make_unique<CudaKernel>();
    k->prepare(*this, g);  // compile now: a failure falls back to unfused kernels first
    return k;
  }
  void run_opaque(const Group& g) override {
    switch (g.opaque->op) {
      case Op::Gather:
        return index_->gather(g, active());
      case Op::ScatterAdd:
        return index_->scatter_add(g, active());
      default:
        return matmul_->run(g, active());
    }
  }
  BackendCaps caps() const override {
    BackendCaps c;
    c.gather = true;
    c.gather_rank = cuda::kIndexMaxRank;
    c.cheap_index = true;
    static const bool row_gather = knob_flag(Knob::CudaRowGather);
    c.row_gather = row_gather;
    c.segments = true;
    c.prelower = true;
    static const bool gemm_copy = knob_flag(Knob::CudaGemmCopy);
    c.gemm_one_batch_stride = gemm_copy;
    // A bf16 GELU backward inside its bias gradient's column sum ran at 154 us on the H100
    // ([16384, 1536]), where its pointwise kernel and the sum of what it wrote took 105.
    c.column_bodies = false;
    // Column sums in the row kernel (cuda/codegen_colsum.cpp) where a row's lanes hold them in
    // registers: a longer row adds each element into memory, which costs what it saves.
    c.column_sums = true;
    c.column_sum_cols = 8192;
    return c;
  }
  void synchronize() override { cuda::device_sync(dev_); }
  std::string name() const override { return "cuda"; }
  // Every device's modules (the runtime asks cuda:0 only); kernels in use hold their modules.
  void drop_compiled() override;
  size_t memory_capacity() const override { return cuda::properties(dev_).total_mem; }

  int device() const { return dev_; }
  int sm() const { return sm_; }
  // Gives every kept block back to the pool once the device is idle (rare: out of memory).
  void drain_blocks() {
    cuda::device_sync(dev_);
    blocks_.drain([&](uint64_t, uint64_t p) { cuda::free(p, default_); });
  }
  void drop_modules() {
    modules_.clear();
    ahead_.clear();
    index_->drop();
  }

  void prelower(const LowerAhead& work) override;

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
    const bool share = cuda::device_count() > 1;
    if (share) {
      auto c = shared_cubins().find(key);
      if (c != shared_cubins().end()) {
        m->module = cuda::Module(dev_, c->second->data());
        how = "another device's cubin";
      }
    }
    if (!m->module.raw()) {
      auto p = ahead_.find(key);
      if (p != ahead_.end()) {
        m->module = cuda::Module(dev_, p->second.data());
        how = "compiled ahead";
        counters().compiled_ahead++;
        if (share)
          shared_cubins()[key] = std::make_shared<const std::vector<char>>(std::move(p->second));
        ahead_.erase(p);
      }
    }
    bool disk = cuda::disk_cache::enabled();
    if (disk && !m->module.raw()) {
      if (auto bytes = cuda::disk_cache::load(key)) {
        try {
          m->module = cuda::Module(dev_, bytes->data());
          how = "disk hit";
          counters().disk_hits++;
          if (share)
            shared_cubins().emplace(key,
                                    std::make_shared<const std::vector<char>>(std::move(*bytes)));
        } catch (const Error&) {
          // A valid entry the driver rejects (another driver's cubin): rebuild it below.
        }
      }
    }
    if (!m->module.raw()) {
      cuda::CompileResult r = cuda::compile(source, "loom_" + tag, cc_major_, cc_minor_);
      if (disk) cuda::disk_cache::store(key, r.cubin);
      m->module = cuda::Module(dev_, r.cubin.data());
      if (share)
        shared_cubins()[key] = std::make_shared<const std::vector<char>>(std::move(r.cubin));
    }
    for (const std::string& e : entries) m->fns.push_back(cuda::get_function(m->module, e.c_str()));
    if (log_fusion())
      std::cerr << "[loom] cuda " << tag << ": " << how << " " << ms_since(t0) << " ms\n";
    modules_.emplace(key, m);
    return m;
  }

  // Scratch for split launches on stream `s` (each stream has its own, so launches on two
  // streams never share it); grows, never shrinks. Counters start at zero and every launch
  // leaves them at zero (the last block of each row block resets its own).
  void scratch(const cuda::SplitScratch& need, const cuda::Stream& s, uint64_t out[3]) {
    Scratch& sc = scratch_[s.id];
    size_t data = need.partial_bytes + need.final_bytes;
    if (data > sc.data_bytes) {
      if (sc.data) cuda::free(sc.data, s);
      sc.data = cuda::alloc(data, s);
      sc.data_bytes = data;
    }
    if (need.counter_bytes > sc.counter_bytes) {
      if (sc.counters) cuda::free(sc.counters, s);
      sc.counters = cuda::alloc(need.counter_bytes, s);
      cuda::memset_d8(sc.counters, 0, need.counter_bytes, s);
      sc.counter_bytes = need.counter_bytes;
    }
    out[0] = sc.data, out[1] = sc.data + need.partial_bytes, out[2] = sc.counters;
  }

 private:
  struct Scratch {
    cuda::DevicePtr data = 0, counters = 0;
    size_t data_bytes = 0, counter_bytes = 0;
  };
  int dev_;
  cuda::Stream default_;
  int sm_ = 0, cc_major_ = 0, cc_minor_ = 0;
  std::string arch_;
  std::unordered_map<std::string, std::shared_ptr<Loaded>> modules_;
  // Cubins prelower() compiled, by module key, until load() takes them.
  std::unordered_map<std::string, std::vector<char>> ahead_;
  std::unique_ptr<cuda::Matmul> matmul_;
  std::unique_ptr<cuda::IndexKernels> index_;
  std::unordered_map<uint64_t, Scratch> scratch_;  // by stream id
  // Freed blocks kept per stream and size, at most LOOM_CUDA_BLOCK_CACHE bytes (tensor/knobs.h;
  // 0 frees every block to the driver's pool).
  cuda::BlockCache blocks_{size_t(knob_int(Knob::CudaBlockCache))};
  cuda::Staging staging_;
  cuda::Stream reader_;  // host reads of values marked written (copy_to_host_of)
};

CudaKernel::Compiled& CudaKernel::get(CudaBackend& be, const Group& g, const cuda::Variant& v) {
  const int dev = be.device();
  for (const Known& k : known_)
    if (k.dev == dev && k.v == v) return *k.c;
  std::string vkey = v.key();
  std::string key = std::to_string(be.device()) + "/" + vkey;
  auto it = variants_.find(key);
  if (it == variants_.end()) {
    Compiled c;
    c.gen = cuda::generate(g, v);
    c.mod = be.load(c.gen.source, c.gen.entries, vkey);
    source_ = c.gen.source;
    it = variants_.emplace(key, std::move(c)).first;
  }
  known_.push_back({dev, v, &it->second});
  return it->second;
}

// The modules a new flush will load, as prepare(), run_segments() and the index kernels will
// build them: the sources no cache holds are compiled together, a thread each up to
// LOOM_CUDA_COMPILE_THREADS (a training step's first flush loads forty modules, each one NVRTC
// compile of tens of ms, where the GPU machine has 16 cores). The disk cache is looked at
// first on the same threads; what is compiled is stored there.
void CudaBackend::prelower(const LowerAhead& work) {
  static const int threads = [] {
    long long n = knob_int(Knob::CudaCompileThreads);
    return int(n > 0 ? n : std::max(1u, std::thread::hardware_concurrency()));
  }();
  if (threads < 2 || !cuda::nvrtc_available() || cuda::fault::compile_fault_armed()) return;
  ahead_.clear();  // a flush's leftovers (none when every source came out as predicted)
  struct Job {
    std::string key, source;
    std::vector<char> cubin;
  };
  std::vector<Job> jobs;
  const std::vector<std::string> opts = cuda::compile_options(cc_major_, cc_minor_);
  auto add = [&](std::string src) {
    std::string key =
        cuda::disk_cache::cache_key(src, opts, arch_, cuda::nvrtc_version(), LOOM_VERSION);
    if (!modules_.count(key) &&
        std::none_of(jobs.begin(), jobs.end(), [&](const Job& j) { return j.key == key; }))
      jobs.push_back({std::move(key), std::move(src), {}});
  };
  std::vector<std::pair<uint64_t, cuda::Variant>> seen;  // a signature's variants generated
  for (const Group* g : work.groups) {
    try {
      const cuda::Variant v = cuda::choose_variant(*g, sm_);
      if (std::find(seen.begin(), seen.end(), std::make_pair(g->signature, v)) != seen.end())
        continue;
      seen.push_back({g->signature, v});
      add(cuda::generate(*g, v).source);
    } catch (const Error&) {
      // lower() meets the same error and falls back
    }
  }
  for (const Group* g : work.segments) {
    try {
      const cuda::Variant v = cuda::choose_variant(*g, sm_);
      if (v.reduce || v.split) continue;  // run_segments launches such groups one by one
      cuda::Generated gen = cuda::generate(*g, v);
      add(cuda::segments_source(gen, segments_per_launch(gen)));
    } catch (const Error&) {
    }
  }
  for (const Group* g : work.opaque) {
    std::string src, tag;
    std::vector<std::string> entries;
    if (index_->needs(*g, &src, &entries, &tag)) add(std::move(src));
  }
  if (jobs.size() < 2) return;
  const bool disk = cuda::disk_cache::enabled();
  std::atomic<size_t> next{0};
  auto compile = [&] {
    for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
      Job& j = jobs[i];
      try {
        if (disk && cuda::disk_cache::load(j.key)) continue;  // load() reads it in a moment
        j.cubin = cuda::compile(j.source, "loom_ahead", cc_major_, cc_minor_).cubin;
        if (disk) cuda::disk_cache::store(j.key, j.cubin);
      } catch (...) {
        j.cubin.clear();  // compiled again where it is loaded, which reports the failure
      }
    }
  };
  std::vector<std::thread> pool;
  const size_t n = std::min(jobs.size(), size_t(threads));
  try {
    for (size_t t = 1; t < n; ++t) pool.emplace_back(compile);
  } catch (const std::system_error&) {
    // Fewer threads than asked for: the ones made and this one share the jobs.
  }
  compile();
  for (auto& t : pool) t.join();
  for (Job& j : jobs)
    if (!j.cubin.empty()) ahead_.emplace(std::move(j.key), std::move(j.cubin));
}

void CudaKernel::prepare(CudaBackend& be, const Group& g) {
  get(be, g, cuda::choose_variant(g, be.sm()));
}

void CudaKernel::run(const Group& g) {
  // The device whose trace runs the group: its outputs' (every group has one, materialized).
  CudaBackend& be = cuda_backend(g.outputs.at(0).st->device.index);
  cuda::Variant v;
  cuda::LaunchConfig lc;
  const bool memo = cuda::launch_memo_enabled();
  thread_local std::vector<int64_t> key;  // (its capacity reused launch after launch)
  const cuda::LaunchMemo::Entry* known = nullptr;
  if (memo) {
    cuda::launch_key(g, be.sm(), key);
    known = memo_.find(key);
  }
  if (known) {
    v = known->v, lc = known->lc;
  } else {
    v = cuda::choose_variant(g, be.sm());
    lc = cuda::launch_config(g, v, be.sm());
    if (memo) memo_.put(key, v, lc);
  }
  // No rows: nothing to do, but a column sum over none is still written (zeros, by loom_colsum
  // over no partials).
  if (lc.empty && !cuda::has_colsums(g)) return;
  Compiled* c = &get_lowered(be, g, v);
  cuda::Stream stream = be.active();
  uint64_t scratch[3] = {0, 0, 0};
  const cuda::Generated& gen = c->gen;
  const int64_t cw = gen.colsum_cols * g.cols() + gen.colsum_ones;  // a partial row's elements
  if (v.split) be.scratch(cuda::split_scratch(g, gen, lc), stream, scratch);
  if (cw > 0) {  // a partial row a block, or a row group of a looping one
    cuda::SplitScratch need;
    need.partial_bytes = size_t(lc.grid_x) * size_t(v.rpb) * size_t(cw) * size_t(gen.colsum_bytes);
    be.scratch(need, stream, scratch);
  }
  // One parameter buffer a thread, reused by every launch (cuLaunchKernel copies the values):
  // no heap allocation a launch once it has grown.
  thread_local std::vector<char> params;
  cuda::pack_params(g, c->gen.params, lc, scratch, params);
  void* args[] = {params.data()};
  const auto& fns = c->mod->fns;
  for (size_t i = 0; i < fns.size(); ++i) {
    if (cw > 0 && i + 1 == fns.size()) {  // loom_colsum: a thread an element of the partial row
      const unsigned grid = unsigned((cw + 255) / 256);
      cuda::launch(fns[i], {grid, 1, 1}, {256, 1, 1}, 0, stream, args);
    } else if (!lc.empty) {
      cuda::launch(fns[i], {lc.grid_x, lc.grid_y, 1}, {lc.block, 1, 1}, lc.smem, stream, args);
    }
  }
  if (log_fusion())
    std::cerr << "[loom] cuda launch " << v.key() << " x" << c->mod->fns.size() << " grid ("
              << lc.grid_x << "," << lc.grid_y << ") block " << lc.block << "\n";
}

// Groups that share a pointwise variant run as one launch of the kernel of segments, up to K
// groups a launch (K parameter blocks in the launch's parameter, within its 32 KB); others (a
// variant of their own: alignment, a length below a vector) a launch each.
int CudaKernel::run_segments(const std::vector<const Group*>& gs) {
  CudaBackend& be = cuda_backend(gs.at(0)->outputs.at(0).st->device.index);
  std::vector<cuda::LaunchConfig> lcs(gs.size());
  const cuda::Variant v = cuda::choose_variant(*gs[0], be.sm());
  bool same = !v.reduce && !v.split && gs[0]->space.size() == 1;
  int64_t blocks = 0;
  for (size_t i = 0; i < gs.size() && same; ++i) {
    same = i == 0 || cuda::choose_variant(*gs[i], be.sm()) == v;
    lcs[i] = cuda::launch_config(*gs[i], v, be.sm());
    same = same && !lcs[i].empty && lcs[i].grid_y == 1 && lcs[i].smem == 0;
    blocks += lcs[i].grid_x;
  }
  if (!same || blocks >= (int64_t(1) << 31)) return Kernel::run_segments(gs);
  Compiled* c = &get_lowered(be, *gs[0], v);
  const size_t bytes = c->gen.params.bytes();
  const int K = segments_per_launch(c->gen);
  const std::string key = std::to_string(be.device()) + "/" + v.key();
  auto it = segments_.find(key);
  if (it == segments_.end()) {
    const std::string tag = v.key() + "/segments" + std::to_string(K);
    it = segments_.emplace(key, be.load(cuda::segments_source(c->gen, K), {"loom_kernel_seg"}, tag))
             .first;
  }
  const cuda::Function& f = it->second->fns.at(0);
  cuda::Stream stream = be.active();
  const uint64_t no_scratch[3] = {0, 0, 0};
  thread_local std::vector<char> one, all;
  const size_t starts = size_t(K) * bytes, count = starts + 4 * size_t(K + 1);
  int launches = 0;
  for (size_t first = 0; first < gs.size(); first += size_t(K), ++launches) {
    const size_t n = std::min(gs.size() - first, size_t(K));
    all.assign((count + 4 + 7) / 8 * 8, 0);
    uint32_t start = 0;
    for (size_t i = 0; i < n; ++i) {
      cuda::pack_params(*gs[first + i], c->gen.params, lcs[first + i], no_scratch, one);
      std::memcpy(all.data() + i * bytes, one.data(), bytes);
      std::memcpy(all.data() + starts + 4 * i, &start, 4);
      start += lcs[first + i].grid_x;
    }
    std::memcpy(all.data() + starts + 4 * n, &start, 4);
    const int32_t ns = int32_t(n);
    std::memcpy(all.data() + count, &ns, 4);
    void* args[] = {all.data()};
    cuda::launch(f, {start, 1, 1}, {lcs[first].block, 1, 1}, 0, stream, args);
    if (log_fusion())
      std::cerr << "[loom] cuda launch " << v.key() << " segments " << n << " grid " << start
                << "\n";
  }
  return launches;
}

// The backends made so far, by device (leaked: memory may be freed until process exit). Read
// without a lock on every launch; made under the mutex.
constexpr int kMaxDevices = 64;  // as many as tensor/device.cpp keeps current streams for
std::atomic<CudaBackend*> g_backends[kMaxDevices];
std::mutex g_backends_mu;

// Made on the device's first use; a device index the machine lacks throws (cuda::properties
// names the device and the count). A constructor that throws leaves the slot empty for a retry.
CudaBackend& cuda_backend(int dev) {
  if (dev >= 0 && dev < kMaxDevices)
    if (CudaBackend* b = g_backends[dev].load(std::memory_order_acquire)) return *b;
  std::lock_guard<std::mutex> lock(g_backends_mu);
  cuda::properties(dev);  // throws for an index the machine lacks
  LOOM_CHECK(dev < kMaxDevices, Index, "cuda:", dev, ": loom supports at most ", kMaxDevices,
             " CUDA devices");
  if (CudaBackend* b = g_backends[dev].load(std::memory_order_acquire)) return *b;
  auto* b = new CudaBackend(dev);
  g_backends[dev].store(b, std::memory_order_release);
  return *b;
}

// "cuda:N" past the device count: every use raises the driver's error, which names the device
// and the count. Waiting for it does nothing, so an op recorded for it before raising (a trace
// made for its stream) never makes loom::sync() fail.
class MissingDevice : public Backend {
 public:
  explicit MissingDevice(int dev) : dev_(dev) {}
  [[noreturn]] void fail() const {
    cuda::properties(dev_);  // throws the out-of-range error
    throw Error(ErrorKind::Index, "cuda:" + std::to_string(dev_) + " does not exist");
  }
  void* alloc(size_t) override { fail(); }
  void free(void*, size_t) override {}
  void copy_from_host(void*, const void*, size_t) override { fail(); }
  void copy_to_host(void*, const void*, size_t) override { fail(); }
  void copy_within(void*, const void*, size_t) override { fail(); }
  std::unique_ptr<Kernel> lower(const Group&) override { fail(); }
  void run_opaque(const Group&) override { fail(); }
  size_t memory_capacity() const override { fail(); }
  std::string name() const override { return "cuda (missing device)"; }

 private:
  int dev_;
};

Backend& backend_for(int dev) {
  if (dev >= 0 && dev < cuda::device_count()) return cuda_backend(dev);
  static std::mutex mu;
  static auto* missing = new std::unordered_map<int, std::unique_ptr<MissingDevice>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& m = (*missing)[dev];
  if (!m) m = std::make_unique<MissingDevice>(dev);
  return *m;
}

void CudaBackend::drop_compiled() {
  shared_cubins().clear();
  for (auto& slot : g_backends)
    if (CudaBackend* b = slot.load(std::memory_order_acquire)) b->drop_modules();
}

// Peer copies are on by default where the GPUs can reach each other; LOOM_CUDA_PEER=0 forces
// the copy through host memory, to compare the two.
bool peer_copies_enabled() {
  static const bool on = knob_flag(Knob::CudaPeer);
  return on;
}

// On the source device's active stream (already ordered after the producer, and a user of the
// source memory, so its free waits for the copy): first after the destination's active stream
// (which allocated `dst`), then the host waits for it. The destination's stream needs no wait
// afterwards: the copy has finished when this returns.
bool CudaBackend::copy_to_device(Device to, void* dst, const void* src, size_t n) {
  if (to.kind != DeviceKind::CUDA || to.index == dev_ || !peer_copies_enabled()) return false;
  if (!cuda::peer_access(dev_, to.index)) return false;
  cuda::Stream src_stream = active();
  cuda::Stream dst_stream = cuda_backend(to.index).active();
  cuda::stream_wait_stream(src_stream, dst_stream);
  cuda::copy_peer(cuda::DevicePtr(uintptr_t(dst)), to.index, cuda::DevicePtr(uintptr_t(src)), dev_,
                  n, src_stream);
  cuda::stream_sync(src_stream);
  return true;
}

}  // namespace

namespace {
bool init_cuda_backend() {
  if (!cuda::is_available() || !cuda::nvrtc_available()) return false;
  try {
    cuda_backend(0);  // device 0 now: a failure here reports CUDA unavailable
    set_cuda_device_count(cuda::device_count());  // cuda:N past it raises before recording
    register_backend_factory(DeviceKind::CUDA, backend_for);
    return true;
  } catch (const Error& e) {
    if (log_fusion()) std::cerr << "[loom] CUDA backend unavailable: " << e.what() << "\n";
    return false;
  }
}

}  // namespace

void loom_register_backend_cuda() { register_backend_probe(DeviceKind::CUDA, &init_cuda_backend); }

}  // namespace loom
