#!/usr/bin/env bash
# On the GPU machine (shared/GPU.md): builds loom against the Debian packages carried in
# .device-deps/, runs the GPU differential tests (tests/cuda/test_gpu_ops.cpp), then the whole
# doctest suite, then the GPU tests again from the warm disk cache. Full logs go to $OUT (or
# ./gpu-check-out); a short table is printed last.
#   GPU_CHECK_SANITIZE=1   also run the GPU tests under compute-sanitizer (memcheck, slow);
#                          GPU_CHECK_SANITIZE_FILTER picks the test cases (default: all gpu:*)
#   GPU_CHECK_FILTER=...   doctest test-case filter for the GPU run (default "gpu:*")
#   GPU_CHECK_BUDGET=400   seconds for everything; each stage gets at most what is left
#   GPU_CHECK_SKIP_GRADS=1 skip stage 1b (the gradient checks on cuda:0)
#   GPU_CHECK_SKIP_ALL=1   skip stage 2 (the rest of the doctest suite)
#   GPU_CHECK_WARM_LIMIT=150  seconds for stage 3 (every gpu: case in one process, warm disk cache)
#   GPU_CHECK_STREAMS_SANITIZE=0  skip the racecheck + memcheck runs of the two-stream test
#   GPU_CHECK_SOAK_ITERS=N  also run the soak test on cuda:0 for N steps (a million for a soak run)
#   GPU_CHECK_FUZZ_MINUTES=M  also run the differential fuzzer, fused on cuda:0 against the CPU,
#                            for M minutes (GPU_CHECK_FUZZ_SEED, default 1)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-gpu}
FILTER=${GPU_CHECK_FILTER:-gpu:*}
T0=$(date +%s)
declare -a ROWS
row() { ROWS+=("$(printf '%-28s %-6s %5ss  %s' "$1" "$2" "$3" "$4")"); }
elapsed() { echo $(($(date +%s) - $1)); }

# Eigen, oneTBB and doctest are not installed there: unpack the carried .debs.
source scripts/gpu_env.sh
export LOOM_CACHE_DIR=$(mktemp -d /tmp/loom-cache.XXXX)
export LOOM_STRICT_WARNINGS=1

{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  nvcc --version 2>&1 | tail -1
  nproc
} | tee "$OUT/machine.txt"

t=$(date +%s)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_BUILD_BENCH=OFF \
  >"$OUT/build.log" 2>&1 && ninja -C "$BUILD" loom_tests >>"$OUT/build.log" 2>&1
