"""Statistics and running reductions with JAX's semantics: cumsum/cumprod/cumulative_sum
(lax's associative scans), var/std, quantile/percentile/median (a sort along the axis, then
static slices or, for a traced ``q``, a gather), average, ptp, count_nonzero and the
NaN-ignoring reductions."""

from __future__ import annotations

import builtins

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.lax import lax
from fusionjit._src.lax.slicing import take_along
from fusionjit._src.lax import scans
from fusionjit._src.numpy import reductions, shapes
from fusionjit._src.eager import eager_jit
from fusionjit._src.numpy.util import (aval, canonical_axes, canonical_axis, check_arraylike,
                                       fail, promote_dtypes_inexact, to_array)


_no_out = reductions.no_out


# --- running reductions ----------------------------------------------------------------

def _cumulative(name, scan_fn, nan_fill=None):
    def fn(a, axis=None, dtype=None, out=None):
        check_arraylike(name, a)
        _no_out(name, out)
        a = to_array(a)
        if axis is None:
            a, axis = shapes.ravel(a), 0
        axis = canonical_axis(axis, aval(a).ndim)
        if aval(a).ndim == 0:
            a = lax.reshape(a, (1,))
        if dtype is not None:
            a = lax.convert_element_type(a, dt.canonicalize(dtype))
        elif dt.is_bool(aval(a).dtype):
            a = lax.convert_element_type(a, dt.default_int())
        if nan_fill is not None and dt.is_float(aval(a).dtype):
            a = lax.select(lax.ne(a, a), lax.full(aval(a).shape, nan_fill, aval(a).dtype), a)
        # As JAX: 16-bit floats run in float32 (a float16 sum stops growing at 2048).
        dtype, weak = aval(a).dtype, aval(a).weak_type
        if dt.computation_float(dtype) != dtype:
            a = lax.convert_element_type(a, dt.computation_float(dtype), weak)
            return lax.convert_element_type(scan_fn(a, axis=axis), dtype, weak)
        return scan_fn(a, axis=axis)
    fn.__name__ = name
    what = "product" if "prod" in name else "sum"
    nan = "" if nan_fill is None else f", NaN counted as {nan_fill}"
    fn.__doc__ = (f"``jnp.{name}``: the running {what} along ``axis`` (the flattened array if "
                  f"None){nan}. A log-depth scan of vectorised elementwise steps.")
    return eager_jit("axis", "dtype", "out")(fn)


cumsum = _cumulative("cumsum", scans.cumsum)
cumprod = _cumulative("cumprod", scans.cumprod)
nancumsum = _cumulative("nancumsum", scans.cumsum, 0)
nancumprod = _cumulative("nancumprod", scans.cumprod, 1)
cumproduct = cumprod


def _cumulative_api(name, fn):
    def api_fn(x, /, *, axis=None, dtype=None, include_initial: bool = False):
        check_arraylike(name, x)
        x = to_array(x)
        ndim = aval(x).ndim
        if axis is None:
            if ndim > 1:
                fail(f"{name}: axis must be given for an array of {ndim} dimensions", ValueError)
            axis = 0
        if ndim == 0:
            fail(f"{name} needs an array of at least 1 dimension", ValueError)
        axis = canonical_axis(axis, ndim)
        out = fn(x, axis=axis, dtype=dtype)
        if include_initial:
            config = [(0, 0, 0)] * ndim
            config[axis] = (1, 0, 0)
            init = 0 if name == "cumulative_sum" else 1
            out = lax.pad(out, to_array(np.array(init, aval(out).dtype)), config)
        return out
    api_fn.__name__ = name
    api_fn.__doc__ = (f"The array API's ``{name}``: ``{fn.__name__}`` along ``axis`` "
                      f"(required above 1-D), with the initial value first if "
                      f"``include_initial``.")
    return eager_jit("axis", "dtype", "include_initial")(api_fn)


cumulative_sum = _cumulative_api("cumulative_sum", cumsum)
cumulative_prod = _cumulative_api("cumulative_prod", cumprod)


# --- moments -------------------------------------------------------------------------------

def _count(shape, axes) -> int:
    n = 1
    for i in axes:
        n *= shape[i]
    return n


