"""``fusionjit.scipy``: ``jax.scipy.special`` and the ``jax.scipy.stats`` distributions RL
and ML code reaches for (``norm``, ``beta``, ``gamma``, ``uniform``), with JAX's formulas.
Arguments are promoted to a float dtype together, as JAX does; the special functions
themselves are in special.py."""

from __future__ import annotations

import math

import numpy as np

from fusionjit._src import nn, special, special_bessel, special_integrals
from fusionjit._src.autodiff import custom_vjp, with_jvp
from fusionjit._src.numpy.shapes import broadcast_arrays
from fusionjit._src.numpy import ufuncs
from fusionjit._src.numpy.util import promote_args_inexact


def _unary(name: str, fn):
    def wrapped(x):
        (x,) = promote_args_inexact(name, x)
        return fn(x)
    wrapped.__name__ = name
    wrapped.__doc__ = fn.__doc__
    return wrapped


erf = _unary("erf", special.erf)
erfc = _unary("erfc", special.erfc)
erfcx = _unary("erfcx", special.erfcx)
erfinv = _unary("erfinv", special.erf_inv)
gammaln = _unary("gammaln", special.lgamma)
digamma = _unary("digamma", special.digamma)
psi = digamma
ndtr = _unary("ndtr", special.ndtr)
ndtri = _unary("ndtri", special.ndtri)
log_ndtr = _unary("log_ndtr", special.log_ndtr)
expit = _unary("expit", nn.sigmoid)
i0 = _unary("i0", special_bessel.i0)
i0e = _unary("i0e", special_bessel.i0e)
i1 = _unary("i1", special_bessel.i1)
i1e = _unary("i1e", special_bessel.i1e)
exp1 = _unary("exp1", special_integrals.exp1)
expi = _unary("expi", special_integrals.expi)
dawsn = _unary("dawsn", special_integrals.dawsn)
spence = _unary("spence", special_integrals.spence)
logsumexp = nn.logsumexp
softmax = nn.softmax
log_softmax = nn.log_softmax


_logit = with_jvp(lambda x: ufuncs.log(ufuncs.divide(x, ufuncs.subtract(1.0, x))),
                  lambda x, ans: ufuncs.reciprocal(ufuncs.multiply(x, ufuncs.subtract(1.0, x))))


def logit(x):
    """log(x / (1 - x)); slope 1 / (x (1 - x)) (inf at 0 and 1, as JAX's)."""
    (x,) = promote_args_inexact("logit", x)
    return _logit(x)


def gamma(x):
    """Gamma(x) = sign * exp(lgamma(x)) (the sign of Gamma alternates below 0)."""
    (x,) = promote_args_inexact("gamma", x)
    negative_odd = ufuncs.logical_and(
        ufuncs.less(x, 0.0), ufuncs.equal(ufuncs.remainder(ufuncs.floor(x), 2.0), 1.0))
    sign = ufuncs.where(negative_odd, -1.0, 1.0)
    out = ufuncs.multiply(sign, ufuncs.exp(special.lgamma(x)))
    # The poles (0, -1, -2, ...) and -inf: nan, as SciPy and JAX.
    pole = ufuncs.logical_and(ufuncs.less_equal(x, 0.0), ufuncs.equal(x, ufuncs.floor(x)))
    return ufuncs.where(ufuncs.logical_and(pole, ufuncs.not_equal(x, 0.0)), np.nan, out)


# Stirling's series of log Gamma(x) - [(x - 1/2) log x - x + log(2 pi)/2]: B_2k / (2k (2k-1))
# x^(1-2k), k = 1..6 (Bernoulli numbers), below 1e-12 relative from x = 8 on.
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360)


def _stirling_rest(x):
    """The sum of _STIRLING's terms at x (x >= 8)."""
    inv = ufuncs.reciprocal(x)
    inv2 = ufuncs.multiply(inv, inv)
    acc = _STIRLING[-1]
    for c in reversed(_STIRLING[:-1]):
        acc = ufuncs.add(ufuncs.multiply(acc, inv2), c)
    return ufuncs.multiply(acc, inv)


