// tensor/knobs.h: the one table of LOOM_* knobs. Its rows are well formed, each type reads its
// variable by the rule of tensor/env.h (Once rows keep their first value), README.md shows the
// table as it is, and no code reads a knob around it.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "helpers.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

// Sets (nullptr: unsets) an environment variable for one scope, restoring it after.
struct ScopedEnv {
  std::string name;
  bool had;
  std::string old;
  ScopedEnv(const char* n, const char* v) : name(n), had(std::getenv(n) != nullptr) {
    if (had) old = std::getenv(n);
    set(v);
  }
  void set(const char* v) const {
    if (v)
      ::setenv(name.c_str(), v, 1);
    else
      ::unsetenv(name.c_str());
  }
  ~ScopedEnv() { set(had ? old.c_str() : nullptr); }
};

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

bool is_knob_name(const std::string& n) {
  for (const KnobInfo& k : kKnobs)
    if (n == k.name) return true;
  return false;
}

// README.md's table of the knobs, as tensor/knobs.h gives it.
std::string markdown_table() {
  std::ostringstream os;
  os << "| knob | type | default | read | what it does |\n| --- | --- | --- | --- | --- |\n";
  for (const KnobInfo& k : kKnobs)
    os << "| `" << k.name << "` | " << knob_type_name(k.type) << " | "
       << (*k.dflt ? "`" + std::string(k.dflt) + "`" : std::string("(none)")) << " | "
       << knob_read_name(k.read) << " | " << k.doc << " |\n";
  return os.str();
}

constexpr const char* kBegin =
    "<!-- knobs: written by tests/test_knobs.cpp from tensor/knobs.h -->\n";
constexpr const char* kEnd = "<!-- /knobs -->";

// The names of the string literals `"LOOM_..."` in `text` that `before` (a call such as
// "getenv(") opens, or all of them where `before` is empty.
std::vector<std::string> quoted_names(const std::string& text, const std::string& before) {
  std::vector<std::string> out;
  const std::string open = before + "\"LOOM_";
  for (size_t at = text.find(open); at != std::string::npos; at = text.find(open, at + 1)) {
    size_t b = at + open.size() - 5, e = b;
    while (e < text.size() && (std::isupper((unsigned char)text[e]) ||
                               std::isdigit((unsigned char)text[e]) || text[e] == '_'))
      ++e;
    if (e < text.size() && text[e] == '"') out.push_back(text.substr(b, e - b));
  }
  return out;
}

std::vector<fs::path> sources(const std::vector<const char*>& dirs) {
  std::vector<fs::path> out;
  for (const char* d : dirs)
    for (auto& e : fs::recursive_directory_iterator(fs::path(LOOM_SOURCE_DIR) / d)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".cpp" || ext == ".h" || ext == ".cu" || ext == ".c"))
        out.push_back(e.path());
    }
  return out;
}

std::string rel(const fs::path& p) { return fs::relative(p, LOOM_SOURCE_DIR).string(); }

}  // namespace

TEST_CASE("knobs: every row is well formed") {
  std::set<std::string> names;
  for (const KnobInfo& k : kKnobs) {
    CAPTURE(k.name);
    CHECK(std::strncmp(k.name, "LOOM_", 5) == 0);
    CHECK(names.insert(k.name).second);  // no name twice
    const std::string doc = k.doc, dflt = k.dflt;
    CHECK(!doc.empty());
    CHECK(doc.find('|') == std::string::npos);  // a cell of README's table
    CHECK(doc.find('\n') == std::string::npos);
    switch (k.type) {
      case KnobType::Flag:
        CHECK((dflt == "0" || dflt == "1" || dflt == "avx512"));
        break;
      case KnobType::Int: {
        // The whole text is the number (std::atoll would read "4k" as 4).
        size_t i = dflt[0] == '-' ? 1 : 0;
        CHECK(i < dflt.size());
        CHECK(dflt.find_first_not_of("0123456789", i) == std::string::npos);
        break;
      }
      case KnobType::Str:
        break;
    }
  }
  CHECK(int(names.size()) == kNumKnobs);
  CHECK(knob_default_int(Knob::MaxGroupNodes) == 128);
  CHECK(knob_default_int(Knob::CudaRowMinb) == -1);
  std::vector<KnobState> all = knobs();
  REQUIRE(int(all.size()) == kNumKnobs);
  for (int i = 0; i < kNumKnobs; ++i) {
    CHECK(all[size_t(i)].id == Knob(i));
    CHECK(all[size_t(i)].info == &kKnobs[i]);
  }
}

