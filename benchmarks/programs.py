"""Everyday programs side by side with JAX in one run: softmax and layer norm (long, short
and batch-of-one rows), MLP layers (wide and RL-sized, with a narrow output head), a PPO
loss, cross-entropies, a logsumexp and a policy's entropy over few actions, matrix
products in the layouts programs write them (x @ w over a batch of sequences, A^T B,
two contracting dimensions, a value head, matrix-vector and vector-matrix), attention.
Each is jitted by fusionjit (default profile) and by JAX (when installed) on the same
inputs; the results are compared, and the table gives medians of several runs and JAX's
time over fusionjit's (above 1: fusionjit is faster).

    python benchmarks/programs.py [--repeats 7] [--json out.json]
"""

from __future__ import annotations

import argparse

import numpy as np

import fusionjit
import fusionjit.numpy as fnp
from _harness import median_seconds, peers, report


def softmax(np_, x):
    m = np_.max(x, axis=-1, keepdims=True)
    e = np_.exp(x - m)
    return e / np_.sum(e, axis=-1, keepdims=True)


def layernorm(np_, x, g, b):
    mu = x.mean(-1, keepdims=True)
    v = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np_.sqrt(v + 1e-5) * g + b


def mlp(np_, x, w1, b1, w2, b2):
    return np_.tanh(x @ w1 + b1) @ w2 + b2


def ppo_loss(np_, logp, old_logp, adv, ret, value):
    ratio = np_.exp(logp - old_logp)
    a = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg = -np_.minimum(ratio * a, np_.clip(ratio, 0.8, 1.2) * a).mean()
    return pg + 0.5 * ((ret - value) ** 2).mean()


def logsumexp(np_, x):
    m = x.max(-1)
    return m + np_.log(np_.exp(x - m[..., None]).sum(-1))


def entropy(np_, logits):
    lp = logits - logits.max(-1, keepdims=True)
    lp = lp - np_.log(np_.exp(lp).sum(-1, keepdims=True))
    return -(np_.exp(lp) * lp).sum(-1).mean()


def cross_entropy(np_, logits, labels):
    m = logits.max(-1, keepdims=True)
    lse = np_.log(np_.exp(logits - m).sum(-1)) + m[..., 0]
    picked = np_.take_along_axis(logits, labels[:, None], axis=-1)[:, 0]
    return (lse - picked).mean()


def matmul(np_, a, b):
    return a @ b


def at_b(np_, a, b):
    return a.T @ b


def tensordot2(np_, a, b):
    return np_.tensordot(a, b, axes=2)


def attention(np_, q, k, v):
    s = np_.einsum("bqd,bkd->bqk", q, k) / np_.sqrt(np_.float32(q.shape[-1]))
    return np_.einsum("bqk,bkd->bqd", softmax(np_, s), v)


def cases(rng):
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return [
        ("softmax [4096, 1024]", softmax, (f32(4096, 1024),)),
        ("softmax [1, 64, 4096]", softmax, (f32(1, 64, 4096),)),
        ("softmax [65536, 10]", softmax, (f32(65536, 10),)),
        ("layernorm [8192, 512]", layernorm, (f32(8192, 512), f32(512), f32(512))),
        ("layernorm [1, 128, 768]", layernorm, (f32(1, 128, 768), f32(768), f32(768))),
        ("mlp [2048, 64] 64 tanh 8", mlp,
         (f32(2048, 64), f32(64, 64) / 8, f32(64), f32(64, 8) / 8, f32(8))),
        ("mlp [256, 512] 512 tanh 512", mlp,
         (f32(256, 512), f32(512, 512) / 22, f32(512), f32(512, 512) / 22, f32(512))),
        ("ppo loss [65536]", ppo_loss, tuple(f32(65536) for _ in range(5))),
        ("cross-entropy [4096, 1000]", cross_entropy,
         (f32(4096, 1000), rng.integers(0, 1000, 4096).astype(np.int32))),
        ("logsumexp [65536, 10]", logsumexp, (f32(65536, 10),)),
        ("policy entropy [65536, 6]", entropy, (f32(65536, 6),)),
        ("cross-entropy [65536, 6]", cross_entropy,
         (f32(65536, 6), rng.integers(0, 6, 65536).astype(np.int32))),
        ("matmul [1024, 1024] @ [1024, 1024]", matmul, (f32(1024, 1024), f32(1024, 1024))),
        ("matmul [128, 768] @ [768, 768]", matmul, (f32(128, 768), f32(768, 768))),
        ("x @ w [32, 128, 256] @ [256, 256]", matmul, (f32(32, 128, 256), f32(256, 256))),
        ("A^T B [512, 256]^T @ [512, 512]", at_b, (f32(512, 256), f32(512, 512))),
        ("tensordot [256, 16, 32] . [16, 32, 512]", tensordot2,
         (f32(256, 16, 32), f32(16, 32, 512))),
        ("value head [65536, 64] @ [64, 1]", matmul, (f32(65536, 64), f32(64, 1))),
        ("matvec [4096, 1024] @ [1024]", matmul, (f32(4096, 1024), f32(1024))),
        ("vecmat [1024] @ [1024, 1024]", matmul, (f32(1024), f32(1024, 1024))),
        ("attention [8, 128, 64]", attention, (f32(8, 128, 64), f32(8, 128, 64), f32(8, 128, 64))),
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", default=None)
    parser.add_argument("--only", default="", help="the cases whose name contains this")
    args = parser.parse_args(argv)
    found = peers()
    rows = []
    for name, fn, inputs in cases(np.random.default_rng(0)):
        if args.only not in name:
            continue
        f = fusionjit.jit(lambda *a, fn=fn: fn(fnp, *a))
        got = np.asarray(f(*inputs))
        t = median_seconds(lambda: fusionjit.block_until_ready(f(*inputs)), repeats=args.repeats)
        row = {"case": name, "fusionjit_us": t * 1e6,
               "kernels": fusionjit.testing.count_kernels(lambda *a, fn=fn: fn(fnp, *a))(*inputs)}
        if "jax" in found:
            jax, jnp = found["jax"]
            g = jax.jit(lambda *a, fn=fn: fn(jnp, *a))
            ja = [jnp.asarray(a) for a in inputs]
            want = np.asarray(g(*ja))
            # Sums over long rows differ in the last bits of their largest terms.
            scale = max(1.0, float(np.max(np.abs(want))))
            np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5 * scale)
            t_jax = median_seconds(lambda: g(*ja).block_until_ready(), repeats=args.repeats)
            row.update({"jax_us": t_jax * 1e6, "jax/fusionjit": t_jax / t})
        rows.append(row)
    report("everyday programs, float32, medians", rows, args.json)


if __name__ == "__main__":
    main()
