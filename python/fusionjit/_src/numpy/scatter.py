"""``x.at[index].set/add/subtract/multiply/divide/power/min/max/apply/get``: functional
index updates with JAX's semantics.

Basic indices (integers, possibly traced, slices of any step, None, ...) place the updates
with ``pad`` (interior padding for strides) inside a ``dynamic_slice`` window and blend
them with a mask: O(size of x) work. Array indices become one IR scatter at the flat
positions the index selects (a kernel of its own, in place where the operand's buffer is
free): O(updates) work after the copy. Out-of-bounds updates are dropped (JAX's default
mode for updates); 'clip' and 'promise_in_bounds' clamp them instead. With repeated
indices ``add``/``multiply``/``min``/``max`` combine every update, in row-major order (so
float sums are reproducible); ``set`` keeps the last."""

from __future__ import annotations

import operator

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.lax import lax
from fusionjit._src.numpy import gather, ufuncs
from fusionjit._src.lax.slicing import scatter_flat, scatter_rows
from fusionjit._src.numpy.util import aval, broadcast_to_shape, fail, to_array

_UPDATE_MODES = ("drop", "fill", "clip", "promise_in_bounds")


def _int_entry(e) -> bool:
    if isinstance(e, (bool, np.bool_)):
        return False
    if isinstance(e, (int, np.integer)):
        return True
    return (isinstance(e, core.Tracer) or core.is_concrete_array(e)) and aval(e).ndim == 0 \
        and dt.is_int(aval(e).dtype)


def _basic_plan(shape, index):
    """Per dimension of x: ('slice', start, count, step), ('int', k) or ('dyn', tracer);
    and the shape x[index] has. None if the index has array entries."""
    entries = index if isinstance(index, tuple) else (index,)
    if any(gather.is_advanced(e) for e in entries):
        return None
    for e in entries:
        if not (e is None or e is Ellipsis or isinstance(e, slice) or _int_entry(e)):
            fail(f"invalid index {e!r} for .at[]: use integers, slices, None, ... or integer "
                 f"arrays", IndexError)
    if sum(1 for e in entries if e is Ellipsis) > 1:
        fail("an index can only have a single ellipsis ('...')", IndexError)
    consumed = sum(1 for e in entries if e is not None and e is not Ellipsis)
    if consumed > len(shape):
        fail(f"too many indices for array: array is {len(shape)}-dimensional, but {consumed} "
             f"were indexed", IndexError)
    if Ellipsis in [e for e in entries if not isinstance(e, core.Tracer)
                    and not core.is_concrete_array(e)]:
        pos = next(i for i, e in enumerate(entries) if e is Ellipsis)
        entries = entries[:pos] + (slice(None),) * (len(shape) - consumed) + entries[pos + 1:]
    else:
        entries = tuple(entries) + (slice(None),) * (len(shape) - consumed)
    plan, result_shape, dim = [], [], 0
    for e in entries:
        if e is None:
            result_shape.append(1)
            continue
        n = shape[dim]
        if isinstance(e, slice):
            start, stop, step = e.indices(n)
            count = len(range(start, stop, step))
            plan.append(("slice", start, count, step))
            result_shape.append(count)
        elif isinstance(e, core.Tracer):
            plan.append(("dyn", e))
        else:
            plan.append(("int", operator.index(e) if not core.is_concrete_array(e)
                         else int(e.item())))
        dim += 1
    return plan, tuple(result_shape)


def _combine_basic(op, slab, placed):
    if op == "set":
        return placed
    if op in ("add", "subtract"):
        return ufuncs.add(slab, placed) if op == "add" else ufuncs.subtract(slab, placed)
    if op == "multiply":
        return ufuncs.multiply(slab, placed)
    if op == "divide":
        return lax.convert_element_type(ufuncs.divide(slab, placed), aval(slab).dtype)
    if op == "power":
        return lax.convert_element_type(ufuncs.power(slab, placed), aval(slab).dtype)
    if op == "min":
        return lax.min(slab, placed)
    if op == "max":
        return lax.max(slab, placed)
    return op(slab)  # apply


