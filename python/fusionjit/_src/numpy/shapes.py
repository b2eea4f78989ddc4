"""Array creation and manipulation: array, zeros, arange, reshape, transpose, concatenate,
stack, split, and friends."""

from __future__ import annotations

import builtins
import operator

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.eager import eager_jit
from fusionjit._src.lax import lax
from fusionjit._src.numpy.util import (aval, broadcast_shapes, broadcast_to_shape,
                                       canonical_axes, canonical_axis, check_arraylike, fail,
                                       promote_dtypes, shape_arg, to_array)


def _is_value(x) -> bool:
    return isinstance(x, core.Tracer) or core.is_concrete_array(x)


def _contains_values(obj) -> bool:
    if _is_value(obj):
        return True
    if isinstance(obj, (list, tuple)):
        return builtins.any(_contains_values(o) for o in obj)
    return False


def array(object, dtype=None, copy: bool = True, ndmin: int = 0):  # noqa: A002
    """An array from a nested sequence, NumPy array, scalar, or traced values.

    A list of traced values is stacked, as in ``jnp.array([x, y])``."""
    if dtype is not None:
        dtype = dt.canonicalize(dtype)
    if _is_value(object):
        out = object
    elif isinstance(object, (list, tuple)) and _contains_values(object):
        if len(object) == 0:
            out = to_array(np.zeros((0,), dtype or dt.default_float()))
        else:
            parts = [array(o) for o in object]
            parts = promote_dtypes(*parts)
            # jnp.array of a list is never weak-typed.
            parts = [lax.convert_element_type(p, aval(p).dtype, False) for p in parts]
            shapes = {aval(p).shape for p in parts}
            if len(shapes) != 1:
                fail(f"setting an array element with a sequence: the parts have different "
                     f"shapes {sorted(shapes)}", ValueError)
            out = lax.concatenate([lax.expand_dims(p, (0,)) for p in parts], 0)
    else:
        from fusionjit._src import array as array_mod
        if isinstance(object, (bool, int, float, np.generic)) and dtype is None:
            out = to_array(object)
        else:
            try:
                value = np.asarray(object)
            except Exception as e:  # noqa: BLE001
                fail(f"cannot convert {type(object).__name__} to an array: {e}")
            if value.dtype.kind not in "biuf" and not dt.is_float(value.dtype):
                fail(f"cannot convert a value of dtype {value.dtype} to a fusionjit array; "
                     f"supported dtypes: {dt.supported_names()}")
            if value.dtype == np.float64 and isinstance(object, (list, tuple)) and dtype is None:
                value = value.astype(dt.default_float())
            elif value.dtype == np.int64 and isinstance(object, (list, tuple)) and dtype is None:
                target = dt.default_int()
                if value.size and target != value.dtype:
                    info = np.iinfo(target)
                    if value.min() < info.min or value.max() > info.max:
                        fail(f"Python int {value.max() if value.max() > info.max else value.min()} "
                             f"is too large to convert to {target}", OverflowError)
                value = value.astype(target)
            if dtype is not None and dt.is_int(dtype) and value.dtype.kind in "iu" and value.size \
                    and not isinstance(object, (np.ndarray, np.generic)):
                # Python ints out of the requested type's range: an error (as JAX), not
                # wrapped (array(300, dtype=int8) was 44).
                info = np.iinfo(dtype)
                if value.min() < info.min or value.max() > info.max:
                    bad = value.max() if value.max() > info.max else value.min()
                    fail(f"Python int {bad} is out of bounds for {np.dtype(dtype).name}",
                         OverflowError)
            out = array_mod.from_numpy(value, dtype)
    if dtype is not None and aval(out).dtype != dtype:
        out = lax.convert_element_type(out, dtype)
    elif (core.is_concrete_array(out) and aval(out).weak_type
          and not isinstance(object, (bool, int, float))):
        pass
    while aval(out).ndim < ndmin:
        out = lax.expand_dims(out, (0,))
    return out


def asarray(a, dtype=None, copy=None):
    return array(a, dtype=dtype)


