#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU: builds fusionjit if it is not built yet,
# runs the GPU test subset (tests/test_gpu.py: the tests marked `gpu` on the real GPU, the
# emulation and ptxas ones beside them) and the GPU CartPole benchmark, and writes what it
# found to a results directory (default results/gpu-check, or $1).
#
#   ./scripts/gpu-check.sh [OUT_DIR]
#
# Uses $PYTHON (default python3). Where the package index is unreachable (the lent GPU
# machines), a prebuilt extension in python/fusionjit/ and test tools on PYTHONPATH are
# used as they are.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${1:-results/gpu-check}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
status=0

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: none"
  $PY --version
} | tee "$OUT/machine.txt"

if ! $PY -c "import fusionjit" 2>/dev/null; then
  echo "building fusionjit ..."
  ./scripts/setup.sh || { echo "build failed" | tee -a "$OUT/machine.txt"; exit 1; }
fi
$PY - <<'PYEOF' | tee -a "$OUT/machine.txt"
import fusionjit
print("devices:", fusionjit.devices())
print("gpu:", fusionjit.devices("gpu") or "none: " + fusionjit.gpu_unavailable_reason())
PYEOF

echo "== GPU tests" | tee "$OUT/tests.txt"
(cd tests && $PY -m pytest -q -p no:cacheprovider -rs test_gpu.py 2>&1) | tee -a "$OUT/tests.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== GPU CartPole benchmark" | tee "$OUT/cartpole.txt"
$PY benchmarks/cartpole/gpu.py --out "$OUT/cartpole.json" ${FJ_GPU_BENCH_ARGS:-} 2>&1 | tee -a "$OUT/cartpole.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "results in $OUT (status $status)"
exit $status
