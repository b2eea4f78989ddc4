"""lax primitives that move elements: broadcasts, reshapes, transposes, slices,
concatenation, padding, reversal, dynamic slices and iota (the namespace is ``lax.py``)."""

from __future__ import annotations

import builtins

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.lowering import register
from fusionjit._src.lax.common import (
    _NUM, Primitive, ShapedArray, _check_kinds, _fail, _weak_all, asarray_operand)


# --- shapes ---------------------------------------------------------------------------

def _shape_tuple(shape, what: str) -> tuple:
    try:
        return tuple(int(operator_index(d)) for d in shape)
    except TypeError:
        _fail(f"{what} must be a tuple of integers, got {shape!r}")


def operator_index(d):
    import operator
    return operator.index(d)


broadcast_in_dim_p = Primitive("broadcast_in_dim")


@broadcast_in_dim_p.def_abstract_eval
def _broadcast_in_dim_abstract_eval(x, *, shape, broadcast_dimensions):
    if len(broadcast_dimensions) != x.ndim:
        _fail(f"broadcast_in_dim: {len(broadcast_dimensions)} broadcast_dimensions for an "
              f"operand of rank {x.ndim}")
    if list(broadcast_dimensions) != sorted(set(broadcast_dimensions)):
        _fail(f"broadcast_in_dim: broadcast_dimensions {broadcast_dimensions} must be increasing")
    for i, d in enumerate(broadcast_dimensions):
        if not 0 <= d < len(shape) or x.shape[i] not in (1, shape[d]):
            _fail(f"broadcast_in_dim: cannot broadcast {x.shape} to {shape} along "
                  f"{broadcast_dimensions}")
    return ShapedArray(shape, x.dtype, x.weak_type)


@register(broadcast_in_dim_p)
def _broadcast_in_dim_lower(ctx, avals_in, avals_out, x, *, shape, broadcast_dimensions):
    return ctx.op("broadcast", [x], dtype=avals_in[0].dtype, dims=shape,
                  dimensions=list(broadcast_dimensions))


def broadcast_in_dim(x, shape, broadcast_dimensions):
    """Broadcasts ``x`` to ``shape``; operand dim i becomes result dim broadcast_dimensions[i]."""
    x = asarray_operand(x)
    shape = _shape_tuple(shape, "shape")
    aval = core.get_aval(x)
    if aval.shape == shape and tuple(broadcast_dimensions) == tuple(range(len(shape))):
        return x
    return broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=tuple(broadcast_dimensions))


def broadcast(x, sizes):
    """Adds leading dimensions of the given sizes."""
    x = asarray_operand(x)
    aval = core.get_aval(x)
    sizes = _shape_tuple(sizes, "sizes")
    return broadcast_in_dim(x, sizes + aval.shape, tuple(range(len(sizes), len(sizes) + aval.ndim)))


reshape_p = Primitive("reshape")


@reshape_p.def_abstract_eval
def _reshape_abstract_eval(x, *, new_sizes):
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        _fail(f"cannot reshape an array of shape {x.shape} ({x.size} elements) into shape "
              f"{new_sizes}", ValueError)
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


@register(reshape_p)
def _reshape_lower(ctx, avals_in, avals_out, x, *, new_sizes):
    return ctx.op("reshape", [x], dtype=avals_in[0].dtype, dims=new_sizes)


def reshape(x, new_sizes):
    """Row-major reshape."""
    x = asarray_operand(x)
    new_sizes = _shape_tuple(new_sizes, "new_sizes")
    if core.get_aval(x).shape == new_sizes:
        return x
    return reshape_p.bind(x, new_sizes=new_sizes)


def squeeze(x, dimensions):
    x = asarray_operand(x)
    shape = core.get_aval(x).shape
    dims = {d % len(shape) if shape else d for d in dimensions}
    for d in dims:
        if not 0 <= d < len(shape) or shape[d] != 1:
            _fail(f"cannot squeeze dimension {d} of shape {shape}: its size is not 1", ValueError)
    return reshape(x, tuple(s for i, s in enumerate(shape) if i not in dims))


def expand_dims(x, dimensions):
    x = asarray_operand(x)
    shape = list(core.get_aval(x).shape)
    ndim = len(shape) + len(dimensions)
    for d in sorted(d % ndim for d in dimensions):
        shape.insert(d, 1)
    return reshape(x, tuple(shape))


transpose_p = Primitive("transpose")


