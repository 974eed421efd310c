// Checkpoints (ops/checkpoint.h): safetensors files round trip every dtype and layout bit for
// bit, and every malformed file raises loom::Error naming it, never crashes.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "helpers.h"

namespace {

namespace fs = std::filesystem;
using loom::DType;
using loom::Tensor;

// A fresh folder for one test case, removed with everything in it at the end.
struct TempDir {
  fs::path dir;
  TempDir() {
    static int count = 0;
    dir = fs::temp_directory_path() /
          ("loom-ckpt-" + std::to_string(::getpid()) + "-" + std::to_string(count++));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() { fs::remove_all(dir); }
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

// A safetensors file from its header text and data section.
std::string file_of(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char(uint8_t(n >> (8 * i)));
  return out + header + data;
}

// A tensor's elements as bytes, row-major (a sync point).
std::string bytes_of(const Tensor& t) {
  Tensor c = t.is_contiguous() ? t : t.contiguous();
  size_t n = size_t(c.numel()) * loom::itemsize(c.dtype());
  if (n == 0) return {};
  return {static_cast<const char*>(c.data_ptr()), n};
}

// Random bytes for `n` elements of `dt` (any bit pattern: NaN payloads, subnormals, -0; bools 0
// or 1).
Tensor random_bits(const loom::Shape& shape, DType dt, uint32_t seed) {
  std::mt19937 g(seed);
  size_t n = size_t(loom::numel(shape)) * loom::itemsize(dt);
  std::vector<uint8_t> raw(n);
  for (auto& b : raw) b = uint8_t(dt == DType::Bool ? g() & 1 : g());
  return loom::from_blob(raw.data(), shape, dt);
}

void check_same(const Tensor& got, const Tensor& want) {
  CHECK(got.dtype() == want.dtype());
  CHECK(loom::shape_str(got.shape()) == loom::shape_str(want.shape()));
  CHECK(got.device() == loom::kCPU);
  CHECK_FALSE(got.is_pending());
  CHECK(bytes_of(got) == bytes_of(want));
}

// `f` raises loom::Error naming `path` and `what`.
void check_bad(const std::string& path, const std::function<void()>& f, const std::string& what) {
  LT_CHECK_ERROR(f(), path, what);
}

void check_load_bad(const std::string& path, const std::string& what) {
  check_bad(
      path, [&] { loom::load_file(path); }, what);
}

}  // namespace

TEST_CASE("checkpoint: every dtype round trips bit for bit") {
  TempDir tmp;
  std::map<std::string, Tensor> saved;
  for (int i = 0; i < loom::kNumDTypes; ++i) {
    DType dt = DType(i);
    saved[std::string("t.") + loom::dtype_name(dt)] = random_bits({3, 5}, dt, 100 + i);
  }
  std::string path = tmp / "all.safetensors";
  loom::save_file(saved, path, {{"format", "pt"}, {"note", "every dtype"}});
  loom::Checkpoint c = loom::load_file_with_metadata(path);
  REQUIRE(c.tensors.size() == saved.size());
  for (const auto& [name, t] : saved) {
    INFO(name);
    REQUIRE(c.tensors.count(name) == 1);
    check_same(c.tensors.at(name), t);
  }
  CHECK(c.metadata ==
        std::map<std::string, std::string>{{"format", "pt"}, {"note", "every dtype"}});
  CHECK(tmp.names() == std::vector<std::string>{"all.safetensors"});  // no temporary left
}

TEST_CASE("checkpoint: 0-d, empty, non-contiguous, offset and expanded tensors") {
  TempDir tmp;
  Tensor base = lt::random({4, 6}, DType::Float32, 1);
  Tensor ints = lt::random({5, 3}, DType::Int64, 2, -100, 100);
  std::map<std::string, Tensor> saved = {
      {"scalar", loom::full({}, 2.5, DType::Float64)},
      {"empty", loom::zeros({0}, DType::BFloat16)},
      {"empty_2d", loom::zeros({3, 0, 2}, DType::Int32)},
      {"transposed", base.t()},
      {"sliced", base.slice(1, 1, 5, 2)},
      {"row", base[2]},  // offset into the buffer
      {"column", ints.select(1, 1)},
      {"expanded", loom::arange(3).reshape({3, 1}).expand({3, 4})},
      {"bool_view", (base > 0).t()},
  };
  std::string path = tmp / "views.safetensors";
  loom::save_file(saved, path);
  auto loaded = loom::load_file(path);
  REQUIRE(loaded.size() == saved.size());
  for (const auto& [name, t] : saved) {
    INFO(name);
    const Tensor& got = loaded.at(name);
    check_same(got, t);
    // (loom reports a tensor with a 0-sized dim before its last as not contiguous.)
    if (got.numel() > 0) CHECK(got.is_contiguous());
    CHECK(got.offset() == 0);
  }
  CHECK(loaded.at("transposed").to_vector<float>() == base.t().to_vector<float>());
  CHECK(loaded.at("scalar").item<double>() == 2.5);
  CHECK(loaded.at("row").to_vector<float>() == base[2].to_vector<float>());
}

TEST_CASE("checkpoint: views of one buffer are saved as their own bytes") {
  TempDir tmp;
  Tensor base = lt::random({10}, DType::Float32, 3);
  Tensor a = base.slice(0, 0, 6), b = base.slice(0, 4, 10);  // overlapping
  std::string path = tmp / "shared.safetensors";
  loom::save_file({{"a", a}, {"b", b}, {"base", base}}, path);
  auto loaded = loom::load_file(path);
  check_same(loaded.at("a"), a);
  check_same(loaded.at("b"), b);
  CHECK_FALSE(loaded.at("a").same_buffer(loaded.at("b")));
  // 16 floats of data: each view's bytes stored in full, plus the base's.
  CHECK(read_bytes(path).size() % 8 == 0);
  loaded.at("a").add_(1);
  CHECK(loaded.at("b").to_vector<float>() == b.to_vector<float>());
}

TEST_CASE("checkpoint: pending tensors are synced and saved with their values") {
  TempDir tmp;
  Tensor x = lt::random({64, 33}, DType::Float32, 4);
  x.data_ptr();
  Tensor y = (x * 2 + 1).exp();
  Tensor z = x.clone();
  z.add_(3);  // an in-place write still pending
  Tensor h = y.to(DType::Float16);
  REQUIRE(y.is_pending());
  REQUIRE(z.is_pending());
  std::string path = tmp / "pending.safetensors";
  loom::save_file({{"y", y}, {"z", z}, {"h", h.t()}}, path);
  auto loaded = loom::load_file(path);
  CHECK(loaded.at("y").to_vector<float>() == y.to_vector<float>());
  CHECK(loaded.at("z").to_vector<float>() == (x + 3).to_vector<float>());
  check_same(loaded.at("h"), h.t());
}

TEST_CASE("checkpoint: a tensor that requires grad is saved as its values") {
  TempDir tmp;
  Tensor w = lt::random({4, 4}, DType::Float32, 5).requires_grad_();
  Tensor y = w * 3;
  std::string path = tmp / "grad.safetensors";
  loom::save_file({{"w", w}, {"y", y}}, path);
  auto loaded = loom::load_file(path);
  CHECK_FALSE(loaded.at("w").requires_grad());
  CHECK(loaded.at("y").to_vector<float>() == y.detach().to_vector<float>());
}

TEST_CASE("checkpoint: the file follows the format") {
  TempDir tmp;
  std::string path = tmp / "layout.safetensors";
  loom::save_file({{"b", loom::ones({3}, DType::Int8)},
                   {"a", loom::ones({2}, DType::Float64)},
                   {"c", loom::ones({5}, DType::Float16)}},
                  path, {{"k", "v"}});
  std::string bytes = read_bytes(path);
  REQUIRE(bytes.size() >= 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[size_t(i)])) << (8 * i);
  CHECK(n % 8 == 0);  // the data section starts 8-aligned
  REQUIRE(bytes.size() == 8 + n + 16 + 10 + 3);
  std::string header = bytes.substr(8, n);
  CHECK(header.front() == '{');
  // Largest itemsize first, so every tensor's bytes are aligned to its elements.
  CHECK(header.find(R"("a":{"data_offsets":[0,16],"dtype":"F64","shape":[2]})") !=
        std::string::npos);
  CHECK(header.find(R"("c":{"data_offsets":[16,26],"dtype":"F16","shape":[5]})") !=
        std::string::npos);
  CHECK(header.find(R"("b":{"data_offsets":[26,29],"dtype":"I8","shape":[3]})") !=
        std::string::npos);
  CHECK(header.find(R"("__metadata__":{"k":"v"})") != std::string::npos);
  double one = 1;
  CHECK(std::memcmp(bytes.data() + 8 + n, &one, 8) == 0);
}

TEST_CASE("checkpoint: files written elsewhere load (any order, padding, empty)") {
  TempDir tmp;
  std::string path = tmp / "foreign.safetensors";
  float f[2] = {1.5f, -2};
  int16_t s[3] = {7, -8, 9};
  std::string data(reinterpret_cast<const char*>(s), 6);
  data += std::string(reinterpret_cast<const char*>(f), 8);
  write_bytes(path, file_of(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[6,14]},)"
                            R"( "z":{"dtype":"F32","shape":[0],"data_offsets":[6,6]},)"
                            R"("__metadata__":null, "s":{"dtype":"I16","shape":[3,1],)"
                            R"("data_offsets":[0,6]}}     )",
                            data));
  auto loaded = loom::load_file(path);
  REQUIRE(loaded.size() == 3);
  CHECK(loaded.at("x").to_vector<float>() == std::vector<float>{1.5f, -2});
  CHECK(loaded.at("s").to_vector<int16_t>() == std::vector<int16_t>{7, -8, 9});
  CHECK(loaded.at("s").shape() == loom::Shape{3, 1});
  CHECK(loaded.at("z").numel() == 0);

  write_bytes(path, file_of("{}", ""));
  CHECK(loom::load_file(path).empty());
  loom::save_file({}, path);
  CHECK(loom::load_file(path).empty());

  // Bytes other than 0 and 1 are read as true, stored as 1 as loom's kernels expect.
  write_bytes(path, file_of(R"({"b":{"dtype":"BOOL","shape":[4],"data_offsets":[0,4]}})",
                            std::string("\x00\x01\x02\xff", 4)));
  Tensor b = loom::load_file(path).at("b");
  CHECK(bytes_of(b) == std::string("\x00\x01\x01\x01", 4));
  CHECK(b.sum().item<int64_t>() == 3);
}

