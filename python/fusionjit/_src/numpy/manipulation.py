"""Array manipulation beyond reshape/concatenate: tile, repeat, roll, rot90, triangles and
diagonals, meshgrid, stacking and splitting helpers, delete/insert with static indices.

Where NumPy picks elements by a concrete index list (repeat with per-element counts, pad's
reflections, delete, insert), the list is compressed into runs, each one slice (reversed or
broadcast where the run is), joined by one concatenate: no gather is needed."""

from __future__ import annotations

import builtins
import operator

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.eager import eager_jit
from fusionjit._src.lax import lax
from fusionjit._src.lax.slicing import take_along
from fusionjit._src.numpy import reductions, shapes
from fusionjit._src.numpy.util import (aval, canonical_axis, check_arraylike, fail,
                                       promote_dtypes, shape_arg, to_array)


def _is_value(x) -> bool:
    return isinstance(x, core.Tracer) or core.is_concrete_array(x)


def _static_int_array(x, what: str):
    """``x`` as a NumPy int array if it is known at trace time, else None."""
    if isinstance(x, core.Tracer):
        return None
    arr = np.asarray(x)
    if arr.dtype.kind not in "iub":
        fail(f"{what} must be integers, got {arr.dtype}")
    return arr.astype(np.int64)


# --- taking elements by static or traced indices -------------------------------------

def _runs(idx: np.ndarray):
    """Splits an index list into runs (start index, count, step) of constant step."""
    runs, i, n = [], 0, len(idx)
    while i < n:
        if i + 1 == n:
            runs.append((int(idx[i]), 1, 1))
            break
        step = int(idx[i + 1] - idx[i])
        j = i + 1
        while j + 1 < n and idx[j + 1] - idx[j] == step:
            j += 1
        runs.append((int(idx[i]), j - i + 1, step))
        i = j + 1
    return runs


MAX_STATIC_PIECES = 128


def take_static(x, idx, axis: int):
    """``x`` indexed along ``axis`` by the concrete in-range index list ``idx``."""
    idx = np.asarray(idx, np.int64).reshape(-1)
    shape = aval(x).shape
    if len(idx) == 0:
        out_shape = list(shape)
        out_shape[axis] = 0
        return lax.full(tuple(out_shape), 0, aval(x).dtype)
    if np.array_equal(idx, np.arange(shape[axis])):
        return x
    runs = _runs(idx)
    if len(runs) > MAX_STATIC_PIECES:
        return take_along(x, to_array(idx.astype(np.int32)), axis)
    pieces = []
    for start, count, step in runs:
        if step == 0:
            one = lax.slice_in_dim(x, start, start + 1, 1, axis)
            out_shape = list(shape)
            out_shape[axis] = count
            pieces.append(lax.broadcast_in_dim(one, tuple(out_shape), tuple(range(len(shape)))))
        elif step > 0:
            pieces.append(lax.slice_in_dim(x, start, start + (count - 1) * step + 1, step, axis))
        else:
            lo = start + (count - 1) * step
            pieces.append(lax.rev(lax.slice_in_dim(x, lo, start + 1, -step, axis), (axis,)))
    return lax.concatenate(pieces, axis)


# --- creation ----------------------------------------------------------------------

def empty(shape, dtype=None, device=None):
    """A new array of ``shape`` (zeros: fusionjit arrays are always initialised)."""
    return shapes.zeros(shape, dtype)


def empty_like(prototype, dtype=None, shape=None, device=None):
    """An array like ``prototype`` (zeros)."""
    return shapes.zeros_like(prototype, dtype, shape)


def tri(N, M=None, k: int = 0, dtype=None):
    """Ones at and below the ``k``-th diagonal of an N x M matrix."""
    M = N if M is None else M
    dtype = dt.canonicalize(dtype) if dtype is not None else dt.default_float()
    return lax.convert_element_type(_lower_mask((operator.index(N), operator.index(M)), k),
                                    dtype)


def _lower_mask(shape, k: int):
    """True where column <= row + k, over the last two axes of ``shape``."""
    rows = lax.broadcasted_iota(dt.int32, shape, len(shape) - 2)
    cols = lax.broadcasted_iota(dt.int32, shape, len(shape) - 1)
    return lax.le(cols, lax.add(rows, to_array(np.int32(k))))


