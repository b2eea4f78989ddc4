"""Special functions (fusionjit.lax.erf/erfc/erf_inv/lgamma/digamma, fusionjit.scipy.special)
against mpmath to the accuracy special.py states, the scipy.stats distributions against
their formulas and JAX, edge values, errors, and fusion into the kernels around them."""

import math

import mpmath as mp
import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
from fusionjit import lax
from fusionjit.scipy import special as fsp
from fusionjit.scipy import stats
from conftest import requires_jax

mp.mp.dps = 30


def _grid(dtype, lo, hi, n=3001):
    x = np.concatenate([np.linspace(lo, hi, n), np.geomspace(1e-20, max(hi, 1e-19), 300),
                        -np.geomspace(1e-20, max(-lo, 1e-19), 300)])
    return x[(x >= lo) & (x <= hi)].astype(dtype)


def _ulps(got, want, dtype):
    """Errors in units of the result's last place (0 where the result is not a normal
    number)."""
    want = np.asarray(want, np.float64)
    ok = np.isfinite(want) & (np.abs(want) >= np.finfo(dtype).tiny) & \
        (np.abs(want) <= np.finfo(dtype).max)
    spacing = np.spacing(np.abs(np.where(ok, want, 1)).astype(dtype)).astype(np.float64)
    return np.where(ok, np.abs(np.asarray(got, np.float64) - np.where(ok, want, 0)) / spacing, 0)


ERF_CASES = [("erf", fsp.erf, mp.erf, -8, 8), ("erfc", fsp.erfc, mp.erfc, -8, 27),
             ("erfcx", fsp.erfcx, lambda v: mp.exp(v * v) * mp.erfc(v), -8, 1e6)]


