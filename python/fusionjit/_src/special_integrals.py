"""The exponential integrals (``scipy.special``'s exp1, expi, expn), the sine and cosine
integrals (sici), the Fresnel integrals (fresnel), Dawson's integral (dawsn) and Spence's
function (spence), from polynomials fitted by scripts/fit_integrals.py (mpmath), in the
argument's precision as special.py's erf (float16 and bfloat16 in float32, rounded once):

- E1(x) = x P(x) - gamma - log x below x = 1/2 (P the series of Ein(x) / x), and
  e^-x A(x) / x above, A = x e^x E1(x) fitted per octave up to 16 and in 1/x beyond;
  Ei(x) = gamma + log x + x Q(x) on (0, 2] but Ei(x) = (x - x0) R(x) around its zero x0 =
  0.3725 (so it keeps its relative precision there), e^x B(x) / x above 2 (B = x e^-x Ei(x),
  per octave up to 32 and in 1/x beyond; e^x applied in halves), and -E1(-x) below 0;
- E_n(x) for n >= 2 (n truncated to an integer, as SciPy): the power series below x = 1,
  Legendre's continued fraction (modified Lentz, in a while loop until every lane has
  converged) above, as Numerical Recipes' expint; E_0 = e^-x / x and E_1 as above;
- Si(x) = x S(x^2) and Ci(x) = gamma + log x - x^2 C(x^2) up to |x| = 2 (Ci as (x - c0)
  R(x) around its first zero c0 = 0.6165), and above Si = pi/2 - f cos x - g sin x,
  Ci = f sin x - g cos x, with the auxiliary functions x f and x^2 g fitted per octave up
  to 32 and in 1/x^2 beyond;
- D(x) = x P(x^2) up to 1, fitted per octave up to 8, (1/2x) T(1/x^2) beyond;
- Fresnel's S(x) = x^3 P(x^4) and C(x) = x Q(x^4) up to |x| = 2, and above C = 1/2 +
  f sin(pi x^2 / 2) - g cos(pi x^2 / 2), S = 1/2 - f cos - g sin with pi x f and
  pi^2 x^3 g fitted per octave up to 32 and in 1/x^4 beyond; x^2 mod 4 is formed exactly
  (x split in halves, each product reduced mod 4), so the phase is right for every x;
- spence(x) = Li2(1 - x): (1 - x) R(x) on [1/2, 2], pi^2/6 - log x log(1 - x) - x L(x)
  (L = Li2(x) / x) below 1/2, -log(x)^2 / 2 - spence(1/x) above 2.

Measured against SciPy (tests/test_special_extra.py): within a few ulp in float32 and
float64, except where a function crosses zero (Ci's zeros beyond the first, where the error
is absolute) and E_n for x near 1 (the series' terms cancel; ~1e-15 relative in float64).
The derivatives are JAX's: E1' = -e^-x / x, Ei' = e^x / x, dE_n/dx = -E_(n-1) (none by n;
E_-1 = e^-x (1 + x) / x^2, where JAX gives NaN), Si' = sin x / x, Ci' = cos x / x,
D' = 1 - 2 x D, spence'(x) = log(x) / (1 - x), S' = sin(pi x^2 / 2), C' = cos(pi x^2 / 2).
"""

from __future__ import annotations

import math

import numpy as np

from fusionjit._src import dtypes as dt
from fusionjit._src import errors
from fusionjit._src import special_integrals_coeffs as coeffs
from fusionjit._src.autodiff import transform_name, with_jvp
from fusionjit._src.numpy import math_ufuncs, reductions, ufuncs
from fusionjit._src.numpy.shapes import broadcast_arrays
from fusionjit._src.numpy.util import aval, promote_args_inexact, to_array
from fusionjit._src.special import _poly, digamma, in_working_precision, lgamma
from fusionjit._src.special_igamma import in_float32

_EULER = 0.57721566490153286061


def _c(x):
    return coeffs.F64 if aval(x).dtype == dt.float64 else coeffs.F32


def _pieces(x, pieces):
    """The fitted piece whose interval holds x (x clamped into the pieces' span)."""
    x = ufuncs.clip(x, pieces[0][0], pieces[-1][1])
    out = _poly(x, pieces[-1])
    for piece in reversed(pieces[:-1]):
        out = ufuncs.where(ufuncs.less(x, piece[1]), _poly(x, piece), out)
    return out


