"""Sorting, as ``jax.lax``: sort (several operands, lexicographic keys), sort_key_val, top_k.

A sort by one key of at most 32 bits along rows of 64 or more elements is the runtime's
stable sort (the ``sort_key_val`` custom call, its own kernel): the rows' positions sorted
by the key's order as uint32, then a gather of each operand. Other sorts (several keys,
64-bit keys, short rows) are a bitonic sorting network run by one counted loop.
Each of its log2(N) * (log2(N) + 1) / 2 rounds (N: the length padded to a power of two)
compares every element with its partner ``i XOR j``, read with two dynamic slices of the
array concatenated with itself, and keeps the smaller or the larger with a select: O(N log^2 N)
work, vectorised over the elements and over the other axes, and a program whose size does not
depend on N. A native sort (a custom call, or a merge sort kernel) may replace it.

Order, as JAX's: floats sort by value with -0.0 equal to 0.0 and every NaN after +inf; ties
keep their original order (every sort here is stable).

``top_k`` is the runtime's top-k kernel (the ``top_k.<dtype>`` custom call, one pass over
each row), in JAX's order for it: the IEEE total order, where -0.0 comes after +0.0 and
NaNs are ordered by sign and payload (bf16's by sign only).
"""

from __future__ import annotations

import operator

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.lax.common import _fail, asarray_operand
from fusionjit._src.lax import elementwise as ew
from fusionjit._src.lax import reductions as red
from fusionjit._src.lax import shapes as sh
from fusionjit._src.lax.slicing import GatherDimensionNumbers, gather
from fusionjit._src.lowering import register


def _const(value, dtype):
    return asarray_operand(np.array(value, dtype))


def sort_key(x):
    """An integer array whose order (signed or unsigned, as its dtype) is the sort order of
    ``x``: floats are bit-cast with their negative values' magnitude bits flipped, after
    -0.0 and every NaN are made +0.0 and one NaN."""
    d = core.get_aval(x).dtype
    if dt.is_bool(d):
        return ew.convert_element_type(x, dt.int32)
    if not dt.is_float(d):
        return x
    zero = _const(0, d)
    x = ew.select(ew.eq(x, zero), sh.broadcast_in_dim(zero, core.get_aval(x).shape, ()), x)
    nan = sh.broadcast_in_dim(_const(np.nan, d), core.get_aval(x).shape, ())
    x = ew.select(ew.ne(x, x), nan, x)
    width = d.itemsize * 8
    int_type = {16: dt.int16, 32: dt.int32, 64: dt.int64}[width]
    bits = ew.bitcast_convert_type(x, int_type)
    sign = ew.shift_right_arithmetic(bits, _const(width - 1, int_type))
    magnitude = _const(np.iinfo(int_type).max, int_type)
    return ew.bitwise_xor(bits, ew.bitwise_and(sign, magnitude))


# Rows at least this long sort natively; shorter ones in the network, vectorised across rows.
_NATIVE_MIN = 64


def _unsigned_order(key):
    """uint32 values in ``key``'s order (a sort key of at most 32 bits), or None."""
    d = core.get_aval(key).dtype
    if d == dt.uint32:
        return key
    if np.dtype(d).itemsize > 4:
        return None
    if np.dtype(d).kind == "u":
        return ew.convert_element_type(key, dt.uint32)
    signed = ew.convert_element_type(key, dt.int32)
    flipped = ew.bitwise_xor(signed, sh.broadcast_in_dim(_const(-2**31, dt.int32),
                                                         core.get_aval(signed).shape, ()))
    return ew.bitcast_convert_type(flipped, dt.uint32)