@pytest.mark.parametrize("dtype,max_ulp", [(np.float32, 4), (np.float64, 6)])
@pytest.mark.parametrize("name,fn,ref,lo,hi", ERF_CASES, ids=[c[0] for c in ERF_CASES])
def test_erf_family_within_a_few_ulp(request, dtype, max_ulp, name, fn, ref, lo, hi):
    if dtype == np.float64:
        request.getfixturevalue("x64")
    x = _grid(dtype, lo, hi)
    got = np.asarray(fusionjit.jit(fn)(x))
    assert got.dtype == dtype
    want = [float(ref(mp.mpf(float(v)))) for v in x]
    err = _ulps(got, want, dtype)
    assert err.max() <= max_ulp, (name, float(x[np.argmax(err)]), err.max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_normal_cdf_within_its_conditioning(request, dtype):
    """ndtr(x) = erfc(-x / sqrt(2)) / 2 (as JAX): the rounding of -x / sqrt(2) costs about
    x**2 ulp, the conditioning of the Gaussian tail; the rest is a few ulp."""
    if dtype == np.float64:
        request.getfixturevalue("x64")
    eps = float(np.finfo(dtype).eps)
    x = _grid(dtype, -37 if dtype == np.float64 else -13, 9)
    got = np.asarray(fusionjit.jit(fsp.ndtr)(x)).astype(np.float64)
    want = np.array([float(mp.ncdf(float(v))) for v in x])
    ok = want >= np.finfo(dtype).tiny
    bound = 4 * eps * want * (2 + x.astype(np.float64) ** 2)
    assert np.all(np.abs(got - want)[ok] <= bound[ok]), float(x[ok][np.argmax(
        (np.abs(got - want) / bound)[ok])])
    x = _grid(dtype, -1e4, 8)
    got = np.asarray(fusionjit.jit(fsp.log_ndtr)(x)).astype(np.float64)
    want = np.array([float(mp.log(mp.ncdf(float(v)))) for v in x])
    bound = 4 * eps * (np.abs(want) + np.exp(want) * (2 + x.astype(np.float64) ** 2)) + \
        np.finfo(dtype).tiny
    assert np.all(np.abs(got - want) <= bound), float(x[np.argmax(np.abs(got - want) / bound)])


@pytest.mark.parametrize("dtype,tol", [(np.float32, 4e-6), (np.float64, 1e-14)])
def test_lgamma_and_digamma_match_mpmath(request, dtype, tol):
    if dtype == np.float64:
        request.getfixturevalue("x64")
    # Relative error, absolute below 1: near the zeros (lgamma at 1 and 2, digamma at
    # 1.46...) the Lanczos form is accurate absolutely, as XLA's.
    x = np.concatenate([np.linspace(-20.3, 30, 3001), np.geomspace(1e-6, 1e6, 500),
                        0.0123 - np.geomspace(1e-6, 40, 500)]).astype(dtype)
    for fn, ref in [(lax.lgamma, lambda v: mp.log(abs(mp.gamma(v)))), (lax.digamma, mp.digamma)]:
        got = np.asarray(fusionjit.jit(fn)(x)).astype(np.float64)
        want = np.array([float(ref(mp.mpf(float(v)))) for v in x])
        err = np.abs(got - want) / np.maximum(np.abs(want), 1.0)
        assert err.max() <= tol, (fn.__name__, float(x[np.argmax(err)]), err.max())


@pytest.mark.parametrize("dtype,tol", [(np.float32, 8e-6), (np.float64, 1e-12)])
def test_polygamma_and_zeta_match_mpmath(request, dtype, tol):
    # digamma's derivative (the trigamma function) was missing: gradients of Beta, Gamma
    # and Dirichlet entropies and KLs by their concentrations raised (hunt 6).
    if dtype == np.float64:
        request.getfixturevalue("x64")
    x = np.concatenate([np.geomspace(1e-3, 1e4, 200), -np.linspace(0.05, 2.95, 59)[
        np.abs(np.linspace(0.05, 2.95, 59) % 1 - 0.5) < 0.45]]).astype(dtype)
    for n in (1, 2, 3):
        got = np.asarray(fusionjit.jit(lambda v, n=n: fsp.polygamma(n, v))(x)).astype(float)
        want = np.array([float(mp.polygamma(n, mp.mpf(float(v)))) for v in x])
        err = np.abs(got - want) / np.abs(want)
        assert err.max() <= tol * 4 ** (n - 1), (n, float(x[np.argmax(err)]), err.max())
    q = np.geomspace(0.01, 1e3, 50).astype(dtype)
    for s_ in (1.5, 2.0, 4.5):
        got = np.asarray(fsp.zeta(dtype(s_), q)).astype(float)
        want = np.array([float(mp.zeta(s_, mp.mpf(float(v)))) for v in q])
        np.testing.assert_allclose(got, want, rtol=tol * 4)
    np.testing.assert_array_equal(np.asarray(fsp.polygamma(1, np.array([0, -2], dtype))),
                                  [np.inf, np.inf])
    assert np.isnan(float(fsp.zeta(dtype(1.0), dtype(2.0))))


def test_gradients_through_digamma_are_trigamma():
    x = np.float32([0.3, 2.5, -0.5])
    np.testing.assert_allclose(np.asarray(fusionjit.vmap(fusionjit.grad(fsp.digamma))(x)),
                               np.asarray(fsp.polygamma(1, x)), rtol=1e-6)
    # a Beta policy's entropy bonus, differentiated by its concentrations
    def entropy(a, b):
        return (fsp.betaln(a, b) - (a - 1) * fsp.digamma(a) - (b - 1) * fsp.digamma(b)
                + (a + b - 2) * fsp.digamma(a + b))

    def entropy64(a, b):
        psi = lambda v: float(mp.digamma(v))  # noqa: E731
        return float(mp.log(mp.beta(a, b))) - (a - 1) * psi(a) - (b - 1) * psi(b) + \
            (a + b - 2) * psi(a + b)
    ga, gb = fusionjit.grad(entropy, argnums=(0, 1))(np.float32(2.5), np.float32(1.5))
    h = 1e-6
    want_a = (entropy64(2.5 + h, 1.5) - entropy64(2.5 - h, 1.5)) / (2 * h)
    want_b = (entropy64(2.5, 1.5 + h) - entropy64(2.5, 1.5 - h)) / (2 * h)
    np.testing.assert_allclose([float(ga), float(gb)], [want_a, want_b], rtol=1e-4)


def test_edge_values():
    inf, nan = np.inf, np.nan
    x = np.array([0.0, -0.0, inf, -inf, nan], np.float32)
    np.testing.assert_array_equal(np.asarray(lax.erf(x)), [0, -0.0, 1, -1, nan])
    np.testing.assert_array_equal(np.asarray(lax.erfc(x)), [1, 1, 0, 2, nan])
    np.testing.assert_array_equal(np.asarray(fsp.erfcx(x)), [1, 1, 0, inf, nan])
    np.testing.assert_array_equal(np.asarray(lax.erf_inv(np.float32([-1, 1, 0, 2]))),
                                  [-inf, inf, 0, nan])
    np.testing.assert_array_equal(np.asarray(fsp.ndtri(np.float32([0, 1, 0.5, -0.1, 1.5]))),
                                  [-inf, inf, 0, nan, nan])
    np.testing.assert_array_equal(np.asarray(lax.lgamma(np.float32([0, -1, -2, inf, -inf, nan]))),
                                  [inf, inf, inf, inf, inf, nan])
    np.testing.assert_array_equal(np.asarray(lax.digamma(np.float32([0, -1, -3, inf, nan]))),
                                  [nan, nan, nan, inf, nan])
    # ndtri keeps tiny probabilities: its erf^-1 argument is formed from p itself.
    # Below Giles' polynomials' range the tail is solved by Newton's method.
    tiny = np.float32([1e-38, 1e-30, 1e-10, 3e-7])
    want = [float(mp.findroot(lambda x: mp.log(mp.ncdf(x)) - mp.log(float(p)), -10))
            for p in tiny]
    np.testing.assert_allclose(np.asarray(fsp.ndtri(tiny)), want, rtol=1e-6)


def test_low_precision_is_computed_in_float32_and_rounded_once():
    x = np.linspace(-3, 3, 101).astype(np.float16)
    got = np.asarray(lax.erf(x))
    assert got.dtype == np.float16
    want = np.asarray(lax.erf(x.astype(np.float32))).astype(np.float16)
    np.testing.assert_array_equal(got, want)


def test_scipy_special_algebra():
    x = np.float32([0.0, 0.5, 2.0, 1e-3])
    y = np.float32([0.0, 3.0, -0.5, 7.0])
    np.testing.assert_array_equal(np.asarray(fsp.xlogy(np.float32([0, 0, 2]),
                                                       np.float32([0, np.nan, 3]))),
                                  [0, np.nan, np.float32(2) * np.log(np.float32(3))])
    # (0 * log(nan) is nan, as SciPy's and JAX's: it was 0)
    np.testing.assert_allclose(np.asarray(fsp.xlog1py(x, y)),
                               np.where(x == 0, 0, x * np.log1p(y)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fsp.entr(np.float32([0, 0.5, -1, 2]))),
                               [0, 0.5 * math.log(2), -np.inf, -2 * math.log(2)], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fsp.rel_entr(np.float32([0, 1, 1, 2]),
                                                       np.float32([1, 0, 2, 1]))),
                               [0, np.inf, math.log(0.5), 2 * math.log(2)], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fsp.kl_div(np.float32([1, 2]), np.float32([2, 1]))),
                               [math.log(0.5) - 1 + 2, 2 * math.log(2) - 2 + 1], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fsp.betaln(np.float32([2, 0.5]), np.float32([3, 0.5]))),
                               [math.log(1 / 12), math.log(math.pi)], rtol=1e-6)
    # Large arguments: the lgammas' difference cancels (betaln(1e6, 2) was -27.0 for
    # -27.631, hunt 6); float64 sums of logs as the reference.
    a, b = np.float32([1e4, 1e5, 1e6, 20, 8]), np.float32([1e-3, 0.5, 2, 30, 8])
    want = [math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y) if x + y < 1e3 else
            math.lgamma(min(x, y)) - min(x, y) * math.log(max(x, y))  # (to 1e-5 here)
            - (min(x, y) * (min(x, y) - 1)) / (2 * max(x, y))
            for x, y in zip(a.astype(float), b.astype(float))]
    np.testing.assert_allclose(np.asarray(fsp.betaln(a, b)), want, rtol=2e-6)
    np.testing.assert_allclose(np.asarray(fsp.gamma(np.float32([5, 0.5, -0.5, -1.5]))),
                               [24, math.sqrt(math.pi), -2 * math.sqrt(math.pi),
                                4 / 3 * math.sqrt(math.pi)], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(fsp.logit(fsp.expit(np.float32([-3, 0, 2])))),
                               [-3, 0, 2], atol=1e-6)
    # Integers are promoted to floats, as in jax.scipy.special.
    assert np.asarray(fsp.erf(np.int32([1]))).dtype == np.float32


