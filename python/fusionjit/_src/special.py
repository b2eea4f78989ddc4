"""Special functions: erf, erfc, erfcx, erf_inv, lgamma, digamma, and what ``scipy.special``
and ``scipy.stats`` build on them (``fusionjit.lax``, ``fusionjit.scipy``).

Written with fusionjit's own elementwise ops, so they fuse with their neighbours and run on
every backend, in the input's precision (float16 and bfloat16 in float32, rounded once, as
XLA does): no host libm, no float64 intermediates (which do not exist without x64).

- erf, erfc, erfcx: polynomials fitted by scripts/fit_special.py (mpmath) per piece, in
  the argument's precision: erf(x) = x P(x^2) for |x| < 1, erfc(x) = exp(-x^2) erfcx(x)
  for |x| >= 0.5 with exp(-x^2) computed from x split into a short head and a tail (so
  x^2's rounding does not cost ulps), and erfcx(x) = R(1/x^2) / (x sqrt(pi)) for x >= 8.
  Measured against mpmath (tests/test_special.py): within 2 ulp in float32 and 4e-16
  relative in float64.
- lgamma, digamma: the Lanczos approximation (g = 7, 9 terms) with the reflection formula
  below 1/2, as XLA computes them; accurate to ~1e-15 (float64) relative away from the
  zeros of lgamma (1 and 2) and of digamma (1.4616...), absolute near them.
- erf_inv: Giles' single and double precision approximations, as XLA (random.normal is
  built on it, bit-exact with JAX on most values).
"""

from __future__ import annotations

import math

import numpy as np

from fusionjit._src import dtypes as dt
from fusionjit._src import special_coeffs
from fusionjit._src.autodiff import with_jvp
from fusionjit._src.lax import lax
from fusionjit._src.numpy import shapes, ufuncs
from fusionjit._src.numpy.util import aval, fail, to_array

LANCZOS_G = 7.0
LANCZOS_BASE = 0.99999999999980993227684700473478
LANCZOS = (676.520368121885098567009190444019, -1259.13921672240287047156078755283,
           771.3234287776530788486528258894, -176.61502916214059906584551354,
           12.507343278686904814458936853, -0.13857109526572011689554707,
           9.984369578019570859563e-6, 1.50563273514931155834e-7)


def float_operand(name: str, x):
    """``x`` as an array of a float dtype, for the lax functions (which take floats only)."""
    x = to_array(x)
    if not dt.is_float(aval(x).dtype):
        fail(f"{name} takes a floating-point array, got {aval(x).str_short()}")
    return x


def in_working_precision(fn):
    """``fn`` applied to x, in float32 for 16-bit floats (rounded once at the end)."""
    def wrapped(x):
        d = aval(x).dtype
        if dt.is_low_precision(d):
            return lax.convert_element_type(fn(lax.convert_element_type(x, dt.float32)), d)
        return fn(x)
    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


def _coeffs(x):
    return special_coeffs.F64 if aval(x).dtype == dt.float64 else special_coeffs.F32


def _poly(x, piece):
    """The fitted polynomial of ``piece`` (a, b, coefficients) at x, by Horner's rule with
    fused multiply-adds."""
    a, b, coeffs = piece
    shape, d = aval(x).shape, aval(x).dtype
    u = ufuncs.multiply(ufuncs.subtract(x, (a + b) / 2), 2 / (b - a))
    p = lax.full(shape, coeffs[0], d)
    for c in coeffs[1:]:
        p = lax.fma(p, u, lax.full(shape, c, d))
    return p


def _exp_sq(ax, sign: float):
    """exp(sign * ax**2) for ax >= 0: ax = hi + lo with hi on a grid fine enough that
    hi**2 is exact, so the only rounding is in the small factor exp(sign * lo * (ax + hi))."""
    f64 = aval(ax).dtype == dt.float64
    scale, limit = (4096.0, 30.0) if f64 else (64.0, 12.0)
    ax = ufuncs.where(ax > limit, limit, ax)  # beyond: the result is 0 or inf either way
    hi = ufuncs.divide(ufuncs.floor(ufuncs.add(ufuncs.multiply(ax, scale), 0.5)), scale)
    lo = ufuncs.subtract(ax, hi)
    return ufuncs.multiply(ufuncs.exp(ufuncs.multiply(ufuncs.multiply(hi, hi), sign)),
                           ufuncs.exp(ufuncs.multiply(ufuncs.multiply(lo, ufuncs.add(ax, hi)),
                                                      sign)))


