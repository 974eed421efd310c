#!/usr/bin/env bash
# On the GPU machine: the benchmark suite (bench/suite.py: loom fused and fusion-off against
# torch eager and torch.compile, CUDA events) with loom built from this tree. Table, JSON and
# PNG go to $OUT (or ./gpu-suite-out). Extra arguments go to suite.py (e.g. --reps 30).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-suite-out}
mkdir -p "$OUT"
source scripts/gpu_env.sh
gpu_python_install "$OUT/python_install.log" || { tail -20 "$OUT/python_install.log"; exit 1; }
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  python3 -c "import torch, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__)"
} | tee "$OUT/suite_machine.txt"
python3 bench/suite.py --device cuda --json "$OUT/h200.json" --png "$OUT/h200.png" "$@" \
  2>&1 | tee "$OUT/suite.txt"
