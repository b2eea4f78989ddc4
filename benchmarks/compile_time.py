"""Compile time side by side with JAX in one run: fully unrolled scans whose steps split a
PRNG key and draw (the loops fuzzer's seed 920208 grew to minutes here before fusion grew
kernels in place), the CartPole `unroll` variant, an MLP layer, and the MLP closing over its
weights (constants in the program). Each is traced, fused and compiled from scratch (a new
jit each repeat, fusionjit's caches cleared); the table gives medians of several repeats
and JAX's time over fusionjit's (above 1: fusionjit compiles faster). A second table times
jitting the same function again with a new jit object (`jit(f)(x)` written in a loop):
both find the compilation by the function (fusionjit: every jit object of one function and
options shares one cache).

    python benchmarks/compile_time.py [--repeats 3] [--steps 8,16,32] [--json out.json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import fusionjit
from _harness import peers, report

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def unrolled_key_splits(np_, lax, random, steps: int):
    """A scan whose steps split a key, draw coins, stack them and update two carries that
    feed each other, unrolled whole."""
    def step(carry, _):
        a, b, i, key = carry
        key, sub = random.split(key)
        coin = random.bernoulli(sub, 0.3, (2,))
        both = b.astype(bool) * coin
        stacked = np_.stack([coin, both, coin], axis=0) + both
        b = np_.sin(b + np.float32(0.5) * np_.tanh(a))
        return (np_.tanh(b), b, i + 1, key), (i + 1, b, stacked)

    def program(a, b, key):
        return lax.scan(step, (a, b, np.int32(0), key), None, length=steps, unroll=steps)
    return program


def mlp(np_, x, w1, b1, w2, b2):
    return np_.tanh(x @ w1 + b1) @ w2 + b2


def median_compile(make_and_compile, repeats: int, before=None) -> float:
    samples = []
    for _ in range(repeats):
        if before is not None:
            before()
        start = time.perf_counter()
        make_and_compile()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", default="8,16,32")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    found = peers()
    from benchmarks.cartpole import cartpole as cp
    rng = np.random.default_rng(0)
    a = np.array([-0.2, 1.7], np.float32)
    b = np.array([-0.6, -0.1], np.float32)
    cases = []
    for n in (int(s) for s in args.steps.split(",")):
        cases.append((f"unrolled scan of key splits, {n} steps", "random",
                      lambda np_, lax, random, n=n: unrolled_key_splits(np_, lax, random, n),
                      (a, b, np.asarray(fusionjit.random.PRNGKey(3)))))
    inputs = cp.inputs(2048, 1000)
    cases.append(("CartPole unroll variant (scan of 1000, unroll=10)", "cartpole",
                  lambda lib: cp.VARIANTS["unroll"](lib, 1000), inputs.args("unroll")))
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    cases.append(("MLP [2048, 64] 64 tanh 8", "plain", lambda np_: (lambda *x: mlp(np_, *x)),
                  (f32(2048, 64), f32(64, 64), f32(64), f32(64, 8), f32(8))))
    weights = (f32(1024, 1024), f32(1024), f32(1024, 16), f32(16))
    cases.append(("MLP [64, 1024] 1024 tanh 16, weights closed over", "plain",
                  lambda np_: (lambda x: mlp(np_, x, *weights)), (f32(64, 1024),)))
    rows = []
    for name, kind, make, inputs_ in cases:
        def build(lib_np, lib_lax, lib_random, lib, make=make, kind=kind):
            if kind == "random":
                return make(lib_np, lib_lax, lib_random)
            if kind == "cartpole":
                return make(lib)
            return make(lib_np)
        row = {"case": name}
        for profile in ("fusionjit", "xla"):
            fj = cp.fusionjit_lib()
            row[f"fusionjit_{profile}_s"] = median_compile(
                lambda: fusionjit.jit(build(fusionjit.numpy, fusionjit.lax, fusionjit.random, fj),
                                      fusion=profile).lower(*inputs_).compile(), args.repeats,
                before=fusionjit.clear_caches)
        if "jax" in found:
            jax, jnp = found["jax"]
            jl = cp.Lib("jax", jnp, jax.lax, jax.random, jax.jit)
            row["jax_s"] = median_compile(
                lambda: jax.jit(build(jnp, jax.lax, jax.random, jl)).lower(*inputs_).compile(),
                args.repeats)
            row["jax/fusionjit"] = row["jax_s"] / row["fusionjit_fusionjit_s"]
        rows.append(row)
    report("compile time (trace, fuse, codegen), seconds, medians", rows, args.json)
    report("jitting the same function again (a new jit object, first compile excluded), "
           "milliseconds, medians", again_rows(cases[-2:], found, max(args.repeats, 10)),
           args.json and args.json.replace(".json", "_again.json"))


def again_rows(cases, found, repeats: int) -> list:
    rows = []
    for name, _, make, inputs_ in cases:
        f = make(fusionjit.numpy)
        fusionjit.jit(f)(*inputs_)
        row = {"case": name, "fusionjit_ms": 1e3 * median_compile(
            lambda: fusionjit.jit(f).lower(*inputs_).compile(), repeats)}
        if "jax" in found:
            jax, jnp = found["jax"]
            g = make(jnp)
            jax.jit(g)(*inputs_)
            row["jax_ms"] = 1e3 * median_compile(
                lambda: jax.jit(g).lower(*inputs_).compile(), repeats)
            row["jax/fusionjit"] = row["jax_ms"] / row["fusionjit_ms"]
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
