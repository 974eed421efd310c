#pragma once
// On-disk cache of compiled kernels, keyed by a hash of everything the binary depends on (source,
// options, GPU arch, NVRTC and loom versions; docs/ARCHITECTURE.md, invariants). Entries are
// written atomically (temp file + rename), checked on load (magic, length, payload hash), and a bad
// entry is deleted and reported as a miss so the caller recompiles: a corrupt file is never
// executed. The cache is only an
// optimization, so write failures are not errors.
#include <optional>
#include <string>
#include <vector>

namespace loom::cuda::disk_cache {

// $LOOM_CACHE_DIR, else $XDG_CACHE_HOME/loom, else $HOME/.cache/loom ("" if none is set). Read on
// every call, so changing the environment takes effect at once.
std::string cache_dir();

// False when LOOM_DISK_CACHE=0 or no directory can be named.
bool enabled();

// 32 hex digits of a 128-bit hash over all five inputs (length-prefixed, so fields cannot blur).
std::string cache_key(const std::string& source, const std::vector<std::string>& options,
                      const std::string& arch, const std::string& nvrtc_version,
                      const std::string& loom_version);

// The payload stored under `key`, or nullopt on a miss. A file that fails any check (magic, length,
// hash, owner) is deleted. Loads only from a directory owned by the current user.
std::optional<std::vector<char>> load(const std::string& key);

// Writes `<dir>/<key>.cubin` (mode 0600) via a temp file and rename(). Creates missing directories
// with mode 0700; never changes the mode of an existing one. Returns false on any failure.
bool store(const std::string& key, const std::vector<char>& bytes);

// File path of an entry (for tests and logs).
std::string entry_path(const std::string& key);

}  // namespace loom::cuda::disk_cache

namespace loom::cuda::fault {
// The next load() that reads a file sees one byte flipped, so the entry is rejected and deleted.
void corrupt_next_cache_read();
}  // namespace loom::cuda::fault