def _triangle(name, lower: bool):
    def fn(m, k: int = 0):
        check_arraylike(name, m)
        m = to_array(m)
        shape = aval(m).shape
        if len(shape) < 2:
            fail(f"{name}() needs an array of at least 2 dimensions, got shape {shape}",
                 ValueError)
        k = operator.index(k)
        mask = _lower_mask(shape, k) if lower else lax.bitwise_not(_lower_mask(shape, k - 1))
        return lax.select(mask, m, lax.full(shape, 0, aval(m).dtype))
    fn.__name__ = name
    fn.__doc__ = (f"Zeros {'above' if lower else 'below'} the ``k``-th diagonal of the last "
                  f"two axes.")
    return eager_jit("k")(fn)


tril = _triangle("tril", True)
triu = _triangle("triu", False)


def meshgrid(*xi, copy: bool = True, sparse: bool = False, indexing: str = "xy"):
    """Coordinate arrays from 1-D coordinate vectors (``indexing`` 'xy' or 'ij')."""
    if indexing not in ("xy", "ij"):
        fail(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}", ValueError)
    check_arraylike("meshgrid", *xi)
    arrays = [shapes.ravel(to_array(x)) for x in xi]
    sizes = [aval(a).shape[0] for a in arrays]
    if indexing == "xy" and len(arrays) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, a in enumerate(arrays):
        dim = i if indexing == "ij" or len(arrays) < 2 or i > 1 else 1 - i
        if sparse:
            shape = [1] * len(arrays)
            shape[dim] = sizes[dim]
            out.append(lax.reshape(a, tuple(shape)))
        else:
            out.append(lax.broadcast_in_dim(a, tuple(sizes), (dim,)))
    return out


def indices(dimensions, dtype=None, sparse: bool = False):
    """The index grid of a shape: one array per dimension (stacked unless ``sparse``)."""
    dims = shape_arg(dimensions, "indices")
    dtype = dt.canonicalize(dtype) if dtype is not None else dt.default_int()
    grids = []
    for i, n in enumerate(dims):
        if sparse:
            shape = [1] * len(dims)
            shape[i] = n
            grids.append(lax.broadcasted_iota(dtype, tuple(shape), i))
        else:
            grids.append(lax.broadcasted_iota(dtype, dims, i))
    if sparse:
        return tuple(grids)
    if not grids:
        return lax.full((0,), 0, dtype)
    return lax.concatenate([lax.expand_dims(g, (0,)) for g in grids], 0)


def _index_tuple(arrays):
    return tuple(to_array(a.astype(np.int64).astype(dt.default_int())) for a in arrays)


def tril_indices(n, k: int = 0, m=None):
    """Row and column indices of the lower triangle (computed at trace time)."""
    return _index_tuple(np.tril_indices(n, k, m))


def triu_indices(n, k: int = 0, m=None):
    """Row and column indices of the upper triangle (computed at trace time)."""
    return _index_tuple(np.triu_indices(n, k, m))


def tril_indices_from(arr, k: int = 0):
    shape = aval(to_array(arr)).shape
    if len(shape) != 2:
        fail(f"tril_indices_from needs a 2-D array, got shape {shape}", ValueError)
    return tril_indices(shape[0], k, shape[1])


def triu_indices_from(arr, k: int = 0):
    shape = aval(to_array(arr)).shape
    if len(shape) != 2:
        fail(f"triu_indices_from needs a 2-D array, got shape {shape}", ValueError)
    return triu_indices(shape[0], k, shape[1])


def diag_indices(n, ndim: int = 2):
    return _index_tuple(np.diag_indices(n, ndim))


def diag_indices_from(arr):
    shape = aval(to_array(arr)).shape
    if len(shape) < 2 or len(set(shape)) != 1:
        fail(f"diag_indices_from needs an array with equal dimensions, got {shape}", ValueError)
    return diag_indices(shape[0], len(shape))


# --- diagonals -----------------------------------------------------------------------

