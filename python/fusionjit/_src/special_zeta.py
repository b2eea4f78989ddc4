"""The Hurwitz zeta function and the polygamma functions, as ``jax.scipy.special``'s
``zeta`` and ``polygamma`` (the trigamma function is digamma's derivative).

zeta(s, q) = sum over k >= 0 of (q + k)^-s, for s > 1: the first ``_TERMS`` terms summed,
and the rest by the Euler-Maclaurin formula at a = q + _TERMS,

    a^(1-s) / (s-1) + a^-s / 2 + sum_j B_2j / (2j)! s (s+1) ... (s+2j-2) a^(-s-2j+1),

with ``_BERNOULLI``'s first terms (B_2j, the Bernoulli numbers): below 1e-13 relative from
a = 12 on, in float64 too. A negative non-integer q takes the sum's terms as they come (for
an integer s) as long as q + _TERMS stays above ~9, that is q above -3; q at a non-positive
integer is a pole (inf).

polygamma(n, x) = (-1)^(n+1) n! zeta(n+1, x) for n >= 1 (digamma for n = 0); trigamma
below 1/2 by the reflection psi1(1 - x) + psi1(x) = pi^2 / sin^2(pi x), exact at every
negative x."""

from __future__ import annotations

import math

from fusionjit._src import dtypes as dt
from fusionjit._src import errors
from fusionjit._src.autodiff import transform_name, with_jvp
from fusionjit._src.lax import lax
from fusionjit._src.numpy import ufuncs
from fusionjit._src.numpy.util import aval, fail, promote_args_inexact, to_array
from fusionjit._src.special import in_working_precision

_TERMS = 12
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)


def _signed_power(b, s):
    """b^-s for an integer s when b < 0 (sign and all), NaN for another s."""
    magnitude = ufuncs.power(ufuncs.abs(b), ufuncs.negative(s))
    odd = ufuncs.equal(ufuncs.remainder(s, 2.0), 1.0)
    integer = ufuncs.equal(ufuncs.floor(s), s)
    negative = ufuncs.less(b, 0.0)
    signed = ufuncs.where(ufuncs.logical_and(negative, odd), ufuncs.negative(magnitude),
                          magnitude)
    return ufuncs.where(ufuncs.logical_and(negative, ufuncs.logical_not(integer)),
                        math.nan, signed)


def _zeta_value(s, q):
    total = _signed_power(q, s)
    for k in range(1, _TERMS):
        total = ufuncs.add(total, _signed_power(ufuncs.add(q, float(k)), s))
    a = ufuncs.add(q, float(_TERMS))
    a_s = ufuncs.power(a, ufuncs.negative(s))
    total = ufuncs.add(total, ufuncs.add(
        ufuncs.divide(ufuncs.multiply(a_s, a), ufuncs.subtract(s, 1.0)),
        ufuncs.multiply(a_s, 0.5)))
    # term_j = B_2j / (2j)! * s (s+1) ... (s+2j-2) * a^(-s-2j+1)
    rising = ufuncs.divide(ufuncs.multiply(s, a_s), a)
    factorial = 2.0
    inv_a2 = ufuncs.reciprocal(ufuncs.multiply(a, a))
    for j, b in enumerate(_BERNOULLI, start=1):
        total = ufuncs.add(total, ufuncs.multiply(rising, b / factorial))
        rising = ufuncs.multiply(rising, ufuncs.multiply(
            ufuncs.multiply(ufuncs.add(s, 2.0 * j - 1), ufuncs.add(s, 2.0 * j)), inv_a2))
        factorial *= (2 * j + 1) * (2 * j + 2)
    pole = ufuncs.logical_and(ufuncs.less_equal(q, 0.0), ufuncs.equal(ufuncs.floor(q), q))
    total = ufuncs.where(pole, math.inf, total)
    return ufuncs.where(ufuncs.less_equal(s, 1.0), math.nan, total)


def _zeta_ds(s, q, out):
    raise NotImplementedError(errors.located(
        f"{transform_name()} of zeta by its first argument is not implemented (as in JAX)",
        errors.user_location()))


