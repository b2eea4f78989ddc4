"""Donated buffers, fusionjit vs jax.jit (when installed) in one run: the RL replay buffer's
insert ``buf = add(buf, batch, ptr)`` with ``donate_argnums=0`` (a dynamic-update-slice of
256 rows, and a ring-buffer ``.at[idx].set``), the same insert without donation (a copy of
the buffer each call), and an Adam step over a 1M-parameter model with its state donated.
Each call feeds its output back as the next call's buffer, as a training loop does.

    python benchmarks/donation.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import fusionjit
import fusionjit.numpy as fnp
from _harness import median_seconds, peers, report


def _insert(lax):
    return lambda buf, batch, ptr: lax.dynamic_update_slice_in_dim(buf, batch, ptr, 0)


def _ring(np_):
    def add(buf, batch, ptr):
        idx = (ptr + np_.arange(batch.shape[0])) % buf.shape[0]
        return buf.at[idx].set(batch)
    return add


def _adam(np_):
    def step(state, g):
        p, m, v = state
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        return p - 1e-3 * m / (np_.sqrt(v) + 1e-8), m, v
    return step


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", default=None)
    opts = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    found = peers()
    rows = []
    buf0 = rng.standard_normal((100_000, 42)).astype(np.float32)
    batch = rng.standard_normal((256, 42)).astype(np.float32)
    params = [rng.standard_normal(1 << 20).astype(np.float32) for _ in range(3)]
    grad = rng.standard_normal(1 << 20).astype(np.float32)
    cases = [
        ("replay insert, 256 rows into [100000,42], donated", "insert", True),
        ("ring-buffer .at[idx].set, 256 rows, donated", "ring", True),
        ("replay insert, not donated (a copy per call)", "insert", False),
        ("Adam step, 1M parameters, state donated", "adam", True),
    ]
    for name, kind, donate in cases:
        row = {"case": name}
        for lib in ("fusionjit", "jax"):
            if lib == "jax" and "jax" not in found:
                continue
            jax, jnp = found.get("jax", (None, None))
            np_, lax, jit = ((fnp, fusionjit.lax, fusionjit.jit) if lib == "fusionjit"
                             else (jnp, jax.lax, jax.jit))
            asarray = fnp.asarray if lib == "fusionjit" else jnp.asarray
            block = fusionjit.block_until_ready if lib == "fusionjit" else jax.block_until_ready
            fun = {"insert": _insert(lax), "ring": _ring(np_), "adam": _adam(np_)}[kind]
            f = jit(fun, donate_argnums=0 if donate else ())
            if kind == "adam":
                state = tuple(asarray(p.copy()) for p in params)
                args = (asarray(grad),)
            else:
                state = asarray(buf0.copy())
                args = (asarray(batch), np.int32(1024))
            box = {"s": state}

            def call(f=f, box=box, args=args, block=block):
                box["s"] = f(box["s"], *args)
                block(box["s"])

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # (JAX warns where it cannot donate)
                row[f"{lib}_us"] = median_seconds(call, repeats=opts.repeats) * 1e6
        if "jax_us" in row:
            row["ratio"] = row["fusionjit_us"] / row["jax_us"]
        rows.append(row)
    report("donated buffers (median per call; ratio < 1: fusionjit faster)", rows, opts.json)


if __name__ == "__main__":
    main()
