#!/usr/bin/env bash
# The C++ suite under AddressSanitizer + UndefinedBehaviorSanitizer, and the threaded tests
# under ThreadSanitizer. Any sanitizer report fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
t0=$SECONDS
stage() { echo "== [sanitize $((SECONDS - t0)) s] $*" >&2; }
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# The matmuls on the linked OpenBLAS: with MKL loaded, LeakSanitizer's exit-time tracer crashes
# at random (signal 11), and neither sanitizer sees inside MKL anyway. The MKL path is the
# Release suite's (scripts/test.sh).
export LOOM_CPU_BLAS=openblas
# -O1 with line tables: sanitizer builds compile in about half the time of -O2 -g on CI's two
# cores (the test files themselves at -O0: tests/CMakeLists.txt). The flags go in a named build
# type: an empty CMAKE_BUILD_TYPE becomes Release in CMakeLists.txt, whose -O3 came after the
# -O1 and made these builds -O3. NDEBUG as in every build CI has checked so far.
FLAGS=(-DCMAKE_BUILD_TYPE=Sanitize "-DCMAKE_CXX_FLAGS_SANITIZE=-O1 -g1 -DNDEBUG"
  -DLOOM_BUILD_BENCH=OFF -DLOOM_NATIVE=OFF)
stage "ASan+UBSan build"
cmake -S . -B build-asan -G Ninja "${FLAGS[@]}" -DLOOM_SANITIZE=address \
  "-DLOOM_TEST_EXCLUDE=*[slow]*" >/dev/null
cmake --build build-asan -j"$(nproc)" --target loom_tests loom_train_spirals
# One process a test file, two at a time: the suite's long files (NVRTC compiles, the fuzz
# batch) run mostly on one core each.
stage "ASan+UBSan suite"
ctest --test-dir build-asan --output-on-failure -j"$(nproc)"
export TSAN_OPTIONS=halt_on_error=1
stage "TSan build"
cmake -S . -B build-tsan -G Ninja "${FLAGS[@]}" -DLOOM_SANITIZE=thread >/dev/null
cmake --build build-tsan -j"$(nproc)" --target loom_thread_tests
stage "TSan threaded tests"
./build-tsan/tests/loom_thread_tests
stage "done"
