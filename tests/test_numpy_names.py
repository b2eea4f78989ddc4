"""The jax.numpy names beyond the array API (index tricks, vectorize and friends, selection,
convolutions and statistics, windows, histograms, set operations, NaN quantiles,
polynomials, bit packing, NumPy's I/O wrappers) against NumPy, and against JAX where the two
differ and JAX is installed; eagerly and under jit, plus their errors."""

from __future__ import annotations

import io

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
from conftest import requires_jax

try:
    import jax.numpy as jnp
except ImportError:  # pragma: no cover - JAX is an optional peer
    jnp = None

X = np.random.RandomState(0).uniform(-3, 3, size=(3, 4, 5)).astype(np.float32)
V = np.array([3., 1., 4., 1., 5., 9., 2., 6.], np.float32)
INTS1 = np.array([5, 1, 3, 3, 7, 1, 9, 0], np.int32)
INTS2 = np.array([3, 4, 0, 0, 11, 9], np.int32)


def _assert_same(got, want, rtol=1e-5, atol=1e-6):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            _assert_same(g, w, rtol, atol)
        return
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape, (g.shape, w.shape)
    if w.dtype.kind in "biu" and g.dtype.kind in "biu":
        np.testing.assert_array_equal(g, w)
    else:
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)


def _check(fn, want, *args, jit=True, eager=True, rtol=1e-5, atol=1e-6):
    """``fn(*args)`` equals ``want`` eagerly and under fusionjit.jit (each unless turned off:
    variations of a case already checked both ways run under jit only, which compiles the
    whole function once rather than each eager primitive)."""
    if eager:
        _assert_same(fn(*args), want, rtol, atol)
    if jit:
        _assert_same(fusionjit.jit(fn)(*args), want, rtol, atol)


def _dtypes_match_jax(fn, jfn, *args):
    import jax
    got, want = fusionjit.jit(fn)(*args), jax.eval_shape(jfn, *args)
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert [g.dtype for g in got] == [w.dtype for w in want]


# --- index tricks ----------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # NumPy's r_['r', ...]
def test_r_and_c():
    _check(lambda: fnp.r_[1:4, 0, 4], np.r_[1:4, 0, 4], jit=False)
    _check(lambda: fnp.r_[0:1:5j], np.r_[0:1:5j], jit=False)
    _check(lambda: fnp.r_["0,2", [1, 2], [3, 4]], np.r_["0,2", [1, 2], [3, 4]], jit=False)
    _check(lambda: fnp.r_["1,2,0", [1, 2], [3, 4]], np.r_["1,2,0", [1, 2], [3, 4]], jit=False)
    _check(lambda: fnp.r_["r", 1:3], np.r_["r", 1:3], jit=False)
    _check(lambda: fnp.r_["c", 1:3], np.r_["c", 1:3], jit=False)
    _check(lambda: fnp.c_[np.arange(3), np.ones(3)], np.c_[np.arange(3), np.ones(3)], jit=False)
    m = V.reshape(2, 4)
    _check(lambda a: fnp.c_[a, a[:, :1]], np.c_[m, m[:, :1]], m)
    _check(lambda a: fnp.r_[a, 0, a[:2]], np.r_[V, 0, V[:2]], V)
    assert fnp.s_[1:2, ::3] == np.s_[1:2, ::3]
    assert fnp.index_exp[1:2] == np.index_exp[1:2]


def test_mgrid_ogrid():
    _check(lambda: fnp.mgrid[0:3, 1:5:2], np.mgrid[0:3, 1:5:2], jit=False)
    _check(lambda: fnp.mgrid[0:1:3j, 0:2], np.mgrid[0:1:3j, 0:2], jit=False)
    _check(lambda: fnp.mgrid[-1:1:0.5], np.mgrid[-1:1:0.5], jit=False)
    _check(lambda: fnp.ogrid[0:3, 0:4:2], np.ogrid[0:3, 0:4:2], jit=False)
    _check(lambda: fnp.mgrid[0:2, 0:3] * 1.5, np.mgrid[0:2, 0:3] * 1.5)
    assert fnp.mgrid[0:3].dtype == np.int32 and fnp.mgrid[0:1:3j].dtype == np.float32


def test_block_and_mask_indices():
    a, b = np.eye(2, dtype=np.float32), np.arange(4, dtype=np.float32).reshape(2, 2)
    want = np.block([[a, b], [b, a]])
    _check(lambda x, y: fnp.block([[x, y], [y, x]]), want, a, b)
    _check(lambda x: fnp.block([x, 1.0, x]), np.block([V, 1.0, V]), V)
    _check(lambda: fnp.mask_indices(4, fnp.triu, 1), np.mask_indices(4, np.triu, 1), jit=False)
    rows, cols = np.mask_indices(3, np.tril)
    _check(lambda: fnp.mask_indices(3, fnp.tril, size=8),
           (np.r_[rows, 0, 0], np.r_[cols, 0, 0]), jit=False)
    with pytest.raises(TypeError, match="tuples"):
        fnp.block((a, b))
    with pytest.raises(ValueError, match="depths"):
        fnp.block([[a], b])


# --- applying functions --------------------------------------------------------------------

