#!/usr/bin/env bash
# Builds and installs the Python package (pip install . : scikit-build-core + nanobind, with an
# incremental build folder in build-python/), then runs the Python test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
missing=()
for m in nanobind scikit_build_core numpy pytest hypothesis; do
  "$PY" -c "import $m" 2>/dev/null || missing+=("$m")
done
if [ ${#missing[@]} -gt 0 ]; then
  pkgs=("${missing[@]/scikit_build_core/scikit-build-core}")
  "$PY" -m pip install -q "${pkgs[@]}"
fi
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
"$PY" -m pip install -q --no-build-isolation .
"$PY" -m pytest -q tests/python "$@"
