// save_file / load_file: safetensors checkpoints (the header: ops/checkpoint_header.cpp).
#include "ops/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "ops/checkpoint_header.h"
#include "ops/record.h"

namespace loom {
namespace {

using checkpoint::Entry;

std::string os_error() { return std::strerror(errno); }

// A file descriptor closed on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Writes all of [p, p + n), through partial writes and interrupts.
bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, std::min(n, size_t(1) << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

// Reads all of [p, p + n) from `offset`; false on an error or an early end of file.
bool read_all(int fd, char* p, size_t n, uint64_t offset) {
  while (n > 0) {
    ssize_t r = ::pread(fd, p, std::min(n, size_t(1) << 30), off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
    offset += uint64_t(r);
  }
  return true;
}

// A name beside `path` (same folder, so the rename cannot cross file systems) that no other
// save of this process or another one uses.
std::string temp_name(const std::string& path) {
  static std::atomic<uint64_t> count{0};
  return detail::cat(path, ".tmp.", ::getpid(), ".", count.fetch_add(1));
}

// The folder holding `path`, to make its rename durable.
std::string folder_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

void save_file(const std::map<std::string, Tensor>& tensors, const std::string& path,
               const std::map<std::string, std::string>& metadata) {
  auto fail = [&](const auto&... what) {
    throw Error(ErrorKind::Runtime, detail::cat("save_file: '", path, "': ", what...));
  };
  struct Item {
    Entry entry;
    Tensor host;  // contiguous, on the host
  };
  std::vector<Item> items;
  items.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    LOOM_CHECK(name != "__metadata__", Value, "save_file: '", path,
               "': a tensor may not be named __metadata__ (the format's key for metadata)");
    LOOM_CHECK(t.defined(), Value, "save_file: '", path, "': tensor '", name, "' is undefined");
    Tensor h = t.detach();
    h = is_host(h.device()) ? h.contiguous() : h.to(kCPU);
    items.push_back({{name, h.dtype(), h.shape(), 0, 0}, h});
  }
  // Largest itemsize first: with the header padded to 8 bytes, each tensor starts aligned.
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return itemsize(a.entry.dtype) > itemsize(b.entry.dtype);
  });
  uint64_t at = 0;
  std::vector<Entry> entries;
  for (Item& it : items) {
    it.entry.begin = at;
    at += uint64_t(it.host.numel()) * itemsize(it.entry.dtype);
    it.entry.end = at;
    entries.push_back(it.entry);
  }
  std::string header = checkpoint::write_header(entries, metadata, path);
  // Run all pending work before a file exists: a failing flush leaves nothing on disk.
  std::vector<const char*> data;
  for (const Item& it : items)
    data.push_back(it.host.numel() ? static_cast<const char*>(it.host.data_ptr()) : nullptr);

  std::string tmp = temp_name(path);
  std::string why;  // the first failure's error text; empty while all went well
  auto check = [&](bool ok) {
    if (!ok && why.empty()) why = os_error();
  };
  {
    Fd f;
    f.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (f.fd < 0) fail("cannot create ", tmp, ": ", os_error());
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
    check(write_all(f.fd, reinterpret_cast<const char*>(len), 8));
    check(why.empty() && write_all(f.fd, header.data(), header.size()));
    for (size_t i = 0; why.empty() && i < items.size(); ++i)
      check(write_all(f.fd, data[i], items[i].entry.end - items[i].entry.begin));
    // On disk before the rename: after a crash the name holds the old file or the whole new one.
    check(why.empty() && ::fsync(f.fd) == 0);
    check(::close(f.fd) == 0);
    f.fd = -1;
  }
  if (!why.empty()) {
    ::unlink(tmp.c_str());
    fail("cannot write ", tmp, ": ", why);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    why = os_error();
    ::unlink(tmp.c_str());
    fail("cannot rename ", tmp, " onto it: ", why);
  }
  Fd dir;
  dir.fd = ::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir.fd >= 0) ::fsync(dir.fd);  // the rename itself durable; a folder that refuses is fine
}

Checkpoint load_file_with_metadata(const std::string& path, Device device) {
  auto fail = [&](ErrorKind kind, const auto&... what) {
    throw Error(kind, detail::cat("load_file: '", path, "': ", what...));
  };
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) fail(ErrorKind::Runtime, "cannot open: ", os_error());
  struct stat st;
  if (::fstat(f.fd, &st) != 0) fail(ErrorKind::Runtime, "cannot stat: ", os_error());
  if (!S_ISREG(st.st_mode)) fail(ErrorKind::Value, "not a regular file");
  uint64_t size = uint64_t(st.st_size);
  if (size < 8)
    fail(ErrorKind::Value, "the file has ", size, " bytes, fewer than the 8 of the header length");
  unsigned char len[8];
  if (!read_all(f.fd, reinterpret_cast<char*>(len), 8, 0))
    fail(ErrorKind::Runtime, "cannot read the header length: ", os_error());
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(len[i]) << (8 * i);
  if (n > size - 8)
    fail(ErrorKind::Value, "the header length ", n, " runs past the end of the file (", size,
         " bytes)");
  std::string text(n, '\0');
  if (!read_all(f.fd, text.data(), n, 8))
    fail(ErrorKind::Runtime, "cannot read the header: ", os_error());
  checkpoint::Header h = checkpoint::read_header(text, size - 8 - n, path);

  Checkpoint out;
  out.metadata = std::move(h.metadata);
  for (const Entry& e : h.entries) {
    size_t bytes = size_t(e.end - e.begin);
    auto storage = make_ready_storage(kCPU, bytes);
    char* dst = static_cast<char*>(storage->data());
    if (bytes && !read_all(f.fd, dst, bytes, 8 + n + e.begin))
      fail(ErrorKind::Runtime, "cannot read tensor '", e.name, "' (was the file cut short while ",
           "being read?)");
    // A bool byte other than 0 or 1 is not a value loom's kernels expect.
    if (e.dtype == DType::Bool)
      for (size_t i = 0; i < bytes; ++i) dst[i] = dst[i] != 0;
    Tensor t = make_result(storage, e.shape, e.dtype, kCPU);
    out.tensors.emplace(e.name, device == kCPU ? t : t.to(device));
  }
  return out;
}

std::map<std::string, Tensor> load_file(const std::string& path, Device device) {
  return load_file_with_metadata(path, device).tensors;
}

}  // namespace loom
