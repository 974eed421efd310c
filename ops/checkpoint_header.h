#pragma once
// The JSON header of a safetensors file (ops/checkpoint.h): written from a list of entries, and
// read back with every check the format implies, so the reader touches the data only once the
// header is known to describe the file exactly.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/shape.h"

namespace loom::checkpoint {

struct Entry {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  uint64_t begin = 0, end = 0;  // bytes, relative to the start of the data section
};

// The JSON text of a header for `entries` (their offsets already set) and `metadata`, padded
// with spaces to a multiple of 8 bytes so that the data section starts 8-aligned. Raises for
// text that is not UTF-8, naming `path`.
std::string write_header(const std::vector<Entry>& entries,
                         const std::map<std::string, std::string>& metadata,
                         const std::string& path);

struct Header {
  std::vector<Entry> entries;  // in the order of their offsets
  std::map<std::string, std::string> metadata;
};

// Parses and checks `text`, the header of a file whose data section holds `data_bytes` bytes:
// the entries must cover the data section exactly, each with as many bytes as its shape and dtype
// need. Raises loom::Error (Value) naming `path` and the first problem found.
Header read_header(const std::string& text, uint64_t data_bytes, const std::string& path);

// The format's dtype code ("F32", "BF16", "BOOL", ...) of a loom dtype.
const char* dtype_code(DType t);

}  // namespace loom::checkpoint
