"""Order statistics that ignore NaNs, with JAX's semantics: nanquantile, nanpercentile and
nanmedian. As ``quantile`` (statistics.py) the reduced axes are sorted (NaNs last); the
positions then depend on each slice's count of non-NaN values, so the values are gathered
per slice. A slice of NaNs only gives NaN."""

from __future__ import annotations

import math

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.lax import lax
from fusionjit._src.numpy import reductions, shapes, sorting, ufuncs
from fusionjit._src.numpy.gather import take_along_axis
from fusionjit._src.numpy.util import (aval, canonical_axes, check_arraylike, fail,
                                       promote_dtypes_inexact, to_array)

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def nanquantile(a, q, axis=None, out=None, overwrite_input: bool = False,
                method: str = "linear", keepdims: bool = False, *, weights=None):
    """The ``q``-th quantiles (``q`` in [0, 1], a scalar or 1-D, possibly traced) of the
    non-NaN values along ``axis``; ``q``'s dimension comes first in the result. ``method``
    as ``quantile``: linear, lower, higher, midpoint, nearest."""
    return _nan_quantile("nanquantile", a, q, axis, out, method, keepdims, weights)


def nanpercentile(a, q, axis=None, out=None, overwrite_input: bool = False,
                  method: str = "linear", keepdims: bool = False, *, weights=None):
    """The ``q``-th percentiles (``q`` in [0, 100]) of the non-NaN values; see
    ``nanquantile``."""
    check_arraylike("nanpercentile", a, q)
    if isinstance(q, core.Tracer):
        (q,) = promote_dtypes_inexact(q)
        q = q / 100
    else:
        q = np.asarray(q, np.float64) / 100
    return _nan_quantile("nanpercentile", a, q, axis, out, method, keepdims, weights)


def nanmedian(a, axis=None, out=None, overwrite_input: bool = False, keepdims: bool = False):
    """The median of the non-NaN values along ``axis`` (the mean of the two middle values
    for even counts)."""
    return _nan_quantile("nanmedian", a, 0.5, axis, out, "midpoint", keepdims, None)


def _nan_quantile(name, a, q, axis, out, method, keepdims, weights):
    check_arraylike(name, a, q)
    if out is not None:
        fail(f"{name}(out=...) is not supported: fusionjit arrays are immutable",
             NotImplementedError)
    if weights is not None:
        fail(f"{name}(weights=...) is not supported", NotImplementedError)
    if method not in _METHODS:
        fail(f"{name}: method must be one of {', '.join(_METHODS)}, got {method!r}", ValueError)
    if not isinstance(q, core.Tracer):
        q_np = np.asarray(q, np.float64)
        if ((q_np < 0) | (q_np > 1)).any():
            fail(f"{name}: q must be in [0, {100 if name == 'nanpercentile' else 1}]",
                 ValueError)
    a, q_arr = promote_dtypes_inexact(to_array(a), to_array(q))
    q_shape = aval(q_arr).shape
    if len(q_shape) > 1:
        fail(f"{name}: q must be a scalar or a 1-D array, got shape {q_shape}", ValueError)
    shape = aval(a).shape
    axes = canonical_axes(axis, len(shape))
    kept = [i for i in range(len(shape)) if i not in axes]
    n = math.prod(shape[i] for i in axes)
    if n == 0:
        fail(f"{name} of an empty array", ValueError)
    # The reduced axes move last and merge into one: (kept..., n), sorted, NaNs last.
    moved = shapes.transpose(a, kept + list(axes))
    x = sorting.sort(shapes.reshape(moved, tuple(shape[i] for i in kept) + (n,)), axis=-1)
    d = aval(x).dtype
    valid = reductions.sum(ufuncs.logical_not(ufuncs.isnan(x)).astype(d), axis=-1,
                           keepdims=True)
    pos = (valid - 1) * shapes.reshape(q_arr, (aval(q_arr).size,))  # (kept..., nq)
    low_f, high_f = ufuncs.floor(pos), ufuncs.ceil(pos)
    high_w = pos - low_f

    def gather(p):
        return take_along_axis(x, ufuncs.clip(p, 0, n - 1).astype(dt.int32), -1)

    low_v, high_v = gather(low_f), gather(high_f)
    if method == "linear":
        result = low_v * (1 - high_w) + high_v * high_w
    elif method == "lower":
        result = low_v
    elif method == "higher":
        result = high_v
    elif method == "midpoint":
        result = (low_v + high_v) * 0.5
    else:
        result = ufuncs.where(ufuncs.less_equal(high_w, 0.5), low_v, high_v)
    result = ufuncs.where(ufuncs.equal(valid, 0), np.nan, result).astype(d)
    # (kept..., nq) -> (nq, kept...), with the reduced axes back as ones for keepdims.
    last = len(kept)
    result = lax.transpose(result, [last] + list(range(last)))
    if keepdims:
        full = [shape[i] if i in kept else 1 for i in range(len(shape))]
        result = shapes.reshape(result, (aval(result).shape[0],) + tuple(full))
    if not q_shape:
        result = shapes.reshape(result, aval(result).shape[1:])
    return result
