"""Sorting, searching and sets with JAX's semantics: sort, argsort, lexsort, searchsorted,
nonzero/argwhere/flatnonzero and unique/unique_*.

Everything here is composed of ``lax.sort`` (the bitonic network of _src/lax/sorting.py):
selecting the elements where a mask holds (nonzero, the first element of each run of equal
values for unique) is a stable sort by "not selected", which moves them to the front in
order. Output sizes that depend on values need ``size=`` under jit, as in JAX; outside jit
the size is computed first (one compiled program), then the result."""

from __future__ import annotations

import collections

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src import errors
from fusionjit._src.eager import eager_jit
from fusionjit._src.lax import lax
from fusionjit._src.lax import scans
from fusionjit._src.lax import sorting as lax_sorting
from fusionjit._src.numpy import reductions, shapes
from fusionjit._src.numpy.util import (aval, canonical_axis, check_arraylike, fail,
                                       promote_dtypes, to_array)


def _axis_or_flat(name, a, axis):
    check_arraylike(name, a)
    a = to_array(a)
    if axis is None:
        return shapes.ravel(a), 0
    if aval(a).ndim == 0:
        fail(f"{name}() needs an array of at least 1 dimension", ValueError)
    return a, canonical_axis(axis, aval(a).ndim)


def sort(a, axis: int | None = -1, *, kind=None, order=None, stable: bool = True,
         descending: bool = False):
    """The sorted copy of ``a`` along ``axis`` (flattened if None). NaNs sort last (first
    when ``descending``); -0.0 and 0.0 are equal; the sort is always stable."""
    if order is not None:
        fail("sort: order is not supported (fusionjit has no structured arrays)",
             NotImplementedError)
    a, axis = _axis_or_flat("sort", a, axis)
    return lax_sorting.sort_along((a,), axis, 1, bool(descending))[0]


def argsort(a, axis: int | None = -1, *, kind=None, order=None, stable: bool = True,
            descending: bool = False):
    """The indices that sort ``a`` along ``axis`` (stably: equal elements keep their order,
    also when ``descending``)."""
    if order is not None:
        fail("argsort: order is not supported", NotImplementedError)
    a, axis = _axis_or_flat("argsort", a, axis)
    iota = lax.broadcasted_iota(dt.default_int(), aval(a).shape, axis)
    return lax_sorting.sort_along((a, iota), axis, 1, bool(descending))[1]


def lexsort(keys, axis: int = -1):
    """The indices that sort by the last key, then the one before it, and so on."""
    keys = [to_array(k) for k in keys] if not isinstance(keys, core.Tracer) and \
        not core.is_concrete_array(keys) else [keys[i] for i in range(len(keys))]
    if not keys:
        fail("lexsort needs at least one key", TypeError)
    shapes_ = {aval(k).shape for k in keys}
    if len(shapes_) != 1:
        fail(f"lexsort: all keys need the same shape, got {sorted(shapes_)}", ValueError)
    shape = shapes_.pop()
    if not shape:
        fail("lexsort needs keys of at least 1 dimension", ValueError)
    axis = canonical_axis(axis, len(shape))
    iota = lax.broadcasted_iota(dt.default_int(), shape, axis)
    ordered = list(reversed(keys))
    return lax_sorting.sort_along((*ordered, iota), axis, len(ordered))[-1]


def searchsorted(a, v, side: str = "left", sorter=None, *, method: str = "scan"):
    """Insertion points of ``v`` in the sorted 1-D ``a``: for 'left' the number of elements
    of ``a`` below each value, for 'right' the number at or below it, in sort order (NaN
    after everything). As JAX's methods: 'compare_all' compares every value with every
    element (O(len(a)) per value, vectorised); the others ('scan', the default,
    'scan_unrolled', 'sort') are a binary search, O(log len(a)) gathers per value."""
    check_arraylike("searchsorted", a, v)
    if side not in ("left", "right"):
        fail(f"searchsorted: side must be 'left' or 'right', got {side!r}", ValueError)
    if method not in ("scan", "scan_unrolled", "sort", "compare_all"):
        fail(f"searchsorted: method must be 'scan', 'scan_unrolled', 'sort' or 'compare_all', "
             f"got {method!r}", ValueError)
    a, v = promote_dtypes(to_array(a), to_array(v))
    if aval(a).ndim != 1:
        fail(f"searchsorted: a must be 1-D, got shape {aval(a).shape}", ValueError)
    if sorter is not None:
        from fusionjit._src.numpy.gather import take
        a = take(a, sorter)
    n = aval(a).shape[0]
    v_shape = aval(v).shape
    ka, kv = lax_sorting.sort_key(a), lax_sorting.sort_key(v)
    before = lax.lt if side == "left" else lax.le
    if method != "compare_all" and n > 0:
        return _binary_search(ka, kv, before)
    full = v_shape + (n,)
    ka = lax.broadcast_in_dim(ka, full, (len(v_shape),))
    kv = lax.broadcast_in_dim(kv, full, tuple(range(len(v_shape))))
    return lax.reduce_sum(lax.convert_element_type(before(ka, kv), dt.default_int()),
                          (len(v_shape),))


