#!/usr/bin/env bash
# Runs every test: the C++ tests (ctest) and the Python tests (pytest), with the IR
# verifier after every pass (FJ_CHECKS=1). Installs what is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
./scripts/setup.sh
export FJ_CHECKS=1
echo "test: C++ tests"
ctest --test-dir build/release --output-on-failure -j2
echo "test: Python tests"
# Run from tests/ so that the installed package, not python/fusionjit, is imported.
cd tests
$PY -m pytest -q -n 2 -p no:cacheprovider "$@" .