def _minus_zero(x, zero):
    """x - x0 for the zero (head, tail) in float64, with the head rounded to x's dtype: the
    subtraction of the head is exact near x0 (Sterbenz)."""
    hi = float(np.asarray(zero[0], aval(x).dtype))
    return ufuncs.subtract(ufuncs.subtract(x, hi), (zero[0] - hi) + zero[1])


def _nan(x):
    return to_array(np.nan, aval(x).dtype, False)


def _times_exp(x, v):
    """v e^x as (v e^(x/2)) e^(x/2), which overflows only where the result does."""
    half = ufuncs.exp(ufuncs.multiply(x, 0.5))
    return ufuncs.multiply(ufuncs.multiply(v, half), half)


# --- the exponential integrals ---------------------------------------------------------------

def _e1_value(x):
    c = _c(x)
    xs = ufuncs.clip(x, 0.0, 0.5)
    small = ufuncs.subtract(ufuncs.subtract(ufuncs.multiply(xs, _poly(xs, c["ein"])), _EULER),
                            ufuncs.log(xs))
    xt = ufuncs.maximum(x, 16.0)
    scaled = ufuncs.where(ufuncs.less(x, 16.0), _pieces(x, c["e1"]),
                          _poly(ufuncs.reciprocal(xt), c["e1_tail"]))
    xb = ufuncs.maximum(x, 0.5)
    large = ufuncs.multiply(ufuncs.exp(ufuncs.negative(xb)), ufuncs.divide(scaled, xb))
    out = ufuncs.where(ufuncs.less(x, 0.5), small, large)
    out = ufuncs.where(ufuncs.equal(x, np.inf), 0.0, out)
    return ufuncs.where(ufuncs.logical_or(ufuncs.less(x, 0.0), ufuncs.isnan(x)), _nan(x), out)


def _ei_value(x):
    c = _c(x)
    xs = ufuncs.clip(x, 0.0, 2.0)
    series = ufuncs.add(ufuncs.add(_EULER, ufuncs.log(xs)),
                        ufuncs.multiply(xs, _poly(xs, c["ein_neg"])))
    z = ufuncs.clip(x, 0.25, 0.5)
    near = ufuncs.multiply(_minus_zero(z, coeffs.EI_ZERO), _poly(z, c["ei_zero"]))
    series = ufuncs.where(ufuncs.logical_and(ufuncs.greater_equal(x, 0.25),
                                             ufuncs.less_equal(x, 0.5)), near, series)
    xt = ufuncs.maximum(x, 32.0)
    scaled = ufuncs.where(ufuncs.less(x, 32.0), _pieces(x, c["ei"]),
                          _poly(ufuncs.reciprocal(xt), c["ei_tail"]))
    xb = ufuncs.maximum(x, 2.0)
    large = _times_exp(xb, ufuncs.divide(scaled, xb))
    out = ufuncs.where(ufuncs.less(x, 2.0), series, large)
    out = ufuncs.where(ufuncs.equal(x, np.inf), x, out)
    out = ufuncs.where(ufuncs.less(x, 0.0), ufuncs.negative(_e1_value(ufuncs.negative(x))), out)
    return ufuncs.where(ufuncs.isnan(x), x, out)


def _e1_slope(x, y):
    """-e^-x / x (-inf at 0; NaN below, where E1 is)."""
    return ufuncs.where(ufuncs.less(x, 0.0), _nan(x), ufuncs.negative(
        ufuncs.divide(ufuncs.exp(ufuncs.negative(x)), x)))


_e1 = with_jvp(_e1_value, _e1_slope)
_ei = with_jvp(_ei_value, lambda x, y: _times_exp(x, ufuncs.reciprocal(x)))


@in_working_precision
def exp1(x):
    """E1(x) = int_1^inf e^-xt / t dt for x >= 0 (inf at 0, NaN below, as SciPy)."""
    return _e1(x)


@in_working_precision
def expi(x):
    """Ei(x) = -PV int_-x^inf e^-t / t dt (-inf at 0; -E1(-x) below 0)."""
    return _ei(x)


