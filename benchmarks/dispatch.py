"""Dispatch cost of a cached jit call on tiny arrays: fusionjit vs NumPy (the op itself)
and jax.jit (when installed), in one run; then eager calls (no jit) of numpy functions on
a float32[64, 64] array against JAX's eager calls.

    python benchmarks/dispatch.py
"""

from __future__ import annotations

import argparse

import numpy as np

import fusionjit
import fusionjit.numpy as fnp
from _harness import median_seconds, peers, report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", default=None, help="write the results to this file")
    args = parser.parse_args(argv)

    x = np.ones(4, np.float32)
    y = np.full(4, 2.0, np.float32)
    rows = []

    def add(a, b):
        return a + b

    f = fusionjit.jit(add)
    xa, ya = fnp.asarray(x), fnp.asarray(y)
    t_fj = median_seconds(lambda: f(xa, ya))
    t_fj_np = median_seconds(lambda: f(x, y))
    t_fj_tree = median_seconds(lambda: g(({"a": xa, "b": ya}, [xa, 1.0])))
    t_np = median_seconds(lambda: np.add(x, y))
    rows.append({"case": "fusionjit jit(add), Array args", "us": t_fj * 1e6})
    rows.append({"case": "fusionjit jit(add), NumPy args", "us": t_fj_np * 1e6})
    rows.append({"case": "fusionjit jit, pytree of 3 arrays + float", "us": t_fj_tree * 1e6})
    rows.append({"case": "numpy add (no jit)", "us": t_np * 1e6})
    found = peers()
    if "jax" in found:
        jax, jnp = found["jax"]
        jf = jax.jit(add)
        jx, jy = jnp.asarray(x), jnp.asarray(y)
        jg = jax.jit(_tree_fn)
        t_jax = median_seconds(lambda: jf(jx, jy).block_until_ready())
        t_jax_tree = median_seconds(
            lambda: jax.block_until_ready(jg(({"a": jx, "b": jy}, [jx, 1.0]))))
        rows.append({"case": "jax.jit(add)", "us": t_jax * 1e6})
        rows.append({"case": "jax.jit, pytree of 3 arrays + float", "us": t_jax_tree * 1e6})
        rows.append({"case": "ratio jax / fusionjit (Array args)", "x": t_jax / t_fj})
        rows.append({"case": "ratio jax / fusionjit (pytree)", "x": t_jax_tree / t_fj_tree})
    rows.append({"case": "ratio numpy / fusionjit", "x": t_np / t_fj})
    report("cached jit call on float32[4]", rows, args.json)
    report("eager calls (no jit) on float32[64, 64], microseconds, medians",
           eager_rows(found), args.json and args.json.replace(".json", "_eager.json"))


EAGER = {
    "tanh(x)": lambda np_, nn, x: np_.tanh(x),
    "x + 1.0": lambda np_, nn, x: x + 1.0,
    "arcsinh(x)": lambda np_, nn, x: np_.arcsinh(x),
    "hypot(x, x)": lambda np_, nn, x: np_.hypot(x, x),
    "var(x, axis=0)": lambda np_, nn, x: np_.var(x, axis=0),
    "softmax(x)": lambda np_, nn, x: nn.softmax(x),
    "cumsum(x, axis=1)": lambda np_, nn, x: np_.cumsum(x, axis=1),
    "nn.relu(x)": lambda np_, nn, x: nn.relu(x),
    "nn.sigmoid(x)": lambda np_, nn, x: nn.sigmoid(x),
    "logsumexp(x, axis=1)": lambda np_, nn, x: nn.logsumexp(x, axis=1),
    "pad(x, 1)": lambda np_, nn, x: np_.pad(x, 1),
    "median(x, axis=1)": lambda np_, nn, x: np_.median(x, axis=1),
    "linalg.inv(x)": lambda np_, nn, x: np_.linalg.inv(x),
}


def eager_rows(found) -> list:
    """Each numpy function of EAGER called outside jit, fusionjit against JAX (each of them
    runs it as one compiled program per signature)."""
    x = np.random.default_rng(0).uniform(0.1, 0.9, (64, 64)).astype(np.float32)
    xa = fnp.asarray(x)
    rows = []
    for name, call in EAGER.items():
        row = {"case": name,
               "fusionjit_us": median_seconds(lambda: call(fnp, fusionjit.nn, xa)) * 1e6}
        if "jax" in found:
            jax, jnp = found["jax"]
            xj = jnp.asarray(x)
            row["jax_us"] = median_seconds(
                lambda: call(jnp, jax.nn, xj).block_until_ready()) * 1e6
            row["jax/fusionjit"] = row["jax_us"] / row["fusionjit_us"]
        rows.append(row)
    return rows


def _tree_fn(tree):
    d, (z, s) = tree
    return d["a"] * d["b"] + z * s


g = fusionjit.jit(_tree_fn)

if __name__ == "__main__":
    main()
