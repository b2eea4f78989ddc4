"""Gathers with JAX's semantics: take, take_along_axis and NumPy advanced indexing (integer
arrays, lists, boolean masks outside jit, mixed with basic indices).

Concrete indices become static slices (runs of constant step, one concatenate); traced
indices one IR gather along the axis (``lax.slicing.take_along``): O(indices) work, fused
into its consumers as any elementwise read. Out-of-bounds modes as JAX:
indexing clamps ('clip' / 'promise_in_bounds'), ``take`` fills ('fill': NaN, the minimum
signed or maximum unsigned integer, True), 'wrap' wraps."""

from __future__ import annotations

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src import errors
from fusionjit._src.eager import eager_jit
from fusionjit._src.lax import lax
from fusionjit._src.numpy import shapes
from fusionjit._src.lax.slicing import default_fill, take_along
from fusionjit._src.numpy.manipulation import take_static
from fusionjit._src.numpy.util import aval, canonical_axis, check_arraylike, fail, to_array

MODES = ("fill", "clip", "wrap", "promise_in_bounds", "drop")


def _is_value(x) -> bool:
    return isinstance(x, core.Tracer) or core.is_concrete_array(x)


def _check_mode(name, mode):
    if mode == "raise":
        fail(f"{name}: mode='raise' is not supported (as in JAX: indices are not checked at "
             f"run time); use 'fill', 'clip' or 'wrap'", NotImplementedError)
    if mode not in MODES:
        fail(f"{name}: unknown mode {mode!r}; use one of {', '.join(MODES)}", ValueError)


def _index_array(idx, name):
    """An integer index as a NumPy array (concrete) or a tracer."""
    if isinstance(idx, core.Tracer):
        if not dt.is_int(aval(idx).dtype):
            fail(f"{name}: indices must be integers, got {aval(idx).dtype}", IndexError)
        return idx
    arr = np.asarray(idx)
    if arr.dtype.kind not in "iu":
        if arr.size == 0:
            return arr.astype(np.int64)
        fail(f"{name}: indices must be integers, got {arr.dtype}", IndexError)
    return arr.astype(np.int64)


def _take_axis(x, idx, axis: int, mode: str, fill_value, normalize: bool = True):
    """``x`` indexed along ``axis`` by the integer array ``idx`` (any shape); negative
    indices count from the end if ``normalize``."""
    n = aval(x).shape[axis]
    shape = aval(x).shape
    d = aval(x).dtype
    idx_shape = aval(idx).shape if isinstance(idx, core.Tracer) else idx.shape
    out_shape = shape[:axis] + tuple(idx_shape) + shape[axis + 1:]
    if n == 0:
        if mode in ("clip", "wrap", "promise_in_bounds") and int(np.prod(idx_shape)):
            fail("cannot index into an empty axis", IndexError)
        fv = default_fill(d) if fill_value is None else fill_value
        return lax.full(out_shape, fv, d)
    if isinstance(idx, core.Tracer):
        flat = lax.reshape(idx, (aval(idx).size,))
        it = aval(flat).dtype
        if dt.is_signed(it) and normalize:
            neg = lax.lt(flat, to_array(0, it))
            flat = lax.select(neg, lax.add(flat, to_array(n, it)), flat)
        if mode == "wrap":
            flat = lax.rem(flat, to_array(n, it))
            if dt.is_signed(it):
                flat = lax.select(lax.lt(flat, to_array(0, it)), lax.add(flat, to_array(n, it)),
                                  flat)
        inside = lax.bitwise_and(lax.ge(flat, to_array(0, it)), lax.lt(flat, to_array(n, it))) \
            if dt.is_signed(it) else lax.lt(flat, to_array(n, it))
        clipped = lax.clamp(to_array(0, it), flat, to_array(n - 1, it)) if dt.is_signed(it) \
            else lax.min(flat, to_array(n - 1, it))
        out = take_along(x, clipped, axis)
        if mode in ("fill", "drop"):
            fv = default_fill(d) if fill_value is None else fill_value
            mask_shape = aval(out).shape
            keep = lax.broadcast_in_dim(inside, mask_shape, (axis,))
            out = lax.select(keep, out, lax.full(mask_shape, fv, d))
        return lax.reshape(out, out_shape)
    flat = idx.reshape(-1)
    if normalize:
        flat = np.where(flat < 0, flat + n, flat)
    if mode == "wrap":
        flat = flat % n
    inside = (flat >= 0) & (flat < n)
    out = take_static(x, np.clip(flat, 0, n - 1), axis)
    if mode in ("fill", "drop") and not inside.all():
        fv = default_fill(d) if fill_value is None else fill_value
        keep = lax.broadcast_in_dim(to_array(inside), aval(out).shape, (axis,))
        out = lax.select(keep, out, lax.full(aval(out).shape, fv, d))
    return lax.reshape(out, out_shape)