def _erfcx_from_half(x):
    """erfcx(x) for x >= 0.5 (smaller x are read as 0.5; at 0.5 the slope is x's whole,
    not the half a tie of max gives)."""
    c = _coeffs(x)
    x = ufuncs.where(x < 0.5, 0.5, x)
    s = ufuncs.reciprocal(ufuncs.multiply(x, x))
    out = ufuncs.divide(_poly(s, c["asymptotic"]), ufuncs.multiply(x, math.sqrt(math.pi)))
    for piece in reversed(c["erfcx"]):
        out = ufuncs.where(ufuncs.less(x, piece[1]), _poly(x, piece), out)
    return out


def _erf_small(x):
    """erf(x) for |x| <= 1."""
    return ufuncs.multiply(x, _poly(ufuncs.multiply(x, x), _coeffs(x)["erf"]))


def _erfc_tail(ax):
    """erfc(ax) for ax >= 0.5."""
    return ufuncs.multiply(_exp_sq(ax, -1.0), _erfcx_from_half(ax))


@in_working_precision
def erf(x):
    ax = ufuncs.abs(x)
    tail = ufuncs.multiply(ufuncs.sign(x), ufuncs.subtract(1.0, _erfc_tail(ax)))
    return ufuncs.where(ufuncs.less(ax, 1.0), _erf_small(ufuncs.clip(x, -1.0, 1.0)), tail)


@in_working_precision
def erfc(x):
    ax = ufuncs.abs(x)
    tail = _erfc_tail(ax)
    tail = ufuncs.where(ufuncs.less(x, 0.0), ufuncs.subtract(2.0, tail), tail)
    small = ufuncs.subtract(1.0, _erf_small(ufuncs.clip(x, -0.5, 0.5)))
    return ufuncs.where(ufuncs.less(ax, 0.5), small, tail)


def _erfcx_value(x):
    small = ufuncs.multiply(_exp_sq(ufuncs.abs(x), 1.0), erfc(ufuncs.minimum(x, 0.5)))
    return ufuncs.where(ufuncs.less(x, 0.5), small, _erfcx_from_half(x))


@in_working_precision
def erfcx(x):
    """exp(x**2) * erfc(x), without overflow for large x; slope 2 x erfcx(x) - 2 / sqrt(pi)."""
    return _erfcx(x)


def _erf_inv_pieces(x, w):
    """erf^-1(x) by Giles' approximations, given w = -log(1 - x**2) (so that callers can
    compute w without forming x near +-1)."""
    d = aval(x).dtype
    c = lambda v: to_array(v, d, False)  # noqa: E731
    if d == dt.float64:
        small = [-3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
                 1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
                 6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
                 2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
                 1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
                 4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
                 0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
                 0.24015818242558961693, 1.6536545626831027356]
        mid = [2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
               1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
               2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
               6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
               0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
               -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
               3.0838856104922207635]
        large = [-2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
                 -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
                 2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
                 -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
                 7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
                 1.0103004648645343977, 4.8499064014085844221]
        pieces = [(6.25, small, lambda w: ufuncs.subtract(w, c(3.125))),
                  (16.0, mid, lambda w: ufuncs.subtract(ufuncs.sqrt(w), c(3.25))),
                  (None, large, lambda w: ufuncs.subtract(ufuncs.sqrt(w), c(5.0)))]
    else:
        small = [2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                 -0.00125372503, -0.00417768164, 0.246640727, 1.50140941]
        large = [-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                 -0.0076224613, 0.00943887047, 1.00167406, 2.83297682]
        pieces = [(5.0, small, lambda w: ufuncs.subtract(w, c(2.5))),
                  (None, large, lambda w: ufuncs.subtract(ufuncs.sqrt(w), c(3.0)))]
    result = None
    for bound, coeffs, shift in reversed(pieces):
        t = shift(ufuncs.maximum(w, c(0.0)))
        p = c(coeffs[0])
        for k in coeffs[1:]:
            p = lax.fma(shapes.broadcast_to(p, aval(t).shape), t,
                        shapes.broadcast_to(c(k), aval(t).shape))
        piece = ufuncs.multiply(p, x)
        result = piece if result is None else ufuncs.where(ufuncs.less(w, c(bound)), piece, result)
    return result


@in_working_precision
def erf_inv(x):
    """erf^-1 on [-1, 1] (+-inf at +-1, nan outside); its gradient sqrt(pi)/2 exp(y^2)
    (a custom backward pass: the pieces' unused branches would give NaN)."""
    return _erf_inv(x)


