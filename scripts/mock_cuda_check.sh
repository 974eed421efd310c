#!/usr/bin/env bash
# Without a GPU: runs tests/cuda/mock/devices_check.cpp against a stand-in libcuda.so.1 with two
# devices (tests/cuda/mock/libcuda_mock.c), once with peer copies, once through the host
# (MOCK_NO_PEER=1) and once with LOOM_CUDA_PEER=0; then tests/cuda/mock/flush_calls.cpp: the
# driver calls of a memory-hit flush (one launch a kernel, one sync, nothing else); then
# tests/cuda/mock/oom_check.cpp: a flush that runs out of memory leaves only the failing work
# pending; then tests/cuda/mock/plan_bytes.cpp: the CUDA plan of a bf16 attention's forward and
# backward moves fewer bytes in as many kernels with its recomputation (LOOM_RECOMPUTE) on, and
# an attention's matmuls read operands whose batch dims collapse into one stride; then
# tests/cuda/mock/compile_ahead.cpp: a flush's new kernels compiled together before it runs
# (and, with LOOM_CUDA_COMPILE_THREADS=1, one by one); then tests/cuda/mock/colsum_plan.cpp: where
# the CUDA plan takes column sums (norms' weight gradients, a loss's mean; no column reduction;
# a launch for the zero sums over no rows). Needs NVRTC
# (the CUDA backend registers only with it) and a configured build tree with tests: BUILD=build
# (default).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cc -shared -fPIC -O1 -o "$TMP/libcuda.so.1" tests/cuda/mock/libcuda_mock.c
cmake --build "$BUILD" --target loom_mock_devices_check loom_mock_flush_calls loom_mock_oom_check \
  loom_mock_plan_bytes loom_mock_compile_ahead loom_mock_colsum_plan
for m in devices_check flush_calls oom_check plan_bytes compile_ahead colsum_plan; do cp "$BUILD/tests/loom_mock_$m" "$TMP/$m"; done
export LOOM_CACHE_DIR="$TMP/cache"
for env in "" "MOCK_NO_PEER=1" "LOOM_CUDA_PEER=0"; do
  echo "== mock devices ${env:-(peer copies)}"
  env LD_LIBRARY_PATH="$TMP" $env "$TMP/devices_check"
done
echo "== mock driver calls a flush"
env LD_LIBRARY_PATH="$TMP" "$TMP/flush_calls" 50
echo "== mock out of memory in a flush"
env LD_LIBRARY_PATH="$TMP" "$TMP/oom_check"
echo "== mock save or recompute on a CUDA plan"
read -r kept_bytes kept_kernels kept_again _ _ < <(env LD_LIBRARY_PATH="$TMP" LOOM_RECOMPUTE=0 "$TMP/plan_bytes")
read -r bytes kernels again column_apart split < <(env LD_LIBRARY_PATH="$TMP" "$TMP/plan_bytes")
echo "kept: $kept_bytes bytes, $kept_kernels kernels; recomputed: $bytes bytes, $kernels kernels"
# the float32 probabilities [4, 6, 128, 128] written and read back: 3 MiB
if [ "$kept_again" != 0 ] || [ "$again" != 1 ] || [ "$kernels" != "$kept_kernels" ] ||
  [ $((kept_bytes - bytes)) -lt 3000000 ]; then
  echo "FAIL: recomputation did not take the probabilities out of the forward's kernel"
  exit 1
fi
echo "== mock a bias gradient's column sum without the GELU derivative's body"
if [ "$column_apart" != 1 ]; then
  echo "FAIL: the CUDA plan ran the GELU's derivative inside its bias gradient's column sum"
  exit 1
fi
echo "== mock attention's heads as one batched GEMM operand each"
read -r _ _ _ _ looped < <(env LD_LIBRARY_PATH="$TMP" LOOM_CUDA_GEMM_COPY=0 "$TMP/plan_bytes")
echo "operands over split batch dims: $split (copies off: $looped)"
if [ "$split" != 0 ] || [ "$looped" = 0 ]; then
  echo "FAIL: a CUDA matmul of the attention reads an operand its BLAS loops over"
  exit 1
fi
echo "== mock column sums on a CUDA plan"
env LD_LIBRARY_PATH="$TMP" "$TMP/colsum_plan"
echo "== mock a flush's new kernels compiled together"
env LD_LIBRARY_PATH="$TMP" LOOM_CACHE_DIR="$TMP/cache_ahead" LOOM_CUDA_COMPILE_THREADS=2 \
  "$TMP/compile_ahead" ahead
env LD_LIBRARY_PATH="$TMP" LOOM_CACHE_DIR="$TMP/cache_serial" LOOM_CUDA_COMPILE_THREADS=1 \
  "$TMP/compile_ahead" serial
