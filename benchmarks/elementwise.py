"""One elementwise op on 1M float32 (memory-bound add, compute-bound exp and sin):
fusionjit vs NumPy and jax.jit (when installed), in one run, with achieved GB/s.

    python benchmarks/elementwise.py [--n 1048576]
"""

from __future__ import annotations

import argparse

import numpy as np

import fusionjit
import fusionjit.numpy as fnp
from _harness import median_seconds, peers, report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1 << 20)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    n = args.n
    rng = np.random.default_rng(0)
    x = rng.uniform(-3, 3, n).astype(np.float32)
    y = rng.uniform(-3, 3, n).astype(np.float32)
    xa, ya = fnp.asarray(x), fnp.asarray(y)
    found = peers()
    cases = [
        ("add", lambda a, b: a + b, np.add, 3),
        ("exp", lambda a, b: fnp.exp(a), lambda a, b: np.exp(a), 2),
        ("sin", lambda a, b: fnp.sin(a), lambda a, b: np.sin(a), 2),
    ]
    rows = []
    for name, fj_fn, np_fn, arrays in cases:
        f = fusionjit.jit(fj_fn)
        np.testing.assert_allclose(np.asarray(f(xa, ya)), np_fn(x, y), rtol=2e-6, atol=2e-6)
        t_fj = median_seconds(lambda: f(xa, ya))
        t_np = median_seconds(lambda: np_fn(x, y))
        row = {"op": name, "fusionjit_us": t_fj * 1e6, "numpy_us": t_np * 1e6,
               "fusionjit_GBps": arrays * 4 * n / t_fj / 1e9, "numpy/fusionjit": t_np / t_fj}
        if "jax" in found:
            jax, jnp = found["jax"]
            jfn = {"add": lambda a, b: a + b, "exp": lambda a, b: jnp.exp(a),
                   "sin": lambda a, b: jnp.sin(a)}[name]
            g = jax.jit(jfn)
            jx, jy = jnp.asarray(x), jnp.asarray(y)
            row["jax_us"] = median_seconds(lambda: g(jx, jy).block_until_ready()) * 1e6
            row["jax/fusionjit"] = row["jax_us"] / row["fusionjit_us"]
        rows.append(row)
    report(f"one elementwise op on float32[{n}]", rows, args.json)


if __name__ == "__main__":
    main()
