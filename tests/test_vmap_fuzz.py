"""vmap of random programs (tests/fuzz_programs.py's small tier and tests/fuzz_loops.py's
loops): each program, written for one example, is vmapped over a batch of three examples
(its own inputs and two permutations of their elements, which keep indices in range and
divisors away from zero) with a random choice of mapped and unmapped arguments and mapped
axes, jitted, and compared with the program jitted and run on each example in turn: floats
within the fuzzer's tolerance (a batched reduction may sum in another order), ints, bools
and random bits exactly.

FJ_FUZZ_VMAP_PROGRAMS (default 80) straight-line programs from seed FJ_FUZZ_VMAP_SEED
(default 0) and FJ_FUZZ_VMAP_LOOPS (default 20) loop programs, 20 per test."""

from __future__ import annotations

import os

import numpy as np
import pytest

import fusionjit
import fuzz_loops
import fuzz_programs as fp

N_PROGRAMS = int(os.environ.get("FJ_FUZZ_VMAP_PROGRAMS", "80"))
N_LOOPS = int(os.environ.get("FJ_FUZZ_VMAP_LOOPS", "20"))
SEED = int(os.environ.get("FJ_FUZZ_VMAP_SEED", "0"))
CHUNK = 20
BATCH = 3


def _batched(rng, data):
    """(in_axes, the batched arguments, the arguments of each example)."""
    axes, batched = [], []
    examples = [[] for _ in range(BATCH)]
    mapped = rng.random(len(data)) >= 0.3
    mapped[int(rng.integers(0, len(data)))] = True   # at least one argument is mapped
    for a, m in zip(data, mapped):
        a = np.asarray(a)
        if not m:
            axes.append(None)
            batched.append(a)
            for e in examples:
                e.append(a)
            continue
        flat = a.reshape(-1)
        rows = [a] + [flat[rng.permutation(flat.size)].reshape(a.shape) for _ in range(BATCH - 1)]
        axis = int(rng.integers(0, a.ndim + 1))
        axes.append(axis)
        batched.append(np.stack(rows, axis=axis))
        for e, r in zip(examples, rows):
            e.append(r)
    return tuple(axes), batched, examples


def _check(prog, seed):
    rng = np.random.default_rng(seed + 12345)
    fn = prog.function()
    with prog.config():
        base = [np.asarray(a) for a in prog.jit_args()]
        axes, batched, examples = _batched(rng, base)
        one = fusionjit.jit(fn)
        want = [[np.asarray(o) for o in one(*e)] for e in examples]
        got = fusionjit.jit(fusionjit.vmap(fn, in_axes=axes))(*batched)
    got = [np.asarray(o) for o in got]
    assert len(got) == len(want[0])
    for k, g in enumerate(got):
        w = np.stack([per[k] for per in want])
        assert g.shape == w.shape and g.dtype == w.dtype, (k, g.shape, w.shape, g.dtype, w.dtype)
        if np.issubdtype(w.dtype, np.floating):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=f"output {k}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {k}")


def _run(programs, kind):
    failures = []
    for seed, prog in programs:
        if getattr(prog, "fragile", False):
            continue
        try:
            _check(prog, seed)
        except Exception as e:  # noqa: BLE001
            failures.append(f"{kind} seed {seed}: {type(e).__name__}: {str(e)[:400]}\n"
                            f"{prog.source()}")
    assert not failures, "\n\n".join(failures[:3])


@pytest.mark.parametrize("start", range(SEED, SEED + N_PROGRAMS, CHUNK))
def test_vmap_of_random_programs(start):
    seeds = range(start, min(start + CHUNK, SEED + N_PROGRAMS))
    _run([(s, fp.generate(s)) for s in seeds], "small")


@pytest.mark.parametrize("start", range(SEED, SEED + N_LOOPS, CHUNK))
def test_vmap_of_random_loop_programs(start):
    seeds = range(start, min(start + CHUNK, SEED + N_LOOPS))
    _run([(s, fuzz_loops.generate(s)) for s in seeds], "loops")
