#pragma once
// Checkpoints in the safetensors format: an 8-byte little-endian header length N, N bytes of
// JSON naming each tensor's dtype, shape and byte range (plus an optional "__metadata__" object
// of strings), then the tensors' bytes, row-major and little-endian. Files written here are read
// by the `safetensors` package and torch, and files they write are read here.
#include <map>
#include <string>

#include "ops/tensor.h"

namespace loom {

// Writes `tensors` to `path`. Syncs them and writes each one's values contiguously from host
// memory, whatever its device, strides or offset; two tensors sharing memory are written as two
// copies (the format has no aliasing). The file is written beside `path` under a temporary name
// and renamed over it, so `path` holds either its old contents or the whole new checkpoint.
// Raises loom::Error naming the file for a name "__metadata__", an undefined tensor, names or
// metadata that are not UTF-8, or a failed write (nothing is left behind then).
void save_file(const std::map<std::string, Tensor>& tensors, const std::string& path,
               const std::map<std::string, std::string>& metadata = {});

struct Checkpoint {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;  // the header's "__metadata__"
};

// Reads a safetensors file into ready tensors on `device`. Every check runs before any tensor is
// read, and a file that fails one raises loom::Error naming the file and what is wrong: a missing
// or unreadable file, one too short for its header, invalid JSON, duplicate names, an unknown
// dtype, a shape whose size differs from its byte range, ranges that overlap, leave holes or run
// past the end of the file, bytes after the last tensor, metadata values that are not strings.
Checkpoint load_file_with_metadata(const std::string& path, Device device = kCPU);
std::map<std::string, Tensor> load_file(const std::string& path, Device device = kCPU);

}  // namespace loom
