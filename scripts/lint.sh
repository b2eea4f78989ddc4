#!/usr/bin/env bash
# Static checks: ruff (pycodestyle + pyflakes, settings in pyproject.toml), the layering of
# includes and imports (DESIGN.md), and the size of source files (STYLE.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
echo "lint: ruff check"
$PY -m ruff check .
echo "lint: layering (includes and imports)"
$PY scripts/check_layering.py
echo "lint: file length"
$PY scripts/check_file_length.py
echo "lint: fork safety (function-local statics)"
$PY scripts/check_fork_safety.py