def _scatter_basic(x, plan, result_shape, updates, op, mode):
    shape = aval(x).shape
    d = aval(x).dtype
    clamp = mode in ("clip", "promise_in_bounds")
    region, cfg, starts, sizes, in_bounds, rev_dims = [], [], [], [], None, []
    for dim, (p, n) in enumerate(zip(plan, shape)):
        if p[0] == "slice":
            _, start, count, step = p
            if count == 0:
                return x
            low = start if step > 0 else start + (count - 1) * step
            stride = abs(step)
            if step < 0:
                rev_dims.append(dim)
            region.append(count)
            cfg.append((low, n - low - ((count - 1) * stride + 1), stride - 1))
            starts.append(to_array(np.int32(0)))
            sizes.append(n)
        elif p[0] == "int":
            k = p[1] + n if p[1] < 0 else p[1]
            if not 0 <= k < n:
                if not clamp or n == 0:
                    return x
                k = min(max(k, 0), n - 1)
            region.append(1)
            cfg.append((k, n - k - 1, 0))
            starts.append(to_array(np.int32(0)))
            sizes.append(n)
        else:
            i = lax.convert_element_type(p[1], dt.int32)
            i = lax.select(lax.lt(i, to_array(np.int32(0))), lax.add(i, to_array(np.int32(n))),
                           i)
            ok = lax.bitwise_and(lax.ge(i, to_array(np.int32(0))),
                                 lax.lt(i, to_array(np.int32(n))))
            in_bounds = ok if in_bounds is None else lax.bitwise_and(in_bounds, ok)
            region.append(1)
            cfg.append((0, 0, 0))
            starts.append(i)
            sizes.append(1)
    u = to_array(updates)
    u = lax.convert_element_type(u, d, aval(x).weak_type and aval(u).weak_type)
    u = lax.reshape(broadcast_to_shape(u, result_shape), tuple(region))
    if rev_dims:
        u = lax.rev(u, rev_dims)
    dynamic = any(p[0] == "dyn" for p in plan)
    slab = (lax.dynamic_slice(x, starts, sizes, allow_negative_indices=False) if dynamic
            else x)
    neutral = 1 if op in ("divide", "power") else 0
    placed = lax.pad(u, to_array(np.array(neutral, d)), cfg)
    mask = lax.pad(lax.full(tuple(region), True, dt.bool_), to_array(False), cfg)
    new = lax.select(mask, _combine_basic(op, slab, placed), slab)
    if not dynamic:
        return new
    out = lax.dynamic_update_slice(x, new, starts, allow_negative_indices=False)
    if clamp:
        return out
    return lax.select(lax.broadcast_in_dim(in_bounds, shape, ()), out, x)


_COMBINER = {"set": "set", "add": "add", "multiply": "multiply", "min": "minimum",
             "max": "maximum"}


def _combiner(op: str, d):
    combiner = _COMBINER[op]
    if dt.is_bool(d):
        combiner = {"add": "or", "multiply": "and", "minimum": "and", "maximum": "or"}.get(
            combiner, combiner)
    return combiner


def _row_index(shape, index):
    """The integer array of an index that selects whole rows (``x[i]``, ``x[i, :]``: one
    integer array, on axis 0, of an array of rank 2 or more), or None."""
    if len(shape) < 2:
        return None
    entries = gather.normalize_index(shape, index)
    first, rest = entries[0], entries[1:]
    if not gather.is_advanced(first) or not dt.is_int(aval(to_array(first)).dtype):
        return None
    if any(not (isinstance(e, slice) and e == slice(None)) for e in rest):
        return None
    return first


def _scatter_rows(x, rows, updates, op, mode, hints):
    """``_scatter_indexed`` for whole rows: one scatter of the updates' rows, an index per
    row (instead of one per element)."""
    shape = aval(x).shape
    d = aval(x).dtype
    i = lax.convert_element_type(to_array(rows), dt.int32)
    n0 = to_array(np.int32(shape[0]))
    i = lax.select(lax.lt(i, to_array(np.int32(0))), lax.add(i, n0), i)
    if mode in ("clip", "promise_in_bounds"):
        i = lax.clamp(to_array(np.int32(0)), i, to_array(np.int32(shape[0] - 1)))
    # ("drop" and "fill": rows out of bounds are skipped by the scatter.)
    u = to_array(updates)
    u = lax.convert_element_type(u, d, aval(x).weak_type and aval(u).weak_type)
    u = broadcast_to_shape(u, aval(i).shape + shape[1:])
    if aval(u).size == 0:
        return x
    return scatter_rows(x, i, u, _combiner(op, d), **(hints or {}))


