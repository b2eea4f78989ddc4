"""The exponential integrals (exp1, expi, expn), the sine and cosine integrals (sici),
the Fresnel integrals (fresnel), Dawson's integral (dawsn) and Spence's function (spence):
values against SciPy (and mpmath where SciPy itself loses digits) over their ranges and at
their edges, in float32 and float64; derivatives against the closed forms and JAX."""

import numpy as np
import pytest
import scipy.special as ss

import fusionjit
from fusionjit.scipy import special as fsp
from conftest import requires_jax
from test_special_more import _precision, _rel_err

EI_ZERO, CI_ZERO = 0.37250741078136663, 0.61650548562071630


def _check(name, got, want, rtol, x, floor=None, where=True):
    """Relative error at most rtol where ``where`` holds (values below the dtype's smallest
    normal number are compared absolutely)."""
    got = np.asarray(got)
    assert got.dtype == x.dtype, name
    floor = np.finfo(x.dtype).tiny if floor is None else floor
    err = np.where(where, _rel_err(got, want, floor), 0)
    i = int(np.argmax(err))
    assert err[i] <= rtol, (name, float(np.ravel(x)[i]), float(err[i]))


def _points(dtype, top):
    x = np.concatenate([np.geomspace(1e-30, top, 600), np.linspace(0, 40, 801)])
    return x.astype(dtype)


def _mpmath(fn, xs):
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30
    return np.array([float(getattr(mpmath, fn)(mpmath.mpf(float(v)))) for v in xs])


# --- the exponential integrals -------------------------------------------------------------

@pytest.mark.parametrize("dtype,rtol", [(np.float32, 4e-7), (np.float64, 1e-14)])
def test_exp1_and_expi_match_scipy(request, dtype, rtol):
    _precision(request, dtype)
    x = _points(dtype, 700 if dtype == np.float64 else 90)
    x64 = x.astype(np.float64)
    _check("exp1", fusionjit.jit(fsp.exp1)(x), ss.exp1(x64), rtol, x)
    xs = np.concatenate([x, -x])
    # (SciPy's Ei loses digits near its zero x0, where ours keeps them: mpmath there)
    away = np.abs(xs.astype(np.float64) - EI_ZERO) > 0.02
    _check("expi", fusionjit.jit(fsp.expi)(xs), ss.expi(xs.astype(np.float64)), rtol, xs,
           where=away)
    near = (EI_ZERO + np.linspace(-0.02, 0.02, 9)).astype(dtype)
    near[4] = dtype(EI_ZERO)
    _check("expi near its zero", fsp.expi(near), _mpmath("ei", near), 2 * rtol, near)


def test_exponential_integrals_at_their_edges():
    x = np.float32([0, -0.0, -1, np.inf, -np.inf, np.nan, 1e-30, 80, -100])
    for name in ("exp1", "expi"):
        want = getattr(ss, name)(x.astype(np.float64))
        np.testing.assert_allclose(np.asarray(getattr(fsp, name)(x)), want, rtol=2e-7,
                                   atol=1e-45, err_msg=name)
    # Ei beyond float32's range: inf (its e^x is applied in halves, so not before)
    np.testing.assert_allclose(np.asarray(fsp.expi(np.float32([93, 95]))),
                               [ss.expi(93.0), np.inf], rtol=4e-7)
    n = np.float32([-1, 0, 0, 1, 2, 2.5, 3, np.nan, 2, 5, 4])
    x = np.float32([1, 0, 2, 0, 0, 1, np.inf, 1, np.nan, -1, 0])
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        want = ss.expn(n.astype(np.float64), x.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(fsp.expn(n, x)), want, rtol=1e-6)


@pytest.mark.parametrize("dtype,rtol", [(np.float32, 3e-6), (np.float64, 1e-13)])
def test_expn_matches_scipy(request, dtype, rtol):
    """The series below x = 1 and the continued fraction above, for small and large n (the
    series' terms cancel near x = 1: a few ulp more there)."""
    _precision(request, dtype)
    top = 700 if dtype == np.float64 else 90
    x = np.concatenate([np.geomspace(1e-6, top, 60), np.linspace(0.05, 5, 60)])
    n = np.array([0, 1, 2, 3, 5, 10, 30, 100, 1000, 6000], dtype)
    nn, xx = (v.ravel().astype(dtype) for v in np.meshgrid(n, x))
    got = fusionjit.jit(fsp.expn)(nn, xx)
    _check("expn", got, ss.expn(nn.astype(int), xx.astype(np.float64)), rtol, xx)