def _native_sort_rows(operands: list, key):
    """``operands`` [rows, n] permuted along their rows as a stable sort of ``key`` orders
    them, or None where the runtime's sort does not take the key."""
    from fusionjit._src import random as fr
    from fusionjit._src.lax.slicing import take_along
    unsigned = _unsigned_order(key)
    if unsigned is None:
        return None
    rows, n = core.get_aval(key).shape
    position = sh.broadcasted_iota(dt.int32, (rows, n), 1)
    _, order = fr.sort_key_val_p.bind(unsigned, position)
    # Row r's element order[r, i] is at r * n + order[r, i] of the flattened operand.
    start = sh.broadcasted_iota(dt.int32, (rows, n), 0)
    flat = sh.reshape(ew.add(ew.mul(start, _const(n, dt.int32)), order), (rows * n,))
    return [sh.reshape(take_along(sh.reshape(x, (rows * n,)), flat, 0), (rows, n))
            for x in operands]


def lex_less(xs, ys):
    """Elementwise: is the tuple ``xs`` lexicographically less than ``ys``?"""
    less = ew.lt(xs[-1], ys[-1])
    for x, y in zip(reversed(xs[:-1]), reversed(ys[:-1])):
        less = ew.bitwise_or(ew.lt(x, y), ew.bitwise_and(ew.eq(x, y), less))
    return less


def _network(carried: list, key_slots: list[int], n_pad: int) -> list:
    """Runs the bitonic network over the last axis of the rank-2 arrays ``carried``, whose
    entries at ``key_slots`` are the lexicographic sort keys."""
    from fusionjit._src.lax.control_flow import fori_loop
    rows = core.get_aval(carried[0]).shape[0]
    log_n = n_pad.bit_length() - 1
    rounds = log_n * (log_n + 1) // 2

    def round_(_, state):
        k, j, arrays = state
        pos = sh.broadcasted_iota(dt.int32, (rows, n_pad), 1)
        zero = _const(0, dt.int32)
        lower = ew.eq(ew.bitwise_and(pos, j), zero)
        ascending = ew.eq(ew.bitwise_and(pos, k), zero)
        start_zero = _const(0, dt.int32)
        partners = []
        for v in arrays:
            twice = sh.concatenate([v, v], 1)
            up = sh.dynamic_slice(twice, [start_zero, j], (rows, n_pad),
                                  allow_negative_indices=False)
            down = sh.dynamic_slice(twice, [start_zero, ew.sub(_const(n_pad, dt.int32), j)],
                                    (rows, n_pad), allow_negative_indices=False)
            partners.append(ew.select(lower, up, down))
        mine = [arrays[s] for s in key_slots]
        theirs = [partners[s] for s in key_slots]
        swap = ew.select(ew.eq(lower, ascending), lex_less(theirs, mine), lex_less(mine, theirs))
        arrays = [ew.select(swap, p, v) for p, v in zip(partners, arrays)]
        half = ew.shift_right_logical(j, _const(1, dt.int32))
        wrap = ew.eq(half, zero)
        next_k = ew.select(wrap, ew.shift_left(k, _const(1, dt.int32)), k)
        return next_k, ew.select(wrap, k, half), arrays

    init = (_const(2, dt.int32), _const(1, dt.int32), carried)
    k, _, arrays = fori_loop(0, rounds, round_, init)
    return arrays


def sort_rows(operands: list, num_keys: int, descending: bool = False) -> list:
    """Sorts rank-2 ``operands`` along their last axis by their first ``num_keys`` (stably;
    largest first if ``descending``)."""
    rows, n = core.get_aval(operands[0]).shape
    if n < 2 or rows == 0:
        return list(operands)
    n_pad = 1 << (n - 1).bit_length()
    keys = [sort_key(x) for x in operands[:num_keys]]
    if descending:
        keys = [ew.bitwise_not(k) for k in keys]
    if num_keys == 1 and n >= _NATIVE_MIN and rows * n < 2**31:
        native = _native_sort_rows(list(operands), keys[0])
        if native is not None:
            return native
    keys.append(sh.broadcasted_iota(dt.int32, (rows, n), 1))
    carried, key_slots = list(operands), []
    for slot, (key, op) in enumerate(zip(keys, operands[:num_keys] + [None])):
        if key is op:
            key_slots.append(slot)  # an integer key is its own operand
        else:
            key_slots.append(len(carried))
            carried.append(key)
    if n_pad != n:
        # Padding sorts last: the keys' largest value, and indices after every real one.
        padded = []
        for slot, v in enumerate(carried):
            d = core.get_aval(v).dtype
            fill = np.iinfo(d).max if slot in key_slots[:-1] and dt.is_int(d) else 0
            if slot == key_slots[-1]:
                padded.append(sh.broadcasted_iota(dt.int32, (rows, n_pad), 1))
                continue
            padded.append(sh.pad(v, _const(fill, d), [(0, 0, 0), (0, n_pad - n, 0)]))
        carried = padded
    out = _network(carried, key_slots, n_pad)
    return [sh.slice(v, (0, 0), (rows, n)) for v in out[:len(operands)]]


