// loom._save_file / loom._load_file: safetensors checkpoints of flat name -> tensor maps
// (ops/checkpoint.h). loom.save / loom.load (python/loom/checkpoint.py) put nested state on top.
#include <nanobind/stl/map.h>

#include "bindings/common.h"

namespace loom::py {

void init_checkpoint(nb::module_& m) {
  m.def(
      "_save_file",
      [](const std::map<std::string, Tensor>& tensors, const std::string& path,
         const std::optional<std::map<std::string, std::string>>& metadata) {
        save_file(tensors, path, metadata.value_or(std::map<std::string, std::string>{}));
      },
      "tensors"_a, "path"_a, "metadata"_a = nb::none(),
      "Writes a dict of name -> tensor to path as a safetensors file (metadata: str -> str, the "
      "header's __metadata__). Written under a temporary name, then renamed over path.");
  m.def(
      "_load_file",
      [](const std::string& path, Device device) {
        Checkpoint c = load_file_with_metadata(path, device);
        return std::make_pair(std::move(c.tensors), std::move(c.metadata));
      },
      "path"_a, "device"_a = kCPU,
      "Reads a safetensors file: (dict of name -> tensor on device, its metadata dict). A "
      "malformed file raises ValueError naming the file and the problem.");
}

}  // namespace loom::py
