"""Fusion benchmarks, side by side in one run: a chain of 20 elementwise ops over 16M
float32, and a softmax-style row reduction, each fused (fusionjit and xla profiles),
unfused, in NumPy and in JAX (when installed), with achieved GB/s next to a plain memory
copy of the same bytes measured in the same run.

    python benchmarks/fusion.py [--n 16777216] [--rows 4096] [--json out.json]
"""

from __future__ import annotations

import argparse

import numpy as np

import fusionjit
import fusionjit.numpy as fnp
from _harness import median_seconds, peers, report


def chain20(xp, x):
    y = x
    for i in range(10):
        y = y * 1.0001 + (0.5 if i % 2 else -0.5)
    return y


def softmax(xp, x):
    m = xp.max(x, axis=1, keepdims=True)
    e = xp.exp(x - m)
    return e / xp.sum(e, axis=1, keepdims=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1 << 24, help="elements of the chain's input")
    parser.add_argument("--rows", type=int, default=4096, help="rows of the softmax input")
    parser.add_argument("--cols", type=int, default=4096, help="columns of the softmax input")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    found = peers()
    rng = np.random.default_rng(0)
    rows = []

    # --- the elementwise chain ---------------------------------------------------------
    x = rng.uniform(-1, 1, args.n).astype(np.float32)
    xa = fnp.asarray(x)
    dst = np.empty_like(x)
    bytes_moved = 2 * x.nbytes  # read the input, write the output
    t_copy = median_seconds(lambda: np.copyto(dst, x), repeats=7)
    rows.append({"case": "chain20 memory copy (np.copyto)", "ms": t_copy * 1e3,
                 "GB/s": bytes_moved / t_copy / 1e9})
    expected = chain20(np, x)
    results = {}
    for profile in ["fusionjit", "xla", "none"]:
        f = fusionjit.jit(lambda a: chain20(fnp, a), fusion=profile)
        np.testing.assert_allclose(np.asarray(f(xa)), expected, rtol=1e-5, atol=1e-5)
        t = median_seconds(lambda: f(xa), repeats=7)
        results[profile] = t
        rows.append({"case": f"chain20 fusionjit jit(fusion={profile!r})", "ms": t * 1e3,
                     "GB/s": bytes_moved / t / 1e9, "x memcpy": t / t_copy,
                     "kernels": fusionjit.testing.count_kernels(lambda a: chain20(fnp, a),
                                                                fusion=profile)(xa)})
    t_np = median_seconds(lambda: chain20(np, x), repeats=5)
    rows.append({"case": "chain20 numpy", "ms": t_np * 1e3, "GB/s": bytes_moved / t_np / 1e9,
                 "numpy/fused": t_np / results["fusionjit"]})
    if "jax" in found:
        jax, jnp = found["jax"]
        g = jax.jit(lambda a: chain20(jnp, a))
        ja = jnp.asarray(x)
        t_jax = median_seconds(lambda: g(ja).block_until_ready(), repeats=7)
        rows.append({"case": "chain20 jax.jit", "ms": t_jax * 1e3,
                     "GB/s": bytes_moved / t_jax / 1e9,
                     "jax/fused": t_jax / results["fusionjit"]})

    # --- softmax over rows -------------------------------------------------------------
    s = rng.standard_normal((args.rows, args.cols)).astype(np.float32)
    sa = fnp.asarray(s)
    s_bytes = 2 * s.nbytes
    expected = softmax(np, s)
    sm = {}
    for profile in ["fusionjit", "xla", "none"]:
        f = fusionjit.jit(lambda a: softmax(fnp, a), fusion=profile)
        np.testing.assert_allclose(np.asarray(f(sa)), expected, rtol=1e-5, atol=1e-7)
        t = median_seconds(lambda: f(sa), repeats=5)
        sm[profile] = t
        rows.append({"case": f"softmax fusionjit jit(fusion={profile!r})", "ms": t * 1e3,
                     "GB/s": s_bytes / t / 1e9,
                     "kernels": fusionjit.testing.count_kernels(lambda a: softmax(fnp, a),
                                                                fusion=profile)(sa)})
    t_np = median_seconds(lambda: softmax(np, s), repeats=3)
    rows.append({"case": "softmax numpy", "ms": t_np * 1e3, "numpy/fused": t_np / sm["fusionjit"]})
    if "jax" in found:
        jax, jnp = found["jax"]
        g = jax.jit(lambda a: softmax(jnp, a))
        ja = jnp.asarray(s)
        t_jax = median_seconds(lambda: g(ja).block_until_ready(), repeats=5)
        rows.append({"case": "softmax jax.jit", "ms": t_jax * 1e3,
                     "jax/fused": t_jax / sm["fusionjit"]})
    report(f"fusion: chain of 20 ops on float32[{args.n}], "
           f"softmax on float32[{args.rows},{args.cols}]",
           rows, args.json)


if __name__ == "__main__":
    main()
