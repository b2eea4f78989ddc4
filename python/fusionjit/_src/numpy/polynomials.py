"""Polynomials as 1-D coefficient arrays, highest power first, with JAX's semantics: poly,
polyadd, polysub, polymul, polydiv, polyder, polyint, polyval and polyfit (least squares
by Householder QR, unrolled over the few columns). ``roots`` and the matrix form of
``poly`` need eigenvalues, which fusionjit does not have."""

from __future__ import annotations

import operator

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src import errors
from fusionjit._src.lax import control_flow, lax
from fusionjit._src.numpy import manipulation, reductions, shapes, ufuncs
from fusionjit._src.numpy.extras import vander
from fusionjit._src.numpy.numerical import convolve
from fusionjit._src.numpy.selection import trim_zeros
from fusionjit._src.numpy.util import (aval, broadcast_shapes, check_arraylike, fail,
                                       promote_dtypes, promote_dtypes_inexact, to_array)


def _coefficients(name, *ps, inexact: bool = False):
    check_arraylike(name, *ps)
    arrays = [to_array(p) for p in ps]
    arrays = promote_dtypes_inexact(*arrays) if inexact else promote_dtypes(*arrays)
    for p in arrays:
        if aval(p).ndim != 1:
            fail(f"{name}: coefficients must be 1-D, got shape {aval(p).shape}", ValueError)
    return arrays


def _static_order(name, m, what):
    if isinstance(m, core.Tracer):
        fail(f"{name}: {what} must be concrete", errors.ConcretizationTypeError)
    m = operator.index(m)
    if m < 0:
        fail(f"{name}: the {what} must be non-negative, got {m}", ValueError)
    return m


def poly(seq_of_zeros):
    """The coefficients of the monic polynomial with the given roots (1-D; a square matrix,
    whose eigenvalues are the roots in NumPy, is not supported: no eigenvalue solver)."""
    check_arraylike("poly", seq_of_zeros)
    (z,) = promote_dtypes_inexact(to_array(seq_of_zeros))
    z = manipulation.atleast_1d(z)
    shape = aval(z).shape
    if len(shape) == 2 and shape[0] == shape[1] and shape[0] != 0:
        fail("poly of a matrix needs its eigenvalues, which fusionjit cannot compute yet",
             NotImplementedError)
    if len(shape) != 1:
        fail(f"poly: input must be 1-D or a non-empty square 2-D array, got shape {shape}",
             ValueError)
    d = aval(z).dtype
    if shape[0] == 0:
        return shapes.ones((), d)
    a = shapes.ones((1,), d)
    for k in range(shape[0]):
        a = convolve(a, shapes.stack([shapes.ones((), d), -z[k]]))
    return a


def polyadd(a1, a2):
    """The sum of two polynomials (the shorter padded with leading zeros)."""
    a1, a2 = _coefficients("polyadd", a1, a2)
    n1, n2 = aval(a1).shape[0], aval(a2).shape[0]
    if n1 < n2:
        a1, a2, n1, n2 = a2, a1, n2, n1
    zero = to_array(np.array(0, aval(a2).dtype))
    return ufuncs.add(a1, lax.pad(a2, zero, [(n1 - n2, 0, 0)]))


def polysub(a1, a2):
    """The difference of two polynomials."""
    a1, a2 = _coefficients("polysub", a1, a2)
    return polyadd(a1, ufuncs.negative(a2))


def polymul(a1, a2, *, trim_leading_zeros: bool = False):
    """The product of two polynomials (``convolve``); ``trim_leading_zeros`` (concrete
    inputs only) drops leading zero coefficients first."""
    a1, a2 = _coefficients("polymul", a1, a2, inexact=True)
    if trim_leading_zeros and (aval(a1).shape[0] > 1 or aval(a2).shape[0] > 1):
        a1, a2 = trim_zeros(a1, trim="f"), trim_zeros(a2, trim="f")
    if aval(a1).shape[0] == 0:
        a1 = shapes.zeros((1,), aval(a2).dtype)
    if aval(a2).shape[0] == 0:
        a2 = shapes.zeros((1,), aval(a1).dtype)
    return convolve(a1, a2, mode="full")


def polydiv(u, v, *, trim_leading_zeros: bool = False):
    """(quotient, remainder) of the polynomial division ``u / v`` (floats; the remainder
    keeps ``u``'s length unless ``trim_leading_zeros``, concrete inputs only, drops its
    leading near-zeros, as JAX)."""
    u, v = _coefficients("polydiv", u, v, inexact=True)
    m, n = aval(u).shape[0] - 1, aval(v).shape[0] - 1
    if n < 0:
        fail("polydiv: the divisor has no coefficients", ValueError)
    scale = 1.0 / v[0]
    q = []
    for k in range(m - n + 1):
        d = scale * u[k]
        q.append(d)
        u = shapes.concatenate([u[:k], u[k:k + n + 1] - d * v, u[k + n + 1:]])
    quotient = shapes.stack(q) if q else shapes.zeros((1,), aval(u).dtype)
    if trim_leading_zeros:
        if isinstance(u, core.Tracer):
            fail("polydiv(trim_leading_zeros=True) needs concrete inputs",
                 errors.ConcretizationTypeError)
        values = np.asarray(u)
        tol = np.sqrt(dt.finfo(values.dtype).eps)
        big = np.flatnonzero(np.abs(values) >= tol)
        u = u[int(big[0]) if big.size else values.size:]
    return quotient, u


