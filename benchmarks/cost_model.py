"""The cost model's estimate against the measured time, kernel by kernel: softmax over rows
of several lengths (short rows in lanes, long rows one at a time), row sums, an
elementwise pass. The estimate is the chosen plan's, as `explain` prints it; the time is a
median of calls. Where the two disagree, the model is what needs fixing.

    python benchmarks/cost_model.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import re

import numpy as np

import fusionjit
import fusionjit.numpy as fnp
from _harness import median_seconds, report


def softmax(x):
    e = fnp.exp(x - fnp.max(x, axis=-1, keepdims=True))
    return e / fnp.sum(e, axis=-1, keepdims=True)


def row_sums(x):
    return fnp.sum(x * x, axis=-1)


def elementwise(x):
    return fnp.exp(x) * 2


SHAPES = [(65536, 10), (65536, 16), (16384, 64), (1024, 1024)]


def estimate_us(fn, x) -> float:
    text = str(fusionjit.explain(fn)(x))
    found = re.search(r"fusionjit rules: \d+ kernels?, ([\d.e+]+) us", text)
    return float(found.group(1)) if found else float("nan")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    for fn in (softmax, row_sums, elementwise):
        for shape in SHAPES:
            x = rng.standard_normal(shape).astype(np.float32)
            f = fusionjit.jit(fn)
            f(x)
            measured = median_seconds(lambda: f(x), repeats=args.repeats) * 1e6
            est = estimate_us(fn, x)
            rows.append({"program": fn.__name__, "shape": str(list(shape)), "estimate_us": est,
                         "measured_us": measured, "measured/estimate": measured / est})
    report("cost model: estimate against measured time", rows)


if __name__ == "__main__":
    main()
