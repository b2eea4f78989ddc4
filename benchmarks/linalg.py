"""Small dense linear algebra, fusionjit (its own loops: Householder QR, Cholesky, Jacobi
eigh and svd) vs jax.jit (LAPACK) when installed, in one run: the matrices of ML and RL
code (covariances, preconditioners, batches of small systems; batches of 8 or more are
factorised with the batch as the vector dimension, see _src/numpy/linalg_lanes.py).

    python benchmarks/linalg.py [--repeats 7]
"""

from __future__ import annotations

import argparse

import numpy as np

import fusionjit
import fusionjit.numpy as fnp
from _harness import median_seconds, peers, report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", default=None)
    opts = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    found = peers()

    def spd(*shape):
        a = rng.standard_normal(shape).astype(np.float32)
        return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1], dtype=np.float32)

    cases = [
        ("eigh 32x32", lambda np_: np_.linalg.eigh, spd(32, 32)),
        ("eigh 256 x 8x8", lambda np_: np_.linalg.eigh, spd(256, 8, 8)),
        ("svd 64x64 (reduced)", lambda np_: lambda a: np_.linalg.svd(a, full_matrices=False),
         rng.standard_normal((64, 64)).astype(np.float32)),
        ("svdvals 128x32", lambda np_: lambda a: np_.linalg.svd(a, compute_uv=False),
         rng.standard_normal((128, 32)).astype(np.float32)),
        ("cholesky 1024 x 6x6", lambda np_: np_.linalg.cholesky, spd(1024, 6, 6)),
        ("cholesky 4096 x 8x8", lambda np_: np_.linalg.cholesky, spd(4096, 8, 8)),
        ("cholesky 256 x 24x24", lambda np_: np_.linalg.cholesky, spd(256, 24, 24)),
        ("solve 4096 x 8x8", lambda np_: lambda a: np_.linalg.solve(a, a[..., :2]),
         rng.standard_normal((4096, 8, 8)).astype(np.float32)),
        ("solve 256 x 24x24", lambda np_: lambda a: np_.linalg.solve(a, a[..., :2]),
         rng.standard_normal((256, 24, 24)).astype(np.float32)),
        ("solve 24x24", lambda np_: lambda a: np_.linalg.solve(a, a[..., :2]),
         rng.standard_normal((24, 24)).astype(np.float32)),
        ("qr 128x32", lambda np_: np_.linalg.qr, rng.standard_normal((128, 32)).astype(np.float32)),
    ]
    rows = []
    for name, make, a in cases:
        f = fusionjit.jit(make(fnp))
        x = fnp.asarray(a)
        row = {"case": name, "fusionjit_us": median_seconds(
            lambda: fusionjit.block_until_ready(f(x)), repeats=opts.repeats) * 1e6}
        if "jax" in found:
            jax, jnp = found["jax"]
            g = jax.jit(make(jnp))
            y = jnp.asarray(a)
            row["jax_us"] = median_seconds(lambda: jax.block_until_ready(g(y)),
                                           repeats=opts.repeats) * 1e6
            row["ratio"] = row["fusionjit_us"] / row["jax_us"]
        rows.append(row)
    report("small dense linear algebra (median per call; ratio < 1: fusionjit faster)", rows,
           opts.json)


if __name__ == "__main__":
    main()