def test_vectorize_elementwise_and_excluded():
    def f(a, b, scale=1.0):
        # Python control flow on a static argument, values through where.
        return fnp.where(a > b, a - b, a + b) * scale
    want = np.where(X > V[:5], X - V[:5], X + V[:5]) * 2
    _check(lambda a, b: fnp.vectorize(f)(a, b, scale=2.0), want, X, V[:5])
    g = fnp.vectorize(lambda a, n: a ** n, excluded={1})
    _check(lambda a: g(a, 3), X ** 3, X, rtol=1e-5)
    two = fnp.vectorize(lambda a: (a, a * 2))
    _check(two, (V, V * 2), V)


def test_vectorize_signature():
    normalise = fnp.vectorize(lambda v: v / v.sum(), signature="(n)->(n)")
    _check(normalise, X / X.sum(-1, keepdims=True), X, rtol=1e-4)
    dot = fnp.vectorize(lambda u, v: (u * v).sum(), signature="(n),(n)->()")
    a, b = X[:, :1, :], X[0]  # batch (3, 1) with (4,): broadcast to (3, 4)
    _check(dot, (a * b).sum(-1), a, b, rtol=1e-4)
    stats = fnp.vectorize(lambda v: (v.min(), v.max()), signature="(n)->(),()")
    _check(stats, (X.min(-1), X.max(-1)), X)
    outer = fnp.vectorize(lambda u, v: u[:, None] * v[None, :], signature="(m),(n)->(m,n)")
    u = X[0, :, :2]  # batch (4,) with no batch: (4, 2, 3)
    _check(outer, u[:, :, None] * V[None, None, :3], u, V[:3])
    empty = fnp.vectorize(lambda v: v.sum(), signature="(n)->()")(np.zeros((0, 3), np.float32))
    assert empty.shape == (0,)


@requires_jax
def test_vectorize_matches_jax():
    f = lambda v: v - v.mean()  # noqa: E731 - not elementwise: a per-element call matters
    _check(fnp.vectorize(f), jnp.vectorize(f)(X), X)
    h = lambda u, v: u @ v  # noqa: E731
    m, v = X[:, :, :2], X[0, :2, :2]
    _check(fnp.vectorize(h, signature="(n,k),(k,l)->(n,l)"),
           jnp.vectorize(h, signature="(n,k),(k,l)->(n,l)")(m, v), m, v, rtol=1e-4)


def test_vectorize_errors():
    with pytest.raises(ValueError, match="signature"):
        fnp.vectorize(lambda v: v, signature="(n->()")
    dot = fnp.vectorize(lambda u, v: (u * v).sum(), signature="(n),(n)->()")
    with pytest.raises(ValueError, match="core dimension 'n'"):
        dot(np.ones(3, np.float32), np.ones(4, np.float32))
    bad = fnp.vectorize(lambda v: v, signature="(n)->(),()")
    with pytest.raises(TypeError, match="tuple"):
        bad(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match="exclude"):
        fnp.vectorize(lambda v: v, excluded={1.5})


def test_apply_along_and_over_axes():
    for axis in (0, 1, 2):
        _check(lambda a: fnp.apply_along_axis(lambda r: r.max() - r.min(), axis, a),
               np.apply_along_axis(lambda r: r.max() - r.min(), axis, X), X)
    _check(lambda a: fnp.apply_along_axis(lambda r: r[::-1] * 2, 1, a),
           np.apply_along_axis(lambda r: r[::-1] * 2, 1, X), X)
    _check(lambda a: fnp.apply_along_axis(lambda r, k: fnp.outer(r[:2], r[:k]), 2, a, 3),
           np.apply_along_axis(lambda r, k: np.outer(r[:2], r[:k]), 2, X, 3), X)
    _check(lambda a: fnp.apply_over_axes(fnp.sum, a, [0, 2]),
           np.apply_over_axes(np.sum, X, [0, 2]), X, rtol=1e-4)
    _check(lambda a: fnp.apply_over_axes(lambda b, ax: fnp.max(b, ax, keepdims=True), a, 1),
           np.apply_over_axes(np.max, X, 1), X)


def test_fromfunction():
    _check(lambda: fnp.fromfunction(lambda i, j: i * 10 + j, (3, 4)),
           np.fromfunction(lambda i, j: i * 10 + j, (3, 4)), rtol=0)
    _check(lambda: fnp.fromfunction(lambda i, j: i == j, (3, 3), dtype=int),
           np.fromfunction(lambda i, j: i == j, (3, 3), dtype=int))
    # Each call sees one index, as under JAX's vmap (NumPy passes whole grids).
    got = fnp.fromfunction(lambda i: fnp.sum(fnp.arange(4) < i), (4,), dtype=int)
    np.testing.assert_array_equal(got, [0, 1, 2, 3])


def test_matvec_vecmat():
    m, v = X[:, :, :3].reshape(3, 1, 4, 3), X[0, :2, :3].reshape(1, 2, 3)
    _check(fnp.matvec, np.matvec(m, v), m, v, rtol=1e-5)
    w = X[0, :2, :4].reshape(1, 2, 4)
    _check(fnp.vecmat, np.vecmat(w, m), w, m, rtol=1e-5)
    with pytest.raises(ValueError, match="matrix"):
        fnp.matvec(V, V)


# --- selection -------------------------------------------------------------------------

