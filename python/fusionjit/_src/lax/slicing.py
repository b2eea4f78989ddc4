"""``lax.gather`` with XLA's semantics (the IR's gather op), as ``jax.lax.gather``.

Each position of ``start_indices`` outside its last axis (the index vector axis) names a
slice of ``slice_sizes`` starting at the index vector (mapped onto the operand's dimensions
by ``start_index_map``); the slice's dimensions not in ``collapsed_slice_dims`` appear in
the output at ``offset_dims``, the indices' batch dimensions at the other positions. Modes,
as JAX: ``'clip'`` and ``'promise_in_bounds'`` clamp each start so that the slice fits (what
the op does), ``'fill'`` (JAX's default) gives ``fill_value`` for slices that do not fit."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.lax import elementwise as ew
from fusionjit._src.lax import reductions as red
from fusionjit._src.lax import shapes as sh
from fusionjit._src.lax.common import Primitive, ShapedArray, _fail, asarray_operand
from fusionjit._src.lowering import register


class GatherDimensionNumbers(NamedTuple):
    """As ``jax.lax.GatherDimensionNumbers`` (without the batching dimensions)."""
    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple


def _check_dims(name, dims, rank, increasing):
    if any(not 0 <= d < rank for d in dims) or len(set(dims)) != len(dims):
        _fail(f"gather: {name} {tuple(dims)} must be distinct dimensions below {rank}")
    if increasing and list(dims) != sorted(dims):
        _fail(f"gather: {name} {tuple(dims)} must be increasing")


gather_p = Primitive("gather")


@gather_p.def_abstract_eval
def _gather_abstract_eval(x, idx, *, offset_dims, collapsed_slice_dims, start_index_map,
                          slice_sizes):
    if not dt.is_int(idx.dtype):
        _fail(f"gather: indices must be integers, got {idx.dtype}")
    if idx.ndim < 1 or idx.shape[-1] != len(start_index_map):
        _fail(f"gather: the indices' last axis ({idx.shape}) must hold one start per entry "
              f"of start_index_map {start_index_map}")
    _check_dims("start_index_map", start_index_map, x.ndim, False)
    _check_dims("collapsed_slice_dims", collapsed_slice_dims, x.ndim, True)
    if len(slice_sizes) != x.ndim or any(not 0 <= s <= d for s, d in zip(slice_sizes, x.shape)):
        _fail(f"gather: slice_sizes {slice_sizes} do not fit the operand {x.shape}", IndexError)
    if any(slice_sizes[d] != 1 for d in collapsed_slice_dims):
        _fail(f"gather: collapsed_slice_dims {collapsed_slice_dims} must have slice size 1")
    offset_sizes = [s for d, s in enumerate(slice_sizes) if d not in collapsed_slice_dims]
    if len(offset_dims) != len(offset_sizes):
        _fail(f"gather: offset_dims {offset_dims} for {len(offset_sizes)} slice dimensions")
    batch = list(idx.shape[:-1])
    rank = len(batch) + len(offset_sizes)
    _check_dims("offset_dims", offset_dims, rank, True)
    offsets = iter(offset_sizes)
    shape = tuple(next(offsets) if d in offset_dims else batch.pop(0) for d in range(rank))
    return ShapedArray(shape, x.dtype, x.weak_type)


@register(gather_p)
def _gather_lower(ctx, avals_in, avals_out, x, idx, *, offset_dims, collapsed_slice_dims,
                  start_index_map, slice_sizes):
    return ctx.op("gather", [x, idx], dimensions=list(slice_sizes), offset_dims=list(offset_dims),
                  collapsed_slice_dims=list(collapsed_slice_dims),
                  start_index_map=list(start_index_map),
                  index_vector_dim=len(avals_in[1].shape) - 1)


def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    """``jax.lax.gather``. The hints (``unique_indices``, ``indices_are_sorted``) are
    accepted and unused: a gathered read needs neither."""
    x, idx = asarray_operand(operand), asarray_operand(start_indices)
    dn = dimension_numbers
    if not isinstance(dn, GatherDimensionNumbers):
        dn = GatherDimensionNumbers(*dn)
    mode = "fill" if mode is None else str(getattr(mode, "name", mode)).lower()
    mode = {"fill_or_drop": "fill", "clip": "clip", "fill": "fill",
            "promise_in_bounds": "promise_in_bounds"}.get(mode)
    if mode is None:
        _fail("gather: mode must be 'clip', 'fill' or 'promise_in_bounds'", ValueError)
    params = dict(offset_dims=tuple(int(d) for d in dn.offset_dims),
                  collapsed_slice_dims=tuple(int(d) for d in dn.collapsed_slice_dims),
                  start_index_map=tuple(int(d) for d in dn.start_index_map),
                  slice_sizes=tuple(int(s) for s in slice_sizes))
    out = gather_p.bind(x, idx, **params)
    if mode != "fill":
        return out
    # A slice fits when every start is in [0, dim - size]; those that do not are filled.
    x_shape, idx_shape = _shape(x), _shape(idx)
    wide = np.dtype(np.int64) if dt.x64_enabled() else np.dtype(np.int32)
    starts = ew.convert_element_type(idx, wide) if _dtype(idx) != wide else idx
    limits = np.array([x_shape[d] - params["slice_sizes"][d] for d in params["start_index_map"]],
                      wide)
    last = len(idx_shape) - 1
    lim = sh.broadcast_in_dim(limits, idx_shape, (last,))
    fits = ew.bitwise_and(ew.ge(starts, red.full(idx_shape, 0, wide)), ew.le(starts, lim))
    fits = red.reduce_and(fits, (last,))
    out_shape = _shape(out)
    batch_positions = tuple(d for d in range(len(out_shape)) if d not in params["offset_dims"])
    fits = sh.broadcast_in_dim(fits, out_shape, batch_positions)
    if fill_value is None:
        fill_value = default_fill(_dtype(out))
    return ew.select(fits, out, red.full(out_shape, fill_value, _dtype(out)))


def _shape(x):
    return core.get_aval(x).shape


def _dtype(x):
    return core.get_aval(x).dtype


def default_fill(d):
    """JAX's fill for out-of-bounds gathers: NaN, the smallest signed or largest unsigned
    integer, True."""
    d = np.dtype(d)
    if dt.is_float(d):
        return np.nan
    if dt.is_bool(d):
        return True
    return np.iinfo(d).min if dt.is_signed(d) else np.iinfo(d).max


def take_along(x, idx, axis: int):
    """``x`` indexed along ``axis`` by the 1-D integer array ``idx`` (one gather: O(len(idx))
    work per slice); indices outside [0, n) give zeros."""
    x, idx = asarray_operand(x), asarray_operand(idx)
    shape = _shape(x)
    n, m = shape[axis], _shape(idx)[0]
    rank = len(shape)
    if n == 0 or m == 0:
        out_shape = shape[:axis] + (m,) + shape[axis + 1:]
        return red.full(out_shape, 0, _dtype(x))
    sizes = tuple(1 if d == axis else s for d, s in enumerate(shape))
    dn = GatherDimensionNumbers(offset_dims=tuple(d for d in range(rank) if d != axis),
                                collapsed_slice_dims=(axis,), start_index_map=(axis,))
    out = gather(x, sh.reshape(idx, (m, 1)), dn, sizes, mode="clip")
    it = _dtype(idx)
    inside = ew.ge(idx, red.full((m,), 0, it))
    if n <= np.iinfo(it).max:
        inside = ew.bitwise_and(inside, ew.lt(idx, red.full((m,), n, it)))
    out_shape = _shape(out)
    inside = sh.broadcast_in_dim(inside, out_shape, (axis,))
    return ew.select(inside, out, red.full(out_shape, 0, _dtype(x)))


# --- scatter ------------------------------------------------------------------------------

class ScatterDimensionNumbers(NamedTuple):
    """As ``jax.lax.ScatterDimensionNumbers`` (without the batching dimensions)."""
    update_window_dims: tuple
    inserted_window_dims: tuple
    scatter_dims_to_operand_dims: tuple


# How each update combines with the element it lands on: the IR combiner's opcode, or "set".
_COMBINERS = ("set", "add", "multiply", "minimum", "maximum", "or", "and")

scatter_p = Primitive("scatter")


@scatter_p.def_abstract_eval
def _scatter_abstract_eval(x, idx, updates, *, update_window_dims, inserted_window_dims,
                           scatter_dims_to_operand_dims, combiner, indices_are_sorted=False,
                           unique_indices=False):
    if not dt.is_int(idx.dtype):
        _fail(f"scatter: indices must be integers, got {idx.dtype}")
    if updates.dtype != x.dtype:
        _fail(f"scatter: updates of {updates.dtype} for an operand of {x.dtype}")
    if idx.ndim < 1 or idx.shape[-1] != len(scatter_dims_to_operand_dims):
        _fail(f"scatter: the indices' last axis ({idx.shape}) must hold one start per entry of "
              f"scatter_dims_to_operand_dims {scatter_dims_to_operand_dims}")
    _check_dims("scatter_dims_to_operand_dims", scatter_dims_to_operand_dims, x.ndim, False)
    _check_dims("inserted_window_dims", inserted_window_dims, x.ndim, True)
    _check_dims("update_window_dims", update_window_dims, updates.ndim, True)
    if len(update_window_dims) + len(inserted_window_dims) != x.ndim:
        _fail(f"scatter: {len(update_window_dims)} window and {len(inserted_window_dims)} "
              f"inserted dimensions for an operand of rank {x.ndim}")
    batch = tuple(s for d, s in enumerate(updates.shape) if d not in update_window_dims)
    if batch != idx.shape[:-1]:
        _fail(f"scatter: updates {updates.shape} do not match the indices {idx.shape}")
    window = iter(updates.shape[d] for d in update_window_dims)
    for d in range(x.ndim):
        if d not in inserted_window_dims and next(window) > x.shape[d]:
            _fail(f"scatter: the update window is larger than the operand {x.shape}", IndexError)
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def _combiner(ctx, name, d):
    if name != "set":
        return ctx.combiner(name, d)
    key = ("set", dt.ir_name(d))
    if key not in ctx._combiners:
        comp = ctx.module_builder.add_computation(f"set_{dt.ir_name(d)}")
        comp.parameter(0, dt.ir_name(d), [], "old")
        comp.set_root(comp.parameter(1, dt.ir_name(d), [], "new"))
        ctx._combiners[key] = comp
    return ctx._combiners[key]


@register(scatter_p)
def _scatter_lower(ctx, avals_in, avals_out, x, idx, updates, *, update_window_dims,
                   inserted_window_dims, scatter_dims_to_operand_dims, combiner,
                   indices_are_sorted=False, unique_indices=False):
    combine = _combiner(ctx, combiner, avals_in[0].dtype)
    return ctx.op("scatter", [x, idx, updates], called=[combine],
                  update_window_dims=list(update_window_dims),
                  inserted_window_dims=list(inserted_window_dims),
                  scatter_dims_to_operand_dims=list(scatter_dims_to_operand_dims),
                  index_vector_dim=len(avals_in[1].shape) - 1,
                  indices_are_sorted=bool(indices_are_sorted),
                  unique_indices=bool(unique_indices))


def scatter_flat(x, positions, updates, combiner: str, *, indices_are_sorted: bool = False,
                 unique_indices: bool = False):
    """``x`` (any shape) with ``updates[j]`` combined into its flat element ``positions[j]``
    (1-D); positions outside [0, x.size) are skipped. ``unique_indices`` promises that no two
    positions in bounds are equal (the updates may then be applied in parallel)."""
    x, positions, updates = (asarray_operand(v) for v in (x, positions, updates))
    shape = _shape(x)
    n, m = int(np.prod(shape, dtype=np.int64)), _shape(positions)[0]
    out = scatter_p.bind(sh.reshape(x, (n,)), sh.reshape(positions, (m, 1)), updates,
                         update_window_dims=(), inserted_window_dims=(0,),
                         scatter_dims_to_operand_dims=(0,), combiner=combiner,
                         indices_are_sorted=bool(indices_are_sorted),
                         unique_indices=bool(unique_indices))
    return sh.reshape(out, shape)


def scatter_rows(x, rows, updates, combiner: str, *, indices_are_sorted: bool = False,
                 unique_indices: bool = False):
    """``x`` with ``updates`` (``rows.shape + x.shape[1:]``) combined into the rows of ``x``
    that ``rows`` (integers) name, in row-major order of ``rows``; rows outside
    [0, x.shape[0]) are skipped. (A row scatter: the CPU combines each row in vectors.)"""
    x, rows, updates = (asarray_operand(v) for v in (x, rows, updates))
    k = len(_shape(rows))
    return scatter_p.bind(x, sh.reshape(rows, _shape(rows) + (1,)), updates,
                          update_window_dims=tuple(range(k, k + len(_shape(x)) - 1)),
                          inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,),
                          combiner=combiner, indices_are_sorted=bool(indices_are_sorted),
                          unique_indices=bool(unique_indices))


def _scatter(combiner, operand, scatter_indices, updates, dimension_numbers, mode,
             indices_are_sorted=False, unique_indices=False):
    x, idx, upd = (asarray_operand(v) for v in (operand, scatter_indices, updates))
    dn = dimension_numbers
    if not isinstance(dn, ScatterDimensionNumbers):
        dn = ScatterDimensionNumbers(*dn)
    mode = "fill" if mode is None else str(getattr(mode, "name", mode)).lower()
    mode = {"fill_or_drop": "fill", "fill": "fill", "drop": "fill", "clip": "clip",
            "promise_in_bounds": "promise_in_bounds"}.get(mode)
    if mode is None:
        _fail("scatter: mode must be 'clip', 'fill' (drop) or 'promise_in_bounds'", ValueError)
    params = dict(update_window_dims=tuple(int(d) for d in dn.update_window_dims),
                  inserted_window_dims=tuple(int(d) for d in dn.inserted_window_dims),
                  scatter_dims_to_operand_dims=tuple(
                      int(d) for d in dn.scatter_dims_to_operand_dims))
    if dt.is_bool(_dtype(x)):
        combiner = {"add": "or", "multiply": "and"}.get(combiner, combiner)
    if mode == "clip":
        # Each window start clamped so that the window fits (XLA skips those that do not).
        x_shape, u_shape = _shape(x), _shape(upd)
        window = iter(u_shape[d] for d in params["update_window_dims"])
        sizes = [1 if d in params["inserted_window_dims"] else next(window)
                 for d in range(len(x_shape))]
        hi = np.array([x_shape[d] - sizes[d] for d in params["scatter_dims_to_operand_dims"]],
                      _dtype(idx))
        last = len(_shape(idx)) - 1
        idx = ew.max(ew.min(idx, sh.broadcast_in_dim(hi, _shape(idx), (last,))),
                     red.full(_shape(idx), 0, _dtype(idx)))
    return scatter_p.bind(x, idx, upd, combiner=combiner,
                          indices_are_sorted=bool(indices_are_sorted),
                          unique_indices=bool(unique_indices), **params)


def scatter(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
            unique_indices=False, mode=None):
    """``jax.lax.scatter``: each update replaces its element (repeated indices: the last
    update in row-major order wins). Windows that do not fit are dropped (JAX's default
    mode), or clamped into place with ``mode='clip'``. With ``unique_indices=True`` (a
    promise, as in JAX: no two updates land on one element) the updates are applied in
    parallel where the operand is updated in place."""
    return _scatter("set", operand, scatter_indices, updates, dimension_numbers, mode,
                    indices_are_sorted, unique_indices)


def _combining(combiner: str, name: str, doc: str):
    def fn(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
           unique_indices=False, mode=None):
        return _scatter(combiner, operand, scatter_indices, updates, dimension_numbers, mode,
                        indices_are_sorted, unique_indices)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


scatter_add = _combining("add", "scatter_add", "``jax.lax.scatter_add`` (updates combined "
                         "in row-major order: reproducible sums).")
scatter_mul = _combining("multiply", "scatter_mul", "``jax.lax.scatter_mul``.")
scatter_min = _combining("minimum", "scatter_min", "``jax.lax.scatter_min``.")
scatter_max = _combining("maximum", "scatter_max", "``jax.lax.scatter_max``.")