def betaln(a, b):
    """log|B(a, b)| = lgamma(a) + lgamma(b) - lgamma(a + b). With the larger argument b of
    8 or more, lgamma(b) - lgamma(a + b) is formed from Stirling's series, where the two
    large terms cancel exactly: (b - 1/2) log(b / (a + b)) - a log(a + b) + a and the
    series' remainders (subtracting the lgammas lost 0.6 at betaln(1e6, 2); JAX's and
    SciPy's forms keep it too). A negative a with b >= 8 takes the lgammas (the series gave
    betaln(-8.2, 8.6) = 84 for -0.62)."""
    a, b = promote_args_inexact("betaln", a, b)
    a, b = ufuncs.minimum(a, b), ufuncs.maximum(a, b)
    small = ufuncs.subtract(ufuncs.add(special.lgamma(a), special.lgamma(b)),
                            special.lgamma(ufuncs.add(a, b)))
    big_b = ufuncs.where(ufuncs.less(b, 8.0), 8.0, b)  # (the other branch's operand)
    ab = ufuncs.add(a, big_b)
    difference = ufuncs.add(
        ufuncs.subtract(ufuncs.multiply(ufuncs.subtract(0.5, ab), ufuncs.log1p(
            ufuncs.divide(a, big_b))), ufuncs.multiply(a, ufuncs.log(big_b))),
        ufuncs.add(a, ufuncs.subtract(_stirling_rest(big_b), _stirling_rest(ab))))
    large = ufuncs.add(special.lgamma(a), difference)
    # (Stirling's series needs a + b >= 8 too: a negative a takes the lgammas)
    return ufuncs.where(ufuncs.logical_or(ufuncs.less(b, 8.0), ufuncs.less_equal(a, 0.0)),
                        small, large)


def _x_log(name: str, log_fn, dlog):
    def value(x, y):
        # (0 where x is 0, but NaN where y is: xlogy(0, nan) is NaN, as SciPy's and JAX's)
        ok = ufuncs.logical_or(ufuncs.not_equal(x, 0.0), ufuncs.isnan(y))
        safe_x = ufuncs.where(ok, x, 1.0)
        safe_y = ufuncs.where(ok, y, 1.0)
        return ufuncs.where(ok, ufuncs.multiply(safe_x, log_fn(safe_y)), 0.0)

    # The gradient as JAX's (d/dx = log(y) also where x is 0), not the where's.
    custom = custom_vjp(value)
    custom.defvjp(lambda x, y: (value(x, y), (x, y)),
                  lambda r, g: (ufuncs.multiply(g, log_fn(r[1])),
                                ufuncs.multiply(g, ufuncs.multiply(r[0], dlog(r[1])))))

    def fn(x, y):
        x, y = promote_args_inexact(name, x, y)
        return custom(*broadcast_arrays(x, y))
    fn.__name__ = name
    return fn


xlogy = _x_log("xlogy", ufuncs.log, ufuncs.reciprocal)
xlogy.__doc__ = "x * log(y), 0 where x is 0 (whatever y is)."
xlog1py = _x_log("xlog1py", ufuncs.log1p, lambda y: ufuncs.reciprocal(ufuncs.add(y, 1.0)))
xlog1py.__doc__ = "x * log1p(y), 0 where x is 0 (whatever y is)."


def entr(x):
    """-x log(x) for x > 0, 0 at 0, -inf below."""
    (x,) = promote_args_inexact("entr", x)
    safe = ufuncs.where(ufuncs.greater(x, 0.0), x, 1.0)
    out = ufuncs.where(ufuncs.greater(x, 0.0),
                       ufuncs.negative(ufuncs.multiply(safe, ufuncs.log(safe))), -np.inf)
    return ufuncs.where(ufuncs.equal(x, 0.0), 0.0, ufuncs.where(ufuncs.isnan(x), x, out))


def rel_entr(p, q):
    """p log(p / q) for p, q > 0; 0 for p = 0, q >= 0; inf otherwise."""
    p, q = promote_args_inexact("rel_entr", p, q)
    both = ufuncs.logical_and(ufuncs.greater(p, 0.0), ufuncs.greater(q, 0.0))
    safe_p, safe_q = ufuncs.where(both, p, 1.0), ufuncs.where(both, q, 1.0)
    out = ufuncs.where(both, ufuncs.multiply(safe_p, ufuncs.log(ufuncs.divide(safe_p, safe_q))),
                       np.inf)
    out = ufuncs.where(ufuncs.logical_and(ufuncs.equal(p, 0.0), ufuncs.greater_equal(q, 0.0)),
                       0.0, out)
    return ufuncs.where(ufuncs.logical_or(ufuncs.isnan(p), ufuncs.isnan(q)), np.nan, out)


