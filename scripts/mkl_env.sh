# Sourced by the scripts that run loom: points LOOM_MKL at the MKL scripts/deps.sh installed
# with pip (the Python prefix's lib folder, which the loader does not search), unless set.
if [ -z "${LOOM_MKL:-}" ]; then
  mkl_prefix=$("${PYTHON:-python3}" -c 'import sys; print(sys.prefix)' 2>/dev/null || true)
  if [ -n "$mkl_prefix" ] && [ -e "$mkl_prefix/lib/libmkl_rt.so.3" ]; then
    export LOOM_MKL="$mkl_prefix/lib"
  fi
fi
