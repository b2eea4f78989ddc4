"""Gathers, scatters and 16-bit floats: an embedding lookup ``table[idx]`` (one gather), a
histogram ``zeros(bins).at[ids].add(v)`` (one scatter), updates of a large array (a scatter
into a copy; a permutation with ``unique_indices``) and an elementwise kernel in float32,
float16 and bfloat16, fusionjit vs NumPy and jax.jit (when installed), in one run.

    python benchmarks/indexing.py
"""

from __future__ import annotations

import argparse

import ml_dtypes
import numpy as np

import fusionjit
import fusionjit.numpy as fnp
from _harness import median_seconds, peers, report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    found = peers()
    rows = []

    for rows_, dim, n in [(1000, 64, 4096), (50_000, 64, 4096)]:
        table = rng.standard_normal((rows_, dim)).astype(np.float32)
        idx = rng.integers(0, rows_, n).astype(np.int32)
        f = fusionjit.jit(lambda t, i: t[i])
        ta, ia = fnp.asarray(table), fnp.asarray(idx)
        np.testing.assert_array_equal(np.asarray(f(ta, ia)), table[idx])
        row = {"case": f"gather {n} rows of a {rows_}x{dim} table",
               "fusionjit_us": median_seconds(lambda: f(ta, ia)) * 1e6,
               "numpy_us": median_seconds(lambda: table[idx]) * 1e6}
        if "jax" in found:
            jax, jnp = found["jax"]
            g = jax.jit(lambda t, i: t[i])
            tj, ij = jnp.asarray(table), jnp.asarray(idx)
            row["jax_us"] = median_seconds(lambda: g(tj, ij).block_until_ready()) * 1e6
            row["jax/fusionjit"] = row["jax_us"] / row["fusionjit_us"]
        rows.append(row)

    for bins, m in [(100, 4096), (10_000, 100_000)]:
        ids = rng.integers(0, bins, m).astype(np.int32)
        vals = rng.standard_normal(m).astype(np.float32)
        f = fusionjit.jit(lambda v, i: fnp.zeros(bins, fnp.float32).at[i].add(v))
        va, ia = fnp.asarray(vals), fnp.asarray(ids)

        def np_add_at():
            out = np.zeros(bins, np.float32)
            np.add.at(out, ids, vals)
            return out
        np.testing.assert_array_equal(np.asarray(f(va, ia)), np_add_at())
        row = {"case": f"histogram of {m} values into {bins} bins",
               "fusionjit_us": median_seconds(lambda: f(va, ia)) * 1e6,
               "numpy_us": median_seconds(np_add_at) * 1e6}
        if "jax" in found:
            jax, jnp = found["jax"]
            g = jax.jit(lambda v, i: jnp.zeros(bins, jnp.float32).at[i].add(v))
            vj, ij = jnp.asarray(vals), jnp.asarray(ids)
            row["jax_us"] = median_seconds(lambda: g(vj, ij).block_until_ready()) * 1e6
            row["jax/fusionjit"] = row["jax_us"] / row["fusionjit_us"]
        rows.append(row)

    # Updates of a large array: 3,000 adds into a copy of a 4M argument (the sliced plan:
    # threads copy and update their own slices), and a permutation written with
    # unique_indices into a temporary (in place, one unit per update).
    n = 1 << 22
    x = rng.standard_normal(n).astype(np.float32)
    ids = rng.integers(0, n, 3000).astype(np.int32)
    v = rng.standard_normal(3000).astype(np.float32)
    perm = rng.permutation(n).astype(np.int32)
    w = rng.standard_normal(n).astype(np.float32)
    cases = [(f"x.at[ids].add(v): 3000 updates of float32[{n}]", lambda x, i, v: x.at[i].add(v),
              (x, ids, v)),
             (f"(x * 2).at[perm].set(w, unique_indices=True), float32[{n}]",
              lambda x, i, v: (x * 2).at[i].set(v, unique_indices=True), (x, perm, w))]
    for case, fn, args_ in cases:
        f = fusionjit.jit(fn)
        fa = [fnp.asarray(a) for a in args_]
        row = {"case": case, "fusionjit_us": median_seconds(lambda: f(*fa)) * 1e6}
        if "jax" in found:
            jax, jnp = found["jax"]
            g = jax.jit(fn)
            ja = [jnp.asarray(a) for a in args_]
            np.testing.assert_array_equal(np.asarray(f(*fa)), np.asarray(g(*ja)))
            row["jax_us"] = median_seconds(lambda: g(*ja).block_until_ready()) * 1e6
            row["jax/fusionjit"] = row["jax_us"] / row["fusionjit_us"]
        rows.append(row)

    for d in (np.float32, np.float16, ml_dtypes.bfloat16):
        a = rng.standard_normal(n).astype(d)
        f = fusionjit.jit(lambda a, b: fnp.tanh(a * b + 1.0) * 0.5)
        aa, ba = fnp.asarray(a), fnp.asarray(np.ones(n, d))
        row = {"case": f"tanh(a * b + 1) * 0.5 on {np.dtype(d).name}[{n}]",
               "fusionjit_us": median_seconds(lambda: f(aa, ba)) * 1e6}
        if "jax" in found:
            jax, jnp = found["jax"]
            g = jax.jit(lambda a, b: jnp.tanh(a * b + 1.0) * 0.5)
            aj, bj = jnp.asarray(a), jnp.asarray(np.ones(n, d))
            row["jax_us"] = median_seconds(lambda: g(aj, bj).block_until_ready()) * 1e6
            row["jax/fusionjit"] = row["jax_us"] / row["fusionjit_us"]
        rows.append(row)
    report("gathers, scatters and 16-bit floats", rows, args.json)


if __name__ == "__main__":
    main()
