"""Selecting and placing elements with JAX's semantics: partition/argpartition (one sort
along the axis), choose (a chain of selects), compress/extract (static indices outside jit,
``size=`` under jit), place and put (a scatter), packbits and unpackbits, and trim_zeros
(concrete input only, as in JAX)."""

from __future__ import annotations

import operator

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src import errors
from fusionjit._src.lax import lax
from fusionjit._src.numpy import manipulation, reductions, shapes, sorting, ufuncs
from fusionjit._src.numpy.gather import take
from fusionjit._src.numpy.manipulation import take_static, unravel_index
from fusionjit._src.numpy.util import (aval, canonical_axis, check_arraylike, fail,
                                       promote_dtypes, to_array)


def _last_axis(name, a, axis):
    check_arraylike(name, a)
    a = to_array(a)
    if aval(a).ndim == 0:
        fail(f"{name}() needs an array of at least 1 dimension", ValueError)
    axis = canonical_axis(axis, aval(a).ndim, f"{name}: axis")
    return shapes.swapaxes(a, axis, -1), axis


def partition(a, kth: int, axis: int = -1):
    """``a`` with its ``kth`` smallest element (along ``axis``) in position ``kth``, the
    ones before it smaller or equal (ascending) and the ones after it larger or equal
    (descending), as JAX's top_k-based ``jnp.partition``; NaNs count as largest."""
    x, axis = _last_axis("partition", a, axis)
    n = aval(x).shape[-1]
    kth = canonical_axis(kth, n, "partition: kth")
    s = sorting.sort(x, axis=-1)
    out = shapes.concatenate([s[..., :kth + 1], shapes.flip(s[..., kth + 1:], -1)], -1)
    return shapes.swapaxes(out, axis, -1)


def argpartition(a, kth: int, axis: int = -1):
    """The indices that ``partition`` ``a``: those of the ``kth + 1`` smallest elements in
    ascending order (ties: the lower index first), then the others in index order, as
    ``jnp.argpartition``."""
    x, axis = _last_axis("argpartition", a, axis)
    n = aval(x).shape[-1]
    kth = canonical_axis(kth, n, "argpartition: kth")
    perm = sorting.argsort(x, axis=-1)
    rank = sorting.argsort(perm, axis=-1)  # each element's position in sorted order
    in_top = lax.convert_element_type(ufuncs.less_equal(rank, kth), dt.int32)
    top = sorting.argsort(in_top, axis=-1)[..., :n - kth - 1]
    return shapes.swapaxes(shapes.concatenate([perm[..., :kth + 1], top], -1), axis, -1)


def choose(a, choices, out=None, mode: str = "raise"):
    """``choices[a[i]][i]`` for each ``i``, all arguments broadcast together. Out-of-range
    ``a``: 'raise' (needs concrete ``a``: checked now), 'wrap' or 'clip'."""
    if out is not None:
        fail("choose(out=...) is not supported: fusionjit arrays are immutable",
             NotImplementedError)
    check_arraylike("choose", a)
    a = to_array(a)
    if not dt.is_int(aval(a).dtype):
        fail(f"choose: a must be integers, got {aval(a).dtype}", ValueError)
    if isinstance(choices, (list, tuple)):
        check_arraylike("choose", *choices)
        choices = [to_array(c) for c in choices]
    else:
        check_arraylike("choose", choices)
        choices = to_array(choices)
        if aval(choices).ndim == 0:
            fail("choose: choices must be a sequence of arrays or an array of rank >= 1",
                 ValueError)
        choices = [choices[i] for i in range(aval(choices).shape[0])]
    n = len(choices)
    if n == 0:
        fail("choose needs at least one choice", ValueError)
    if mode == "raise":
        if isinstance(a, core.Tracer):
            fail("choose(mode='raise') checks the indices, which are not known inside jit; "
                 "use mode='wrap' or mode='clip'", errors.ConcretizationTypeError)
        values = np.asarray(a)
        if values.size and (values.min() < 0 or values.max() >= n):
            fail(f"choose: invalid entry in the choice array (must be in [0, {n}))",
                 ValueError)
    elif mode == "wrap":
        a = ufuncs.remainder(a, n)
    elif mode == "clip":
        a = ufuncs.clip(a, 0, n - 1)
    else:
        fail(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}", ValueError)
    choices = promote_dtypes(*choices)
    a, *choices = shapes.broadcast_arrays(a, *choices)
    result = choices[0]
    for k in range(1, n):
        result = ufuncs.where(ufuncs.equal(a, k), choices[k], result)
    return result


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """The slices of ``a`` along ``axis`` (the flattened ``a`` if None) where the 1-D
    ``condition`` is true. Under jit pass ``size``: the result holds ``size`` slices, the
    selected ones first and ``fill_value`` after them, as ``jnp.compress``."""
    if out is not None:
        fail("compress(out=...) is not supported: fusionjit arrays are immutable",
             NotImplementedError)
    check_arraylike("compress", condition, a)
    cond, arr = to_array(condition), to_array(a)
    if aval(cond).ndim != 1:
        fail(f"compress: condition must be 1-D, got shape {aval(cond).shape}", ValueError)
    if not dt.is_bool(aval(cond).dtype):
        cond = ufuncs.not_equal(cond, 0)
    if axis is None:
        arr, axis = shapes.ravel(arr), 0
    axis = canonical_axis(axis, aval(arr).ndim, "compress: axis")
    arr = shapes.moveaxis(arr, axis, 0)
    n = aval(arr).shape[0]
    cond, extra = cond[:n], cond[n:]
    arr = arr[:aval(cond).shape[0]]
    if size is None:
        if isinstance(cond, core.Tracer):
            fail("compress() has a result whose size depends on the values of condition, "
                 "which are not known inside jit; pass size= (and fill_value=)",
                 errors.ConcretizationTypeError)
        if np.asarray(extra).any():
            fail("compress: condition has true entries past the end of the axis", ValueError)
        result = take_static(arr, np.flatnonzero(np.asarray(cond)), 0)
    else:
        size = operator.index(size)
        if not 0 <= size <= aval(arr).shape[0]:
            fail(f"compress: size must be in [0, {aval(arr).shape[0]}] (the length of the "
                 f"axis), got {size}", ValueError)
        mask = shapes.reshape(cond, (aval(cond).shape[0],) + (1,) * (aval(arr).ndim - 1))
        arr = ufuncs.where(mask, arr, to_array(fill_value).astype(aval(arr).dtype))
        order = sorting.argsort(ufuncs.logical_not(cond))[:size]
        result = take(arr, order, axis=0)
    return shapes.moveaxis(result, 0, axis)


