#!/usr/bin/env bash
# Without a GPU: runs tests/cuda/mock/devices_check.cpp against a stand-in libcuda.so.1 with two
# devices (tests/cuda/mock/libcuda_mock.c), once with peer copies, once through the host
# (MOCK_NO_PEER=1) and once with LOOM_CUDA_PEER=0; then tests/cuda/mock/flush_calls.cpp: the
# driver calls of a memory-hit flush (one launch a kernel, one sync, nothing else); then
# tests/cuda/mock/oom_check.cpp: a flush that runs out of memory leaves only the failing work
# pending. Needs NVRTC (the CUDA backend registers only
# with it) and a built libloom.a: BUILD=build (default) after `ninja -C build loom`.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cc -shared -fPIC -O1 -o "$TMP/libcuda.so.1" tests/cuda/mock/libcuda_mock.c
c++ -std=c++20 -O1 -I. tests/cuda/mock/devices_check.cpp "$BUILD/libloom.a" -ltbb -ldl -lpthread \
  -o "$TMP/devices_check"
c++ -std=c++20 -O1 -I. tests/cuda/mock/flush_calls.cpp "$BUILD/libloom.a" -ltbb -ldl -lpthread \
  -o "$TMP/flush_calls"
c++ -std=c++20 -O1 -I. tests/cuda/mock/oom_check.cpp "$BUILD/libloom.a" -ltbb -ldl -lpthread \
  -o "$TMP/oom_check"
export LOOM_CACHE_DIR="$TMP/cache"
for env in "" "MOCK_NO_PEER=1" "LOOM_CUDA_PEER=0"; do
  echo "== mock devices ${env:-(peer copies)}"
  env LD_LIBRARY_PATH="$TMP" $env "$TMP/devices_check"
done
echo "== mock driver calls a flush"
env LD_LIBRARY_PATH="$TMP" "$TMP/flush_calls" 50
echo "== mock out of memory in a flush"
env LD_LIBRARY_PATH="$TMP" "$TMP/oom_check"
