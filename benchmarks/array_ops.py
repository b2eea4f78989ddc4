"""Array functions users call between their fused kernels: sort and argsort, cumsum along
either axis, searchsorted, transposes (a power-of-two square, and tall narrow ones), top_k,
an argmax written as a max and a min over few long rows, and data movement along the last
axis (a concatenate of gate blocks, the gradient of a split, strided slices, a flip,
rotary pairs, repeat, a group norm's centring),
fusionjit vs NumPy and jax.jit (when installed) in one run, with fusionjit's first call
(trace and compile) apart.

    python benchmarks/array_ops.py [--only top_k]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import fusionjit
import fusionjit.numpy as fnp
from _harness import median_seconds, peers, report


def _top_k(xp, k):
    """The k largest values of each row (lax.top_k's first result)."""
    if xp is np:
        return lambda a: -np.sort(-a, axis=-1)[..., :k]
    lax = fusionjit.lax if xp is fnp else __import__("jax").lax
    return lambda a: lax.top_k(a, k)[0]


def _first_argmax(xp):
    """Each row's first maximum, written as a max and a min (a mask of the maxima)."""
    return lambda a: xp.where(a == a.max(1, keepdims=True), xp.arange(a.shape[1]),
                              a.shape[1]).min(1)


def _split_gradient(xp):
    """The gradient of sum(tanh(z0) z1 + z2 w) by z, for z split in three along its last
    axis (the cotangents' pads summed, or their concatenate)."""
    def loss(z, w):
        z0, z1, z2 = xp.split(z, 3, axis=-1)
        return xp.sum(xp.tanh(z0) * z1 + z2 * w)
    if xp is np:
        def grad(z, w):
            z0, z1, _ = np.split(z, 3, axis=-1)
            t = np.tanh(z0)
            return np.concatenate([(1 - t * t) * z1, t, w], axis=-1)
        return grad
    return (fusionjit.grad if xp is fnp else __import__("jax").grad)(loss)


def _gates(xp):
    return lambda a, b, c, d: xp.concatenate([1 / (1 + xp.exp(-a)), xp.tanh(b), c * 2, d],
                                             axis=-1)


def _rotary(xp):
    """Rotary position pairs: (a, b) -> (a c - b s, a s + b c), interleaved."""
    def rotate(x):
        pairs = x.reshape(x.shape[0], -1, 2)
        a, b = pairs[..., 0], pairs[..., 1]
        return xp.stack([a * 0.6 - b * 0.8, a * 0.8 + b * 0.6], -1).reshape(x.shape)
    return rotate


def _minus_group_mean(xp):
    """A group norm's centring over NHWC: 8 groups of 8 channels."""
    def centre(x):
        g = x.reshape(x.shape[:3] + (8, 8))
        return (g - g.mean((1, 2, 4), keepdims=True)).reshape(x.shape)
    return centre


def cases(rng):
    x1 = rng.standard_normal(65536).astype(np.float32)
    x2 = rng.standard_normal((1024, 1024)).astype(np.float32)
    few_long = rng.standard_normal((8, 50000)).astype(np.float32)
    long_row = rng.standard_normal(100000).astype(np.float32)
    table = np.sort(x1)
    queries = rng.standard_normal(1000).astype(np.float32)
    return [
        ("sort of 65,536 float32", lambda xp: xp.sort, (x1,)),
        ("argsort of 65,536 float32",
         lambda xp: (lambda a: np.argsort(a, kind="stable")) if xp is np else xp.argsort, (x1,)),
        ("cumsum of 65,536 float32", lambda xp: xp.cumsum, (x1,)),
        ("cumsum of 1024 x 1024 along axis 0", lambda xp: lambda a: xp.cumsum(a, axis=0), (x2,)),
        ("cumsum of 1024 x 1024 along axis 1", lambda xp: lambda a: xp.cumsum(a, axis=1), (x2,)),
        ("searchsorted of 1,000 values in 65,536",
         lambda xp: lambda a, v: xp.searchsorted(a, v), (table, queries)),
        ("transpose of 1024 x 1024 float32",
         lambda xp: lambda a: xp.ascontiguousarray(a.T) if xp is np else a.T, (x2,)),
        ("top_k, k = 10 of 100,000 float32", lambda xp: _top_k(xp, 10), (long_row,)),
        ("top_k, k = 8 of 512 x 512 float32", lambda xp: _top_k(xp, 8), (x2[:512, :512],)),
        # Few long rows (a language model's vocabulary), and many short ones.
        *[(f"top_k, k = {k} of {r} x {n} float32", lambda xp, k=k: _top_k(xp, k),
           (rng.standard_normal((r, n)).astype(np.float32),))
          for r, n, k in ((8, 32000, 1), (8, 32000, 4), (8, 32000, 16), (8, 32000, 50),
                          (64, 32768, 64), (8, 128000, 4), (256, 1000, 10))],
        ("first argmax by max and min, 8 x 50,000", _first_argmax, (few_long,)),
        # Data movement (perf hunt of the twenty-seventh session: tiles of 16 rows split
        # between threads by gathers, every operand of a concatenate read for every vector,
        # strided lanes gathered).
        *[(f"transpose of {r} x {c} float32",
           lambda xp: lambda a: xp.ascontiguousarray(a.T) if xp is np else a.T,
           (rng.standard_normal((r, c)).astype(np.float32),))
          for r, c in ((65536, 16), (16384, 64), (4096, 64))],
        ("concatenate of 4 gate blocks of 1024 x 128 along the last axis", _gates,
         tuple(rng.standard_normal((1024, 128)).astype(np.float32) for _ in range(4))),
        ("gradient of a split in 3 along the last axis, 2048 x 384", _split_gradient,
         (rng.standard_normal((2048, 384)).astype(np.float32),
          rng.standard_normal((2048, 128)).astype(np.float32))),
        ("x[:, ::2] * x[:, 1::2] of 4096 x 512", lambda xp: lambda a: a[:, ::2] * a[:, 1::2],
         (rng.standard_normal((4096, 512)).astype(np.float32),)),
        ("flip of 4096 x 256 along the last axis", lambda xp: lambda a: xp.flip(a, -1),
         (rng.standard_normal((4096, 256)).astype(np.float32),)),
        # Rows a reshape splits, read at constant lane patterns (twenty-eighth session:
        # gathered before): rotary pairs, repeat, a group's mean over its channels.
        ("rotary pairs of 4096 x 256", _rotary,
         (rng.standard_normal((4096, 256)).astype(np.float32),)),
        ("repeat(x, 2, -1) of 4096 x 128", lambda xp: lambda a: xp.repeat(a, 2, axis=-1),
         (rng.standard_normal((4096, 128)).astype(np.float32),)),
        ("x - its 8 group means, 32 x 32 x 32 x 64", _minus_group_mean,
         (rng.standard_normal((32, 32, 32, 64)).astype(np.float32),)),
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", default=None)
    parser.add_argument("--only", default="", help="run the cases whose name holds this")
    args = parser.parse_args(argv)
    found = peers()
    rows = []
    for name, make, inputs in cases(np.random.default_rng(0)):
        if args.only not in name:
            continue
        f = fusionjit.jit(make(fnp))
        fa = tuple(fnp.asarray(a) for a in inputs)
        start = time.perf_counter()
        got = np.asarray(f(*fa))
        first = time.perf_counter() - start
        want = make(np)(*inputs)
        if np.issubdtype(want.dtype, np.floating):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)
        else:
            np.testing.assert_array_equal(got, want)
        row = {"case": name, "fusionjit_first_call_s": first,
               "fusionjit_us": median_seconds(lambda: f(*fa)) * 1e6,
               "numpy_us": median_seconds(lambda: make(np)(*inputs)) * 1e6}
        if "jax" in found:
            jax, jnp = found["jax"]
            g = jax.jit(make(jnp))
            ja = tuple(jnp.asarray(a) for a in inputs)
            g(*ja).block_until_ready()
            row["jax_us"] = median_seconds(lambda: g(*ja).block_until_ready()) * 1e6
            row["jax/fusionjit"] = row["jax_us"] / row["fusionjit_us"]
        rows.append(row)
    report("array functions between kernels", rows, args.json)


if __name__ == "__main__":
    main()