def extract(condition, arr, *, size=None, fill_value=0):
    """The elements of ``arr`` where ``condition`` is true, flattened (``compress`` of the
    raveled arrays; ``size``/``fill_value`` as there)."""
    check_arraylike("extract", condition, arr)
    return compress(shapes.ravel(to_array(condition)), shapes.ravel(to_array(arr)), size=size,
                    fill_value=fill_value)


def place(arr, mask, vals, *, inplace: bool = True):
    """A copy of ``arr`` with the positions where ``mask`` is true set to ``vals`` in turn
    (repeated if too few). JAX arrays are immutable: pass ``inplace=False``."""
    if inplace:
        fail("place: fusionjit arrays are immutable and can't be modified in place; pass "
             "inplace=False to get the updated array", ValueError)
    check_arraylike("place", arr, mask, vals)
    data, mask, vals = to_array(arr), to_array(mask), shapes.ravel(to_array(vals))
    if aval(data).size != aval(mask).size:
        fail(f"place: arr and mask must be the same size, got {aval(data).size} and "
             f"{aval(mask).size}", ValueError)
    if aval(vals).size == 0:
        fail("place: cannot place values from an empty array", ValueError)
    if aval(data).size == 0:
        return data
    flat_mask = shapes.ravel(mask)
    n, nv = aval(flat_mask).shape[0], aval(vals).shape[0]
    # The k-th true position takes vals[k % len(vals)]; padding positions (n) are dropped.
    positions = sorting.flatnonzero(flat_mask, size=n, fill_value=n)
    vals = manipulation.tile(vals, -(-n // nv))[:n] if nv != n else vals
    flat = shapes.ravel(data).at[positions].set(vals.astype(aval(data).dtype), mode="drop")
    return shapes.reshape(flat, aval(data).shape)


def put(a, ind, v, mode=None, *, inplace: bool = True):
    """A copy of ``a`` with the flat positions ``ind`` set to ``v`` (repeated as needed).
    ``mode``: None (out-of-range positions dropped), 'clip' or 'wrap'; 'raise' is not
    supported, as in JAX. JAX arrays are immutable: pass ``inplace=False``."""
    if inplace:
        fail("put: fusionjit arrays are immutable and can't be modified in place; pass "
             "inplace=False to get the updated array", ValueError)
    check_arraylike("put", a, ind, v)
    arr, ind, v = to_array(a), shapes.ravel(to_array(ind)), shapes.ravel(to_array(v))
    if not dt.is_int(aval(ind).dtype):
        fail(f"put: indices must be integers, got {aval(ind).dtype}")
    size = aval(arr).size
    if not size or not aval(ind).size or not aval(v).size:
        return arr
    count = aval(ind).size
    reps = -(-count // aval(v).size)
    v = manipulation.tile(v, reps)[:count] if reps > 1 or aval(v).size != count else v
    if mode is None:
        scatter_mode = "drop"
    elif mode == "clip":
        ind, scatter_mode = ufuncs.clip(ind, 0, size - 1), "promise_in_bounds"
    elif mode == "wrap":
        ind, scatter_mode = ufuncs.remainder(ind, size), "promise_in_bounds"
    elif mode == "raise":
        fail("put: mode='raise' is not supported (as in JAX); use None, 'clip' or 'wrap'",
             NotImplementedError)
    else:
        fail(f"put: mode must be None, 'clip' or 'wrap', got {mode!r}", ValueError)
    return arr.at[unravel_index(ind, aval(arr).shape)].set(v, mode=scatter_mode)


def _bit_order(name, bitorder):
    if bitorder not in ("big", "little"):
        fail(f"{name}: bitorder must be 'big' or 'little', got {bitorder!r}", ValueError)


def packbits(a, axis=None, bitorder: str = "big"):
    """The elements of ``a`` read as bits (non-zero is 1) packed eight to a uint8 along
    ``axis`` (the flattened ``a`` if None), the last byte padded with zeros."""
    check_arraylike("packbits", a)
    _bit_order("packbits", bitorder)
    arr = to_array(a)
    if not (dt.is_int(aval(arr).dtype) or dt.is_bool(aval(arr).dtype)):
        fail(f"packbits: expected integers or booleans, got {aval(arr).dtype}")
    bits = ufuncs.not_equal(arr, 0).astype(dt.int32)
    if axis is None:
        bits, axis = shapes.ravel(bits), 0
    axis = canonical_axis(axis, aval(bits).ndim, "packbits: axis")
    bits = shapes.swapaxes(bits, axis, -1)
    n = aval(bits).shape[-1]
    if n % 8:
        config = [(0, 0, 0)] * (aval(bits).ndim - 1) + [(0, 8 - n % 8, 0)]
        bits = lax.pad(bits, to_array(np.int32(0)), config)
    bits = shapes.reshape(bits, aval(bits).shape[:-1] + (aval(bits).shape[-1] // 8, 8))
    weights = np.arange(8, dtype=np.int32)
    weights = 1 << (weights[::-1] if bitorder == "big" else weights)
    packed = reductions.sum(bits * to_array(weights), axis=-1).astype(np.uint8)
    return shapes.swapaxes(packed, axis, -1)


def unpackbits(a, axis=None, count=None, bitorder: str = "big"):
    """The bits of the uint8 array ``a`` as a uint8 array of zeros and ones, eight per
    element along ``axis`` (the flattened ``a`` if None); ``count`` keeps that many (or
    pads with zeros)."""
    check_arraylike("unpackbits", a)
    _bit_order("unpackbits", bitorder)
    arr = to_array(a)
    if aval(arr).dtype != np.uint8:
        fail(f"unpackbits: expected an array of uint8, got {aval(arr).dtype}")
    if axis is None:
        arr, axis = shapes.ravel(arr), 0
    axis = canonical_axis(axis, aval(arr).ndim, "unpackbits: axis")
    arr = shapes.swapaxes(arr, axis, -1)
    shifts = np.arange(8, dtype=np.uint8)
    shifts = to_array(shifts[::-1] if bitorder == "big" else shifts)
    bits = ufuncs.bitwise_and(ufuncs.right_shift(shapes.expand_dims(arr, -1), shifts),
                              np.uint8(1))
    bits = shapes.reshape(bits, aval(bits).shape[:-2] + (aval(bits).shape[-2] * 8,))
    if count is not None:
        count = operator.index(count)
        n = aval(bits).shape[-1]
        if count > n:
            config = [(0, 0, 0)] * (aval(bits).ndim - 1) + [(0, count - n, 0)]
            bits = lax.pad(bits, to_array(np.uint8(0)), config)
        else:
            bits = bits[..., :count]
    return shapes.swapaxes(bits, axis, -1)


def trim_zeros(filt, trim: str = "fb", axis=None):
    """``filt`` without its leading ('f') and/or trailing ('b') zeros along ``axis`` (all
    axes if None). The result's shape depends on the values, so ``filt`` must be concrete
    (not traced), as in JAX."""
    check_arraylike("trim_zeros", filt)
    if isinstance(filt, core.Tracer):
        fail("trim_zeros: the result's shape depends on the values of filt, which are not "
             "known inside jit", errors.ConcretizationTypeError)
    arr = to_array(filt)
    values = np.asarray(arr)
    ndim = values.ndim
    if axis is None:
        axes = set(range(ndim))
    else:
        axes = {canonical_axis(ax, ndim, "trim_zeros: axis")
                for ax in ((axis,) if isinstance(axis, int) else axis)}
    trim = trim.lower()
    if not axes or ("f" not in trim and "b" not in trim):
        return arr
    index = []
    for ax in range(ndim):
        if ax not in axes:
            index.append(slice(None))
            continue
        mask = values.any(axis=tuple(i for i in range(ndim) if i != ax))
        if not mask.any():
            index.append(slice(0, 0))
            continue
        start = int(mask.argmax()) if "f" in trim else None
        stop = len(mask) - int(mask[::-1].argmax()) if "b" in trim else None
        index.append(slice(start, stop))
    return arr[tuple(index)]
