#!/usr/bin/env bash
# The main job: installs what is missing, then runs the demo (a jit-compiled function, its
# IR before and after the C++ passes, and the result).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
./scripts/setup.sh
$PY examples/demo.py "$@"
