"""vmap side by side with JAX in one run: programs written for one example and vectorised with
``vmap`` (jitted), timed against the same program written batched by hand (fusionjit) and
against ``jax.jit(jax.vmap(...))``. Outputs are compared with JAX's and the hand-batched
ones; the table gives medians of several runs, the hand-batched time over the vmapped one
(1: vmap costs nothing) and JAX's time over fusionjit's (above 1: fusionjit is faster).

    python benchmarks/vmap.py [--repeats 7]
"""

from __future__ import annotations

import argparse

import numpy as np

import fusionjit
import fusionjit.numpy as fnp
from _harness import median_seconds, peers, report


def mlp(np_, lax, w1, b1, w2, x):
    return np_.tanh(x @ w1 + b1) @ w2


def layer_norm(np_, lax, g, x):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np_.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g


def per_example_grad(np_, lax, w1, b1, w2, x, y, grad=None):
    return grad(lambda w: np_.sum((np_.tanh(x @ w + b1) @ w2 - y) ** 2))(w1)


def cartpole(np_, lax, state, actions):
    """100 steps of one CartPole environment (the physics of benchmarks/cartpole)."""
    def step(s, a):
        x, x_dot, theta, theta_dot = s[0], s[1], s[2], s[3]
        force = np_.where(a, 10.0, -10.0)
        cos, sin = np_.cos(theta), np_.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sin) / 1.1
        acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * acc * cos / 1.1
        new = np_.stack([x + 0.02 * x_dot, x_dot + 0.02 * x_acc, theta + 0.02 * theta_dot,
                         theta_dot + 0.02 * acc])
        done = (np_.abs(new[0]) > 2.4) | (np_.abs(new[2]) > 0.2095)
        return np_.where(done, np_.zeros_like(new), new), done
    return lax.scan(step, state, actions)


def window(np_, lax, x, i):
    return lax.dynamic_slice(x, (i,), (8,)).sum()


def newton_sqrt(np_, lax, a):
    """A while loop whose trip count differs per example."""
    def body(c):
        x, n = c
        return 0.5 * (x + a / x), n + 1
    return lax.while_loop(lambda c: np_.abs(c[0] * c[0] - a) > 1e-4 * a, body, (a, 0))


def cases(rng):
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    w1, b1, w2 = f32(32, 64) * 0.2, f32(64), f32(64, 8) * 0.2
    state = rng.uniform(-0.05, 0.05, (4096, 4)).astype(np.float32)
    actions = rng.random((4096, 100)) < 0.5
    return [
        # (name, per-example f, args, in_axes, hand-batched f or None)
        ("mlp [8192, 32] 64 tanh 8", mlp, (w1, b1, w2, f32(8192, 32)), (None, None, None, 0),
         mlp),
        ("layer norm [8192, 256]", layer_norm, (f32(256), f32(8192, 256)), (None, 0),
         layer_norm),
        ("per-example gradients [2048, 32]", per_example_grad,
         (w1, b1, w2, f32(2048, 32), f32(2048, 8)), (None, None, None, 0, 0), None),
        ("cartpole, 4096 envs x 100 steps", cartpole, (state, actions), 0,
         lambda np_, lax, s, a: _hand_cartpole(np_, lax, s, a)),
        ("dynamic_slice at per-example starts [8192, 64]", window,
         (f32(8192, 64), rng.integers(0, 56, 8192).astype(np.int32)), 0, None),
        ("while loop, per-example trip counts [65536]", newton_sqrt,
         (rng.uniform(0.01, 100, 65536).astype(np.float32),), 0, None),
    ]


def _hand_cartpole(np_, lax, state, actions):
    final, done = cartpole(np_, lax, state.T, actions.T)
    return final.T, done.T


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    found = peers()
    rows = []
    for name, f, data, in_axes, hand in cases(np.random.default_rng(0)):
        def ours(*a, f=f):
            return f(fnp, fusionjit.lax, *a, **(
                {"grad": fusionjit.grad} if f is per_example_grad else {}))

        g = fusionjit.jit(fusionjit.vmap(ours, in_axes=in_axes))
        out = g(*data)
        t = median_seconds(lambda: fusionjit.block_until_ready(g(*data)), repeats=args.repeats)
        row = {"case": name, "vmap_us": t * 1e6}
        if hand is not None:
            h = fusionjit.jit(lambda *a, hand=hand: hand(fnp, fusionjit.lax, *a))
            for a, b in zip(fusionjit.tree_util.tree_leaves(h(*data)),
                            fusionjit.tree_util.tree_leaves(out)):
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
            t_hand = median_seconds(lambda: fusionjit.block_until_ready(h(*data)),
                                    repeats=args.repeats)
            row.update({"hand_us": t_hand * 1e6, "hand/vmap": t_hand / t})
        if "jax" in found:
            jax, jnp = found["jax"]

            def theirs(*a, f=f):
                return f(jnp, jax.lax, *a, **({"grad": jax.grad} if f is per_example_grad
                                              else {}))

            j = jax.jit(jax.vmap(theirs, in_axes=in_axes))
            jd = tuple(jnp.asarray(a) for a in data)
            for a, b in zip(jax.tree_util.tree_leaves(j(*jd)),
                            fusionjit.tree_util.tree_leaves(out)):
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-4)
            t_jax = median_seconds(lambda: jax.block_until_ready(j(*jd)), repeats=args.repeats)
            row.update({"jax_us": t_jax * 1e6, "jax/fusionjit": t_jax / t})
        rows.append(row)
    report("vmap, float32, medians", rows)


if __name__ == "__main__":
    main()
