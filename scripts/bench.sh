#!/usr/bin/env bash
# Sets everything up, runs the demo, the C++ CPU benchmark, the training examples and the
# Python suite (loom against numpy, and torch where it is installed; on the GPU when one is
# there). Tables are printed; JSON and PNG charts go to bench/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
source scripts/mkl_env.sh  # the CPU matmuls on MKL where deps.sh installed it
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
"$BUILD"/examples/loom_demo
"$BUILD"/examples/loom_train_spirals
mkdir -p bench/results
"$BUILD"/bench/loom_bench --json bench/results/cpu.json
PY=${PYTHON:-python3}
"$PY" -c "import nanobind, scikit_build_core, numpy, matplotlib" 2>/dev/null ||
  "$PY" -m pip install -q nanobind scikit-build-core numpy matplotlib
"$PY" -m pip install -q --no-build-isolation .
dev=$("$PY" -c "import loom; print('cuda' if loom.cuda.is_available() else 'cpu')")
# The training examples (their data ships offline: scikit-learn's digits).
"$PY" -c "import sklearn" 2>/dev/null || "$PY" -m pip install -q scikit-learn
"$PY" examples/train_digits.py --device "$dev" --png bench/results/digits_loss.png
"$PY" bench/suite.py --device "$dev" --json "bench/results/suite-$dev.json" --png "bench/results/suite-$dev.png"