def _binary_search(ka, kv, before):
    """For each key of ``kv``, the first position of the sorted keys ``ka`` whose key is not
    ``before`` it: [lo, hi) halves bit_length(n) times."""
    from fusionjit._src.lax.control_flow import fori_loop
    from fusionjit._src.lax.slicing import take_along
    n = aval(ka).shape[0]
    shape = aval(kv).shape
    it = dt.default_int()
    flat = lax.reshape(kv, (int(np.prod(shape, dtype=np.int64)),))

    def halve(_, bounds):
        lo, hi = bounds
        mid = lax.shift_right_logical(lax.add(lo, hi), to_array(np.array(1, it)))
        probe = take_along(ka, lax.min(mid, to_array(np.array(n - 1, it))), 0)
        right = lax.bitwise_and(before(probe, flat), lax.lt(lo, hi))
        return (lax.select(right, lax.add(mid, to_array(np.array(1, it))), lo),
                lax.select(right, hi, mid))

    m = aval(flat).shape[0]
    lo = lax.full((m,), 0, it)
    hi = lax.full((m,), n, it)
    lo, _ = fori_loop(0, n.bit_length(), halve, (lo, hi))
    return lax.reshape(lo, shape)


# --- selecting by a mask ---------------------------------------------------------------

def _compact(mask, values, size: int, fills):
    """The ``values`` (1-D, like ``mask``) where ``mask`` holds, in order, then those where
    it does not; cut or padded to ``size``, padding (and positions past the selected count)
    left to the caller except for ``fills`` used where ``size`` exceeds the length."""
    n = aval(mask).shape[0]
    key = lax.convert_element_type(lax.bitwise_not(mask), dt.int32)
    out = list(lax_sorting.sort_along((key, *values), 0, 1))[1:]
    if size <= n:
        return [lax.slice(o, (0,), (size,)) for o in out]
    return [lax.pad(o, to_array(np.array(f, aval(o).dtype)), [(0, size - n, 0)])
            for o, f in zip(out, fills)]


def _size_arg(name, size, count_fn, *args):
    """``size`` if given, else the count computed now (outside jit), else a clear error."""
    if size is not None:
        size = int(size)
        if size < 0:
            fail(f"{name}: size must be non-negative, got {size}", ValueError)
        return size
    if any(isinstance(x, core.Tracer) for x in args):
        fail(f"{name}() has a result whose size depends on the values of its input, which are "
             f"not known inside jit; pass size= (and fill_value=) to fix the size, as in JAX, "
             f"or use fusionjit.numpy.where", errors.ConcretizationTypeError)
    return int(count_fn(*args))


@eager_jit()
def _count_true(mask):
    return reductions.sum(lax.convert_element_type(mask, dt.int32))


def _nonzero_mask(name, a):
    check_arraylike(name, a)
    a = to_array(a)
    if aval(a).ndim == 0:
        fail(f"calling {name} on a 0-d array is not allowed; use atleast_1d", ValueError)
    mask = a if dt.is_bool(aval(a).dtype) else lax.ne(a, to_array(0, aval(a).dtype))
    return a, shapes.ravel(mask)


def flatnonzero(a, *, size=None, fill_value=None):
    """The flat indices of the non-zero elements of ``a`` (``size``: see nonzero)."""
    _, mask = _nonzero_mask("flatnonzero", a)
    return _flat_positions(mask, _size_arg("flatnonzero", size, _count_true, mask), fill_value)


