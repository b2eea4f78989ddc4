"""The rest of ``jax.scipy.special`` (the incomplete gamma and beta functions, the modified
Bessel functions, the exponential integrals, the gamma function's relatives) and their
``fusionjit.lax`` forms, against SciPy (values, edges) and JAX (gradients), in float32 and
float64, eagerly and under jit."""

import numpy as np
import pytest
import scipy.special as ss

import fusionjit
from fusionjit import lax
from fusionjit.scipy import special as fsp
from conftest import requires_jax


def _precision(request, dtype):
    if dtype == np.float64:
        request.getfixturevalue("x64")


def _rel_err(got, want, floor):
    """|got - want| / max(|want|, floor), 0 where both are the same non-finite value."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(got - want) / np.maximum(np.abs(want), floor)
    return np.where(same, 0.0, np.where(np.isfinite(err), err, np.inf))


def _check(got, want, rtol, floor, args):
    err = _rel_err(got, want, floor)
    i = int(np.argmax(err))
    assert err.max() <= rtol, (err.max(), [float(np.ravel(a)[i]) for a in args])


def _grid2(dtype, a, x):
    aa, xx = np.meshgrid(np.asarray(a, dtype), np.asarray(x, dtype))
    return aa.ravel(), xx.ravel()


# --- the incomplete gamma function ---------------------------------------------------------

@pytest.mark.parametrize("dtype,rtol", [(np.float32, 2e-5), (np.float64, 1e-13)])
def test_gammainc_and_gammaincc_match_scipy(request, dtype, rtol):
    _precision(request, dtype)
    a, x = _grid2(dtype, np.geomspace(1e-2, 1e3, 37), np.geomspace(1e-3, 3e3, 45))
    tiny = np.finfo(dtype).tiny / np.finfo(dtype).eps
    for fn, ref in [(fsp.gammainc, ss.gammainc), (lax.igammac, ss.gammaincc)]:
        got = np.asarray(fusionjit.jit(fn)(a, x))
        assert got.dtype == dtype
        want = ref(a.astype(np.float64), x.astype(np.float64))
        # 1 - P (or 1 - Q) costs eps / value; lgamma(a) for small a costs eps in P and Q.
        bound = rtol + 8 * np.finfo(dtype).eps * (1 / np.maximum(want, tiny))
        err = _rel_err(got, want, tiny)
        i = int(np.argmax(err / bound))
        assert np.all(err <= bound), (fn.__name__, float(a[i]), float(x[i]), err[i])


@pytest.mark.parametrize("dtype,rtol", [(np.float32, 2e-4), (np.float64, 5e-12)])
def test_gammainc_for_large_shapes_keeps_its_precision(request, dtype, rtol):
    """a log x - x - lgamma(a) is formed with its large terms cancelled (Stirling), so P and
    Q near x = a stay accurate at a = 1e4 .. 1e6 (subtracting the terms lost eps a log a)."""
    _precision(request, dtype)
    a = np.repeat(np.geomspace(20, 1e6, 9), 9).astype(dtype)
    x = (a * (1 + np.tile(np.linspace(-4, 4, 9), 9) / np.sqrt(a))).astype(dtype)
    for fn, ref in [(fsp.gammainc, ss.gammainc), (fsp.gammaincc, ss.gammaincc)]:
        _check(fn(a, x), ref(a.astype(float), x.astype(float)), rtol, 1e-30, (a, x))


def test_incomplete_gamma_edges_are_scipys():
    a = np.float32([0, 0, 1, np.inf, 2, 2, -1, np.nan, 2, 0.5, np.inf, 3])
    x = np.float32([1, 0, 0, 1, np.inf, -1, 1, 1, np.nan, 1e-30, np.inf, 1e4])
    for fn, ref in [(fsp.gammainc, ss.gammainc), (fsp.gammaincc, ss.gammaincc)]:
        want = ref(a.astype(float), x.astype(float)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(fn(a, x)), want, rtol=1e-6, err_msg=fn.__name__)
        np.testing.assert_allclose(np.asarray(fusionjit.jit(fn)(a, x)), want, rtol=1e-6)


@pytest.mark.parametrize("dtype,rtol", [(np.float32, 1e-4), (np.float64, 1e-8)])
def test_incomplete_gamma_gradients(request, dtype, rtol):
    """By x: the density; by a: SciPy's P differentiated numerically (to ~1e-9); gammaincc's
    are their negatives."""
    _precision(request, dtype)
    a, x = _grid2(dtype, [0.1, 0.7, 1.0, 2.5, 9.0, 40.0], [0.05, 0.8, 2.0, 7.5, 30.0, 60.0])
    both = fusionjit.jit(lambda a, x: [fusionjit.vmap(fusionjit.grad(f, argnums=(0, 1)))(a, x)
                                       for f in (fsp.gammainc, fsp.gammaincc)])
    (pa, px), (qa, qx) = both(a, x)
    a64, x64 = a.astype(np.float64), x.astype(np.float64)
    h = 1e-6 * a64
    # (from the smaller of P and Q, which loses nothing to 1 - the other)
    want_a = np.where(x64 > a64, ss.gammaincc(a64 - h, x64) - ss.gammaincc(a64 + h, x64),
                      ss.gammainc(a64 + h, x64) - ss.gammainc(a64 - h, x64)) / (2 * h)
    want_x = np.exp((a64 - 1) * np.log(x64) - x64 - ss.gammaln(a64))
    _check(pa, want_a, rtol, 1e-6, (a, x))
    _check(px, want_x, rtol, 1e-6, (a, x))
    np.testing.assert_array_equal(np.asarray(qa), -np.asarray(pa))
    np.testing.assert_array_equal(np.asarray(qx), -np.asarray(px))


@requires_jax
def test_igamma_grad_a_matches_jax():
    import jax
    a, x = _grid2(np.float32, [0.1, 0.7, 2.5, 40.0], [0.05, 2.0, 7.5, 60.0])
    _check(lax.igamma_grad_a(a, x), jax.lax.igamma_grad_a(a, x), 1e-4, 1e-6, (a, x))


def test_gammainc_derivative_by_x_at_zero_is_the_densitys_limit():
    g = fusionjit.vmap(fusionjit.grad(fsp.gammainc, argnums=1))(np.float32([0.5, 1, 2]),
                                                                np.zeros(3, np.float32))
    np.testing.assert_array_equal(np.asarray(g), [np.inf, 1, 0])


# --- the incomplete beta function ----------------------------------------------------------

@pytest.mark.parametrize("dtype,rtol", [(np.float32, 3e-5), (np.float64, 5e-13)])
def test_betainc_matches_scipy(request, dtype, rtol):
    _precision(request, dtype)
    rng = np.random.default_rng(3)
    ab = np.geomspace(0.05, 60, 25)
    a, b = (v.ravel().astype(dtype) for v in np.meshgrid(ab, ab))
    x = rng.uniform(0, 1, a.size).astype(dtype)
    x[:25] = [0, 1, 1e-6, 1 - 1e-6, 0.5] * 5
    got = np.asarray(fusionjit.jit(fsp.betainc)(a, b, x))
    assert got.dtype == dtype
    want = ss.betainc(a.astype(float), b.astype(float), x.astype(float))
    # Near 1 (1 - I of the swapped fraction) the error is absolute; the log-space prefactor
    # costs eps (a + b).
    eps = float(np.finfo(dtype).eps)
    bound = rtol + 4 * eps * (np.asarray(a, float) + b) + 8 * eps / np.maximum(want, 1e-300)
    err = _rel_err(got, want, 1e-300)
    i = int(np.argmax(err / bound))
    assert np.all(err <= bound), (float(a[i]), float(b[i]), float(x[i]), err[i])
    edge_a = np.float32([0, 1, 0, 1, 2, np.inf, 2, -1, 2, 2, np.nan])
    edge_b = np.float32([1, 0, 0, np.inf, 2, 2, 2, 1, 1, 1, 1])
    edge_x = np.float32([0.5, 0.5, 0.5, 0.5, 0, 0.5, 1, 0.5, 1.5, -0.5, 0.5])
    want = ss.betainc(edge_a.astype(float), edge_b.astype(float), edge_x.astype(float))
    np.testing.assert_array_equal(np.asarray(fsp.betainc(edge_a, edge_b, edge_x)), want)


def test_betainc_gradient_by_x_and_none_by_a():
    a, b = np.float32([0.5, 2, 3, 10]), np.float32([1.5, 2, 0.7, 4])
    x = np.float32([0.2, 0.5, 0.9, 0.6])
    got = fusionjit.jit(fusionjit.vmap(fusionjit.grad(lax.betainc, argnums=2)))(a, b, x)
    a64, b64, x64 = (v.astype(np.float64) for v in (a, b, x))
    want = x64 ** (a64 - 1) * (1 - x64) ** (b64 - 1) / ss.beta(a64, b64)
    _check(got, want, 1e-5, 1e-6, (a, b, x))
    with pytest.raises(NotImplementedError, match=r"test_special_more.py:\d+.*betainc by a"):
        fusionjit.grad(lambda a: fsp.betainc(a, 2.0, 0.5))(np.float32(1.5))


def test_incomplete_functions_promote_and_check_dtypes():
    assert np.asarray(fsp.gammainc(2, np.int32([1, 2]))).dtype == np.float32
    assert np.asarray(fsp.betainc(1, 2, np.float16(0.5))).dtype == np.float16
    x = np.float16([0.5, 2.0, 7.0])
    np.testing.assert_array_equal(
        np.asarray(fsp.gammaincc(np.float16(2), x)),
        np.asarray(fsp.gammaincc(np.float32(2), x.astype(np.float32))).astype(np.float16))
    with pytest.raises(TypeError, match=r"test_special_more.py:\d+.*lax.igamma takes float"):
        lax.igamma(np.int32([1]), np.float32([1]))
    with pytest.raises(TypeError, match=r"test_special_more.py:\d+.*lax.betainc takes arrays "
                                        r"of one dtype"):
        lax.betainc(np.float32(1), np.float16(2), np.float32(0.5))


# --- the modified Bessel functions ---------------------------------------------------------

def _ulps(got, want, dtype):
    want = np.asarray(want, np.float64)
    ok = np.isfinite(want) & (np.abs(want) >= np.finfo(dtype).tiny) & \
        (np.abs(want) <= np.finfo(dtype).max)
    spacing = np.spacing(np.abs(np.where(ok, want, 1)).astype(dtype)).astype(np.float64)
    return np.where(ok, np.abs(np.asarray(got, np.float64) - np.where(ok, want, 0)) / spacing, 0)


@pytest.mark.parametrize("dtype,max_ulp", [(np.float32, 5), (np.float64, 12)])
def test_bessel_functions_within_a_few_ulp_of_scipy(request, dtype, max_ulp):
    # (SciPy's own float64 values are up to 9 ulp from mpmath's here, ours 4)
    _precision(request, dtype)
    top = 700 if dtype == np.float64 else 92
    x = np.concatenate([np.linspace(-30, 30, 1201), np.geomspace(1e-30, top, 300),
                        -np.geomspace(1e-3, top, 100)]).astype(dtype)
    for name in ("i0", "i0e", "i1", "i1e"):
        got = np.asarray(fusionjit.jit(getattr(fsp, name))(x))
        assert got.dtype == dtype
        want = getattr(ss, name)(x.astype(np.float64))
        err = _ulps(got, want, dtype)
        assert err.max() <= max_ulp, (name, float(x[np.argmax(err)]), err.max())
        # beyond the dtype's range: inf (the scaled functions stay finite)
        big = want > np.finfo(dtype).max
        assert np.all(np.isinf(got[big]))
    edges = np.array([0, -0.0, np.inf, -np.inf, np.nan], dtype)
    # (I0 and I1 at +-inf are their limits, +inf and +-inf; SciPy and JAX give NaN)
    for name, want in [("i0", [1, 1, np.inf, np.inf, np.nan]), ("i0e", [1, 1, 0, 0, np.nan]),
                       ("i1", [0, -0.0, np.inf, -np.inf, np.nan]),
                       ("i1e", [0, -0.0, 0, -0.0, np.nan])]:
        got = np.asarray(getattr(fsp, name)(edges))
        np.testing.assert_array_equal(got, np.array(want, dtype), err_msg=name)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=name)


@requires_jax
def test_bessel_gradients_match_jax_and_scipy():
    import jax
    import jax.scipy.special as jsp
    x = np.float32([-12, -3, -0.5, -1e-9, 0, 1e-9, 0.5, 3, 12])
    for name in ("i0e", "i1e"):
        got = fusionjit.jit(fusionjit.vmap(fusionjit.grad(getattr(fsp, name))))(x)
        want = jax.vmap(jax.grad(getattr(jsp, name)))(x)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-6, atol=1e-7,
                                   err_msg=name)
    # JAX's i0 and i1 are e^|x| i0e and e^|x| i1e, whose product rule gives I0'(0) = 1 (not 0);
    # ours are I1 and I0 - I1 / x.
    x64 = x.astype(np.float64)
    for name, want in [("i0", ss.i1(x64)),
                       ("i1", np.where(x64 == 0, 0.5, ss.i0(x64) - ss.i1(x64) / np.where(
                           x64 == 0, 1, x64)))]:
        got = fusionjit.vmap(fusionjit.grad(getattr(fsp, name)))(x)
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-6, atol=1e-30, err_msg=name)
    # second derivatives follow the rules too
    got = fusionjit.vmap(fusionjit.grad(fusionjit.grad(fsp.i0e)))(x[x != 0])
    want = jax.vmap(jax.grad(jax.grad(jsp.i0e)))(x[x != 0])
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(lax.bessel_i1e(x)), np.asarray(jax.lax.bessel_i1e(x)),
                               rtol=1e-6, atol=1e-30)
    with pytest.raises(TypeError, match=r"test_special_more.py:\d+.*lax.bessel_i0e takes a"):
        lax.bessel_i0e(np.int32([1]))
    assert np.asarray(fsp.i0(np.int8([1, 2]))).dtype == np.float32


# --- the gamma function's relatives and the Box-Cox transforms -----------------------------

@pytest.mark.parametrize("dtype,rtol", [(np.float32, 2e-5), (np.float64, 1e-12)])
def test_gamma_family_matches_scipy(request, dtype, rtol):
    _precision(request, dtype)
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-12, 12, 200), [-2.5, -1, -0.0, 0, 0.5, 3, np.inf, -np.inf,
                                                   np.nan]]).astype(dtype)
    y = rng.uniform(0.1, 9, x.size).astype(dtype)
    n = rng.integers(-2, 25, x.size).astype(dtype)
    k = rng.integers(-1, 12, x.size).astype(dtype)
    x64, y64, n64, k64 = (v.astype(np.float64) for v in (x, y, n, k))
    # exp of a log of size L costs eps L: lgamma's magnitude scales the tolerance
    size = np.nan_to_num(1 + np.abs(ss.gammaln(np.abs(x64) + y64 + 1)), nan=1, posinf=1)
    # Beta at poles and infinities is NaN, as JAX's (SciPy takes limits there).
    regular = np.isfinite(x64) & ((x64 > 0) | (x64 != np.floor(x64)))
    cases = [  # (name, ours, SciPy's, rtol, floor of the relative error, where)
        ("gammasgn", fsp.gammasgn(x), ss.gammasgn(x64), 0, 1, True),
        # (lgamma is accurate absolutely near its zeros at 1 and 2)
        ("loggamma", fsp.loggamma(y), ss.loggamma(y64), rtol, 1, True),
        ("beta", fsp.beta(x, y), ss.beta(x64, y64), rtol * size, 1e-300, regular),
        ("poch", fsp.poch(y, x / 3), ss.poch(y64, x64 / 3), rtol * size, 1e-300, True),
        ("factorial", fsp.factorial(n), ss.factorial(n64), rtol * 30, 1e-300, True),
        ("comb", fsp.comb(n, k), ss.comb(n64, k64), rtol * 30, 1e-300, True),
        # (SciPy's NaN for a negative N or k with repetition is JAX's and our 0)
        ("comb repetition", fsp.comb(n, k, repetition=True), ss.comb(n64, k64, repetition=True),
         rtol * 30, 1e-300, (n64 >= 0) & (k64 >= 0)),
        ("multigammaln", fsp.multigammaln(y + 3, 4), ss.multigammaln(y64 + 3, 4), rtol, 1, True),
        ("boxcox", fsp.boxcox(y, x / 4), ss.boxcox(y64, x64 / 4), rtol, 1e-300, True),
        ("boxcox1p", fsp.boxcox1p(y - 1, x / 4), ss.boxcox1p(y64 - 1, x64 / 4), rtol, 1e-300,
         True)]
    for name, got, want, tol, floor, where in cases:
        got = np.asarray(got)
        assert got.dtype == dtype, name
        err = np.where(where, _rel_err(got, want, floor) - tol, 0)
        assert np.all(err <= 0), (name, float(x[np.argmax(err)]), float(y[np.argmax(err)]))
    np.testing.assert_array_equal(np.asarray(fsp.loggamma(np.array([0, -0.0, -1], dtype))),
                                  [np.inf, np.inf, np.nan])
    assert np.asarray(fsp.boxcox(np.array([0.0], dtype), dtype(0.5)))[0] == -2
    # (SciPy's own B_4 is off by 2e-12: ours are exact fractions rounded once)
    np.testing.assert_allclose(np.asarray(fsp.bernoulli(30)), ss.bernoulli(30),
                               rtol=max(rtol, 1e-11))
    assert np.asarray(fsp.bernoulli(3)).dtype == dtype


@requires_jax
def test_gamma_family_gradients_and_errors():
    import jax
    import jax.scipy.special as jsp
    z, m = np.float32([0.5, 2.0, 3.5, 7.0]), np.float32([1.5, 0.5, -1.2, 2.0])
    for name in ("poch", "beta", "boxcox", "boxcox1p"):
        got = fusionjit.jit(fusionjit.vmap(fusionjit.grad(getattr(fsp, name), argnums=(0, 1))))(
            z, m)
        want = jax.jit(jax.vmap(jax.grad(getattr(jsp, name), argnums=(0, 1))))(z, m)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, err_msg=name)
    got = fusionjit.vmap(fusionjit.grad(lambda v: fsp.multigammaln(v, 3)))(z + 2)
    want = jax.vmap(jax.grad(lambda v: jsp.multigammaln(v, 3)))(z + 2)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-6)
    with pytest.raises(NotImplementedError, match=r"test_special_more.py:\d+.*exact=True"):
        fsp.factorial(3, exact=True)
    with pytest.raises(TypeError, match=r"test_special_more.py:\d+.*multigammaln: d must be"):
        fsp.multigammaln(np.float32(3), np.float32(2))
    with pytest.raises(ValueError, match=r"test_special_more.py:\d+.*bernoulli: n must be"):
        fsp.bernoulli(-1)
