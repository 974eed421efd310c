# Sourced by the GPU-machine scripts (shared/GPU.md): that machine has no apt and no network,
# so Eigen, oneTBB, doctest and nlohmann-json come as the Debian packages carried in
# .device-deps/ (apt-get download libeigen3-dev libtbb-dev libtbb12 libtbbmalloc2
# libtbbbind-2-5 doctest-dev nlohmann-json3-dev).
#   gpu_python_install LOG   makes `import loom` work from this tree: pip install (no build
#                            isolation: nothing can be downloaded there), else a CMake build of
#                            the extension put on PYTHONPATH.
P=/tmp/deps
if ls .device-deps/*.deb >/dev/null 2>&1; then
  for f in .device-deps/*.deb; do dpkg -x "$f" "$P"; done
  export CMAKE_PREFIX_PATH=$P/usr LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  export CPATH=$P/usr/include:$P/usr/include/eigen3${CPATH:+:$CPATH}
fi

gpu_python_install() {
  local log=$1
  export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
  if python3 -m pip install -q --no-build-isolation . >"$log" 2>&1; then
    return 0
  fi
  echo "pip install failed (see $log); building the extension with CMake" | tee -a "$log"
  cmake -S . -B build-py -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_BUILD_PYTHON=ON \
    -DLOOM_BUILD_TESTS=OFF -DLOOM_BUILD_BENCH=OFF >>"$log" 2>&1 &&
    ninja -C build-py _loom >>"$log" 2>&1 || return 1
  local stage=$PWD/build-py/stage
  rm -rf "$stage" && mkdir -p "$stage/loom"
  cp -r python/loom/* "$stage/loom/" && cp build-py/bindings/_loom*.so "$stage/loom/"
  export PYTHONPATH=$stage${PYTHONPATH:+:$PYTHONPATH}
  python3 -c "import loom" >>"$log" 2>&1
}