TEST_CASE("checkpoint: malformed files raise naming the file and the problem") {
  TempDir tmp;
  std::string p = tmp / "bad.safetensors";
  auto bad = [&](const std::string& header, const std::string& data, const std::string& what) {
    INFO(header);
    write_bytes(p, file_of(header, data));
    check_load_bad(p, what);
  };
  std::string f8(8, '\x01');
  auto entry = [](const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
           ",\"data_offsets\":" + offsets + "}";
  };

  check_load_bad(tmp / "missing.safetensors", "cannot open");
  check_load_bad(tmp.dir.string(), "not a regular file");
  write_bytes(p, "\x05\0\0\0\0");
  check_load_bad(p, "fewer than the 8");
  write_bytes(p, std::string("\xe8\x03\0\0\0\0\0\0{}", 10));
  check_load_bad(p, "runs past the end");
  write_bytes(p, std::string(8, '\xff') + "{}");
  check_load_bad(p, "runs past the end");

  bad("{\"a\": ", "", "not valid JSON");
  bad("{\"a\": 1,}", "", "not valid JSON");
  bad("{\"a\xff\": 1}", "", "not valid JSON");  // not UTF-8
  bad("[1, 2]", "", "not a JSON object");
  bad("{\"a\": 3}", "", "'a' is not a JSON object");
  bad("{" + entry("a", "Q7", "[2]", "[0,8]") + "}", f8, "unknown dtype 'Q7'");
  bad("{" + entry("a", "F8_E4M3", "[8]", "[0,8]") + "}", f8, "does not support");
  bad("{\"a\":{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}}", f8, "not a string");
  bad("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", f8, "has no \"dtype\"");
  bad("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", f8, "has no \"shape\"");
  bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", f8, "has no \"data_offsets\"");
  bad("{" + entry("a", "F32", "2", "[0,8]") + "}", f8, "not a list");
  bad("{" + entry("a", "F32", "[-2]", "[0,8]") + "}", f8, "not a non-negative integer");
  bad("{" + entry("a", "F32", "[2.0]", "[0,8]") + "}", f8, "not a non-negative integer");
  bad("{" + entry("a", "F32", "[4294967296,4294967296,4]", "[0,8]") + "}", f8, "2^63");
  bad("{" + entry("a", "F32", "[2]", "[0,8,9]") + "}", f8, "[begin, end] pair");
  bad("{" + entry("a", "F32", "[2]", "[0,-8]") + "}", f8, "not a non-negative integer");
  bad("{" + entry("a", "F32", "[2]", "[8,0]") + "}", f8, "run backwards");
  bad("{" + entry("a", "F32", "[3]", "[0,8]") + "}", f8, "needs 12 bytes");
  bad("{" + entry("a", "F64", "[2]", "[0,8]") + "}", f8, "needs 16 bytes");
  bad("{" + entry("a", "F32", "[2]", "[0,8]") + "," + entry("b", "F32", "[2]", "[4,12]") + "}",
      std::string(12, 'x'), "overlap");
  bad("{" + entry("a", "F32", "[1]", "[0,4]") + "," + entry("b", "F32", "[1]", "[8,12]") + "}",
      std::string(12, 'x'), "belong to no tensor");
  bad("{" + entry("a", "F32", "[1]", "[4,8]") + "}", f8, "bytes [0, 4)");
  bad("{" + entry("a", "F32", "[2]", "[0,8]") + "}", "abcd", "ends at byte 8");
  bad("{" + entry("a", "F32", "[2]", "[0,8]") + "}", f8 + "zz", "2 bytes after the last tensor");
  bad("{" + entry("a", "F32", "[2]", "[0,8]") + "," + entry("a", "F32", "[2]", "[0,8]") + "}", f8,
      "names tensor 'a' twice");
  bad("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,8]}}", f8,
      "repeats the key 'dtype'");
  bad("{" + entry("a", "F32", "[2]", "[0,8]") + ",\"__metadata__\":{\"k\":1}}", f8,
      "value of 'k' is not a string");
  bad("{" + entry("a", "F32", "[2]", "[0,8]") + ",\"__metadata__\":[\"k\"]}", f8,
      "__metadata__ is not a JSON object");
  bad("{\"__metadata__\":{\"k\":\"v\"},\"__metadata__\":{}}", "", "names tensor '__metadata__'");
}