def _fill(shape, value, dtype):
    shape = shape_arg(shape)
    dtype = dt.canonicalize(dtype) if dtype is not None else None
    if dtype is None:
        value = to_array(value)
    else:
        if isinstance(value, int) and not isinstance(value, bool) and dt.is_int(dtype):
            value = np.array(value).astype(dtype)  # full(3, 300, int8): 44, wrapped, as JAX
        value = to_array(value, dtype, False)
    return lax.broadcast_in_dim(value, shape, ())


def zeros(shape, dtype=None):
    return _fill(shape, 0, dtype or dt.default_float())


def ones(shape, dtype=None):
    return _fill(shape, 1, dtype or dt.default_float())


def full(shape, fill_value, dtype=None):
    check_arraylike("full", fill_value)
    if aval(to_array(fill_value)).shape != ():
        return broadcast_to(asarray(fill_value, dtype), shape_arg(shape))
    return _fill(shape, fill_value, dtype)


def _like(a, dtype, shape):
    a_aval = aval(to_array(a)) if not hasattr(a, "shape") or isinstance(a, np.ndarray) else aval(a)
    return (dt.canonicalize(dtype) if dtype is not None else a_aval.dtype,
            a_aval.shape if shape is None else shape)


def zeros_like(a, dtype=None, shape=None):
    d, s = _like(a, dtype, shape)
    return _fill(s, 0, d)


def ones_like(a, dtype=None, shape=None):
    d, s = _like(a, dtype, shape)
    return _fill(s, 1, d)


def full_like(a, fill_value, dtype=None, shape=None):
    d, s = _like(a, dtype, shape)
    return _fill(s, fill_value, d)


def _concrete_number(x, name):
    if isinstance(x, core.Tracer):
        fail(f"{name} must be a concrete number (not a traced value) because it determines the "
             f"shape of the result")
    if core.is_concrete_array(x):
        return x.item()
    return x


def arange(start, stop=None, step=None, dtype=None):
    """Evenly spaced values in [start, stop); the bounds must be concrete numbers."""
    start = _concrete_number(start, "arange's start")
    stop = None if stop is None else _concrete_number(stop, "arange's stop")
    step = None if step is None else _concrete_number(step, "arange's step")
    if stop is None:
        start, stop = 0, start
    if step is None:
        step = 1
    if step == 0:
        fail("arange: step must not be zero", ValueError)
    if dtype is None:
        dtype = dt.promote([dt.scalar_info(v) for v in (start, stop, step)])[0]
    dtype = dt.canonicalize(dtype)
    n = builtins.max(0, int(np.ceil((stop - start) / step)))
    idx = lax.iota(dtype, n)
    if start == 0 and step == 1:
        return idx
    if step != 1:
        idx = lax.mul(idx, to_array(step, dtype, False))
    if start != 0:
        idx = lax.add(idx, to_array(start, dtype, False))
    return idx


@eager_jit("num", "endpoint", "retstep", "dtype", "axis")
def linspace(start, stop, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype=None, axis: int = 0):
    """``num`` evenly spaced samples from start to stop; array endpoints broadcast, and
    the samples run along a new ``axis`` of the result (as NumPy and JAX)."""
    num = operator.index(num)
    if num < 0:
        fail(f"number of samples, {num}, must be non-negative", ValueError)
    dtype = dt.canonicalize(dtype) if dtype is not None else dt.default_float()
    compute = dtype if dt.is_float(dtype) else dt.default_float()
    start_a, stop_a = to_array(start, compute, False), to_array(stop, compute, False)
    bounds = broadcast_shapes(aval(start_a).shape, aval(stop_a).shape)
    start_a, stop_a = broadcast_to_shape(start_a, bounds), broadcast_to_shape(stop_a, bounds)
    axis = canonical_axis(axis, len(bounds) + 1)
    div = (num - 1) if endpoint else num
    step = lax.div(lax.sub(stop_a, start_a), to_array(builtins.max(div, 1), compute, False))
    shape = (num,) + bounds
    rest = tuple(range(1, len(shape)))
    idx = lax.broadcasted_iota(compute, shape, 0)
    out = lax.add(lax.mul(idx, lax.broadcast_in_dim(step, shape, rest)),
                  lax.broadcast_in_dim(start_a, shape, rest))
    if endpoint and num > 1:
        last = lax.eq(lax.broadcasted_iota(dt.default_int(), shape, 0),
                      to_array(num - 1, dt.default_int(), False))
        out = lax.select(last, lax.broadcast_in_dim(stop_a, shape, rest), out)
    if dtype != compute:
        out = lax.convert_element_type(lax.floor(out), dtype)
    if axis != 0:
        out = moveaxis(out, 0, axis)
    if retstep:
        return out, step
    return out


