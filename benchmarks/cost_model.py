"""The cost model's estimate against the measured time, program by program: softmax and
layer norm over rows of several lengths (short rows in lanes, long rows one at a time),
row sums, elementwise passes in and beyond the cache, matrix products (of several layouts),
a dense layer, an RNN's loop over time with its gradient, transposes, a classifier's
training step, top_k (the runtime's kernel, priced by its algorithm),
and the paper's CartPole rollouts (2048 environments x 1000 steps) under XLA's rules and
ours. The estimate is the plan's, as `explain` prints it; the time is a median of calls
with the arguments already on the device.
Where the two disagree, the model is what needs fixing: the summary gives the spread of
measured / estimate.

    python benchmarks/cost_model.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys

import numpy as np

import fusionjit
import fusionjit.numpy as fnp
from _harness import median_seconds, report

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.cartpole import cartpole  # noqa: E402


def softmax(x):
    e = fnp.exp(x - fnp.max(x, axis=-1, keepdims=True))
    return e / fnp.sum(e, axis=-1, keepdims=True)


def layernorm(x):
    mu = x.mean(-1, keepdims=True)
    v = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / fnp.sqrt(v + 1e-5)


def row_sums(x):
    return fnp.sum(x * x, axis=-1)


def elementwise(x):
    return fnp.exp(x) * 2


def matmul(a, b):
    return a @ b


def tensordot2(a, b):
    return fnp.tensordot(a, b, axes=2)


def dense_tanh(x, w, b):
    return fnp.tanh(x @ w + b)


def rnn(x, w1, w2):
    """An RNN over time: a step of two matrix products, its states stacked."""
    def body(h, xt):
        h = fnp.tanh(xt @ w1 + h @ w2)
        return h, h
    return fusionjit.lax.scan(body, fnp.zeros((x.shape[1], w2.shape[0])), x)


def rnn_grad(x, w1, w2):
    """The RNN's loss differentiated: a forward loop keeping its products, a backward one."""
    return fusionjit.grad(lambda w1, w2: fnp.mean(rnn(x, w1, w2)[1] ** 2), argnums=(0, 1))(w1, w2)


def transpose(x):
    return x.T


def top_k(k):
    def top_k(x):
        return fusionjit.lax.top_k(x, k)
    return top_k


def classifier_step(x, y, w1, w2):
    """A training step of a 64-256-6 relu classifier: cross-entropy, its gradient, SGD."""
    def loss(w1, w2):
        logits = fnp.maximum(x @ w1, 0.0) @ w2
        return -fnp.mean(fnp.sum(fusionjit.nn.log_softmax(logits) * y, axis=-1))
    g1, g2 = fusionjit.grad(loss, argnums=(0, 1))(w1, w2)
    return w1 - 0.01 * g1, w2 - 0.01 * g2


SHAPES = [(65536, 4), (65536, 10), (65536, 16), (16384, 64), (1024, 1024)]


def cases(rng):
    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    for fn in (softmax, layernorm, row_sums, elementwise):
        for shape in SHAPES:
            yield fn, str(list(shape)), (f32(*shape),)
    yield elementwise, "[16777216] (past the cache)", (f32(1 << 24),)
    for m, k, n in ((64, 64, 64), (256, 512, 512), (1024, 1024, 1024)):
        yield matmul, f"[{m}, {k}] @ [{k}, {n}]", (f32(m, k), f32(k, n))
    yield dense_tanh, "[2048, 64] @ [64, 64]", (f32(2048, 64), f32(64, 64), f32(64))
    # Dots of other layouts, as the dot-layout pass rewrites them (dot_layout.h).
    yield matmul, "[32, 128, 256] @ [256, 256]", (f32(32, 128, 256), f32(256, 256))
    yield matmul, "[65536, 64] @ [64, 1] (row reduction)", (f32(65536, 64), f32(64, 1))
    yield matmul, "[1024] @ [1024, 1024] (column reduction)", (f32(1024), f32(1024, 1024))
    yield tensordot2, "[256, 16, 32] . [16, 32, 512]", (f32(256, 16, 32), f32(16, 32, 512))
    rnn_inputs = (f32(32, 256, 16), f32(16, 32) * 0.3, f32(32, 32) * 0.3)
    yield rnn, "[32 steps, 256, 16] 32 tanh", rnn_inputs
    yield rnn_grad, "[32 steps, 256, 16] 32 tanh", rnn_inputs
    yield transpose, "[1024, 1024]", (f32(1024, 1024),)
    yield transpose, "[4096, 64]", (f32(4096, 64),)
    onehot = np.eye(6, dtype=np.float32)[rng.integers(0, 6, 4096)]
    yield classifier_step, "[4096, 64] 256 relu 6", (f32(4096, 64), onehot, f32(64, 256) * 0.1,
                                                     f32(256, 6) * 0.1)
    for r, n, k in ((8, 32000, 4), (8, 32000, 50), (64, 32768, 64), (256, 1000, 10),
                    (64, 1000, 200)):
        yield top_k(k), f"[{r}, {n}] k = {k}", (f32(r, n),)


def cartpole_cases(steps=1000):
    inputs = cartpole.inputs(2048, steps)
    for variant in ("baseline", "pool", "no_concat", "unroll", "policy"):
        rollout = cartpole.VARIANTS[variant](cartpole.fusionjit_lib(), steps)
        for profile in ("xla", "fusionjit"):
            name = f"cartpole {variant} [2048 x {steps}] {profile}"
            yield rollout, name, inputs.args(variant), profile


def estimate_us(fn, *args, profile="fusionjit") -> float:
    # The fusionjit profile builds XLA's rules' plans too and keeps the cheapest estimate;
    # explain prints each plan's.
    text = str(fusionjit.explain(fn)(*args))
    plans = dict(re.findall(r"([\w+]+) rules: \d+ kernels?, ([\d.e+]+) us", text))
    if profile != "fusionjit":
        return float(plans.get(profile, "nan"))
    return min(float(us) for us in plans.values()) if plans else float("nan")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    rows = []
    rng = np.random.default_rng(0)
    programs = [(fn, shape, inputs, "fusionjit") for fn, shape, inputs in cases(rng)]
    for fn, name, inputs, profile in programs + list(cartpole_cases()):
        f = fusionjit.jit(fn, fusion=profile)
        # On the device once, as a caller keeps its arrays: a NumPy array that is not 64-byte
        # aligned (most are not) would be copied at every call, which no kernel pays.
        inputs = fusionjit.device_put(inputs)

        def call():
            return fusionjit.block_until_ready(f(*inputs))

        call()
        measured = median_seconds(call, repeats=args.repeats) * 1e6
        est = estimate_us(fn, *inputs, profile=profile)
        rows.append({"program": getattr(fn, "__name__", "rollout"), "shape": name,
                     "estimate_us": est, "measured_us": measured,
                     "measured/estimate": measured / est})
    report("cost model: estimate against measured time", rows)
    ratios = sorted(r["measured/estimate"] for r in rows if math.isfinite(r["measured/estimate"]))
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"  measured/estimate over {len(ratios)} programs: geometric mean {geo:.2f}, "
              f"median {ratios[len(ratios) // 2]:.2f}, range {ratios[0]:.2f} - {ratios[-1]:.2f}")


if __name__ == "__main__":
    main()
