"""Set operations on flattened arrays with JAX's semantics: intersect1d, setdiff1d,
setxor1d and union1d.

Each sorts its candidates, marks the first element of each run of equal values that
belongs in the result (membership tested by comparing every pair, as ``isin``), and keeps
the marked ones in order with sorting's stable compaction. The result's length depends on
the values: outside jit it is counted first; under jit pass ``size=`` (the result is cut or
padded with ``fill_value``), as in JAX."""

from __future__ import annotations

from fusionjit._src import dtypes as dt
from fusionjit._src.lax import lax
from fusionjit._src.numpy import shapes, sorting, ufuncs
from fusionjit._src.numpy.extras import isin
from fusionjit._src.numpy.gather import take
from fusionjit._src.numpy.sorting import _compact, _count_true, _runs, _size_arg
from fusionjit._src.numpy.util import aval, check_arraylike, promote_dtypes, to_array


def _flat_pair(name, ar1, ar2, promote: bool = True):
    check_arraylike(name, ar1, ar2)
    a1, a2 = shapes.ravel(to_array(ar1)), shapes.ravel(to_array(ar2))
    return promote_dtypes(a1, a2) if promote else (a1, a2)


def _sorted_runs(x, assume_unique: bool = False):
    """The sorted ``x``, its permutation, and whether each element starts a run of equal
    values (NaNs equal to each other, as ``unique``)."""
    xs, perm, first = _runs(x, equal_nan=True)
    if assume_unique:
        first = lax.full(aval(xs).shape, True, dt.bool_)
    return xs, perm, first


def _select(name, keep, columns, size, fills):
    """The entries of each array in ``columns`` (1-D, like ``keep``) where ``keep`` holds,
    in order, with the count; ``size`` long (``fills`` after the kept ones) if given."""
    size = _size_arg(name, size, _count_true, keep)
    count = _count_true(keep)
    if aval(keep).shape[0] == 0:
        return [lax.full((size,), 0, aval(c).dtype) for c in columns], count
    outs = _compact(keep, columns, size, [0] * len(columns))
    valid = lax.lt(lax.iota(dt.int32, size), lax.broadcast_in_dim(count, (size,), ()))
    fills = [f(o, count) if callable(f) else f for o, f in zip(outs, fills)]
    return [ufuncs.where(valid, o, lax.convert_element_type(to_array(f), aval(o).dtype))
            for o, f in zip(outs, fills)], count


def _smallest_or_zero(out, count):
    """JAX's default padding: the smallest value kept (the first, as they are sorted), or 0
    where nothing is kept."""
    if aval(out).shape[0] == 0:
        return 0
    return ufuncs.where(ufuncs.greater(count, 0), out[0], 0)


def _fill(fill_value, default):
    return default if fill_value is None else fill_value


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted unique values in either array (flattened). Under jit pass ``size``;
    padding is ``fill_value``, by default the smallest value."""
    a1, a2 = _flat_pair("union1d", ar1, ar2)
    xs, _, first = _sorted_runs(shapes.concatenate([a1, a2]))
    (out,), _ = _select("union1d", first, [xs], size, [_fill(fill_value, _smallest_or_zero)])
    return out


def intersect1d(ar1, ar2, assume_unique: bool = False, return_indices: bool = False, *,
                size=None, fill_value=None):
    """The sorted unique values in both arrays (flattened); with ``return_indices`` also
    the index of each one's first occurrence in ``ar1`` and in ``ar2``. Under jit pass
    ``size``: values are padded with ``fill_value`` (by default the smallest value found),
    indices with ``len(ar1)`` and ``len(ar2)``, as JAX."""
    a1, a2 = _flat_pair("intersect1d", ar1, ar2)
    xs, perm, first = _sorted_runs(a1, assume_unique)
    keep = ufuncs.logical_and(first, isin(xs, a2))
    n1, n2 = aval(a1).shape[0], aval(a2).shape[0]
    fills = [_fill(fill_value, _smallest_or_zero), n1]
    (values, index1), count = _select("intersect1d", keep, [xs, perm], size, fills)
    if not return_indices:
        return values
    if n2 == 0:
        return values, index1, lax.full(aval(values).shape, 0, aval(perm).dtype)
    xs2, perm2, _ = _sorted_runs(a2)
    # The first of a run of equal values in the stably sorted ar2 is its first occurrence.
    pos = ufuncs.minimum(sorting.searchsorted(xs2, values), n2 - 1)
    index2 = take(perm2, pos)
    valid = ufuncs.less(shapes.arange(aval(values).shape[0]), count)
    return values, index1, ufuncs.where(valid, index2, n2).astype(aval(index1).dtype)


def setdiff1d(ar1, ar2, assume_unique: bool = False, *, size=None, fill_value=None):
    """The sorted unique values of ``ar1`` that are not in ``ar2`` (with ``assume_unique``
    the values of ``ar1`` in their order, unsorted, as NumPy). Under jit pass ``size``;
    padding is ``fill_value``, by default 0."""
    a1, a2 = _flat_pair("setdiff1d", ar1, ar2, promote=False)
    if assume_unique:
        xs, first = a1, lax.full(aval(a1).shape, True, dt.bool_)
    else:
        xs, _, first = _sorted_runs(a1)
    keep = ufuncs.logical_and(first, isin(xs, a2, invert=True))
    (out,), _ = _select("setdiff1d", keep, [xs], size, [_fill(fill_value, 0)])
    return out


def setxor1d(ar1, ar2, assume_unique: bool = False, *, size=None, fill_value=None):
    """The sorted unique values in exactly one of the arrays (flattened). Under jit pass
    ``size``; padding is ``fill_value``, by default the smallest value found."""
    a1, a2 = _flat_pair("setxor1d", ar1, ar2)
    xs, _, first = _sorted_runs(shapes.concatenate([a1, a2]))
    one_side = ufuncs.not_equal(isin(xs, a1), isin(xs, a2))
    keep = ufuncs.logical_and(first, one_side)
    (out,), _ = _select("setxor1d", keep, [xs], size, [_fill(fill_value, _smallest_or_zero)])
    return out

