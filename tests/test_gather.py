"""The gather op (XLA's semantics): ``lax.gather`` against NumPy and JAX, its fusion into the
kernels around it, constant folding, and the NumPy indexing built on it."""

from __future__ import annotations

import numpy as np
import pytest

import fusionjit
import fusionjit.lax as lax
import fusionjit.numpy as fnp
from conftest import requires_jax

GDN = lax.GatherDimensionNumbers


def test_rows_of_a_table():
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    idx = np.array([[3], [0], [9], [3]], np.int32)
    dn = GDN(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    f = fusionjit.jit(lambda t, i: lax.gather(t, i, dn, (1, 4), mode="clip"))
    np.testing.assert_array_equal(f(table, idx), table[idx[:, 0]])


def test_windows_keep_their_dimension_and_clamp_to_fit():
    x = np.arange(30, dtype=np.int32).reshape(5, 6)
    starts = np.array([[0, 0], [4, 5], [2, 1], [-3, 9]], np.int32)
    dn = GDN(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0, 1))
    f = fusionjit.jit(lambda x, s: lax.gather(x, s, dn, (2, 3), mode="clip"))
    got = np.asarray(f(x, starts))
    for b, (r, c) in enumerate(starts):
        r, c = min(max(r, 0), 3), min(max(c, 0), 3)
        np.testing.assert_array_equal(got[b], x[r:r + 2, c:c + 3])


def test_fill_mode_fills_slices_that_do_not_fit():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[0], [2], [3], [-1]], np.int32)
    dn = GDN(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    got = np.asarray(fusionjit.jit(lambda x, i: lax.gather(x, i, dn, (1, 4)))(x, idx))
    np.testing.assert_array_equal(got[:2], x[[0, 2]])
    assert np.isnan(got[2:]).all()
    f = fusionjit.jit(lambda x, i: lax.gather(x, i, dn, (1, 4), mode="fill", fill_value=-1.0))
    np.testing.assert_array_equal(np.asarray(f(x, idx))[2:], -1)


def test_q_values_of_the_actions_taken_fuse_with_the_loss():
    # A DQN loss: q[arange(n), actions] gathers one value per row; it fuses into the
    # kernel that squares and sums the errors (no one-hot over the actions).
    rng = np.random.default_rng(0)
    q = rng.standard_normal((4096, 18)).astype(np.float32)
    a = rng.integers(0, 18, 4096).astype(np.int32)
    target = rng.standard_normal(4096).astype(np.float32)

    def loss(q, a, target):
        taken = q[fnp.arange(q.shape[0]), a]
        return fnp.mean((taken - target) ** 2)

    f = fusionjit.jit(loss)
    want = np.mean((q[np.arange(4096), a] - target) ** 2)
    np.testing.assert_allclose(float(f(q, a, target)), want, rtol=1e-5)
    compiled = f.lower(q, a, target).compile()
    text = f.lower(q, a, target).as_text("optimized")
    assert "gather(" in text and "18,4096" not in text.replace(" ", "")
    assert compiled.num_kernels <= 2


def test_constant_folding_gives_the_compiled_gather():
    x = np.arange(24, dtype=np.float32).reshape(4, 6) * 0.5
    idx = np.array([[1, 5], [0, 0], [3, 2], [7, -2]], np.int32)
    dn = GDN(offset_dims=(), collapsed_slice_dims=(0, 1), start_index_map=(0, 1))
    compiled = fusionjit.jit(lambda x, i: lax.gather(x, i, dn, (1, 1), mode="clip"))(x, idx)
    folded = fusionjit.jit(lambda: lax.gather(fnp.asarray(x), fnp.asarray(idx), dn, (1, 1),
                                              mode="clip"))()
    np.testing.assert_array_equal(compiled, folded)
    np.testing.assert_array_equal(compiled, x[np.clip(idx[:, 0], 0, 3), np.clip(idx[:, 1], 0, 5)])


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.uint16, np.bool_, np.float16])
def test_take_and_indexing_of_every_dtype(dtype):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 100, (7, 5)).astype(dtype)
    i = rng.integers(-7, 7, 9).astype(np.int32)
    np.testing.assert_array_equal(fusionjit.jit(lambda x, i: x[i])(x, i), x[i])
    take = fusionjit.jit(lambda x, i: fnp.take(x, i, axis=1, mode="clip"))
    np.testing.assert_array_equal(take(x, i), np.take(x, i, axis=1, mode="clip"))
    j = rng.integers(0, 5, (7, 3)).astype(np.int32)
    along = fusionjit.jit(lambda x, j: fnp.take_along_axis(x, j, axis=1))
    np.testing.assert_array_equal(along(x, j), np.take_along_axis(x, j, axis=1))


def test_misuse_names_the_line():
    x = fnp.ones((3, 4))
    dn = GDN(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    with pytest.raises(TypeError, match="test_gather.py.*integers"):
        lax.gather(x, fnp.ones((2, 1)), dn, (1, 4))
    with pytest.raises(IndexError, match="slice_sizes"):
        lax.gather(x, fnp.zeros((2, 1), fnp.int32), dn, (1, 5))
    with pytest.raises(TypeError, match="collapsed_slice_dims"):
        lax.gather(x, fnp.zeros((2, 1), fnp.int32), dn, (2, 4))


@requires_jax
@pytest.mark.parametrize("case", range(4))
def test_gather_matches_jax(case):
    import jax
    rng = np.random.default_rng(case)
    x = rng.standard_normal((6, 5, 4)).astype(np.float32)
    cases = [
        (GDN((1, 2), (0,), (0,)), (1, 5, 4), rng.integers(-2, 8, (3, 1))),
        (GDN((0, 2), (1,), (1,)), (6, 1, 2), rng.integers(0, 5, (2, 1))),
        (GDN((2,), (0, 1), (0, 1)), (1, 1, 4), rng.integers(-1, 7, (2, 3, 2))),
        (GDN((1,), (0, 2), (2, 0)), (1, 3, 1), rng.integers(0, 6, (5, 2))),
    ]
    dn, sizes, idx = cases[case]
    idx = idx.astype(np.int32)
    for mode in ("clip", "fill"):
        got = fusionjit.jit(lambda x, i: lax.gather(x, i, dn, sizes, mode=mode))(x, idx)
        want = jax.lax.gather(x, idx, jax.lax.GatherDimensionNumbers(*dn), sizes, mode=mode)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