def polyder(p, m: int = 1):
    """The coefficients of the ``m``-th derivative."""
    (p,) = _coefficients("polyder", p, inexact=True)
    m = _static_order("polyder", m, "order of the derivative")
    if m == 0:
        return p
    n = aval(p).shape[0]
    if m >= n:
        return p[:0]
    k = np.arange(m, n, dtype=np.float64)[None] - np.arange(m, dtype=np.float64)[:, None]
    coeff = np.prod(k, axis=0)[::-1].astype(aval(p).dtype)
    return p[:n - m] * to_array(coeff)


def polyint(p, m: int = 1, k=None):
    """The coefficients of the ``m``-th antiderivative; ``k`` the integration constants (a
    scalar for all, or one per integration, lowest order last)."""
    m = _static_order("polyint", m, "order of the integral")
    (p, k) = _coefficients("polyint", p, shapes.ravel(to_array(0 if k is None else k)),
                           inexact=True)
    if aval(k).shape[0] == 1:
        k = shapes.broadcast_to(k, (m,))
    if aval(k).shape != (m,):
        fail(f"polyint: k must be a scalar or have length m={m}, got shape {aval(k).shape}",
             ValueError)
    if m == 0:
        return p
    n = aval(p).shape[0]
    grid = np.arange(n + m, dtype=np.float64)[None] - np.arange(m, dtype=np.float64)[:, None]
    coeff = np.prod(np.maximum(1, grid), axis=0)[::-1].astype(aval(p).dtype)
    return shapes.concatenate([p, k]) / to_array(coeff)


def polyval(p, x, *, unroll: int = 16):
    """The polynomial ``p`` at ``x`` by Horner's rule, a ``lax.scan`` over the coefficients
    (``p`` may have trailing dimensions that broadcast with ``x``)."""
    check_arraylike("polyval", p, x)
    p, x = promote_dtypes(to_array(p), to_array(x))
    if aval(p).ndim == 0:
        fail("polyval: p must have at least 1 dimension", ValueError)
    shape = broadcast_shapes(aval(p).shape[1:], aval(x).shape)
    y = shapes.zeros(shape, aval(x).dtype)
    y, _ = control_flow.scan(lambda acc, c: (acc * x + c, None), y, p, unroll=unroll)
    return y


def polyfit(x, y, deg: int, rcond=None, full: bool = False, w=None, cov: bool = False):
    """The least-squares fit of a degree-``deg`` polynomial to the points (x, y) (``y`` 1-D,
    or 2-D for one fit per column), optionally weighted by ``w``: the coefficients, highest
    power first. Solved by Householder QR of the column-scaled Vandermonde matrix, so the
    matrix must have full rank (``rcond`` is accepted and unused); ``full=True`` and
    ``cov=True`` (which need the singular values or the covariance) are not supported."""
    if full or cov:
        fail("polyfit: full=True and cov=True are not supported", NotImplementedError)
    check_arraylike("polyfit", x, y)
    deg = _static_order("polyfit", deg, "degree")
    x, y = promote_dtypes_inexact(to_array(x), to_array(y))
    if aval(x).ndim != 1 or aval(x).shape[0] == 0:
        fail(f"polyfit: x must be a non-empty 1-D array, got shape {aval(x).shape}", ValueError)
    if aval(y).ndim not in (1, 2) or aval(y).shape[0] != aval(x).shape[0]:
        fail(f"polyfit: y must be 1-D or 2-D with x's length {aval(x).shape[0]}, got shape "
             f"{aval(y).shape}", ValueError)
    if aval(x).shape[0] <= deg:
        fail(f"polyfit: a degree-{deg} fit needs at least {deg + 1} points, got "
             f"{aval(x).shape[0]}", ValueError)
    lhs, rhs = vander(x, deg + 1), y
    if w is not None:
        check_arraylike("polyfit", w)
        (w,) = promote_dtypes_inexact(to_array(w))
        if aval(w).shape != aval(x).shape:
            fail(f"polyfit: w must have x's shape {aval(x).shape}, got {aval(w).shape}",
                 ValueError)
        lhs = lhs * w[:, None]
        rhs = rhs * (w if aval(rhs).ndim == 1 else w[:, None])
    scale = ufuncs.sqrt(reductions.sum(lhs * lhs, axis=0))
    scale = ufuncs.where(ufuncs.equal(scale, 0), 1, scale)
    c = _least_squares(lhs / scale, rhs)
    return c / (scale if aval(c).ndim == 1 else scale[:, None])


def _least_squares(a, b):
    """argmin |a c - b| for a tall (M, N) ``a`` of full rank, by Householder QR: each
    reflection ``I - 2 v v^T`` (v zero above row k) is applied to the whole of ``a`` and
    ``b``, then R c = Q^T b is solved by back substitution."""
    rows, cols = aval(a).shape
    vector = aval(b).ndim == 1
    if vector:
        b = b[:, None]
    iota = shapes.arange(rows)
    for k in range(min(cols, rows - 1)):
        col = ufuncs.where(ufuncs.greater_equal(iota, k), a[:, k], 0)
        norm = ufuncs.sqrt(reductions.sum(col * col))
        sign = ufuncs.where(ufuncs.less(a[k, k], 0), -1.0, 1.0)
        v = col + ufuncs.where(ufuncs.equal(iota, k), sign * norm, 0)
        v_norm = ufuncs.sqrt(reductions.sum(v * v))
        v = v / ufuncs.where(ufuncs.equal(v_norm, 0), 1, v_norm)
        a = a - 2 * v[:, None] * (v @ a)[None, :]
        b = b - 2 * v[:, None] * (v @ b)[None, :]
    coeffs = [None] * cols
    for i in reversed(range(cols)):
        acc = b[i]
        for j in range(i + 1, cols):
            acc = acc - a[i, j] * coeffs[j]
        coeffs[i] = acc / a[i, i]
    c = shapes.stack(coeffs)
    return c[:, 0] if vector else c