def kl_div(p, q):
    """rel_entr(p, q) - p + q (inf where rel_entr is)."""
    p, q = promote_args_inexact("kl_div", p, q)
    return ufuncs.add(ufuncs.subtract(rel_entr(p, q), p), q)


# --- scipy.stats ----------------------------------------------------------------------------

def _outside(x, lo, hi):
    return ufuncs.logical_or(ufuncs.less(x, lo), ufuncs.greater(x, hi))


class _Norm:
    """The normal distribution N(loc, scale**2)."""

    @staticmethod
    def logpdf(x, loc=0, scale=1):
        x, loc, scale = promote_args_inexact("norm.logpdf", x, loc, scale)
        log_normalizer = ufuncs.log(ufuncs.multiply(2 * math.pi, ufuncs.square(scale)))
        quadratic = ufuncs.divide(ufuncs.square(ufuncs.subtract(x, loc)), ufuncs.square(scale))
        return ufuncs.divide(ufuncs.add(log_normalizer, quadratic), -2.0)

    @classmethod
    def pdf(cls, x, loc=0, scale=1):
        return ufuncs.exp(cls.logpdf(x, loc, scale))

    @staticmethod
    def cdf(x, loc=0, scale=1):
        x, loc, scale = promote_args_inexact("norm.cdf", x, loc, scale)
        return special.ndtr(ufuncs.divide(ufuncs.subtract(x, loc), scale))

    @staticmethod
    def logcdf(x, loc=0, scale=1):
        x, loc, scale = promote_args_inexact("norm.logcdf", x, loc, scale)
        return special.log_ndtr(ufuncs.divide(ufuncs.subtract(x, loc), scale))

    @classmethod
    def sf(cls, x, loc=0, scale=1):
        x, loc, scale = promote_args_inexact("norm.sf", x, loc, scale)
        return cls.cdf(ufuncs.negative(x), ufuncs.negative(loc), scale)

    @classmethod
    def logsf(cls, x, loc=0, scale=1):
        x, loc, scale = promote_args_inexact("norm.logsf", x, loc, scale)
        return cls.logcdf(ufuncs.negative(x), ufuncs.negative(loc), scale)

    @staticmethod
    def ppf(q, loc=0, scale=1):
        q, loc, scale = promote_args_inexact("norm.ppf", q, loc, scale)
        return ufuncs.add(ufuncs.multiply(special.ndtri(q), scale), loc)

    @classmethod
    def isf(cls, q, loc=0, scale=1):
        q, loc, scale = promote_args_inexact("norm.isf", q, loc, scale)
        return cls.ppf(ufuncs.subtract(1.0, q), loc, scale)


class _Beta:
    """The beta distribution on [loc, loc + scale]."""

    @staticmethod
    def logpdf(x, a, b, loc=0, scale=1):
        x, a, b, loc, scale = promote_args_inexact("beta.logpdf", x, a, b, loc, scale)
        y = ufuncs.divide(ufuncs.subtract(x, loc), scale)
        log_linear = ufuncs.add(xlogy(ufuncs.subtract(a, 1.0), y),
                                xlog1py(ufuncs.subtract(b, 1.0), ufuncs.negative(y)))
        log_probs = ufuncs.subtract(ufuncs.subtract(log_linear, betaln(a, b)), ufuncs.log(scale))
        out = ufuncs.where(_outside(x, loc, ufuncs.add(loc, scale)), -np.inf, log_probs)
        bad = ufuncs.logical_or(ufuncs.logical_or(ufuncs.less_equal(a, 0.0),
                                                  ufuncs.less_equal(b, 0.0)),
                                ufuncs.less_equal(scale, 0.0))
        return ufuncs.where(bad, np.nan, out)

    @classmethod
    def pdf(cls, x, a, b, loc=0, scale=1):
        return ufuncs.exp(cls.logpdf(x, a, b, loc, scale))