def diagonal(a, offset: int = 0, axis1: int = 0, axis2: int = 1):
    """The ``offset`` diagonal of the (axis1, axis2) planes, as a new last axis."""
    check_arraylike("diagonal", a)
    a = to_array(a)
    shape = aval(a).shape
    if len(shape) < 2:
        fail(f"diagonal() needs an array of at least 2 dimensions, got shape {shape}",
             ValueError)
    ax1, ax2 = canonical_axis(axis1, len(shape), "axis1"), canonical_axis(axis2, len(shape),
                                                                          "axis2")
    if ax1 == ax2:
        fail("diagonal(): axis1 and axis2 cannot be the same", ValueError)
    offset = operator.index(offset)
    rest = [i for i in range(len(shape)) if i not in (ax1, ax2)]
    moved = lax.transpose(a, rest + [ax1, ax2])
    n, m = shape[ax1], shape[ax2]
    batch = tuple(shape[i] for i in rest)
    length = builtins.max(0, builtins.min(n, m - offset) if offset >= 0 else
                          builtins.min(n + offset, m))
    if length == 0:
        return lax.full(batch + (0,), 0, aval(a).dtype)
    # The diagonal is a strided slice of the flattened plane: every (m + 1)-th element.
    flat = lax.reshape(moved, batch + (n * m,))
    start = offset if offset >= 0 else -offset * m
    return lax.slice_in_dim(flat, start, start + (length - 1) * (m + 1) + 1, m + 1, len(batch))


def trace(a, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None, out=None):
    """The sum along the ``offset`` diagonal of the (axis1, axis2) planes."""
    if out is not None:
        fail("trace(out=...) is not supported: fusionjit arrays are immutable",
             NotImplementedError)
    return reductions.sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def diag(v, k: int = 0):
    """A 1-D array's square matrix with it on the ``k``-th diagonal, or a 2-D array's
    ``k``-th diagonal."""
    check_arraylike("diag", v)
    v = to_array(v)
    shape = aval(v).shape
    k = operator.index(k)
    if len(shape) == 2:
        return diagonal(v, k)
    if len(shape) != 1:
        fail(f"diag() needs a 1-D or 2-D array, got shape {shape}", ValueError)
    n = shape[0] + builtins.abs(k)
    padded = lax.pad(v, to_array(np.zeros((), aval(v).dtype)), [(0, builtins.abs(k), 0)])
    rows = lax.broadcasted_iota(dt.int32, (n, n), 0)
    cols = lax.broadcasted_iota(dt.int32, (n, n), 1)
    on = lax.eq(lax.sub(cols, rows), to_array(np.int32(k)))
    values = lax.broadcast_in_dim(padded, (n, n), (0,) if k >= 0 else (1,))
    return lax.select(on, values, lax.full((n, n), 0, aval(v).dtype))


def diagflat(v, k: int = 0):
    """``diag`` of the flattened input."""
    return diag(shapes.ravel(to_array(v)), k)


def fill_diagonal(a, val, wrap: bool = False, *, inplace: bool = True):
    """``a`` with its main diagonal (all indices equal; for a tall matrix with ``wrap``,
    restarting every m + 1 rows) set to ``val``, repeated cyclically. As JAX, only
    ``inplace=False`` is supported."""
    if inplace:
        fail("fill_diagonal: fusionjit arrays are immutable; pass inplace=False and use the "
             "result", ValueError)
    a = to_array(a)
    shape = aval(a).shape
    if len(shape) < 2:
        fail("fill_diagonal needs an array of at least 2 dimensions", ValueError)
    if len(shape) > 2 and len(set(shape)) != 1:
        fail(f"fill_diagonal needs equal dimensions for rank > 2, got {shape}", ValueError)
    rows = np.arange(shape[0])
    if len(shape) == 2 and wrap:
        cols = rows % (shape[1] + 1)
    else:
        cols = np.where(rows < shape[1], rows, -1)
    has = cols < shape[1]
    cols = np.where(has, cols, -1)
    # The k-th diagonal element (in row-major order) takes val[k % len(val)]; each row holds
    # at most one, so the values can be chosen per row and broadcast along the row.
    k = (rows * shape[1] + cols) // (shape[1] + 1) if len(shape) == 2 else rows
    flat = shapes.ravel(lax.convert_element_type(to_array(val), aval(a).dtype))
    count = aval(flat).shape[0]
    if count == 0:
        return a
    per_row = take_static(flat, np.where(has, k, 0) % count, 0)
    values = lax.broadcast_in_dim(per_row, shape, (0,))
    on = lax.eq(lax.broadcasted_iota(dt.int32, shape, 1),
                lax.broadcast_in_dim(to_array(cols.astype(np.int32)), shape, (0,)))
    for i in range(2, len(shape)):
        on = lax.bitwise_and(on, lax.eq(lax.broadcasted_iota(dt.int32, shape, 0),
                                        lax.broadcasted_iota(dt.int32, shape, i)))
    return lax.select(on, values, a)


