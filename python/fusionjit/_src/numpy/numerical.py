"""Numerical routines of ``jax.numpy`` built from slices, dots and reductions: convolve
and correlate (1-D; shifted slices for short kernels, a window gather and a dot for long
ones), cov and corrcoef, gradient (second-order central differences), unwrap and spacing."""

from __future__ import annotations

import numpy as np

from fusionjit._src import dtypes as dt
from fusionjit._src.lax import lax
from fusionjit._src.numpy import manipulation, math_ufuncs, products, reductions, shapes
from fusionjit._src.numpy import statistics, ufuncs
from fusionjit._src.numpy.extras import diff
from fusionjit._src.numpy.gather import take
from fusionjit._src.numpy.util import (aval, canonical_axis, check_arraylike, fail,
                                       promote_dtypes, promote_dtypes_inexact, to_array)

# Kernels up to this length are summed as shifted slices (fused elementwise work); longer
# ones gather the (output, kernel) windows and take one matrix-vector product.
_MAX_SHIFTED_SLICES = 32


def _conv(name, a, v, mode, preferred_element_type):
    check_arraylike(name, a, v)
    x, y = to_array(a), to_array(v)
    if aval(x).ndim != 1 or aval(y).ndim != 1:
        fail(f"{name}() only supports 1-D inputs, got shapes {aval(x).shape} and "
             f"{aval(y).shape}", ValueError)
    if preferred_element_type is None:
        x, y = promote_dtypes_inexact(x, y)
    else:
        # Computed in the preferred type where it holds the inputs' values (int8 in int32:
        # in int8 the sums wrapped), as JAX's.
        x, y = promote_dtypes(x, y)
        d = dt.canonicalize(preferred_element_type)
        if lax.holds(aval(x).dtype, d):
            x, y = lax.convert_element_type(x, d), lax.convert_element_type(y, d)
    if aval(x).shape[0] == 0 or aval(y).shape[0] == 0:
        fail(f"{name}: inputs cannot be empty, got shapes {aval(x).shape} and "
             f"{aval(y).shape}", ValueError)
    reverse = False
    if aval(x).shape[0] < aval(y).shape[0]:
        x, y = y, x
        reverse = name == "correlate"
    if name == "convolve":
        y = shapes.flip(y)
    n, m = aval(x).shape[0], aval(y).shape[0]
    if mode == "valid":
        lo, hi = 0, 0
    elif mode == "same":
        lo, hi = m // 2, m - m // 2 - 1
    elif mode == "full":
        lo, hi = m - 1, m - 1
    else:
        fail(f"{name}: mode must be 'full', 'same' or 'valid', got {mode!r}", ValueError)
    x = lax.pad(x, to_array(np.array(0, aval(x).dtype)), [(lo, hi, 0)])
    length = n + lo + hi - m + 1
    if m <= _MAX_SHIFTED_SLICES:
        out = x[0:length] * y[0]
        for j in range(1, m):
            out = out + x[j:j + length] * y[j]
    else:
        windows = np.arange(length)[:, None] + np.arange(m)[None, :]
        out = products.matmul(take(x, windows), y)
    if preferred_element_type is not None:
        out = out.astype(dt.canonicalize(preferred_element_type))
    return shapes.flip(out) if reverse else out


def convolve(a, v, mode: str = "full", *, precision=None, preferred_element_type=None):
    """The discrete linear convolution ``c[k] = sum_j a[k - j] v[j]`` of two 1-D arrays;
    ``mode``: 'full' (length n + m - 1), 'same' (max(n, m)) or 'valid' (|n - m| + 1).
    Integers are computed as floats unless ``preferred_element_type`` is given."""
    return _conv("convolve", a, v, mode, preferred_element_type)


def correlate(a, v, mode: str = "valid", *, precision=None, preferred_element_type=None):
    """The cross-correlation ``c[k] = sum_j a[k + j] v[j]`` of two 1-D arrays; ``mode`` as
    ``convolve`` (default 'valid')."""
    return _conv("correlate", a, v, mode, preferred_element_type)