def test_special_functions_add_no_kernels():
    """A continuous-control loss: the Gaussian log-likelihood of actions, the ratio of new
    and old probabilities, times a normal CDF. The special functions are elementwise ops
    that fuse where they are: the program has as many kernels as without them."""
    rng = np.random.default_rng(0)
    mu, a, old = (rng.normal(size=(64, 6)).astype(np.float32) for _ in range(3))
    log_std = np.float32(-0.5)

    def loss(mu, a, old):
        logp = stats.norm.logpdf(a, mu, fnp.exp(log_std)).sum(axis=-1)
        return fnp.mean(fnp.exp(logp - old.sum(axis=-1)) * fsp.ndtr(mu).sum(axis=-1))

    f = fusionjit.jit(loss)
    s = np.exp(np.float64(log_std))
    logp = (-0.5 * ((a - mu) / s) ** 2 - np.log(s) - 0.5 * np.log(2 * np.pi)).sum(-1)
    ndtr = np.array([[float(mp.ncdf(float(v))) for v in row] for row in mu]).sum(-1)
    want = np.mean(np.exp(logp - old.sum(-1)) * ndtr)
    np.testing.assert_allclose(float(f(mu, a, old)), want, rtol=2e-5)
    def plain(mu, a, old):
        logp = (-0.5 * ((a - mu) / fnp.exp(log_std)) ** 2).sum(axis=-1)
        return fnp.mean(fnp.exp(logp - old.sum(axis=-1)) * fnp.tanh(mu).sum(axis=-1))

    assert f.lower(mu, a, old).compile().num_kernels == \
        fusionjit.jit(plain).lower(mu, a, old).compile().num_kernels


