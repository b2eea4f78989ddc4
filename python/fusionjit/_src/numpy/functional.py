"""Applying Python functions over arrays, as ``jax.numpy`` does: vectorize (with gufunc
signatures), apply_along_axis, apply_over_axes and fromfunction, and the gufunc-shaped
products matvec and vecmat. As in JAX, the function is batched with ``vmap`` over the
flattened batch: it is written for one element (or one core-shaped slice) and runs
vectorised across the batch, whatever it does (``lambda v: v / v.sum()`` included)."""

from __future__ import annotations

import functools
import math
import re

from fusionjit._src import dtypes as dt
from fusionjit._src.numpy import products, shapes
from fusionjit._src.numpy.util import (aval, broadcast_shapes, canonical_axis,
                                       check_arraylike, fail, shape_arg, to_array)

_DIM = r"\w+"
_CORE_DIMS = rf"(?:{_DIM}(?:,{_DIM})*)?"
_ARG = rf"\({_CORE_DIMS}\)"
_ARGS = rf"{_ARG}(?:,{_ARG})*"
_SIGNATURE = rf"^{_ARGS}->{_ARGS}$"


def _parse_signature(signature: str):
    """([core dims of each input], [core dims of each output]) of '(m,n),(n)->(m)'."""
    sig = signature.replace(" ", "")
    if not re.match(_SIGNATURE, sig):
        fail(f"vectorize: not a valid gufunc signature: {signature!r}", ValueError)
    ins, outs = sig.split("->")
    def parse(part):
        return [tuple(re.findall(_DIM, a)) for a in re.findall(_ARG, part)]

    return parse(ins), parse(outs)


def _bind_core_dims(sizes: dict, shape, core_dims, what: str, context: str):
    """Checks ``shape`` ends in ``core_dims`` consistently with ``sizes`` (updated)."""
    if len(shape) < len(core_dims):
        fail(f"vectorize: {what} has shape {shape}, fewer dimensions than its core "
             f"dimensions {core_dims} {context}", ValueError)
    core_shape = shape[len(shape) - len(core_dims):]
    for name, size in zip(core_dims, core_shape):
        if sizes.setdefault(name, size) != size:
            fail(f"vectorize: core dimension {name!r} has size {size} in {what} but "
                 f"{sizes[name]} elsewhere {context}", ValueError)


def _apply_excluded(func, excluded, args, kwargs):
    """``func`` with the excluded positional and keyword arguments bound, and the rest."""
    if not excluded:
        return func, list(args), kwargs
    dynamic = [a for i, a in enumerate(args) if i not in excluded]
    static = [(i, args[i]) for i in sorted(e for e in excluded if isinstance(e, int))
              if i < len(args)]
    static_kwargs = {k: v for k, v in kwargs.items() if k in excluded}
    dynamic_kwargs = {k: v for k, v in kwargs.items() if k not in excluded}

    def bound(*xs, **kw):
        xs = list(xs)
        for i, a in static:
            xs.insert(i, a)
        return func(*xs, **kw, **static_kwargs)
    return bound, dynamic, dynamic_kwargs


def _as_output(out):
    return tuple(shapes.asarray(o) for o in out) if isinstance(out, tuple) else \
        shapes.asarray(out)


def _map_over_batch(func, args, core_ndims, batch):
    """``func`` applied to each batch element of ``args`` (each ``batch + core`` shaped or
    broadcastable to it): vmapped over the flattened batch, or a single call where no
    argument varies over it. Returns the outputs with ``batch`` in front."""
    count = math.prod(batch)
    fixed, mapped = {}, []
    for i, (a, k) in enumerate(zip(args, core_ndims)):
        shape = aval(a).shape
        core = shape[len(shape) - k:] if k else ()
        if all(d == 1 for d in shape[:len(shape) - k]):
            fixed[i] = shapes.reshape(a, core)
        else:
            full = shapes.broadcast_to(a, batch + core)
            mapped.append((i, shapes.reshape(full, (count,) + core)))

    def one(xs):
        full = dict(fixed)
        full.update(zip((i for i, _ in mapped), xs))
        return _as_output(func(*(full[i] for i in range(len(args)))))

    if mapped:
        from fusionjit._src.batching import vmap
        out = vmap(one)(tuple(m for _, m in mapped))
        def unflatten(o):
            return shapes.reshape(o, batch + aval(o).shape[1:])
    else:
        out = one(())
        def unflatten(o):
            return shapes.broadcast_to(o, batch + aval(o).shape)
    return tuple(unflatten(o) for o in out) if isinstance(out, tuple) else unflatten(out)


