"""Collectives over the named axes of ``vmap`` (``vmap(f, axis_name='i')``), as ``jax.lax``:
``psum``, ``pmean``, ``pmax``, ``pmin``, ``all_gather``, ``axis_index`` and ``axis_size``.

Each is a primitive whose parameters name its axes. While ``f`` is traced for one example
the primitive is only recorded (its abstract value is known: the sizes of the bound axes
are); when vmap batches the program (batching.py), the rule of the axis being batched does
the work across the batch axis: a reduction over it (psum, pmax, pmin), moving it into place
(all_gather), or an iota (axis_index). Names of enclosing vmaps are left to those: nested
vmaps with two names, and a tuple of names, reduce over each in turn. The derivative of a
psum is the psum of its cotangent, of an all_gather the example's slice of the psum of its
cotangent (so ``grad`` inside and outside the vmap both work, and ``jvp``). pmax and pmin
have none inside the vmap, as in JAX; outside it (``grad(vmap(f, axis_name='i'))``) they
are already the max over the batch axis, differentiated as that (JAX raises there too). A
name no enclosing vmap binds raises NameError, as JAX's."""

from __future__ import annotations

import math

import numpy as np

from fusionjit._src import batching, core, errors, tree_util
from fusionjit._src import dtypes as dt
from fusionjit._src.autodiff import defvjp
from fusionjit._src.lax import elementwise as ew
from fusionjit._src.lax import reductions as red
from fusionjit._src.lax import shapes as sh
from fusionjit._src.lax.common import asarray_operand
from fusionjit._src.lowering import register

psum_p = core.Primitive("psum")
pmax_p = core.Primitive("pmax")
pmin_p = core.Primitive("pmin")
all_gather_p = core.Primitive("all_gather")
axis_index_p = core.Primitive("axis_index")


def _same(x, *, axes):
    return x


for _p in (psum_p, pmax_p, pmin_p):
    _p.def_abstract_eval(_same)
    batching.NAMED[_p] = lambda params: params["axes"]


@all_gather_p.def_abstract_eval
def _all_gather_abstract_eval(x, *, axes, axis, axis_size):
    return core.ShapedArray(x.shape[:axis] + (axis_size,) + x.shape[axis:], x.dtype,
                            x.weak_type)


@axis_index_p.def_abstract_eval
def _axis_index_abstract_eval(*, axis_name):
    return core.ShapedArray((), dt.int32, False)


batching.NAMED[all_gather_p] = lambda params: params["axes"]
batching.NAMED[axis_index_p] = lambda params: (params["axis_name"],)
batching.INTRODUCE.add(axis_index_p)


def _unbound_lowering(prim):
    @register(prim)
    def lower(ctx, avals_in, avals_out, *args, **params):
        names = params.get("axes", (params.get("axis_name"),))
        raise NameError(f"{prim.name} over the axis {names[0]!r} outside the vmap that binds "
                        f"it: a collective runs only inside vmap(..., axis_name=...)")
    return lower


for _p in (psum_p, pmax_p, pmin_p, all_gather_p, axis_index_p):
    _unbound_lowering(_p)


# --- batching: the rule of the axis being batched ---------------------------------------

def _reduction_rule(prim, reduce, unbatched):
    def rule(size, vals, bats, *, axes):
        x, b = vals[0], bats[0]
        name = batching.current_axis()
        if name not in axes:  # an enclosing vmap's axis: per example, for it to reduce
            return prim.bind(x, axes=axes), b
        x = reduce(x, (0,)) if b else unbatched(x, size)
        rest = tuple(a for a in axes if a != name)
        return (prim.bind(x, axes=rest) if rest else x), False
    return rule


def _times(x, size):
    a = core.get_aval(x)
    return ew.mul(x, red.full(a.shape, size, a.dtype))


batching.defbatch(psum_p)(_reduction_rule(psum_p, red.reduce_sum, _times))
batching.defbatch(pmax_p)(_reduction_rule(pmax_p, red.reduce_max, lambda x, n: x))
batching.defbatch(pmin_p)(_reduction_rule(pmin_p, red.reduce_min, lambda x, n: x))


@batching.defbatch(all_gather_p)
def _all_gather_batch(size, vals, bats, *, axes, axis, axis_size):
    x, b = vals[0], bats[0]
    if batching.current_axis() != axes[0]:
        return all_gather_p.bind(x, axes=axes, axis=axis + 1, axis_size=axis_size), b
    if b:  # the batch axis is the gathered axis: move it into place
        return batching.move_axis(x, 0, axis), False
    shape = core.get_aval(x).shape
    out = shape[:axis] + (size,) + shape[axis:]
    return sh.broadcast_in_dim(x, out, tuple(d for d in range(len(out)) if d != axis)), False


@batching.defbatch(axis_index_p)
def _axis_index_batch(size, vals, bats, *, axis_name):
    if batching.current_axis() != axis_name:
        return axis_index_p.bind(axis_name=axis_name), False
    return sh.iota(dt.int32, size), True


# --- derivatives ------------------------------------------------------------------------

@defvjp(psum_p)
def _psum_vjp(ct, invals, out, *, axes):
    return [psum_p.bind(ct, axes=axes)]


@defvjp(all_gather_p)
def _all_gather_vjp(ct, invals, out, *, axes, axis, axis_size):
    # Example k's value reaches slot k of every example's result.
    total = psum_p.bind(ct, axes=axes)
    index = axis_index_p.bind(axis_name=axes[0])
    return [sh.dynamic_index_in_dim(total, index, axis, keepdims=False)]