TEST_CASE("checkpoint: a file cut at any byte raises, never crashes") {
  TempDir tmp;
  std::string good = tmp / "good.safetensors", cut = tmp / "cut.safetensors";
  loom::save_file({{"w", lt::random({7, 5}, DType::Float32, 6)},
                   {"b", lt::random({3}, DType::BFloat16, 7)},
                   {"i", lt::random({4}, DType::Int64, 8, -9, 9)},
                   {"m", lt::random({6}, DType::Bool, 9)},
                   {"e", loom::zeros({0}, DType::Float16)}},
                  good, {{"epoch", "3"}});
  std::string bytes = read_bytes(good);
  REQUIRE(bytes.size() > 300);
  int raised = 0;
  for (size_t n = 0; n < bytes.size(); ++n) {
    write_bytes(cut, bytes.substr(0, n));
    try {
      loom::load_file(cut);
      FAIL_CHECK("a file cut to " << n << " of " << bytes.size() << " bytes loaded");
    } catch (const loom::Error& e) {
      ++raised;
      if (std::string(e.what()).find(cut) == std::string::npos)
        FAIL_CHECK("the error at " << n << " bytes does not name the file: " << e.what());
    }
  }
  CHECK(raised == int(bytes.size()));
  CHECK(loom::load_file(good).size() == 5);
}