@eager_jit("axis", "dtype", "out", "ddof", "keepdims", "correction")
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims: bool = False, *, where=None,
        correction=None):
    """The variance ``sum(|a - mean|^2) / (N - ddof)`` (``correction`` is the array API's
    name for ``ddof``); integers are computed in the default float type. ``N - ddof <= 0``
    gives inf or NaN, as JAX."""
    check_arraylike("var", a)
    _no_out("var", out)
    if correction is not None:
        if ddof != 0:
            fail("var: ddof and correction can't both be given", ValueError)
        ddof = correction
    a = to_array(a)
    if dtype is not None:
        dtype = dt.canonicalize(dtype)
        if not dt.is_float(dtype):
            fail(f"var: dtype must be a floating-point type, got {dtype}")
    (a,) = promote_dtypes_inexact(a)
    if dtype is not None:
        a = lax.convert_element_type(a, dtype, aval(a).weak_type)
    result_dtype, weak = aval(a).dtype, aval(a).weak_type
    if dt.computation_float(result_dtype) != result_dtype:  # float16, bfloat16: as JAX
        a = lax.convert_element_type(a, dt.computation_float(result_dtype), weak)
        return lax.convert_element_type(
            var(a, axis, None, None, ddof, keepdims, where=where), result_dtype, weak)
    shape = aval(a).shape
    axes = canonical_axes(axis, len(shape))
    mean = reductions.mean(a, axis=axes, keepdims=True, where=where)
    centered = lax.sub(a, lax.broadcast_in_dim(mean, shape, tuple(range(len(shape)))))
    total = reductions.sum(lax.mul(centered, centered), axis=axes, keepdims=keepdims,
                           where=where)
    d = aval(total).dtype
    if where is not None:   # the elements where= keeps, less ddof
        kept = reductions.sum(lax.convert_element_type(reductions.mask(where, shape), d),
                              axis=axes, keepdims=keepdims)
        count = lax.sub(kept, to_array(np.array(ddof, d), d, False))
        return lax.div(total, lax.max(count, lax.full(aval(count).shape, 0, d)))
    count = builtins.max(_count(shape, axes) - ddof, 0)
    return lax.div(total, to_array(np.array(count, d), d, aval(total).weak_type))


@eager_jit("axis", "dtype", "out", "ddof", "keepdims", "correction")
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims: bool = False, *, where=None,
        correction=None):
    """The standard deviation, ``sqrt(var(...))``."""
    return lax.sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, correction=correction))


def average(a, axis=None, weights=None, returned: bool = False, keepdims: bool = False):
    """The (weighted) mean along ``axis``; with ``returned`` also the sum of the weights."""
    check_arraylike("average", a)
    if weights is None:
        avg = reductions.mean(a, axis=axis, keepdims=keepdims)
        if not returned:
            return avg
        a_shape = aval(to_array(a)).shape
        n = _count(a_shape, canonical_axes(axis, len(a_shape)))
        return avg, lax.full(aval(avg).shape, n, aval(avg).dtype)
    a, w = promote_dtypes_inexact(to_array(a), to_array(weights))
    shape, w_shape = aval(a).shape, aval(w).shape
    if w_shape != shape:
        if axis is None:
            fail("average: axis must be given when the shapes of a and weights differ",
                 ValueError)
        if len(w_shape) != 1:
            fail("average: 1-D weights expected when the shapes of a and weights differ",
                 ValueError)
        ax = canonical_axis(axis, len(shape))
        if w_shape[0] != shape[ax]:
            fail("average: the length of weights differs from the length of axis", ValueError)
        w = lax.broadcast_in_dim(w, shape, (ax,))
    total = reductions.sum(lax.mul(a, w), axis=axis, keepdims=keepdims)
    scale = reductions.sum(w, axis=axis, keepdims=keepdims)
    avg = lax.div(total, scale)
    return (avg, scale) if returned else avg


def ptp(a, axis=None, out=None, keepdims: bool = False):
    """The range (maximum - minimum) along ``axis``."""
    _no_out("ptp", out)
    from fusionjit._src.numpy.ufuncs import subtract
    return subtract(reductions.max(a, axis=axis, keepdims=keepdims),
                    reductions.min(a, axis=axis, keepdims=keepdims))


def count_nonzero(a, axis=None, keepdims: bool = False):
    """The number of non-zero elements along ``axis`` (default int dtype)."""
    check_arraylike("count_nonzero", a)
    a = to_array(a)
    nz = a if dt.is_bool(aval(a).dtype) else lax.ne(a, to_array(0, aval(a).dtype))
    return reductions.sum(lax.convert_element_type(nz, dt.default_int()), axis=axis,
                          keepdims=keepdims)


# --- NaN-ignoring reductions ----------------------------------------------------------------

def _nan_replaced(a, value):
    a = to_array(a)
    if not dt.is_float(aval(a).dtype):
        return a
    return lax.select(lax.ne(a, a), lax.full(aval(a).shape, value, aval(a).dtype), a)


def nansum(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None):
    """``sum`` with NaNs counted as zero."""
    check_arraylike("nansum", a)
    return reductions.sum(_nan_replaced(a, 0), axis, dtype, out, keepdims, initial, where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None,
            where=None):
    """``prod`` with NaNs counted as one."""
    check_arraylike("nanprod", a)
    return reductions.prod(_nan_replaced(a, 1), axis, dtype, out, keepdims, initial, where)


