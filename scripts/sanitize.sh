#!/usr/bin/env bash
# The C++ suite under AddressSanitizer + UndefinedBehaviorSanitizer, and the threaded tests
# under ThreadSanitizer. Any sanitizer report fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# -O1 with line tables: sanitizer builds compile in about half the time of -O2 -g on CI's two cores.
FLAGS=(-DCMAKE_BUILD_TYPE= "-DCMAKE_CXX_FLAGS=-O1 -g1" -DLOOM_BUILD_BENCH=OFF -DLOOM_NATIVE=OFF)
cmake -S . -B build-asan -G Ninja "${FLAGS[@]}" -DLOOM_SANITIZE=address >/dev/null
cmake --build build-asan -j"$(nproc)" --target loom_tests
./build-asan/tests/loom_tests --test-case-exclude="*[slow]*"
export TSAN_OPTIONS=halt_on_error=1
cmake -S . -B build-tsan -G Ninja "${FLAGS[@]}" -DLOOM_SANITIZE=thread >/dev/null
cmake --build build-tsan -j"$(nproc)" --target loom_thread_tests
./build-tsan/tests/loom_thread_tests
