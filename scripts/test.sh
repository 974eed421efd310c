#!/usr/bin/env bash
# Sets everything up and runs all of loom's tests: the C++ doctest suite through ctest, then
# the Python package (pip install .) and its pytest suite, then the sanitizer builds.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)"
# The multi-device CUDA plumbing against a stand-in two-GPU driver (needs NVRTC, no GPU).
if ldconfig -p 2>/dev/null | grep -q libnvrtc; then
  BUILD=$BUILD bash scripts/mock_cuda_check.sh
fi
# The Python package and its tests.
bash scripts/test_python.sh
# The installed package works from another CMake project (find_package(loom)).
cmake --install "$BUILD" --prefix "$BUILD/prefix" >/dev/null
cmake -S examples/consumer -B "$BUILD/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$PWD/$BUILD/prefix" >/dev/null
cmake --build "$BUILD/consumer" >/dev/null
"$BUILD/consumer/consumer"
# The C++ suite under ASan + UBSan and the threaded tests under TSan (any report fails).
if [ "${LOOM_SANITIZE_TESTS:-1}" != 0 ]; then
  bash scripts/sanitize.sh
fi