def _nan_extreme(name, reduce_fn, fill):
    def fn(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None):
        check_arraylike(name, a)
        a = to_array(a)
        if not dt.is_float(aval(a).dtype):
            return reduce_fn(a, axis=axis, out=out, keepdims=keepdims, initial=initial,
                             where=where)
        result = reduce_fn(_nan_replaced(a, fill), axis=axis, out=out, keepdims=keepdims,
                           initial=initial, where=where)
        all_nan = reductions.all(lax.ne(a, a), axis=axis, keepdims=keepdims)
        return lax.select(all_nan, lax.full(aval(result).shape, np.nan, aval(result).dtype),
                          result)
    fn.__name__ = name
    fn.__doc__ = f"``{name[3:]}`` ignoring NaNs (NaN where a slice is all NaN)."
    return fn


nanmax = _nan_extreme("nanmax", reductions.max, -np.inf)
nanmin = _nan_extreme("nanmin", reductions.min, np.inf)


def _valid_count(a, axis, keepdims, where=None):
    a = to_array(a)
    valid = lax.eq(a, a) if dt.is_float(aval(a).dtype) else lax.full(aval(a).shape, True,
                                                                       dt.bool_)
    if where is not None:
        valid = lax.bitwise_and(valid, reductions.mask(where, aval(a).shape))
    return reductions.sum(lax.convert_element_type(valid, aval(a).dtype), axis=axis,
                          keepdims=keepdims)


def nanmean(a, axis=None, dtype=None, out=None, keepdims: bool = False, *, where=None):
    """The mean of the non-NaN elements (NaN where there are none)."""
    check_arraylike("nanmean", a)
    _no_out("nanmean", out)
    (a,) = promote_dtypes_inexact(to_array(a))
    if dtype is not None:
        a = lax.convert_element_type(a, dt.canonicalize(dtype))
    total = nansum(a, axis=axis, keepdims=keepdims, where=where)
    return lax.div(total, _valid_count(a, axis, keepdims, where))


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims: bool = False, *, where=None):
    """The variance of the non-NaN elements."""
    check_arraylike("nanvar", a)
    _no_out("nanvar", out)
    (a,) = promote_dtypes_inexact(to_array(a))
    if dtype is not None:
        a = lax.convert_element_type(a, dt.canonicalize(dtype))
    shape = aval(a).shape
    mean = nanmean(a, axis=axis, keepdims=True, where=where)
    centered = lax.sub(a, lax.broadcast_in_dim(mean, shape, tuple(range(len(shape)))))
    total = nansum(lax.mul(centered, centered), axis=axis, keepdims=keepdims, where=where)
    count = lax.sub(_valid_count(a, axis, keepdims, where), to_array(ddof, aval(total).dtype))
    count = lax.max(count, lax.full(aval(count).shape, 0, aval(count).dtype))
    return lax.div(total, count)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims: bool = False, *, where=None):
    """The standard deviation of the non-NaN elements."""
    return lax.sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where=where))


# --- order statistics ------------------------------------------------------------------

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def quantile(a, q, axis=None, out=None, overwrite_input: bool = False, method: str = "linear",
             keepdims: bool = False, *, interpolation=None):
    """The ``q``-th quantiles (``q`` in [0, 1], a scalar or array, possibly traced) along
    ``axis``; ``q``'s dimensions come first in the result. NaN where a slice holds a NaN.
    ``method`` as JAX: linear, lower, higher, midpoint, nearest (ties to the lower)."""
    return _quantile("quantile", a, q, axis, out, method if interpolation is None
                     else interpolation, keepdims)


def percentile(a, q, axis=None, out=None, overwrite_input: bool = False, method: str = "linear",
               keepdims: bool = False, *, interpolation=None):
    """The ``q``-th percentiles (``q`` in [0, 100]); see ``quantile``."""
    check_arraylike("percentile", a, q)
    if isinstance(q, core.Tracer):
        (q,) = promote_dtypes_inexact(q)
        q = lax.div(q, to_array(100, aval(q).dtype, aval(q).weak_type))
    else:
        q = np.asarray(q, np.float64) / 100
    return _quantile("percentile", a, q, axis, out, method if interpolation is None
                     else interpolation, keepdims)


def median(a, axis=None, out=None, overwrite_input: bool = False, keepdims: bool = False):
    """The median along ``axis`` (the mean of the two middle values for even lengths)."""
    return _quantile("median", a, 0.5, axis, out, "midpoint", keepdims)


