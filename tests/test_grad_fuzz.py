"""Gradients of random programs (tests/fuzz_programs.py's small tier) against JAX's: each
program with float inputs and outputs is reduced to a scalar (its float outputs weighted by
fixed random arrays and summed), and jit(grad) of that with respect to every float input
is compared with jax.grad of the same program written with jax.numpy and jax.lax (the
generator's programs run on either). Within a tolerance relative to the gradient's size
(float32 sums in other orders); programs whose JAX gradient is not finite, and fragile
ones (tests/fuzz_programs.py), are left out.

FJ_FUZZ_GRAD_PROGRAMS (default 60) programs from seed FJ_FUZZ_GRAD_SEED (default 0), 20 per
test. 1,150 programs (seeds 0-1149) were clean when it was written."""

from __future__ import annotations

import os

import numpy as np
import pytest

import fusionjit
import fusionjit.lax as flax
import fusionjit.numpy as fnp
import fuzz_programs as fp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

N_PROGRAMS = int(os.environ.get("FJ_FUZZ_GRAD_PROGRAMS", "60"))
SEED = int(os.environ.get("FJ_FUZZ_GRAD_SEED", "0"))
CHUNK = 20


def _loss(prog, data, floats, weights, xp, lax):
    """The program as a scalar function of its float inputs (the others fixed)."""
    def loss(*float_args):
        args = [xp.asarray(a) for a in data]  # (the library's arrays, as the fuzzer's programs get)
        for i, a in zip(floats, float_args):
            args[i] = a
        out = prog.interpret(xp, args, np.float32, lax=lax)
        return sum(xp.sum(o * w) for o, w in zip(out, weights) if w is not None)
    return loss


def _check(prog, seed):
    """None when the program has nothing to differentiate, else whether it was checked."""
    data = [np.asarray(a.astype(np.float32) if a.dtype == fp.F32 else a) for a in prog.data]
    floats = [i for i, a in enumerate(data) if a.dtype == np.float32]
    rng = np.random.default_rng(seed + 777)
    weights = [rng.standard_normal(np.shape(o)).astype(np.float32)
               if np.asarray(o).dtype == np.float32 else None for o in prog.numpy(np.float32)]
    if not floats or all(w is None for w in weights):
        return False
    nums = tuple(range(len(floats)))
    args = [data[i] for i in floats]
    # (JAX under jit: op by op, its dispatch took 92% of this test's time.)
    want = jax.jit(jax.grad(_loss(prog, data, floats, weights, jnp, jax.lax), argnums=nums))(*args)
    want = [np.asarray(w) for w in want]
    if not all(np.all(np.isfinite(w)) for w in want):
        return False
    got = fusionjit.jit(fusionjit.grad(_loss(prog, data, floats, weights, fnp, flax),
                                       argnums=nums))(*args)
    for k, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert g.shape == w.shape and g.dtype == w.dtype, (k, g.shape, w.shape, g.dtype, w.dtype)
        scale = max(1.0, float(np.max(np.abs(w))))
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3 * scale, err_msg=f"input {k}")
    return True


@pytest.mark.parametrize("start", range(SEED, SEED + N_PROGRAMS, CHUNK))
def test_grad_of_random_programs_matches_jax(start):
    failures, checked = [], 0
    for seed in range(start, min(start + CHUNK, SEED + N_PROGRAMS)):
        prog = fp.generate(seed)
        if getattr(prog, "fragile", False) or prog.condition():
            continue
        try:
            checked += bool(_check(prog, seed))
        except Exception as e:  # noqa: BLE001
            failures.append(f"seed {seed}: {type(e).__name__}: {str(e)[:400]}\n{prog.source()}")
    assert not failures, "\n\n".join(failures[:3])
    assert checked >= CHUNK // 4, checked  # most programs have something to differentiate