@eager_jit("size")
def _flat_positions(mask, size, fill_value):
    n = aval(mask).shape[0]
    idx_t = dt.default_int()
    fill = 0 if fill_value is None else fill_value
    pos = lax.iota(idx_t, n)
    (out,) = _compact(mask, [pos], size, [0])
    valid = lax.lt(lax.iota(dt.int32, size),
                   lax.broadcast_in_dim(_count_true(mask), (size,), ()))
    fill_arr = lax.broadcast_in_dim(lax.convert_element_type(to_array(fill), idx_t), (size,), ())
    return lax.select(valid, out, fill_arr)


def nonzero(a, *, size=None, fill_value=None):
    """The indices of the non-zero elements, one array per dimension. Under jit pass
    ``size`` (the result is cut or padded to it; padding is ``fill_value``, default 0, a
    scalar or one per dimension), as ``jnp.nonzero``."""
    a, mask = _nonzero_mask("nonzero", a)
    size = _size_arg("nonzero", size, _count_true, mask)
    shape = aval(a).shape
    flat = _flat_positions(mask, size, 0)
    valid = lax.lt(lax.iota(dt.int32, size), lax.broadcast_in_dim(_count_true(mask), (size,), ()))
    fills = fill_value if isinstance(fill_value, (tuple, list)) else [fill_value] * len(shape)
    if len(fills) != len(shape):
        fail(f"nonzero: {len(fills)} fill values for {len(shape)} dimensions", ValueError)
    out, stride = [], 1
    idx_t = aval(flat).dtype
    for dim in reversed(range(len(shape))):
        coord = lax.rem(lax.div(flat, to_array(stride, idx_t)), to_array(max(shape[dim], 1),
                                                                         idx_t))
        fill = 0 if fills[dim] is None else fills[dim]
        coord = lax.select(valid, coord, lax.broadcast_in_dim(
            lax.convert_element_type(to_array(fill), idx_t), (size,), ()))
        out.append(coord)
        stride *= shape[dim]
    return tuple(reversed(out))


def argwhere(a, *, size=None, fill_value=None):
    """The indices of the non-zero elements as rows of a (count, ndim) array."""
    check_arraylike("argwhere", a)
    a = to_array(a)
    if aval(a).ndim == 0:
        mask = lax.reshape(lax.ne(a, to_array(0, aval(a).dtype)), (1,))
        rows = _size_arg("argwhere", size, _count_true, mask)
        return lax.full((rows, 0), 0, dt.default_int())
    coords = nonzero(a, size=size, fill_value=fill_value)
    return lax.concatenate([lax.expand_dims(c, (1,)) for c in coords], 1)


# --- unique ---------------------------------------------------------------------------

def _runs(x, equal_nan: bool):
    """Sorts the flat ``x``; returns the sorted values, the permutation, and whether each
    sorted element starts a run of equal values."""
    n = aval(x).shape[0]
    xs, perm = lax_sorting.sort_along((x, lax.iota(dt.default_int(), n)), 0, 1)
    if n == 0:
        return xs, perm, lax.full((0,), True, dt.bool_)
    key = lax_sorting.sort_key(xs)
    differs = lax.ne(lax.slice(key, (1,), (n,)), lax.slice(key, (0,), (n - 1,)))
    if not equal_nan and dt.is_float(aval(x).dtype):
        differs = lax.bitwise_or(differs, lax.ne(lax.slice(xs, (1,), (n,)),
                                                 lax.slice(xs, (1,), (n,))))
    first = lax.concatenate([lax.full((1,), True, dt.bool_), differs], 0)
    return xs, perm, first


# Called eagerly (a result's size taken from the values, then the result of that size), the
# count and the result are one program each: an eager unique of 64x64 took 4 ms.
@eager_jit("equal_nan")
def _unique_count(x, equal_nan: bool):
    return _count_true(_runs(x, equal_nan)[2])


@eager_jit("size", "equal_nan")
def _unique_flat(x, size: int, equal_nan: bool, fill_value):
    """(values, first indices, inverse indices, counts) of the flat ``x``, ``size`` long."""
    xs, perm, first = _runs(x, equal_nan)
    (values,), index, inverse, counts, valid = _from_runs(first, perm, size, [xs])
    if size:
        if fill_value is None:
            fill = lax.broadcast_in_dim(lax.slice(values, (0,), (1,)), (size,), (0,))
        else:
            fill = lax.broadcast_in_dim(lax.convert_element_type(to_array(fill_value),
                                                                 aval(values).dtype), (size,), ())
        values = lax.select(valid, values, fill)
    return values, index, inverse, counts