def _expn_series(n, x):
    """E_n(x) for 0 < x <= 1 and n >= 2: (-x)^(n-1) / (n-1)! (psi(n) - log x) -
    sum_(k != n-1) (-x)^k / ((k - n + 1) k!), to the dtype's precision in a fixed number of
    terms."""
    terms = 24 if aval(x).dtype == dt.float64 else 13  # 1 / terms! below eps
    m = ufuncs.subtract(n, 1.0)
    total = ufuncs.multiply(x, 0.0)
    power = ufuncs.add(total, 1.0)  # (-x)^k / k!
    for k in range(terms):
        if k:
            power = ufuncs.multiply(power, ufuncs.multiply(x, -1.0 / k))
        denominator = ufuncs.subtract(float(k), m)
        skip = ufuncs.equal(denominator, 0.0)
        term = ufuncs.divide(power, ufuncs.where(skip, 1.0, denominator))
        total = ufuncs.subtract(total, ufuncs.where(skip, 0.0, term))
    odd = ufuncs.not_equal(ufuncs.remainder(m, 2.0), 0.0)
    magnitude = ufuncs.exp(ufuncs.subtract(ufuncs.multiply(m, ufuncs.log(x)), lgamma(n)))
    lead = ufuncs.multiply(ufuncs.where(odd, ufuncs.negative(magnitude), magnitude),
                           ufuncs.subtract(digamma(n), ufuncs.log(x)))
    return ufuncs.add(lead, total)


def _expn_fraction(n, x, live):
    """E_n(x) for x > 1: e^-x / (x + n - 1 n / (x + n + 2 - 2 (n + 1) / (x + n + 4 - ...))),
    by the modified Lentz method until every live lane has converged."""
    from fusionjit._src.lax.control_flow import while_loop
    f = dt.finfo(aval(x).dtype)
    eps, big = float(f.eps), float(f.max) / 4
    steps = 200 if aval(x).dtype == dt.float64 else 60  # (x = 1 takes ~95 and ~22)

    def body(carry):
        i, b, c, d, h, _ = carry
        i = ufuncs.add(i, 1.0)
        a = ufuncs.negative(ufuncs.multiply(i, ufuncs.add(ufuncs.subtract(n, 1.0), i)))
        b = ufuncs.add(b, 2.0)
        d = ufuncs.reciprocal(ufuncs.add(ufuncs.multiply(a, d), b))
        c = ufuncs.add(b, ufuncs.divide(a, c))
        delta = ufuncs.multiply(c, d)
        more = ufuncs.logical_and(live, ufuncs.greater(
            ufuncs.abs(ufuncs.subtract(delta, 1.0)), eps))
        return i, b, c, d, ufuncs.multiply(h, delta), more

    def cond(carry):
        return ufuncs.logical_and(reductions.any(carry[-1]),
                                  ufuncs.less(carry[0], float(steps)))

    b = ufuncs.add(x, n)
    d = ufuncs.reciprocal(b)
    zero = to_array(0.0, aval(x).dtype, False)
    out = while_loop(cond, body, (zero, b, ufuncs.add(ufuncs.multiply(x, 0.0), big), d, d,
                                  live))
    return ufuncs.multiply(out[4], ufuncs.exp(ufuncs.negative(x)))


def _expn_value(n, x):
    n = math_ufuncs.trunc(n)
    many = ufuncs.greater_equal(n, 2.0)
    fraction = ufuncs.logical_and(many, ufuncs.logical_and(ufuncs.greater(x, 1.0),
                                                           ufuncs.isfinite(x)))
    series = ufuncs.logical_and(many, ufuncs.logical_and(ufuncs.greater(x, 0.0),
                                                         ufuncs.less_equal(x, 1.0)))
    out = ufuncs.where(fraction, _expn_fraction(ufuncs.where(fraction, n, 2.0),
                                                ufuncs.where(fraction, x, 2.0), fraction),
                       _expn_series(ufuncs.where(series, n, 2.0), ufuncs.where(series, x, 0.5)))
    out = ufuncs.where(ufuncs.equal(n, 1.0), _e1_value(x), out)
    x0 = ufuncs.where(ufuncs.equal(x, 0.0), 1.0, x)
    out = ufuncs.where(ufuncs.equal(n, 0.0), ufuncs.divide(ufuncs.exp(ufuncs.negative(x0)), x0),
                       out)
    at_zero = ufuncs.where(ufuncs.less(n, 2.0), np.inf,
                           ufuncs.reciprocal(ufuncs.maximum(ufuncs.subtract(n, 1.0), 1.0)))
    out = ufuncs.where(ufuncs.equal(x, 0.0), at_zero, out)
    out = ufuncs.where(ufuncs.equal(x, np.inf), 0.0, out)
    bad = ufuncs.logical_or(ufuncs.less(n, 0.0), ufuncs.less(x, 0.0))
    bad = ufuncs.logical_or(bad, ufuncs.logical_or(ufuncs.isnan(n), ufuncs.isnan(x)))
    return ufuncs.where(bad, _nan(x), out)


