"""Histograms with JAX's semantics: histogram_bin_edges, histogram, histogram2d and
histogramdd. Each value's bin is a ``searchsorted`` in the edges (the last edge belongs to
the last bin), and the counts one ``bincount`` with a static length: a scatter-add, so it
runs under jit. Values outside the edges (and NaNs) are not counted."""

from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src import errors
from fusionjit._src.numpy import reductions, shapes, sorting, ufuncs
from fusionjit._src.numpy.extras import bincount, diff, ix_
from fusionjit._src.numpy.util import (aval, check_arraylike, fail, promote_dtypes_inexact,
                                       to_array)


def _float_dtype(d):
    return d if dt.is_float(d) else dt.default_float()


def _bin_count(name, bins) -> int:
    if isinstance(bins, core.Tracer):
        fail(f"{name}: the number of bins must be concrete (it fixes the result's shape); "
             f"pass it as a Python int or pass the edges as an array",
             errors.ConcretizationTypeError)
    try:
        n = operator.index(bins)
    except TypeError:
        fail(f"{name}: bins must be an int or a 1-D array of edges, got {bins!r}")
    if n < 1:
        fail(f"{name}: the number of bins must be positive, got {n}", ValueError)
    return n


def histogram_bin_edges(a, bins=10, range=None, weights=None):  # noqa: A002
    """The edges of the bins: ``bins`` itself if it is a 1-D array, else ``bins + 1``
    evenly spaced edges over ``range`` (by default the minimum and maximum of ``a``; a
    range of width 0 is widened by 0.5 either side)."""
    if isinstance(bins, str):
        fail(f"histogram_bin_edges: string bins ({bins!r}) are not supported",
             NotImplementedError)
    check_arraylike("histogram_bin_edges", a)
    arr = to_array(a)
    d = _float_dtype(aval(arr).dtype)
    if not isinstance(bins, (int, np.integer)) and np.ndim(_shape_probe(bins)) == 1:
        edges = shapes.asarray(bins).astype(d)
        return edges
    n = _bin_count("histogram_bin_edges", bins)
    if range is None:
        if aval(arr).size == 0:
            lo, hi = to_array(np.array(0, d)), to_array(np.array(1, d))
        else:
            lo, hi = reductions.min(arr).astype(d), reductions.max(arr).astype(d)
    else:
        if len(range) != 2:
            fail(f"histogram_bin_edges: range must be None or a pair (min, max), got "
                 f"{range!r}", ValueError)
        lo, hi = (shapes.asarray(r).astype(d) for r in range)
        if not isinstance(lo, core.Tracer) and not isinstance(hi, core.Tracer) \
                and float(lo) > float(hi):
            fail(f"histogram_bin_edges: the range's max must not be below its min, got "
                 f"{tuple(range)}", ValueError)
    flat = ufuncs.equal(hi, lo)
    lo, hi = ufuncs.where(flat, lo - 0.5, lo), ufuncs.where(flat, hi + 0.5, hi)
    return shapes.linspace(lo, hi, n + 1, dtype=d)


def _shape_probe(x):
    """Something ``np.ndim`` reads without converting a traced or device array."""
    if isinstance(x, core.Tracer) or core.is_concrete_array(x):
        return np.empty(aval(x).shape, np.int8)
    return x


def _bin_index(values, edges):
    """Each value's position among the edges: 0 below the first, ``len(edges)`` above the
    last or NaN, ``i`` for the i-th bin; the last edge counts in the last bin."""
    idx = sorting.searchsorted(edges, values, side="right")
    n = aval(edges).shape[0]
    return ufuncs.where(ufuncs.equal(values, edges[-1]), n - 1, idx)