def _from_runs(first, perm, size: int, sorted_values):
    """From the runs of a stable sort (``perm``, and ``first``: whether each sorted element
    starts a run): the ``sorted_values`` at the first ``size`` runs' starts, each run's
    first index (the first run's past the count), the run number of each element in the
    original order, each run's count (0 past the count), and which slots hold a run."""
    n = aval(first).shape[0]
    idx_t = dt.default_int()
    starts_src = lax.iota(idx_t, n)
    # One more start than ``size``: where the last kept run ends.
    fills = [0] * len(sorted_values) + [0, n]
    *values, index, starts = _compact(first, [*sorted_values, perm, starts_src], size + 1,
                                      fills)
    values = [lax.slice(v, (0,), (size,)) for v in values]
    index = lax.slice(index, (0,), (size,))
    count = _count_true(first)
    k = lax.iota(dt.int32, size)
    valid = lax.lt(k, lax.broadcast_in_dim(count, (size,), ()))
    if size:
        nxt = lax.slice(starts, (1,), (size + 1,))
        starts = lax.slice(starts, (0,), (size,))
        last = lax.eq(lax.add(k, to_array(np.int32(1))), lax.broadcast_in_dim(count, (size,), ()))
        nxt = lax.select(last, lax.full((size,), n, idx_t), nxt)
        counts = lax.select(valid, lax.sub(nxt, starts), lax.full((size,), 0, idx_t))
        index = lax.select(valid, index, lax.broadcast_in_dim(lax.slice(index, (0,), (1,)),
                                                              (size,), (0,)))
    else:
        counts = lax.full((0,), 0, idx_t)
    # Each element's run number, moved back from sorted to original order by sorting the
    # permutation.
    rank = (lax.sub(scans.cumsum(lax.convert_element_type(first, idx_t)), to_array(1, idx_t))
            if n else lax.full((0,), 0, idx_t))
    inverse = lax_sorting.sort_along((perm, rank), 0, 1)[1] if n else rank
    return values, index, inverse, counts, valid


def _row_runs(rows, equal_nan: bool):
    """Sorts the rows of the 2-D ``rows`` lexicographically (stably, -0.0 equal to 0.0 and,
    with ``equal_nan``, NaN to NaN); returns the permutation and whether each sorted row
    starts a run of equal rows."""
    n, m = aval(rows).shape
    perm = lax.iota(dt.default_int(), n)
    if n == 0:
        return perm, lax.full((0,), True, dt.bool_)
    cols = [lax.reshape(lax.slice(rows, (0, j), (n, j + 1)), (n,)) for j in range(m)]
    keys = [lax_sorting.sort_key(c) for c in cols]
    if m:
        *keys, perm = lax_sorting.sort_along((*keys, perm), 0, m)
    differs = lax.full((n - 1,), False, dt.bool_)
    for key in keys:
        differs = lax.bitwise_or(differs, lax.ne(lax.slice(key, (1,), (n,)),
                                                 lax.slice(key, (0,), (n - 1,))))
    if not equal_nan and dt.is_float(aval(rows).dtype):
        for c in cols:  # a row holding a NaN equals no other
            c = _take_rows(c, perm)
            later = lax.slice(c, (1,), (n,))
            differs = lax.bitwise_or(differs, lax.ne(later, later))
    return perm, lax.concatenate([lax.full((1,), True, dt.bool_), differs], 0)


def _take_rows(x, index):
    from fusionjit._src.numpy.gather import take
    return take(x, index, axis=0, mode="clip")


