"""A small fusionjit demo: jit-compile a function, show its IR before and after the C++
passes, run it and check it against NumPy."""

import time

import numpy as np

import fusionjit
import fusionjit.numpy as fnp


@fusionjit.jit
def softplus_residual(x, y):
    # log(1 + exp(x)) - y, row-normalised.
    z = fnp.log1p(fnp.exp(x)) - y
    return z / fnp.sum(z * z, axis=1, keepdims=True)


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8), dtype=np.float32)
    y = rng.standard_normal((8,), dtype=np.float32)

    lowered = softplus_residual.lower(x, y)
    print("=== traced program ===")
    print(lowered.as_text("program"))
    print("\n=== C++ IR as lowered ===")
    print(lowered.as_text("traced"))
    print("=== C++ IR after the passes (one kernel per fusion) ===")
    print(lowered.as_text("optimized"))

    start = time.perf_counter()
    out = softplus_residual(x, y)
    first = time.perf_counter() - start
    start = time.perf_counter()
    out = softplus_residual(x, y)
    cached = time.perf_counter() - start
    z = np.log1p(np.exp(x)) - y
    ref = z / (z * z).sum(axis=1, keepdims=True)
    print("=== result ===")
    print(out)
    err = float(np.max(np.abs(np.asarray(out) - ref)))
    print(f"max |fusionjit - numpy| = {err:.2e}")
    print(f"first call {first * 1e3:.1f} ms (trace + compile), cached call {cached * 1e6:.1f} us")
    print(f"devices: {fusionjit.devices()}")
    if err > 1e-5:
        raise SystemExit("demo: result differs from NumPy")


if __name__ == "__main__":
    main()