def sorted_rows(name, a, q, axis, out, method):
    """The quantile functions' common start: the checks, then ``a`` (promoted to inexact with
    ``q``) with the reduced axes moved last, merged into one and sorted along it (NaNs
    last). Returns (sorted (kept..., n), q as an array, the kept axes, a's shape, n)."""
    from fusionjit._src.numpy import sorting
    check_arraylike(name, a, q)
    _no_out(name, out)
    if method not in _METHODS:
        fail(f"{name}: method must be one of {', '.join(_METHODS)}, got {method!r}", ValueError)
    # a made inexact first, as JAX's: an int32 median is float32 with x64 too (q = 0.5 is
    # a weak float, which would make the pair float64).
    (a,) = promote_dtypes_inexact(to_array(a))
    a, q_arr = promote_dtypes_inexact(a, to_array(q))
    q_shape = aval(q_arr).shape
    if len(q_shape) > 1:
        fail(f"{name}: q must be a scalar or a 1-D array, got shape {q_shape}", ValueError)
    shape = aval(a).shape
    axes = canonical_axes(axis, len(shape))
    kept = [i for i in range(len(shape)) if i not in axes]
    n = _count(shape, axes)
    if n == 0:
        fail(f"{name} of an empty array", ValueError)
    moved = lax.transpose(a, kept + list(axes))
    flat = lax.reshape(moved, tuple(shape[i] for i in kept) + (n,))
    return sorting.sort(flat, axis=-1), q_arr, kept, shape, n


def quantile_layout(result, kept, shape, q_shape, keepdims):
    """A quantile's (kept..., nq) values as the result: (nq, kept...), the reduced axes back
    as ones for keepdims, without the q axis for a scalar q."""
    last = len(kept)
    result = lax.transpose(result, [last] + list(range(last)))
    if keepdims:
        full = [shape[i] if i in kept else 1 for i in range(len(shape))]
        result = lax.reshape(result, (aval(result).shape[0],) + tuple(full))
    if not q_shape:
        result = lax.reshape(result, aval(result).shape[1:])
    return result


def _quantile(name, a, q, axis, out, method, keepdims):
    from fusionjit._src.numpy import manipulation
    x, q_arr, kept, shape, n = sorted_rows(name, a, q, axis, out, method)
    q_shape = aval(q_arr).shape
    last = len(kept)
    has_nan = reductions.any(lax.ne(x, x), axis=-1, keepdims=True)
    d = aval(x).dtype
    if isinstance(q, core.Tracer):
        q_flat = lax.reshape(q_arr, (aval(q_arr).size,))
        pos = lax.mul(q_flat, to_array(n - 1, d))
        low_f, high_f = lax.floor(pos), lax.ceil(pos)
        high_w = lax.sub(pos, low_f)
        bounds = (to_array(np.int32(0)), to_array(np.int32(n - 1)))
        low_i = lax.clamp(bounds[0], lax.convert_element_type(low_f, dt.int32), bounds[1])
        high_i = lax.clamp(bounds[0], lax.convert_element_type(high_f, dt.int32), bounds[1])
        low_v = take_along(x, low_i, last)
        high_v = take_along(x, high_i, last)
    else:
        # A concrete q: the positions are known at trace time, the values static slices.
        q_np = np.asarray(q, np.float64).reshape(-1)
        if ((q_np < 0) | (q_np > 1)).any():
            fail(f"{name}: q must be in [0, {100 if name == 'percentile' else 1}]", ValueError)
        # In the computation's dtype, as JAX: float32 0.1 * 10 is 1 there (2 in float64,
        # 1.0000000149, would pick the next element).
        pos = q_np.astype(d) * np.asarray(n - 1, d)
        low_idx, high_idx = np.floor(pos).astype(np.int64), np.ceil(pos).astype(np.int64)
        high_w = to_array((pos - low_idx.astype(d)).astype(d))
        low_v = manipulation.take_static(x, low_idx, last)
        high_v = manipulation.take_static(x, high_idx, last)
    out_shape = aval(low_v).shape
    qdim = (last,)

    def per_q(v):
        return lax.broadcast_in_dim(v, out_shape, qdim)

    high_w = per_q(high_w)
    if method == "linear":
        low_w = lax.sub(lax.full(out_shape, 1, d), high_w)
        result = lax.add(lax.mul(low_v, low_w), lax.mul(high_v, high_w))
    elif method == "lower":
        result = low_v
    elif method == "higher":
        result = high_v
    elif method == "midpoint":
        result = lax.mul(lax.add(low_v, high_v), lax.full(out_shape, 0.5, d))
    else:
        result = lax.select(lax.le(high_w, lax.full(out_shape, 0.5, d)), low_v, high_v)
    nan_mask = lax.broadcast_in_dim(has_nan, out_shape, tuple(range(len(out_shape))))
    result = lax.select(nan_mask, lax.full(out_shape, np.nan, d), result)
    return quantile_layout(result, kept, shape, q_shape, keepdims)

