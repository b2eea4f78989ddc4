"""lax.conv_general_dilated and lax.reduce_window (lax/convolution.py) against a direct
NumPy evaluation of their definitions, against JAX where installed, in every layout, with
padding, strides, dilations and feature groups; a Nature-DQN CNN policy under jit; errors."""

import itertools
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fusionjit
import fusionjit.numpy as fnp
from fusionjit import lax
from conftest import requires_jax


def conv_reference(x, w, strides, pads, lhs_dil, rhs_dil, groups):
    """NCHW x OIHW, by the definition: dilate, pad, then every output is a window sum."""
    n, c, *sp = x.shape
    o, i, *ks = w.shape
    dil_shape = [(s - 1) * d + 1 for s, d in zip(sp, lhs_dil)]
    xd = np.zeros((n, c, *dil_shape), np.float64)
    xd[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in lhs_dil)] = x
    padded = np.zeros((n, c, *[s + lo + hi for s, (lo, hi) in zip(dil_shape, pads)]))
    src = tuple(slice(max(-lo, 0), s - max(-hi, 0)) for s, (lo, hi) in zip(dil_shape, pads))
    dst = tuple(slice(max(lo, 0), max(lo, 0) + (sl.stop - sl.start))
                for sl, (lo, _) in zip(src, pads))
    padded[(slice(None), slice(None)) + dst] = xd[(slice(None), slice(None)) + src]
    out_sp = [(p - (k - 1) * r - 1) // s + 1 for p, k, s, r in
              zip(padded.shape[2:], ks, strides, rhs_dil)]
    out = np.zeros((n, o, *out_sp))
    og = o // groups
    for pos in itertools.product(*[range(v) for v in out_sp]):
        for tap in itertools.product(*[range(k) for k in ks]):
            at = tuple(p * s + t * r for p, s, t, r in zip(pos, strides, tap, rhs_dil))
            xs = padded[(slice(None), slice(None)) + at]  # n, c
            for g in range(groups):
                out[(slice(None), slice(g * og, (g + 1) * og)) + pos] += \
                    xs[:, g * i:(g + 1) * i] @ w[(slice(g * og, (g + 1) * og), slice(None)) + tap].T
    return out


CASES = [  # x shape (NCHW), w shape (OIHW), strides, padding, lhs_dil, rhs_dil, groups
    ((2, 3, 9, 8), (4, 3, 3, 2), (1, 1), [(0, 0), (0, 0)], None, None, 1),
    ((2, 3, 9, 8), (4, 3, 3, 2), (2, 3), [(1, 2), (0, -1)], (1, 2), (2, 1), 1),
    ((1, 6, 7, 7), (6, 2, 3, 3), (1, 1), [(1, 1), (1, 1)], None, None, 3),
    ((1, 4, 6, 5), (8, 1, 3, 3), (2, 2), [(1, 0), (2, 1)], None, (1, 2), 4),
    ((2, 3, 10), (5, 3, 3), (1,), [(2, 2)], None, (2,), 1),
    ((1, 2, 4, 5, 6), (3, 2, 2, 3, 2), (1, 2, 1), [(0, 0), (1, 1), (0, 0)], (2, 1, 1), None, 1)]