def test_partition_argpartition():
    for axis, kth in ((-1, 2), (1, 0), (0, -1)):
        p, i = fusionjit.jit(lambda a: (fnp.partition(a, kth, axis),
                                        fnp.argpartition(a, kth, axis)))(X)
        p, i = np.asarray(p), np.asarray(i)
        n = X.shape[axis]
        k = kth % n
        srt = np.sort(X, axis)
        take = np.take_along_axis
        np.testing.assert_array_equal(np.take(p, [k], axis), np.take(srt, [k], axis))
        assert (np.take(p, range(k), axis) <= np.take(p, [k], axis)).all()
        assert (np.take(p, range(k + 1, n), axis) >= np.take(p, [k], axis)).all()
        np.testing.assert_array_equal(np.sort(i, axis), np.sort(np.argsort(X, axis), axis))
        np.testing.assert_array_equal(np.sort(take(X, i, axis), axis), srt)
        np.testing.assert_array_equal(np.take(take(X, i, axis), [k], axis),
                                      np.take(srt, [k], axis))
    _check(lambda a: (fnp.partition(a, 3), fnp.argpartition(a, 3)),
           (np.array([1, 1, 2, 3, 9, 6, 5, 4], np.float32), np.array([1, 3, 6, 0, 2, 4, 5, 7])),
           V)


@requires_jax
def test_partition_matches_jax():
    import jax
    ints = INTS1.reshape(2, 4)

    def both(np_):
        return lambda a, b: (np_.partition(a, 2, 1), np_.argpartition(a, 2, 1),
                             np_.partition(b, 1), np_.argpartition(b, 1))
    _check(both(fnp), jax.jit(both(jnp))(X, ints), X, ints)


def test_choose():
    idx = np.array([[0, 2, 1, 3], [1, 0, -1, 5]], np.int32)
    choices = [V[:4], V[4:], np.float32(-1.0), V[:4] * 10]
    for mode in ("wrap", "clip"):
        _check(lambda i, *c: fnp.choose(i, list(c), mode=mode), np.choose(idx, choices,
                                                                          mode=mode),
               idx, *choices)
    ok = np.array([[0, 2, 1, 3]], np.int32)
    _check(lambda: fnp.choose(ok, choices), np.choose(ok, choices), jit=False)
    stacked = np.stack([V[:4], V[4:]])
    _check(lambda i, c: fnp.choose(i, c, mode="clip"), np.choose(idx, stacked, mode="clip"),
           idx, stacked)
    with pytest.raises(ValueError, match="invalid entry"):
        fnp.choose(idx, choices)
    with pytest.raises(fusionjit.ConcretizationTypeError, match="mode='wrap'"):
        fusionjit.jit(lambda i: fnp.choose(i, choices))(ok)


def test_compress_extract():
    cond = np.array([True, False, True, True, False])
    _check(lambda a: fnp.compress(cond, a, axis=2), np.compress(cond, X, axis=2), X, jit=False)
    _check(lambda a: fnp.compress(cond[:3], a, axis=0), np.compress(cond[:3], X, axis=0), X,
           jit=False)
    _check(lambda a: fnp.compress(cond, a), np.compress(cond, X), X, jit=False)
    _check(lambda c, a: fnp.compress(c, a, axis=2, size=4, fill_value=-1.0),
           np.concatenate([np.compress(cond, X, axis=2), np.full((3, 4, 1), -1, np.float32)], 2),
           cond, X)
    _check(lambda c, a: fnp.extract(c, a, size=3), np.extract(X[0] > 0, X[0])[:3], X[0] > 0,
           X[0])
    _check(lambda: fnp.extract(X > 1, X), np.extract(X > 1, X), jit=False)
    with pytest.raises(fusionjit.ConcretizationTypeError, match="size="):
        fusionjit.jit(lambda c, a: fnp.compress(c, a))(cond, V[:5])
    with pytest.raises(ValueError, match="1-D"):
        fnp.compress(X > 0, X)
    with pytest.raises(ValueError, match="past the end"):
        fnp.compress(np.array([0, 0, 0, 0, 0, 0, 1, 0, 0, 1], bool), V)


def test_place_put():
    mask = X[0] > 0
    vals = np.array([10., 20., 30.], np.float32)
    want = X[0].copy()
    np.place(want, mask, vals)
    _check(lambda a, m: fnp.place(a, m, vals, inplace=False), want, X[0], mask)
    ind = np.array([[0, 7], [3, 2]])
    want = V.copy()
    np.put(want, ind, vals)
    _check(lambda a, i: fnp.put(a, i, vals, inplace=False), want, V, ind)
    far = np.array([1, -2, 12, -20])
    for mode in ("clip", "wrap"):
        want = V.copy()
        np.put(want, far, vals, mode=mode)
        _check(lambda a, i: fnp.put(a, i, vals, mode=mode, inplace=False), want, V, far)
    with pytest.raises(ValueError, match="inplace=False"):
        fnp.place(V, V > 2, vals)
    with pytest.raises(ValueError, match="inplace=False"):
        fnp.put(V, ind, vals)
    with pytest.raises(NotImplementedError, match="raise"):
        fnp.put(V, ind, vals, mode="raise", inplace=False)