def cov(m, y=None, rowvar: bool = True, bias: bool = False, ddof=None, fweights=None,
        aweights=None, dtype=None):
    """The covariance matrix of the variables in the rows (or columns, if not ``rowvar``)
    of ``m`` (and ``y``), normalised by N - 1 (N with ``bias``, N - ``ddof`` if given),
    with optional integer frequency and observation weights, as ``jnp.cov``."""
    check_arraylike("cov", m)
    if y is not None:
        check_arraylike("cov", y)
        m, y = promote_dtypes_inexact(to_array(m), to_array(y))
        if aval(y).ndim > 2:
            fail(f"cov: y has more than 2 dimensions: {aval(y).shape}", ValueError)
    else:
        (m,) = promote_dtypes_inexact(to_array(m))
    if aval(m).ndim > 2:
        fail(f"cov: m has more than 2 dimensions: {aval(m).shape}", ValueError)
    if dtype is not None and not dt.is_float(dt.canonicalize(dtype)):
        fail(f"cov: dtype must be a floating-point type, got {dtype}", ValueError)
    x = manipulation.atleast_2d(m)
    if not rowvar and aval(m).ndim != 1:
        x = shapes.transpose(x)
    if aval(x).shape[0] == 0:
        return shapes.zeros((0, 0), aval(x).dtype)
    if y is not None:
        y2 = manipulation.atleast_2d(y)
        if not rowvar and aval(y2).shape[0] != 1:
            y2 = shapes.transpose(y2)
        x = shapes.concatenate([x, y2], axis=0)
    nvars, nobs = aval(x).shape
    if nobs == 0:
        return shapes.full(() if nvars == 1 else (nvars, nvars), np.nan, aval(x).dtype)
    if ddof is None:
        ddof = 0 if bias else 1
    w = None
    if fweights is not None:
        fweights = _sample_weights("fweights", fweights, nobs)
        if not dt.is_int(aval(fweights).dtype):
            fail(f"cov: fweights must be integers, got {aval(fweights).dtype}")
        w = ufuncs.absolute(fweights)
    if aweights is not None:
        aweights = ufuncs.absolute(_sample_weights("aweights", aweights, nobs))
        w = aweights if w is None else w * aweights
    if dtype is not None:
        x = x.astype(dt.canonicalize(dtype))
        w = None if w is None else w.astype(dt.canonicalize(dtype))
    avg, w_sum = statistics.average(x, axis=1, weights=w, returned=True)
    w_sum = w_sum[0]
    if w is None:
        f = nobs - ddof
    elif ddof == 0:
        f = w_sum
    elif aweights is None:
        f = w_sum - ddof
    else:
        f = w_sum - ddof * reductions.sum(w * aweights) / w_sum
    x = x - avg[:, None]
    xt = shapes.transpose(x if w is None else x * w)
    return shapes.squeeze(ufuncs.true_divide(products.dot(x, xt), f))


def _sample_weights(what, w, nobs):
    check_arraylike("cov", w)
    w = to_array(w)
    if aval(w).ndim != 1:
        fail(f"cov: {what} must be 1-D, got shape {aval(w).shape}", ValueError)
    if aval(w).shape[0] != nobs:
        fail(f"cov: {what} has {aval(w).shape[0]} entries for {nobs} observations",
             ValueError)
    return w


def corrcoef(x, y=None, rowvar: bool = True, dtype=None):
    """The Pearson correlation coefficients, ``cov`` normalised by the standard deviations
    (clipped to [-1, 1])."""
    c = cov(x, y, rowvar, dtype=dtype)
    if aval(c).ndim == 0:
        return c / c
    std = ufuncs.sqrt(manipulation.diagonal(c))
    c = c / std[:, None] / std[None, :]
    return ufuncs.clip(c, -1, 1)


def gradient(f, *varargs, axis=None, edge_order=None):
    """The gradient of ``f`` by second-order central differences inside and first-order
    one-sided differences at the ends, along each of ``axis`` (all by default); spacings
    are scalars or 1-D coordinates, one for all axes or one per axis. A list of arrays for
    several axes, one array for one."""
    if edge_order is not None:
        fail("gradient: edge_order is not supported (as in JAX)", NotImplementedError)
    check_arraylike("gradient", f, *varargs)
    a, *spacing = promote_dtypes_inexact(to_array(f), *(to_array(v) for v in varargs))
    ndim = aval(a).ndim
    if axis is None:
        axes = tuple(range(ndim))
    else:
        axes = tuple(canonical_axis(ax, ndim, "gradient: axis")
                     for ax in ((axis,) if isinstance(axis, int) else axis))
    if not axes:
        return []
    if min(aval(a).shape[ax] for ax in axes) < 2:
        fail(f"gradient: the array of shape {aval(a).shape} is too small: at least 2 "
             f"elements are needed along each axis", ValueError)
    if not spacing:
        spacing = [1.0] * len(axes)
    elif len(spacing) == 1:
        spacing = spacing * len(axes)
    elif len(spacing) != len(axes):
        fail(f"gradient: {len(spacing)} spacings for {len(axes)} axes")
    grads = [_gradient_along(a, h, ax) for ax, h in zip(axes, spacing)]
    return grads[0] if len(axes) == 1 else grads