def take(a, indices, axis=None, out=None, mode=None, unique_indices: bool = False,
         indices_are_sorted: bool = False, fill_value=None):
    """Elements of ``a`` at ``indices`` along ``axis`` (of the flattened ``a`` if None).
    Out-of-range indices follow ``mode``, as ``jnp.take``: 'fill' (the default; negative
    indices count from the end, others give ``fill_value``), 'clip' (clamped, negative ones
    to 0), 'wrap' (modulo the length)."""
    check_arraylike("take", a)
    if out is not None:
        fail("take(out=...) is not supported: fusionjit arrays are immutable",
             NotImplementedError)
    mode = "fill" if mode is None else mode
    _check_mode("take", mode)
    a = to_array(a)
    if axis is None:
        a, axis = shapes.ravel(a), 0
    axis = canonical_axis(axis, aval(a).ndim)
    if aval(a).ndim == 0:
        fail("take: a 0-d array has no axis to take along", ValueError)
    return _take_axis(a, _index_array(indices, "take"), axis, mode, fill_value,
                      normalize=mode != "clip")


@eager_jit("axis", "mode")
def take_along_axis(arr, indices, axis=-1, mode=None, fill_value=None):
    """``arr`` indexed along ``axis`` by ``indices`` of the same rank, broadcast against
    ``arr`` in the other dimensions (as ``jnp.take_along_axis``; default mode 'fill')."""
    check_arraylike("take_along_axis", arr)
    mode = "fill" if mode is None else mode
    _check_mode("take_along_axis", mode)
    arr = to_array(arr)
    if axis is None:
        arr, axis = shapes.ravel(arr), 0
    shape = aval(arr).shape
    idx = _index_array(indices, "take_along_axis")
    idx_shape = tuple(aval(idx).shape if isinstance(idx, core.Tracer) else idx.shape)
    if len(idx_shape) != len(shape):
        fail(f"take_along_axis: indices and arr must have the same number of dimensions; "
             f"{len(idx_shape)} vs {len(shape)}", ValueError)
    axis = canonical_axis(axis, len(shape))
    from fusionjit._src.numpy.util import broadcast_shapes, broadcast_to_shape
    other = broadcast_shapes(tuple(1 if i == axis else d for i, d in enumerate(shape)),
                             tuple(1 if i == axis else d for i, d in enumerate(idx_shape)))
    full_idx = tuple(idx_shape[axis] if i == axis else d for i, d in enumerate(other))
    full_arr = tuple(shape[axis] if i == axis else d for i, d in enumerate(other))
    arr = broadcast_to_shape(arr, full_arr)
    # Each index row picks along ``axis`` within its own position of the other dimensions:
    # fold those into the axis (position p of row r -> r * n + p) and take once.
    n = full_arr[axis]
    rows = int(np.prod([d for i, d in enumerate(other) if i != axis], dtype=np.int64))
    moved_arr = lax.reshape(shapes.moveaxis(arr, axis, -1), (rows * n,))
    if isinstance(idx, core.Tracer):
        idx = broadcast_to_shape(idx, full_idx)
        it = dt.int64 if aval(idx).dtype.itemsize == 8 else dt.int32
        moved_idx = lax.convert_element_type(shapes.moveaxis(idx, axis, -1), it)
        m = aval(moved_idx).shape[-1]
        moved_idx = lax.reshape(moved_idx, (rows, m))
        moved_idx = lax.select(lax.lt(moved_idx, to_array(0, it)),
                               lax.add(moved_idx, to_array(n, it)), moved_idx)
        if mode == "wrap" and n:
            moved_idx = lax.rem(moved_idx, to_array(n, it))
            moved_idx = lax.select(lax.lt(moved_idx, to_array(0, it)),
                                   lax.add(moved_idx, to_array(n, it)), moved_idx)
        inside = lax.bitwise_and(lax.ge(moved_idx, to_array(0, it)),
                                 lax.lt(moved_idx, to_array(n, it)))
        clipped = lax.clamp(to_array(0, it), moved_idx, to_array(max(n - 1, 0), it))
        base = lax.mul(lax.broadcasted_iota(it, (rows, m), 0), to_array(n, it))
        flat = lax.reshape(lax.add(clipped, base), (rows * m,))
        picked = lax.reshape(_take_axis(moved_arr, flat, 0, "clip", None), (rows, m))
        if mode in ("fill", "drop"):
            d = aval(picked).dtype
            fv = default_fill(d) if fill_value is None else fill_value
            picked = lax.select(inside, picked, lax.full((rows, m), fv, d))
    else:
        idx = np.broadcast_to(idx, full_idx)
        moved_idx = np.moveaxis(idx, axis, -1).reshape(rows, -1)
        m = moved_idx.shape[-1]
        moved_idx = np.where(moved_idx < 0, moved_idx + n, moved_idx)
        if mode == "wrap" and n:
            moved_idx = moved_idx % n
        inside = (moved_idx >= 0) & (moved_idx < n)
        flat = (np.clip(moved_idx, 0, max(n - 1, 0)) + np.arange(rows)[:, None] * n).reshape(-1)
        picked = lax.reshape(_take_axis(moved_arr, flat, 0, "clip", None), (rows, m))
        if mode in ("fill", "drop") and not inside.all():
            d = aval(picked).dtype
            fv = default_fill(d) if fill_value is None else fill_value
            picked = lax.select(to_array(inside), picked, lax.full((rows, m), fv, d))
    moved_shape = tuple(d for i, d in enumerate(other) if i != axis) + (full_idx[axis],)
    return shapes.moveaxis(lax.reshape(picked, moved_shape), -1, axis)


