"""Sums over float32 arrays of 16M elements in the shapes that stress a reduction's
parallelism: to one value, over rows, over columns, over a tall array's few columns and a
few long rows; and in the shapes that stress its layout (a group norm's statistics).
fusionjit vs NumPy and jax.jit (when installed), in one run, with achieved GB/s (the
input's bytes over the time).

    python benchmarks/reductions.py [--scale 1.0]
"""

from __future__ import annotations

import argparse

import numpy as np

import fusionjit
import fusionjit.numpy as fnp
from _harness import median_seconds, peers, report

# name, shape (for 16M elements), axis
CASES = [
    ("all", (1 << 24,), None),
    ("rows", (4096, 4096), 1),
    ("columns", (4096, 4096), 0),
    ("tall, 64 columns", (1 << 18, 64), 0),
    ("4 long rows", (4, 1 << 22), 1),
    # A group norm's statistics over NHWC with 8 groups of 8 channels: H, W and each group's
    # channels; and the column sums of its first half, to [.., 8, 8].
    ("group norm statistics", (64, 64, 64, 8, 8), (1, 2, 4)),
    ("columns to [64, 8, 8]", (64, 4096, 8, 8), 1),
]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the leading dimension")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    found = peers()
    rows = []
    for name, shape, axis in CASES:
        shape = (max(1, int(shape[0] * args.scale)),) + shape[1:]
        x = rng.uniform(-1, 1, shape).astype(np.float32)
        xa = fnp.asarray(x)
        f = fusionjit.jit(lambda a, axis=axis: fnp.sum(a, axis=axis))
        reduced = x.size // max(1, np.asarray(x.sum(axis=axis)).size)
        np.testing.assert_allclose(np.asarray(f(xa)), x.astype(np.float64).sum(axis=axis),
                                   rtol=1e-4, atol=1e-7 * reduced)  # float32 sums' rounding
        t_fj = median_seconds(lambda: f(xa))
        t_np = median_seconds(lambda: x.sum(axis=axis))
        row = {"sum": name, "shape": "x".join(map(str, shape)), "fusionjit_ms": t_fj * 1e3,
               "numpy_ms": t_np * 1e3, "fusionjit_GBps": x.nbytes / t_fj / 1e9,
               "numpy/fusionjit": t_np / t_fj}
        if "jax" in found:
            jax, jnp = found["jax"]
            g = jax.jit(lambda a, axis=axis: jnp.sum(a, axis=axis))
            jx = jnp.asarray(x)
            row["jax_ms"] = median_seconds(lambda: g(jx).block_until_ready()) * 1e3
            row["jax/fusionjit"] = row["jax_ms"] / row["fusionjit_ms"]
        row["kernels"] = fusionjit.testing.count_kernels(
            lambda a, axis=axis: fnp.sum(a, axis=axis))(xa)
        rows.append(row)
    report("sum of float32, 16M elements", rows, args.json)


if __name__ == "__main__":
    main()
