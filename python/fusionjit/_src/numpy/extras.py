"""The ``jax.numpy`` names RL and ML code reaches for after the array API, with JAX's
semantics: put_along_axis, bincount, diff, ediff1d, isin, digitize, interp, logspace,
geomspace, nanargmax, nanargmin, trapezoid, vander, ix_, issubdtype and NumPy's scalar type
hierarchy. Built on gather and scatter (bincount and put_along_axis are one scatter)."""

from __future__ import annotations

import operator

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src import errors
from fusionjit._src.eager import eager_jit
from fusionjit._src.numpy import reductions, shapes, sorting, ufuncs
from fusionjit._src.numpy.gather import take
from fusionjit._src.numpy.util import (aval, canonical_axis, check_arraylike, fail,
                                       promote_dtypes_inexact, to_array)

# NumPy's scalar type hierarchy and aliases, as jax.numpy re-exports them.
generic, number, inexact, floating = np.generic, np.number, np.inexact, np.floating
integer, signedinteger, unsignedinteger = np.integer, np.signedinteger, np.unsignedinteger
bool = np.bool_  # noqa: A001
float_, int_, uint, single, double = np.float64, np.int64, np.uint64, np.float32, np.float64


def issubdtype(arg1, arg2) -> bool:
    """``numpy.issubdtype`` that counts bfloat16 as a floating type (as JAX does)."""
    if dt.bfloat16 is not None and np.dtype(arg1) == dt.bfloat16 and not isinstance(arg2, str):
        if isinstance(arg2, type) and issubclass(np.floating, arg2):
            return True
    return np.issubdtype(arg1, arg2)


def put_along_axis(arr, indices, values, axis, inplace: bool = True, *, mode=None):
    """A copy of ``arr`` with ``values`` put at ``indices`` along ``axis`` (JAX: functional,
    so ``inplace=False`` is required)."""
    if inplace:
        fail("put_along_axis: JAX arrays are immutable; pass inplace=False to get the updated "
             "copy", ValueError)
    arr, indices = to_array(arr), to_array(indices)
    if axis is None:
        return put_along_axis(shapes.ravel(arr), shapes.ravel(indices), values, 0, False,
                              mode=mode).reshape(aval(arr).shape)
    ndim = aval(arr).ndim
    axis = canonical_axis(axis, ndim, "put_along_axis")
    if aval(indices).ndim != ndim:
        fail(f"put_along_axis: indices of rank {aval(indices).ndim} for an array of rank {ndim}",
             ValueError)
    index = []
    for d in range(ndim):
        if d == axis:
            index.append(indices)
        else:
            shape = [1] * ndim
            shape[d] = aval(arr).shape[d]
            index.append(shapes.reshape(shapes.arange(aval(arr).shape[d]), shape))
    return arr.at[tuple(index)].set(values, mode=mode)


def bincount(x, weights=None, minlength: int = 0, *, length=None):
    """Counts (or sums of ``weights``) of each non-negative integer in ``x``. Under jit
    ``length`` must be given (the output's size is static), as in JAX; negative values count
    as 0 and values >= length are dropped."""
    check_arraylike("bincount", x)
    x = to_array(x)
    if not dt.is_int(aval(x).dtype):
        fail(f"bincount: x must be integers, got {aval(x).dtype}")
    if aval(x).ndim != 1:
        fail(f"bincount: x must be 1-D, got shape {aval(x).shape}", ValueError)
    minlength = operator.index(minlength)
    if length is None:
        if isinstance(x, core.Tracer):
            fail("bincount: under jit the output's length must be static; pass length=",
                 errors.ConcretizationTypeError)
        top = int(np.max(np.asarray(x))) + 1 if aval(x).shape[0] else 0
        length = max(minlength, top)
    length = operator.index(length)
    if weights is None:
        weights, d = 1, dt.default_int()
    else:
        weights = to_array(weights)
        d = aval(weights).dtype
    return shapes.zeros(length, d).at[ufuncs.clip(x, 0)].add(weights, mode="drop")


