"""Training steps side by side with JAX in one run: ``value_and_grad`` of a loss and an SGD
update, jitted as one program: a small MLP regression (an RL critic's size), a softmax
cross-entropy classifier, a PPO-style clipped policy loss with a value head, and an RNN over
time (a scan, differentiated by a reverse scan). The gradients are compared with JAX's; the
table gives medians of several runs and JAX's time over fusionjit's (above 1: fusionjit is
faster).

    python benchmarks/training.py [--repeats 7]
"""

from __future__ import annotations

import argparse

import numpy as np

import fusionjit
import fusionjit.numpy as fnp
from _harness import median_seconds, peers, report


def mlp_regression(np_, lax, p, x, y):
    w1, b1, w2, b2 = p
    return np_.mean((np_.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2)


def classifier(np_, lax, p, x, y):
    w1, b1, w2, b2 = p
    logits = np_.maximum(x @ w1 + b1, 0.0) @ w2 + b2
    m = np_.max(logits, axis=-1, keepdims=True)
    logp = logits - m - np_.log(np_.sum(np_.exp(logits - m), axis=-1, keepdims=True))
    return -np_.mean(np_.sum(logp * y, axis=-1))


def ppo(np_, lax, p, x, y):
    w1, b1, w2, b2 = p
    h = np_.tanh(x @ w1 + b1)
    out = h @ w2 + b2
    logits, value = out[:, :-1], out[:, -1]
    m = np_.max(logits, axis=-1, keepdims=True)
    logp_all = logits - m - np_.log(np_.sum(np_.exp(logits - m), axis=-1, keepdims=True))
    logp = np_.sum(logp_all * y[:, :-2], axis=-1)
    old, adv = y[:, -2], y[:, -1]
    ratio = np_.exp(logp - old)
    pg = -np_.mean(np_.minimum(ratio * adv, np_.clip(ratio, 0.8, 1.2) * adv))
    entropy = -np_.mean(np_.sum(np_.exp(logp_all) * logp_all, axis=-1))
    return pg + 0.5 * np_.mean((value - adv) ** 2) - 0.01 * entropy


def rnn(np_, lax, p, x, y):
    w1, b1, w2, b2 = p

    def body(h, xt):
        h = np_.tanh(xt @ w1 + h @ w2 + b1)
        return h, h

    _, hs = lax.scan(body, np_.zeros((x.shape[1], w2.shape[0]), x.dtype), x)
    return np_.mean((hs[..., 0] + b2[0] - y) ** 2)


def cases(rng):
    f32 = lambda *s: (rng.standard_normal(s) * 0.3).astype(np.float32)  # noqa: E731
    onehot = np.eye(6, dtype=np.float32)[rng.integers(0, 6, 4096)]
    ppo_y = np.concatenate([np.eye(6, dtype=np.float32)[rng.integers(0, 6, 4096)],
                            f32(4096, 2)], axis=1)
    return [
        ("mlp regression [4096, 32] 64 tanh 1", mlp_regression,
         (f32(32, 64), f32(64), f32(64, 1), f32(1)), (f32(4096, 32), f32(4096, 1))),
        ("classifier [4096, 64] 256 relu 6", classifier,
         (f32(64, 256), f32(256), f32(256, 6), f32(6)), (f32(4096, 64), onehot)),
        ("ppo loss [4096, 8] 64 tanh 6+1", ppo,
         (f32(8, 64), f32(64), f32(64, 7), f32(7)), (f32(4096, 8), ppo_y)),
        ("rnn [32 steps, 256, 16] 32 tanh", rnn,
         (f32(16, 32), f32(32), f32(32, 32), f32(1)), (f32(32, 256, 16), f32(32, 256))),
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    found = peers()
    rows = []
    for name, loss, params, data in cases(np.random.default_rng(0)):
        def step(p, x, y, loss=loss):
            v, g = fusionjit.value_and_grad(lambda p: loss(fnp, fusionjit.lax, p, x, y))(p)
            return v, tuple(a - 0.01 * b for a, b in zip(p, g))

        f = fusionjit.jit(step)
        v, new = f(params, *data)
        t = median_seconds(lambda: fusionjit.block_until_ready(f(params, *data)),
                           repeats=args.repeats)
        row = {"case": name, "fusionjit_us": t * 1e6}
        if "jax" in found:
            jax, jnp = found["jax"]

            def jstep(p, x, y, loss=loss):
                v, g = jax.value_and_grad(lambda p: loss(jnp, jax.lax, p, x, y))(p)
                return v, tuple(a - 0.01 * b for a, b in zip(p, g))

            g = jax.jit(jstep)
            jp, jd = tuple(jnp.asarray(a) for a in params), tuple(jnp.asarray(a) for a in data)
            jv, jnew = g(jp, *jd)
            np.testing.assert_allclose(float(v), float(jv), rtol=1e-4)
            for a, b in zip(new, jnew):
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-3, atol=1e-5)
            t_jax = median_seconds(lambda: jax.block_until_ready(g(jp, *jd)),
                                   repeats=args.repeats)
            row.update({"jax_us": t_jax * 1e6, "jax/fusionjit": t_jax / t})
        rows.append(row)
    report("training steps (value_and_grad + SGD), float32, medians", rows)


if __name__ == "__main__":
    main()