@transpose_p.def_abstract_eval
def _transpose_abstract_eval(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        _fail(f"transpose permutation {permutation} is not a permutation of {x.ndim} axes",
              ValueError)
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


@register(transpose_p)
def _transpose_lower(ctx, avals_in, avals_out, x, *, permutation):
    return ctx.op("transpose", [x], dimensions=list(permutation))


def transpose(x, permutation):
    x = asarray_operand(x)
    permutation = tuple(int(p) for p in permutation)
    if permutation == tuple(range(len(permutation))):
        return x
    return transpose_p.bind(x, permutation=permutation)


slice_p = Primitive("slice")


@slice_p.def_abstract_eval
def _slice_abstract_eval(x, *, start_indices, limit_indices, strides):
    if not (len(start_indices) == len(limit_indices) == len(strides) == x.ndim):
        _fail(f"slice of a rank-{x.ndim} array needs {x.ndim} start, limit and stride values")
    shape = []
    for s, lim, st, d in zip(start_indices, limit_indices, strides, x.shape):
        if not (0 <= s <= lim <= d) or st < 1:
            _fail(f"slice [{s}:{lim}:{st}] is out of bounds for a dimension of size {d}",
                  IndexError)
        shape.append((lim - s + st - 1) // st)
    return ShapedArray(shape, x.dtype, x.weak_type)


@register(slice_p)
def _slice_lower(ctx, avals_in, avals_out, x, *, start_indices, limit_indices, strides):
    return ctx.op("slice", [x], slice_starts=list(start_indices), slice_limits=list(limit_indices),
                  slice_strides=list(strides))


def slice(x, start_indices, limit_indices, strides=None):  # noqa: A001
    x = asarray_operand(x)
    start_indices = _shape_tuple(start_indices, "start_indices")
    limit_indices = _shape_tuple(limit_indices, "limit_indices")
    strides = (1,) * len(start_indices) if strides is None else _shape_tuple(strides, "strides")
    aval = core.get_aval(x)
    if (start_indices == (0,) * aval.ndim and limit_indices == aval.shape
            and strides == (1,) * aval.ndim):
        return x
    return slice_p.bind(x, start_indices=start_indices, limit_indices=limit_indices,
                        strides=strides)


def slice_in_dim(x, start_index, limit_index, stride=1, axis=0):
    x = asarray_operand(x)
    shape = core.get_aval(x).shape
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start_index, limit_index, stride
    return slice(x, starts, limits, strides)


rev_p = Primitive("rev")


@rev_p.def_abstract_eval
def _rev_abstract_eval(x, *, dimensions):
    if any(not 0 <= d < x.ndim for d in dimensions) or len(set(dimensions)) != len(dimensions):
        _fail(f"rev dimensions {dimensions} are invalid for rank {x.ndim}", ValueError)
    return x


@register(rev_p)
def _rev_lower(ctx, avals_in, avals_out, x, *, dimensions):
    return ctx.op("reverse", [x], dimensions=list(dimensions))


def rev(x, dimensions):
    """Reverses the order of elements along ``dimensions``."""
    dimensions = tuple(int(d) for d in dimensions)
    x = asarray_operand(x)
    return x if not dimensions else rev_p.bind(x, dimensions=dimensions)


concatenate_p = Primitive("concatenate")


@concatenate_p.def_abstract_eval
def _concatenate_abstract_eval(*xs, dimension):
    first = xs[0]
    if not 0 <= dimension < first.ndim:
        _fail(f"concatenate dimension {dimension} is out of range for rank {first.ndim}",
              ValueError)
    size = 0
    for x in xs:
        same = x.ndim == first.ndim and all(a == b for i, (a, b)
                                            in enumerate(zip(x.shape, first.shape))
                                            if i != dimension)
        if x.dtype != first.dtype or not same:
            _fail(f"concatenate operands {first.str_short()} and {x.str_short()} do not match "
                  f"outside dimension {dimension}")
        size += x.shape[dimension]
    shape = list(first.shape)
    shape[dimension] = size
    return ShapedArray(shape, first.dtype, _weak_all(*xs))


@register(concatenate_p)
def _concatenate_lower(ctx, avals_in, avals_out, *xs, dimension):
    return ctx.op("concatenate", list(xs), dimensions=[dimension])


def concatenate(operands, dimension):
    operands = [asarray_operand(x) for x in operands]
    if not operands:
        _fail("concatenate needs at least one array", ValueError)
    if len(operands) == 1:
        return operands[0]
    return concatenate_p.bind(*operands, dimension=int(dimension))


pad_p = Primitive("pad")


@pad_p.def_abstract_eval
def _pad_abstract_eval(x, padding_value, *, padding_config):
    if padding_value.shape != () or padding_value.dtype != x.dtype:
        _fail("pad: the padding value must be a scalar of the operand's dtype")
    if len(padding_config) != x.ndim:
        _fail(f"pad: padding_config has {len(padding_config)} entries for rank {x.ndim}")
    shape = []
    for (lo, hi, interior), d in zip(padding_config, x.shape):
        if interior < 0:
            _fail("pad: interior padding must be non-negative", ValueError)
        n = lo + hi + d + builtins.max(d - 1, 0) * interior
        if n < 0:
            _fail("pad: negative padding removes more than the dimension holds", ValueError)
        shape.append(n)
    return ShapedArray(shape, x.dtype, x.weak_type)


@register(pad_p)
def _pad_lower(ctx, avals_in, avals_out, x, padding_value, *, padding_config):
    return ctx.op("pad", [x, padding_value], padding=[tuple(p) for p in padding_config])


def pad(x, padding_value, padding_config):
    x = asarray_operand(x)
    padding_value = asarray_operand(padding_value, core.get_aval(x).dtype)
    config = tuple((int(lo), int(hi), int(i)) for lo, hi, i in padding_config)
    return pad_p.bind(x, padding_value, padding_config=config)


dynamic_slice_p = Primitive("dynamic_slice")


@dynamic_slice_p.def_abstract_eval
def _dynamic_slice_abstract_eval(x, *starts, slice_sizes):
    if len(starts) != x.ndim or len(slice_sizes) != x.ndim:
        _fail(f"dynamic_slice of a rank-{x.ndim} array needs {x.ndim} start indices and sizes")
    for s in starts:
        if s.shape != () or not dt.is_int(s.dtype):
            _fail("dynamic_slice start indices must be integer scalars")
    for size, d in zip(slice_sizes, x.shape):
        if not 0 <= size <= d:
            _fail(f"dynamic_slice size {size} does not fit a dimension of size {d}", IndexError)
    return ShapedArray(slice_sizes, x.dtype, x.weak_type)


@register(dynamic_slice_p)
def _dynamic_slice_lower(ctx, avals_in, avals_out, x, *starts, slice_sizes):
    return ctx.op("dynamic-slice", [x, *starts], dimensions=list(slice_sizes))


def _starts_from_the_end(start_indices, dims, allow_negative_indices: bool) -> list:
    """The start operands; with JAX's ``allow_negative_indices`` (its default), a negative
    start counts from the end of its dimension, before the usual clamping into bounds."""
    if len(start_indices) != len(dims):
        _fail(f"a rank-{len(dims)} array needs {len(dims)} start indices, got "
              f"{len(start_indices)}")
    starts = []
    for s, d in zip(start_indices, dims):
        if isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)):
            s = int(s) + d if allow_negative_indices and s < 0 else s
            starts.append(asarray_operand(s))
            continue
        s = asarray_operand(s)
        kind = core.get_aval(s).dtype
        if allow_negative_indices and dt.is_int(kind) and dt.is_signed(kind):
            from fusionjit._src.lax import elementwise as ew
            zero, size = (asarray_operand(np.array(v, kind)) for v in (0, d))
            s = ew.select(ew.lt(s, zero), ew.add(s, size), s)
        starts.append(s)
    return starts


