"""``scipy.special``'s relatives of the gamma function (gammasgn, loggamma, beta, poch,
factorial, comb, multigammaln, bernoulli) and the Box-Cox transforms, with JAX's formulas
and derivatives, built on lgamma, digamma and betaln (special.py, scipy.py): as accurate as
those, a few eps relative, plus the rounding of exp of a log where they take one."""

from __future__ import annotations

import math
import operator
from fractions import Fraction

import numpy as np

from fusionjit._src import dtypes as dt
from fusionjit._src.autodiff import with_jvp
from fusionjit._src.numpy import math_ufuncs, ufuncs
from fusionjit._src.numpy.util import fail, promote_args_inexact, to_array
from fusionjit._src.special import digamma, lgamma


def gammasgn(x):
    """The sign of Gamma(x): 1 or -1 (-1 at -0), NaN at the poles 0 > x = floor(x) and at
    -inf, as ``jax.scipy.special.gammasgn``."""
    (x,) = promote_args_inexact("gammasgn", x)
    floor = ufuncs.floor(x)
    negative = ufuncs.less(x, 0.0)
    nan = ufuncs.logical_or(ufuncs.logical_and(negative, ufuncs.equal(x, floor)),
                            ufuncs.isnan(x))
    minus = ufuncs.logical_or(
        ufuncs.logical_and(negative, ufuncs.not_equal(ufuncs.remainder(floor, 2.0), 0.0)),
        ufuncs.logical_and(ufuncs.equal(x, 0.0), math_ufuncs.signbit(x)))
    one = ufuncs.where(ufuncs.isnan(x), x, 1.0)  # (in x's dtype)
    return ufuncs.where(nan, np.nan, ufuncs.where(minus, -1.0, one))


def loggamma(x):
    """log Gamma(x) for real x >= 0 (inf at 0, as SciPy; NaN below: the principal branch
    there is complex), as ``jax.scipy.special.loggamma`` for real input (which gives NaN at
    0 too)."""
    (x,) = promote_args_inexact("loggamma", x)
    return ufuncs.where(ufuncs.greater_equal(x, 0.0), lgamma(x), np.nan)


def beta(a, b):
    """B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b), as sign * exp(betaln(a, b))."""
    from fusionjit._src.scipy import betaln
    a, b = promote_args_inexact("beta", a, b)
    sign = ufuncs.multiply(ufuncs.multiply(gammasgn(a), gammasgn(b)),
                           gammasgn(ufuncs.add(a, b)))
    return ufuncs.multiply(sign, ufuncs.exp(betaln(a, b)))


def _poch_value(z, m):
    sign = ufuncs.multiply(gammasgn(ufuncs.add(z, m)), gammasgn(z))
    ratio = ufuncs.multiply(sign, ufuncs.exp(ufuncs.subtract(lgamma(ufuncs.add(z, m)),
                                                             lgamma(z))))
    return ufuncs.where(ufuncs.equal(m, 0.0), 1.0, ratio)


_poch = with_jvp(
    _poch_value,
    lambda z, m, p: ufuncs.multiply(ufuncs.subtract(digamma(ufuncs.add(z, m)), digamma(z)), p),
    lambda z, m, p: ufuncs.multiply(digamma(ufuncs.add(z, m)), p))


def poch(z, m):
    """The Pochhammer symbol (z)_m = Gamma(z + m) / Gamma(z) (1 at m = 0), formed from
    lgamma, so that it overflows only where the result does (JAX divides gammas)."""
    return _poch(*promote_args_inexact("poch", z, m))


def factorial(n, exact: bool = False):
    """n! = Gamma(n + 1) for n >= 0, 0 below, as ``jax.scipy.special.factorial`` (floats
    only: ``exact=True`` is not supported, as in JAX)."""
    if exact:
        fail("factorial with exact=True is not supported (as in JAX)", NotImplementedError)
    (n,) = promote_args_inexact("factorial", n)
    return ufuncs.where(ufuncs.less(n, 0.0), 0.0, ufuncs.exp(lgamma(ufuncs.add(n, 1.0))))


