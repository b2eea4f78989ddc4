"""Convolutions side by side with JAX in one run: the three convolutions of a Nature-DQN
policy (84x84x4 pixels, NHWC) one by one, the whole forward pass and its gradient with
respect to every weight, as medians and as fusionjit/JAX time ratios (below 1: fusionjit
faster).

    python benchmarks/conv.py [--batch 32] [--json out.json]
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=32)
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
    for name, fn, inputs in cases:
        f = fusionjit.jit(lambda *a, fn=fn: fn(fusionjit.lax, fusionjit.nn.relu, *a))
        fa = [fnp.asarray(a) for a in inputs]
        t = median_seconds(lambda: np.asarray(f(*fa)), repeats=7)
        row = {"case": name, "fusionjit ms": t * 1e3}
        if "jax" in found:
            jax, jnp = found["jax"]
            g = jax.jit(lambda *a, fn=fn: fn(jax.lax, jax.nn.relu, *a))
            ja = [jnp.asarray(a) for a in inputs]
            np.testing.assert_allclose(np.asarray(f(*fa)), np.asarray(g(*ja)), rtol=1e-3,
                                       atol=1e-3)
            tj = median_seconds(lambda: g(*ja).block_until_ready(), repeats=7)
            row.update({"jax ms": tj * 1e3, "fusionjit/jax": t / tj})
        rows.append(row)
    report("convolutions (NHWC, batch %d)" % args.batch, rows, args.json)


if __name__ == "__main__":
    main()