# --- advanced indexing ----------------------------------------------------------------

def is_advanced(i) -> bool:
    """Whether ``i`` (one entry of an index tuple) is an array, list or tuple index."""
    if isinstance(i, (list, tuple, np.ndarray)):
        return True
    if _is_value(i):
        return aval(i).ndim > 0 or dt.is_bool(aval(i).dtype)
    return False


def _expand_bool(i, name):
    """A boolean mask as one integer index array per dimension it covers."""
    if isinstance(i, core.Tracer):
        fail(f"{name}: a boolean mask index needs concrete values: the result's shape "
             f"depends on them, which is not known inside {i._trace.name} (the mask is traced)."
             f" Use fusionjit.numpy.where("
             f"mask, x, 0) or nonzero(mask, size=...) instead, as in JAX",
             errors.NonConcreteBooleanIndexError)
    return [a.astype(np.int64) for a in np.nonzero(np.asarray(i))]


def integer_index_error(dtype, name):
    fail(f"{name}: arrays used as indices must be of integer (or boolean) type, got "
         f"{np.dtype(dtype).name}", IndexError)


def _bool_mask_shape(i):
    """The shape of a boolean mask index, or None if ``i`` is not one."""
    if isinstance(i, (list, tuple)):
        i = np.asarray(i)
        if i.dtype == object:
            return None
    if isinstance(i, np.ndarray):
        return i.shape if i.dtype == np.bool_ else None
    if _is_value(i) and dt.is_bool(aval(i).dtype):
        return tuple(aval(i).shape)
    return None


def _check_mask_shapes(x_shape, index: tuple, name: str):
    """A boolean mask must have the shape of the dimensions it indexes, as in NumPy (a
    shorter one would pick elements by position from the mask's true entries alone)."""
    masks = [_bool_mask_shape(i) for i in index]
    if not any(m for m in masks):
        return
    used = [0 if i is None or i is Ellipsis else len(m) if m is not None else 1
            for i, m in zip(index, masks)]
    if sum(used) > len(x_shape):
        return  # too many indices: reported by normalize_index
    ellipsis = next((k for k, i in enumerate(index) if i is Ellipsis), None)
    for k, m in enumerate(masks):
        if not m:
            continue
        start = sum(used[:k]) if ellipsis is None or k < ellipsis else len(x_shape) - sum(used[k:])
        covered = tuple(x_shape[start:start + len(m)])
        if covered != tuple(m):
            fail(f"{name}: boolean index did not match shape of indexed array in index {k}: "
                 f"got {tuple(m)}, expected {covered}", IndexError)