def _expn_slope(n, x, y):
    """-E_(n-1)(x); for n = 0, -E_-1(x) = -e^-x (1 + x) / x^2."""
    e0 = ufuncs.divide(ufuncs.multiply(ufuncs.exp(ufuncs.negative(x)), ufuncs.add(x, 1.0)),
                       ufuncs.multiply(x, x))
    below = _expn(ufuncs.maximum(ufuncs.subtract(math_ufuncs.trunc(n), 1.0), 0.0), x)
    return ufuncs.negative(ufuncs.where(ufuncs.less(math_ufuncs.trunc(n), 1.0), e0, below))


def _expn_no_n(n, x, y):
    raise NotImplementedError(errors.located(
        f"{transform_name()} of expn by n is not implemented (n is an integer; as in JAX)",
        errors.user_location()))


_expn = in_float32(with_jvp(_expn_value, _expn_no_n, _expn_slope))


def expn(n, x):
    """E_n(x) = int_1^inf e^-xt / t^n dt for integer n >= 0 (a float n is truncated, as
    SciPy) and x >= 0; NaN for negative n or x. Differentiable by x only, as JAX."""
    n, x = promote_args_inexact("expn", n, x)
    return _expn(*broadcast_arrays(n, x))


# --- the sine and cosine integrals -----------------------------------------------------------

def _aux(ax, name: str, power: int):
    """f (power 1) or g (power 2) for |x| >= 2 (smaller |x| are read as 2)."""
    c = _c(ax)
    xb = ufuncs.maximum(ax, 2.0)
    xt = ufuncs.maximum(ax, 32.0)
    s = ufuncs.reciprocal(ufuncs.multiply(xt, xt))
    v = ufuncs.where(ufuncs.less(xb, 32.0), _pieces(xb, c[name]), _poly(s, c[name + "_tail"]))
    return ufuncs.divide(v, xb if power == 1 else ufuncs.multiply(xb, xb))


def _si_value(x):
    ax = ufuncs.abs(x)
    t = ufuncs.minimum(ufuncs.multiply(ax, ax), 4.0)
    small = ufuncs.multiply(ufuncs.minimum(ax, 2.0), _poly(t, _c(x)["si"]))
    xb = ufuncs.maximum(ax, 2.0)
    f, g = _aux(ax, "aux_f", 1), _aux(ax, "aux_g", 2)
    large = ufuncs.subtract(ufuncs.subtract(math.pi / 2, ufuncs.multiply(f, ufuncs.cos(xb))),
                            ufuncs.multiply(g, ufuncs.sin(xb)))
    out = ufuncs.where(ufuncs.less_equal(ax, 2.0), small, large)
    out = ufuncs.where(ufuncs.equal(ax, np.inf), math.pi / 2, out)
    return ufuncs.where(ufuncs.isnan(x), x, ufuncs.where(math_ufuncs.signbit(x),
                                                        ufuncs.negative(out), out))


def _ci_value(x):
    c = _c(x)
    ax = ufuncs.abs(x)
    xs = ufuncs.minimum(ax, 2.0)
    t = ufuncs.multiply(xs, xs)
    small = ufuncs.subtract(ufuncs.add(_EULER, ufuncs.log(xs)),
                            ufuncs.multiply(t, _poly(t, c["cin"])))
    z = ufuncs.clip(ax, 0.5, 0.75)
    near = ufuncs.multiply(_minus_zero(z, coeffs.CI_ZERO), _poly(z, c["ci_zero"]))
    small = ufuncs.where(ufuncs.logical_and(ufuncs.greater_equal(ax, 0.5),
                                            ufuncs.less_equal(ax, 0.75)), near, small)
    xb = ufuncs.maximum(ax, 2.0)
    f, g = _aux(ax, "aux_f", 1), _aux(ax, "aux_g", 2)
    large = ufuncs.subtract(ufuncs.multiply(f, ufuncs.sin(xb)), ufuncs.multiply(g, ufuncs.cos(xb)))
    out = ufuncs.where(ufuncs.less_equal(ax, 2.0), small, large)
    out = ufuncs.where(ufuncs.equal(x, np.inf), 0.0, out)
    return ufuncs.where(ufuncs.logical_or(ufuncs.equal(x, -np.inf), ufuncs.isnan(x)), _nan(x),
                        out)


