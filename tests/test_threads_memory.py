"""Jitted functions under threads (same and different signatures, racing cache misses,
clear_cache racing calls), the GIL released while kernels run, and memory that stays flat
over many cached calls and many compilations.

The stress and memory tests are short by default; ``FJ_STRESS_SECONDS`` lengthens the
stress test and ``FJ_LONG_TESTS=1`` runs the memory tests at full size (10^5 calls, 10^4
compilations)."""

from __future__ import annotations

import os
import random
import threading
import time

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp

from test_reliability import run_script

STRESS_SECONDS = float(os.environ.get("FJ_STRESS_SECONDS", "3"))
LONG = os.environ.get("FJ_LONG_TESTS", "0") == "1"


def _reference(kind: int, x: np.ndarray, n: int) -> np.ndarray:
    if kind == 0:
        return np.sin(x) * n + 1
    if kind == 1:
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    return (x * x).sum(axis=0) + n


def test_eight_threads_calling_jitted_functions_get_correct_results():
    f0 = fusionjit.jit(lambda x, n: fnp.sin(x) * n + 1, static_argnums=1)
    f1 = fusionjit.jit(
        lambda x: (e := fnp.exp(x - x.max(-1, keepdims=True))) / e.sum(-1, keepdims=True))
    f2 = fusionjit.jit(lambda x, n: (x * x).sum(0) + n)
    shapes = [(64,), (3, 5), (17, 33), (256, 64), (1 << 18,), (512, 512)]
    errors: list[str] = []
    counts = [0] * 8
    deadline = time.monotonic() + STRESS_SECONDS

    def worker(t: int):
        rng = random.Random(t)
        while time.monotonic() < deadline and not errors:
            shape = rng.choice(shapes if t % 2 else shapes[:2])   # same and different signatures
            x = np.random.default_rng(rng.randrange(1 << 30)).random(shape, np.float32)
            kind, n = rng.randrange(3), rng.randrange(4)
            try:
                if rng.random() < 0.02:
                    rng.choice([f0, f1, f2]).clear_cache()        # racing the other threads' calls
                if kind == 0:
                    got = f0(x, n)
                elif kind == 1:
                    got = f1(x)
                else:
                    got = f2(x, n)
                want = _reference(kind, x, n)
                np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=2e-5)
                counts[t] += 1
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(f"thread {t}, kind {kind}, shape {shape}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert all(c > 0 for c in counts), counts


class _SlowKey:
    """A static argument whose == and hash run Python code that gives up the GIL: lookups
    in the compilation caches switch threads halfway, while other threads insert, evict and
    clear (this crashed CPython's OrderedDict and could corrupt a C++ map)."""

    def __init__(self, k):
        self.k = k

    def __eq__(self, other):
        time.sleep(0)
        return isinstance(other, _SlowKey) and self.k == other.k

    def __hash__(self):
        time.sleep(0)
        return hash(self.k) % 3   # collisions: == runs on most lookups


def test_threads_with_thread_switching_static_arguments_and_evictions():
    fusionjit.config.update("fusionjit_cache_size", 6)
    try:
        g = fusionjit.jit(lambda x, key: x * key.k + 1, static_argnums=1)
        errors: list[str] = []
        deadline = time.monotonic() + STRESS_SECONDS

        def worker(t):
            rng = random.Random(100 + t)
            while time.monotonic() < deadline and not errors:
                k = rng.randrange(12)
                try:
                    if rng.random() < 0.03:
                        g.clear_cache()
                    got = np.asarray(g(np.arange(3, dtype=np.float32), _SlowKey(k)))
                    np.testing.assert_array_equal(got, np.arange(3, dtype=np.float32) * k + 1)
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(f"{type(e).__name__}: {e}")

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[:3]
    finally:
        fusionjit.config.update("fusionjit_cache_size", 1024)


def test_cache_misses_racing_on_one_signature_compile_a_consistent_entry():
    traced = []

    @fusionjit.jit
    def f(x):
        traced.append(1)
        time.sleep(0.05)   # widen the window in which other threads miss too
        return x * 3

    barrier = threading.Barrier(8)
    results = [None] * 8

    def worker(i):
        barrier.wait()
        results[i] = np.asarray(f(np.arange(4, dtype=np.float32)))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        np.testing.assert_array_equal(r, np.arange(4, dtype=np.float32) * 3)
    n = len(traced)
    f(np.arange(4, dtype=np.float32))
    assert len(traced) == n   # one of the racing compilations is cached


def test_the_gil_is_released_while_kernels_run():
    # One pool thread, so the kernel runs on the calling thread: if that thread kept the
    # GIL, the counting thread would make no progress while the kernel runs.
    p = run_script("""
        import threading, time, numpy as np, fusionjit, fusionjit.numpy as fnp
        f = fusionjit.jit(lambda x: fnp.sin(fnp.cos(fnp.sin(x) * 3) + 1) * fnp.tanh(x))
        x = np.linspace(0, 1, 1 << 23, dtype=np.float32)
        f(x)
        t0 = time.perf_counter(); f(x); kernel = time.perf_counter() - t0
        count, stop = [0], [False]
        def counter():
            while not stop[0]:
                count[0] += 1
        c = threading.Thread(target=counter)
        c.start()
        time.sleep(0.2)
        t0, n0 = time.perf_counter(), count[0]
        time.sleep(kernel)
        rate = (count[0] - n0) / (time.perf_counter() - t0)   # the counter alone
        n0 = count[0]
        f(x)
        during = count[0] - n0
        stop[0] = True
        c.join()
        print(f"kernel {kernel * 1e3:.0f} ms, counter rate {rate:.3g}/s, during {during}")
        print("ratio", during / (rate * kernel))
    """, timeout=120, env={"FUSIONJIT_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr[-2000:]
    ratio = float(p.stdout.split("ratio")[1])
    # Without the release the counter would get at most a switch interval (5 ms) of the
    # kernel's time; with it, a large share.
    assert ratio > 0.25, p.stdout


_PARTS_PROGRAM = """
import numpy as np, fusionjit, fusionjit.numpy as fnp
from fusionjit import lax, random

def program(x, key):
    def step(carry, _):
        key, x = carry
        key, sub = random.split(key)
        x = fnp.sin(x) * random.uniform(sub, x.shape) + fnp.tanh(x[::-1])
        return (key, x), x.sum()
    return lax.scan(step, (key, x), None, length=12, unroll=12)

x = np.linspace(-1, 1, 37, dtype=np.float32)
"""


def test_a_large_program_compiles_in_parts_to_the_same_code_with_any_thread_count():
    # The unrolled scan's LLVM module is large enough to be compiled in parts, one thread
    # each (codegen/cpu/jit.cc): the parts follow from the module alone, so one thread and
    # two generate the same machine code, and it computes what the program does eagerly.
    script = _PARTS_PROGRAM + """
import hashlib
f = fusionjit.jit(program)
asm = f.lower(x, random.PRNGKey(3)).as_text("asm")
(_, out), sums = f(x, random.PRNGKey(3))
with fusionjit.disable_jit():
    (_, eager_out), eager_sums = program(x, random.PRNGKey(3))
np.testing.assert_allclose(np.asarray(out), np.asarray(eager_out), rtol=2e-6, atol=2e-6)
np.testing.assert_allclose(np.asarray(sums), np.asarray(eager_sums), rtol=2e-6, atol=2e-5)
print("parts", asm.count(".file"))
print("asm", hashlib.sha256(asm.encode()).hexdigest())
print("out", hashlib.sha256(np.asarray(out).tobytes() + np.asarray(sums).tobytes()).hexdigest())
"""
    runs = []
    for threads in ("1", "2"):
        p = run_script(script, timeout=300, env={"FUSIONJIT_NUM_THREADS": threads})
        assert p.returncode == 0, p.stderr[-3000:]
        runs.append(dict(line.split() for line in p.stdout.splitlines() if line.count(" ") == 1))
    assert int(runs[0]["parts"]) >= 2, runs[0]
    assert runs[0] == runs[1]


def _rss_script(body: str) -> str:
    return """
import numpy as np, fusionjit, fusionjit.numpy as fnp
def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
""" + body


def test_memory_is_flat_over_many_cached_calls():
    calls = 100_000 if LONG else 30_000
    p = run_script(_rss_script(f"""
f = fusionjit.jit(lambda x, y: (fnp.sin(x) * y, x.sum()))
x, y = np.ones(1000, np.float32), fnp.ones(1000)
for _ in range(2000):
    f(x, y)
before = rss_mb()
for _ in range({calls}):
    out = f(x, y)
print("growth", rss_mb() - before)
"""), timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert float(p.stdout.split("growth")[1]) < 4, p.stdout


def test_memory_is_flat_over_many_compilations_with_a_bounded_cache():
    compiles = 10_000 if LONG else 800
    p = run_script(_rss_script(f"""
fusionjit.config.update("fusionjit_cache_size", 32)
f = fusionjit.jit(lambda x, n: fnp.exp(x) * n + 1, static_argnums=1)
x = np.ones(64, np.float32)
for i in range(300):
    f(x, i)
before = rss_mb()
for i in range(300, {compiles}):
    f(x, i)
    fnp.ones(3) * i      # eager primitives with new parameters compile too
print("growth", rss_mb() - before, "cached", f._cache_size())
"""), timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    growth = float(p.stdout.split("growth")[1].split()[0])
    assert "cached 32" in p.stdout, p.stdout
    assert growth < 8, p.stdout


def test_a_smaller_cache_size_holds_from_the_next_cached_lookup():
    # Regression: the eager primitives' cache was trimmed only when a new entry went in, so
    # after lowering fusionjit_cache_size, lookups that all hit kept every old entry.
    from fusionjit._src import dispatch
    for i in range(3):
        fnp.ones(5)[i:]
    fusionjit.config.update("fusionjit_cache_size", 1)
    try:
        fnp.ones(5)[0:]          # a hit: nothing new goes in
        assert len(dispatch._PRIMITIVE_JITS) <= 1
    finally:
        fusionjit.config.update("fusionjit_cache_size", 1024)


def test_the_least_recently_used_signature_is_evicted_not_the_oldest():
    traced = []

    def body(x, n):
        traced.append(n)
        return x + n

    fusionjit.config.update("fusionjit_cache_size", 3)
    try:
        f = fusionjit.jit(body, static_argnums=1)
        x = np.ones(2, np.float32)
        for n in (0, 1, 2, 0):   # the last call finds 0: the least recently used is now 1
            f(x, n)
        f(x, 3)                  # evicts 1 (a first-in-first-out cache would evict 0)
        assert f._cache_size() == 3 and traced == [0, 1, 2, 3]
        np.testing.assert_array_equal(np.asarray(f(x, 0)), [1, 1])
        assert traced == [0, 1, 2, 3]   # still compiled: neither cache traced it again
    finally:
        fusionjit.config.update("fusionjit_cache_size", 1024)


def test_cache_size_bounds_each_function_and_eager_primitives():
    fusionjit.config.update("fusionjit_cache_size", 4)
    try:
        f = fusionjit.jit(lambda x, n: x + n, static_argnums=1)
        for i in range(10):
            f(fnp.ones(2), i)
        assert f._cache_size() == 4 and len(f._entries) == 4
        from fusionjit._src import dispatch
        for i in range(10):
            fnp.ones(3)[i % 3:]     # slices with new parameters
        assert len(dispatch._PRIMITIVE_JITS) <= 4
        # The most recently used survive, and an evicted signature compiles again correctly.
        np.testing.assert_array_equal(np.asarray(f(fnp.ones(2), 0)), [1, 1])
    finally:
        fusionjit.config.update("fusionjit_cache_size", 1024)


def test_large_buffers_ask_for_huge_pages():
    # Buffers of 2 MiB and more are advised to use transparent huge pages, as NumPy's are:
    # a thread streaming through 4 KiB pages is bound by TLB misses. (The advice was given
    # at the block's unaligned start, so madvise refused it and no buffer had them.)
    import re
    try:
        mode = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
        maps = open("/proc/self/smaps").read()
    except OSError:
        pytest.skip("no transparent huge pages here")
    if "[never]" in mode or "THPeligible" not in maps:
        pytest.skip("transparent huge pages are off")
    x = fnp.zeros((8 << 20,))  # 32 MiB
    start = np.asarray(x).ctypes.data
    end = start + 4 * (8 << 20)
    eligible = 0
    for block in re.split(r"\n(?=[0-9a-f]+-[0-9a-f]+ )", open("/proc/self/smaps").read()):
        lo, hi = (int(v, 16) for v in block.split()[0].split("-"))
        if hi > start and lo < end:
            match = re.search(r"THPeligible:\s+(\d)", block)
            if match and match.group(1) == "1":
                eligible += min(hi, end) - max(lo, start)
    assert eligible >= (end - start) * 0.9, eligible