def dynamic_slice(x, start_indices, slice_sizes, *, allow_negative_indices: bool = True):
    """A slice at traced start indices, clamped so the slice stays in bounds (as XLA); a
    negative start counts from the end, as in JAX, unless ``allow_negative_indices`` is
    False."""
    x = asarray_operand(x)
    starts = _starts_from_the_end(start_indices, core.get_aval(x).shape, allow_negative_indices)
    return dynamic_slice_p.bind(x, *starts, slice_sizes=_shape_tuple(slice_sizes, "slice_sizes"))


dynamic_update_slice_p = Primitive("dynamic_update_slice")


@dynamic_update_slice_p.def_abstract_eval
def _dus_abstract_eval(x, update, *starts):
    if (update.dtype != x.dtype or update.ndim != x.ndim
            or any(u > d for u, d in zip(update.shape, x.shape))):
        _fail(f"dynamic_update_slice: update {update.str_short()} does not fit {x.str_short()}")
    if len(starts) != x.ndim or any(s.shape != () or not dt.is_int(s.dtype) for s in starts):
        _fail(f"dynamic_update_slice needs {x.ndim} integer scalar start indices")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


@register(dynamic_update_slice_p)
def _dus_lower(ctx, avals_in, avals_out, x, update, *starts):
    return ctx.op("dynamic-update-slice", [x, update, *starts])


