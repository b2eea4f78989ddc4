"""The modified Bessel functions of orders 0 and 1: ``lax.bessel_i0e``, ``lax.bessel_i1e``
and ``scipy.special``'s i0, i0e, i1, i1e, from polynomials fitted by scripts/fit_bessel.py
(mpmath), in the argument's precision as special.py's erf:

- |x| <= 8: I0(x) = P0(x^2) and I1(x) = x P1(x^2) (three pieces in x^2 each; the series of
  both have positive terms, so the polynomials are accurate relatively), times e^-|x| for
  the scaled functions;
- |x| > 8: e^-|x| I(x) = A(1 / |x|) / sqrt(|x|) (Hankel's asymptotic form, fitted), times
  e^|x| for the unscaled ones, applied in two halves so that I0 and I1 are finite as far
  as the dtype reaches (x ~ 91 in float32, not only up to e^x's 88.7).

Measured against SciPy (tests/test_special_more.py): within a few ulp in float32 and
float64. The derivatives are JAX's: i0e' = i1e - sign(x) i0e, i1e' = i0e - i1e (sign(x) +
1/x) (1/2 at 0), i0' = i1, i1' = i0 - i1 / x (1/2 at 0).
"""

from __future__ import annotations

import numpy as np

from fusionjit._src import dtypes as dt
from fusionjit._src import special_bessel_coeffs
from fusionjit._src.autodiff import with_jvp
from fusionjit._src.numpy import ufuncs
from fusionjit._src.numpy.util import aval
from fusionjit._src.special import _lax, _poly, in_working_precision


def _coeffs(x):
    return special_bessel_coeffs.F64 if aval(x).dtype == dt.float64 else special_bessel_coeffs.F32


def _series_part(x, name: str):
    """P0(x^2) (``i0``) or P1(x^2) (``i1``) for |x| <= 8 (larger |x| are read as 8)."""
    pieces = _coeffs(x)[name]
    t = ufuncs.minimum(ufuncs.multiply(x, x), 64.0)
    out = _poly(t, pieces[-1])
    for piece in reversed(pieces[:-1]):
        out = ufuncs.where(ufuncs.less(t, piece[1]), _poly(t, piece), out)
    return out


def _tail(ax, name: str):
    """A(1 / |x|) / sqrt(|x|) = e^-|x| I(|x|) for |x| >= 8 (smaller |x| are read as 8)."""
    ax = ufuncs.maximum(ax, 8.0)
    return ufuncs.divide(_poly(ufuncs.reciprocal(ax), _coeffs(ax)[name]), ufuncs.sqrt(ax))


def _times_exp(ax, v):
    """v e^|x|, as (v e^(|x|/2)) e^(|x|/2) so that it overflows only where the result does."""
    half = ufuncs.exp(ufuncs.multiply(ax, 0.5))
    return ufuncs.multiply(ufuncs.multiply(v, half), half)


def _i0e_value(x):
    ax = ufuncs.abs(x)
    small = ufuncs.multiply(ufuncs.exp(ufuncs.negative(ax)), _series_part(x, "i0"))
    return ufuncs.where(ufuncs.less_equal(ax, 8.0), small, _tail(ax, "i0e_tail"))


def _i1e_value(x):
    ax = ufuncs.abs(x)
    small = ufuncs.multiply(ufuncs.exp(ufuncs.negative(ax)),
                            ufuncs.multiply(x, _series_part(x, "i1")))
    tail = ufuncs.multiply(ufuncs.sign(x), _tail(ax, "i1e_tail"))
    return ufuncs.where(ufuncs.less_equal(ax, 8.0), small, tail)


def _i0_value(x):
    ax = ufuncs.abs(x)
    tail = ufuncs.where(ufuncs.isinf(x), np.inf, _times_exp(ax, _tail(ax, "i0e_tail")))
    return ufuncs.where(ufuncs.less_equal(ax, 8.0), _series_part(x, "i0"), tail)


def _i1_value(x):
    ax = ufuncs.abs(x)
    tail = ufuncs.where(ufuncs.isinf(x), np.inf, _times_exp(ax, _tail(ax, "i1e_tail")))
    return ufuncs.where(ufuncs.less_equal(ax, 8.0), ufuncs.multiply(x, _series_part(x, "i1")),
                        ufuncs.multiply(ufuncs.sign(x), tail))


def _tiny(x):
    return ufuncs.less_equal(ufuncs.abs(x), float(dt.finfo(aval(x).dtype).eps))


def _over_x(v, x):
    """v / x, with x read as 1 where it is tiny (the caller puts the limit there)."""
    return ufuncs.divide(v, ufuncs.where(_tiny(x), 1.0, x))


_i1e = with_jvp(_i1e_value, lambda x, y: ufuncs.where(_tiny(x), 0.5, ufuncs.subtract(
    i0e(x), ufuncs.add(ufuncs.multiply(y, ufuncs.sign(x)), _over_x(y, x)))))
_i0e = with_jvp(_i0e_value, lambda x, y: ufuncs.subtract(i1e(x), ufuncs.multiply(ufuncs.sign(x),
                                                                                  y)))
_i1 = with_jvp(_i1_value, lambda x, y: ufuncs.where(_tiny(x), 0.5,
                                                    ufuncs.subtract(i0(x), _over_x(y, x))))
_i0 = with_jvp(_i0_value, lambda x, y: i1(x))


@in_working_precision
def i0e(x):
    """e^-|x| I0(x), the exponentially scaled modified Bessel function of order 0."""
    return _i0e(x)


@in_working_precision
def i1e(x):
    """e^-|x| I1(x), the exponentially scaled modified Bessel function of order 1."""
    return _i1e(x)


@in_working_precision
def i0(x):
    """I0(x), the modified Bessel function of order 0 (inf beyond the dtype's range)."""
    return _i0(x)


@in_working_precision
def i1(x):
    """I1(x), the modified Bessel function of order 1 (odd)."""
    return _i1(x)


lax_bessel_i0e = _lax("bessel_i0e", i0e)
lax_bessel_i1e = _lax("bessel_i1e", i1e)