def _gradient_along(a, h, axis):
    def sl(x, start, stop):
        return lax.slice_in_dim(x, start, stop, 1, axis)

    n = aval(a).shape[axis]
    upper = sl(a, 1, 2) - sl(a, 0, 1)
    lower = sl(a, n - 1, n) - sl(a, n - 2, n - 1)
    h_ndim = 0 if isinstance(h, float) else aval(h).ndim
    if h_ndim == 0:
        inner = (sl(a, 2, n) - sl(a, 0, n - 2)) * 0.5 / h
        upper, lower = upper / h, lower / h
    elif h_ndim == 1:
        if aval(h).shape[0] != n:
            fail(f"gradient: the coordinates have length {aval(h).shape[0]}, the axis {n}",
                 ValueError)
        shape = [1] * aval(a).ndim
        shape[axis] = n
        h = shapes.reshape(h, shape)
        upper = upper / (sl(h, 1, 2) - sl(h, 0, 1))
        lower = lower / (sl(h, n - 1, n) - sl(h, n - 2, n - 1))
        dx1 = sl(h, 1, n - 1) - sl(h, 0, n - 2)
        dx2 = sl(h, 2, n) - sl(h, 1, n - 1)
        wa = -dx2 / (dx1 * (dx1 + dx2))
        wb = (dx2 - dx1) / (dx1 * dx2)
        wc = dx1 / (dx2 * (dx1 + dx2))
        inner = wa * sl(a, 0, n - 2) + wb * sl(a, 1, n - 1) + wc * sl(a, 2, n)
    else:
        fail("gradient: spacings must be scalars or 1-D arrays", ValueError)
    return shapes.concatenate([upper, inner, lower], axis=axis)


def unwrap(p, discont=None, axis: int = -1, period=2 * np.pi):
    """``p`` with jumps of more than ``discont`` (default ``period / 2``) between
    neighbours along ``axis`` replaced by their remainder modulo ``period``."""
    check_arraylike("unwrap", p)
    p, period = promote_dtypes(to_array(p), to_array(period))
    axis = canonical_axis(axis, aval(p).ndim, "unwrap: axis")
    n = aval(p).shape[axis]
    if n == 0:
        return p
    if discont is None:
        discont = period / 2
    interval = period // 2 if dt.is_int(aval(p).dtype) else period / 2
    dd = diff(p, axis=axis)
    ddmod = ufuncs.mod(dd + interval, period) - interval
    ddmod = ufuncs.where(ufuncs.logical_and(ufuncs.equal(ddmod, -interval),
                                            ufuncs.greater(dd, 0)), interval, ddmod)
    correct = ufuncs.where(ufuncs.less(ufuncs.absolute(dd), discont), 0, ddmod - dd)
    head = lax.slice_in_dim(p, 0, 1, 1, axis)
    tail = lax.slice_in_dim(p, 1, n, 1, axis) + statistics.cumsum(correct, axis=axis)
    return shapes.concatenate([head, tail.astype(aval(p).dtype)], axis=axis)


def spacing(x, /):
    """The distance from ``x`` to the next representable number away from zero (toward
    +inf for float16, as JAX), i.e. one unit in the last place."""
    check_arraylike("spacing", x)
    (x,) = promote_dtypes_inexact(to_array(x))
    d = aval(x).dtype
    inf = to_array(np.array(np.inf, d))
    if d == np.float16:
        return math_ufuncs.nextafter(x, inf) - x
    result = math_ufuncs.nextafter(x, math_ufuncs.copysign(inf, x)) - x
    tiny = dt.finfo(d).smallest_subnormal
    return ufuncs.where(ufuncs.equal(result, 0), math_ufuncs.copysign(
        to_array(np.array(tiny, d)), x), result)