def histogram(a, bins=10, range=None, weights=None, density=None):  # noqa: A002
    """(counts, edges) of the flattened ``a`` in ``bins`` bins (an int or the edges), as
    ``jnp.histogram``: the counts are floats (sums of ``weights`` if given); ``density``
    divides by the total and the bin widths."""
    check_arraylike("histogram", a)
    if weights is None:
        (arr,) = promote_dtypes_inexact(to_array(a))
        w = None
    else:
        check_arraylike("histogram", weights)
        arr, w = to_array(a), to_array(weights)
        if aval(arr).shape != aval(w).shape:
            fail(f"histogram: weights must have a's shape {aval(arr).shape}, got "
                 f"{aval(w).shape}", ValueError)
        arr, w = promote_dtypes_inexact(arr, w)
        w = shapes.ravel(w)
    arr = shapes.ravel(arr)
    if w is None:
        w = shapes.ones(aval(arr).shape, aval(arr).dtype)
    edges = histogram_bin_edges(arr, bins, range)
    n = aval(edges).shape[0]
    counts = bincount(_bin_index(arr, edges), w, length=n + 1)[1:n]
    if density:
        counts = counts / diff(edges) / reductions.sum(counts)
    return counts, edges


def _per_dimension(bins, d: int, name: str):
    if isinstance(bins, (list, tuple)):
        per = list(bins)
    elif isinstance(bins, np.ndarray) or core.is_concrete_array(bins) or \
            isinstance(bins, core.Tracer):
        per = [bins] * d if aval(to_array(bins)).ndim == 0 else \
            [bins[i] for i in builtins.range(aval(to_array(bins)).shape[0])]
    else:
        per = [bins] * d
    if len(per) != d:
        fail(f"{name}: bins must be one per dimension ({d}), got {len(per)}", ValueError)
    return per


def histogramdd(sample, bins=10, range=None, weights=None, density=None):  # noqa: A002
    """(counts, [edges per dimension]) of the points ``sample`` (N, D), as
    ``jnp.histogramdd``: ``bins`` an int, or one int or edge array per dimension; ``range``
    None or one pair (or None) per dimension. Counts are integers without ``weights``."""
    check_arraylike("histogramdd", sample)
    s = to_array(sample)
    if aval(s).ndim != 2:
        fail(f"histogramdd: sample must be 2-D (points, dimensions), got shape "
             f"{aval(s).shape}", ValueError)
    if weights is None:
        (s,) = promote_dtypes_inexact(s)
        w = None
    else:
        check_arraylike("histogramdd", weights)
        w = to_array(weights)
        if aval(w).shape != aval(s).shape[:1]:
            fail(f"histogramdd: one weight per point expected, shape {aval(s).shape[:1]}, "
                 f"got {aval(w).shape}", ValueError)
        s, w = promote_dtypes_inexact(s, w)
    d = aval(s).shape[1]
    if range is not None and (len(range) != d or builtins.any(
            r is not None and len(r) != 2 for r in range)):
        fail(f"histogramdd: range must be one pair (or None) per dimension ({d}), got "
             f"{range!r}", ValueError)
    per = _per_dimension(bins, d, "histogramdd")
    edges, index = [], []
    for i in builtins.range(d):
        col = s[:, i]
        e = histogram_bin_edges(col, per[i], None if range is None else range[i])
        edges.append(e)
        index.append(_bin_index(col, e))
    sizes = [aval(e).shape[0] + 1 for e in edges]
    flat = index[0]
    for i in builtins.range(1, d):
        flat = flat * sizes[i] + index[i]
    hist = bincount(flat, w, length=math.prod(sizes))
    hist = shapes.reshape(hist, tuple(sizes))[(slice(1, -1),) * d]
    if density:
        hist = hist.astype(aval(s).dtype)
        hist = hist / reductions.sum(hist)
        for width in ix_(*(diff(e) for e in edges)):
            hist = hist / width
    return hist, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):  # noqa: A002
    """(counts, x edges, y edges) of the points (x, y); ``bins`` an int, a pair, or one
    edge array for both (``histogramdd`` of the stacked points)."""
    check_arraylike("histogram2d", x, y)
    x, y = to_array(x), to_array(y)
    try:
        n = len(bins)
    except TypeError:
        n = 1
    if n not in (1, 2):
        bins = [bins, bins]
    hist, edges = histogramdd(shapes.stack([x, y], axis=1), bins, range, weights, density)
    return hist, edges[0], edges[1]