def _erf_inv_value(x):
    w = ufuncs.negative(ufuncs.log1p(ufuncs.negative(ufuncs.multiply(x, x))))
    d = aval(x).dtype
    return ufuncs.where(ufuncs.equal(ufuncs.abs(x), to_array(1.0, d, False)),
                        ufuncs.multiply(x, to_array(np.inf, d, False)), _erf_inv_pieces(x, w))


_erf_inv = with_jvp(_erf_inv_value, lambda x, y: ufuncs.multiply(
    0.5 * math.sqrt(math.pi), ufuncs.exp(ufuncs.multiply(y, y))))


@in_working_precision
def ndtri(p):
    """The standard normal quantile: sqrt(2) erf^-1(2p - 1), with erf^-1's w = -log(4p(1-p))
    formed from p itself, so that small p keep their precision. Below the range of Giles'
    polynomials (p < 1e-7 in float32, 1e-15 in float64) the tail is solved from
    log_ndtr(x) = log(p) by Newton's method from the asymptotic guess. Its gradient is
    sqrt(2 pi) exp(x^2 / 2)."""
    return _ndtri(p)


def _ndtri_value(p):
    d = aval(p).dtype
    x = ufuncs.subtract(ufuncs.multiply(p, 2.0), 1.0)
    w = ufuncs.negative(ufuncs.log(ufuncs.multiply(ufuncs.multiply(p, 4.0),
                                                   ufuncs.subtract(1.0, p))))
    e = ufuncs.multiply(_erf_inv_pieces(x, w), math.sqrt(2.0))
    tail_p = 1e-15 if d == dt.float64 else 1e-7
    log_p = ufuncs.log(ufuncs.minimum(p, tail_p))
    # x ~ -sqrt(-2 log p - log(-2 log p) - log(2 pi)), then log-space Newton steps:
    # d/dx log_ndtr(x) = pdf(x) / ndtr(x).
    u = ufuncs.multiply(log_p, -2.0)
    t = ufuncs.negative(ufuncs.sqrt(ufuncs.subtract(ufuncs.subtract(u, ufuncs.log(u)),
                                                   math.log(2 * math.pi))))
    for _ in range(3):
        log_cdf = log_ndtr(t)
        log_pdf = ufuncs.subtract(ufuncs.multiply(ufuncs.multiply(t, t), -0.5),
                                  0.5 * math.log(2 * math.pi))
        t = ufuncs.subtract(t, ufuncs.multiply(ufuncs.subtract(log_cdf, log_p),
                                               ufuncs.exp(ufuncs.subtract(log_cdf, log_pdf))))
    e = ufuncs.where(ufuncs.less(p, tail_p), t, e)
    e = ufuncs.where(ufuncs.equal(p, 0.0), to_array(-np.inf, d, False), e)
    e = ufuncs.where(ufuncs.equal(p, 1.0), to_array(np.inf, d, False), e)
    outside = ufuncs.logical_or(ufuncs.less(p, 0.0), ufuncs.greater(p, 1.0))
    return ufuncs.where(outside, to_array(np.nan, d, False), e)


@in_working_precision
def ndtr(x):
    """The standard normal CDF: erfc(-x / sqrt(2)) / 2."""
    return ufuncs.multiply(erfc(ufuncs.multiply(x, -1 / math.sqrt(2.0))), 0.5)


@in_working_precision
def log_ndtr(x):
    """log of the standard normal CDF, finite far into the lower tail: below x = -1,
    log(erfcx(z) / 2) - z**2 with z = -x / sqrt(2)."""
    z = ufuncs.multiply(ufuncs.minimum(x, -1.0), -1 / math.sqrt(2.0))
    tail = ufuncs.subtract(ufuncs.log(ufuncs.multiply(_erfcx_from_half(z), 0.5)),
                           ufuncs.multiply(z, z))
    upper = ufuncs.log1p(ufuncs.negative(ndtr(ufuncs.negative(ufuncs.where(x < -1.0, -1.0, x)))))
    return ufuncs.where(ufuncs.less(x, -1.0), tail, upper)


def _lanczos_z(x):
    """The reflected argument: -x below 1/2, else x - 1."""
    return ufuncs.where(ufuncs.less(x, 0.5), ufuncs.negative(x), ufuncs.subtract(x, 1.0))


def _log_t(z):
    """log(z + g + 1/2) as log(g + 1/2) + log1p(z / (g + 1/2))."""
    gh = LANCZOS_G + 0.5
    return ufuncs.add(math.log(gh), ufuncs.log1p(ufuncs.divide(z, gh)))


def _reduced(x):
    """x - round(x) in [-1/2, 1/2]: sin(pi x) and tan(pi x) up to sign, exactly reduced."""
    return ufuncs.subtract(x, ufuncs.floor(ufuncs.add(x, 0.5)))


