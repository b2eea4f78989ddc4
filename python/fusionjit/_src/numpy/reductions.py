"""Reductions: sum, prod, max, min, mean, argmax, argmin, any, all."""

from __future__ import annotations

import builtins

import numpy as np

from fusionjit._src import dtypes as dt
from fusionjit._src.lax import lax
from fusionjit._src.eager import eager_jit
from fusionjit._src.numpy.util import (aval, broadcast_to_shape, canonical_axes, canonical_axis,
                                       check_arraylike, fail, to_array)


def _keepdims(result, shape, axes):
    kept = tuple(1 if i in axes else d for i, d in enumerate(shape))
    return lax.reshape(result, kept)


def no_out(name, out):
    """NumPy's out= cannot be honoured (fusionjit arrays are immutable): an error, as in
    JAX, rather than an ignored argument."""
    if out is not None:
        fail(f"{name}(out=...) is not supported: fusionjit arrays are immutable",
             NotImplementedError)


def mask(where, shape):
    """A reduction's ``where=`` as a boolean array of ``shape`` (NumPy broadcasting)."""
    w = to_array(where)
    if not dt.is_bool(aval(w).dtype):
        w = lax.ne(w, to_array(0, aval(w).dtype))
    return broadcast_to_shape(w, shape)


def masked(a, where, fill):
    """``a`` where ``where`` holds, else ``fill`` (a value of a's dtype): what a reduction
    with ``where=`` reduces."""
    if where is None:
        return a
    d = aval(a).dtype
    return lax.select(mask(where, aval(a).shape), a,
                      lax.full(aval(a).shape, np.array(fill).astype(d), d))


def _promoted_integers(d):
    """JAX's ``promote_integers``: booleans and integers narrower than the default integer
    are summed (multiplied) in it, unsigned ones in the default unsigned integer; None
    where ``d`` is kept."""
    if dt.is_bool(d):
        return dt.default_int()
    if dt.is_int(d):
        wide = dt.default_int() if dt.is_signed(d) else dt.default_uint()
        if np.dtype(d).itemsize < np.dtype(wide).itemsize:
            return wide
    return None


def _reduction(name, lax_fn, upcast_small_ints: bool, identity: bool):
    def fn(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
           promote_integers=True):
        check_arraylike(name, a)
        no_out(name, out)
        a = to_array(a)
        shape = aval(a).shape
        axes = canonical_axes(axis, len(shape))
        if dtype is not None:
            a = lax.convert_element_type(a, dt.canonicalize(dtype))
        elif upcast_small_ints and (promote_integers or dt.is_bool(aval(a).dtype)):
            wide = _promoted_integers(aval(a).dtype)
            if wide is not None:
                a = lax.convert_element_type(a, wide)
        if not identity and initial is None and (
                where is not None or builtins.any(shape[i] == 0 for i in axes)):
            fail(f"reduction operation {name} has no identity: "
                 + ("with where=, give initial=" if where is not None else
                    "a zero-size array needs initial="), ValueError)
        if where is not None:
            fill = {"sum": 0, "prod": 1}.get(name)
            extreme = dt.highest if name == "min" else dt.lowest
            a = masked(a, where, extreme(aval(a).dtype) if fill is None else fill)
        result = lax_fn(a, axes)
        if initial is not None:
            from fusionjit._src.numpy import ufuncs
            combine = {"sum": ufuncs.add, "prod": ufuncs.multiply, "max": ufuncs.maximum,
                       "min": ufuncs.minimum}[name]
            d = aval(result).dtype   # initial takes the result's dtype, as in JAX
            result = combine(result, to_array(np.asarray(initial).astype(d), d,
                                              aval(result).weak_type))
        if keepdims:
            result = _keepdims(result, shape, axes)
        return result
    fn.__name__ = name
    fn.__doc__ = f"NumPy's ``{name}`` over ``axis`` (None: all axes)." + (
        " Booleans and narrow integers are reduced in the default (unsigned) integer type, "
        "as JAX (``promote_integers=False``: in their own)." if upcast_small_ints else "")
    return fn


sum = _reduction("sum", lax.reduce_sum, True, True)  # noqa: A001
prod = _reduction("prod", lax.reduce_prod, True, True)
max = _reduction("max", lax.reduce_max, False, False)  # noqa: A001
min = _reduction("min", lax.reduce_min, False, False)  # noqa: A001
amax, amin = max, min


def _logical(name, lax_fn):
    def fn(a, axis=None, out=None, keepdims=False, *, where=None):
        check_arraylike(name, a)
        no_out(name, out)
        a = to_array(a)
        if not dt.is_bool(aval(a).dtype):
            a = lax.ne(a, to_array(0, aval(a).dtype))
        a = masked(a, where, name == "all")   # masked out: neutral
        shape = aval(a).shape
        axes = canonical_axes(axis, len(shape))
        result = lax_fn(a, axes)
        return _keepdims(result, shape, axes) if keepdims else result
    fn.__name__ = name
    return fn


any = _logical("any", lax.reduce_or)  # noqa: A001
all = _logical("all", lax.reduce_and)  # noqa: A001


@eager_jit("axis", "dtype", "out", "keepdims")
def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """The arithmetic mean; integers are averaged in the default float type."""
    check_arraylike("mean", a)
    no_out("mean", out)
    a = to_array(a)
    shape = aval(a).shape
    axes = canonical_axes(axis, len(shape))
    count = 1
    for i in axes:
        count *= shape[i]
    if dtype is None:
        dtype = dt.to_inexact(aval(a).dtype)
    dtype = dt.canonicalize(dtype)
    computed = dt.computation_float(dtype)  # (as JAX: 16-bit floats summed in float32)
    weak = aval(a).weak_type
    total = sum(lax.convert_element_type(a, computed, weak), axis=axes, keepdims=keepdims,
                where=where)
    if where is not None:   # the number of elements where= keeps (0: NaN, as JAX)
        kept = lax.convert_element_type(mask(where, shape), computed)
        result = lax.div(total, sum(kept, axis=axes, keepdims=keepdims))
    else:
        result = lax.div(total, to_array(count, computed, aval(total).weak_type))
    return lax.convert_element_type(result, dtype, weak)


def _arg(name, lax_fn):
    def fn(a, axis=None, out=None, keepdims=False):
        check_arraylike(name, a)
        no_out(name, out)
        a = to_array(a)
        if axis is None:
            shape = aval(a).shape
            flat = lax.reshape(a, (aval(a).size,))
            result = lax_fn(flat, 0, dt.default_int())
            return lax.reshape(result, (1,) * len(shape)) if keepdims else result
        shape = aval(a).shape
        ax = canonical_axis(axis, len(shape))
        if shape[ax] == 0:
            fail(f"attempt to get {name} of an empty sequence", ValueError)
        result = lax_fn(a, ax, dt.default_int())
        return _keepdims(result, shape, (ax,)) if keepdims else result
    fn.__name__ = name
    return fn


argmax = _arg("argmax", lax.argmax)
argmin = _arg("argmin", lax.argmin)