def normalize_index(x_shape, index, name="indexing"):
    """The index as a list of entries (None, slice, or an advanced index: a NumPy int array
    or a tracer), Ellipsis expanded and boolean masks turned into integer arrays; integers
    become 0-d arrays when the index has advanced entries (NumPy's rule)."""
    if not isinstance(index, tuple):
        index = (index,)
    _check_mask_shapes(x_shape, index, name)
    entries = []
    for i in index:
        if isinstance(i, (list, tuple)):  # a sequence inside the index: an array (NumPy)
            i = np.asarray(i)
            if i.dtype == object:
                fail(f"{name}: a ragged list is not a valid index", IndexError)
        if isinstance(i, np.ndarray) and i.dtype == np.bool_ or (
                _is_value(i) and dt.is_bool(aval(i).dtype)):
            if not isinstance(i, np.ndarray) and aval(i).ndim == 0:
                fail(f"{name}: a scalar boolean index is not supported", IndexError)
            entries.extend(_expand_bool(i, name) if not core.is_concrete_array(i)
                           else _expand_bool(np.asarray(i), name))
            continue
        if core.is_concrete_array(i):
            i = np.asarray(i) if aval(i).ndim else i
        if isinstance(i, np.ndarray) and i.dtype.kind not in "iu":
            if i.size == 0:
                i = i.astype(np.int64)
            else:
                integer_index_error(i.dtype, name)
        elif _is_value(i) and not dt.is_int(aval(i).dtype):  # traced: it would be truncated
            integer_index_error(aval(i).dtype, name)
        entries.append(i)
    has_adv = any(is_advanced(e) for e in entries)
    n_ellipsis = sum(1 for e in entries if e is Ellipsis)
    if n_ellipsis > 1:
        fail("an index can only have a single ellipsis ('...')", IndexError)
    consumed = sum(1 for e in entries if e is not None and e is not Ellipsis)
    if consumed > len(x_shape):
        fail(f"too many indices for array: array is {len(x_shape)}-dimensional, but "
             f"{consumed} were indexed", IndexError)
    if n_ellipsis:
        pos = entries.index(Ellipsis)
        entries[pos:pos + 1] = [slice(None)] * (len(x_shape) - consumed)
    else:
        entries += [slice(None)] * (len(x_shape) - consumed)
    if has_adv:
        entries = [e if e is None or isinstance(e, slice) or is_advanced(e) else
                   (e if isinstance(e, core.Tracer) else np.asarray(int(e), np.int64))
                   for e in entries]
        entries = [np.asarray(e) if isinstance(e, np.ndarray) else e for e in entries]
    return entries


def _adv(e) -> bool:
    return e is not None and not isinstance(e, slice)


def _integers_as_arrays(x_shape, entries: list) -> tuple[list, bool]:
    """Entries with the integers (Python's, NumPy's, concrete 0-d arrays) made 0-d index
    arrays, so that out-of-bounds ones follow the gather's mode as in JAX's
    ``.at[].get``; or, with True, made Python ints when every integer is in bounds and
    nothing else is advanced (a basic index: slices)."""
    ints, dim = {}, 0
    for k, e in enumerate(entries):
        if e is None:
            continue
        if not isinstance(e, (slice, core.Tracer, np.ndarray)):
            ints[k] = (int(np.asarray(e)), x_shape[dim])
        elif isinstance(e, np.ndarray) and e.ndim == 0:
            ints[k] = (int(e), x_shape[dim])
        dim += 1
    basic = all(e is None or isinstance(e, slice) or k in ints for k, e in enumerate(entries))
    if basic and all(-size <= v < size for v, size in ints.values()):
        return [ints[k][0] if k in ints else e for k, e in enumerate(entries)], True
    return [np.asarray(ints[k][0], np.int64) if k in ints else e
            for k, e in enumerate(entries)], False