class _Gamma:
    """The gamma distribution with shape ``a``, from ``loc``, scaled by ``scale``."""

    @staticmethod
    def logpdf(x, a, loc=0, scale=1):
        x, a, loc, scale = promote_args_inexact("gamma.logpdf", x, a, loc, scale)
        y = ufuncs.divide(ufuncs.subtract(x, loc), scale)
        log_linear = ufuncs.subtract(xlogy(ufuncs.subtract(a, 1.0), y), y)
        shape_terms = ufuncs.add(special.lgamma(a), ufuncs.log(scale))
        return ufuncs.where(ufuncs.less(x, loc), -np.inf, ufuncs.subtract(log_linear, shape_terms))

    @classmethod
    def pdf(cls, x, a, loc=0, scale=1):
        return ufuncs.exp(cls.logpdf(x, a, loc, scale))


class _Uniform:
    """The uniform distribution on [loc, loc + scale]."""

    @staticmethod
    def logpdf(x, loc=0, scale=1):
        x, loc, scale = promote_args_inexact("uniform.logpdf", x, loc, scale)
        log_probs = ufuncs.negative(ufuncs.log(scale))
        return ufuncs.where(_outside(x, loc, ufuncs.add(loc, scale)), -np.inf, log_probs)

    @classmethod
    def pdf(cls, x, loc=0, scale=1):
        return ufuncs.exp(cls.logpdf(x, loc, scale))

    @staticmethod
    def cdf(x, loc=0, scale=1):
        x, loc, scale = promote_args_inexact("uniform.cdf", x, loc, scale)
        return ufuncs.clip(ufuncs.divide(ufuncs.subtract(x, loc), scale), 0.0, 1.0)

    @staticmethod
    def ppf(q, loc=0, scale=1):
        q, loc, scale = promote_args_inexact("uniform.ppf", q, loc, scale)
        out = ufuncs.add(loc, ufuncs.multiply(q, scale))
        return ufuncs.where(_outside(q, 0.0, 1.0), np.nan, out)


norm, beta, gamma_dist, uniform = _Norm(), _Beta(), _Gamma(), _Uniform()



# --- scipy.linalg -----------------------------------------------------------------------------

def cholesky(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """The Cholesky factor, upper by default (SciPy's convention)."""
    from fusionjit._src.numpy import decompositions
    return decompositions.cholesky(a, upper=not lower)


def cho_factor(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """(factor, lower), for cho_solve."""
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b: bool = False, check_finite: bool = True):
    """x with a x = b, from a's Cholesky factor (``cho_factor``'s result)."""
    from fusionjit._src.numpy import decompositions
    c, lower = c_and_lower
    y = decompositions.solve_triangular(c, b, trans=0 if lower else 1, lower=lower)
    return decompositions.solve_triangular(c, y, trans=1 if lower else 0, lower=lower)


def qr(a, overwrite_a: bool = False, lwork=None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True):
    """SciPy's QR: square Q ("full", the default), k columns ("economic"), or ``(R,)``
    ("r"). No pivoting."""
    from fusionjit._src.numpy import decompositions
    if pivoting:
        from fusionjit._src.numpy.util import fail
        fail("scipy.linalg.qr: pivoting is not supported", NotImplementedError)
    modes = {"full": "complete", "economic": "reduced", "r": "r"}
    if mode not in modes:
        from fusionjit._src.numpy.util import fail
        fail(f"scipy.linalg.qr: mode must be 'full', 'economic' or 'r', got {mode!r}",
             ValueError)
    if mode == "r":
        return (decompositions.qr(a, mode="complete")[1],)
    return tuple(decompositions.qr(a, mode=modes[mode]))


def solve(a, b, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          debug: bool = False, check_finite: bool = True, assume_a: str = "gen"):
    """x with a x = b. ``assume_a`` "pos" (or "her"/"sym") solves by Cholesky; otherwise LU
    with partial pivoting. ``b`` (..., n) is a vector when it has one dimension fewer than
    ``a``, as SciPy."""
    from fusionjit._src.numpy import decompositions, shapes as np_shapes
    from fusionjit._src.numpy.util import aval, to_array
    a, b = to_array(a), to_array(b)
    vector = aval(b).ndim == aval(a).ndim - 1
    if vector:
        b = np_shapes.expand_dims(b, -1)
    if assume_a == "pos":
        x = cho_solve(cho_factor(a, lower=lower), b)
    else:
        x = decompositions.solve(a, b)
    return np_shapes.squeeze(x, -1) if vector else x