def _sinc(x, y):
    safe = ufuncs.where(ufuncs.equal(x, 0.0), 1.0, x)
    return ufuncs.where(ufuncs.equal(x, 0.0), 1.0, ufuncs.divide(ufuncs.sin(safe), safe))


_si = with_jvp(_si_value, _sinc)
_ci = with_jvp(_ci_value, lambda x, y: ufuncs.divide(ufuncs.cos(x), x))
_si_working, _ci_working = in_working_precision(_si), in_working_precision(_ci)


def sici(x):
    """(Si(x), Ci(x)): Si(x) = int_0^x sin t / t dt (odd) and Ci(x) = gamma + log|x| +
    int_0^|x| (cos t - 1) / t dt (even; the real part of SciPy's for x < 0, NaN at -inf)."""
    (x,) = promote_args_inexact("sici", x)
    return _si_working(x), _ci_working(x)


# --- the Fresnel integrals ------------------------------------------------------------------

def _mod4(v):
    """v minus the nearest multiple of 4 (exact; small values, of either sign, unchanged)."""
    return ufuncs.subtract(v, ufuncs.multiply(
        ufuncs.floor(ufuncs.add(ufuncs.multiply(v, 0.25), 0.5)), 4.0))


def _half_turns(ax):
    """r = x^2 / 2 up to a multiple of 2 (for x >= 0), so that the phase pi x^2 / 2 is
    pi r: x = hi + lo with hi of half the mantissa (Veltkamp), and hi^2 and 2 hi lo (exact)
    reduced mod 4 first, to [-2, 2]. From 2^p on (p the mantissa's bits) x^2 / 2 is even."""
    f64 = aval(ax).dtype == dt.float64
    split, top = (2.0 ** 27 + 1, 2.0 ** 53) if f64 else (2.0 ** 12 + 1, 2.0 ** 24)
    huge = ufuncs.greater_equal(ax, top)
    x = ufuncs.where(huge, 0.0, ax)
    c = ufuncs.multiply(x, split)
    hi = ufuncs.subtract(c, ufuncs.subtract(c, x))
    lo = ufuncs.subtract(x, hi)
    total = ufuncs.add(ufuncs.add(_mod4(ufuncs.multiply(hi, hi)),
                                  _mod4(ufuncs.multiply(ufuncs.multiply(hi, lo), 2.0))),
                       ufuncs.multiply(lo, lo))
    return ufuncs.multiply(_mod4(total), 0.5)


def _sin_cos_phase(x):
    r = ufuncs.multiply(_half_turns(ufuncs.abs(x)), math.pi)
    return ufuncs.sin(r), ufuncs.cos(r)


def _fresnel_aux(ax, name: str, power: int):
    """f (power 1) or g (power 3) for |x| >= 2 (smaller |x| are read as 2)."""
    c = _c(ax)
    xb = ufuncs.maximum(ax, 2.0)
    xt = ufuncs.maximum(ax, 32.0)
    t = ufuncs.multiply(xt, xt)
    s = ufuncs.reciprocal(ufuncs.multiply(t, t))
    v = ufuncs.where(ufuncs.less(xb, 32.0), _pieces(xb, c[name]), _poly(s, c[name + "_tail"]))
    scale = math.pi if power == 1 else math.pi ** 2
    denominator = xb if power == 1 else ufuncs.multiply(ufuncs.multiply(xb, xb), xb)
    return ufuncs.divide(ufuncs.divide(v, scale), denominator)


def _fresnel_value(x, which: str):
    c = _c(x)
    ax = ufuncs.abs(x)
    xs = ufuncs.minimum(ax, 2.0)
    t = ufuncs.multiply(ufuncs.multiply(xs, xs), ufuncs.multiply(xs, xs))
    if which == "s":
        small = ufuncs.multiply(ufuncs.multiply(ufuncs.multiply(xs, xs), xs),
                                _poly(t, c["fresnel_s"]))
    else:
        small = ufuncs.multiply(xs, _poly(t, c["fresnel_c"]))
    f, g = _fresnel_aux(ax, "fresnel_f", 1), _fresnel_aux(ax, "fresnel_g", 3)
    sin, cos = _sin_cos_phase(ufuncs.maximum(ax, 2.0))
    if which == "s":
        large = ufuncs.subtract(ufuncs.subtract(0.5, ufuncs.multiply(f, cos)),
                                ufuncs.multiply(g, sin))
    else:
        large = ufuncs.subtract(ufuncs.add(0.5, ufuncs.multiply(f, sin)), ufuncs.multiply(g, cos))
    out = ufuncs.where(ufuncs.less_equal(ax, 2.0), small, large)
    out = ufuncs.where(ufuncs.equal(ax, np.inf), 0.5, out)
    return ufuncs.where(ufuncs.isnan(x), x, ufuncs.where(math_ufuncs.signbit(x),
                                                        ufuncs.negative(out), out))