def advanced_getitem(x, index, mode: str = "clip", fill_value=None):
    """``x[index]`` for an index with array entries, NumPy's rules for where the indexed
    dimensions go; out-of-bounds indices follow ``mode``. 'promise_in_bounds' (``x[idx]``'s,
    as JAX's) clamps them as 'clip' does, but sends no derivative back through them (JAX's
    scatter-add drops them; 'clip' sends it to the clamped element)."""
    from fusionjit._src.numpy.indexing import getitem
    x = to_array(x)
    entries, basic = _integers_as_arrays(aval(x).shape, normalize_index(aval(x).shape, index))
    if basic:
        return getitem(x, tuple(entries))
    y = getitem(x, tuple(slice(None) if _adv(e) else e for e in entries))
    y_shape = aval(y).shape
    adv_dims = [d for d, e in enumerate(entries) if _adv(e)]
    arrays = [entries[d] for d in adv_dims]
    traced = any(isinstance(a, core.Tracer) for a in arrays)
    b_shape = np.broadcast_shapes(*[tuple(aval(a).shape) if isinstance(a, core.Tracer)
                                    else a.shape for a in arrays])
    sizes = [y_shape[d] for d in adv_dims]
    rest = [d for d in range(len(y_shape)) if d not in adv_dims]
    moved = lax.transpose(y, adv_dims + rest)
    total = int(np.prod(sizes, dtype=np.int64))
    folded = lax.reshape(moved, (total,) + tuple(y_shape[d] for d in rest))
    if traced:
        flat, inside = _traced_flat_index(arrays, sizes, b_shape, mode)
    else:
        flat, inside = _static_flat_index(arrays, sizes, b_shape, mode)
    out = _take_axis(folded, flat, 0, "clip", None)
    if mode == "promise_in_bounds" and dt.is_float(aval(out).dtype) and (
            traced or not np.all(inside)):
        keep = lax.broadcast_in_dim(to_array(inside) if not traced else inside, aval(out).shape,
                                    tuple(range(len(b_shape))))
        out = lax.select(keep, out, lax.stop_gradient(out))
    if mode in ("fill", "drop"):
        d = aval(out).dtype
        fv = default_fill(d) if fill_value is None else fill_value
        keep = lax.broadcast_in_dim(to_array(inside) if not traced else inside, aval(out).shape,
                                    tuple(range(len(b_shape))))
        out = lax.select(keep, out, lax.full(aval(out).shape, fv, d))
    # NumPy: adjacent advanced entries put their dimensions where the first one was; else
    # they go first.
    adjacent = adv_dims == list(range(adv_dims[0], adv_dims[-1] + 1))
    if adjacent and adv_dims[0] > 0:
        nb = len(b_shape)
        before = adv_dims[0]
        perm = list(range(nb, nb + before)) + list(range(nb)) + list(
            range(nb + before, aval(out).ndim))
        out = lax.transpose(out, perm)
    return out


def _static_flat_index(arrays, sizes, b_shape, mode):
    flat = np.zeros(b_shape, np.int64)
    inside = np.ones(b_shape, bool)
    for a, n in zip(arrays, sizes):
        a = np.broadcast_to(np.where(a < 0, a + n, a), b_shape)
        if mode == "wrap" and n:
            a = a % n
        inside &= (a >= 0) & (a < n)
        flat = flat * n + np.clip(a, 0, max(n - 1, 0))
    return flat, inside


def _traced_flat_index(arrays, sizes, b_shape, mode):
    it = dt.int64 if dt.x64_enabled() else dt.int32
    flat = lax.full(b_shape, 0, it)
    inside = lax.full(b_shape, True, dt.bool_)
    from fusionjit._src.numpy.util import broadcast_to_shape
    for a, n in zip(arrays, sizes):
        a = lax.convert_element_type(to_array(a), it)
        a = broadcast_to_shape(a, b_shape)
        a = lax.select(lax.lt(a, to_array(0, it)), lax.add(a, to_array(n, it)), a)
        if mode == "wrap" and n:
            a = lax.rem(a, to_array(n, it))
            a = lax.select(lax.lt(a, to_array(0, it)), lax.add(a, to_array(n, it)), a)
        inside = lax.bitwise_and(inside, lax.bitwise_and(lax.ge(a, to_array(0, it)),
                                                         lax.lt(a, to_array(n, it))))
        clipped = lax.clamp(to_array(0, it), a, to_array(max(n - 1, 0), it))
        flat = lax.add(lax.mul(flat, to_array(n, it)), clipped)
    return flat, inside
