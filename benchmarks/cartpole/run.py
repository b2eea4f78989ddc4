"""The paper's CartPole study (Snider & Liang 2023, Sec. IV-V), measured in one run: every
variant (baseline, pool, no_concat, unroll, policy, vmapped) under every fusion profile (xla,
xla+concat, fusionjit) and threefry lowering (custom_call, fused), beside JAX, NumPy,
PyTorch, the hand-written C++ loop and Gymnasium on the same inputs; the trajectories
compared; a sweep over the number of environments. Prints the table and the goals; writes
results.json, results.csv, fig5.png and crossover.png to --out.

    python -m benchmarks.cartpole.run [--quick | --paper] [--out DIR] [--envs N]
                                      [--steps T] [--backend cpu|gpu]
"""

from __future__ import annotations

import argparse
import os
import sys

if __package__ in (None, ""):   # run as a script: python benchmarks/cartpole/run.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))

from benchmarks.cartpole import cartpole as cp  # noqa: E402
from benchmarks.cartpole import experiment, report  # noqa: E402
from benchmarks.cartpole import peers as peer_registry  # noqa: E402

# Sizes: the default takes a few minutes on two cores; --quick a few dozen seconds;
# --paper is the paper's workload (2048 environments x 10,000 steps).
PRESETS = {
    "default": dict(envs=2048, steps=1000, repeats=5, min_time=0.2),
    "quick": dict(envs=256, steps=200, repeats=3, min_time=0.05, sweep=(1, 16, 256, 4096),
                  sweep_env_steps=200_000, sweep_steps=(50, 500)),
    "paper": dict(envs=2048, steps=10_000, repeats=5, min_time=0.5,
                  sweep_env_steps=20_000_000, sweep_steps=(1000, 10_000)),
}


def _csv(text: str, cast=str) -> tuple:
    return tuple(cast(v.strip()) for v in text.split(",") if v.strip())


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    size.add_argument("--paper", action="store_true",
                      help="the paper's size: 2048 environments x 10,000 steps")
    p.add_argument("--out", default=os.path.join("results", "cartpole"),
                   help="folder for results.json, results.csv and the figures")
    p.add_argument("--envs", type=int, help="environments (default 2048)")
    p.add_argument("--steps", type=int, help="steps per rollout (default 1000)")
    p.add_argument("--repeats", type=int, help="timed repeats; the median is reported")
    p.add_argument("--backend", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--variants", type=_csv, help=f"some of {','.join(cp.VARIANTS)}")
    p.add_argument("--profiles", type=_csv, help="some of xla,xla+concat,fusionjit")
    p.add_argument("--lowerings", type=_csv, help="threefry lowerings: custom_call,fused")
    p.add_argument("--peers", type=_csv,
                   help=f"some of {','.join(peer_registry.PEERS)} ('none' for none)")
    p.add_argument("--sweep", type=lambda t: _csv(t, int),
                   help="environment counts of the crossover sweep ('' for none)")
    p.add_argument("--pool-rows", type=int,
                   help="reset rows in the pool (default 16; 0: one per step, so that every "
                        "variant computes the baseline's trajectories)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p.parse_args(argv)


def settings(args: argparse.Namespace) -> experiment.Settings:
    preset = PRESETS["quick" if args.quick else "paper" if args.paper else "default"]
    s = experiment.Settings(**preset)
    for name in ("envs", "steps", "repeats", "variants", "profiles", "lowerings", "sweep"):
        if getattr(args, name) is not None:
            setattr(s, name, getattr(args, name))
    if args.peers is not None:
        s.peers = () if args.peers == ("none",) else args.peers
    if args.pool_rows is not None:
        s.pool_rows = args.pool_rows or None
    s.backend = args.backend
    s.progress = not args.no_progress
    unknown = set(s.variants) - set(cp.VARIANTS)
    unknown |= set(s.peers or ()) - set(peer_registry.PEERS)
    if unknown:
        raise SystemExit(f"unknown variants or peers: {', '.join(sorted(unknown))}")
    return s


def main(argv=None) -> int:
    args = parse(argv)
    s = settings(args)
    if s.backend == "gpu" and experiment.gpu_missing():
        print(f"run.py: {experiment.gpu_missing()}", file=sys.stderr)
        return 2
    results = experiment.run(s)
    print(report.text(results))
    for path in report.write(results, args.out):
        print(f"wrote {path}")
    return 1 if results.errors else 0


if __name__ == "__main__":
    sys.exit(main())
