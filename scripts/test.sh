#!/usr/bin/env bash
# Runs every test and check: static checks (ruff, layering, file length), the C++ tests
# (ctest) and the Python tests (pytest, with JAX and Gymnasium installed so every
# comparison with them runs), all with the IR verifier after every pass (FJ_CHECKS=1), then
# the C++ core under ASan + UBSan (scripts/sanitize.sh; FJ_NO_SANITIZE=1 skips it).
# Installs what is missing first. Extra arguments go to the main pytest run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
./scripts/setup.sh
export FJ_CHECKS=1
echo "test: static checks"
./scripts/lint.sh
echo "test: C++ tests"
ctest --test-dir build/release --output-on-failure -j2
echo "test: Python tests"
# Run from tests/ so that the installed package, not python/fusionjit, is imported.
(cd tests && $PY -m pytest -q -n 2 -p no:cacheprovider "$@" .)
if [ "${FJ_NO_SANITIZE:-0}" != 1 ]; then
  echo "test: sanitizers"
  ./scripts/sanitize.sh
fi