# --- repetition and movement -------------------------------------------------------------

def tile(A, reps):
    """``A`` repeated ``reps`` times along each axis."""
    check_arraylike("tile", A)
    A = to_array(A)
    reps = (operator.index(reps),) if not isinstance(reps, (tuple, list)) else \
        tuple(operator.index(r) for r in reps)
    if any(r < 0 for r in reps):
        fail(f"tile: repetitions must be non-negative, got {reps}", ValueError)
    shape = aval(A).shape
    ndim = builtins.max(len(shape), len(reps))
    shape = (1,) * (ndim - len(shape)) + shape
    reps = (1,) * (ndim - len(reps)) + reps
    A = lax.reshape(A, shape)
    expanded = tuple(v for r, d in zip(reps, shape) for v in (r, d))
    out = lax.broadcast_in_dim(A, expanded, tuple(range(1, 2 * ndim, 2)))
    return lax.reshape(out, tuple(r * d for r, d in zip(reps, shape)))


def repeat(a, repeats, axis=None, *, total_repeat_length=None):
    """Each element repeated ``repeats`` times (an int, or one count per element). With
    traced counts, ``total_repeat_length`` must give the output length (as JAX; the output
    is then truncated, or padded with the last element)."""
    check_arraylike("repeat", a)
    a = to_array(a)
    if axis is None:
        a = shapes.ravel(a)
        axis = 0
    shape = aval(a).shape
    axis = canonical_axis(axis, len(shape))
    n = shape[axis]
    counts = _static_int_array(repeats, "repeat's repeats")
    if counts is not None and counts.ndim == 0:
        r = int(counts)
        if r < 0:
            fail(f"repeat: repeats may not be negative, got {r}", ValueError)
        expanded = shape[:axis + 1] + (r,) + shape[axis + 1:]
        dims = tuple(range(axis + 1)) + tuple(range(axis + 2, len(shape) + 1))
        out = lax.broadcast_in_dim(a, expanded, dims)
        out = lax.reshape(out, shape[:axis] + (n * r,) + shape[axis + 1:])
        return out if total_repeat_length is None else _fit_length(out, total_repeat_length,
                                                                  axis)
    if counts is not None:
        counts = np.broadcast_to(counts.reshape(-1), (n,)) if counts.size == 1 else counts
        if counts.shape != (n,):
            fail(f"repeat: {counts.size} repeats for an axis of length {n}", ValueError)
        if (counts < 0).any():
            fail("repeat: repeats may not be negative", ValueError)
        out = take_static(a, np.repeat(np.arange(n), counts), axis)
        return out if total_repeat_length is None else _fit_length(out, total_repeat_length,
                                                                  axis)
    if total_repeat_length is None:
        fail("repeat: with traced repeats the output length is not known; pass "
             "total_repeat_length=", core_error())
    length = operator.index(total_repeat_length)
    reps = to_array(repeats)
    if aval(reps).shape not in ((), (1,), (n,)):
        fail(f"repeat: repeats of shape {aval(reps).shape} for an axis of length {n}", ValueError)
    reps = lax.broadcast_in_dim(shapes.ravel(reps), (n,), (0,)) if aval(reps).size == 1 else reps
    from fusionjit._src.lax import scans
    ends = scans.cumsum(lax.convert_element_type(reps, dt.int32))
    # Output position k holds element #{i : ends[i] <= k}, clamped to the last.
    pos = lax.broadcasted_iota(dt.int32, (length, n), 0)
    src = lax.reduce_sum(lax.convert_element_type(
        lax.le(lax.broadcast_in_dim(ends, (length, n), (1,)), pos), dt.int32), (1,))
    src = lax.min(src, to_array(np.int32(n - 1)))
    return take_along(a, src, axis)


def core_error():
    from fusionjit._src import errors
    return errors.ConcretizationTypeError


def _fit_length(x, length, axis):
    length = operator.index(length)
    n = aval(x).shape[axis]
    if length <= n:
        return lax.slice_in_dim(x, 0, length, 1, axis)
    idx = np.concatenate([np.arange(n), np.full(length - n, n - 1)])
    return take_static(x, idx, axis)


