"""Window functions (bartlett, blackman, hamming, hanning, kaiser) in the default float
type, as ``jax.numpy``, and the modified Bessel function ``i0`` that kaiser needs (Cephes'
Chebyshev expansions, as NumPy's ``i0``). ``M`` must be a concrete int: it fixes the
shape."""

from __future__ import annotations

import operator

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src import errors
from fusionjit._src.numpy import shapes, ufuncs
from fusionjit._src.numpy.util import check_arraylike, fail, promote_dtypes_inexact, to_array

# Chebyshev coefficients of exp(-x) I0(x) on [0, 8] and of exp(-x) sqrt(x) I0(x) on
# (8, inf] (Cephes' i0.c, as numpy.i0).
_I0_A = (
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
    1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
    9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-09,
    -1.30002500998624804212e-08, 6.04699502254191894932e-08, -2.67079385394061173391e-07,
    1.11738753912010371815e-06, -4.41673835845875056359e-06, 1.64484480707288970893e-05,
    -5.75419501008210370398e-05, 1.88502885095841655729e-04, -5.76375574538582365885e-04,
    1.63947561694133579842e-03, -4.32430999505057594430e-03, 1.05464603945949983183e-02,
    -2.37374148058994688156e-02, 4.93052842396707084878e-02, -9.49010970480476444210e-02,
    1.71620901522208775349e-01, -3.04682672343198398683e-01, 6.76795274409476084995e-01)
_I0_B = (
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
    3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
    -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
    7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
    -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
    3.39623202570838634515e-09, 2.26666899049817806459e-08, 2.04891858946906374183e-07,
    2.89137052083475648297e-06, 6.88975834691682398426e-05, 3.36911647825569408990e-03,
    8.04490411014108831608e-01)


def _chebyshev(x, coeffs):
    """Clenshaw's recurrence for the Chebyshev series with ``coeffs`` at ``x``."""
    b0, b1, b2 = coeffs[0], 0.0, 0.0
    for c in coeffs[1:]:
        b2, b1 = b1, b0
        b0 = x * b1 - b2 + c
    return 0.5 * (b0 - b2)


def i0(x):
    """The modified Bessel function of the first kind, order 0 (computed in ``x``'s float
    type; integers in the default float type)."""
    check_arraylike("i0", x)
    (x,) = promote_dtypes_inexact(to_array(x))
    ax = ufuncs.absolute(x)
    small = _chebyshev(ax / 2.0 - 2.0, _I0_A)
    big_x = ufuncs.maximum(ax, 8.0)  # keeps 32 / x finite where the branch is not taken
    big = _chebyshev(32.0 / big_x - 2.0, _I0_B) / ufuncs.sqrt(big_x)
    return ufuncs.exp(ax) * ufuncs.where(ufuncs.less_equal(ax, 8.0), small, big)


def _window_length(name, M) -> int:
    if isinstance(M, core.Tracer):
        fail(f"{name}: M must be concrete (it fixes the window's length)",
             errors.ConcretizationTypeError)
    try:
        return operator.index(M)
    except TypeError:
        fail(f"{name}: M must be an int, got {type(M).__name__}")


def _window(name, M, formula):
    m = _window_length(name, M)
    d = dt.default_float()
    if m <= 1:
        return shapes.ones((max(m, 0),), d)
    return formula(shapes.arange(m, dtype=d), m)


def bartlett(M: int):
    """The Bartlett (triangular) window of ``M`` points."""
    return _window("bartlett", M, lambda n, m: 1 - ufuncs.absolute(2 * n + 1 - m) / (m - 1))


def blackman(M: int):
    """The Blackman window of ``M`` points."""
    return _window("blackman", M, lambda n, m: 0.42 - 0.5 * ufuncs.cos(2 * np.pi * n / (m - 1))
                   + 0.08 * ufuncs.cos(4 * np.pi * n / (m - 1)))


def hamming(M: int):
    """The Hamming window of ``M`` points."""
    return _window("hamming", M, lambda n, m: 0.54 - 0.46 * ufuncs.cos(2 * np.pi * n / (m - 1)))


def hanning(M: int):
    """The Hann window of ``M`` points."""
    return _window("hanning", M, lambda n, m: 0.5 * (1 - ufuncs.cos(2 * np.pi * n / (m - 1))))


def kaiser(M: int, beta):
    """The Kaiser window of ``M`` points with shape parameter ``beta`` (may be traced)."""
    check_arraylike("kaiser", beta)

    def formula(n, m):
        alpha = 0.5 * (m - 1)
        return i0(beta * ufuncs.sqrt(1 - ((n - alpha) / alpha) ** 2)) / i0(beta)
    return _window("kaiser", M, formula)
