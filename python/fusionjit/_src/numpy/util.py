"""Helpers of the NumPy layer: argument checking, promotion and broadcasting."""

from __future__ import annotations

import functools
import operator
from typing import Sequence

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src import errors
from fusionjit._src.lax import lax
from fusionjit._src.eager import jitted, outside_traces


def fail(message: str, exc_type=TypeError):
    raise exc_type(errors.located(message))


def is_arraylike(x) -> bool:
    return (isinstance(x, (core.Tracer, np.ndarray, np.generic, bool, int, float))
            or core.is_concrete_array(x))


def check_arraylike(name: str, *args):
    for i, a in enumerate(args):
        if not is_arraylike(a):
            if isinstance(a, (list, tuple)):
                fail(f"{name}() needs array arguments; argument {i} is a {type(a).__name__} "
                     f"(wrap it with fusionjit.numpy.asarray)")
            fail(f"{name}() needs array arguments; argument {i} has type {type(a).__name__}")


def aval(x) -> core.ShapedArray:
    return core.get_aval(x)


def to_array(x, dtype=None, weak=None):
    """An array operand of exactly ``dtype`` (if given) and weak flag."""
    if isinstance(x, (core.Tracer,)) or core.is_concrete_array(x):
        a = aval(x)
        if dtype is not None and (a.dtype != dtype or (weak is not None and a.weak_type != weak)):
            return lax.convert_element_type(x, dtype, a.weak_type if weak is None else weak)
        return x
    if isinstance(x, np.ndarray):
        from fusionjit._src import array as array_mod
        return array_mod.from_numpy(x, dtype, weak_type=bool(weak))
    info = dt.scalar_info(x)
    if info is None:
        fail(f"expected an array or a number, got {type(x).__name__}")
    d, w = info
    d = d if dtype is None else dtype
    w = w if weak is None else weak
    if isinstance(x, int) and not isinstance(x, bool) and dt.is_int(d):
        dt.check_int_range(x, d, errors.user_location())
    from fusionjit._src import array as array_mod
    return array_mod.scalar(x, d, w)


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, d in enumerate(s):
            j = ndim - len(s) + i
            if out[j] == 1:
                out[j] = d
            elif d != 1 and d != out[j]:
                fail("operands could not be broadcast together with shapes "
                     + " ".join(str(tuple(s)) for s in shapes), ValueError)
    return tuple(out)


def broadcast_to_shape(x, shape):
    a = aval(x)
    if a.shape == tuple(shape):
        return x
    if len(a.shape) > len(shape):
        fail(f"cannot broadcast an array of shape {a.shape} to shape {tuple(shape)}", ValueError)
    offset = len(shape) - len(a.shape)
    for i, d in enumerate(a.shape):
        if d != 1 and d != shape[offset + i]:
            fail(f"cannot broadcast an array of shape {a.shape} to shape {tuple(shape)}",
                 ValueError)
    return lax.broadcast_in_dim(x, tuple(shape), tuple(range(offset, len(shape))))


def promote_dtypes(*args):
    """Converts every argument to the promoted dtype (JAX's lattice, weak scalars)."""
    avals = [aval(a) for a in args]
    d, weak = dt.promote((a.dtype, a.weak_type) for a in avals)
    if dt.is_int(d):  # int8_array + 200: 200 wraps into int8 (-56), as in JAX
        args = [dt.weak_int_value(a, d, errors.user_location())
                if isinstance(a, int) and not isinstance(a, bool) else a for a in args]
    return [to_array(a, d, weak) for a in args]


def promote_dtypes_inexact(*args):
    """Like promote_dtypes, then integers and bools become floats (dt.to_inexact)."""
    avals = [aval(a) for a in args]
    d, weak = dt.promote((a.dtype, a.weak_type) for a in avals)
    d = dt.to_inexact(d)
    return [to_array(a, d, weak) for a in args]


def promote_shapes(*args):
    shape = broadcast_shapes(*(aval(a).shape for a in args))
    return [broadcast_to_shape(a, shape) for a in args]


def _as_promoted(args, inexact: bool):
    """``args`` themselves where promotion leaves them as they are: arrays or tracers of one
    shape, dtype and weak flag that promote to that dtype and flag (fnp.tanh(x), x * y;
    promoted step by step, an eager tanh spent more time here than running its kernel)."""
    first = None
    for a in args:
        if not isinstance(a, core.Tracer) and not core.is_concrete_array(a):
            return None
        av = core.get_aval(a)
        if first is None:
            first = av
        elif av != first:
            return None
    if first is None:
        return None
    d, weak = dt.promote(((first.dtype, first.weak_type),))
    if inexact:
        d = dt.to_inexact(d)
    return list(args) if d == first.dtype and weak == first.weak_type else None


def as_one_program(fn, *args):
    """``fn(*args)`` run as one jitted program where it is called outside any trace (JAX's
    jnp functions are jit-wrapped), else None. Run eagerly, each step is a primitive
    dispatched on its own, a conversion or broadcast included: an eager ``x + 1.0`` was a
    broadcast then an add, 40 us, and ``fnp.tanh(x)`` 32 us against 3 us jitted. Where the
    program cannot be built or run (an integer out of int32's range, a misuse), None as
    well: ``fn`` then runs eagerly and raises its own error."""
    if not outside_traces() or not all(map(is_arraylike, args)):
        return None
    try:
        return jitted(fn, ())(*args)
    except Exception:
        return None


def one_program(fn):
    """Decorates a function of array arguments (positional only) to run as one program
    when called outside any trace (as_one_program): an eager ``fnp.arcsinh(x)`` was a dozen
    primitives dispatched one by one, 400 us for 64x64."""
    @functools.wraps(fn)
    def wrapper(*args):
        out = as_one_program(fn, *args)
        return fn(*args) if out is None else out
    wrapper.eager_jit = True  # (eager_namespace leaves it as it is)
    return wrapper


def promote_args(name: str, *args):
    same = _as_promoted(args, inexact=False)
    if same is not None:
        return same
    check_arraylike(name, *args)
    return promote_shapes(*promote_dtypes(*args))


def promote_args_inexact(name: str, *args):
    same = _as_promoted(args, inexact=True)
    if same is not None:
        return same
    check_arraylike(name, *args)
    return promote_shapes(*promote_dtypes_inexact(*args))


def canonical_axis(axis, ndim: int, name: str = "axis") -> int:
    try:
        axis = operator.index(axis)
    except TypeError:
        fail(f"{name} must be an integer, got {type(axis).__name__}")
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        fail(f"{name} {axis} is out of bounds for an array of dimension {ndim}", ValueError)
    return axis % ndim if ndim else 0


def canonical_axes(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        axes = tuple(canonical_axis(a, ndim) for a in axis)
        if len(set(axes)) != len(axes):
            fail(f"repeated axis in {tuple(axis)}", ValueError)
        return axes
    return (canonical_axis(axis, ndim),)


def shape_arg(shape, caller: str | None = None) -> tuple[int, ...]:
    """A shape argument as a tuple of ints (an int is a 1-d shape); errors name `caller`."""
    where = f"{caller}(): " if caller else ""
    if isinstance(shape, (int, np.integer)) or (core.is_concrete_array(shape) and shape.ndim == 0):
        shape = (shape,)
    try:
        out = tuple(operator.index(d) for d in shape)
    except TypeError:
        fail(f"{where}a shape must be a tuple of integers, got {shape!r}")
    if any(d < 0 for d in out):
        fail(f"{where}negative dimensions are not allowed: {out}", ValueError)
    return out