def test_packbits_unpackbits(rng):
    bits = rng.integers(0, 2, size=(3, 11)).astype(np.int32)
    for axis in (None, 0, 1):
        for order in ("big", "little"):
            _check(lambda b: fnp.packbits(b, axis, order), np.packbits(bits, axis, bitorder=order),
                   bits)
            packed = np.packbits(bits, axis, bitorder=order)
            _check(lambda p: fnp.unpackbits(p, axis, bitorder=order),
                   np.unpackbits(packed, axis, bitorder=order), packed)
    packed = np.packbits(bits, 1)
    for count in (5, 16, 20):
        _check(lambda p: fnp.unpackbits(p, 1, count), np.unpackbits(packed, 1, count), packed)
    with pytest.raises(TypeError, match="uint8"):
        fnp.unpackbits(bits)
    with pytest.raises(ValueError, match="bitorder"):
        fnp.packbits(bits, bitorder="middle")


def test_trim_zeros():
    a = np.array([0, 0, 1, 2, 0, 3, 0], np.int32)
    for trim in ("fb", "f", "b", "B"):
        _check(lambda: fnp.trim_zeros(a, trim), np.trim_zeros(a, trim), jit=False)
    m = np.zeros((4, 5), np.float32)
    m[1:3, 2:4] = 1
    for axis in (None, 0, 1, (0, 1)):
        _check(lambda: fnp.trim_zeros(m, axis=axis), np.trim_zeros(m, axis=axis), jit=False)
    _check(lambda: fnp.trim_zeros(np.zeros(3, np.int32)), np.zeros(0, np.int32), jit=False)
    with pytest.raises(fusionjit.ConcretizationTypeError, match="trim_zeros"):
        fusionjit.jit(fnp.trim_zeros)(a)


# --- convolution, statistics, calculus -------------------------------------------------------

@pytest.mark.parametrize("m", [3, 8, 11, 40])
def test_convolve_correlate(m, rng):
    a = rng.uniform(-1, 1, 9).astype(np.float32)
    v = rng.uniform(-1, 1, m).astype(np.float32)
    for mode in ("full", "same", "valid"):
        _check(lambda x, y: (fnp.convolve(x, y, mode), fnp.correlate(x, y, mode)),
               (np.convolve(a, v, mode), np.correlate(a, v, mode)), a, v, rtol=1e-4, atol=1e-5)


def test_convolve_dtypes_and_errors():
    a, v = np.array([1, 2, 3], np.int32), np.array([0, 1], np.int32)
    got = fnp.convolve(a, v)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.convolve(a, v))
    got = fnp.convolve(a, v, preferred_element_type=np.int32)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.convolve(a, v))
    with pytest.raises(ValueError, match="1-D"):
        fnp.convolve(X, V)
    with pytest.raises(ValueError, match="mode"):
        fnp.correlate(V, V, "middle")
    with pytest.raises(ValueError, match="empty"):
        fnp.convolve(V, np.zeros(0, np.float32))


def test_cov_corrcoef(rng):
    m = rng.uniform(-1, 1, (3, 7)).astype(np.float32)
    y = rng.uniform(-1, 1, (2, 7)).astype(np.float32)
    fw = np.array([1, 2, 1, 3, 1, 1, 2], np.int32)
    aw = rng.uniform(0.5, 1.5, 7).astype(np.float32)
    tol = dict(rtol=1e-4, atol=1e-5)
    _check(fnp.cov, np.cov(m), m, **tol)
    _check(lambda a, b: fnp.cov(a, b), np.cov(m, y), m, y, **tol)
    _check(lambda a: fnp.cov(a, rowvar=False, bias=True), np.cov(m, rowvar=False, bias=True),
           m, **tol)
    _check(lambda a: fnp.cov(a, ddof=0), np.cov(m, ddof=0), m, **tol)
    _check(lambda a, f, w: fnp.cov(a, fweights=f, aweights=w),
           np.cov(m, fweights=fw, aweights=aw), m, fw, aw, **tol)
    _check(lambda a: fnp.cov(a[0]), np.cov(m[0]), m, **tol)
    _check(fnp.corrcoef, np.corrcoef(m), m, **tol)
    _check(lambda a, b: fnp.corrcoef(a, b, rowvar=False), np.corrcoef(m.T, y.T, rowvar=False),
           m.T, y.T, **tol)
    with pytest.raises(ValueError, match="more than 2"):
        fnp.cov(X)
    with pytest.raises(TypeError, match="integers"):
        fnp.cov(m, fweights=aw)


def test_gradient():
    tol = dict(rtol=1e-5, atol=1e-5)
    _check(fnp.gradient, np.gradient(V), V, **tol)
    _check(fnp.gradient, list(np.gradient(X)), X, **tol)
    _check(lambda a: fnp.gradient(a, 0.5, axis=1), np.gradient(X, 0.5, axis=1), X, **tol)
    coords = np.array([0, 1, 1.5, 3.5, 4, 6, 7, 7.5], np.float32)
    _check(lambda a, c: fnp.gradient(a, c), np.gradient(V, coords), V, coords, **tol)
    _check(lambda a: fnp.gradient(a, 2.0, 3.0, axis=(0, 2)),
           list(np.gradient(X, 2.0, 3.0, axis=(0, 2))), X, **tol)
    with pytest.raises(ValueError, match="too small"):
        fnp.gradient(V[:1])
    with pytest.raises(NotImplementedError, match="edge_order"):
        fnp.gradient(V, edge_order=2)


