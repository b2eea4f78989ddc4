"""Order statistics that ignore NaNs, with JAX's semantics: nanquantile, nanpercentile and
nanmedian. As ``quantile`` (statistics.py) the reduced axes are sorted (NaNs last); the
positions then depend on each slice's count of non-NaN values, so the values are gathered
per slice. A slice of NaNs only gives NaN."""

from __future__ import annotations


import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.numpy import reductions, shapes, ufuncs
from fusionjit._src.numpy.gather import take_along_axis
from fusionjit._src.numpy.statistics import quantile_layout, sorted_rows
from fusionjit._src.numpy.util import (aval, check_arraylike, fail,
                                       promote_dtypes_inexact)


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
    if weights is not None:
        fail(f"{name}(weights=...) is not supported", NotImplementedError)
    if not isinstance(q, core.Tracer):
        q_np = np.asarray(q, np.float64)
        if ((q_np < 0) | (q_np > 1)).any():
            fail(f"{name}: q must be in [0, {100 if name == 'nanpercentile' else 1}]",
                 ValueError)
    x, q_arr, kept, shape, n = sorted_rows(name, a, q, axis, out, method)
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
    return quantile_layout(result, kept, shape, aval(q_arr).shape, keepdims)