def _scatter_indexed(x, index, updates, op, mode, hints=None):
    """``x`` with ``updates`` combined by ``op`` at the positions an advanced ``index``
    selects: one scatter (in row-major order of the updates) at their flat positions, -1
    (skipped) for the updates that 'drop' leaves out."""
    shape = aval(x).shape
    d = aval(x).dtype
    n = aval(x).size
    rows = _row_index(shape, index)
    if rows is not None:
        return _scatter_rows(x, rows, updates, op, mode, hints)
    flat_ids = lax.reshape(lax.iota(dt.int32, n), shape)
    gmode = "clip" if mode in ("clip", "promise_in_bounds") else "fill"
    pos = gather.advanced_getitem(flat_ids, index, mode=gmode, fill_value=-1)
    m = aval(pos).size
    u = to_array(updates)
    u = lax.convert_element_type(u, d, aval(x).weak_type and aval(u).weak_type)
    u = lax.reshape(broadcast_to_shape(u, aval(pos).shape), (m,))
    if m == 0 or n == 0:
        return x
    return scatter_flat(x, lax.reshape(pos, (m,)), u, _combiner(op, d), **(hints or {}))


def scatter(x, index, updates, op, mode=None, *, indices_are_sorted=False,
            unique_indices=False):
    """``x`` with ``updates`` combined by ``op`` at ``x[index]``. The hints go to the
    IR scatter that array indices become (``unique_indices``: see ``lax.scatter``)."""
    hints = dict(indices_are_sorted=bool(indices_are_sorted),
                 unique_indices=bool(unique_indices))
    x = to_array(x)
    mode = "drop" if mode is None else mode
    if mode not in _UPDATE_MODES:
        fail(f".at[] update: unknown mode {mode!r}; use one of {', '.join(_UPDATE_MODES)}",
             ValueError)
    plan = _basic_plan(aval(x).shape, index)
    if plan is not None:
        return _scatter_basic(x, plan[0], plan[1], updates, op, mode)
    if op in ("divide", "power") or callable(op):
        # Not accumulating: read, combine, write back (with repeated indices the last wins).
        current = gather.advanced_getitem(x, index, mode="clip")
        if callable(op):
            new = op(current)
        else:
            new = _combine_basic(op, current, lax.convert_element_type(
                broadcast_to_shape(to_array(updates), aval(current).shape), aval(x).dtype))
        return _scatter_indexed(x, index, new, "set", mode, hints)
    if op == "subtract":
        return _scatter_indexed(x, index, ufuncs.negative(to_array(updates)), "add", mode,
                                hints)
    return _scatter_indexed(x, index, updates, op, mode, hints)


class _IndexUpdateRef:
    """``x.at[index]``: the update methods of JAX's ``_IndexUpdateRef``."""

    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array, self.index = array, index

    def __repr__(self) -> str:
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None,
            fill_value=None):
        """``x[index]``; out-of-bounds indices clamp (default) or, with mode='fill', give
        ``fill_value``."""
        mode = "promise_in_bounds" if mode is None else mode
        gather._check_mode(".at[].get", mode)
        return gather.advanced_getitem(self.array, self.index, mode=mode, fill_value=fill_value)

    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return scatter(self.array, self.index, values, "set", mode,
                       indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)

    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return scatter(self.array, self.index, values, "add", mode,
                       indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)

    def subtract(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return scatter(self.array, self.index, values, "subtract", mode,
                       indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)

    def multiply(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return scatter(self.array, self.index, values, "multiply", mode,
                       indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)

    mul = multiply

    def divide(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return scatter(self.array, self.index, values, "divide", mode,
                       indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)

    def power(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return scatter(self.array, self.index, values, "power", mode,
                       indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)

    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return scatter(self.array, self.index, values, "min", mode,
                       indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)

    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return scatter(self.array, self.index, values, "max", mode,
                       indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)

    def apply(self, func, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """``func`` applied to the indexed elements (each once)."""
        if not callable(func):
            fail(f".at[].apply needs a function, got {type(func).__name__}")
        return scatter(self.array, self.index, None, func, mode) if _basic_plan(
            aval(self.array).shape, self.index) is None else _apply_basic(self, func, mode)


def _apply_basic(ref, func, mode):
    current = ref.array[ref.index]
    return scatter(ref.array, ref.index, func(current), "set", mode)


class _IndexUpdateHelper:
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index):
        return _IndexUpdateRef(self.array, index)

    def __repr__(self) -> str:
        return f"_IndexUpdateHelper({self.array!r})"


at_property = property(lambda self: _IndexUpdateHelper(self),
                       doc="Functional index updates: ``x.at[i].set(v)`` and friends.")