def eye(N, M=None, k: int = 0, dtype=None):
    M = N if M is None else M
    dtype = dt.canonicalize(dtype) if dtype is not None else dt.default_float()
    rows = lax.broadcasted_iota(dt.default_int(), (N, M), 0)
    cols = lax.broadcasted_iota(dt.default_int(), (N, M), 1)
    on = lax.eq(lax.add(rows, to_array(k, dt.default_int(), False)), cols)
    return lax.convert_element_type(on, dtype)


def identity(n, dtype=None):
    return eye(n, dtype=dtype)


# --- manipulation ---------------------------------------------------------------------

def reshape(a, newshape=None, order: str = "C", *, shape=None):
    """Row-major reshape; one dimension may be -1."""
    if shape is not None:
        newshape = shape
    if order != "C":
        fail("reshape supports only order='C'", NotImplementedError)
    check_arraylike("reshape", a)
    a = to_array(a)
    if isinstance(newshape, (int, np.integer)):
        newshape = (newshape,)
    newshape = [operator.index(d) for d in newshape]
    size = aval(a).size
    if newshape.count(-1) > 1:
        fail("can only specify one unknown dimension (-1)", ValueError)
    if -1 in newshape:
        known = int(np.prod([d for d in newshape if d != -1], dtype=np.int64))
        if known == 0 or size % known:
            fail(f"cannot reshape array of size {size} into shape {tuple(newshape)}", ValueError)
        newshape[newshape.index(-1)] = size // known
    if int(np.prod(newshape, dtype=np.int64)) != size:
        fail(f"cannot reshape array of size {size} into shape {tuple(newshape)}", ValueError)
    return lax.reshape(a, tuple(newshape))


def ravel(a, order: str = "C"):
    return reshape(a, (-1,), order)


def transpose(a, axes=None):
    check_arraylike("transpose", a)
    a = to_array(a)
    ndim = aval(a).ndim
    if axes is None:
        axes = tuple(reversed(range(ndim)))
    axes = tuple(canonical_axis(x, ndim) for x in axes)
    if sorted(axes) != list(range(ndim)):
        fail(f"axes {axes} don't match an array of dimension {ndim}", ValueError)
    return lax.transpose(a, axes)


def swapaxes(a, axis1, axis2):
    a = to_array(a)
    ndim = aval(a).ndim
    perm = list(range(ndim))
    i, j = canonical_axis(axis1, ndim), canonical_axis(axis2, ndim)
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(a, perm)


