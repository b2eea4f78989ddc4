"""Convolutions side by side with JAX in one run: the three convolutions of a Nature-DQN
policy (84x84x4 pixels, NHWC) one by one, the whole forward pass and its gradient with
respect to every weight; then a ResNet-style 3x3 SAME convolution (32 channels, 32x32
pixels, batch 64), strided, its input and kernel gradient, a depthwise one, a 5x5 SAME
convolution of one channel and a transposed (lhs-dilated) one; as medians of rounds that
alternate between the two, and as fusionjit/JAX time ratios (below 1: fusionjit faster).

    python benchmarks/conv.py [--batch 32] [--only SUBSTRING] [--json out.json]
"""

from __future__ import annotations

import argparse

import numpy as np

import fusionjit
import fusionjit.numpy as fnp
from _harness import median_seconds, peers, report

DN = ("NHWC", "HWIO", "NHWC")
LAYERS = [((84, 84, 4), (8, 8, 4, 32), 4), ((20, 20, 32), (4, 4, 32, 64), 2),
          ((9, 9, 64), (3, 3, 64, 64), 1)]


def forward(lax, relu, x, w1, w2, w3, wf, wo):
    h = relu(lax.conv_general_dilated(x, w1, (4, 4), "VALID", dimension_numbers=DN))
    h = relu(lax.conv_general_dilated(h, w2, (2, 2), "VALID", dimension_numbers=DN))
    h = relu(lax.conv_general_dilated(h, w3, (1, 1), "VALID", dimension_numbers=DN))
    h = relu(h.reshape(h.shape[0], -1) @ wf)
    return h @ wo


def gradient(lax, relu, x, *params):
    """The gradient of mean(q ** 2) over the batch with respect to every weight, as one
    vector (a training step's backward pass: the convolutions' transposes)."""
    import fusionjit as fj
    grad = fj.grad if lax is fj.lax else __import__("jax").grad
    g = grad(lambda p: (forward(lax, relu, x, *p) ** 2).mean())(list(params))
    return lax.concatenate([a.reshape(-1) for a in g], 0)


def conv(lax, x, w, strides=(1, 1), padding="SAME", **kw):
    return lax.conv_general_dilated(x, w, strides, padding, dimension_numbers=DN, **kw)


def conv_gradient(lax, x, w):
    """The gradient of sum(conv(x, w) ** 2) with respect to the input and the kernel."""
    import fusionjit as fj
    grad = fj.grad if lax is fj.lax else __import__("jax").grad
    return grad(lambda x, w: (conv(lax, x, w) ** 2).sum(), (0, 1))(x, w)


def interleaved_medians(fns, rounds=5):
    """Per function, the median over rounds of median_seconds, the functions taking turns
    within each round (so that a busy spell of the machine falls on all of them)."""
    times = [[] for _ in fns]
    for _ in range(rounds):
        for t, fn in zip(times, fns):
            t.append(median_seconds(fn, repeats=3))
    return [sorted(t)[len(t) // 2] for t in times]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--only", default="", help="the cases whose names contain this")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    found = peers()
    rng = np.random.default_rng(0)
    rows = []
    cases = []
    for in_shape, w_shape, stride in LAYERS:
        x = rng.uniform(size=(args.batch,) + in_shape).astype(np.float32)
        w = rng.normal(0, 0.1, w_shape).astype(np.float32)
        cases.append((f"conv {w_shape[0]}x{w_shape[1]}/{stride} {in_shape}",
                      lambda lax, relu, x, w, s=stride: lax.conv_general_dilated(
                          x, w, (s, s), "VALID", dimension_numbers=DN), (x, w)))
    params = [rng.normal(0, 0.1, s).astype(np.float32) for _, s, _ in LAYERS]
    params += [rng.normal(0, 0.01, (7 * 7 * 64, 512)).astype(np.float32),
               rng.normal(0, 0.01, (512, 6)).astype(np.float32)]
    obs = rng.uniform(size=(args.batch, 84, 84, 4)).astype(np.float32)
    cases.append(("Nature-DQN forward", forward, (obs, *params)))
    cases.append(("Nature-DQN gradient", gradient, (obs, *params)))
    x = rng.normal(size=(64, 32, 32, 32)).astype(np.float32)
    w = rng.normal(0, 0.1, (3, 3, 32, 32)).astype(np.float32)
    cases += [
        ("conv 3x3 SAME (32, 32, 32) x64", lambda lax, relu, x, w: conv(lax, x, w), (x, w)),
        ("conv 3x3/2 SAME (32, 32, 32) x64",
         lambda lax, relu, x, w: conv(lax, x, w, (2, 2)), (x, w)),
        ("conv 3x3 SAME gradient (x and w)", lambda lax, relu, x, w: conv_gradient(lax, x, w),
         (x, w)),
        ("depthwise 3x3 SAME (32, 32, 32) x64",
         lambda lax, relu, x, w: conv(lax, x, w, feature_group_count=32),
         (x, rng.normal(0, 0.1, (3, 3, 1, 32)).astype(np.float32))),
        ("conv 5x5 SAME (28, 28, 1) x32", lambda lax, relu, x, w: conv(lax, x, w),
         (rng.normal(size=(32, 28, 28, 1)).astype(np.float32),
          rng.normal(0, 0.1, (5, 5, 1, 32)).astype(np.float32))),
        ("transposed 3x3 x2 (16, 16, 64) x32",
         lambda lax, relu, x, w: conv(lax, x, w, (1, 1), ((1, 2), (1, 2)), lhs_dilation=(2, 2)),
         (rng.normal(size=(32, 16, 16, 64)).astype(np.float32),
          rng.normal(0, 0.1, (3, 3, 64, 32)).astype(np.float32)))]
    for name, fn, inputs in cases:
        if args.only not in name:
            continue
        f = fusionjit.jit(lambda *a, fn=fn: fn(fusionjit.lax, fusionjit.nn.relu, *a))
        fa = [fnp.asarray(a) for a in inputs]
        timed = [lambda: [np.asarray(o) for o in fusionjit.tree_util.tree_leaves(f(*fa))]]
        if "jax" in found:
            jax, jnp = found["jax"]
            g = jax.jit(lambda *a, fn=fn: fn(jax.lax, jax.nn.relu, *a))
            ja = [jnp.asarray(a) for a in inputs]
            for u, v in zip(fusionjit.tree_util.tree_leaves(f(*fa)),
                            jax.tree_util.tree_leaves(g(*ja))):
                # (A kernel gradient sums 65536 products: rounding relative to its scale.)
                v = np.asarray(v)
                np.testing.assert_allclose(np.asarray(u), v, rtol=1e-3,
                                           atol=1e-3 * max(1.0, float(np.abs(v).max())))
            timed.append(lambda: jax.block_until_ready(g(*ja)))
        t, *tj = interleaved_medians(timed)
        row = {"case": name, "fusionjit ms": t * 1e3}
        if tj:
            row.update({"jax ms": tj[0] * 1e3, "fusionjit/jax": t / tj[0]})
        rows.append(row)
    report("convolutions (NHWC, batch %d)" % args.batch, rows, args.json)


if __name__ == "__main__":
    main()