TEST_CASE("checkpoint: any one byte changed loads or raises loom::Error, never crashes") {
  TempDir tmp;
  std::string good = tmp / "good.safetensors", bad = tmp / "bad.safetensors";
  loom::save_file({{"w", lt::random({2, 3}, DType::Float32, 10)},
                   {"i", lt::random({2}, DType::Int32, 11, -9, 9)}},
                  good, {{"k", "v"}});
  std::string bytes = read_bytes(good);
  int raised = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t flip : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xff)}) {
      std::string b = bytes;
      b[i] = char(uint8_t(b[i]) ^ flip);
      write_bytes(bad, b);
      try {
        loom::load_file(bad);
      } catch (const loom::Error& e) {
        ++raised;
        if (std::string(e.what()).find(bad) == std::string::npos)
          FAIL_CHECK("the error at byte " << i << " does not name the file: " << e.what());
      }
    }
  }
  // The length and most header bytes matter; data bytes are values and load whatever they hold.
  CHECK(raised > int(bytes.size()));
}

TEST_CASE("checkpoint: a failed save leaves no file and keeps the old one") {
  TempDir tmp;
  Tensor x = lt::random({256}, DType::Float32, 12);
  std::string path = tmp / "ckpt.safetensors";

  LT_CHECK_ERROR(loom::save_file({{"x", x}}, tmp / "no/such/folder/c.safetensors"), "cannot create",
                 "no/such/folder/c.safetensors");
  CHECK(tmp.names().empty());

  loom::save_file({{"x", x}}, path);
  std::string before = read_bytes(path);
  LT_CHECK_ERROR(loom::save_file({{"__metadata__", x}}, path), path, "__metadata__");
  LT_CHECK_ERROR(loom::save_file({{"u", Tensor()}}, path), path, "'u' is undefined");
  LT_CHECK_ERROR(loom::save_file({{"bad\xff", x}}, path), path, "not UTF-8");
  LT_CHECK_ERROR(loom::save_file({{"x", x}}, path, {{"k", "\xfe"}}), path, "not UTF-8");
  CHECK(read_bytes(path) == before);
  CHECK(tmp.names() == std::vector<std::string>{"ckpt.safetensors"});

  // The rename fails (the name is a folder): the written temporary is removed.
  fs::create_directory(tmp / "folder");
  LT_CHECK_ERROR(loom::save_file({{"x", x}}, tmp / "folder"), "cannot rename", "folder");
  CHECK(tmp.names() == std::vector<std::string>{"ckpt.safetensors", "folder"});

  // A write that fails half-way (a file size limit: EFBIG) leaves the old file whole.
  struct rlimit old_limit;
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 512;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  bool threw = false;
  try {
    loom::save_file({{"x", x}, {"y", x * 2}}, path);
  } catch (const loom::Error& e) {
    threw = std::string(e.what()).find(path) != std::string::npos &&
            std::string(e.what()).find("cannot write") != std::string::npos;
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::signal(SIGXFSZ, old_handler);
  CHECK(threw);
  CHECK(read_bytes(path) == before);
  CHECK(tmp.names() == std::vector<std::string>{"ckpt.safetensors", "folder"});

  // A save over an existing checkpoint replaces it whole.
  loom::save_file({{"y", x * 2}}, path);
  auto loaded = loom::load_file(path);
  REQUIRE(loaded.size() == 1);
  CHECK(loaded.at("y").to_vector<float>() == (x * 2).to_vector<float>());
}

TEST_CASE("checkpoint: CUDA tensors save from and load to the device") {
  if (!loom::backend_available(loom::DeviceKind::CUDA)) return;
  TempDir tmp;
  loom::Device gpu{loom::DeviceKind::CUDA, 0};
  Tensor x = lt::random({33, 17}, DType::BFloat16, 13).to(gpu);
  std::string path = tmp / "gpu.safetensors";
  loom::save_file({{"x", x.t()}, {"y", x * 2}}, path);
  auto on_host = loom::load_file(path);
  check_same(on_host.at("x"), x.t().to(loom::kCPU));
  auto on_gpu = loom::load_file(path, gpu);
  CHECK(on_gpu.at("y").device() == gpu);
  CHECK(bytes_of(on_gpu.at("y").to(loom::kCPU)) == bytes_of((x * 2).to(loom::kCPU)));
}