# d/dq zeta(s, q) = -s zeta(s + 1, q)
_zeta = with_jvp(_zeta_value, _zeta_ds,
                 lambda s, q, out: ufuncs.negative(ufuncs.multiply(s, zeta(ufuncs.add(s, 1.0),
                                                                          q))))


def zeta(x, q=None):
    """The Hurwitz zeta function sum_k (q + k)^-x (x > 1), as ``jax.scipy.special.zeta``
    (``q`` is required there too)."""
    if q is None:
        fail("zeta(x, q): q is required (the Riemann zeta function is zeta(x, 1))",
             NotImplementedError)
    x, q = promote_args_inexact("zeta", x, q)
    if dt.is_low_precision(aval(x).dtype):
        d = aval(x).dtype
        return lax.convert_element_type(
            _zeta(lax.convert_element_type(x, dt.float32), lax.convert_element_type(q, dt.float32)),
            d)
    return _zeta(x, q)


def _trigamma(x):
    """psi1(x), reflected below 1/2."""
    one_minus = ufuncs.subtract(1.0, x)
    low = ufuncs.less(x, 0.5)
    z = _zeta_value(to_array(2.0, aval(x).dtype, False), ufuncs.where(low, one_minus, x))
    from fusionjit._src.special import _reduced
    sin = ufuncs.sin(ufuncs.multiply(_reduced(x), math.pi))
    reflected = ufuncs.subtract(ufuncs.divide(math.pi ** 2, ufuncs.multiply(sin, sin)), z)
    return ufuncs.where(low, reflected, z)


def polygamma(n, x):
    """The n-th derivative of digamma, as ``jax.scipy.special.polygamma``: n a non-negative
    integer (an array of them, elementwise)."""
    n_arr = to_array(n)
    if not (dt.is_int(aval(n_arr).dtype) or dt.is_float(aval(n_arr).dtype)):
        fail(f"polygamma: n must be an integer, got {aval(n_arr).str_short()}", TypeError)
    n_f, x = promote_args_inexact("polygamma", n_arr, x)
    if isinstance(n, int):
        if n < 0:
            fail(f"polygamma: n must be non-negative, got {n}", ValueError)
        if n == 0:
            from fusionjit._src.special import digamma
            return digamma(x)
        if n == 1:
            return _polygamma_one(x)
    return _polygamma(n_f, x)


def _polygamma_value(n, x):
    from fusionjit._src.special import digamma, lgamma
    sign_fact = ufuncs.multiply(ufuncs.where(ufuncs.equal(ufuncs.remainder(n, 2.0), 0.0),
                                             -1.0, 1.0),
                                ufuncs.exp(lgamma(ufuncs.add(n, 1.0))))
    out = ufuncs.multiply(sign_fact, _zeta_value(ufuncs.add(n, 1.0), x))
    out = ufuncs.where(ufuncs.equal(n, 1.0), _trigamma(x), out)
    bad = ufuncs.logical_or(ufuncs.less(n, 0.0), ufuncs.not_equal(ufuncs.floor(n), n))
    out = ufuncs.where(bad, math.nan, out)
    return ufuncs.where(ufuncs.equal(n, 0.0), digamma(x), out)


def _no_dn(n, x, out):
    fail("polygamma's derivative by n is not defined", NotImplementedError)


_polygamma = with_jvp(_polygamma_value, _no_dn,
                      lambda n, x, out: polygamma(ufuncs.add(n, 1.0), x))


_polygamma_one = in_working_precision(with_jvp(_trigamma, lambda x, out: polygamma(
    to_array(2.0, aval(x).dtype, False), x)))


def lax_zeta(x, q):
    """``jax.lax.zeta``: the Hurwitz zeta function, of floating-point operands."""
    from fusionjit._src.special_igamma import _lax_operands
    return zeta(*_lax_operands("zeta", x, q))


def lax_polygamma(m, x):
    """``jax.lax.polygamma``: the m-th derivative of digamma, of floating-point operands (m
    holds integers)."""
    from fusionjit._src.special_igamma import _lax_operands
    return _polygamma(*_lax_operands("polygamma", m, x))