_fresnel_s = in_working_precision(with_jvp(lambda x: _fresnel_value(x, "s"),
                                           lambda x, y: _sin_cos_phase(x)[0]))
_fresnel_c = in_working_precision(with_jvp(lambda x: _fresnel_value(x, "c"),
                                           lambda x, y: _sin_cos_phase(x)[1]))


def fresnel(x):
    """(S(x), C(x)) = (int_0^x sin(pi t^2 / 2) dt, int_0^x cos(pi t^2 / 2) dt), odd, +-1/2
    at +-inf, as ``jax.scipy.special.fresnel`` (accurate for every x, not only |x| <= 10)."""
    (x,) = promote_args_inexact("fresnel", x)
    return _fresnel_s(x), _fresnel_c(x)


# --- Dawson's integral and Spence's function -------------------------------------------------

def _dawsn_value(x):
    c = _c(x)
    ax = ufuncs.abs(x)
    small = ufuncs.multiply(x, _poly(ufuncs.minimum(ufuncs.multiply(x, x), 1.0),
                                     c["dawsn_small"]))
    mid = ufuncs.multiply(ufuncs.sign(x), _pieces(ax, c["dawsn"]))
    xt = ufuncs.maximum(ax, 8.0)
    tail = ufuncs.divide(_poly(ufuncs.reciprocal(ufuncs.multiply(xt, xt)), c["dawsn_tail"]),
                         ufuncs.multiply(ufuncs.where(ufuncs.less(x, 0.0), -2.0, 2.0), xt))
    out = ufuncs.where(ufuncs.less_equal(ax, 1.0), small,
                       ufuncs.where(ufuncs.less(ax, 8.0), mid, tail))
    return ufuncs.where(ufuncs.isnan(x), x, out)


_dawsn = with_jvp(_dawsn_value, lambda x, y: ufuncs.subtract(
    1.0, ufuncs.multiply(ufuncs.multiply(x, 2.0), y)))


@in_working_precision
def dawsn(x):
    """Dawson's integral D(x) = e^-x^2 int_0^x e^t^2 dt (odd)."""
    return _dawsn(x)


def _spence_value(x):
    c = _c(x)
    inverted = ufuncs.greater(x, 2.0)
    y = ufuncs.where(inverted, ufuncs.reciprocal(ufuncs.where(inverted, x, 1.0)), x)
    ys = ufuncs.clip(y, 0.0, 0.5)
    positive = ufuncs.where(ufuncs.equal(ys, 0.0), 0.5, ys)
    logs = ufuncs.where(ufuncs.equal(ys, 0.0), 0.0, ufuncs.multiply(
        ufuncs.log(positive), ufuncs.log1p(ufuncs.negative(positive))))
    low = ufuncs.subtract(ufuncs.subtract(math.pi ** 2 / 6, logs),
                          ufuncs.multiply(ys, _poly(ys, c["li2"])))
    ym = ufuncs.clip(y, 0.5, 2.0)
    mid = ufuncs.multiply(ufuncs.subtract(1.0, ym), _pieces(ym, c["spence"]))
    v = ufuncs.where(ufuncs.less(y, 0.5), low, mid)
    log_x = ufuncs.log(ufuncs.where(inverted, x, 1.0))
    out = ufuncs.where(inverted, ufuncs.subtract(ufuncs.multiply(ufuncs.multiply(log_x, log_x),
                                                                 -0.5), v), v)
    return ufuncs.where(ufuncs.logical_or(ufuncs.less(x, 0.0), ufuncs.isnan(x)), _nan(x), out)


def _spence_slope(x, y):
    one = ufuncs.equal(x, 1.0)
    safe = ufuncs.where(one, 2.0, x)
    return ufuncs.where(one, -1.0, ufuncs.divide(ufuncs.log(safe), ufuncs.subtract(1.0, safe)))


_spence = with_jvp(_spence_value, _spence_slope)


@in_working_precision
def spence(x):
    """Spence's function int_1^x log t / (1 - t) dt = Li2(1 - x) for x >= 0 (NaN below, as
    SciPy and JAX; -inf at inf, where SciPy gives NaN)."""
    return _spence(x)