TEST_CASE("knobs: types read by the rule of tensor/env.h; Each rows at every use") {
  // LOOM_CACHE_DIR (str) and LOOM_DISK_CACHE (flag) are read at every use, LOOM_CUDA_BLOCK_CACHE
  // (int) at each device's set-up: none is kept, so each setenv shows.
  REQUIRE(knob_info(Knob::CacheDir).read == KnobRead::Each);
  REQUIRE(knob_info(Knob::DiskCache).read == KnobRead::Each);
  REQUIRE(knob_info(Knob::CudaBlockCache).read == KnobRead::Device);
  auto state = [](Knob k) { return knobs()[size_t(k)]; };
  {
    ScopedEnv e("LOOM_CACHE_DIR", "/tmp/loom knobs");
    CHECK(knob_str(Knob::CacheDir) == "/tmp/loom knobs");
    CHECK(knob_set(Knob::CacheDir));
    CHECK(state(Knob::CacheDir).value == "/tmp/loom knobs");
    for (const char* unset : {static_cast<const char*>(nullptr), ""}) {
      e.set(unset);
      CHECK(knob_str(Knob::CacheDir) == "");
      CHECK_FALSE(knob_set(Knob::CacheDir));
      CHECK_FALSE(state(Knob::CacheDir).set);
    }
  }
  {
    ScopedEnv e("LOOM_DISK_CACHE", nullptr);
    CHECK(knob_flag(Knob::DiskCache));  // default "1"
    CHECK(state(Knob::DiskCache).value == "1");
    for (const char* off : {"0", "false", "off"}) {
      e.set(off);
      CHECK_FALSE(knob_flag(Knob::DiskCache));
      CHECK(state(Knob::DiskCache).value == "0");
    }
    for (const char* on : {"1", "yes", "2", "on"}) {
      e.set(on);
      CHECK(knob_flag(Knob::DiskCache));
    }
    e.set("");
    CHECK(knob_flag(Knob::DiskCache));
  }
  {
    ScopedEnv e("LOOM_CUDA_BLOCK_CACHE", "8589934592");  // past 32 bits
    CHECK(knob_int(Knob::CudaBlockCache) == 8589934592ll);
    e.set("12abc");
    CHECK(knob_int(Knob::CudaBlockCache) == 12);  // leading digits, as std::atoll
    e.set("abc");
    CHECK(knob_int(Knob::CudaBlockCache) == 0);
    CHECK(state(Knob::CudaBlockCache).value == "0");
    e.set("-5");
    CHECK(knob_int(Knob::CudaBlockCache) == -5);
    e.set("");
    CHECK(knob_int(Knob::CudaBlockCache) == 2048ll << 20);
    CHECK(state(Knob::CudaBlockCache).value == std::to_string(2048ll << 20));
  }
}

TEST_CASE("knobs: a Once knob keeps the value of its first read") {
  REQUIRE(knob_info(Knob::Fusion).read == KnobRead::Once);
  (void)fusion_enabled();  // the fusion switch starts from LOOM_FUSION: read now
  const bool first = knob_flag(Knob::Fusion);
  const std::string shown = knobs()[size_t(Knob::Fusion)].value;
  CHECK(shown == (first ? "1" : "0"));
  ScopedEnv e("LOOM_FUSION", first ? "0" : "1");
  CHECK(knob_flag(Knob::Fusion) == first);
  CHECK(knobs()[size_t(Knob::Fusion)].value == shown);
}

// README.md holds the table between its two markers; LOOM_TEST_UPDATE_README=1 rewrites it.
TEST_CASE("knobs: README.md shows the table of tensor/knobs.h") {
  const fs::path path = fs::path(LOOM_SOURCE_DIR) / "README.md";
  std::string readme = read_file(path);
  const size_t b = readme.find(kBegin), e = readme.find(kEnd);
  REQUIRE_MESSAGE(b != std::string::npos, "README.md lacks the marker " << kBegin);
  REQUIRE_MESSAGE(e != std::string::npos, "README.md lacks the marker " << kEnd);
  REQUIRE(b < e);
  const size_t from = b + std::strlen(kBegin);
  const std::string have = readme.substr(from, e - from), want = markdown_table();
  const char* update = std::getenv("LOOM_TEST_UPDATE_README");
  if (update && std::string(update) == "1" && have != want) {
    readme.replace(from, e - from, want);
    std::ofstream(path, std::ios::binary) << readme;
    MESSAGE("README.md: knob table rewritten");
    return;
  }
  CHECK_MESSAGE(have == want,
                "README.md's knob table differs from tensor/knobs.h; rewrite it with "
                "LOOM_TEST_UPDATE_README=1 build/tests/loom_tests --test-case='knobs: README*'");
}

TEST_CASE("knobs: no code reads a LOOM_ variable around the table") {
  // The library: the environment only through tensor/env.h, LOOM_ names only in the table.
  for (const fs::path& p : sources({"tensor", "ops", "fusion", "cpu", "cuda", "bindings"})) {
    const std::string r = rel(p), text = read_file(p);
    CAPTURE(r);
    if (r != "tensor/env.h") CHECK(text.find("getenv(") == std::string::npos);
    if (r != "tensor/knobs.h") CHECK(quoted_names(text, "").empty());
  }
  // Tests and benchmarks: a library knob through the accessors (as the library reads it); their
  // own settings by name, each listed in README.md.
  const std::string readme = read_file(fs::path(LOOM_SOURCE_DIR) / "README.md");
  std::set<std::string> own;
  for (const fs::path& p : sources({"tests", "bench"})) {
    const std::string text = read_file(p);
    CAPTURE(rel(p));
    for (const char* call : {"getenv(", "env_int(", "env_flag(", "env_str("})
      for (const std::string& n : quoted_names(text, call)) {
        CAPTURE(n);
        CHECK_FALSE(is_knob_name(n));
        own.insert(n);
      }
  }
  CHECK(own.count("LOOM_FUZZ_COUNT"));  // the scan finds them
  for (const std::string& n : own) {
    CAPTURE(n);
    CHECK(readme.find("`" + n + "`") != std::string::npos);
  }
}