def test_unwrap_spacing(rng):
    phase = np.cumsum(rng.uniform(-3, 3, 12)).astype(np.float32) % (2 * np.pi)
    _check(fnp.unwrap, np.unwrap(phase), phase, rtol=1e-5, atol=1e-5)
    _check(lambda p: fnp.unwrap(p, discont=4.0), np.unwrap(phase, discont=4.0), phase,
           rtol=1e-5, atol=1e-5, eager=False)
    deg = (phase * 57).astype(np.float32)
    _check(lambda p: fnp.unwrap(p, period=360.0), np.unwrap(deg, period=360.0), deg, rtol=1e-5,
           atol=1e-3, eager=False)
    ints = np.array([0, 5, 9, 2, 14], np.int32)
    _check(lambda p: fnp.unwrap(p, period=8), np.unwrap(ints, period=8), ints, eager=False)
    x = np.array([0, 1, -1, 3.5, -1e30, 1e-40, np.inf], np.float32)
    with np.errstate(invalid="ignore"):
        _check(fnp.spacing, np.spacing(x), x, rtol=0, atol=0)


# --- windows and i0 --------------------------------------------------------------------

def test_i0():
    x = np.array([0, 0.5, -1, 3, 7.99, 8, 8.01, -15, 40, 80], np.float32)
    _check(fnp.i0, np.i0(x.astype(np.float64)), x, rtol=3e-6, atol=0)
    got = fnp.i0(np.arange(3, dtype=np.int32))
    assert got.dtype == np.float32


@pytest.mark.parametrize("name", ["bartlett", "blackman", "hamming", "hanning"])
def test_windows(name):
    for m in (0, 1, 2, 7, 12):
        got = getattr(fnp, name)(m)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, getattr(np, name)(m), rtol=1e-5, atol=2e-7)
    _check(lambda: getattr(fnp, name)(9), getattr(np, name)(9), atol=2e-7)


def test_kaiser_and_constants():
    for m, beta in ((1, 3.0), (12, 14.0)):
        np.testing.assert_allclose(fnp.kaiser(m, beta), np.kaiser(m, beta), rtol=1e-5,
                                   atol=1e-7)
    _check(lambda b: fnp.kaiser(7, b), np.kaiser(7, 8.6), np.float32(8.6), rtol=1e-5, atol=1e-7,
           eager=False)
    _check(lambda: fnp.kaiser(6, 0.0), np.kaiser(6, 0.0), rtol=1e-5, atol=1e-7, eager=False)
    assert fnp.euler_gamma == np.euler_gamma
    with pytest.raises(TypeError, match="M must be an int"):
        fnp.hanning(2.5)
    with pytest.raises(fusionjit.ConcretizationTypeError, match="M must be concrete"):
        fusionjit.jit(lambda m: fnp.bartlett(m))(np.int32(3))


# --- histograms ------------------------------------------------------------------------

SAMPLE = np.random.RandomState(1).normal(size=200).astype(np.float32)
WEIGHTS = np.random.RandomState(2).uniform(0, 2, 200).astype(np.float32)


def test_histogram():
    edges = np.array([-2, -1, 0, 0.5, 3], np.float32)
    _check(lambda a: fnp.histogram(a), np.histogram(SAMPLE), SAMPLE)
    _check(lambda a: fnp.histogram(a, 7, range=(-1, 1)), np.histogram(SAMPLE, 7, (-1, 1)),
           SAMPLE, eager=False)
    _check(lambda a, e: fnp.histogram(a, e), np.histogram(SAMPLE, edges), SAMPLE, edges)
    _check(lambda a, w: fnp.histogram(a, 5, weights=w, density=True),
           np.histogram(SAMPLE, 5, weights=WEIGHTS, density=True), SAMPLE, WEIGHTS, rtol=1e-4)
    _check(lambda a: fnp.histogram(a, 4, density=True), np.histogram(SAMPLE, 4, density=True),
           SAMPLE, rtol=1e-4, eager=False)
    _check(lambda a: fnp.histogram_bin_edges(a, 6), np.histogram_bin_edges(SAMPLE, 6), SAMPLE,
           eager=False)
    same = np.full(5, 2.0, np.float32)
    _check(lambda a: fnp.histogram(a, 3), np.histogram(same, 3), same, eager=False)
    with_nan = np.array([0, 1, np.nan, 2, 2, 5], np.float32)
    _check(lambda a: fnp.histogram(a, 3, range=(0, 3))[0], np.array([1, 1, 2], np.float32),
           with_nan, eager=False)
    with pytest.raises(ValueError, match="weights"):
        fnp.histogram(SAMPLE, weights=WEIGHTS[:3])
    with pytest.raises(NotImplementedError, match="string"):
        fnp.histogram(SAMPLE, "auto")
    with pytest.raises(ValueError, match="positive"):
        fnp.histogram(SAMPLE, 0)