@eager_jit("axis")
def roll(a, shift, axis=None):
    """Elements shifted by ``shift`` along ``axis`` (all axes of the flat array if None),
    wrapping around; ``shift`` may be traced."""
    check_arraylike("roll", a)
    a = to_array(a)
    if axis is None:
        return lax.reshape(roll(shapes.ravel(a), shift, 0), aval(a).shape)
    shape = aval(a).shape
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    if len(axes) == 1 and len(shifts) > 1:
        axes = axes * len(shifts)
    if len(axes) != len(shifts):
        fail(f"roll: {len(shifts)} shifts for {len(axes)} axes", ValueError)
    for ax, s in zip(axes, shifts):
        ax = canonical_axis(ax, len(shape))
        a = _roll_one(a, s, ax)
    return a


def _roll_one(a, shift, axis):
    n = aval(a).shape[axis]
    if n == 0:
        return a
    if not isinstance(shift, core.Tracer) and not (core.is_concrete_array(shift)
                                                   and aval(shift).shape != ()):
        s = operator.index(shift) % n
        if s == 0:
            return a
        return lax.concatenate([lax.slice_in_dim(a, n - s, n, 1, axis),
                                lax.slice_in_dim(a, 0, n - s, 1, axis)], axis)
    s = to_array(shift)
    if aval(s).shape != () or not dt.is_int(aval(s).dtype):
        fail("roll: a traced shift must be an integer scalar")
    s = lax.convert_element_type(s, dt.int32)
    n_arr = to_array(np.int32(n))
    r = lax.rem(s, n_arr)
    r = lax.select(lax.lt(r, to_array(np.int32(0))), lax.add(r, n_arr), r)
    twice = lax.concatenate([a, a], axis)
    starts = [to_array(np.int32(0))] * aval(a).ndim
    starts[axis] = lax.sub(n_arr, r)
    return lax.dynamic_slice(twice, starts, aval(a).shape, allow_negative_indices=False)


def rollaxis(a, axis: int, start: int = 0):
    """Moves ``axis`` to before position ``start`` (use moveaxis in new code)."""
    a = to_array(a)
    ndim = aval(a).ndim
    axis = canonical_axis(axis, ndim)
    start = operator.index(start)
    if not -ndim <= start <= ndim:
        fail(f"rollaxis: start {start} is out of bounds for rank {ndim}", ValueError)
    start %= ndim + 1
    if axis < start:
        start -= 1
    return shapes.moveaxis(a, axis, start)


