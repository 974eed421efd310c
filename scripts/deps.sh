#!/usr/bin/env bash
# Installs what loom needs on a fresh Debian/Ubuntu machine (skips what is already there).
# nlohmann-json3-dev: the JSON headers of checkpoints (ops/checkpoint_header.cpp).
# libopenblas-dev: the CPU matmul's BLAS (CMakeLists.txt, LOOM_BLAS). bench/gemm_blas.cpp also
# compares libblis-dev, libdnnl-dev and libopenblas0-openmp when they are installed (not needed).
# mkl (PyPI, without its OpenMP and TBB dependencies: loom opens it single-threaded at run time,
# cpu/blas_lib.h): the float matmuls' faster BLAS where it loads; the build does not need it,
# and without it (no network, other CPUs) the matmuls stay on OpenBLAS.
# --python: also the Python package's build and test modules (pip; scikit-learn for the digits
# data the training examples read; matplotlib, nbclient, nbformat and ipykernel to run the
# example notebook headless in the tests), which the Release build
# needs too when it builds the extension (scripts/test.sh).
set -euo pipefail
need=()
for p in g++ cmake ninja-build libeigen3-dev libtbb-dev libopenblas-dev nlohmann-json3-dev doctest-dev python3 python3-pip python3-venv; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ "${1:-}" = --python ]; then
  PY=${PYTHON:-python3}
  # One interpreter start for all of them (each start costs about 2 s behind pyenv's shims).
  missing=$("$PY" -c '
import importlib.util
mods = {"nanobind": "nanobind", "scikit_build_core": "scikit-build-core", "numpy": "numpy",
        "pytest": "pytest", "hypothesis": "hypothesis", "sklearn": "scikit-learn",
        "matplotlib": "matplotlib", "nbclient": "nbclient", "nbformat": "nbformat",
        "ipykernel": "ipykernel"}
print(" ".join(p for m, p in mods.items() if importlib.util.find_spec(m) is None))')
  if [ -n "$missing" ]; then
    # shellcheck disable=SC2086  # a list of names
    "$PY" -m pip install -q $missing
  fi
fi
PY=${PYTHON:-python3}
if ! "$PY" -c 'import importlib.metadata as m; m.version("mkl")' 2>/dev/null; then
  "$PY" -m pip install -q --no-deps "mkl<2027" ||
    echo "deps.sh: MKL not installed; the CPU matmuls use OpenBLAS" >&2
fi
