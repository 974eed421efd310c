#!/usr/bin/env bash
# Sets everything up and runs all of loom's tests: the C++ doctest suite through ctest, then
# the Python package (pip install .) and its pytest suite, then the sanitizer builds.
set -euo pipefail
cd "$(dirname "$0")/.."
# Stage times on stderr (CI's log shows where its minutes go).
t0=$SECONDS
stage() { echo "== [$((SECONDS - t0)) s] $*" >&2; }
bash scripts/deps.sh --python
source scripts/mkl_env.sh  # the CPU matmuls on MKL where deps.sh installed it
BUILD=${BUILD:-build}
# The Release tree builds the Python extension too (LOOM_BUILD_PYTHON): test_python.sh's
# pip install then builds in this tree and reuses its library objects.
stage "Release build ($BUILD)"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_BUILD_PYTHON=ON \
  ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
stage "ctest"
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)"
# The multi-device CUDA plumbing against a stand-in two-GPU driver (needs NVRTC, no GPU).
# (grep reads all of ldconfig's list: grep -q would exit at the first match, and under pipefail
# ldconfig's SIGPIPE then made the test false at random, skipping this stage.)
if ldconfig -p 2>/dev/null | grep libnvrtc >/dev/null; then
  stage "stand-in two-GPU driver"
  BUILD=$BUILD bash scripts/mock_cuda_check.sh
fi
# The Python package and its tests.
stage "Python package + pytest"
PY_BUILD_DIR=$BUILD bash scripts/test_python.sh
# The installed package works from another CMake project (find_package(loom)).
stage "find_package consumer"
cmake --install "$BUILD" --prefix "$BUILD/prefix" >/dev/null
cmake -S examples/consumer -B "$BUILD/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$PWD/$BUILD/prefix" >/dev/null
cmake --build "$BUILD/consumer" >/dev/null
"$BUILD/consumer/consumer"
# The C++ suite under ASan + UBSan and the threaded tests under TSan (any report fails).
if [ "${LOOM_SANITIZE_TESTS:-1}" != 0 ]; then
  bash scripts/sanitize.sh
fi
stage "done"