@eager_jit("n", "axis")
def diff(a, n: int = 1, axis: int = -1, prepend=None, append=None):
    """The n-th discrete difference along ``axis`` (booleans: not_equal)."""
    a = to_array(a)
    axis = canonical_axis(axis, aval(a).ndim, "diff")
    parts = []
    for extra in (prepend, a, append):
        if extra is None:
            continue
        e = to_array(extra)
        if aval(e).ndim == 0:
            shape = list(aval(a).shape)
            shape[axis] = 1
            e = shapes.broadcast_to(e, shape)
        parts.append(e)
    if len(parts) > 1:
        a = shapes.concatenate(parts, axis)
    op = ufuncs.not_equal if dt.is_bool(aval(a).dtype) else ufuncs.subtract
    for _ in range(operator.index(n)):
        m = aval(a).shape[axis]
        hi = [slice(None)] * aval(a).ndim
        lo = [slice(None)] * aval(a).ndim
        hi[axis], lo[axis] = slice(1, m), slice(0, m - 1)
        a = op(a[tuple(hi)], a[tuple(lo)])
    return a


def ediff1d(ary, to_end=None, to_begin=None):
    """Differences of the flattened array, with optional values before and after."""
    d = diff(shapes.ravel(to_array(ary)))
    def flat(v):
        return shapes.ravel(shapes.asarray(v)).astype(aval(d).dtype)

    parts = [flat(to_begin)] if to_begin is not None else []
    parts.append(d)
    if to_end is not None:
        parts.append(flat(to_end))
    return shapes.concatenate(parts) if len(parts) > 1 else d


def isin(element, test_elements, assume_unique: bool = False, invert: bool = False, *,
         method: str = "auto"):
    """Whether each element of ``element`` is in ``test_elements`` (every pair compared)."""
    e, t = to_array(element), shapes.ravel(to_array(test_elements))
    found = reductions.any(ufuncs.equal(shapes.expand_dims(e, -1), t), axis=-1)
    return ufuncs.logical_not(found) if invert else found


