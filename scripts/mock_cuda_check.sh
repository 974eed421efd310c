#!/usr/bin/env bash
# Without a GPU: runs tests/cuda/mock/devices_check.cpp against a stand-in libcuda.so.1 with two
# devices (tests/cuda/mock/libcuda_mock.c), once with peer copies, once through the host
# (MOCK_NO_PEER=1) and once with LOOM_CUDA_PEER=0; then tests/cuda/mock/flush_calls.cpp: the
# driver calls of a memory-hit flush (one launch a kernel, one sync, nothing else); then
# tests/cuda/mock/oom_check.cpp: a flush that runs out of memory leaves only the failing work
# pending. Needs NVRTC (the CUDA backend registers only
# with it) and a configured build tree with tests: BUILD=build (default).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cc -shared -fPIC -O1 -o "$TMP/libcuda.so.1" tests/cuda/mock/libcuda_mock.c
cmake --build "$BUILD" --target loom_mock_devices_check loom_mock_flush_calls loom_mock_oom_check
for m in devices_check flush_calls oom_check; do cp "$BUILD/tests/loom_mock_$m" "$TMP/$m"; done
export LOOM_CACHE_DIR="$TMP/cache"
for env in "" "MOCK_NO_PEER=1" "LOOM_CUDA_PEER=0"; do
  echo "== mock devices ${env:-(peer copies)}"
  env LD_LIBRARY_PATH="$TMP" $env "$TMP/devices_check"
done
echo "== mock driver calls a flush"
env LD_LIBRARY_PATH="$TMP" "$TMP/flush_calls" 50
echo "== mock out of memory in a flush"
env LD_LIBRARY_PATH="$TMP" "$TMP/oom_check"