def comb(N, k, *, exact: bool = False, repetition: bool = False):
    """N choose k = N! / (k! (N - k)!) (0 unless 0 <= k <= N), or with ``repetition`` the
    number of multisets, comb(N + k - 1, k), as ``jax.scipy.special.comb``."""
    if exact:
        fail("comb with exact=True is not supported (as in JAX)", NotImplementedError)
    N, k = promote_args_inexact("comb", N, k)
    if repetition:
        out = comb(ufuncs.subtract(ufuncs.add(N, k), 1.0), k)
        return ufuncs.where(ufuncs.logical_and(ufuncs.equal(k, 0.0),
                                               ufuncs.greater_equal(N, 0.0)), 1.0, out)
    ok = ufuncs.logical_and(ufuncs.logical_and(ufuncs.less_equal(k, N),
                                               ufuncs.greater_equal(N, 0.0)),
                            ufuncs.greater_equal(k, 0.0))
    n, k = ufuncs.where(ok, N, 0.0), ufuncs.where(ok, k, 0.0)
    log = ufuncs.subtract(ufuncs.subtract(lgamma(ufuncs.add(n, 1.0)), lgamma(ufuncs.add(k, 1.0))),
                          lgamma(ufuncs.add(ufuncs.subtract(n, k), 1.0)))
    return ufuncs.where(ok, ufuncs.exp(log), 0.0)


def multigammaln(a, d):
    """log of the multivariate gamma function, d (d - 1) / 4 log(pi) + sum_i<d lgamma(a -
    i / 2), for an integer d (as ``jax.scipy.special.multigammaln``, which does not check
    a > (d - 1) / 2 either)."""
    try:
        d = operator.index(d)
    except TypeError:
        fail(f"multigammaln: d must be a Python integer, got {type(d).__name__}")
    (a,) = promote_args_inexact("multigammaln", a)
    out = ufuncs.add(ufuncs.multiply(a, 0.0), 0.25 * d * (d - 1) * math.log(math.pi))
    for i in range(d):
        out = ufuncs.add(out, lgamma(ufuncs.subtract(a, i / 2)))
    return out


def _bernoulli_exact(n: int) -> list[Fraction]:
    """B_0 .. B_n (B_1 = -1/2), by the Akiyama-Tanigawa algorithm, in exact arithmetic."""
    out, row = [], []
    for m in range(n + 1):
        row.append(Fraction(1, m + 1))
        for j in range(m, 0, -1):
            row[j - 1] = j * (row[j - 1] - row[j])
        out.append(row[0])
    if n >= 1:
        out[1] = -out[1]  # the algorithm gives B_1 = +1/2
    return out


def bernoulli(n):
    """The Bernoulli numbers B_0 .. B_n (with B_1 = -1/2) in the default float dtype, as
    ``jax.scipy.special.bernoulli``: exact fractions rounded once (inf past the dtype's
    range)."""
    try:
        n = operator.index(n)
    except TypeError:
        fail(f"bernoulli: n must be a Python integer, got {type(n).__name__}")
    if n < 0:
        fail(f"bernoulli: n must be non-negative, got {n}", ValueError)
    d = dt.float64 if dt.x64_enabled() else dt.float32
    with np.errstate(over="ignore"):
        values = np.array([float(b) if abs(b) < 1e308 else math.copysign(math.inf, b)
                           for b in _bernoulli_exact(n)], np.float64).astype(d)
    return to_array(values)


def _boxcox(name: str, log_fn):
    def fn(x, lmbda):
        x, lmbda = promote_args_inexact(name, x, lmbda)
        zero = ufuncs.equal(lmbda, 0.0)
        safe = ufuncs.where(zero, 1.0, lmbda)
        log_x = log_fn(x)
        power = ufuncs.divide(ufuncs.expm1(ufuncs.multiply(safe, log_x)), safe)
        return ufuncs.where(zero, log_x, power)
    fn.__name__ = name
    return fn


boxcox = _boxcox("boxcox", ufuncs.log)
boxcox.__doc__ = """The Box-Cox transform (x^lmbda - 1) / lmbda (log x at lmbda = 0), as
expm1(lmbda log x) / lmbda; NaN for x < 0."""
boxcox1p = _boxcox("boxcox1p", ufuncs.log1p)
boxcox1p.__doc__ = """The Box-Cox transform of 1 + x, ((1 + x)^lmbda - 1) / lmbda (log1p(x)
at lmbda = 0), as expm1(lmbda log1p(x)) / lmbda."""