@pytest.mark.parametrize("xs,ws,strides,pads,lhs_dil,rhs_dil,groups", CASES)
def test_conv_matches_its_definition(xs, ws, strides, pads, lhs_dil, rhs_dil, groups):
    rng = np.random.default_rng(0)
    x = rng.normal(size=xs).astype(np.float32)
    w = rng.normal(size=ws).astype(np.float32)
    nsp = len(xs) - 2
    got = lax.conv_general_dilated(x, w, strides, pads, lhs_dil, rhs_dil,
                                   feature_group_count=groups)
    want = conv_reference(x, w, strides, pads, lhs_dil or (1,) * nsp, rhs_dil or (1,) * nsp,
                          groups)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_layouts_and_same_padding():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3, 9, 8)).astype(np.float32)
    w = rng.normal(size=(4, 3, 3, 2)).astype(np.float32)
    want = np.asarray(lax.conv_general_dilated(x, w, (2, 1), "SAME"))
    # SAME: out = ceil(in / stride), the extra padding at the end.
    assert want.shape == (2, 4, 5, 8)
    np.testing.assert_allclose(want, conv_reference(x, w, (2, 1), [(1, 1), (0, 1)], (1, 1),
                                                    (1, 1), 1), rtol=1e-5, atol=1e-5)
    got = lax.conv_general_dilated(x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), (2, 1),
                                   "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    np.testing.assert_allclose(np.asarray(got), want.transpose(0, 2, 3, 1), rtol=1e-6)
    got = lax.conv_general_dilated(x, w, (2, 1), "SAME",
                                   dimension_numbers=("NCHW", "OIHW", "NHWC"))
    np.testing.assert_allclose(np.asarray(got), want.transpose(0, 2, 3, 1), rtol=1e-6)
    dn = lax.conv_dimension_numbers(x.shape, w.shape, ("NCHW", "OIHW", "NCHW"))
    np.testing.assert_allclose(np.asarray(lax.conv_general_dilated(x, w, (2, 1), "SAME",
                                                                   dimension_numbers=dn)), want)
    np.testing.assert_allclose(np.asarray(lax.conv(x, w, (2, 1), "SAME")), want)
    assert lax.padtype_to_pads((9, 8), (3, 2), (2, 1), "SAME") == [(1, 1), (0, 1)]
    assert lax.padtype_to_pads((9, 8), (3, 2), (2, 1), "SAME_LOWER") == [(1, 1), (1, 0)]


