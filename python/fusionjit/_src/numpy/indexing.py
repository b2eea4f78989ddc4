"""Basic indexing: integers (also traced ones), slices with steps, None and Ellipsis."""

from __future__ import annotations

import operator

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.lax import lax
from fusionjit._src.numpy.util import aval, fail, to_array


def _is_int_like(i) -> bool:
    if isinstance(i, (bool, np.bool_)):
        return False
    if isinstance(i, (int, np.integer)):
        return True
    if (isinstance(i, core.Tracer) or core.is_concrete_array(i)) and aval(i).shape == () \
            and dt.is_int(aval(i).dtype):
        return True
    return False


def getitem(x, index):
    """``x[index]`` for basic indices."""
    x = to_array(x)
    shape = aval(x).shape
    if not isinstance(index, tuple):
        index = (index,)
    from fusionjit._src.numpy import gather
    if any(gather.is_advanced(i) for i in index):
        return gather.advanced_getitem(x, index, mode="promise_in_bounds")
    for i in index:
        if not (i is None or i is Ellipsis or isinstance(i, slice) or _is_int_like(i)):
            if isinstance(i, core.Tracer) or core.is_concrete_array(i):  # a 0-d float, say
                gather.integer_index_error(aval(i).dtype, "indexing")
            fail(f"invalid index of type {type(i).__name__}: only integers, slices, None, ..., "
                 f"and integer or boolean arrays are valid indices", IndexError)
    n_ellipsis = sum(1 for i in index if i is Ellipsis)
    if n_ellipsis > 1:
        fail("an index can only have a single ellipsis ('...')", IndexError)
    consumed = sum(1 for i in index if i is not None and i is not Ellipsis)
    if consumed > len(shape):
        fail(f"too many indices for array: array is {len(shape)}-dimensional, but {consumed} "
             f"were indexed", IndexError)
    if n_ellipsis:
        pos = index.index(Ellipsis)
        index = index[:pos] + (slice(None),) * (len(shape) - consumed) + index[pos + 1:]
    else:
        index = index + (slice(None),) * (len(shape) - consumed)

    starts, limits, strides, reverse = [], [], [], []
    squeeze_dims, dynamic = [], []
    dim = 0
    for i in index:
        if i is None:
            continue
        size = shape[dim]
        if isinstance(i, slice):
            start, stop, step = i.indices(size)
            if step > 0:
                n = max(0, (stop - start + step - 1) // step)
                starts.append(start)
                limits.append(start + max(n - 1, 0) * step + (1 if n else 0))
                strides.append(step)
            else:
                n = max(0, (start - stop - step - 1) // (-step))
                # Reverse the elements [stop+1 .. start] and take every |step|-th.
                lo = start - (n - 1) * (-step) if n else 0
                starts.append(lo)
                limits.append(lo + max(n - 1, 0) * (-step) + (1 if n else 0))
                strides.append(-step)
                reverse.append(dim)
        elif isinstance(i, (core.Tracer,)) or core.is_concrete_array(i):
            if isinstance(i, core.Tracer):
                dynamic.append((dim, i))
                starts.append(0)
                limits.append(size)
                strides.append(1)
                squeeze_dims.append(dim)
            else:
                k = _concrete_int(int(i.item()), size, dim)
                starts.append(k)
                limits.append(k + 1)
                strides.append(1)
                squeeze_dims.append(dim)
        else:
            k = _concrete_int(operator.index(i), size, dim)
            starts.append(k)
            limits.append(k + 1)
            strides.append(1)
            squeeze_dims.append(dim)
        dim += 1

    out = lax.slice(x, starts, limits, strides)
    if reverse:
        out = lax.rev(out, reverse)
    if dynamic:
        sliced_shape = aval(out).shape
        dyn = dict(dynamic)
        start_idx, sizes = [], []
        for d, n in enumerate(sliced_shape):
            if d in dyn:
                idx = to_array(dyn[d])
                # Negative indices count from the end, as in NumPy.
                zero = to_array(0, aval(idx).dtype, False)
                wrapped = lax.add(idx, to_array(n, aval(idx).dtype, False))
                start_idx.append(lax.select(lax.lt(idx, zero), wrapped, idx))
                sizes.append(1)
            else:
                start_idx.append(to_array(0, dt.default_int(), False))
                sizes.append(n)
        out = lax.dynamic_slice(out, start_idx, sizes, allow_negative_indices=False)
    # Squeeze integer-indexed dims, insert None dims.
    final_shape = []
    sliced_shape = aval(out).shape
    dim = 0
    for i in index:
        if i is None:
            final_shape.append(1)
            continue
        if dim not in squeeze_dims:
            final_shape.append(sliced_shape[dim])
        dim += 1
    return lax.reshape(out, tuple(final_shape))


def _concrete_int(k: int, size: int, dim: int) -> int:
    if not -size <= k < size:
        fail(f"index {k} is out of bounds for axis {dim} with size {size}", IndexError)
    return k % size