def test_histogram2d_histogramdd():
    x, y = SAMPLE[:100], SAMPLE[100:]
    _check(lambda a, b: fnp.histogram2d(a, b), np.histogram2d(x, y), x, y)
    _check(lambda a, b: fnp.histogram2d(a, b, [3, 4], range=[(-1, 1), (-2, 2)]),
           np.histogram2d(x, y, [3, 4], range=[(-1, 1), (-2, 2)]), x, y, eager=False)
    edges = np.array([-3, -1, 0, 1, 3], np.float32)
    _check(lambda a, b, w: fnp.histogram2d(a, b, edges, weights=w, density=True),
           np.histogram2d(x, y, edges, weights=WEIGHTS[:100], density=True), x, y,
           WEIGHTS[:100], rtol=1e-4, eager=False)
    pts = SAMPLE[:198].reshape(66, 3)
    want = np.histogramdd(pts, bins=(2, 3, edges), range=[(-1, 1), None, None])
    _check(lambda p: fnp.histogramdd(p, bins=(2, 3, edges), range=[(-1, 1), None, None]),
           (want[0], list(want[1])), pts, eager=False)
    want = np.histogramdd(pts, bins=3, density=True)
    _check(lambda p: fnp.histogramdd(p, bins=3, density=True), (want[0], list(want[1])), pts,
           rtol=1e-4)
    with pytest.raises(ValueError, match="one per dimension"):
        fnp.histogramdd(pts, bins=[2, 3])
    with pytest.raises(ValueError, match="2-D"):
        fnp.histogramdd(SAMPLE)


@requires_jax
def test_histogram_dtypes_match_jax():
    _dtypes_match_jax(lambda a: fnp.histogram(a, 4), lambda a: jnp.histogram(a, 4), SAMPLE)
    pts = SAMPLE[:198].reshape(66, 3)
    _dtypes_match_jax(lambda p: fnp.histogramdd(p, 3)[0], lambda p: jnp.histogramdd(p, 3)[0],
                      pts)
    _dtypes_match_jax(lambda a: fnp.histogram2d(a, a, 3, weights=a)[0],
                      lambda a: jnp.histogram2d(a, a, 3, weights=a)[0], SAMPLE)


# --- set operations --------------------------------------------------------------------

def test_setops_outside_jit():
    a, b = INTS1, INTS2
    _check(lambda: fnp.union1d(a, b), np.union1d(a, b), jit=False)
    _check(lambda: fnp.intersect1d(a, b), np.intersect1d(a, b), jit=False)
    _check(lambda: fnp.intersect1d(a, b, return_indices=True),
           np.intersect1d(a, b, return_indices=True), jit=False)
    _check(lambda: fnp.setdiff1d(a, b), np.setdiff1d(a, b), jit=False)
    _check(lambda: fnp.setxor1d(a, b), np.setxor1d(a, b), jit=False)
    ua, ub = np.array([4, 2, 9, 7], np.int32), np.array([7, 1, 4], np.int32)
    for fn in ("intersect1d", "setdiff1d", "setxor1d"):
        _check(lambda: getattr(fnp, fn)(ua, ub, assume_unique=True),
               getattr(np, fn)(ua, ub, assume_unique=True), jit=False)
    f = np.array([[1.5, np.nan], [0.0, 1.5]], np.float32)
    g = np.array([np.nan, 2.0, 0.0], np.float32)
    _check(lambda: fnp.union1d(f, g), np.union1d(f, g), jit=False)
    _check(lambda: fnp.setdiff1d(f, g), np.setdiff1d(f, g), jit=False)
    empty = np.zeros(0, np.int32)
    _check(lambda: fnp.intersect1d(a, empty), np.intersect1d(a, empty), jit=False)


def _padded(values, size, fill, default):
    """NumPy's result cut or padded to ``size`` as JAX does: ``fill``, or ``default`` (the
    smallest value found, or 0 when there is none, for "smallest")."""
    values = np.asarray(values)[:size]
    if fill is None:
        fill = (values[0] if len(values) else 0) if default == "smallest" else default
    return np.concatenate([values, np.full(size - len(values), fill, values.dtype)])


def _setops_with_size(x, y, size, fill):
    return (fnp.union1d(x, y, size=size, fill_value=fill),
            fnp.intersect1d(x, y, size=size, fill_value=fill, return_indices=True),
            fnp.setdiff1d(x, y, size=size, fill_value=fill),
            fnp.setxor1d(x, y, size=size, fill_value=fill))


def test_setops_under_jit():
    a, b = INTS1, INTS2
    for size, fill in ((2, None), (6, -7), (9, None)):
        both, i1, i2 = np.intersect1d(a, b, return_indices=True)
        want = (_padded(np.union1d(a, b), size, fill, "smallest"),
                (_padded(both, size, fill, "smallest"), _padded(i1, size, None, len(a)),
                 _padded(i2, size, None, len(b))),
                _padded(np.setdiff1d(a, b), size, fill, 0),
                _padded(np.setxor1d(a, b), size, fill, "smallest"))
        _check(lambda x, y: _setops_with_size(x, y, size, fill), want, a, b, eager=size == 2)
    disjoint = np.array([100, 200], np.int32)
    _check(lambda x, y: fnp.intersect1d(x, y, size=3), np.zeros(3, np.int32), a, disjoint)


@requires_jax
def test_setops_with_size_match_jax():
    import jax
    want = jax.jit(lambda x, y: (jnp.union1d(x, y, size=6),
                                 jnp.intersect1d(x, y, size=6, return_indices=True),
                                 jnp.setdiff1d(x, y, size=6), jnp.setxor1d(x, y, size=6)))
    _check(lambda x, y: _setops_with_size(x, y, 6, None), want(INTS1, INTS2), INTS1, INTS2,
           jit=False)


def test_setops_errors():
    with pytest.raises(fusionjit.ConcretizationTypeError, match="size="):
        fusionjit.jit(fnp.union1d)(INTS1, INTS2)
    with pytest.raises(fusionjit.ConcretizationTypeError, match="size="):
        fusionjit.jit(fnp.setdiff1d)(INTS1, INTS2)
    with pytest.raises(TypeError, match="array arguments"):
        fnp.intersect1d([1, 2], INTS2)


