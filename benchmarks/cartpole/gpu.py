"""CartPole on the GPU (the paper's experiment on today's hardware): fusionjit's profiles
against JAX on the same GPU and a hand-written CUDA kernel (cartpole_hand.cu: one thread
per environment, all steps in one launch), same inputs, trajectories compared, in one run.

    python benchmarks/cartpole/gpu.py [--envs 256 2048 16384 131072] [--steps 10000]
                                      [--repeats 5] [--out results.json]

Needs a GPU (fusionjit.devices("gpu")); JAX with CUDA and CuPy (for the hand-written
kernel) are used when installed. Prints env-steps per second (median of the repeats),
ratios to the hand-written kernel and to JAX's best, and compile times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cartpole  # noqa: E402

import fusionjit  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def timed(fn, args, repeats, sync):
    """(first call's seconds, median seconds of `repeats` more calls, last result)."""
    start = time.perf_counter()
    out = sync(fn(*args))
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = sync(fn(*args))
        times.append(time.perf_counter() - start)
    return first, statistics.median(times), out


# The paper's variants (cartpole.py); `baseline` draws its random numbers in the step.
VARIANTS = ("baseline", "pool", "no_concat", "unroll")


def fusionjit_rows(inp, repeats, backend="gpu"):
    """fusionjit on the GPU: each variant under each profile."""
    lib = cartpole.fusionjit_lib()
    rows = []
    for name in VARIANTS:
        args = [fusionjit.device_put(a) for a in inp.args(name)]
        dev = [fusionjit.jit(lambda x: x, backend=backend)(a) for a in args]
        fusionjit.block_until_ready(dev)
        for profile in ("fusionjit", "xla+concat", "xla"):
            make = cartpole.VARIANTS[name]
            fn = fusionjit.jit(make(lib, inp.steps), fusion=profile, backend=backend)
            first, t, out = timed(fn, dev, repeats, fusionjit.block_until_ready)
            counts = fusionjit.testing.launch_counts(
                make(lib, inp.steps), fusion=profile, backend=backend)(*dev)
            rows.append({"impl": "fusionjit", "variant": name, "profile": profile, "s": t,
                         "compile_s": first - t, "launches": counts["per_call"],
                         "out": [np.asarray(o) for o in out[:2]]})
    return rows


def jax_rows(inp, repeats):
    try:
        import jax
    except ImportError:
        return [], "JAX is not installed"
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        return [], "JAX sees no GPU"
    lib = cartpole.jax_lib()
    rows = []
    for name in VARIANTS:
        args = [jax.device_put(a, gpus[0]) for a in inp.args(name)]
        fn = jax.jit(cartpole.VARIANTS[name](lib, inp.steps))
        start = time.perf_counter()
        compiled = fn.lower(*args).compile()
        compile_s = time.perf_counter() - start
        _, t, out = timed(compiled, args, repeats, jax.block_until_ready)
        rows.append({"impl": "jax", "variant": name, "profile": "-", "s": t,
                     "compile_s": compile_s, "launches": None,
                     "out": [np.asarray(o) for o in out[:2]]})
    return rows, ""


def hand_rows(inp, repeats):
    state, actions, resets = inp.state, inp.actions, inp.resets
    try:
        import cupy as cp
    except ImportError:
        return [], "CuPy is not installed (it compiles the hand-written kernel)"
    with open(os.path.join(HERE, "cartpole_hand.cu")) as f:
        source = f.read()
    start = time.perf_counter()
    module = cp.RawModule(code=source, options=("--std=c++17",))
    rollout = module.get_function("cartpole_rollout")
    total = module.get_function("sum_warp_counts")
    compile_s = time.perf_counter() - start
    envs, steps, pool = state.shape[1], actions.shape[0], resets.shape[0]
    acts = cp.asarray(actions.astype(np.uint8))
    res = cp.asarray(resets)
    warps = (envs + 31) // 32
    threads = 128

    def run():
        s = [cp.asarray(state[k]) for k in range(4)]
        counts = cp.empty((warps, steps), cp.int32)
        per_step = cp.empty(steps, cp.int32)
        rollout(((envs + threads - 1) // threads,), (threads,),
                (s[0], s[1], s[2], s[3], acts, res, np.int64(pool), np.int64(envs),
                 np.int64(steps), counts))
        total(((steps + 255) // 256,), (256,), (counts, np.int64(warps), np.int64(steps), per_step))
        return cp.stack(s), per_step

    def sync(out):
        cp.cuda.Stream.null.synchronize()
        return out

    _, t, out = timed(run, (), repeats, sync)
    return [{"impl": "hand CUDA", "variant": "one kernel", "profile": "-", "s": t,
             "compile_s": compile_s, "launches": 2, "out": [cp.asnumpy(o) for o in out]}], ""


def compare(rows, reference):
    """Largest difference of each row's final state from `reference`'s, and whether the reset
    counts agree (short rollouts only: chaotic dynamics amplify last-bit differences)."""
    want_state, want_counts = reference["out"]
    for r in rows:
        state, counts = r["out"]
        r["max_state_diff"] = float(np.max(np.abs(state - want_state)))
        r["counts_equal"] = bool(np.array_equal(counts, want_counts))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", type=int, nargs="+", default=[256, 2048, 16384, 131072])
    p.add_argument("--steps", type=int, default=10000)
    p.add_argument("--check-steps", type=int, default=50)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default="")
    p.add_argument("--backend", default="gpu", choices=["gpu", "gpu_emulated"],
                   help="gpu_emulated: a smoke test of this script without a GPU (tiny sizes)")
    a = p.parse_args(argv)
    if not fusionjit.devices(a.backend):
        sys.exit(f"no GPU: {fusionjit.gpu_unavailable_reason()}")
    peers = a.backend == "gpu"
    report = {"device": fusionjit.devices(a.backend)[0], "steps": a.steps, "sizes": []}
    print(f"GPU: {report['device']}")
    for envs in a.envs:
        # Correctness on a short rollout: every implementation against the hand-written
        # kernel (a reset row per step: the pool variants then replay the baseline's draws).
        check = cartpole.inputs(envs, a.check_steps, pool_rows=None)
        c_rows = fusionjit_rows(check, 1, a.backend)
        j_rows, _ = jax_rows(check, 1) if peers else ([], "")
        h_rows, _ = hand_rows(check, 1) if peers else ([], "")
        ref = (h_rows or c_rows)[0]
        compare(c_rows + j_rows + h_rows, ref)
        # Timing on the full rollout.
        inputs = cartpole.inputs(envs, a.steps)
        rows = fusionjit_rows(inputs, a.repeats, a.backend)
        jrows, jax_why = jax_rows(inputs, a.repeats) if peers else ([], "emulated run")
        hrows, hand_why = hand_rows(inputs, a.repeats) if peers else ([], "emulated run")
        rows += jrows + hrows
        for r, c in zip(rows, c_rows + j_rows + h_rows):
            r["check_max_state_diff"] = c["max_state_diff"]
            r["check_counts_equal"] = c["counts_equal"]
        print(f"\n{envs} environments x {a.steps} steps"
              + (f" (JAX: {jax_why})" if jax_why else "")
              + (f" (hand: {hand_why})" if hand_why else ""))
        print(f"  {'implementation':<44}{'ms':>10}{'env-steps/s':>14}{'launches':>10}"
              f"{'compile s':>11}{'check':>16}")
        for r in rows:
            name = f"{r['impl']} {r['variant']} [{r['profile']}]"
            rate = envs * a.steps / r["s"]
            mark = "" if r["check_counts_equal"] else " !="
            check_text = f"{r['check_max_state_diff']:.1e}{mark}"
            print(f"  {name:<44}{r['s'] * 1e3:>10.2f}{rate:>14.3g}{str(r['launches']):>10}"
                  f"{r['compile_s']:>11.2f}{check_text:>16}")
        best = min((r for r in rows if r["impl"] == "fusionjit"), key=lambda r: r["s"])
        summary = {"envs": envs, "fusionjit_best_ms": best["s"] * 1e3,
                   "fusionjit_best": f"{best['variant']} [{best['profile']}]"}
        if hrows:
            summary["vs_hand"] = hrows[0]["s"] / best["s"]
            print(f"  fusionjit's best vs the hand-written kernel: {summary['vs_hand']:.2f}x "
                  "(goal >= 0.9)")
        if jrows:
            jbest = min(jrows, key=lambda r: r["s"])
            summary["vs_jax_best"] = jbest["s"] / best["s"]
            print(f"  fusionjit's best vs JAX's best ({jbest['variant']}): "
                  f"{summary['vs_jax_best']:.1f}x (goal >= 15)")
        for r in rows:
            r.pop("out", None)
        summary["rows"] = rows
        report["sizes"].append(summary)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(report, f, indent=1)
        print(f"\nwrote {a.out}")


if __name__ == "__main__":
    main()