rc=$?
row build "$([ $rc = 0 ] && echo ok || echo FAIL)" "$(elapsed $t)" "$OUT/build.log"
TESTS=$BUILD/tests/loom_tests
if [ $rc != 0 ]; then
  # A test file elsewhere may be broken mid-edit: build the CUDA tests alone against the library.
  grep -E "error|FAILED" "$OUT/build.log" | head -20
  t=$(date +%s)
  ninja -C "$BUILD" loom >>"$OUT/build.log" 2>&1 &&
    g++ -std=c++20 -O2 -I. ${CPATH:+-I$P/usr/include} tests/main.cpp tests/cuda/*.cpp \
      "$BUILD/libloom.a" -L$P/usr/lib/x86_64-linux-gnu -ltbb -ldl -lpthread \
      -o "$BUILD/loom_cuda_tests" >>"$OUT/build.log" 2>&1
  rc=$?
  row "build (cuda tests only)" "$([ $rc = 0 ] && echo ok || echo FAIL)" "$(elapsed $t)" ""
  if [ $rc != 0 ]; then
    tail -40 "$OUT/build.log"
    printf '%s\n' "${ROWS[@]}"
    exit 1
  fi
  TESTS=$BUILD/loom_cuda_tests
fi

BUDGET=${GPU_CHECK_BUDGET:-400}
run() {  # name, timeout, log, args...
  local name=$1 limit=$2 log=$3
  shift 3
  local left=$((BUDGET - $(elapsed $T0) - 5))
  [ $left -lt $limit ] && limit=$left
  if [ $limit -le 5 ]; then
    row "$name" skip 0 "out of time budget"
    return 1
  fi
  local t=$(date +%s)
  timeout "$limit" "$@" >"$log" 2>&1
  local rc=$?
  local summary=$(grep -E '^\[doctest\] (test cases|assertions)' "$log" | tr -s ' ' | paste -sd' ')
  row "$name" "$([ $rc = 0 ] && echo ok || echo "rc=$rc")" "$(elapsed $t)" "$summary"
  return $rc
}

# 1. The GPU differential suite from a cold cache (every kernel compiled), with the fusion log;
#    one process per test case, so a kernel fault cannot hide the other cases' results.
: >"$OUT/gpu_tests.log"
mapfile -t CASES < <("$TESTS" --list-test-cases -tc="$FILTER" | grep -v -E '^(\[doctest\]|====)')
for c in "${CASES[@]}"; do
  # doctest splits filters at commas: escape the ones in test names.
  LOOM_LOG=fusion run "${c:5:27}" 150 "$OUT/case.log" "$TESTS" -tc="${c//,/\\,}"
  cat "$OUT/case.log" >>"$OUT/gpu_tests.log"
done
rm -f "$OUT/case.log"
grep -E "ERROR|FAILED|CRASHED" -A3 "$OUT/gpu_tests.log" | grep -v "^\s*$" | head -60
compiled=$(grep -c ": compiled " "$OUT/gpu_tests.log")
ms=$(grep -oE ": compiled [0-9.]+ ms" "$OUT/gpu_tests.log" | awk '{s += $3} END {printf "%.0f", s}')
row "  kernels compiled" "-" "-" "$compiled kernels, $ms ms NVRTC + load"

# 1b. Every gradient check (tests/gradcheck.h) once more with its leaves on cuda:0: each
#     primitive's, view's, composite's and index op's backward, fused on the GPU, against the CPU's.
if [ "${GPU_CHECK_SKIP_GRADS:-0}" != 1 ]; then
  LOOM_TEST_GRAD_DEVICE=cuda run "backward rules on cuda" 240 "$OUT/grads_cuda.log" "$TESTS" \
    -tc="autograd: *,index: gradients*"
  grep -E "ERROR|FAILED" -A3 "$OUT/grads_cuda.log" | grep -v "^\s*$" | head -40
  row "  compared / stayed" "-" "-" \
    "$(grep -oE '[0-9]+ checks compared with the CPU, [0-9]+ stayed' "$OUT/grads_cuda.log")"
fi

# 2. The rest of the doctest suite (CPU tests, the codegen NVRTC tests); the CPU in-place
#    enumeration to 3 statements (its 4-statement part takes about two CPU minutes; CI runs it).
if [ "${GPU_CHECK_SKIP_ALL:-0}" != 1 ]; then
  LOOM_INPLACE_LEN=3 run "all tests (gpu:* above)" 120 "$OUT/all_tests.log" "$TESTS" -tce="$FILTER"
  grep -E "ERROR|FAILED" "$OUT/all_tests.log" | head -20
fi

# 2b. Column sums in looping rows (each element added into the row group's partial row in
#     memory): 32 lanes a row cannot hold a long row, so the launcher picks the loop kernel.
LOOM_CUDA_ROW_TPR=32 run "column sums, looping rows" 120 "$OUT/colsum_loop.log" "$TESTS" \
  -tc="gpu: norms' weight*,gpu: a cross entropy's mean*"
grep -E "ERROR|FAILED" -A3 "$OUT/colsum_loop.log" | grep -v "^\s*$" | head -20

# 3. A fresh process must find every kernel on disk.
LOOM_LOG=fusion run "gpu tests (disk cache)" "${GPU_CHECK_WARM_LIMIT:-150}" "$OUT/gpu_tests_warm.log" "$TESTS" -tc="$FILTER"
row "  disk hits / compiles" "-" "-" \
  "$(grep -c ': disk hit' "$OUT/gpu_tests_warm.log") / $(grep -c ': compiled ' "$OUT/gpu_tests_warm.log")"

if [ "${GPU_CHECK_SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  run "memcheck gpu tests" 240 "$OUT/memcheck.log" compute-sanitizer --tool memcheck \
    --error-exitcode 3 "$TESTS" -tc="${GPU_CHECK_SANITIZE_FILTER:-$FILTER}" -tce="*2^31*"
  grep -E "ERROR SUMMARY|Invalid|out of bounds" "$OUT/memcheck.log" | head -10
fi

# 4. Two streams with cross-stream dependencies under compute-sanitizer: racecheck (shared-memory
#    hazards in the kernels the streams run) and memcheck (no access out of bounds or to memory
#    freed while another stream still used it). Fewer iterations: the tools slow kernels ~10-100x.
if [ "${GPU_CHECK_STREAMS_SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  SF="gpu: streams two streams*"
  for tool in racecheck memcheck; do
    LOOM_TEST_STREAM_ITERS=12 LOOM_TEST_STREAM_ROUNDS=1 LOOM_TEST_STREAM_SLOW=256 run "$tool two streams" 150 \
      "$OUT/${tool}_streams.log" compute-sanitizer --tool $tool --error-exitcode 3 "$TESTS" -tc="$SF"
    row "  $tool summary" "-" "-" "$(grep -hE '(RACECHECK|ERROR) SUMMARY' "$OUT/${tool}_streams.log" | tail -1)"
  done
fi

# 5. Soak on the GPU: memory, cached kernels and the trace stay flat over many training-like steps.
if [ -n "${GPU_CHECK_SOAK_ITERS:-}" ]; then
  LOOM_SOAK_DEVICE=cuda LOOM_SOAK_ITERS=$GPU_CHECK_SOAK_ITERS run "soak cuda $GPU_CHECK_SOAK_ITERS steps" \
    900 "$OUT/soak.log" "$TESTS" -tc="soak:*" -s
  row "  soak" "-" "-" "$(grep -oE 'soak on .*pending nodes' "$OUT/soak.log" | head -1)"
fi

# 6. The differential fuzzer with the fused side on the GPU (compared with the CPU's results).
if [ -n "${GPU_CHECK_FUZZ_MINUTES:-}" ]; then
  ninja -C "$BUILD" loom_fuzz >>"$OUT/build.log" 2>&1
  secs=$(awk "BEGIN {print int(${GPU_CHECK_FUZZ_MINUTES} * 60 + 60)}")
  mkdir -p "$OUT/fuzz"
  run "fuzz cuda ${GPU_CHECK_FUZZ_MINUTES} min" "$secs" "$OUT/fuzz.log" "$BUILD/tests/fuzz/loom_fuzz" \
    --device cuda --seed "${GPU_CHECK_FUZZ_SEED:-1}" --minutes "$GPU_CHECK_FUZZ_MINUTES" --quiet \
    --save-dir "$OUT/fuzz"
  row "  fuzz" "-" "-" "$(grep -E 'programs' "$OUT/fuzz.log" | tail -1)"
fi

echo
echo "loom gpu_check $(date -u +%Y-%m-%d) on $(head -2 "$OUT/machine.txt" | tail -1), $(elapsed $T0)s total"
printf '%s\n' "${ROWS[@]}" | tee "$OUT/summary.txt"