def moveaxis(a, source, destination):
    a = to_array(a)
    ndim = aval(a).ndim
    src = canonical_axes(source if isinstance(source, (tuple, list)) else (source,), ndim)
    dst = canonical_axes(
        destination if isinstance(destination, (tuple, list)) else (destination,), ndim)
    order = [i for i in range(ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return lax.transpose(a, order)


def expand_dims(a, axis):
    check_arraylike("expand_dims", a)
    a = to_array(a)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    ndim = aval(a).ndim + len(axes)
    axes = canonical_axes(tuple(axes), ndim)
    return lax.expand_dims(a, axes)


def squeeze(a, axis=None):
    check_arraylike("squeeze", a)
    a = to_array(a)
    shape = aval(a).shape
    if axis is None:
        axes = tuple(i for i, d in enumerate(shape) if d == 1)
    else:
        axes = canonical_axes(axis, len(shape))
        for i in axes:
            if shape[i] != 1:
                fail(f"cannot select an axis to squeeze out which has size not equal to one "
                     f"(axis {i} of shape {shape})", ValueError)
    return lax.squeeze(a, axes)


def broadcast_to(array, shape):  # noqa: A002
    check_arraylike("broadcast_to", array)
    return broadcast_to_shape(to_array(array), shape_arg(shape))


def broadcast_arrays(*args):
    from fusionjit._src.numpy.util import promote_shapes
    return promote_shapes(*[to_array(a) for a in args])


def concatenate(arrays, axis=0, dtype=None):
    if isinstance(arrays, (np.ndarray,)) or _is_value(arrays):
        arrays = list(arrays)
    if not arrays:
        fail("need at least one array to concatenate", ValueError)
    from fusionjit._src import random as _random
    if _random.any_key(*arrays):
        ndim = len(arrays[0].shape)
        ax = None if axis is None else canonical_axis(axis, ndim)
        if ax is None:
            return _random.map_key_data(lambda *d: concatenate(
                [lax.reshape(x, (-1, 2)) for x in d], 0), *arrays)
        return _random.map_key_data(lambda *d: concatenate(list(d), ax), *arrays)
    check_arraylike("concatenate", *arrays)
    arrays = promote_dtypes(*[to_array(a) for a in arrays])
    if dtype is not None:
        arrays = [lax.convert_element_type(a, dt.canonicalize(dtype)) for a in arrays]
    if axis is None:
        return concatenate([ravel(a) for a in arrays], 0)
    ndim = aval(arrays[0]).ndim
    if ndim == 0:
        fail("zero-dimensional arrays cannot be concatenated", ValueError)
    for a in arrays:
        if aval(a).ndim != ndim:
            fail(f"all the input arrays must have same number of dimensions, but one has "
                 f"{ndim} and another {aval(a).ndim}", ValueError)
    return lax.concatenate(arrays, canonical_axis(axis, ndim))


def stack(arrays, axis=0, out=None, dtype=None):
    """The arrays (of one shape) along a new ``axis``; ``dtype`` converts them first."""
    from fusionjit._src.numpy.reductions import no_out
    no_out("stack", out)
    if not len(arrays):
        fail("need at least one array to stack", ValueError)
    from fusionjit._src import random as _random
    if _random.any_key(*arrays):
        ax = canonical_axis(axis, len(arrays[0].shape) + 1)
        return _random.map_key_data(lambda *d: stack(list(d), ax), *arrays)
    check_arraylike("stack", *arrays)
    arrays = [to_array(a) for a in arrays]
    shapes = {aval(a).shape for a in arrays}
    if len(shapes) != 1:
        fail(f"all input arrays must have the same shape, got {sorted(shapes)}", ValueError)
    ndim = aval(arrays[0]).ndim + 1
    ax = canonical_axis(axis, ndim)
    return concatenate([lax.expand_dims(a, (ax,)) for a in arrays], ax, dtype=dtype)


def split(ary, indices_or_sections, axis=0):
    check_arraylike("split", ary)
    ary = to_array(ary)
    shape = aval(ary).shape
    ax = canonical_axis(axis, len(shape))
    n = shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = int(indices_or_sections)
        if sections <= 0 or n % sections:
            fail("array split does not result in an equal division", ValueError)
        bounds = [i * (n // sections) for i in range(sections + 1)]
    else:
        points = [builtins.min(builtins.max(int(i) if i >= 0 else n + int(i), 0), n)
                  for i in indices_or_sections]
        bounds = [0] + points + [n]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        out.append(lax.slice_in_dim(ary, lo, builtins.max(lo, hi), 1, ax))
    return out


def flip(m, axis=None):
    m = to_array(m)
    return lax.rev(m, canonical_axes(axis, aval(m).ndim))


def astype(x, dtype, copy: bool = True):
    x = to_array(x)
    return lax.convert_element_type(x, dt.canonicalize(dtype))


def shape(a):
    return tuple(aval(to_array(a)).shape) if not hasattr(a, "shape") else tuple(a.shape)


def ndim(a):
    return len(shape(a))


def size(a, axis=None):
    s = shape(a)
    return int(np.prod(s)) if axis is None else s[axis]
