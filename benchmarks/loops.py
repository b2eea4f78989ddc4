"""Loop benchmarks, side by side in one run, as medians of several runs:

1. the per-iteration overhead of a scan with a tiny body (c = c * 0.5 + x over 100,000
   steps): fusionjit's whole-loop kernel (its default profile), its step-by-step loop (the
   xla profile), and JAX's scan on the CPU; and a fori_loop to a bound passed in at run
   time (4096 pendulums, 500 steps: a while loop to XLA), the same three ways;
2. a CartPole scan (benchmarks/cartpole/cartpole.py: 2048 environments x 10,000 steps, pool
   actions, float32) in the paper's no-concat and concat-packed forms (its `no_concat` and
   `pool` variants), for each fusion
   profile and unroll factor, against JAX's variants and the hand-written C++ loop
   (benchmarks/cartpole/cartpole_hand.cc: environment blocks outer, steps inner,
   vectorised sin/cos, all cores) - the CPU's limit.

Prints the goals of the loops issue as ratios measured in this run.

    python benchmarks/loops.py [--envs 2048] [--steps 10000] [--repeats 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import fusionjit
from fusionjit import lax
from _harness import machine, median_seconds, peers, report

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.cartpole import cartpole, hand  # noqa: E402


def timed(fn, args, repeats):
    """(compile-and-first-call seconds, median seconds per call, result)."""
    start = time.perf_counter()
    out = fn(*args)
    fusionjit.block_until_ready(out)
    first = time.perf_counter() - start
    return first, median_seconds(lambda: fn(*args), repeats=repeats, min_time=0.2), out


def overhead_rows(steps, repeats, found):
    xs = np.linspace(0, 1, steps, dtype=np.float32)

    def body(xp_lax):
        return lambda x: xp_lax.scan(lambda c, xi: (c * 0.5 + xi, None), 0.0, x)[0]

    rows = []
    variants = [("fusionjit (whole loop)", fusionjit.jit(body(lax))),
                ("fusionjit, xla profile (step loop)", fusionjit.jit(body(lax), fusion="xla"))]
    for name, fn in variants:
        _, t, _ = timed(fn, (xs,), repeats)
        rows.append({"impl": name, "ns_per_iteration": t / steps * 1e9})
    if "jax" in found:
        jax, _ = found["jax"]
        _, t, _ = timed(jax.jit(body(jax.lax)), (xs,), repeats)
        rows.append({"impl": "jax", "ns_per_iteration": t / steps * 1e9})
    return rows


def pendulums(xp, xp_lax):
    """A fori_loop to a bound passed in at run time (traced: a while loop whose trip count
    is known only when it runs): pendulums stepped by explicit Euler."""
    def run(theta, omega, n):
        def body(i, c):
            theta, omega = c
            return theta + 0.01 * omega, omega - 0.01 * 9.8 * xp.sin(theta)
        return xp_lax.fori_loop(0, n, body, (theta, omega))
    return run


def runtime_bound_rows(lanes, steps, repeats, found):
    rng = np.random.default_rng(0)
    args = (rng.uniform(-1, 1, lanes).astype(np.float32), np.zeros(lanes, np.float32),
            np.int32(steps))
    import fusionjit.numpy as fnp
    rows = []
    for name, fn in [("fusionjit (whole loop)", fusionjit.jit(pendulums(fnp, lax))),
                     ("fusionjit, xla profile (step loop)",
                      fusionjit.jit(pendulums(fnp, lax), fusion="xla"))]:
        _, t, _ = timed(fn, args, repeats)
        rows.append({"impl": name, "us": t * 1e6})
    if "jax" in found:
        jax, jnp = found["jax"]
        _, t, _ = timed(jax.jit(pendulums(jnp, jax.lax)), args, repeats)
        rows.append({"impl": "jax", "us": t * 1e6})
    return rows


def cartpole_rows(envs, steps, repeats, found):
    inputs = cartpole.inputs(envs, steps)
    args = inputs.args("pool")
    rows, results = [], {}

    def add(impl, variant, profile, unroll, fn):
        first, t, out = timed(fn, args, repeats)
        results[(impl, variant, profile, unroll)] = out
        rows.append({"impl": impl, "variant": variant, "profile": profile, "unroll": unroll,
                     "ms": t * 1e3, "env_steps_per_s": envs * steps / t,
                     "first_call_s": first})

    fj = cartpole.fusionjit_lib()
    for variant in ("no_concat", "pool"):
        make = getattr(cartpole, variant)
        for profile in ("fusionjit", "xla", "xla+concat"):
            for unroll in (1, 10):
                add("fusionjit", variant, profile, unroll,
                    fusionjit.jit(make(fj, steps, unroll), fusion=profile))
    if "jax" in found:
        jax_lib = cartpole.jax_lib()
        for variant in ("no_concat", "pool"):
            for unroll in (1, 10):
                add("jax", variant, "-", unroll,
                    jax_lib.jit(getattr(cartpole, variant)(jax_lib, steps, unroll)))
    add("hand-written C++", "no_concat", "-", 1, hand.rollout)
    return rows, results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--envs", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=10000)
    parser.add_argument("--overhead-steps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    found = peers()

    over = overhead_rows(args.overhead_steps, args.repeats, found)
    report(f"scan with a tiny body, {args.overhead_steps} steps: per-iteration overhead", over)
    report("fori_loop to a bound known when it runs: 4096 pendulums x 500 steps",
           runtime_bound_rows(4096, 500, args.repeats, found))
    rows, results = cartpole_rows(args.envs, args.steps, args.repeats, found)
    report(f"CartPole scan, {args.envs} envs x {args.steps} steps, pool actions, float32", rows,
           args.json)

    # The same program under every profile computes the same trajectories, bit for bit;
    # the C++ uses libmvec's sin/cos, so after many steps its chaotic trajectories differ:
    # its resets per step are compared in total.
    ref = results[("fusionjit", "no_concat", "xla", 1)]
    same = all(np.array_equal(np.asarray(v[0]), np.asarray(ref[0])) and
               np.array_equal(np.asarray(v[1]), np.asarray(ref[1]))
               for (impl, _, _, _), v in results.items() if impl == "fusionjit")
    hand_resets = int(np.asarray(results[("hand-written C++", "no_concat", "-", 1)][1]).sum())
    print(f"\nfusionjit's rows agree bit for bit across variants, profiles and unroll factors: "
          f"{same}; resets in total: fusionjit {int(np.asarray(ref[1]).sum())}, hand-written "
          f"C++ {hand_resets}")

    def best(impl, variant=None):
        cands = [r for r in rows
                 if r["impl"] == impl and (variant is None or r["variant"] == variant)
                 and (impl != "fusionjit" or r["profile"] == "fusionjit" or variant is None)]
        return min(cands, key=lambda r: r["ms"]) if cands else None

    fj, hand_row = best("fusionjit"), best("hand-written C++")
    fj_concat = min((r for r in rows if r["impl"] == "fusionjit" and r["variant"] == "pool"
                     and r["profile"] == "fusionjit"), key=lambda r: r["ms"])
    print(f"\ngoals ({machine()}):")
    print(f"  fusionjit's best ({fj['variant']}, {fj['profile']}, unroll={fj['unroll']}): "
          f"{fj['ms']:.1f} ms")
    if "jax" in found:
        jx = best("jax")
        print(f"  vs JAX's best ({jx['variant']}, unroll={jx['unroll']}, {jx['ms']:.1f} ms): "
              f"{jx['ms'] / fj['ms']:.2f}x  (goal >= 2)")
    print(f"  vs the hand-written C++ ({hand_row['ms']:.1f} ms): {hand_row['ms'] / fj['ms']:.2f}x "
          f"(goal >= 0.8)")
    print(f"  fusionjit on the concat-packed code ({fj_concat['ms']:.1f} ms) vs its best: "
          f"{fj['ms'] / fj_concat['ms']:.2f}x (goal >= 0.8)")
    over_fj = next(r for r in over if r["impl"].startswith("fusionjit (whole"))
    over_step = next(r for r in over if "step loop" in r["impl"])
    if "jax" in found:
        over_jax = next(r for r in over if r["impl"] == "jax")
        print(f"  per-iteration overhead: fusionjit {over_fj['ns_per_iteration']:.1f} ns "
              f"(step loop {over_step['ns_per_iteration']:.1f} ns) "
              f"vs JAX {over_jax['ns_per_iteration']:.1f} ns (goal <= JAX)")


if __name__ == "__main__":
    main()
