"""``fusionjit.ops`` (segment reductions, as ``jax.ops``), the gradients of scatters that
take a maximum, a minimum or a product, lax's floating-point functions and products of
booleans: checked against NumPy, and against JAX where it is installed."""
from __future__ import annotations

import numpy as np
import pytest

import fusionjit
import fusionjit.lax as lax
import fusionjit.numpy as fnp
from conftest import assert_close

DATA = np.arange(12, dtype=np.float32).reshape(6, 2) - 4
IDS = np.array([0, 2, 2, 5, -1, 0], np.int32)  # 5 and -1: outside 4 segments, dropped
SEGMENTS = {"segment_sum": (np.add, 0), "segment_prod": (np.multiply, 1),
            "segment_max": (np.maximum, -np.inf), "segment_min": (np.minimum, np.inf)}


def numpy_segments(name, data, ids, n):
    combine, identity = SEGMENTS[name]
    out = np.full((n,) + data.shape[1:], identity, data.dtype)
    for row, i in zip(data, ids):
        if 0 <= i < n:
            out[i] = combine(out[i], row)
    return out


@pytest.mark.parametrize("name", SEGMENTS)
def test_segment_reductions_match_numpy_and_jax(name):
    f = getattr(fusionjit.ops, name)
    want = numpy_segments(name, DATA, IDS, 4)
    assert_close(f(DATA, IDS, 4), want)
    assert_close(fusionjit.jit(f, static_argnums=2)(DATA, IDS, 4), want)
    jax = pytest.importorskip("jax")
    assert_close(f(DATA, IDS, num_segments=4), np.asarray(getattr(jax.ops, name)(DATA, IDS, 4)))


def test_segment_sum_of_integers_and_the_count_from_the_ids():
    ids = np.array([0, 1, 1, 2, 2, 0], np.int32)
    out = fusionjit.ops.segment_sum(ids, ids)  # outside jit the ids give the length
    np.testing.assert_array_equal(out, [0, 2, 4])
    assert np.asarray(out).dtype == np.int32
    with pytest.raises(fusionjit.ConcretizationTypeError, match="num_segments must be given") as e:
        fusionjit.jit(fusionjit.ops.segment_sum)(DATA, ids)
    assert "test_jax_ops.py" in str(e.value)
    with pytest.raises(TypeError, match="segment_ids must be integers"):
        fusionjit.ops.segment_sum(DATA, ids.astype(np.float32), 3)


def test_segment_gradients():
    def loss(d, name):
        return (getattr(fusionjit.ops, name)(d, IDS, 4) ** 2).sum()

    g = fusionjit.grad(loss)(DATA, "segment_sum")
    sums = numpy_segments("segment_sum", DATA, IDS, 4)
    want = np.stack([2 * sums[i] if 0 <= i < 4 else np.zeros(2, np.float32) for i in IDS])
    assert_close(g, want)
    g = fusionjit.grad(loss)(DATA, "segment_max")  # the row that is each segment's maximum
    maxima = numpy_segments("segment_max", DATA, IDS, 4)
    want = np.stack([np.where(DATA[r] == maxima[i], 2 * maxima[i], 0) if 0 <= i < 4
                     else np.zeros(2) for r, i in enumerate(IDS)]).astype(np.float32)
    assert_close(g, want)


@pytest.mark.parametrize("method", ["max", "min"])
def test_scatter_extrema_split_the_cotangent_among_ties_as_jax(method):
    idx = np.array([0, 1, 1, 3, 9])  # 9: dropped
    u = np.array([1.0, 2.0, 5.0, -1.0, 7.0], np.float32)
    x = np.array([0.0, 2.0, 0.0, 0.0], np.float32)
    w = np.arange(1.0, 5.0, dtype=np.float32)

    def f(u, x):
        return (getattr(x.at[idx], method)(u) * w).sum()

    gu, gx = fusionjit.grad(f, argnums=(0, 1))(u, x)
    if method == "max":  # 0: u0 wins; 1: u2 (5); 2: x; 3: x (0 > -1)
        want_u, want_x = [1, 0, 2, 0, 0], [0, 0, 3, 4]
    else:  # 0: x; 1: x and u1 tie at 2, half each; 2: x; 3: u3
        want_u, want_x = [0, 1, 0, 4, 0], [1, 1, 3, 0]
    assert_close(gu, np.float32(want_u))
    assert_close(gx, np.float32(want_x))
    jax = pytest.importorskip("jax")
    jf = lambda u, x: (getattr(x.at[idx], method)(u) * w).sum()  # noqa: E731
    for a, b in zip((gu, gx), jax.grad(jf, argnums=(0, 1))(u, x)):
        assert_close(a, np.asarray(b))