def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
    """``pyfunc`` made to broadcast over its array arguments, as ``jnp.vectorize``: without
    a ``signature`` it sees one element of each (broadcast) argument at a time; with a
    gufunc ``signature`` such as ``'(n),(n)->()'`` it sees the trailing core dimensions
    whole. ``excluded`` names positional indices or keywords passed through unchanged;
    other keyword arguments are passed through unchanged too (JAX drops them). The function
    is vmapped over the broadcast batch."""
    if any(not isinstance(e, (str, int)) for e in excluded):
        fail(f"vectorize can only exclude integer or string arguments, got {excluded!r}")
    if any(isinstance(e, int) and e < 0 for e in excluded):
        fail(f"vectorize: excluded={excluded!r} contains negative numbers", ValueError)
    parsed = _parse_signature(signature) if signature is not None else None

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        context = f"(vectorize with excluded={excluded!r}, signature={signature!r})"
        func, args, kwargs = _apply_excluded(pyfunc, excluded, args, kwargs)
        in_dims, out_dims = parsed if parsed is not None else ([()] * len(args), None)
        if len(in_dims) != len(args):
            fail(f"vectorize: the signature has {len(in_dims)} inputs but the function got "
                 f"{len(args)} array arguments {context}", TypeError)
        nones = {i for i, a in enumerate(args) if a is None}
        if nones:
            if any(in_dims[i] for i in nones):
                fail(f"vectorize: None passed at {sorted(nones)} {context}", ValueError)
            func, args, _ = _apply_excluded(func, nones, args, {})
            in_dims = [d for i, d in enumerate(in_dims) if i not in nones]
        args = [shapes.asarray(a) for a in args]
        sizes: dict = {}
        batches = []
        for i, (a, dims) in enumerate(zip(args, in_dims)):
            shape = aval(a).shape
            _bind_core_dims(sizes, shape, dims, f"argument {i}", context)
            batches.append(shape[:len(shape) - len(dims)])
        batch = broadcast_shapes(*batches)

        def checked(*xs):
            out = func(*xs, **kwargs)
            if out_dims is None:
                return out
            outs = out if isinstance(out, tuple) else (out,)
            if len(out_dims) > 1 and not isinstance(out, tuple):
                fail(f"vectorize: the function must return a tuple of {len(out_dims)} outputs "
                     f"{context}", TypeError)
            if len(outs) != len(out_dims):
                fail(f"vectorize: the function returned {len(outs)} outputs, the signature "
                     f"names {len(out_dims)} {context}", TypeError)
            out_sizes = dict(sizes)
            for k, (o, dims) in enumerate(zip(outs, out_dims)):
                _bind_core_dims(out_sizes, aval(shapes.asarray(o)).shape, dims,
                                f"output {k}", context)
            return out

        if not batch:
            return _as_output(checked(*args))
        return _map_over_batch(checked, args, [len(d) for d in in_dims], batch)
    return wrapped


def apply_along_axis(func1d, axis: int, arr, *args, **kwargs):
    """``func1d(row, *args, **kwargs)`` for each 1-D slice of ``arr`` along ``axis``; the
    result's dimensions take ``axis``'s place (vmapped over the other dimensions)."""
    check_arraylike("apply_along_axis", arr)
    arr = to_array(arr)
    ndim = aval(arr).ndim
    axis = canonical_axis(axis, ndim, "apply_along_axis")
    moved = shapes.moveaxis(arr, axis, -1)
    batch = aval(moved).shape[:-1]
    if not batch:
        return shapes.asarray(func1d(arr, *args, **kwargs))
    out = _map_over_batch(lambda row: func1d(row, *args, **kwargs), [moved], [1], batch)
    if isinstance(out, tuple):
        fail("apply_along_axis: func1d must return one array, not a tuple", TypeError)
    out_ndim = aval(out).ndim - len(batch)
    # (before..., after..., result...) -> (before..., result..., after...)
    before, after = axis, len(batch) - axis
    perm = (list(range(before)) + list(range(len(batch), len(batch) + out_ndim))
            + list(range(before, before + after)))
    return shapes.transpose(out, perm)


def apply_over_axes(func, a, axes):
    """``func(a, axis)`` applied for each axis in turn, each result keeping ``a``'s rank
    (a reduced axis comes back as size 1), as ``numpy.apply_over_axes``."""
    check_arraylike("apply_over_axes", a)
    a = to_array(a)
    for axis in (axes,) if isinstance(axes, int) else axes:
        b = shapes.asarray(func(a, axis))
        if aval(b).ndim == aval(a).ndim - 1:
            b = shapes.expand_dims(b, axis)
        elif aval(b).ndim != aval(a).ndim:
            fail(f"apply_over_axes: func returned shape {aval(b).shape} for an array of shape "
                 f"{aval(a).shape}; it must keep the rank or drop the axis", ValueError)
        a = b
    return a


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """``function`` evaluated at each index of an array of ``shape``: it is called with one
    index per dimension (scalars of ``dtype``, vmapped as in JAX; see ``vectorize``).
    ``kwargs`` are passed to it unchanged."""
    shape = shape_arg(shape, "fromfunction")
    d = dt.canonicalize(dtype)
    grids = []
    for i, n in enumerate(shape):
        index_shape = [1] * len(shape)
        index_shape[i] = n
        grids.append(shapes.reshape(shapes.arange(n, dtype=d), index_shape))
    return vectorize(functools.partial(function, **kwargs))(*grids)


def matvec(x1, x2, /):
    """Batched matrix-vector products: ``x1`` (..., n, m) times ``x2`` (..., m) gives
    (..., n), batch dimensions broadcasting (NumPy 2.2's ``matvec``)."""
    check_arraylike("matvec", x1, x2)
    x1, x2 = to_array(x1), to_array(x2)
    if aval(x1).ndim < 2 or aval(x2).ndim < 1:
        fail(f"matvec: needs a matrix and a vector, got shapes {aval(x1).shape} and "
             f"{aval(x2).shape}", ValueError)
    return products.matmul(x1, shapes.expand_dims(x2, -1))[..., 0]


def vecmat(x1, x2, /):
    """Batched vector-matrix products: ``x1`` (..., n) times ``x2`` (..., n, m) gives
    (..., m), batch dimensions broadcasting (NumPy 2.2's ``vecmat``; real arrays, so no
    conjugation)."""
    check_arraylike("vecmat", x1, x2)
    x1, x2 = to_array(x1), to_array(x2)
    if aval(x1).ndim < 1 or aval(x2).ndim < 2:
        fail(f"vecmat: needs a vector and a matrix, got shapes {aval(x1).shape} and "
             f"{aval(x2).shape}", ValueError)
    return products.matmul(shapes.expand_dims(x1, -2), x2)[..., 0, :]
