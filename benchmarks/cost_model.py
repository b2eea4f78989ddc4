"""The cost model's estimate against the measured time, program by program: softmax and
layer norm over rows of several lengths (short rows in lanes, long rows one at a time),
row sums, elementwise passes in and beyond the cache, matrix products and a dense layer.
The estimate is the chosen plan's, as `explain` prints it; the time is a median of calls.
Where the two disagree, the model is what needs fixing: the summary gives the spread of
measured / estimate.

    python benchmarks/cost_model.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import math
import re

import numpy as np

import fusionjit
import fusionjit.numpy as fnp
from _harness import median_seconds, report


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


def dense_tanh(x, w, b):
    return fnp.tanh(x @ w + b)


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


def estimate_us(fn, *args) -> float:
    text = str(fusionjit.explain(fn)(*args))
    found = re.search(r"fusionjit rules: \d+ kernels?, ([\d.e+]+) us", text)
    return float(found.group(1)) if found else float("nan")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    rows = []
    for fn, shape, inputs in cases(np.random.default_rng(0)):
        f = fusionjit.jit(fn)
        f(*inputs)
        measured = median_seconds(lambda: f(*inputs), repeats=args.repeats) * 1e6
        est = estimate_us(fn, *inputs)
        rows.append({"program": fn.__name__, "shape": shape, "estimate_us": est,
                     "measured_us": measured, "measured/estimate": measured / est})
    report("cost model: estimate against measured time", rows)
    ratios = sorted(r["measured/estimate"] for r in rows if math.isfinite(r["measured/estimate"]))
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"  measured/estimate over {len(ratios)} programs: geometric mean {geo:.2f}, "
              f"median {ratios[len(ratios) // 2]:.2f}, range {ratios[0]:.2f} - {ratios[-1]:.2f}")


if __name__ == "__main__":
    main()
