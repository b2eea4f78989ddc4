#!/usr/bin/env bash
# Installs whatever is missing for fusionjit on Debian 12 (safe to run again): Debian
# packages (LLVM 19, CMake, Ninja, GoogleTest, Graphviz, ccache), the Python build tools,
# and fusionjit itself with its test and bench extras (figures, progress bar, notebook
# runner) and the comparison peers (JAX, Gymnasium), built incrementally in build/release.
# FJ_NO_PEERS=1 leaves the peers out; FJ_TORCH=1 adds PyTorch (the torch extra, ~5 GB).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
APT_PACKAGES=(llvm-19-dev libzstd-dev zlib1g-dev cmake ninja-build g++ libgtest-dev graphviz ccache)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

$PY -m pip install -q --disable-pip-version-check "scikit-build-core>=0.10" "pybind11>=2.12" ninja
EXTRAS=test,bench,peers
[ "${FJ_NO_PEERS:-0}" = 1 ] && EXTRAS=test,bench
[ "${FJ_TORCH:-0}" = 1 ] && EXTRAS=$EXTRAS,torch
echo "setup: building and installing fusionjit[$EXTRAS] (incremental, build/release)"
$PY -m pip install -q --disable-pip-version-check --no-build-isolation \
  -Cbuild-dir=build/release -Ccmake.define.FUSIONJIT_BUILD_TESTS=ON ".[$EXTRAS]"