def _to_rows(x, dimension: int):
    """``x`` with ``dimension`` moved last and the other axes flattened: (rows, n)."""
    shape = core.get_aval(x).shape
    perm = [i for i in range(len(shape)) if i != dimension] + [dimension]
    moved = sh.transpose(x, perm)
    rows = int(np.prod([shape[i] for i in perm[:-1]], dtype=np.int64))
    return sh.reshape(moved, (rows, shape[dimension])), perm, core.get_aval(moved).shape


def _from_rows(x, perm, moved_shape):
    inverse = [perm.index(i) for i in range(len(perm))]
    return sh.transpose(sh.reshape(x, moved_shape), inverse)


def _sort_traced(*operands, dimension: int, num_keys: int, descending: bool = False):
    moved = [_to_rows(x, dimension) for x in operands]
    out = sort_rows([m[0] for m in moved], num_keys, descending)
    return tuple(_from_rows(o, perm, shape) for o, (_, perm, shape) in zip(out, moved))


def sort_along(operands, dimension: int, num_keys: int = 1, descending: bool = False):
    """The sorted ``operands`` (a tuple), sorted along ``dimension`` (non-negative) by their
    first ``num_keys``; run as one compiled program outside jit."""
    operands = tuple(asarray_operand(x) for x in operands)
    if core.current_trace() is None:
        from fusionjit._src.lax.control_flow import _run_compiled
        return tuple(_run_compiled(_sort_traced, (), dict(
            dimension=dimension, num_keys=num_keys, descending=descending), operands))
    return _sort_traced(*operands, dimension=dimension, num_keys=num_keys,
                        descending=descending)