def digitize(x, bins, right: bool = False, *, method=None):
    """The index of the bin each value falls in (increasing or decreasing ``bins``)."""
    x, bins = to_array(x), to_array(bins)
    if aval(bins).ndim != 1:
        fail(f"digitize: bins must be 1-D, got shape {aval(bins).shape}", ValueError)
    n = aval(bins).shape[0]
    if n == 0:
        return shapes.zeros(aval(x).shape, dt.default_int())
    side = "left" if right else "right"
    method = method or "scan"
    up = sorting.searchsorted(bins, x, side=side, method=method)
    down = n - sorting.searchsorted(shapes.flip(bins), x, side=side, method=method)
    return ufuncs.where(ufuncs.greater_equal(bins[-1], bins[0]), up, down)


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of (xp, fp) at x, as ``jnp.interp`` (flat outside the
    range unless ``left``/``right`` are given)."""
    if period is not None:
        fail("interp: period= is not supported", NotImplementedError)
    x, xp, fp = to_array(x), to_array(xp), to_array(fp)
    if aval(xp).ndim != 1 or aval(fp).shape != aval(xp).shape:
        fail(f"interp: xp and fp must be 1-D of one length, got {aval(xp).shape} and "
             f"{aval(fp).shape}", ValueError)
    x, xp, fp = promote_dtypes_inexact(x, xp, fp)
    d = aval(x).dtype
    n = aval(xp).shape[0]
    i = ufuncs.clip(sorting.searchsorted(xp, x, side="right"), 1, n - 1)
    x0, x1, f0, f1 = take(xp, i - 1), take(xp, i), take(fp, i - 1), take(fp, i)
    dx = x1 - x0
    flat = ufuncs.less_equal(ufuncs.absolute(dx), float(np.spacing(dt.finfo(d).eps)))
    f = ufuncs.where(flat, f0, f0 + (x - x0) / ufuncs.where(flat, 1, dx) * (f1 - f0))
    f = ufuncs.where(ufuncs.less(x, xp[0]), fp[0] if left is None else left, f)
    return ufuncs.where(ufuncs.greater(x, xp[-1]), fp[-1] if right is None else right, f)


@eager_jit("num", "endpoint", "dtype", "axis")
def logspace(start, stop, num: int = 50, endpoint: bool = True, base=10.0, dtype=None,
             axis: int = 0):
    """``base ** linspace(start, stop, num)``."""
    out = ufuncs.power(base, shapes.linspace(start, stop, num, endpoint, axis=axis))
    return out if dtype is None else out.astype(dtype)


@eager_jit("num", "endpoint", "dtype", "axis")
def geomspace(start, stop, num: int = 50, endpoint: bool = True, dtype=None, axis: int = 0):
    """Numbers evenly spaced on a log scale from ``start`` to ``stop`` (of one sign)."""
    start, stop = to_array(start), to_array(stop)
    sign = ufuncs.sign(start)
    logs = shapes.linspace(ufuncs.log10(ufuncs.absolute(start)),
                           ufuncs.log10(ufuncs.absolute(stop)), num, endpoint, axis=axis)
    # The sign of each start, along the new samples axis too.
    bounds = np.broadcast_shapes(aval(start).shape, aval(stop).shape)
    sign = shapes.expand_dims(shapes.broadcast_to(sign, bounds),
                              canonical_axis(axis, len(bounds) + 1))
    out = sign * ufuncs.power(10.0, logs)
    return out if dtype is None else out.astype(dtype)


def _nanarg(name, arg, fill):
    def fn(a, axis=None, out=None, keepdims=None):
        reductions.no_out(name, out)
        a = to_array(a)
        if not dt.is_float(aval(a).dtype):
            return arg(a, axis=axis, keepdims=keepdims)
        nan = ufuncs.isnan(a)
        res = arg(ufuncs.where(nan, fill, a), axis=axis, keepdims=keepdims)
        return ufuncs.where(reductions.all(nan, axis=axis, keepdims=keepdims), -1, res)
    fn.__name__ = name
    fn.__doc__ = f"``{arg.__name__}`` ignoring NaNs; -1 where a slice is all NaN (as JAX)."
    return fn


nanargmax = _nanarg("nanargmax", reductions.argmax, -np.inf)
nanargmin = _nanarg("nanargmin", reductions.argmin, np.inf)


def trapezoid(y, x=None, dx=1.0, axis: int = -1):
    """The integral of ``y`` by the trapezoidal rule along ``axis``."""
    y = to_array(y)
    axis = canonical_axis(axis, aval(y).ndim, "trapezoid")
    m = aval(y).shape[axis]
    hi = [slice(None)] * aval(y).ndim
    lo = [slice(None)] * aval(y).ndim
    hi[axis], lo[axis] = slice(1, m), slice(0, m - 1)
    step = dx if x is None else diff(x, axis=axis if aval(to_array(x)).ndim > 1 else -1)
    if x is not None and aval(to_array(x)).ndim == 1 and aval(y).ndim > 1:
        shape = [1] * aval(y).ndim
        shape[axis] = m - 1
        step = shapes.reshape(step, shape)
    return reductions.sum((y[tuple(hi)] + y[tuple(lo)]) * step / 2.0, axis=axis)


def vander(x, N=None, increasing: bool = False):
    """The Vandermonde matrix of the 1-D ``x``: columns x**(N-1) ... x**0 (or increasing)."""
    x = to_array(x)
    if aval(x).ndim != 1:
        fail(f"vander: x must be 1-D, got shape {aval(x).shape}", ValueError)
    n = aval(x).shape[0] if N is None else operator.index(N)
    powers = shapes.arange(n) if increasing else shapes.arange(n - 1, -1, -1)
    return ufuncs.power(shapes.expand_dims(x, 1), powers.astype(aval(x).dtype))


def ix_(*args):
    """Open-mesh index arrays: the k-th of n 1-D arrays reshaped to (1, .., len, .., 1)."""
    out = []
    for k, a in enumerate(args):
        a = to_array(a)
        if aval(a).ndim != 1:
            fail(f"ix_: arguments must be 1-D, got shape {aval(a).shape}", ValueError)
        shape = [1] * len(args)
        shape[k] = aval(a).shape[0]
        out.append(shapes.reshape(a, shape))
    return tuple(out)