# --- NaN-ignoring quantiles --------------------------------------------------------------

def _with_nans():
    x = X.copy()
    x[0, 1, :] = np.nan  # an all-NaN slice along the last axis
    x[1, ::2, 1] = np.nan
    x[2, 3, 4] = np.nan
    return x


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_nanquantile_methods(method):
    x = _with_nans()
    q = np.array([0.0, 0.3, 0.5, 1.0], np.float32)
    if method == "nearest":  # NumPy rounds a half to even, JAX (and fusionjit) down
        q = q[:2]
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning, match="All-NaN"):
        want = np.nanquantile(x, q, axis=-1, method=method)
    _check(lambda a: fnp.nanquantile(a, q, axis=-1, method=method), want, x)


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_positions_are_computed_in_the_arrays_dtype_as_jax(method):
    # float32 q = 0.1 over 11 values: q * 10 is 1 in float32 but 1.0000000149 in float64,
    # whose ceiling picked the element after (2 for "higher" instead of 1).
    jnp = pytest.importorskip("jax.numpy")
    x = np.arange(11, dtype=np.float32)
    qs = np.arange(0, 101, dtype=np.float32) / np.float32(100)
    want = np.asarray(jnp.quantile(x, qs, method=method))
    np.testing.assert_array_equal(np.asarray(fnp.quantile(x, qs, method=method)), want)
    np.testing.assert_array_equal(
        np.asarray(fusionjit.jit(lambda a, q: fnp.quantile(a, q, method=method))(x, qs)), want)
    for q in (np.float32(0.1), np.float32(0.7), 0.3):
        assert float(fnp.quantile(x, q, method=method)) == float(jnp.quantile(x, q, method=method))
    # (JAX's percentile gives 0.99999994 for p = 10 here, its q / 100 computed as q * 0.01
    # by XLA; NumPy's and ours: 1.)
    p = np.array([10, 30, 70], np.float32)
    np.testing.assert_array_equal(np.asarray(fnp.percentile(x, p, method=method)),
                                  np.percentile(x, p, method=method))


def test_nanmedian_nanpercentile():
    x = _with_nans()
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        want = (np.nanmedian(x, axis=-1), np.nanpercentile(x, [10, 90], axis=(0, 2)),
                np.nanmedian(x, axis=2, keepdims=True))
    _check(lambda a: (fnp.nanmedian(a, axis=-1), fnp.nanpercentile(a, np.array([10, 90]),
                                                                   axis=(0, 2)),
                      fnp.nanmedian(a, axis=2, keepdims=True)), want, x)
    _check(lambda a: fnp.nanmedian(a), np.nanmedian(x), x, eager=False)
    _check(lambda a: fnp.nanquantile(a, 0.25, axis=0), np.nanquantile(x, 0.25, axis=0), x,
           eager=False)
    # A traced q.
    _check(lambda a, q: fnp.nanpercentile(a, q, axis=1), np.nanpercentile(X, 40.0, axis=1),
           X, np.float32(40.0), eager=False)
    no_nan = fnp.nanquantile(X, 0.3, axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(no_nan, np.quantile(X, 0.3, axis=(1, 2), keepdims=True),
                               rtol=1e-4)
    with pytest.raises(ValueError, match=r"q must be in \[0, 100\]"):
        fnp.nanpercentile(X, 101)
    with pytest.raises(ValueError, match="method"):
        fnp.nanquantile(X, 0.5, method="inverted_cdf")
    with pytest.raises(NotImplementedError, match="weights"):
        fnp.nanquantile(X, 0.5, weights=X)


# --- polynomials -----------------------------------------------------------------------

P = np.array([2.0, -3.0, 0.5, 4.0], np.float32)
Q = np.array([1.5, -1.0], np.float32)


def test_polynomial_arithmetic():
    tol = dict(rtol=1e-5, atol=1e-5)
    _check(fnp.poly, np.poly(P), P, **tol)
    _check(lambda: fnp.poly(np.zeros(0, np.float32)), np.poly(np.zeros(0)), jit=False)
    _check(fnp.polyadd, np.polyadd(P, Q), P, Q)
    _check(fnp.polyadd, np.polyadd(Q, P), Q, P)
    _check(fnp.polysub, np.polysub(Q, P), Q, P)
    _check(fnp.polymul, np.polymul(P, Q), P, Q, **tol)
    # The remainder keeps the dividend's length (as JAX); NumPy trims its leading zeros.
    q, r = np.polydiv(P, Q)
    _check(fnp.polydiv, (q, np.r_[np.zeros(len(P) - len(r), np.float32), r]), P, Q, **tol)
    _check(fnp.polydiv, np.polydiv(Q, P), Q, P, **tol)
    lead = np.array([0.0, 0.0, 1.0, 2.0], np.float32)
    _check(lambda: fnp.polymul(lead, Q, trim_leading_zeros=True), np.polymul(lead, Q),
           jit=False)
    u = np.polymul(P, Q).astype(np.float32)
    _check(lambda: fnp.polydiv(u, Q, trim_leading_zeros=True)[1], np.zeros(0, np.float32),
           jit=False)
    ints = np.array([1, 2, 3], np.int32)
    got = fnp.polyadd(ints, ints[:2])
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.polyadd(ints, ints[:2]))


