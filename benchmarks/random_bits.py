"""Random-number throughput, side by side in one run: ``uniform`` on 16M float32 from one
key with each threefry lowering ("fused": integer ops in the consumer's kernel; "custom_call":
an opaque generator kernel writing its bits to memory, as XLA's cuda_threefry2x32), in both
of JAX's modes, against ``jax.random.uniform`` on the CPU when JAX is installed; also a
fused consumer (``u * 2 - 1`` summed), where the fused lowering never writes the bits.

    python benchmarks/random_bits.py [--n 16777216] [--json out.json]
"""

from __future__ import annotations

import argparse

import numpy as np

import fusionjit
import fusionjit.numpy as fnp
import fusionjit.random as fr
from _harness import median_seconds, peers, report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1 << 24, help="numbers per call")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    found = peers()
    n = args.n
    rows = []
    key = fr.PRNGKey(0)
    for partitionable in (True, False):
        fusionjit.config.update("fusionjit_threefry_partitionable", partitionable)
        mode = "partitionable" if partitionable else "legacy"
        ref = None
        if "jax" in found:
            jax, jnp = found["jax"]
            jax.config.update("jax_threefry_partitionable", partitionable)
            g = jax.jit(lambda k: jax.random.uniform(k, (n,), jnp.float32))
            jk = jax.random.PRNGKey(0)
            ref = np.asarray(g(jk))
            t_jax = median_seconds(lambda: g(jk).block_until_ready(), repeats=5, min_time=0.2)
            rows.append({"case": f"uniform {mode} jax.jit", "ms": t_jax * 1e3,
                         "M numbers/s": n / t_jax / 1e6})
        times = {}
        for lowering in ("fused", "custom_call"):
            fusionjit.config.update("fusionjit_threefry_lowering", lowering)
            f = fusionjit.jit(lambda k: fr.uniform(k, (n,)))
            got = np.asarray(f(key))
            if ref is not None:
                np.testing.assert_array_equal(got, ref)  # bit-exact with JAX
            t = median_seconds(lambda: f(key).block_until_ready(), repeats=5, min_time=0.2)
            times[lowering] = t
            row = {"case": f"uniform {mode} fusionjit {lowering}", "ms": t * 1e3,
                   "M numbers/s": n / t / 1e6,
                   "kernels": fusionjit.testing.count_kernels(lambda k: fr.uniform(k, (n,)))(key)}
            if ref is not None:
                row["jax/fusionjit"] = t_jax / t
            rows.append(row)
            h = fusionjit.jit(lambda k: fnp.sum(fr.uniform(k, (n,)) * 2.0 - 1.0))
            t_sum = median_seconds(lambda: h(key).block_until_ready(), repeats=5, min_time=0.2)
            rows.append({"case": f"sum(uniform*2-1) {mode} fusionjit {lowering}", "ms": t_sum * 1e3,
                         "M numbers/s": n / t_sum / 1e6,
                         "kernels": fusionjit.testing.count_kernels(
                             lambda k: fnp.sum(fr.uniform(k, (n,)) * 2.0 - 1.0))(key)})
        rows.append({"case": f"uniform {mode}: custom_call / fused time",
                     "ratio": times["custom_call"] / times["fused"]})
    fusionjit.config.update("fusionjit_threefry_lowering", "fused")
    fusionjit.config.update("fusionjit_threefry_partitionable", True)
    report(f"random: uniform float32[{n}] per call", rows, args.json)


if __name__ == "__main__":
    main()