@in_working_precision
def lgamma(x):
    """log|Gamma(x)|; its gradient is digamma (fusionjit.grad: a custom backward pass, as
    differentiating the Lanczos sum and the reflection's unused branch gives NaN at the
    integers)."""
    return _lgamma(x)


def _lgamma_terms(x):
    z = _lanczos_z(x)
    a = lax.full(aval(z).shape, LANCZOS_BASE, aval(z).dtype)
    for i, c in enumerate(LANCZOS):
        a = ufuncs.add(a, ufuncs.divide(c, ufuncs.add(z, float(i + 1))))
    t = ufuncs.add(z, LANCZOS_G + 0.5)
    log_t = _log_t(z)
    # (z + 1/2) log(t) - t, written as XLA writes it.
    log_y = ufuncs.add(
        ufuncs.add(0.5 * math.log(2 * math.pi),
                   ufuncs.multiply(ufuncs.subtract(ufuncs.add(z, 0.5), ufuncs.divide(t, log_t)),
                                   log_t)),
        ufuncs.log(a))
    # lgamma(x) = log(pi) - log|sin(pi x)| - lgamma(1 - x) below 1/2.
    sin = ufuncs.abs(ufuncs.sin(ufuncs.multiply(_reduced(x), math.pi)))
    reflected = ufuncs.subtract(ufuncs.subtract(math.log(math.pi), ufuncs.log(sin)), log_y)
    out = ufuncs.where(ufuncs.less(x, 0.5), reflected, log_y)
    return ufuncs.where(ufuncs.isinf(x), ufuncs.abs(x), out)




@in_working_precision
def digamma(x):
    """d/dx log Gamma(x); nan at the poles (0, -1, -2, ...), as JAX. Its derivative is the
    trigamma function (special_zeta.py)."""
    return _digamma(x)


def _trigamma(x, y):
    from fusionjit._src.special_zeta import polygamma
    return polygamma(1, x)


def _digamma_value(x):
    z = _lanczos_z(x)
    num = lax.full(aval(z).shape, 0.0, aval(z).dtype)
    den = lax.full(aval(z).shape, LANCZOS_BASE, aval(z).dtype)
    for i, c in enumerate(LANCZOS):
        zi = ufuncs.add(z, float(i + 1))
        num = ufuncs.subtract(num, ufuncs.divide(c, ufuncs.multiply(zi, zi)))
        den = ufuncs.add(den, ufuncs.divide(c, zi))
    t = ufuncs.add(z, LANCZOS_G + 0.5)
    y = ufuncs.subtract(ufuncs.add(_log_t(z), ufuncs.divide(num, den)),
                        ufuncs.divide(LANCZOS_G, t))
    # digamma(x) = digamma(1 - x) - pi / tan(pi x) below 1/2.
    r = ufuncs.multiply(_reduced(x), math.pi)
    reflected = ufuncs.subtract(y, ufuncs.divide(ufuncs.multiply(ufuncs.cos(r), math.pi),
                                                 ufuncs.sin(r)))
    out = ufuncs.where(ufuncs.less(x, 0.5), reflected, y)
    d = aval(x).dtype
    pole = ufuncs.logical_and(ufuncs.less_equal(x, 0.0), ufuncs.equal(x, ufuncs.floor(x)))
    out = ufuncs.where(pole, to_array(np.nan, d, False), out)
    return ufuncs.where(ufuncs.equal(x, np.inf), x, out)


# --- fusionjit.lax --------------------------------------------------------------------------

def _lax(name: str, fn):
    def wrapped(x):
        return fn(float_operand(f"lax.{name}", x))
    wrapped.__name__ = name
    wrapped.__doc__ = fn.__doc__
    return wrapped


lax_erf = _lax("erf", erf)
lax_erfc = _lax("erfc", erfc)
lax_erf_inv = _lax("erf_inv", erf_inv)
_erfcx = with_jvp(_erfcx_value, lambda x, y: ufuncs.subtract(
    ufuncs.multiply(ufuncs.multiply(x, 2.0), y), 2 / math.sqrt(math.pi)))
_lgamma = with_jvp(_lgamma_terms, lambda x, y: digamma(x))
_ndtri = with_jvp(_ndtri_value, lambda p, x: ufuncs.multiply(
    math.sqrt(2 * math.pi), ufuncs.exp(ufuncs.multiply(ufuncs.multiply(x, x), 0.5))))
_digamma = with_jvp(_digamma_value, _trigamma)

lax_lgamma = _lax("lgamma", lgamma)
lax_digamma = _lax("digamma", digamma)
