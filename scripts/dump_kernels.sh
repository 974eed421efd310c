#!/usr/bin/env bash
# Dumps the source of every kernel the test suite lowers, to compare two trees: the CPU tile
# programs of the CPU tests (tests/test_*.cpp, tests/cpu/test_*.cpp; a folder a test file, named
# by its path under tests/) and the CUDA C++ of the codegen corpus (tests/cuda/test_codegen*.cpp,
# NVRTC needed only to compile them), each file named by a hash of its text. A refactoring that
# changes no kernel leaves the two directories equal:
#   BUILD=build bash scripts/dump_kernels.sh /tmp/new && diff -r /tmp/old /tmp/new
# Where test files moved between the two trees, compare the sets of kernels instead:
#   diff <(cd /tmp/old && find . -type f -printf '%h %f\n' | sed 's|^./cpu/[^ ]* |cpu |' | sort -u) \
#        <(cd /tmp/new && find . -type f -printf '%h %f\n' | sed 's|^./cpu/[^ ]* |cpu |' | sort -u)
# Needs a built tree ($BUILD, default build) with loom_tests.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=$(realpath -m "${1:?usage: dump_kernels.sh OUTDIR}")
rm -rf "$OUT" && mkdir -p "$OUT/cpu" "$OUT/cuda"
TESTS=$BUILD/tests/loom_tests
# CPU: one process a file, as ctest runs them (a kernel is dumped when its signature is first
# lowered in the process); the fuzz batch and the long enumerations at a fixed small size.
# test_threads.cpp is left out: where its threads' traces flush depends on the scheduling.
for f in tests/test_*.cpp tests/cpu/test_*.cpp; do
  name=${f#tests/}
  name=${name%.cpp}
  [ "$name" = test_threads ] && continue
  mkdir -p "$OUT/cpu/$name"
  LOOM_DUMP_KERNELS=$OUT/cpu/$name LOOM_FUZZ_COUNT=400 LOOM_INPLACE_LEN=3 \
    "$TESTS" --source-file="*tests/$name.cpp" >/dev/null 2>&1 || echo "note: $f failed" >&2
done
for f in tests/cuda/test_codegen*.cpp; do
  LOOM_DUMP_KERNELS=$OUT/cuda "$TESTS" --source-file="*cuda/$(basename "$f")" >/dev/null 2>&1 ||
    echo "note: $f failed" >&2
done
echo "$(find "$OUT/cpu" -type f | wc -l) CPU tile programs, $(ls "$OUT/cuda" | wc -l) CUDA sources in $OUT"