def test_scatter_product_gradient_needs_unique_indices():
    idx = np.array([0, 2, 3])
    u = np.array([2.0, 3.0, 4.0], np.float32)
    x = np.arange(1.0, 5.0, dtype=np.float32)
    w = np.arange(1.0, 5.0, dtype=np.float32)
    gu, gx = fusionjit.grad(lambda u, x: (x.at[idx].mul(u, unique_indices=True) * w).sum(),
                            argnums=(0, 1))(u, x)
    assert_close(gu, np.float32([1 * 1, 3 * 3, 4 * 4]))  # w * x where each lands
    assert_close(gx, np.float32([1 * 2, 2, 3 * 3, 4 * 4]))  # w * the factor landing there
    with pytest.raises(NotImplementedError, match="unique_indices=True"):
        fusionjit.grad(lambda u: fnp.asarray(x).at[idx].mul(u).sum())(u)


@pytest.mark.parametrize("name, numpy_fn, x", [
    ("sinh", np.sinh, 0.5), ("cosh", np.cosh, 0.5), ("asin", np.arcsin, 0.5),
    ("acos", np.arccos, 0.5), ("atan", np.arctan, 0.5), ("asinh", np.arcsinh, 0.5),
    ("acosh", np.arccosh, 1.5), ("atanh", np.arctanh, 0.5), ("cbrt", np.cbrt, -27.0),
    ("exp2", np.exp2, 0.5)])
def test_lax_floating_point_functions(name, numpy_fn, x):
    xs = np.float32([x, x * 0.9])
    assert_close(getattr(lax, name)(xs), numpy_fn(xs))
    with pytest.raises(TypeError, match=f"lax.{name} does not accept dtype int32"):
        getattr(lax, name)(np.int32(1))


def test_products_of_booleans_are_booleans_as_in_jax():
    a = np.array([[True, False], [False, False]])
    b = np.array([[True], [True]])
    for out in (fnp.asarray(a) @ fnp.asarray(b), fusionjit.jit(fnp.matmul)(a, b),
                fnp.einsum("ij,jk->ik", a, b)):
        assert np.asarray(out).dtype == np.bool_
        np.testing.assert_array_equal(out, [[True], [False]])
    assert not bool(fnp.dot(a[0], a[1]))


def test_lax_reduce_with_a_monoid():
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    assert_close(lax.reduce(x, 0.0, lax.add, (0,)), x.sum(0))
    assert_close(lax.reduce(x, -np.inf, lax.max, (1,)), x.max(1))
    assert_close(fusionjit.jit(lambda a: lax.reduce(a, 1.0, lax.mul, (0, 1)))(x + 6),
                 np.prod(x + 6, dtype=np.float32), rtol=1e-6)
    b = x > 0
    np.testing.assert_array_equal(lax.reduce(b, False, lax.bitwise_or, (1,)), b.any(1))
    # Any other computation, and several operands at once (test_lax_more.py has more).
    assert_close(lax.reduce(x, 0.0, lambda a, c: a + c, (0,)), x.sum(0))
    s, m = lax.reduce((x, x), (0.0, -np.inf), lambda a, c: (a[0] + c[0], lax.max(a[1], c[1])),
                      (0,))
    assert_close(s, x.sum(0))
    assert_close(m, x.max(0))


def test_make_jaxpr_and_jacobian():
    jaxpr = fusionjit.make_jaxpr(lambda x, y: fnp.sin(x) * y)(np.ones(3, np.float32), 2.0)
    text = str(jaxpr)
    assert "sin" in text and "mul" in text and "f32[3]" in text
    _, shapes = fusionjit.make_jaxpr(lambda x: {"a": x * 2}, return_shape=True)(
        np.ones((2, 2), np.float32))
    assert shapes["a"].shape == (2, 2) and shapes["a"].dtype == np.float32
    x = np.arange(3.0, dtype=np.float32)
    assert_close(fusionjit.jacobian(lambda v: v ** 2)(x), np.diag(2 * x))


def test_precision_is_jaxs_enum_and_strings():
    # precision=lax.Precision.HIGHEST raised AttributeError: there was no enum (hunt 7).
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    want = a @ a.T
    for p in (lax.Precision.HIGHEST, lax.Precision.DEFAULT, "highest", "tensorfloat32",
              ("highest", "high"), None):
        np.testing.assert_allclose(lax.dot(a, a.T, precision=p), want)
        np.testing.assert_allclose(fnp.einsum("ij,kj->ik", a, a, precision=p), want)
    assert lax.Precision("float32") is lax.Precision.HIGHEST and str(lax.Precision.HIGH) == "HIGH"
    with pytest.raises(ValueError):
        lax.Precision("fp8")
