"""Prefix scans, as ``jax.lax``: associative_scan, and the cumulative reductions (cumsum,
cumprod, cummax, cummin, cumlogsumexp).

associative_scan is composed of strided slices, the combining function, and interior
padding (to interleave), in the work-efficient odd/even recursion: for ``n`` elements O(n)
work in 2*log2(n) rounds, every shape static, but its many small kernels take seconds to
compile at a few thousand elements. The cumulative reductions are instead a ``lax.scan``
along the axis, one element after another in NumPy's order, carrying the other dimensions:
fusionjit runs such a loop as one kernel (whole-loop fusion), vectorised over the carried
dimensions.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.lax.common import _fail, asarray_operand
from fusionjit._src.lax import control_flow as cf
from fusionjit._src.lax import elementwise as ew
from fusionjit._src.lax import shapes as sh
from fusionjit._src.tree_util import tree_flatten, tree_unflatten


def _slice_axis(x, start: int, stop: int, stride: int, axis: int):
    return sh.slice_in_dim(x, start, stop, stride, axis)


def _interleave(evens, odds, n: int, axis: int):
    """The length-``n`` array whose even positions hold ``evens`` and odd ones ``odds``."""
    a = core.get_aval(evens)
    zero = asarray_operand(np.zeros((), a.dtype))
    cfg_even = [(0, 0, 0)] * a.ndim
    cfg_odd = [(0, 0, 0)] * a.ndim
    n_even, n_odd = (n + 1) // 2, n // 2
    cfg_even[axis] = (0, n - (2 * n_even - 1), 1)
    cfg_odd[axis] = (1, n - 2 * n_odd, 1)
    spread_even = sh.pad(evens, zero, cfg_even)
    spread_odd = sh.pad(odds, zero, cfg_odd)
    shape = core.get_aval(spread_even).shape
    parity = ew.bitwise_and(sh.broadcasted_iota(dt.int32, shape, axis),
                            asarray_operand(np.int32(1)))
    return ew.select(ew.eq(parity, asarray_operand(np.int32(0))), spread_even, spread_odd)


def _scan_leaves(fn: Callable, leaves: list, axis: int) -> list:
    n = core.get_aval(leaves[0]).shape[axis]
    if n < 2:
        return leaves
    half = n // 2
    left = [_slice_axis(x, 0, 2 * half - 1, 2, axis) for x in leaves]     # x0, x2, ...
    right = [_slice_axis(x, 1, 2 * half, 2, axis) for x in leaves]        # x1, x3, ...
    odds = _scan_leaves(fn, fn(left, right), axis)                        # prefixes at 1, 3, ...
    n_even = (n + 1) // 2
    if n_even > 1:
        prev = [_slice_axis(o, 0, n_even - 1, 1, axis) for o in odds]
        rest = fn(prev, [_slice_axis(x, 2, n, 2, axis) for x in leaves])  # prefixes at 2, 4, ...
        evens = [sh.concatenate([_slice_axis(x, 0, 1, 1, axis), r], axis)
                 for x, r in zip(leaves, rest)]
    else:
        evens = [_slice_axis(x, 0, 1, 1, axis) for x in leaves]
    return [_interleave(e, o, n, axis) for e, o in zip(evens, odds)]


def associative_scan(fn: Callable, elems, reverse: bool = False, axis: int = 0):
    """``jax.lax.associative_scan``: all prefix combinations ``fn(..fn(x0, x1).., xi)`` of
    the leaves of ``elems`` along ``axis``. ``fn`` must be associative and act elementwise
    on pytrees of arrays shaped like ``elems``."""
    if not callable(fn):
        _fail(f"associative_scan: fn must be callable, got {type(fn).__name__}")
    leaves, tree = tree_flatten(elems)
    if not leaves:
        _fail("associative_scan: elems has no arrays", ValueError)
    leaves = [asarray_operand(x) for x in leaves]
    avals = [core.get_aval(x) for x in leaves]
    ndim = avals[0].ndim
    if ndim == 0:
        _fail("associative_scan needs arrays of rank >= 1", ValueError)
    if not -ndim <= axis < ndim:
        _fail(f"associative_scan: axis {axis} is out of bounds for rank {ndim}", ValueError)
    axis %= ndim
    if any(a.ndim != ndim or a.shape[axis] != avals[0].shape[axis] for a in avals):
        _fail("associative_scan: every leaf of elems needs the same length along axis; got "
              + ", ".join(a.str_short() for a in avals), ValueError)

    def combine(a, b):
        out, out_tree = tree_flatten(fn(tree_unflatten(tree, a), tree_unflatten(tree, b)))
        if out_tree != tree:
            _fail(f"associative_scan: fn returned a {out_tree}, expected a {tree}")
        return out

    if reverse:
        leaves = [sh.rev(x, (axis,)) for x in leaves]
    out = _scan_leaves(combine, leaves, axis)
    if reverse:
        out = [sh.rev(x, (axis,)) for x in out]
    return tree_unflatten(tree, out)


def _running(op: Callable, identity, operand, axis: int, reverse: bool):
    """op's running value along `axis` (from the end if `reverse`): a scan whose carry, the
    other dimensions, starts at op's identity."""
    a = core.get_aval(operand)
    if a.shape[axis] == 0:
        return operand
    order = [axis] + [d for d in range(a.ndim) if d != axis]
    xs = sh.transpose(operand, order) if axis else operand
    carried = a.shape[:axis] + a.shape[axis + 1:]
    init = sh.broadcast(asarray_operand(np.array(identity, a.dtype)), carried)

    def step(carry, x):
        carry = op(carry, x)
        return carry, carry

    _, ys = cf.scan(step, init, xs, reverse=reverse)
    return sh.transpose(ys, list(np.argsort(order))) if axis else ys