# --- the sine and cosine integrals, Dawson's integral, Spence's function -------------------

@pytest.mark.parametrize("dtype,rtol", [(np.float32, 3e-7), (np.float64, 2e-15)])
def test_sici_matches_scipy(request, dtype, rtol):
    _precision(request, dtype)
    x = _points(dtype, 1e6 if dtype == np.float32 else 1e12)
    x = np.concatenate([x, -x])
    x64 = x.astype(np.float64)
    si, ci = fusionjit.jit(fsp.sici)(x)
    want_si, want_ci = ss.sici(x64)
    _check("si", si, want_si, rtol, x)
    # Ci crosses zero at 0.6165 (where ours keeps its relative precision), 3.38, 6.43, ...,
    # where its error is absolute, ~ eps / |x|; SciPy's near 0.6165 is absolute too.
    ax = np.abs(x64)
    floor = np.where(ax > 2, 4 / np.maximum(ax, 1), np.finfo(dtype).tiny)
    away = np.abs(ax - CI_ZERO) > 0.02
    _check("ci", ci, want_ci, rtol, x, floor=floor, where=away)
    near = (CI_ZERO + np.linspace(-0.02, 0.02, 9)).astype(dtype)
    near[4] = dtype(CI_ZERO)
    _check("ci near its first zero", fsp.sici(near)[1], _mpmath("ci", near), 2 * rtol, near)
    edges = np.array([0, np.inf, -np.inf, np.nan], dtype)
    si, ci = fsp.sici(edges)
    np.testing.assert_array_equal(np.asarray(si), np.array([0, np.pi / 2, -np.pi / 2, np.nan],
                                                           dtype))
    np.testing.assert_array_equal(np.asarray(ci), [-np.inf, 0, np.nan, np.nan])


@pytest.mark.parametrize("dtype,rtol", [(np.float32, 3e-7), (np.float64, 1e-15)])
def test_fresnel_matches_scipy_and_mpmath(request, dtype, rtol):
    """The phase pi x^2 / 2 is reduced exactly: right for every x, where SciPy's loses
    eps x^2 (5e-9 at x = 1e4 in float64)."""
    _precision(request, dtype)
    x = _points(dtype, 1e4 if dtype == np.float32 else 5)
    x = x[x <= (1e4 if dtype == np.float32 else 5)]
    x = np.concatenate([x, -x])
    s, c = fusionjit.jit(fsp.fresnel)(x)
    want_s, want_c = ss.fresnel(x.astype(np.float64))
    _check("S", s, want_s, rtol, x)
    _check("C", c, want_c, rtol, x)
    far = np.geomspace(3, 1e9, 25).astype(dtype)
    s, c = fsp.fresnel(far)
    _check("S far", s, _mpmath("fresnels", far), rtol, far)
    _check("C far", c, _mpmath("fresnelc", far), rtol, far)
    edges = np.array([0, np.inf, -np.inf, np.nan], dtype)
    for got in fsp.fresnel(edges):
        np.testing.assert_array_equal(np.asarray(got), [0, 0.5, -0.5, np.nan])


@pytest.mark.parametrize("dtype,rtol", [(np.float32, 3e-7), (np.float64, 4e-15)])
def test_dawsn_and_spence_match_scipy(request, dtype, rtol):
    _precision(request, dtype)
    x = _points(dtype, 1e30)
    xs = np.concatenate([x, -x])
    # (SciPy's float64 Dawson integral is off by up to 1.4e-14 near 0.01 and 2e-15 beyond 8;
    # ours by 3e-17 and 3.5e-16 (mpmath): below 0.05, its series)
    sane = np.abs(xs) > 0.05 if dtype == np.float64 else True
    _check("dawsn", fusionjit.jit(fsp.dawsn)(xs), ss.dawsn(xs.astype(np.float64)), rtol, xs,
           where=sane)
    small = np.float32([1e-3, 0.01, 0.03]).astype(dtype)
    s64 = small.astype(np.float64)
    # D(x) = sum_k (-2 x^2)^k x / (2k + 1)!!
    series = sum((-2 * s64 ** 2) ** k * s64 / np.prod(np.arange(1, 2 * k + 2, 2.0))
                 for k in range(8))
    _check("dawsn near 0", fsp.dawsn(small), series, rtol, small)
    y = np.concatenate([x, 1 / x[x > 0], np.linspace(0.3, 0.7, 101)]).astype(dtype)
    # (SciPy's float64 spence loses digits in its reflection near x = 1/2: to 3.6e-15)
    sane = np.abs(y - 0.5) > 0.03 if dtype == np.float64 else True
    _check("spence", fusionjit.jit(fsp.spence)(y), ss.spence(y.astype(np.float64)), rtol, y,
           where=sane)
    half = np.array([0.48, 0.5, 0.52], dtype)
    _check("spence near 1/2", fsp.spence(half), _mpmath_spence(half), rtol, half)
    edges = np.array([0, 1, -1, np.inf, np.nan], dtype)
    np.testing.assert_array_equal(np.asarray(fsp.spence(edges)),
                                  np.array([np.pi ** 2 / 6, 0, np.nan, -np.inf, np.nan], dtype))
    np.testing.assert_array_equal(np.asarray(fsp.dawsn(np.array([0, np.inf, -np.inf, np.nan],
                                                                dtype))), [0, 0, -0.0, np.nan])


