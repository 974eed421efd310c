#!/usr/bin/env bash
# Sets everything up, runs the demo, then the CPU benchmark (JSON rows to bench/results/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
"$BUILD"/examples/loom_demo
mkdir -p bench/results
"$BUILD"/bench/loom_bench --json bench/results/cpu.json