@pytest.mark.parametrize("dist,args,ref", [
    ("norm", (0.3, 1.5), lambda x: -0.5 * ((x - 0.3) / 1.5) ** 2 - math.log(1.5)
     - 0.5 * math.log(2 * math.pi)),
    ("beta", (2.0, 5.0), lambda x: math.log(30 * x * (1 - x) ** 4) if 0 <= x <= 1 else -math.inf),
    ("gamma", (3.0,), lambda x: math.log(x * x * math.exp(-x) / 2) if x > 0 else -math.inf),
    ("uniform", (-1.0, 3.0), lambda x: -math.log(3) if -1 <= x <= 2 else -math.inf)])
def test_stats_logpdf_matches_the_density(dist, args, ref):
    x = np.float32([-2.0, -0.5, 0.1, 0.7, 1.5, 3.0])
    got = np.asarray(getattr(stats, dist).logpdf(x, *args))
    np.testing.assert_allclose(got, [ref(float(v)) for v in x], rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(np.asarray(getattr(stats, dist).pdf(x, *args)),
                               np.exp([ref(float(v)) for v in x]), rtol=2e-6, atol=2e-7)


def test_norm_cdf_ppf_and_tails():
    q = np.float32([1e-6, 0.01, 0.5, 0.9, 0.999])
    mid = q[1:]
    x = np.asarray(stats.norm.ppf(q, 1.0, 2.0))
    np.testing.assert_allclose(np.asarray(stats.norm.cdf(x, 1.0, 2.0)), q, rtol=2e-5)
    np.testing.assert_allclose(np.asarray(stats.norm.isf(mid)),
                               -np.asarray(stats.norm.ppf(mid)), rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(stats.norm.sf(np.float32([2.0]))),
                               [float(mp.ncdf(-2))], rtol=1e-6)
    # Far in the lower tail, logcdf stays finite where cdf underflows.
    got = np.asarray(stats.norm.logcdf(np.float32([-40.0, -5.0])))
    np.testing.assert_allclose(got, [float(mp.log(mp.ncdf(v))) for v in (-40, -5)], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(stats.norm.logsf(np.float32([40.0]))),
                               [float(mp.log(mp.ncdf(-40)))], rtol=1e-6)
    assert np.isnan(np.asarray(stats.beta.logpdf(np.float32(0.5), -1.0, 2.0)))


def test_lax_functions_take_floats_only_and_name_the_line():
    with pytest.raises(TypeError, match=r"test_special.py:\d+.*lax.erf takes a floating-point"):
        lax.erf(np.int32([1, 2]))
    with pytest.raises(TypeError, match="lax.lgamma"):
        fusionjit.jit(lax.lgamma)(np.arange(3))


@requires_jax
def test_agrees_with_jax():
    import jax.scipy.special as jsp
    import jax.scipy.stats as jst
    rng = np.random.default_rng(1)
    x = rng.normal(0, 3, 500).astype(np.float32)
    p = rng.uniform(0, 1, 500).astype(np.float32)
    pos = rng.gamma(2.0, 2.0, 500).astype(np.float32) + 0.01
    for name, arg in [("erf", x), ("erfc", x), ("erfinv", 2 * p - 1), ("gammaln", x),
                      ("digamma", pos), ("ndtr", x), ("ndtri", p), ("log_ndtr", x),
                      ("expit", x), ("logit", p), ("entr", p),
                      # JAX's float32 erfcx underflows to 0 beyond x = 9 (ours does not).
                      ("erfcx", np.minimum(x, 9))]:
        np.testing.assert_allclose(np.asarray(getattr(fsp, name)(arg)),
                                   np.asarray(getattr(jsp, name)(arg)), rtol=5e-5, atol=1e-6,
                                   err_msg=name)
    for name, args in [("xlogy", (p, pos)), ("xlog1py", (p, pos)), ("betaln", (pos, pos[::-1])),
                       ("rel_entr", (p, p[::-1])), ("kl_div", (p, p[::-1]))]:
        np.testing.assert_allclose(np.asarray(getattr(fsp, name)(*args)),
                                   np.asarray(getattr(jsp, name)(*args)), rtol=5e-5, atol=1e-6,
                                   err_msg=name)
    for dist, fn, args in [("norm", "logpdf", (x, 0.5, 2.0)), ("norm", "cdf", (x, 0.5, 2.0)),
                           ("norm", "logcdf", (x,)), ("norm", "ppf", (p, 1.0, 3.0)),
                           ("norm", "logsf", (x,)), ("beta", "logpdf", (p, 2.0, 3.0)),
                           ("gamma", "logpdf", (pos, 2.5)), ("uniform", "logpdf", (x, -1.0, 2.0))]:
        np.testing.assert_allclose(np.asarray(getattr(getattr(stats, dist), fn)(*args)),
                                   np.asarray(getattr(getattr(jst, dist), fn)(*args)),
                                   rtol=5e-5, atol=1e-6, err_msg=f"{dist}.{fn}")


def test_review_fixes_gamma_poles_and_low_precision_erf_inv():
    got = np.asarray(fsp.gamma(np.float32([-1, -2, 0, -np.inf, 0.5])))
    assert np.isnan(got[:2]).all() and got[2] == np.inf and np.isnan(got[3])
    np.testing.assert_allclose(got[4], math.sqrt(math.pi), rtol=1e-6)
    import ml_dtypes
    x = np.array([0.3, -0.9, 0.99], ml_dtypes.bfloat16)
    want = np.asarray(lax.erf_inv(x.astype(np.float32))).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(np.asarray(lax.erf_inv(x)), want)


def test_gradient_by_q_alone_with_a_constant_s():
    # zeta's rule by s raises (as JAX's); it was called for a constant s as well, so that
    # grad of zeta(2, q) by q raised too. with_jvp's rules now skip what the differentiated
    # inputs do not reach, in reverse and forward mode, eagerly and under jit.
    q = np.float32([1.5, 2.0])
    want = -2 * np.asarray(fsp.zeta(np.float32(3.0), q))
    f = lambda q: fsp.zeta(2.0, q).sum()  # noqa: E731
    np.testing.assert_allclose(np.asarray(fusionjit.grad(f)(q)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fusionjit.jit(fusionjit.grad(f))(q)), want, rtol=1e-6)
    _, t = fusionjit.jvp(lambda q: fsp.zeta(2.0, q), (q,), (np.ones_like(q),))
    np.testing.assert_allclose(np.asarray(t), want, rtol=1e-6)
    with pytest.raises(NotImplementedError, match=r"test_special.py:\d+.*zeta by its first"):
        fusionjit.grad(lambda s: fsp.zeta(s, 2.0))(np.float32(2.5))
