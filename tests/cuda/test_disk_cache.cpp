// The disk kernel cache (docs/ARCHITECTURE.md, invariant 6): atomic private files, every corruption
// rejected and removed, keys covering all five inputs.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cuda/disk_cache.h"
#include "loom.h"

namespace dc = loom::cuda::disk_cache;
namespace fs = std::filesystem;

namespace {

// Sets an environment variable for one scope, restoring the old value after.
struct ScopedEnv {
  std::string name;
  bool had;
  std::string old;
  ScopedEnv(const char* n, const char* v) : name(n), had(std::getenv(n) != nullptr) {
    if (had) old = std::getenv(n);
    if (v)
      ::setenv(n, v, 1);
    else
      ::unsetenv(n);
  }
  ~ScopedEnv() {
    if (had)
      ::setenv(name.c_str(), old.c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

// A fresh temp root; the cache dir is a not-yet-existing subdirectory, so loom creates it.
struct TempCache {
  std::string root, dir;
  ScopedEnv env;
  TempCache()
      : root(make_root()), dir(root + "/made/by/loom"), env("LOOM_CACHE_DIR", dir.c_str()) {}
  ~TempCache() { fs::remove_all(root); }
  static std::string make_root() {
    std::string t = (fs::temp_directory_path() / "loom_cache_test_XXXXXX").string();
    REQUIRE(::mkdtemp(t.data()) != nullptr);
    return t;
  }
};

std::vector<char> payload(size_t n, int seed = 1) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = char((i * 131 + size_t(seed) * 17) & 0xff);
  return v;
}

unsigned mode_of(const std::string& p) {
  struct stat st;
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

std::vector<char> read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& p, const std::vector<char>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(b.data(), std::streamsize(b.size()));
}

const std::string kKey = dc::cache_key("src", {"-std=c++17"}, "sm_90", "13.0", "0.1");

// Stores, damages the file with `damage`, and checks load rejects and deletes it, then that a
// fresh store/load works again.
template <class Damage>
void check_rejected(Damage damage) {
  TempCache c;
  auto data = payload(1000);
  REQUIRE(dc::store(kKey, data));
  std::string path = dc::entry_path(kKey);
  std::vector<char> bytes = read_file(path);
  damage(bytes);
  write_file(path, bytes);
  CHECK_FALSE(dc::load(kKey).has_value());
  CHECK_FALSE(fs::exists(path));
  REQUIRE(dc::store(kKey, data));
  CHECK(dc::load(kKey) == data);
}

}  // namespace

TEST_CASE("disk_cache: directory from LOOM_CACHE_DIR, XDG_CACHE_HOME, HOME") {
  {
    ScopedEnv a("LOOM_CACHE_DIR", "/x/loomdir"), b("XDG_CACHE_HOME", "/x/xdg");
    CHECK(dc::cache_dir() == "/x/loomdir");
  }
  {
    ScopedEnv a("LOOM_CACHE_DIR", nullptr), b("XDG_CACHE_HOME", "/x/xdg");
    CHECK(dc::cache_dir() == "/x/xdg/loom");
  }
  {
    ScopedEnv a("LOOM_CACHE_DIR", nullptr), b("XDG_CACHE_HOME", nullptr), h("HOME", "/x/home");
    CHECK(dc::cache_dir() == "/x/home/.cache/loom");
  }
}

TEST_CASE("disk_cache: store then load round-trips with private modes") {
  TempCache c;
  CHECK(dc::enabled());
  CHECK_FALSE(dc::load(kKey).has_value());  // miss before store
  auto data = payload(4096);
  REQUIRE(dc::store(kKey, data));
  CHECK(dc::load(kKey) == data);
  CHECK(mode_of(dc::entry_path(kKey)) == 0600);
  CHECK(mode_of(c.dir) == 0700);  // every directory loom made
  CHECK(mode_of(c.root + "/made") == 0700);
  // Only the entry remains: no temp files left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(c.dir)) files += e.is_regular_file();
  CHECK(files == 1);
  // Overwriting and an empty payload both work.
  auto other = payload(10, 2);
  REQUIRE(dc::store(kKey, other));
  CHECK(dc::load(kKey) == other);
  REQUIRE(dc::store(kKey, {}));
  CHECK(dc::load(kKey) == std::vector<char>{});
}

TEST_CASE("disk_cache: a directory the user made keeps its mode") {
  TempCache c;
  fs::create_directories(c.dir);
  REQUIRE(::chmod(c.dir.c_str(), 0755) == 0);
  REQUIRE(dc::store(kKey, payload(8)));
  CHECK(mode_of(c.dir) == 0755);
}

TEST_CASE("disk_cache: corrupt entries are rejected and removed") {
  SUBCASE("flipped payload byte") {
    check_rejected([](std::vector<char>& b) { b[b.size() / 2 + 16] ^= 0x01; });
  }
  SUBCASE("truncated") {
    check_rejected([](std::vector<char>& b) { b.resize(std::max<size_t>(b.size(), 7) - 7); });
  }
  SUBCASE("truncated into the header") {
    check_rejected([](std::vector<char>& b) { b.resize(12); });
  }
  SUBCASE("empty file") {
    check_rejected([](std::vector<char>& b) { b.clear(); });
  }
  SUBCASE("wrong magic") {
    check_rejected([](std::vector<char>& b) { b[3] = 'X'; });
  }
  SUBCASE("wrong length field") {
    check_rejected([](std::vector<char>& b) { b[8] ^= 0x04; });
  }
  SUBCASE("flipped hash byte") {
    check_rejected([](std::vector<char>& b) { b[20] ^= 0x80; });
  }
  SUBCASE("appended garbage") {
    check_rejected([](std::vector<char>& b) { b.push_back('z'); });
  }
}

TEST_CASE("disk_cache: corrupt_next_cache_read rejects exactly one load") {
  TempCache c;
  auto data = payload(300);
  REQUIRE(dc::store(kKey, data));
  loom::cuda::fault::corrupt_next_cache_read();
  CHECK_FALSE(dc::load(kKey).has_value());
  CHECK_FALSE(fs::exists(dc::entry_path(kKey)));
  REQUIRE(dc::store(kKey, data));
  CHECK(dc::load(kKey) == data);
}

TEST_CASE("disk_cache: the key covers all five inputs") {
  std::string base = dc::cache_key("src", {"-a", "-b"}, "sm_90", "13.0", "0.1");
  CHECK(base.size() == 32);
  CHECK(base.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(base == dc::cache_key("src", {"-a", "-b"}, "sm_90", "13.0", "0.1"));
  CHECK(base != dc::cache_key("src ", {"-a", "-b"}, "sm_90", "13.0", "0.1"));
  CHECK(base != dc::cache_key("src", {"-a", "-c"}, "sm_90", "13.0", "0.1"));
  CHECK(base != dc::cache_key("src", {"-a-b"}, "sm_90", "13.0", "0.1"));
  CHECK(base != dc::cache_key("src", {"-b", "-a"}, "sm_90", "13.0", "0.1"));
  CHECK(base != dc::cache_key("src", {"-a", "-b"}, "sm_80", "13.0", "0.1"));
  CHECK(base != dc::cache_key("src", {"-a", "-b"}, "sm_90", "12.8", "0.1"));
  CHECK(base != dc::cache_key("src", {"-a", "-b"}, "sm_90", "13.0", "0.2"));
  // Moving bytes between fields changes the key too.
  CHECK(dc::cache_key("ab", {}, "c", "", "") != dc::cache_key("a", {}, "bc", "", ""));
}

TEST_CASE("disk_cache: disabled, bad keys and unwritable dirs are non-fatal") {
  TempCache c;
  {
    ScopedEnv off("LOOM_DISK_CACHE", "0");
    CHECK_FALSE(dc::enabled());
    CHECK_FALSE(dc::store(kKey, payload(8)));
    CHECK_FALSE(dc::load(kKey).has_value());
  }
  CHECK_FALSE(dc::store("../escape", payload(8)));
  CHECK_FALSE(dc::load("../escape").has_value());
  CHECK_FALSE(dc::store("", payload(8)));
  if (::geteuid() != 0) {  // root ignores permission bits
    fs::create_directories(c.dir);
    REQUIRE(::chmod(c.dir.c_str(), 0500) == 0);
    CHECK_FALSE(dc::store(kKey, payload(8)));
    ::chmod(c.dir.c_str(), 0700);
  }
  ScopedEnv file_as_dir("LOOM_CACHE_DIR", "/dev/null/loom");
  CHECK_FALSE(dc::store(kKey, payload(8)));
  CHECK_FALSE(dc::load(kKey).has_value());
}

TEST_CASE("gpu: after clear_kernel_cache a program loads its kernel from the disk cache") {
  if (!loom::cuda::is_available()) return;
  TempCache tc;
  loom::clear_kernel_cache();  // nothing compiled earlier in this process is reused
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.001f * float(i) - 0.37f;
  loom::Tensor x = loom::tensor<float>(v, {1000}, loom::Options(loom::Device::parse("cuda")));
  auto program = [&] { return ((x * 0.75).atan() + x).expm1().to_vector<float>(); };
  loom::reset_counters();
  auto cold = program();
  CHECK(loom::counters().cache_misses.load() >= 1);
  CHECK(loom::counters().disk_hits.load() == 0);
  loom::clear_kernel_cache();
  loom::reset_counters();
  auto warm = program();
  CHECK(loom::counters().disk_hits.load() >= 1);
  CHECK(warm == cold);
  for (size_t i = 0; i < v.size(); ++i)
    CHECK(warm[i] == doctest::Approx(std::expm1(std::atan(v[i] * 0.75) + v[i])).epsilon(1e-5));
}

TEST_CASE("gpu: gather and scatter_add run again after clear_kernel_cache") {
  if (!loom::cuda::is_available()) return;
  // The index kernels keep their entry points between launches: clearing the kernel cache must
  // not leave them pointing into an unloaded module.
  TempCache tc;
  loom::Options o(loom::Device::parse("cuda"));
  std::vector<float> v(48);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.25f * float(i) - 3.0f;
  std::vector<int64_t> ix{3, 0, 7, 7, 1, 5, 2, 0, 6, 4, 1, 3};
  loom::Tensor x = loom::tensor<float>(v, {6, 8}, o);
  loom::Tensor index =
      loom::tensor<int64_t>(ix, {6, 2}, loom::Options(loom::DType::Int64, o.device));
  auto program = [&] {
    loom::Tensor g = x.gather(1, index);
    return loom::zeros({6, 8}, o).scatter_add(1, index, g).to_vector<float>();
  };
  auto first = program();
  for (int round = 0; round < 2; ++round) {
    loom::clear_kernel_cache();
    CHECK(program() == first);
  }
  std::vector<float> want(48, 0.0f);
  for (int r = 0; r < 6; ++r)
    for (int j = 0; j < 2; ++j) {
      int64_t c = ix[size_t(r * 2 + j)];
      want[size_t(r * 8 + c)] += v[size_t(r * 8 + c)];
    }
  CHECK(first == want);
}
