// The safetensors header: dtype codes, writing it, and reading it with every check.
#include "ops/checkpoint_header.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "tensor/error.h"

namespace loom::checkpoint {
namespace {

using json = nlohmann::json;

struct Code {
  const char* code;
  DType dtype;
};
constexpr Code kCodes[] = {
    {"BOOL", DType::Bool},   {"U8", DType::UInt8},      {"I8", DType::Int8},
    {"I16", DType::Int16},   {"U16", DType::UInt16},    {"I32", DType::Int32},
    {"U32", DType::UInt32},  {"I64", DType::Int64},     {"U64", DType::UInt64},
    {"F16", DType::Float16}, {"BF16", DType::BFloat16}, {"F32", DType::Float32},
    {"F64", DType::Float64},
};
static_assert(sizeof kCodes / sizeof kCodes[0] == kNumDTypes, "a code for every loom dtype");

// Codes of the format that loom has no dtype for: named as such rather than as unknown.
constexpr const char* kForeignCodes[] = {"F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3",
                                         "F6_E3M2", "F4",      "C64"};

template <typename... Args>
[[noreturn]] void bad(const std::string& path, const Args&... what) {
  throw Error(ErrorKind::Value, detail::cat("load_file: '", path, "': ", what...));
}

DType dtype_from_code(const std::string& code, const std::string& name, const std::string& path) {
  for (const Code& c : kCodes)
    if (code == c.code) return c.dtype;
  for (const char* f : kForeignCodes)
    if (code == f)
      bad(path, "tensor '", name, "' has dtype ", code, ", which loom does not support");
  bad(path, "tensor '", name, "' has an unknown dtype '", code, "'");
}

// Parses `text`, refusing repeated keys in any object (nlohmann keeps the last one silently,
// which would hide a second tensor of the same name).
json parse_unique(const std::string& text, const std::string& path) {
  std::vector<std::set<std::string>> open;  // the keys seen in each object being parsed
  std::string repeated;
  bool top_level = false;
  auto watch = [&](int, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::object_start) {
      open.emplace_back();
    } else if (ev == json::parse_event_t::object_end) {
      if (!open.empty()) open.pop_back();
    } else if (ev == json::parse_event_t::key && !open.empty() && repeated.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!open.back().insert(key).second) {
        repeated = key;
        top_level = open.size() == 1;
      }
    }
    return true;
  };
  json root;
  try {
    root = json::parse(text, watch);
  } catch (const json::exception& e) {
    bad(path, "the header is not valid JSON (", e.what(), ")");
  }
  if (!repeated.empty()) {
    if (top_level) bad(path, "the header names tensor '", repeated, "' twice");
    bad(path, "the header repeats the key '", repeated, "' inside an entry");
  }
  return root;
}

const json& field(const json& entry, const char* key, const std::string& name,
                  const std::string& path) {
  auto it = entry.find(key);
  if (it == entry.end()) bad(path, "tensor '", name, "' has no \"", key, "\"");
  return *it;
}

uint64_t unsigned_value(const json& v, const char* what, const std::string& name,
                        const std::string& path) {
  if (!v.is_number_unsigned() || v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    bad(path, "tensor '", name, "' has a ", what,
        " that is not a non-negative integer: ", v.dump());
  return v.get<uint64_t>();
}

Entry read_entry(const std::string& name, const json& v, const std::string& path) {
  if (!v.is_object()) bad(path, "the entry of tensor '", name, "' is not a JSON object");
  Entry e;
  e.name = name;
  const json& dt = field(v, "dtype", name, path);
  if (!dt.is_string()) bad(path, "tensor '", name, "' has a dtype that is not a string");
  e.dtype = dtype_from_code(dt.get<std::string>(), name, path);
  const json& shape = field(v, "shape", name, path);
  if (!shape.is_array()) bad(path, "tensor '", name, "' has a shape that is not a list");
  uint64_t count = 1;
  for (const json& d : shape) {
    uint64_t n = unsigned_value(d, "dimension", name, path);
    if (__builtin_mul_overflow(count, n, &count) || count > uint64_t(INT64_MAX))
      bad(path, "tensor '", name, "' has a shape of more than 2^63 elements");
    e.shape.push_back(int64_t(n));
  }
  const json& off = field(v, "data_offsets", name, path);
  if (!off.is_array() || off.size() != 2)
    bad(path, "tensor '", name, "' has data_offsets that are not a [begin, end] pair");
  e.begin = unsigned_value(off[0], "data offset", name, path);
  e.end = unsigned_value(off[1], "data offset", name, path);
  uint64_t need;
  if (__builtin_mul_overflow(count, uint64_t(itemsize(e.dtype)), &need))
    bad(path, "tensor '", name, "' has a shape of more bytes than 2^64");
  if (e.end < e.begin)
    bad(path, "tensor '", name, "' has data_offsets [", e.begin, ", ", e.end,
        "] that run backwards");
  if (e.end - e.begin != need)
    bad(path, "tensor '", name, "' of dtype ", dt.get<std::string>(), " and shape ",
        shape_str(e.shape), " needs ", need, " bytes, but its data_offsets [", e.begin, ", ", e.end,
        "] hold ", e.end - e.begin);
  return e;
}

}  // namespace