def rot90(m, k: int = 1, axes=(0, 1)):
    """Rotates the plane of ``axes`` by 90 degrees ``k`` times (from the first axis
    towards the second)."""
    check_arraylike("rot90", m)
    m = to_array(m)
    ndim = aval(m).ndim
    if len(axes) != 2:
        fail("rot90: axes must be two axes", ValueError)
    a0, a1 = canonical_axis(axes[0], ndim), canonical_axis(axes[1], ndim)
    if a0 == a1:
        fail("rot90: the axes must be different", ValueError)
    k = operator.index(k) % 4
    if k == 0:
        return m
    if k == 2:
        return lax.rev(m, (a0, a1))
    perm = list(range(ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return lax.transpose(lax.rev(m, (a1,)), perm)
    return lax.rev(lax.transpose(m, perm), (a1,))


def fliplr(m):
    """Reverses the second axis."""
    m = to_array(m)
    if aval(m).ndim < 2:
        fail("fliplr needs an array of at least 2 dimensions", ValueError)
    return lax.rev(m, (1,))


def flipud(m):
    """Reverses the first axis."""
    m = to_array(m)
    if aval(m).ndim < 1:
        fail("flipud needs an array of at least 1 dimension", ValueError)
    return lax.rev(m, (0,))


def resize(a, new_shape):
    """``a`` flattened, repeated as often as needed, cut to ``new_shape``."""
    a = shapes.ravel(to_array(a))
    new_shape = shape_arg(new_shape, "resize")
    size = int(np.prod(new_shape, dtype=np.int64))
    n = aval(a).shape[0]
    if size and not n:
        fail("resize: cannot fill a non-empty shape from an empty array", ValueError)
    if size:
        a = lax.slice(tile(a, -(-size // n)), (0,), (size,))
    else:
        a = lax.full((0,), 0, aval(a).dtype)
    return lax.reshape(a, new_shape)


# --- stacking and splitting -----------------------------------------------------------

def _atleast(name, ndim, where):
    def fn(*arys):
        out = []
        for x in arys:
            check_arraylike(name, x)
            x = to_array(x)
            shape = aval(x).shape
            if len(shape) < ndim:
                new = list(shape)
                for pos in where[len(shape)]:
                    new.insert(pos, 1)
                x = lax.reshape(x, tuple(new))
            out.append(x)
        return out[0] if len(out) == 1 else out
    fn.__name__ = name
    fn.__doc__ = f"Each input viewed with at least {ndim} dimensions."
    return fn


atleast_1d = _atleast("atleast_1d", 1, {0: [0]})
atleast_2d = _atleast("atleast_2d", 2, {0: [0, 0], 1: [0]})
atleast_3d = _atleast("atleast_3d", 3, {0: [0, 0, 0], 1: [0, 2], 2: [2]})


def _as_list(tup, name):
    if _is_value(tup) or isinstance(tup, np.ndarray):
        return [tup[i] for i in range(len(tup))]
    if not isinstance(tup, (list, tuple)) or not tup:
        fail(f"{name}() needs a non-empty sequence of arrays", ValueError)
    return list(tup)


def _listify(x):
    return x if isinstance(x, list) else [x]


def hstack(tup, dtype=None):
    """Stacks along the second axis (the first for 1-D inputs)."""
    arrays = _listify(atleast_1d(*_as_list(tup, "hstack")))
    axis = 0 if aval(arrays[0]).ndim == 1 else 1
    return shapes.concatenate(arrays, axis, dtype)


def vstack(tup, dtype=None):
    """Stacks along the first axis (1-D inputs become rows)."""
    return shapes.concatenate(_listify(atleast_2d(*_as_list(tup, "vstack"))), 0, dtype)


def dstack(tup, dtype=None):
    """Stacks along the third axis."""
    return shapes.concatenate(_listify(atleast_3d(*_as_list(tup, "dstack"))), 2, dtype)


def column_stack(tup):
    """1-D inputs become columns; stacked along the second axis."""
    arrays = []
    for x in _as_list(tup, "column_stack"):
        x = to_array(x)
        arrays.append(lax.reshape(x, aval(x).shape + (1,)) if aval(x).ndim < 2 else x)
    return shapes.concatenate(arrays, 1)


def array_split(ary, indices_or_sections, axis: int = 0):
    """Like split, but ``n`` sections need not divide the axis: the first ones are longer."""
    ary = to_array(ary)
    if isinstance(indices_or_sections, (int, np.integer)):
        n = aval(ary).shape[canonical_axis(axis, aval(ary).ndim)]
        sections = int(indices_or_sections)
        if sections <= 0:
            fail("array_split: the number of sections must be positive", ValueError)
        size, extra = divmod(n, sections)
        bounds = np.cumsum([0] + [size + 1] * extra + [size] * (sections - extra))
        return shapes.split(ary, [int(b) for b in bounds[1:-1]], axis)
    return shapes.split(ary, indices_or_sections, axis)


def _split_along(name, axis, min_ndim):
    def fn(ary, indices_or_sections):
        ary = to_array(ary)
        if aval(ary).ndim < min_ndim:
            fail(f"{name}() needs an array of at least {min_ndim} dimensions", ValueError)
        ax = 0 if name == "hsplit" and aval(ary).ndim == 1 else axis
        return shapes.split(ary, indices_or_sections, ax)
    fn.__name__ = name
    return fn


hsplit = _split_along("hsplit", 1, 1)
vsplit = _split_along("vsplit", 0, 2)
dsplit = _split_along("dsplit", 2, 3)


def unstack(x, /, *, axis: int = 0):
    """The slices of ``x`` along ``axis``, as a tuple."""
    check_arraylike("unstack", x)
    x = to_array(x)
    shape = aval(x).shape
    if not shape:
        fail("unstack() needs an array of at least 1 dimension", ValueError)
    ax = canonical_axis(axis, len(shape))
    return tuple(lax.squeeze(lax.slice_in_dim(x, i, i + 1, 1, ax), (ax,))
                 for i in range(shape[ax]))


def concat(arrays, /, *, axis=0):
    """The array API's name for ``concatenate``."""
    return shapes.concatenate(arrays, axis)


def permute_dims(a, /, axes):
    """The array API's name for ``transpose`` (``axes`` required)."""
    return shapes.transpose(a, axes)


def append(arr, values, axis=None):
    """``values`` appended to ``arr`` (both flattened if ``axis`` is None)."""
    if axis is None:
        return shapes.concatenate([shapes.ravel(to_array(arr)), shapes.ravel(to_array(values))])
    return shapes.concatenate([arr, values], axis)


def _static_positions(obj, n, name):
    if isinstance(obj, slice):
        return np.arange(n)[obj]
    pos = _static_int_array(obj, f"{name}'s obj")
    if pos is None:
        fail(f"{name}() with traced indices needs a gather (not supported yet); pass concrete "
             f"indices", NotImplementedError)
    return pos


def delete(arr, obj, axis=None, *, assume_unique_indices: bool = False):
    """``arr`` without the entries ``obj`` (int, slice or concrete indices) along ``axis``."""
    check_arraylike("delete", arr)
    arr = to_array(arr)
    if axis is None:
        arr, axis = shapes.ravel(arr), 0
    axis = canonical_axis(axis, aval(arr).ndim)
    n = aval(arr).shape[axis]
    pos = _static_positions(obj, n, "delete").reshape(-1)
    if ((pos < -n) | (pos >= n)).any():
        fail(f"delete: index out of bounds for axis {axis} with size {n}", IndexError)
    keep = np.ones(n, bool)
    keep[pos % n if n else pos] = False
    return take_static(arr, np.flatnonzero(keep), axis)


def insert(arr, obj, values, axis=None):
    """``values`` inserted before the concrete index (or indices) ``obj`` along ``axis``."""
    check_arraylike("insert", arr, values)
    arr, values = to_array(arr), to_array(values)
    if axis is None:
        arr, axis = shapes.ravel(arr), 0
    shape = aval(arr).shape
    axis = canonical_axis(axis, len(shape))
    n = shape[axis]
    pos = _static_positions(obj, n, "insert")
    values = lax.convert_element_type(values, aval(arr).dtype, aval(arr).weak_type)
    if pos.ndim == 0:
        v = values
        while aval(v).ndim < len(shape):
            v = lax.expand_dims(v, (0,))
        v = shapes.moveaxis(v, 0, axis) if aval(values).ndim >= 1 and len(shape) > 1 else v
        count = aval(v).shape[axis]
    else:
        count = len(pos)
        v = values
    block_shape = list(shape)
    block_shape[axis] = count
    from fusionjit._src.numpy.util import broadcast_to_shape
    block = broadcast_to_shape(v, tuple(block_shape))
    index_map = np.insert(np.arange(n), pos, np.arange(n, n + count))
    return take_static(lax.concatenate([arr, block], axis), index_map, axis)


# --- comparisons of whole arrays --------------------------------------------------------

def array_equal(a1, a2, equal_nan: bool = False):
    """Whether the arrays have the same shape and elements (a boolean array scalar)."""
    a1, a2 = to_array(a1), to_array(a2)
    if aval(a1).shape != aval(a2).shape:
        return to_array(False)
    a1, a2 = promote_dtypes(a1, a2)
    same = lax.eq(a1, a2)
    if equal_nan and dt.is_float(aval(a1).dtype):
        same = lax.bitwise_or(same, lax.bitwise_and(lax.ne(a1, a1), lax.ne(a2, a2)))
    return reductions.all(same)


def array_equiv(a1, a2):
    """Whether the arrays broadcast to each other and are equal elementwise."""
    from fusionjit._src.numpy.util import broadcast_shapes
    a1, a2 = to_array(a1), to_array(a2)
    try:
        broadcast_shapes(aval(a1).shape, aval(a2).shape)
    except ValueError:
        return to_array(False)
    from fusionjit._src.numpy.ufuncs import equal
    return reductions.all(equal(a1, a2))


def broadcast_shapes(*shapes_):
    """The shape the given shapes broadcast to."""
    from fusionjit._src.numpy.util import broadcast_shapes as bs
    return bs(*[shape_arg(s, "broadcast_shapes") for s in shapes_])


def copy(a, order=None):
    """An array with the elements of ``a`` (arrays are immutable: no copy is needed)."""
    check_arraylike("copy", a)
    return to_array(a)


def select(condlist, choicelist, default=0):
    """The element of the first choice whose condition holds, else ``default``."""
    if len(condlist) != len(choicelist):
        fail(f"select: {len(condlist)} conditions for {len(choicelist)} choices", ValueError)
    if not condlist:
        fail("select needs at least one condition", ValueError)
    from fusionjit._src.numpy.ufuncs import where
    out = default
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        cond = to_array(cond)
        if not dt.is_bool(aval(cond).dtype):
            fail(f"select: conditions must be boolean arrays, got {aval(cond).dtype}")
        out = where(cond, choice, out)
    return out


def piecewise(x, condlist, funclist, *args, **kw):
    """Applies ``funclist[i]`` where ``condlist[i]`` holds (an extra last function, or
    value, where none does); functions are applied to all of ``x`` and selected."""
    x = to_array(x)
    if _is_value(condlist) or isinstance(condlist, np.ndarray):
        condlist = [condlist] if aval(to_array(condlist)).ndim <= aval(x).ndim else \
            list(condlist)
    condlist = [to_array(c) for c in condlist]
    if len(funclist) not in (len(condlist), len(condlist) + 1):
        fail(f"piecewise: {len(funclist)} functions for {len(condlist)} conditions", ValueError)
    if len(funclist) == len(condlist) + 1:
        others = reductions.any(lax.concatenate(
            [lax.expand_dims(c, (0,)) for c in condlist], 0), axis=0)
        condlist = condlist + [lax.bitwise_not(others)]
    from fusionjit._src.numpy.ufuncs import where
    out = lax.full(aval(x).shape, 0, aval(x).dtype)
    for cond, fn in zip(condlist, funclist):
        value = fn(x, *args, **kw) if callable(fn) else fn
        value = lax.convert_element_type(to_array(value), aval(x).dtype)
        out = where(cond, value, out)
    return out


def unravel_index(indices, shape):
    """Coordinates of flat ``indices`` in ``shape``; as JAX, negative indices count from the
    end and out-of-range ones are clamped."""
    shape = shape_arg(shape, "unravel_index")
    idx = to_array(indices)
    if not dt.is_int(aval(idx).dtype):
        fail(f"unravel_index needs integer indices, got {aval(idx).dtype}")
    size = int(np.prod(shape, dtype=np.int64))
    d = aval(idx).dtype
    idx = lax.select(lax.lt(idx, to_array(0, d)), lax.add(idx, to_array(size, d)), idx) \
        if dt.is_signed(d) else idx
    idx = lax.clamp(to_array(0, d), idx, to_array(builtins.max(size - 1, 0), d))
    out = []
    for dim in reversed(shape):
        out.append(lax.rem(idx, to_array(builtins.max(dim, 1), d)))
        idx = lax.div(idx, to_array(builtins.max(dim, 1), d))
    return tuple(reversed(out))


def ravel_multi_index(multi_index, dims, mode: str = "raise", order: str = "C"):
    """Flat indices of coordinate arrays in ``dims`` (``mode`` 'clip' or 'wrap'; 'raise'
    checks concrete indices)."""
    dims = shape_arg(dims, "ravel_multi_index")
    if order != "C":
        fail("ravel_multi_index supports only order='C'", NotImplementedError)
    if len(multi_index) != len(dims):
        fail(f"ravel_multi_index: {len(multi_index)} index arrays for {len(dims)} dimensions",
             ValueError)
    if mode not in ("raise", "clip", "wrap"):
        fail(f"ravel_multi_index: unknown mode {mode!r}", ValueError)
    from fusionjit._src.numpy.util import promote_shapes
    arrays = promote_shapes(*promote_dtypes(*[to_array(i) for i in multi_index]))
    out = None
    for i, dim in zip(arrays, dims):
        d = aval(i).dtype
        if not dt.is_int(d):
            fail(f"ravel_multi_index needs integer indices, got {d}")
        if mode == "raise":
            if any(isinstance(a, core.Tracer) for a in arrays):
                fail("ravel_multi_index: mode='raise' needs concrete indices; use 'clip' or "
                     "'wrap' under jit", core_error())
            v = np.asarray(i)
            if v.size and (v.min() < 0 or v.max() >= dim):
                fail("ravel_multi_index: invalid entry in coordinates array", ValueError)
        elif mode == "clip":
            i = lax.clamp(to_array(0, d), i, to_array(dim - 1, d))
        else:
            r = lax.rem(i, to_array(dim, d))
            i = lax.select(lax.lt(r, to_array(0, d)), lax.add(r, to_array(dim, d)), r) \
                if dt.is_signed(d) else r
        out = i if out is None else lax.add(lax.mul(out, to_array(dim, d)), i)
    return out
