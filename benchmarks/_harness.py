"""Timing helpers shared by the benchmarks: warm up (trace and compile) outside the timed
loop, then report the median of several repeats of many calls, side by side with peers in
the same process, as ratios. Medians, because these machines are noisy."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from typing import Callable


def median_seconds(fn: Callable[[], object], *, repeats: int = 7, min_time: float = 0.05) -> float:
    """Median over `repeats` runs of the per-call time; each run lasts at least `min_time`."""
    fn()
    fn()
    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        if time.perf_counter() - start >= min_time / 4 or calls >= 1 << 20:
            break
        calls *= 2
    calls = max(1, int(calls * (min_time / max(time.perf_counter() - start, 1e-9)) / 4))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)


def peers() -> dict:
    """Optional comparison peers that are installed."""
    found = {}
    try:
        import jax
        import jax.numpy as jnp
        found["jax"] = (jax, jnp)
    except ImportError:
        pass
    return found


def machine() -> str:
    import fusionjit
    cpu = platform.processor() or platform.machine()
    return f"{cpu}, {os.cpu_count()} cores, {fusionjit.devices()[0]}"


def report(title: str, rows: list[dict], path: str | None = None) -> None:
    print(f"\n== {title} ==  ({machine()})")
    for r in rows:
        print("  " + "  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                               for k, v in r.items()))
    if path:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump({"title": title, "machine": machine(), "rows": rows}, f, indent=1)