def test_reduce_window_pools():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 8, 7, 3)).astype(np.float32)
    got = np.asarray(lax.reduce_window(x, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"))
    want = x[:, :8, :6].reshape(2, 4, 2, 3, 2, 3).max(axis=(2, 4))
    np.testing.assert_array_equal(got, want)
    # SAME max-pooling pads with -inf; a sum over 3x3 windows with zero padding.
    got = np.asarray(lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME"))
    p = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = sum(p[:, i:i + 8, j:j + 7] for i in range(3) for j in range(3))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    got = np.asarray(lax.reduce_window(x, np.inf, lambda a, b: fnp.minimum(a, b), (1, 1, 7, 1),
                                       (1, 1, 1, 1), "VALID"))
    np.testing.assert_array_equal(got[:, :, 0], x.min(axis=2))
    i = np.arange(12, dtype=np.int32).reshape(3, 4)
    got = lax.reduce_window(i, 0, lax.add, (2, 2), (1, 1), "VALID", window_dilation=(2, 1))
    np.testing.assert_array_equal(np.asarray(got), i[:1, :3] + i[:1, 1:] + i[2:, :3] + i[2:, 1:])


def test_a_max_pools_slope_goes_to_the_first_maximum_of_each_window():
    # As JAX's select_and_scatter: ties (common after a ReLU) do not split the slope.
    f = lambda x: lax.reduce_window(x, -np.inf, lax.max, (2, 2), (1, 1), "VALID").sum()  # noqa
    np.testing.assert_array_equal(np.asarray(fusionjit.grad(f)(np.ones((3, 3), np.float32))),
                                  [[1, 1, 0], [1, 1, 0], [0, 0, 0]])
    g = lambda x: lax.reduce_window(x, np.inf, lax.min, (2,), (1,), "VALID").sum()  # noqa
    np.testing.assert_array_equal(np.asarray(fusionjit.jit(fusionjit.grad(g))(
        np.array([1, 1, 2, 0], np.float32))), [1, 1, 0, 1])
    # A ReLU then a 2x2 max pool, against the same routing written out in NumPy.
    x = np.random.default_rng(0).normal(size=(2, 6, 6, 3)).astype(np.float32)
    pool = lambda x: lax.reduce_window(fnp.maximum(x, 0), -np.inf, lax.max,  # noqa: E731
                                       (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    got = np.asarray(fusionjit.grad(lambda x: (pool(x) ** 2).sum())(x))
    r = np.maximum(x, 0)
    want = np.zeros_like(x)
    for n, i, j, c in np.ndindex(2, 3, 3, 3):
        w = r[n, 2 * i:2 * i + 2, 2 * j:2 * j + 2, c].reshape(-1)
        k = int(np.argmax(w))  # the first maximum
        if x[n, 2 * i + k // 2, 2 * j + k % 2, c] > 0:
            want[n, 2 * i + k // 2, 2 * j + k % 2, c] = 2 * w[k]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_dqn_policy_under_jit():
    rng = np.random.default_rng(3)
    obs = rng.uniform(size=(4, 36, 36, 4)).astype(np.float32)
    w1 = rng.normal(0, 0.1, (8, 8, 4, 16)).astype(np.float32)
    w2 = rng.normal(0, 0.1, (4, 4, 16, 32)).astype(np.float32)
    wf = rng.normal(0, 0.1, (3 * 3 * 32, 6)).astype(np.float32)
    dn = ("NHWC", "HWIO", "NHWC")

    @fusionjit.jit
    def q_values(obs):
        h = fnp.maximum(lax.conv_general_dilated(obs, w1, (4, 4), "VALID", dimension_numbers=dn), 0)
        h = fnp.maximum(lax.conv_general_dilated(h, w2, (2, 2), "VALID", dimension_numbers=dn), 0)
        return h.reshape(h.shape[0], -1) @ wf

    def reference(obs):
        h = np.maximum(conv_reference(obs.transpose(0, 3, 1, 2), w1.transpose(3, 2, 0, 1),
                                      (4, 4), [(0, 0)] * 2, (1, 1), (1, 1), 1), 0)
        h = np.maximum(conv_reference(h, w2.transpose(3, 2, 0, 1), (2, 2), [(0, 0)] * 2,
                                      (1, 1), (1, 1), 1), 0)
        return h.transpose(0, 2, 3, 1).reshape(4, -1) @ wf
    np.testing.assert_allclose(np.asarray(q_values(obs)), reference(obs), rtol=1e-4, atol=1e-4)


@pytest.mark.cpu_only
def test_patch_windows_are_loaded_as_runs_where_their_lanes_are_consecutive():
    # The patch matrix is one gather whose indices are computed from iotas: its lanes were
    # read a lane at a time (a DQN's first convolution, 84x84x4 by 8x8/4: 3.6 ms of its
    # 10.6). A window's row is a run of kernel-width x channels elements, so a vector of
    # lanes whose indices are consecutive is one load, tested at run time; the others
    # (lanes that cross a window's row) are still gathered. The same values either way.
    rng = np.random.default_rng(4)
    dn = ("NHWC", "HWIO", "NHWC")
    for x_shape, w_shape, stride in [((2, 20, 20, 4), (8, 8, 4, 8), 4),   # runs of 32
                                     ((2, 9, 9, 3), (3, 3, 3, 5), 1)]:    # runs of 9
        x = rng.uniform(size=x_shape).astype(np.float32)
        w = rng.normal(0, 0.1, w_shape).astype(np.float32)
        f = fusionjit.jit(lambda x, w, s=stride: lax.conv_general_dilated(
            x, w, (s, s), "VALID", dimension_numbers=dn))
        assert "load.run" in f.lower(x, w).as_text("llvm")
        want = conv_reference(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), (stride, stride),
                              [(0, 0)] * 2, (1, 1), (1, 1), 1).transpose(0, 2, 3, 1)
        np.testing.assert_allclose(np.asarray(f(x, w)), want, rtol=1e-5, atol=1e-5)
    # A gather of rows in random order reads each vector's lanes as they come.
    table = rng.standard_normal((50, 16)).astype(np.float32)
    rows = rng.integers(0, 50, 300).astype(np.int32)
    cols = rng.integers(0, 16, 300).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(fusionjit.jit(lambda t, r: t[r])(table, rows)),
                                  table[rows])
    np.testing.assert_array_equal(
        np.asarray(fusionjit.jit(lambda t, r, c: t[r, c])(table, rows, cols)), table[rows, cols])


def test_errors_name_the_line():
    x = np.ones((1, 4, 5, 5), np.float32)
    with pytest.raises(ValueError, match=r"test_conv.py:\d+.*groups"):
        lax.conv_general_dilated(x, np.ones((3, 2, 3, 3), np.float32), (1, 1), "VALID",
                                 feature_group_count=2)
    with pytest.raises(ValueError, match="Unknown padding"):
        lax.conv_general_dilated(x, np.ones((2, 4, 3, 3), np.float32), (1, 1), "FULL")
    with pytest.raises(ValueError, match="String padding is not implemented for transposed"):
        lax.conv_general_dilated(x, np.ones((2, 4, 3, 3), np.float32), (1, 1), "SAME",
                                 lhs_dilation=(2, 2))
    with pytest.raises(TypeError, match="same dtype"):
        lax.conv_general_dilated(x, np.ones((2, 4, 3, 3), np.int32), (1, 1), "VALID")
    with pytest.raises(ValueError, match="do not match"):
        lax.conv_general_dilated(x, np.ones((2, 4, 3, 3), np.float32), (1, 1), "VALID",
                                 dimension_numbers=("NCHW", "OIHW", "NCXW"))
    with pytest.raises(NotImplementedError, match="batch_group_count"):
        lax.conv_general_dilated(x, np.ones((2, 4, 3, 3), np.float32), (1, 1), "VALID",
                                 batch_group_count=2)
    # Padding that cuts more than the input has, a kernel of no taps: errors, as JAX's (they
    # gave an empty result and zeros).
    with pytest.raises(ValueError, match=r"test_conv.py:\d+.*negative padding is larger"):
        lax.conv_general_dilated(x, np.ones((2, 4, 1, 1), np.float32), (1, 1),
                                 [(-3, -3), (0, 0)])
    assert lax.conv_general_dilated(x, np.ones((2, 4, 1, 1), np.float32), (1, 1),
                                    [(-3, -2), (0, 0)]).shape == (1, 2, 0, 5)
    with pytest.raises(ValueError, match="spatial dimensions must be positive"):
        lax.conv_general_dilated(x, np.ones((2, 4, 0, 3), np.float32), (1, 1), "VALID")


@requires_jax
def test_agrees_with_jax():
    import jax
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 12, 11, 6)).astype(np.float32)
    for w_shape, kw in [((3, 3, 6, 8), dict(window_strides=(2, 1), padding="SAME")),
                        ((3, 3, 2, 6), dict(window_strides=(1, 1), padding="SAME",
                                            feature_group_count=3)),
                        ((2, 3, 6, 4), dict(window_strides=(1, 2), padding=[(1, 0), (2, 2)],
                                            lhs_dilation=(2, 1), rhs_dilation=(1, 2)))]:
        w = rng.normal(size=w_shape).astype(np.float32)
        kw["dimension_numbers"] = ("NHWC", "HWIO", "NHWC")
        np.testing.assert_allclose(np.asarray(lax.conv_general_dilated(x, w, **kw)),
                                   np.asarray(jax.lax.conv_general_dilated(x, w, **kw)),
                                   rtol=1e-5, atol=1e-5)
    for init, op, jop in [(-np.inf, lax.max, jax.lax.max), (0.0, lax.add, jax.lax.add)]:
        args = ((1, 3, 3, 1), (1, 2, 2, 1), "SAME")
        np.testing.assert_allclose(np.asarray(lax.reduce_window(x, init, op, *args)),
                                   np.asarray(jax.lax.reduce_window(x, init, jop, *args)),
                                   rtol=1e-6, atol=1e-6)


@st.composite
def conv_problems(draw):
    nsp = draw(st.integers(1, 2))
    groups = draw(st.sampled_from([1, 2, 3]))
    ig, og = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    ks = [draw(st.integers(1, 3)) for _ in range(nsp)]
    strides = [draw(st.integers(1, 3)) for _ in range(nsp)]
    lhs_dil = [draw(st.integers(1, 2)) for _ in range(nsp)]
    rhs_dil = [draw(st.integers(1, 2)) for _ in range(nsp)]
    pads = [(draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(nsp)]
    sp = []
    for k, r, d, (lo, hi) in zip(ks, rhs_dil, lhs_dil, pads):
        # At least one output: the dilated, padded input covers the dilated kernel.
        low = max(1, -(-((k - 1) * r + 1 - lo - hi - 1) // d) + 1)
        sp.append(draw(st.integers(low, low + 4)))
    n = draw(st.integers(1, 2))
    return ((n, groups * ig, *sp), (groups * og, ig, *ks), tuple(strides), pads,
            tuple(lhs_dil), tuple(rhs_dil), groups)


@given(conv_problems())
def test_random_convolutions_match_the_definition(problem):
    xs, ws, strides, pads, lhs_dil, rhs_dil, groups = problem
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x = rng.normal(size=xs).astype(np.float32)
    w = rng.normal(size=ws).astype(np.float32)
    got = lax.conv_general_dilated(x, w, strides, pads, lhs_dil, rhs_dil,
                                   feature_group_count=groups)
    want = conv_reference(x, w, strides, pads, lhs_dil, rhs_dil, groups)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_review_fixes_accumulation_padding_and_empty_results():
    # preferred_element_type is the type the products are summed in (int8 -> int32 does
    # not wrap; float16 -> float32 does not overflow), not a cast of the result.
    i8 = lax.conv_general_dilated(np.full((1, 1, 4, 4), 100, np.int8),
                                  np.full((1, 1, 3, 3), 100, np.int8), (1, 1), "VALID",
                                  preferred_element_type=np.int32)
    assert np.asarray(i8).dtype == np.int32
    np.testing.assert_array_equal(np.asarray(i8), np.full((1, 1, 2, 2), 90000))
    f16 = lax.conv_general_dilated(np.full((1, 16, 4, 4), 100, np.float16),
                                   np.full((1, 16, 3, 3), 100, np.float16), (1, 1), "VALID",
                                   preferred_element_type=np.float32)
    np.testing.assert_array_equal(np.asarray(f16), np.full((1, 1, 2, 2), 1.44e6, np.float32))
    # Padded cells do not count and the init value joins each window once (JAX's values).
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(
        np.asarray(lax.reduce_window(x, 5.0, lax.add, (3,), (1,), "SAME")), [6, 8, 11, 10])
    np.testing.assert_array_equal(
        np.asarray(lax.reduce_window(x, 2.0, lax.mul, (3,), (1,), "SAME")), [0, 0, 12, 12])
    np.testing.assert_array_equal(
        np.asarray(lax.reduce_window(x, 1.0, lax.add, (2,), (1,), "VALID", base_dilation=(2,))),
        [1, 2, 2, 3, 3, 4])
    # A window larger than the input, or an empty batch: an empty result, as JAX.
    assert np.asarray(lax.conv_general_dilated(np.ones((1, 1, 2, 2), np.float32),
                                               np.ones((1, 1, 3, 3), np.float32), (1, 1),
                                               "VALID")).shape == (1, 1, 0, 0)
    assert np.asarray(lax.reduce_window(np.zeros((0, 4, 4, 1), np.float32), -np.inf, lax.max,
                                        (1, 2, 2, 1), (1, 2, 2, 1), "VALID")).shape == (0, 2, 2, 1)


# --- conv_transpose ---------------------------------------------------------------------------

@requires_jax
@pytest.mark.slow  # (not emulated: 73 s there; its kernels are the other tests' kinds)
@pytest.mark.parametrize("nsp", [1, 2, 3])
def test_conv_transpose_agrees_with_jax(nsp):
    import jax
    rng = np.random.RandomState(nsp)
    sizes, ksizes = [5, 4, 3][:nsp], [3, 2, 4][:nsp]
    cases = itertools.product([(1,) * nsp, (2,) * nsp, tuple([3, 1, 2][:nsp])],
                              ["SAME", "VALID", [(1, 2)] * nsp, [(-1, 2)] * nsp])
    for k, (strides, pad) in enumerate(cases):
        transpose_kernel, rhs_dil = k % 2 == 1, (None if k % 3 else (2,) * nsp)
        x = rng.randn(2, *sizes, 3).astype(np.float32)
        w = rng.randn(*ksizes, *((4, 3) if transpose_kernel else (3, 4))).astype(np.float32)
        kw = dict(rhs_dilation=rhs_dil, transpose_kernel=transpose_kernel)
        got = lax.conv_transpose(x, w, strides, pad, **kw)
        want = jax.lax.conv_transpose(x, w, strides, pad, **kw)
        assert got.shape == want.shape, (strides, pad, kw)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5,
                                   err_msg=f"{strides} {pad} {kw}")
    # Channels first, under jit, and the gradients.
    dn = ("NCHW", "OIHW", "NCHW")
    x = rng.randn(2, 4, 5, 4).astype(np.float32)
    w = rng.randn(4, 3, 3, 2).astype(np.float32)  # O and I swapped by transpose_kernel

    def loss(lib):
        return lambda a, b: (lib.lax.conv_transpose(a, b, (2, 1), "SAME", dimension_numbers=dn,
                                                    transpose_kernel=True) ** 2).sum()
    np.testing.assert_allclose(fusionjit.jit(loss(fusionjit))(x, w), loss(jax)(x, w), rtol=1e-5)
    for g, want in zip(fusionjit.grad(loss(fusionjit), (0, 1))(x, w),
                       jax.grad(loss(jax), (0, 1))(x, w)):
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4)


def test_conv_transpose_shapes_and_errors():
    x = np.ones((1, 4, 3), np.float32)  # NHC
    w = np.ones((2, 3, 5), np.float32)  # HIO
    assert lax.conv_transpose(x, w, (2,), "SAME").shape == (1, 8, 5)
    assert lax.conv_transpose(x, w, (3,), "VALID").shape == (1, 12, 5)
    assert lax.conv_transpose(x, w, (1,), "VALID").shape == (1, 5, 5)
    with pytest.raises(ValueError, match="strides must be 1 positive ints"):
        lax.conv_transpose(x, w, (2, 2), "SAME")
    with pytest.raises(ValueError, match="padding must be 'SAME', 'VALID' or 1"):
        lax.conv_transpose(x, w, (2,), "same")  # capitals only, as JAX's
    with pytest.raises(ValueError, match="padding must be 'SAME', 'VALID' or 1"):
        lax.conv_transpose(x, w, (2,), "FULL")
    with pytest.raises(ValueError, match="padding must be"):
        lax.conv_transpose(x, w, (2,), [(1, 1), (1, 1)])
    with pytest.raises(ValueError, match="same rank"):
        lax.conv_transpose(x, w[0], (2,), "SAME")


# --- derivatives (lax/im2col.py: the input's cotangent a convolution, the kernel's a GEMM) -

DERIVATIVE_CASES = [  # x shape (NHWC), w shape (HWIO), keyword arguments
    ((2, 9, 8, 6), (3, 3, 6, 4), dict(window_strides=(1, 1), padding="SAME")),
    ((2, 9, 8, 6), (3, 2, 6, 4), dict(window_strides=(2, 3), padding="SAME_LOWER")),
    ((2, 9, 8, 6), (3, 3, 6, 4), dict(window_strides=(2, 2), padding="VALID")),
    ((2, 9, 8, 6), (3, 3, 6, 4), dict(window_strides=(1, 2), padding=((2, -1), (-1, 3)))),
    ((2, 9, 8, 6), (3, 3, 6, 4), dict(window_strides=(1, 1), padding=((1, 2), (1, 2)),
                                      lhs_dilation=(2, 2))),
    ((2, 7, 8, 6), (3, 4, 6, 4), dict(window_strides=(2, 1), padding=((0, 1), (2, -1)),
                                      lhs_dilation=(3, 2), rhs_dilation=(2, 1))),
    ((2, 9, 8, 6), (3, 3, 1, 12), dict(window_strides=(2, 1), padding=((1, 1), (0, 2)),
                                       rhs_dilation=(1, 2), feature_group_count=6)),
    ((2, 9, 8, 6), (3, 3, 3, 4), dict(window_strides=(1, 2), padding=((1, 2), (2, 0)),
                                      lhs_dilation=(2, 3), feature_group_count=2)),
    ((1, 14, 14, 1), (5, 5, 1, 8), dict(window_strides=(2, 1), padding="SAME")),
    ((2, 11, 3), (3, 3, 5), dict(window_strides=(2,), padding=((2, 1),), lhs_dilation=(3,),
                                 rhs_dilation=(2,))),
    ((1, 5, 6, 7, 2), (2, 3, 2, 2, 4), dict(window_strides=(2, 1, 2),
                                            padding=((0, 1), (1, 1), (-1, 2)),
                                            lhs_dilation=(2, 1, 2))),
]
LAYOUTS = {1: [("NWC", "WIO", "NWC"), ("NCW", "OIW", "NCW")],
           2: [("NHWC", "HWIO", "NHWC"), ("NCHW", "OIHW", "NCHW"), ("NHWC", "OIHW", "NCHW")],
           3: [("NDHWC", "DHWIO", "NDHWC"), ("NCDHW", "OIDHW", "NCDHW")]}


def _in_layout(x, w, dn):
    """x and w (given channels last, kernel last) in the layouts ``dn`` names."""
    nsp = x.ndim - 2
    spatial = dn[1].replace("O", "").replace("I", "")
    x_at = {c: i for i, c in enumerate("N" + spatial + "C")}
    w_at = {c: i for i, c in enumerate(spatial + "IO")}
    assert len(spatial) == nsp
    return (x.transpose([x_at[c] for c in dn[0]]), w.transpose([w_at[c] for c in dn[1]]))


@requires_jax
@pytest.mark.parametrize("xs,ws,kw,dn", [
    case + (LAYOUTS[len(case[0]) - 2][k % len(LAYOUTS[len(case[0]) - 2])],)
    for k, case in enumerate(DERIVATIVE_CASES)])
def test_derivatives_agree_with_jax(xs, ws, kw, dn):
    import jax
    rng = np.random.default_rng(5)
    x, w = _in_layout(rng.normal(size=xs).astype(np.float32),
                      rng.normal(size=ws).astype(np.float32), dn)

    def conv(lax_):
        return lambda x, w: lax_.conv_general_dilated(x, w, dimension_numbers=dn, **kw)
    want = conv(jax.lax)(x, w)
    np.testing.assert_allclose(np.asarray(fusionjit.jit(conv(lax))(x, w)), want, rtol=1e-5,
                               atol=1e-5)
    ct = rng.normal(size=want.shape).astype(np.float32)
    grads = [g(lambda x, w, c=c: (c(x, w) * ct).sum(), (0, 1))
             for g, c in ((fusionjit.grad, conv(lax)), (jax.grad, conv(jax.lax)))]
    for got, want in zip(fusionjit.jit(grads[0])(x, w), grads[1](x, w)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)
    tx, tw = rng.normal(size=x.shape).astype(np.float32), rng.normal(size=w.shape).astype(
        np.float32)
    got = fusionjit.jit(lambda x, w: fusionjit.jvp(conv(lax), (x, w), (tx, tw)))(x, w)
    for g, w_ in zip(got, jax.jvp(conv(jax.lax), (x, w), (tx, tw))):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w_), rtol=1e-4, atol=1e-4)


def _jacobian(f, shape):
    """The Jacobian of the linear ``f`` (NumPy in, NumPy out) at ``shape``, column by column."""
    basis = np.eye(int(np.prod(shape))).reshape((-1,) + shape)
    return np.stack([f(e).reshape(-1) for e in basis], axis=1)


@pytest.mark.parametrize("case", [1, 3, 4])
def test_float64_cotangents_are_the_transposed_jacobians(x64, case):
    # The convolution is linear in each operand: its cotangents are the transposed
    # Jacobians of the definition (NumPy, no JAX needed), to float64 rounding.
    xs, ws, strides, pads, lhs_dil, rhs_dil, groups = CASES[case]
    xs, ws = (1,) + xs[1:3] + tuple(min(s, 5) for s in xs[3:]), ws  # small enough to enumerate
    rng = np.random.default_rng(6)
    x, w = rng.normal(size=xs), rng.normal(size=ws)
    nsp = len(xs) - 2
    ld, rd = lhs_dil or (1,) * nsp, rhs_dil or (1,) * nsp

    def f(x, w):
        return lax.conv_general_dilated(x, w, strides, pads, lhs_dil, rhs_dil,
                                        feature_group_count=groups)
    y = conv_reference(x, w, strides, pads, ld, rd, groups)
    np.testing.assert_allclose(np.asarray(f(x, w)), y, rtol=1e-12, atol=1e-12)
    ct = rng.normal(size=y.shape)
    out, pullback = fusionjit.vjp(f, x, w)
    gx, gw = pullback(ct)
    assert np.asarray(gx).dtype == np.float64 and np.asarray(gw).dtype == np.float64
    jx = _jacobian(lambda e: conv_reference(e, w, strides, pads, ld, rd, groups), x.shape)
    jw = _jacobian(lambda e: conv_reference(x, e, strides, pads, ld, rd, groups), w.shape)
    np.testing.assert_allclose(np.asarray(gx).reshape(-1), jx.T @ ct.reshape(-1), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(np.asarray(gw).reshape(-1), jw.T @ ct.reshape(-1), rtol=1e-12,
                               atol=1e-12)
    tx, tw = rng.normal(size=x.shape), rng.normal(size=w.shape)
    _, tangent = fusionjit.jvp(f, (x, w), (tx, tw))
    np.testing.assert_allclose(np.asarray(tangent).reshape(-1),
                               jx @ tx.reshape(-1) + jw @ tw.reshape(-1), rtol=1e-12, atol=1e-12)


def test_vmap_of_a_convolution_and_of_its_gradient():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(3, 2, 3, 7, 6)).astype(np.float32)  # 3 examples of NCHW
    w = rng.normal(size=(3, 4, 3, 3, 2)).astype(np.float32)
    kw = dict(window_strides=(2, 1), padding=((1, 1), (0, 1)), lhs_dilation=(1, 2))

    def conv(x, w):
        return lax.conv_general_dilated(x, w, **kw)
    want = np.stack([conv_reference(x[k], w[k], (2, 1), [(1, 1), (0, 1)], (1, 2), (1, 1), 1)
                     for k in range(3)])
    np.testing.assert_allclose(np.asarray(fusionjit.jit(fusionjit.vmap(conv))(x, w)), want,
                               rtol=1e-5, atol=1e-5)
    shared = np.stack([conv_reference(x[k], w[0], (2, 1), [(1, 1), (0, 1)], (1, 2), (1, 1), 1)
                       for k in range(3)])
    np.testing.assert_allclose(np.asarray(fusionjit.vmap(conv, (0, None))(x, w[0])), shared,
                               rtol=1e-5, atol=1e-5)
    # Per example, the gradient of the loss alone (a vmapped backward pass).
    loss = fusionjit.grad(lambda x, w: (conv(x, w) ** 2).sum(), (0, 1))
    got = fusionjit.jit(fusionjit.vmap(loss, (0, None)))(x, w[0])
    for k in range(3):
        for g, e in zip(got, loss(x[k], w[0])):
            np.testing.assert_allclose(np.asarray(g)[k], np.asarray(e), rtol=1e-4, atol=1e-4)


@requires_jax
def test_second_derivatives_agree_with_jax():
    import jax
    rng = np.random.default_rng(8)
    x = rng.normal(size=(2, 6, 5, 3)).astype(np.float32)
    dn = ("NHWC", "HWIO", "NHWC")
    for k, (ws, kw) in enumerate([((3, 3, 3, 2), dict(window_strides=(2, 1), padding="SAME")),
            ((3, 2, 3, 2), dict(window_strides=(1, 1), padding=((1, 2), (0, 1)),
                                lhs_dilation=(2, 1))),
            ((3, 3, 1, 6), dict(window_strides=(1, 1), padding="SAME", feature_group_count=3))]):
        w = rng.normal(size=ws).astype(np.float32)

        def loss(lax_):
            return lambda x, w: (lax_.conv_general_dilated(x, w, dimension_numbers=dn,
                                                           **kw) ** 3).sum()

        def outer(grad, lax_):
            return grad(lambda x, w: (grad(loss(lax_))(x, w) ** 2).sum(), (0, 1))
        for got, want in zip(fusionjit.jit(outer(fusionjit.grad, lax))(x, w),
                             outer(jax.grad, jax.lax)(x, w)):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-4, atol=2e-3)
        if k:
            continue  # one Hessian (a forward pass over each of the kernel's elements)
        np.testing.assert_allclose(
            np.asarray(fusionjit.hessian(lambda w: loss(lax)(x, w))(w)),
            np.asarray(jax.hessian(lambda w: loss(jax.lax)(x, w))(w)), rtol=2e-4, atol=2e-3)


@pytest.mark.cpu_only
def test_padding_dilation_and_gradients_cost_no_extra_passes():
    # SAME padding is a mask on the patch gather (no padded copy read through a pad);
    # an lhs-dilated (transposed) convolution gathers only the taps that meet input
    # elements, not the dilation's zeros; the input's gradient is a convolution, not a
    # scatter-add of the patch matrix's cotangent.
    dn = ("NHWC", "HWIO", "NHWC")
    x = np.ones((4, 16, 16, 8), np.float32)
    w = np.ones((3, 3, 8, 8), np.float32)

    def conv(**kw):
        return lambda x, w: lax.conv_general_dilated(x, w, dimension_numbers=dn, **kw)
    same = fusionjit.jit(conv(window_strides=(1, 1), padding="SAME")).lower(x, w).compile()
    assert not re.search(r"\bpad\(", same.as_text("optimized"))
    up = fusionjit.jit(conv(window_strides=(1, 1), padding=((1, 2), (1, 2)),
                            lhs_dilation=(2, 2))).lower(x, w).compile()
    # The dilated input's patches: 4 * 32 * 32 outputs of 9 taps x 8 features; the live
    # taps are a quarter of them, plus the output's interleaving.
    dense = 4 * 32 * 32 * 9 * 8 * 4
    assert sum(k["bytes_written"] for k in up.kernels) < dense / 2
    grad = fusionjit.jit(fusionjit.grad(lambda x, w: (conv(
        window_strides=(2, 2), padding="SAME")(x, w) ** 2).sum(), (0, 1))).lower(x, w).compile()
    assert all(k["kind"] != "kScatter" for k in grad.kernels)
    assert "scatter" not in grad.as_text("optimized")