def _not_differentiable(prim):
    @defvjp(prim)
    def rule(ct, invals, out, **params):
        raise NotImplementedError(errors.located(
            f"differentiation rule for '{prim.name}' not implemented (as in JAX); wrap its "
            f"operand in lax.stop_gradient if no gradient is needed", errors.user_location()))
    return rule


_not_differentiable(pmax_p)
_not_differentiable(pmin_p)


# --- the public functions ---------------------------------------------------------------

def _fail(message: str, exc_type=ValueError):
    raise exc_type(errors.located(message, errors.user_location()))


def _names(fn: str, axis_name) -> tuple:
    """The axis names (a tuple), each bound by an enclosing vmap, else NameError."""
    names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    bound = dict(batching.bound_axes())
    for n in names:
        if n not in bound:
            have = [k for k, _ in batching.bound_axes()]
            raise NameError(errors.located(
                f"unbound axis name: {n!r}. {fn} works over the axis of an enclosing "
                f"vmap(..., axis_name={n!r}); the names bound here are {have}",
                errors.user_location()))
    return names


def _sizes(names) -> list:
    bound = dict(batching.bound_axes())
    return [bound[n] for n in names]


def _no_groups(fn: str, axis_index_groups):
    if axis_index_groups is not None:
        _fail(f"{fn}: axis_index_groups is not supported", NotImplementedError)


def _operand(x):
    x = asarray_operand(x)
    if dt.is_bool(core.get_aval(x).dtype):  # as JAX: a count
        x = ew.convert_element_type(x, dt.int32)
    return x


def psum(x, axis_name, *, axis_index_groups=None):
    """``jax.lax.psum``: the sum of ``x`` (a pytree of arrays) over the examples of the
    named vmap axes (booleans counted as int32)."""
    _no_groups("psum", axis_index_groups)
    names = _names("psum", axis_name)
    if not names:
        return x
    return tree_util.tree_map(lambda v: psum_p.bind(_operand(v), axes=names), x)


def pmean(x, axis_name, *, axis_index_groups=None):
    """``jax.lax.pmean``: psum divided by the number of examples (integers give floats)."""
    _no_groups("pmean", axis_index_groups)
    names = _names("pmean", axis_name)
    n = math.prod(_sizes(names))

    def mean(v):
        s = psum_p.bind(_operand(v), axes=names) if names else asarray_operand(v)
        a = core.get_aval(s)
        if not dt.is_float(a.dtype):
            s = ew.convert_element_type(s, dt.to_inexact(a.dtype))
            a = core.get_aval(s)
        return ew.div(s, red.full(a.shape, n, a.dtype))
    return tree_util.tree_map(mean, x)


def _extreme(fn: str, prim):
    def op(x, axis_name, *, axis_index_groups=None):
        _no_groups(fn, axis_index_groups)
        names = _names(fn, axis_name)
        if not names:
            return x
        return tree_util.tree_map(lambda v: prim.bind(asarray_operand(v), axes=names), x)
    op.__name__ = op.__qualname__ = fn
    op.__doc__ = (f"``jax.lax.{fn}``: the {fn[1:]}imum of ``x`` (a pytree of arrays) over the "
                  f"examples of the named vmap axes; not differentiable, as in JAX.")
    return op


pmax = _extreme("pmax", pmax_p)
pmin = _extreme("pmin", pmin_p)


def axis_index(axis_name):
    """``jax.lax.axis_index``: the example's position along the named vmap axis (int32);
    for a tuple of names, the position in their flattened product (the first name
    major)."""
    names = _names("axis_index", axis_name)
    sizes = _sizes(names)
    out = None
    for k, n in enumerate(names):
        idx = axis_index_p.bind(axis_name=n)
        stride = math.prod(sizes[k + 1:])
        if stride != 1:
            idx = ew.mul(idx, red.full((), stride, dt.int32))
        out = idx if out is None else ew.add(out, idx)
    return red.full((), 0, dt.int32) if out is None else out


def axis_size(axis_name) -> int:
    """``jax.lax.axis_size``: the size of the named vmap axis (the product for a tuple)."""
    return math.prod(_sizes(_names("axis_size", axis_name)))


def all_gather(x, axis_name, *, axis_index_groups=None, axis: int = 0, tiled: bool = False):
    """``jax.lax.all_gather``: every example's ``x`` (a pytree of arrays), stacked along a
    new axis ``axis`` (ordered by axis_index); with ``tiled``, concatenated along ``axis``
    instead."""
    _no_groups("all_gather", axis_index_groups)
    names = _names("all_gather", axis_name)
    sizes = _sizes(names)
    if not names:
        return x

    def gather(v):
        v = asarray_operand(v)
        shape = core.get_aval(v).shape
        ndim = len(shape)
        limit = ndim if tiled else ndim + 1
        try:
            ax = int(axis)
        except TypeError:
            _fail(f"all_gather: axis must be an int, got {axis!r}", TypeError)
        if not -limit <= ax < limit:
            _fail(f"all_gather: axis {axis} is out of bounds for "
                  f"{'a tiled gather of ' if tiled else ''}an operand of rank {ndim}")
        ax %= limit
        if tiled and ndim == 0:
            _fail("all_gather(tiled=True) needs an operand of rank >= 1")
        for n, size in zip(reversed(names), reversed(sizes)):  # the last name minor
            v = all_gather_p.bind(v, axes=(n,), axis=ax, axis_size=size)
        merged = len(names) + (1 if tiled else 0)
        if merged != 1:
            out = core.get_aval(v).shape
            v = sh.reshape(v, out[:ax] + (int(np.prod(out[ax:ax + merged])),) +
                           out[ax + merged:])
        return v
    return tree_util.tree_map(gather, x)
