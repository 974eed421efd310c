#!/usr/bin/env bash
# Builds and installs the Python package (pip install . : scikit-build-core + nanobind, with an
# incremental build folder in build-python/), then runs the Python test suite.
# PY_BUILD_DIR=<dir>: build in that Release tree instead, one configured with
# LOOM_BUILD_PYTHON=ON (scripts/test.sh passes its own), so that pip reuses its library objects
# rather than compiling the library again (about 6 of CI's minutes). The tree's LOOM_* options are
# passed back to pip's configure, which then changes no compile flag and builds nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
bash scripts/deps.sh --python
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
args=()
if [ -n "${PY_BUILD_DIR:-}" ]; then
  args+=(-Cbuild-dir="$PY_BUILD_DIR")
  while IFS='=' read -r key val; do
    [ "${key%%:*}" = LOOM_BUILD_PYTHON ] || args+=("-Ccmake.define.${key%%:*}=$val")
  done < <(grep -E '^LOOM_[A-Z_]+:[A-Z]+=' "$PY_BUILD_DIR/CMakeCache.txt")
fi
"$PY" -m pip install -q --no-build-isolation "${args[@]}" .
"$PY" -m pytest -q tests/python "$@"