def sort(operand, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
    """``jax.lax.sort``: sorts ``operand`` (an array, or a sequence of arrays of one shape,
    sorted together lexicographically by the first ``num_keys``) along ``dimension``."""
    single = not isinstance(operand, (tuple, list))
    operands = [asarray_operand(x) for x in ([operand] if single else operand)]
    if not operands:
        _fail("lax.sort needs at least one operand", ValueError)
    shapes = {core.get_aval(x).shape for x in operands}
    if len(shapes) != 1:
        _fail(f"lax.sort: the operands must have equal shapes, got {sorted(shapes)}")
    shape = shapes.pop()
    if not shape:
        _fail("lax.sort needs operands of rank >= 1", ValueError)
    dimension = operator.index(dimension)
    if not -len(shape) <= dimension < len(shape):
        _fail(f"lax.sort: dimension {dimension} is out of bounds for rank {len(shape)}",
              ValueError)
    num_keys = operator.index(num_keys)
    if not 1 <= num_keys <= len(operands):
        _fail(f"lax.sort: num_keys={num_keys} must be between 1 and the number of operands "
              f"({len(operands)})", ValueError)
    out = sort_along(operands, dimension % len(shape), num_keys)
    return out[0] if single else type(operand)(out)


def sort_key_val(keys, values, dimension: int = -1, is_stable: bool = True):
    """``jax.lax.sort_key_val``: sorts ``keys`` and permutes ``values`` with them."""
    return tuple(sort([keys, values], dimension, is_stable, num_keys=1))


# --- top_k ----------------------------------------------------------------------------

top_k_p = core.Primitive("top_k")


@top_k_p.def_abstract_eval
def _top_k_abstract_eval(operand, *, k):
    if operand.ndim < 1 or not 0 <= k <= operand.shape[-1]:
        _fail(f"top_k_p: k={k} does not fit {operand.str_short()}", ValueError)
    return core.ShapedArray(operand.shape[:-1] + (k,), dt.int32, False)


@register(top_k_p)
def _top_k_lower(ctx, avals_in, avals_out, operand, *, k):
    """The runtime's top-k kernel (``top_k.<dtype>``) on the operand's rows."""
    shape = avals_in[0].shape
    n = shape[-1]
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    d = avals_in[0].dtype
    if len(shape) != 2:
        operand = ctx.op("reshape", [operand], dtype=d, dims=(rows, n))
    sizes = [ctx.computation.constant(np.asarray(v, np.int64)) for v in (n, k)]
    [indices] = ctx.computation.custom_call(f"top_k.{dt.ir_name(d)}", [operand, *sizes],
                                            [("s32", [rows, k])], ctx.source)
    if len(shape) != 2:
        indices = ctx.op("reshape", [indices], dtype=dt.int32, dims=avals_out[0].shape)
    return indices


def top_k(operand, k: int):
    """``jax.lax.top_k``: the ``k`` largest entries along the last axis and their int32
    indices, in JAX's order: by the IEEE total order, descending (+NaN, the larger payload
    first, > +inf > ... > +0.0 > -0.0 > ... > -inf > -NaN; bf16 NaNs as their sign's
    canonical NaN, as JAX returns them), equal entries by the lower index first. The indices
    come from the runtime's top-k kernel (one pass over each row), the values from a gather
    at them, so that derivatives reach ``operand`` through the gather."""
    operand = asarray_operand(operand)
    shape = core.get_aval(operand).shape
    k = operator.index(k)
    if not shape:
        _fail("top_k needs an operand of rank >= 1", ValueError)
    if not 0 <= k <= shape[-1]:
        _fail(f"top_k: k={k} must be between 0 and the last axis' size {shape[-1]}", ValueError)
    if shape[-1] >= 2**31:
        _fail(f"top_k: rows of {shape[-1]} entries are too long for int32 indices", ValueError)
    if core.current_trace() is None:
        from fusionjit._src.lax.control_flow import _run_compiled
        return _run_compiled(_top_k_traced, (), dict(k=k), (operand,))
    return _top_k_traced(operand, k=k)


def _top_k_traced(operand, *, k: int):
    shape = core.get_aval(operand).shape
    out_shape = shape[:-1] + (k,)
    if 0 in out_shape:
        return [red.full(out_shape, 0, core.get_aval(operand).dtype),   # a list, as JAX's
                red.full(out_shape, 0, dt.int32)]
    indices = top_k_p.bind(operand, k=k)
    # Each row's entries at its indices: one gather of full coordinates (row, ..., index).
    axis = len(shape) - 1
    coords = [sh.broadcasted_iota(dt.int32, out_shape + (1,), d) for d in range(axis)]
    coords.append(sh.expand_dims(indices, (axis + 1,)))
    where = sh.concatenate(coords, axis + 1) if len(coords) > 1 else coords[0]
    dims = tuple(range(len(shape)))
    dn = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=dims, start_index_map=dims)
    values = gather(operand, where, dn, (1,) * len(shape), mode="promise_in_bounds")
    if core.get_aval(values).dtype == dt.bfloat16:
        values = _canonical_nans(values)
    return [values, indices]


def _canonical_nans(x):
    """bf16 ``x`` with each NaN the quiet canonical NaN of its sign, as JAX's bf16 top_k
    returns them (XLA:CPU's top_k compares bf16 that way too: the kernel's order). Only
    there does the derivative differ from JAX's: none reaches a NaN taken."""
    shape = core.get_aval(x).shape
    bits = ew.bitcast_convert_type(x, dt.uint16)
    sign = ew.bitwise_and(bits, sh.broadcast_in_dim(_const(0x8000, dt.uint16), shape, ()))
    quiet = sh.broadcast_in_dim(_const(0x7FC0, dt.uint16), shape, ())
    canonical = ew.bitcast_convert_type(ew.bitwise_or(sign, quiet), dt.bfloat16)
    return ew.select(ew.ne(x, x), canonical, x)
