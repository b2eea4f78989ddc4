#!/usr/bin/env bash
# The main job: installs what is missing (scripts/setup.sh), then runs the paper's CartPole
# study (python -m benchmarks.cartpole.run): every variant under every fusion profile beside
# the peers, the table and the goals printed, results.json, results.csv, fig5.png and
# crossover.png written to results/cartpole. Arguments go to the experiment (--quick,
# --paper, --out DIR, --envs N, --steps T, --backend cpu|gpu; --help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
./scripts/setup.sh
$PY -m benchmarks.cartpole.run "$@"