def test_polynomial_calculus_and_eval(rng):
    for m in (0, 1, 2, 4, 5):
        _check(lambda p: fnp.polyder(p, m), np.polyder(P, m), P)
    _check(lambda p: fnp.polyint(p), np.polyint(P), P)
    _check(lambda p: fnp.polyint(p, 2, 1.5), np.polyint(P, 2, 1.5), P)
    k = np.array([1.0, -2.0, 3.0], np.float32)
    _check(lambda p, c: fnp.polyint(p, 3, c), np.polyint(P, 3, k), P, k)
    x = np.linspace(-2, 2, 7).astype(np.float32)
    _check(fnp.polyval, np.polyval(P, x), P, x, rtol=1e-5, atol=1e-5)
    _check(lambda p: fnp.polyval(p, 1.5), np.polyval(P, 1.5), P)
    long = rng.uniform(-1, 1, 40).astype(np.float32)
    _check(lambda p, v: fnp.polyval(p, v, unroll=4), np.polyval(long, x[2:5]), long, x[2:5],
           rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="non-negative"):
        fnp.polyder(P, -1)
    with pytest.raises(ValueError, match="k must"):
        fnp.polyint(P, 2, k)
    with pytest.raises(NotImplementedError, match="eigenvalues"):
        fnp.poly(np.eye(2, dtype=np.float32))


def test_polyfit(rng):
    x = np.linspace(-1, 2, 30).astype(np.float32)
    y = (0.5 * x ** 3 - x + 2 + rng.normal(scale=0.05, size=30)).astype(np.float32)
    _check(lambda a, b: fnp.polyfit(a, b, 3), np.polyfit(x, y, 3), x, y, rtol=1e-3, atol=1e-3)
    w = rng.uniform(0.5, 2, 30).astype(np.float32)
    _check(lambda a, b, c: fnp.polyfit(a, b, 2, w=c), np.polyfit(x, y, 2, w=w), x, y, w,
           rtol=1e-3, atol=1e-3, eager=False)
    ys = np.stack([y, 2 * y - x], axis=1)
    _check(lambda a, b: fnp.polyfit(a, b, 1), np.polyfit(x, ys, 1), x, ys, rtol=1e-3, atol=1e-3,
           eager=False)
    exact = fnp.polyfit(x[:3], np.polyval(P[1:], x[:3]).astype(np.float32), 2)
    np.testing.assert_allclose(exact, P[1:], rtol=1e-3, atol=1e-3)
    with pytest.raises(NotImplementedError, match="full"):
        fnp.polyfit(x, y, 2, full=True)
    with pytest.raises(ValueError, match="at least 4 points"):
        fnp.polyfit(x[:3], y[:3], 3)


# --- NumPy's wrappers ----------------------------------------------------------------------

def test_io_and_printing(tmp_path):
    a = fnp.asarray(V)
    buf = io.BytesIO()
    fnp.save(buf, a)
    buf.seek(0)
    loaded = fnp.load(buf)
    assert isinstance(loaded, fusionjit.Array)
    np.testing.assert_array_equal(loaded, V)
    path = tmp_path / "both.npz"
    fnp.savez(path, a=a, b=np.arange(3))
    with fnp.load(path) as z:
        np.testing.assert_array_equal(z["a"], V)
    raw = np.arange(4, dtype=np.int32).tobytes()
    np.testing.assert_array_equal(fnp.frombuffer(raw, np.int32), np.arange(4))
    got = fnp.fromstring("1 2.5 3", sep=" ")
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [1, 2.5, 3])
    with pytest.raises(NotImplementedError, match="fromiter"):
        fnp.fromiter(range(3), np.int32)
    with pytest.raises(NotImplementedError, match="fromfile"):
        fnp.fromfile(tmp_path / "none.bin")
    assert fnp.array_str(a) == np.array_str(V)
    assert fnp.array_repr(a).startswith("Array([3., 1.")
    with fnp.printoptions(precision=2):
        assert fnp.get_printoptions()["precision"] == 2
        assert fnp.array_str(fnp.asarray(np.float32([1 / 3]))) == "[0.33]"
    assert fnp.iterable(a) and not fnp.iterable(3)
    assert fnp.issubdtype(np.str_, fnp.character) and fnp.issubdtype(np.str_, fnp.flexible)
    assert fnp.object_ is np.object_


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint32])
def test_round_of_integers_to_negative_decimals_as_numpy(dtype):
    # They were returned unchanged (JAX raises NotImplementedError); NumPy rounds to a
    # multiple of 10**-decimals, halves to even.
    info = np.iinfo(dtype)
    x = np.random.default_rng(3).integers(max(info.min, -10**6), min(info.max, 10**6), 500)
    x = x.astype(dtype)
    x[:6] = np.array([15, 25, 35, 5, 0, 45]).astype(dtype)
    if info.min < 0:
        x[6:10] = np.array([-15, -25, -5, -45]).astype(dtype)
    for decimals in (-1, -2, -3, -12):
        with np.errstate(all="ignore"):
            want = np.round(x, decimals)
        np.testing.assert_array_equal(np.asarray(fnp.round(x, decimals)), want)
        np.testing.assert_array_equal(
            np.asarray(fusionjit.jit(lambda a: fnp.round(a, decimals))(x)), want)