const char* dtype_code(DType t) {
  for (const Code& c : kCodes)
    if (c.dtype == t) return c.code;
  return "?";  // unreachable: the static_assert above keeps the table complete
}

std::string write_header(const std::vector<Entry>& entries,
                         const std::map<std::string, std::string>& metadata,
                         const std::string& path) {
  json root = json::object();
  for (const Entry& e : entries) {
    json shape = json::array();
    for (int64_t d : e.shape) shape.push_back(d);
    root[e.name] = {{"dtype", dtype_code(e.dtype)},
                    {"shape", std::move(shape)},
                    {"data_offsets", {e.begin, e.end}}};
  }
  if (!metadata.empty()) root["__metadata__"] = metadata;
  std::string text;
  try {
    text = root.dump();
  } catch (const json::exception& e) {
    throw Error(ErrorKind::Value,
                detail::cat("save_file: '", path, "': a name or metadata text is not UTF-8 (",
                            e.what(), ")"));
  }
  // 8 + N a multiple of 8: every tensor's bytes then start at an address its elements align to
  // (entries come largest itemsize first), which readers that map the file rely on.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

Header read_header(const std::string& text, uint64_t data_bytes, const std::string& path) {
  json root = parse_unique(text, path);
  if (!root.is_object()) bad(path, "the header is not a JSON object");
  Header h;
  for (const auto& [name, v] : root.items()) {
    if (name != "__metadata__") {
      h.entries.push_back(read_entry(name, v, path));
      continue;
    }
    if (v.is_null()) continue;
    if (!v.is_object()) bad(path, "__metadata__ is not a JSON object");
    for (const auto& [key, value] : v.items()) {
      if (!value.is_string())
        bad(path, "__metadata__ value of '", key, "' is not a string: ", value.dump());
      h.metadata[key] = value.get<std::string>();
    }
  }
  // Sorted by range, the entries must tile [0, data_bytes): each starts where the last ended.
  std::sort(h.entries.begin(), h.entries.end(), [](const Entry& a, const Entry& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    return a.end != b.end ? a.end < b.end : a.name < b.name;
  });
  uint64_t at = 0;
  const Entry* last = nullptr;
  for (const Entry& e : h.entries) {
    if (e.begin < at)
      bad(path, "tensors '", last->name, "' and '", e.name, "' overlap (bytes [", e.begin, ", ",
          std::min(at, e.end), ") of the data section)");
    if (e.begin > at)
      bad(path, "bytes [", at, ", ", e.begin, ") of the data section belong to no tensor");
    if (e.end > data_bytes)
      bad(path, "tensor '", e.name, "' ends at byte ", e.end, " of the data section, which has ",
          data_bytes, " (a truncated file or a bad offset)");
    at = e.end;
    if (e.end > e.begin) last = &e;
  }
  if (at != data_bytes)
    bad(path, "the data section has ", data_bytes - at, " bytes after the last tensor's (byte ", at,
        " on)");
  return h;
}

}  // namespace loom::checkpoint
