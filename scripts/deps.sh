#!/usr/bin/env bash
# Installs what loom needs on a fresh Debian/Ubuntu machine (skips what is already there).
set -euo pipefail
need=()
for p in g++ cmake ninja-build libeigen3-dev libtbb-dev doctest-dev python3 python3-pip python3-venv; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
