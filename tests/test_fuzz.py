"""Random programs (tests/fuzz_programs.py) under every fusion profile.

Each program runs under fusion="none", "xla", "xla+concat" and "fusionjit"; every result
must match NumPy (rtol = atol = 1e-4 for float32, exact for int32 and bool) and profile
"none", and the kernel counts must be ordered: fusionjit <= xla <= none.

FJ_FUZZ_PROGRAMS (default 500) programs from seed FJ_FUZZ_SEED (default 0), 25 per test.
A failure prints the seed, the program as runnable Python and fusionjit.explain for the
failing profile. For millions of programs: python3 tests/fuzz_programs.py --help.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import fuzz_programs as fp

N_PROGRAMS = int(os.environ.get("FJ_FUZZ_PROGRAMS", "500"))
SEED = int(os.environ.get("FJ_FUZZ_SEED", "0"))
CHUNK = 25

# Seeds that fail because of a known bug: kept out of the chunks, each an xfail of its own.
KNOWN_BUGS: dict[int, str] = {}

CHUNKS = [(lo, min(lo + CHUNK, SEED + N_PROGRAMS)) for lo in range(SEED, SEED + N_PROGRAMS, CHUNK)]


@pytest.mark.parametrize("lo,hi", CHUNKS, ids=[f"seeds{lo}-{hi - 1}" for lo, hi in CHUNKS])
def test_random_programs(lo, hi):
    reports = []
    for seed in range(lo, hi):
        if seed in KNOWN_BUGS:
            continue
        failure = fp.check_program(fp.generate(seed))
        if failure is not None:
            reports.append(failure.report())
    if reports:
        pytest.fail(f"{len(reports)} of {hi - lo} random programs failed:\n\n"
                    + "\n\n".join(reports), pytrace=False)


@pytest.mark.parametrize("seed", [pytest.param(s, marks=pytest.mark.xfail(strict=True, reason=r))
                                  for s, r in KNOWN_BUGS.items()])
def test_known_bug_seeds(seed):
    failure = fp.check_program(fp.generate(seed))
    assert failure is None, failure.report()


# --- the generator itself ------------------------------------------------------------

def test_generator_is_deterministic_and_in_range():
    for seed in range(SEED, SEED + 40):
        a, b = fp.generate(seed), fp.generate(seed)
        assert a.source(with_data=True) == b.source(with_data=True)
        ops = [n for n in a.nodes if n.op != "input"]
        assert 8 <= len(ops) <= 30
        assert 1 <= len(a.data) <= 4
        assert 1 <= len(a.outputs) <= 3
        for x in a.data:
            assert x.ndim <= 3 and all(1 <= d <= 9 for d in x.shape)
            assert x.dtype in (fp.F32, fp.I32, fp.BOOL)
        for o, ref in zip(a.numpy(), fp.generate(seed).numpy()):
            np.testing.assert_array_equal(o, ref)


def test_printed_source_is_the_program():
    """The reproducer a failure prints computes exactly what the specs compute."""
    for seed in range(SEED, SEED + 40):
        prog = fp.generate(seed)
        ns: dict = {}
        src = prog.source(with_data=True).split("\nargs = (")[0]
        with np.errstate(all="ignore"):
            exec(src, ns)  # noqa: S102 - our own generated code
            args = [ns[f"a{k}"] for k in range(len(prog.data))]
            for a, b in zip(args, prog.data):
                np.testing.assert_array_equal(a, b)
            got = ns["program"](*args, xp=np)
        for g, w in zip(got, prog.numpy()):
            np.testing.assert_array_equal(np.asarray(g), w)


def test_fragile_programs_are_rare():
    fragile = sum(fp.generate(seed).fragile for seed in range(SEED, SEED + 100))
    assert fragile <= 5
