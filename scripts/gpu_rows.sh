#!/usr/bin/env bash
# On the GPU machine: A/B of the row kernels' knobs (cuda/launch_rows.cpp, LOOM_CUDA_ROW_*) in one
# call, loom installed once. bench/rows_sweep.py times softmax / layer_norm / rms_norm in f32 and
# bf16 over row lengths 128..32768 and views, once per setting (each in its own process: loom
# reads the knobs once), and prints one table: GB/s, % of the copy, x torch eager per setting.
#   ROWS_AB    settings, one a line ("" = the defaults); default: the new defaults, the kernels
#              of before 2026-11-29, no sm_80 PTX, remat 1 and 2 forced, no register cap
#   ROWS_ARGS  extra rows_sweep.py arguments (e.g. "--only bfloat16 --reps 30")
#   ROWS_SUITE=1  also run bench/suite.py --only softmax,layer_norm,rms_norm with the defaults
#                 (torch.compile included; a few minutes)
# Output (tables, JSON) goes to $OUT (or ./gpu-rows-out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-rows-out}
export OUT
mkdir -p "$OUT"
source scripts/gpu_env.sh
gpu_python_install "$OUT/python_install.log" || { tail -20 "$OUT/python_install.log"; exit 1; }
DEFAULT_AB='
LOOM_CUDA_ROW_REMAT=0 LOOM_CUDA_ROW_CHUNKS=2 LOOM_CUDA_ROW_MINB=0 LOOM_CUDA_ROW_PTX=0
LOOM_CUDA_ROW_PTX=0
LOOM_CUDA_ROW_REMAT=1
LOOM_CUDA_ROW_REMAT=2
LOOM_CUDA_ROW_MINB=0'
AB=${ROWS_AB-$DEFAULT_AB}
mapfile -t SETTINGS <<<"$AB"
export LOOM_CACHE_DIR=$(mktemp -d /tmp/loom-rows-cache.XXXX)
python3 bench/rows_sweep.py --json "$OUT/rows_sweep.json" ${ROWS_ARGS:-} --ab "${SETTINGS[@]}" \
  2>"$OUT/rows_sweep.log" | tee "$OUT/rows_sweep.txt"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || tail -5 "$OUT/rows_sweep.log"
if [ "${ROWS_SUITE:-0}" = 1 ]; then
  python3 bench/suite.py --device cuda --only softmax,layer_norm,rms_norm --json "$OUT/suite.json" \
    2>&1 | tail -16 | tee "$OUT/suite.txt"
fi
exit "$rc"