def _mpmath_spence(xs):
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30
    return np.array([float(mpmath.polylog(2, 1 - mpmath.mpf(float(v)))) for v in xs])


# --- derivatives, dtypes, errors -----------------------------------------------------------

def test_derivatives_are_the_closed_forms():
    x = np.float32([0.05, 0.4, 1.1, 1.7, 3.0, 12.0, 40.0])
    x64 = x.astype(np.float64)
    d = fusionjit.jit(lambda x: [fusionjit.vmap(fusionjit.grad(f))(x) for f in (
        fsp.exp1, fsp.expi, fsp.dawsn, fsp.spence, lambda v: fsp.sici(v)[0],
        lambda v: fsp.sici(v)[1], lambda v: fsp.expn(3, v), lambda v: fsp.expn(0, v),
        lambda v: fsp.fresnel(v)[0], lambda v: fsp.fresnel(v)[1])])(x)
    want = [-np.exp(-x64) / x64, np.exp(x64) / x64, 1 - 2 * x64 * ss.dawsn(x64),
            np.log(x64) / (1 - x64), np.sin(x64) / x64, np.cos(x64) / x64, -ss.expn(2, x64),
            -np.exp(-x64) * (1 + x64) / x64 ** 2, np.sin(np.pi * x64 ** 2 / 2),
            np.cos(np.pi * x64 ** 2 / 2)]
    for i, (got, w) in enumerate(zip(d, want)):
        # (1 - 2 x D cancels for large x, D ~ 1 / 2x; cos(pi x^2 / 2) at its zeros is pi's
        # rounding: both absolute)
        np.testing.assert_allclose(np.asarray(got), w, rtol=2e-6, atol=5e-8, err_msg=str(i))
    # the limits: Si'(0) = 1, spence'(1) = -1
    assert float(fusionjit.grad(lambda v: fsp.sici(v)[0])(np.float32(0))) == 1
    assert float(fusionjit.grad(fsp.spence)(np.float32(1))) == -1
    # second derivatives follow the rules: dawsn'' = -2 (D + x D')
    got = fusionjit.vmap(fusionjit.grad(fusionjit.grad(fsp.dawsn)))(x)
    want = -2 * (ss.dawsn(x64) + x64 * (1 - 2 * x64 * ss.dawsn(x64)))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


@requires_jax
def test_derivatives_match_jax():
    import jax
    import jax.scipy.special as jsp
    x = np.float32([0.3, 1.5, 6.0])
    got = fusionjit.vmap(fusionjit.grad(fsp.dawsn))(x)
    want = jax.vmap(jax.grad(jsp.dawsn))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
    # (JAX's spence, differentiated through its branches, has NaN slopes, at 1.5 one)


def test_dtypes_and_errors():
    assert np.asarray(fsp.exp1(np.int32([1, 2]))).dtype == np.float32
    x = np.float16([0.5, 2.0, 7.0])
    for name in ("exp1", "expi", "dawsn", "spence"):
        got = np.asarray(getattr(fsp, name)(x))
        want = np.asarray(getattr(fsp, name)(x.astype(np.float32))).astype(np.float16)
        np.testing.assert_array_equal(got, want, err_msg=name)
    si, ci = fsp.sici(x)
    assert np.asarray(si).dtype == np.asarray(ci).dtype == np.float16
    assert np.asarray(fsp.expn(2, x)).dtype == np.float16
    with pytest.raises(NotImplementedError, match=r"test_special_extra.py:\d+.*expn by n"):
        fusionjit.grad(fsp.expn)(np.float32(2), np.float32(1))
    with pytest.raises(TypeError, match=r"test_special_extra.py:\d+.*exp1"):
        fsp.exp1("1.5")