def dynamic_update_slice(x, update, start_indices, *, allow_negative_indices: bool = True):
    """``x`` with ``update`` written at the start indices, clamped so that it fits (as
    XLA); a negative start counts from the end, as in JAX."""
    x = asarray_operand(x)
    update = asarray_operand(update, core.get_aval(x).dtype)
    starts = _starts_from_the_end(start_indices, core.get_aval(x).shape, allow_negative_indices)
    return dynamic_update_slice_p.bind(x, update, *starts)


def _axis(axis: int, ndim: int, what: str) -> int:
    axis = int(operator_index(axis))
    if not -ndim <= axis < ndim:
        _fail(f"{what}: axis {axis} is out of range for rank {ndim}", ValueError)
    return axis % ndim


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0, *,
                         allow_negative_indices: bool = True):
    """``dynamic_slice`` along one axis (whole along the others), as in JAX."""
    x = asarray_operand(operand)
    shape = core.get_aval(x).shape
    axis = _axis(axis, len(shape), "dynamic_slice_in_dim")
    starts, sizes = [0] * len(shape), list(shape)
    starts[axis], sizes[axis] = start_index, slice_size
    return dynamic_slice(x, starts, sizes, allow_negative_indices=allow_negative_indices)


def dynamic_index_in_dim(operand, index, axis=0, keepdims=True, *,
                         allow_negative_indices: bool = True):
    """Element ``index`` of ``axis`` (a dynamic slice of size 1, dropped unless keepdims)."""
    x = dynamic_slice_in_dim(operand, index, 1, axis,
                             allow_negative_indices=allow_negative_indices)
    return x if keepdims else squeeze(x, (_axis(axis, core.get_aval(x).ndim, ""),))


def dynamic_update_slice_in_dim(operand, update, start_index, axis, *,
                                allow_negative_indices: bool = True):
    """``dynamic_update_slice`` at ``start_index`` along ``axis`` (0 along the others)."""
    x = asarray_operand(operand)
    ndim = core.get_aval(x).ndim
    starts = [0] * ndim
    starts[_axis(axis, ndim, "dynamic_update_slice_in_dim")] = start_index
    return dynamic_update_slice(x, update, starts, allow_negative_indices=allow_negative_indices)


def dynamic_update_index_in_dim(operand, update, index, axis, *,
                                allow_negative_indices: bool = True):
    """Writes ``update`` at ``index`` of ``axis``; an update of one rank less gets that axis
    inserted first, as in JAX."""
    x = asarray_operand(operand)
    ndim = core.get_aval(x).ndim
    axis = _axis(axis, ndim, "dynamic_update_index_in_dim")
    update = asarray_operand(update, core.get_aval(x).dtype)
    if core.get_aval(update).ndim == ndim - 1:
        update = expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(x, update, index, axis,
                                       allow_negative_indices=allow_negative_indices)


def index_in_dim(operand, index, axis=0, keepdims=True):
    """Element ``index`` (a Python int; negative counts from the end) of ``axis``."""
    x = asarray_operand(operand)
    shape = core.get_aval(x).shape
    axis = _axis(axis, len(shape), "index_in_dim")
    index = int(operator_index(index))
    if not -shape[axis] <= index < shape[axis]:
        _fail(f"index_in_dim: index {index} is out of bounds for axis {axis} with size "
              f"{shape[axis]}", IndexError)
    index %= shape[axis]
    x = slice_in_dim(x, index, index + 1, 1, axis)
    return x if keepdims else squeeze(x, (axis,))


iota_p = Primitive("iota")


@iota_p.def_abstract_eval
def _iota_abstract_eval(*, dtype, shape, dimension):
    if not 0 <= dimension < len(shape):
        _fail(f"iota dimension {dimension} is out of range for shape {shape}")
    _check_kinds("iota", dtype, _NUM)
    return ShapedArray(shape, dtype, False)


@register(iota_p)
def _iota_lower(ctx, avals_in, avals_out, *, dtype, shape, dimension):
    return ctx.op("iota", [], dtype=dtype, dims=shape, dimensions=[dimension])


def iota(dtype, size):
    """``[0, 1, ..., size-1]``."""
    return broadcasted_iota(dtype, (int(size),), 0)


def broadcasted_iota(dtype, shape, dimension):
    """Positions along ``dimension`` of an array of ``shape``."""
    shape = _shape_tuple(shape, "shape")
    return iota_p.bind(dtype=dt.canonicalize(dtype), shape=shape, dimension=int(dimension))
