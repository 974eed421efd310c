// Entry format: "LOOMKC1\0" | payload length (u64 LE) | payload hash (Hash128, hi then lo, LE) |
// payload. No fsync: after a crash a torn or empty entry fails the length/hash check and is
// recompiled, which is all the durability a cache needs.
#include "cuda/disk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#include "cuda/hash.h"
#include "tensor/env.h"
#include "tensor/knobs.h"

namespace loom::cuda {
namespace {

constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'K', 'C', '1', '\0'};
constexpr size_t kHeader = 32;
constexpr uint64_t kMaxEntry = uint64_t(1) << 30;  // refuse absurd sizes before allocating

std::atomic<bool> g_corrupt_next_read{false};

void log_failure(const std::string& what) {
  if (knob_str(Knob::Log).find("cache") != std::string::npos)
    std::fprintf(stderr, "loom: disk cache: %s\n", what.c_str());
}

// Keys name files: allow only characters that cannot escape the directory.
bool valid_key(const std::string& key) {
  if (key.empty() || key.size() > 128) return false;
  for (char c : key)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

void put_u64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// mkdir -p; only directories made here get mode 0700 (chmod after mkdir, so the umask cannot
// widen or narrow it). Existing directories are left exactly as the user made them.
bool make_dirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), 0700) == 0) {
      ::chmod(part.c_str(), 0700);
    } else if (errno != EEXIST) {
      log_failure("mkdir " + part + ": " + std::strerror(errno));
      return false;
    }
  }
  struct stat st;
  return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Cached code runs on the GPU: trust only a directory that belongs to this user.
bool dir_is_ours(const std::string& dir) {
  struct stat st;
  return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid();
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

std::string temp_name(const std::string& dir, const std::string& key) {
  static std::atomic<uint64_t> counter{0};
  uint64_t salt = Hasher()
                      .u64(uint64_t(::getpid()))
                      .u64(std::hash<std::thread::id>()(std::this_thread::get_id()))
                      .u64(counter++)
                      .u64(uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()))
                      .finish()
                      .lo;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(salt));
  return dir + "/." + key + ".tmp." + buf;
}

// Verifies a whole entry file and returns its payload.
std::optional<std::vector<char>> parse(const std::vector<char>& file) {
  if (file.size() < kHeader || std::memcmp(file.data(), kMagic, 8) != 0) return std::nullopt;
  uint64_t len = get_u64(file.data() + 8);
  if (len != file.size() - kHeader) return std::nullopt;
  Hash128 want{get_u64(file.data() + 16), get_u64(file.data() + 24)};
  if (!(hash128(file.data() + kHeader, len) == want)) return std::nullopt;
  return std::vector<char>(file.begin() + kHeader, file.end());
}

}  // namespace

namespace disk_cache {

std::string cache_dir() {
  if (std::string d = knob_str(Knob::CacheDir); !d.empty()) return d;
  if (std::string x = env_str("XDG_CACHE_HOME"); !x.empty()) return x + "/loom";
  if (std::string h = env_str("HOME"); !h.empty()) return h + "/.cache/loom";
  return "";
}

bool enabled() { return knob_flag(Knob::DiskCache) && !cache_dir().empty(); }

std::string cache_key(const std::string& source, const std::vector<std::string>& options,
                      const std::string& arch, const std::string& nvrtc_version,
                      const std::string& loom_version) {
  Hasher h;
  h.field("loom-kernel-cache-v1").field(source).u64(options.size());
  for (const auto& o : options) h.field(o);
  h.field(arch).field(nvrtc_version).field(loom_version);
  return h.finish().hex();
}

std::string entry_path(const std::string& key) { return cache_dir() + "/" + key + ".cubin"; }

std::optional<std::vector<char>> load(const std::string& key) {
  if (!enabled() || !valid_key(key) || !dir_is_ours(cache_dir())) return std::nullopt;
  std::string path = entry_path(key);
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP) ::unlink(path.c_str());  // a symlink where an entry belongs: reject it
    return std::nullopt;
  }
  std::vector<char> file;
  struct stat st;
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
            uint64_t(st.st_size) <= kMaxEntry;
  if (ok) {
    file.resize(size_t(st.st_size));
    size_t got = 0;
    while (got < file.size()) {
      ssize_t r = ::read(fd, file.data() + got, file.size() - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += size_t(r);
    }
    ok = got == file.size();
  }
  ::close(fd);
  if (ok && !file.empty() && g_corrupt_next_read.exchange(false)) file.back() ^= 0x5a;
  std::optional<std::vector<char>> payload;
  if (ok) payload = parse(file);
  if (!payload) {
    log_failure("rejected bad entry " + path);
    ::unlink(path.c_str());
  }
  return payload;
}

bool store(const std::string& key, const std::vector<char>& bytes) {
  if (!enabled() || !valid_key(key) || bytes.size() > kMaxEntry - kHeader) return false;
  std::string dir = cache_dir();
  if (!make_dirs(dir) || !dir_is_ours(dir)) {
    log_failure("unusable directory " + dir);
    return false;
  }
  char header[kHeader];
  std::memcpy(header, kMagic, 8);
  put_u64(header + 8, bytes.size());
  Hash128 h = hash128(bytes.data(), bytes.size());
  put_u64(header + 16, h.hi);
  put_u64(header + 24, h.lo);

  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 4 && fd < 0; ++attempt) {
    tmp = temp_name(dir, key);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    log_failure("cannot create " + tmp + ": " + std::strerror(errno));
    return false;
  }
  bool ok = write_all(fd, header, kHeader) && write_all(fd, bytes.data(), bytes.size());
  ok = (::close(fd) == 0) && ok;
  // rename() replaces any old entry atomically: readers see the old file or the new, never a mix.
  if (!ok || ::rename(tmp.c_str(), entry_path(key).c_str()) != 0) {
    log_failure("cannot write " + entry_path(key) + ": " + std::strerror(errno));
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace disk_cache

namespace fault {
void corrupt_next_cache_read() { g_corrupt_next_read = true; }
}  // namespace fault

}  // namespace loom::cuda