def _cumulative(name: str, op: Callable, kinds: str, identity: Callable):
    def fn(operand, axis: int = 0, reverse: bool = False):
        operand = asarray_operand(operand)
        a = core.get_aval(operand)
        d = a.dtype
        if (dt.is_bool(d) and "b" not in kinds) or (dt.is_float(d) and "f" not in kinds):
            _fail(f"lax.{name} does not accept {d} values")
        if a.ndim == 0:
            _fail(f"lax.{name} needs an array of rank >= 1", ValueError)
        if not -a.ndim <= axis < a.ndim:
            _fail(f"lax.{name}: axis {axis} is out of bounds for rank {a.ndim}", ValueError)
        return _running(op, identity(np.dtype(d)), operand, axis % a.ndim, reverse)
    fn.__name__ = name
    fn.__doc__ = f"``jax.lax.{name}``: the running {name[3:]} along ``axis``."
    return fn


def _logaddexp(a, b):
    """log(exp(a) + exp(b)) without overflow, for a running carry `a` and a new term `b`.
    Equal infinities (a sequence's leading -inf against the carry's -inf) would make lo - hi
    NaN, and its derivative NaN even where a select drops the value: there the difference
    is 0 and hi (the new term, on ties) takes the whole slope, as JAX's (1 for a leading
    -inf's own output, not NaN)."""
    d = core.get_aval(a).dtype
    carry_higher = ew.gt(a, b)
    hi, lo = ew.select(carry_higher, a, b), ew.select(carry_higher, b, a)
    inf = asarray_operand(np.array(np.inf, d))
    infinite_tie = ew.bitwise_and(ew.eq(hi, lo), ew.eq(ew.abs(hi), inf))
    zero = sh.broadcast(asarray_operand(np.array(0, d)), core.get_aval(a).shape)
    delta = ew.select(infinite_tie, zero, ew.sub(lo, hi))
    return ew.add(hi, ew.log1p(ew.exp(delta)))


# (-0.0 + x is x for every x, -0.0 included.)
cumsum = _cumulative("cumsum", ew.add, "if", lambda d: -0.0 if dt.is_float(d) else 0)
cumprod = _cumulative("cumprod", ew.mul, "if", lambda d: 1)
cummax = _cumulative("cummax", ew.max, "bif", dt.lowest)
cummin = _cumulative("cummin", ew.min, "bif", dt.highest)
cumlogsumexp = _cumulative("cumlogsumexp", _logaddexp, "f", lambda d: -np.inf)