def _unique_axis(x, axis, size, fill_value, equal_nan: bool):
    """unique(x, axis=axis): (values, first indices, inverse indices, counts) of the
    sub-arrays along ``axis``, compared whole."""
    x = to_array(x)
    shape = aval(x).shape
    if not shape:
        fail(f"unique: axis {axis} is out of bounds for an array of dimension 0", ValueError)
    ax = canonical_axis(axis, len(shape))
    n, rest = shape[ax], shape[:ax] + shape[ax + 1:]
    moved = lax.transpose(x, [ax] + [d for d in range(len(shape)) if d != ax])
    rows = lax.reshape(moved, (n, int(np.prod(rest, dtype=np.int64))))
    size = _size_arg("unique", size, lambda r: _count_true(_row_runs(r, equal_nan)[1]), rows)
    perm, first = _row_runs(rows, equal_nan)
    _, index, inverse, counts, valid = _from_runs(first, perm, size, [])
    m = aval(rows).shape[1]
    d = aval(x).dtype
    if n == 0:
        fill = 0 if fill_value is None else fill_value
        values = lax.full((size, m), 0, d) if size == 0 else lax.broadcast_in_dim(
            lax.convert_element_type(to_array(fill), d), (size, m), ())
    else:
        values = _take_rows(rows, index)
        if size:
            if fill_value is None:
                fill = lax.broadcast_in_dim(lax.slice(values, (0, 0), (1, m)), (size, m),
                                            (0, 1))
            else:
                fill = shapes.broadcast_to(lax.convert_element_type(
                    to_array(fill_value), d), rest)
                fill = lax.broadcast_in_dim(lax.reshape(fill, (m,)), (size, m), (1,))
            values = lax.select(lax.broadcast_in_dim(valid, (size, m), (0,)), values, fill)
    values = lax.reshape(values, (size,) + rest)
    back = list(range(1, ax + 1)) + [0] + list(range(ax + 1, len(shape)))
    return lax.transpose(values, back), index, inverse, counts


def _unique_impl(name, x, size, fill_value, equal_nan: bool = False):
    check_arraylike(name, x)
    x = to_array(x)
    shape = aval(x).shape
    flat = shapes.ravel(x)
    size = _size_arg(name, size, lambda f: _unique_count(f, equal_nan), flat)
    values, index, inverse, counts = _unique_flat(flat, size, equal_nan, fill_value)
    return values, index, lax.reshape(inverse, shape), counts


def unique(ar, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis=None, *, equal_nan: bool = True, size=None,
           fill_value=None, sorted: bool = True):  # noqa: A002
    """The sorted unique elements of ``ar`` (flattened), optionally with the index of each
    one's first occurrence, the inverse indices (``ar``'s shape) and the counts; with
    ``axis``, the unique sub-arrays along that axis (sorted lexicographically; the inverse
    indices are then 1-D, as JAX's). Under jit
    pass ``size``: the result is cut or padded, values with ``fill_value`` (default: the
    smallest unique value), indices with the first index, counts with 0 (as JAX)."""
    if axis is None:
        values, index, inverse, counts = _unique_impl("unique", ar, size, fill_value,
                                                      bool(equal_nan))
    else:
        check_arraylike("unique", ar)
        values, index, inverse, counts = _unique_axis(ar, axis, size, fill_value,
                                                      bool(equal_nan))
    out = [values]
    if return_index:
        out.append(index)
    if return_inverse:
        out.append(inverse)
    if return_counts:
        out.append(counts)
    return out[0] if len(out) == 1 else tuple(out)


UniqueAllResult = collections.namedtuple("UniqueAllResult",
                                         "values indices inverse_indices counts")
UniqueCountsResult = collections.namedtuple("UniqueCountsResult", "values counts")
UniqueInverseResult = collections.namedtuple("UniqueInverseResult", "values inverse_indices")


def unique_all(x, /, *, size=None, fill_value=None):
    """The array API's unique_all: values, first indices, inverse indices and counts. As
    the standard (and JAX) says, every NaN is distinct here (``unique`` merges them)."""
    return UniqueAllResult(*_unique_impl("unique_all", x, size, fill_value))


def unique_counts(x, /, *, size=None, fill_value=None):
    """The array API's unique_counts: values and counts."""
    values, _, _, counts = _unique_impl("unique_counts", x, size, fill_value)
    return UniqueCountsResult(values, counts)


def unique_inverse(x, /, *, size=None, fill_value=None):
    """The array API's unique_inverse: values and inverse indices (``x``'s shape)."""
    values, _, inverse, _ = _unique_impl("unique_inverse", x, size, fill_value)
    return UniqueInverseResult(values, inverse)


def unique_values(x, /, *, size=None, fill_value=None):
    """The array API's unique_values: the sorted unique values."""
    return _unique_impl("unique_values", x, size, fill_value)[0]
