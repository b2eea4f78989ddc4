"""The smaller ``jax.lax`` functions, each composed of the primitives (so jit, vmap and grad
see only those): splitting, stacking and tiling, integer bit functions (``mulhi``,
``clz``), ``batch_matmul``, ``index_take``, ``scatter_sub`` and ``scatter_apply``,
``approx_max_k``, ``conv_general_dilated_patches``, and the shape helpers of JAX's API.
"""

from __future__ import annotations

import builtins
import math
import operator
from typing import Callable, Sequence

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.lax import elementwise as ew
from fusionjit._src.lax import reductions as red
from fusionjit._src.lax import shapes as sh
from fusionjit._src.lax import slicing as sl
from fusionjit._src.lax.common import _fail, asarray_operand


def _aval(x):
    return core.get_aval(x)


def _index(name: str, what: str, value) -> int:
    try:
        return operator.index(value)
    except TypeError:
        _fail(f"lax.{name}: {what} must be an int, got {type(value).__name__}")


def _axis(name: str, axis, ndim: int) -> int:
    a = _index(name, "axis", axis)
    if not -ndim <= a < ndim:
        _fail(f"lax.{name}: axis {a} is out of bounds for rank {ndim}", ValueError)
    return a % ndim


# --- shapes --------------------------------------------------------------------------------

def split(operand, sizes: Sequence[int], axis: int = 0) -> list:
    """``jax.lax.split``: ``operand`` cut along ``axis`` into pieces of ``sizes`` (which
    must add up to that axis' length); a list of arrays."""
    x = asarray_operand(operand)
    a = _aval(x)
    axis = _axis("split", axis, a.ndim)
    sizes = [_index("split", "each size", s) for s in sizes]
    if any(s < 0 for s in sizes):
        _fail(f"lax.split: sizes must be non-negative, got {sizes}", ValueError)
    if builtins.sum(sizes) != a.shape[axis]:
        _fail(f"lax.split: the sizes {sizes} add up to {builtins.sum(sizes)}, not the length "
              f"{a.shape[axis]} of axis {axis} of {a.str_short()}", ValueError)
    out, start = [], 0
    for s in sizes:
        out.append(sh.slice_in_dim(x, start, start + s, 1, axis))
        start += s
    return out


def stack(operands: Sequence, axis: int = 0):
    """``jax.lax.stack``: arrays of one shape and dtype joined along a new ``axis``."""
    xs = [asarray_operand(x) for x in operands]
    if not xs:
        _fail("lax.stack needs at least one array", ValueError)
    first = _aval(xs[0])
    for x in xs[1:]:
        if _aval(x).shape != first.shape or _aval(x).dtype != first.dtype:
            _fail(f"lax.stack: the arrays must have equal shapes and dtypes, got "
                  f"{first.str_short()} and {_aval(x).str_short()}")
    axis = _axis("stack", axis, first.ndim + 1)
    return sh.concatenate([sh.expand_dims(x, (axis,)) for x in xs], axis)


def unstack(x, axis: int = 0) -> tuple:
    """``jax.lax.unstack``: the slices of ``x`` along ``axis``, as a tuple."""
    x = asarray_operand(x)
    a = _aval(x)
    if a.ndim == 0:
        _fail("lax.unstack needs an array of rank >= 1", ValueError)
    axis = _axis("unstack", axis, a.ndim)
    return tuple(sh.index_in_dim(x, i, axis, keepdims=False) for i in range(a.shape[axis]))


def tile(operand, reps: Sequence[int]):
    """``jax.lax.tile``: ``operand`` repeated ``reps[i]`` times along each dimension i
    (``len(reps)`` must be its rank)."""
    x = asarray_operand(operand)
    a = _aval(x)
    reps = tuple(_index("tile", "each rep", r) for r in reps)
    if len(reps) != a.ndim:
        _fail(f"lax.tile: reps {reps} must have one entry per dimension of {a.str_short()}",
              ValueError)
    if any(r < 0 for r in reps):
        _fail(f"lax.tile: reps must be non-negative, got {reps}", ValueError)
    # [r0, d0, r1, d1, ...] broadcast, then merged pairwise.
    wide = tuple(v for r, d in zip(reps, a.shape) for v in (r, d))
    y = sh.broadcast_in_dim(x, wide, tuple(range(1, 2 * a.ndim, 2)))
    return sh.reshape(y, tuple(r * d for r, d in zip(reps, a.shape)))


def broadcast_to_rank(x, rank: int):
    """``jax.lax.broadcast_to_rank``: leading dimensions of 1 added to reach ``rank``."""
    x = asarray_operand(x)
    n = _aval(x).ndim
    rank = _index("broadcast_to_rank", "rank", rank)
    if rank < n:
        _fail(f"lax.broadcast_to_rank: rank {rank} is below the rank {n} of "
              f"{_aval(x).str_short()}", ValueError)
    return sh.broadcast(x, (1,) * (rank - n)) if rank > n else x


def broadcast_like(arr, like_arr):
    """``jax.lax.broadcast_like``: ``arr`` broadcast (NumPy's rules) to ``like_arr``'s
    shape."""
    x = asarray_operand(arr)
    shape = tuple(np.shape(like_arr)) if not hasattr(like_arr, "shape") else like_arr.shape
    a = _aval(x)
    target = broadcast_shapes(a.shape, tuple(shape))
    if target != tuple(shape):
        _fail(f"lax.broadcast_like: cannot broadcast {a.shape} to {tuple(shape)}", ValueError)
    x = sh.reshape(x, (1,) * (len(shape) - a.ndim) + a.shape) if a.ndim < len(shape) else x
    dims = tuple(i for i, d in enumerate(_aval(x).shape) if d == 1 and shape[i] != 1)
    if dims:
        keep = tuple(i for i in range(len(shape)) if i not in dims)
        x = sh.broadcast_in_dim(sh.reshape(x, tuple(shape[i] for i in keep)), shape, keep)
    return x


def collapse(operand, start_dimension: int, stop_dimension: int | None = None):
    """``jax.lax.collapse``: dimensions ``[start_dimension, stop_dimension)`` merged into
    one, row-major (``stop_dimension=None``: through the last)."""
    x = asarray_operand(operand)
    shape = _aval(x).shape
    lo, hi, _ = builtins.slice(start_dimension, stop_dimension).indices(len(shape))
    if hi < lo:
        _fail(f"lax.collapse: invalid dimension range {shape}[{start_dimension}:"
              f"{stop_dimension}]", ValueError)
    size = math.prod(shape[lo:hi])
    return sh.reshape(x, shape[:lo] + (size,) + shape[hi:])


def broadcast_shapes(*shapes) -> tuple:
    """``jax.lax.broadcast_shapes``: the shape NumPy's broadcasting gives ``shapes``."""
    shapes = [tuple(operator.index(d) for d in s) for s in shapes]
    if not shapes:
        return ()
    ndim = builtins.max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + s for s in shapes]
    out = []
    for sizes in zip(*padded):
        big = {d for d in sizes if d != 1}
        if len(big) > 1:
            _fail(f"lax.broadcast_shapes: incompatible shapes for broadcasting: "
                  f"{tuple(shapes)}", ValueError)
        out.append(big.pop() if big else 1)
    return tuple(out)


def empty(shape, dtype, *, out_sharding=None):
    """``jax.lax.empty``: an array of ``shape`` and ``dtype`` whose values are unspecified
    (fusionjit fills it with zeros)."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    return red.full(shape, 0, dtype)


def full_like(x, fill_value, dtype=None, shape=None, sharding=None):
    """``jax.lax.full_like``: an array of ``x``'s shape and dtype (or ``shape``/``dtype``)
    filled with ``fill_value``."""
    a = _aval(asarray_operand(x)) if not hasattr(x, "shape") or not hasattr(x, "dtype") \
        else core.ShapedArray(x.shape, dt.canonicalize(x.dtype), getattr(x, "weak_type", False))
    d = a.dtype if dtype is None else dt.canonicalize(dtype)
    out = red.full(a.shape if shape is None else shape, fill_value, d)
    if dtype is None and a.weak_type:
        out = ew.convert_element_type(out, d, weak_type=True)
    return out


def dtype(x):
    """``jax.lax.dtype``: the canonical dtype of a value or dtype-like (int64 as int32
    unless x64 is on)."""
    if isinstance(x, (core.Tracer,)) or core.is_concrete_array(x):
        return _aval(x).dtype
    info = dt.scalar_info(x)
    if info is not None and not isinstance(x, np.ndarray):
        return info[0]
    return dt.canonicalize(dt.dtype(x))


# --- integer bits --------------------------------------------------------------------------

def _int_operands(name: str, *xs):
    xs = [asarray_operand(x) for x in xs]
    for x in xs:
        if not dt.is_int(_aval(x).dtype):
            _fail(f"lax.{name} does not accept dtype {_aval(x).dtype}: it needs integer "
                  f"operands")
    return xs


def _unsigned(d):
    return np.dtype(f"uint{np.dtype(d).itemsize * 8}")


def mulhi(x, y, /):
    """``jax.lax.mulhi``: the high half of the double-width product of integers ``x`` and
    ``y`` (equal dtypes), signed or unsigned by their dtype."""
    x, y = ew._binary_operands("mulhi", x, y)
    x, y = _int_operands("mulhi", x, y)
    d = _aval(x).dtype
    u = _unsigned(d)
    half = d.itemsize * 4

    def c(v):
        return asarray_operand(np.asarray(v, u))

    ux, uy = ew.bitcast_convert_type(x, u), ew.bitcast_convert_type(y, u)
    mask = c((1 << half) - 1)
    x_lo, x_hi = ew.bitwise_and(ux, mask), ew.shift_right_logical(ux, c(half))
    y_lo, y_hi = ew.bitwise_and(uy, mask), ew.shift_right_logical(uy, c(half))
    lo_lo, lo_hi = ew.mul(x_lo, y_lo), ew.mul(x_lo, y_hi)
    hi_lo, hi_hi = ew.mul(x_hi, y_lo), ew.mul(x_hi, y_hi)
    cross = ew.add(ew.add(ew.shift_right_logical(lo_lo, c(half)), ew.bitwise_and(lo_hi, mask)),
                   ew.bitwise_and(hi_lo, mask))
    out = ew.add(ew.add(hi_hi, ew.shift_right_logical(lo_hi, c(half))),
                 ew.add(ew.shift_right_logical(hi_lo, c(half)),
                        ew.shift_right_logical(cross, c(half))))
    if dt.is_signed(d):
        # The signed product's high half: the unsigned one less y where x < 0 and x where
        # y < 0 (mod 2^bits).
        zero = c(0)
        neg_x = ew.lt(x, asarray_operand(np.zeros((), d)))
        neg_y = ew.lt(y, asarray_operand(np.zeros((), d)))
        out = ew.sub(out, ew.add(ew.select(neg_x, uy, zero), ew.select(neg_y, ux, zero)))
    return ew.bitcast_convert_type(out, d)


def clz(x):
    """``jax.lax.clz``: the number of leading zero bits of each integer."""
    (x,) = _int_operands("clz", x)
    d = _aval(x).dtype
    u = _unsigned(d)
    bits = ew.bitcast_convert_type(x, u)
    shift = 1
    while shift < d.itemsize * 8:
        bits = ew.bitwise_or(bits, ew.shift_right_logical(bits, asarray_operand(
            np.asarray(shift, u))))
        shift *= 2
    count = ew.sub(asarray_operand(np.asarray(d.itemsize * 8, u)), ew.population_count(bits))
    return ew.convert_element_type(count, d)


def nextafter(x1, x2):
    """``jax.lax.nextafter``: the next representable value after ``x1`` towards ``x2``
    (equal float dtypes)."""
    x1, x2 = ew._binary_operands("nextafter", x1, x2)
    if not dt.is_float(_aval(x1).dtype):
        _fail(f"lax.nextafter does not accept dtype {_aval(x1).dtype}: it needs floating-point "
              f"operands")
    from fusionjit._src.numpy.math_ufuncs import nextafter as _np_nextafter
    return _np_nextafter(x1, x2)


# --- contractions and indexing ---------------------------------------------------------------

def batch_matmul(lhs, rhs, precision=None):
    """``jax.lax.batch_matmul``: matrix products over the leading (batch) dimensions of two
    arrays of one rank >= 2."""
    lhs, rhs = asarray_operand(lhs), asarray_operand(rhs)
    ln, rn = _aval(lhs).ndim, _aval(rhs).ndim
    if builtins.min(ln, rn) < 2:
        _fail(f"lax.batch_matmul: arguments must be at least 2D, got {ln}, {rn}", ValueError)
    if ln != rn:
        _fail(f"lax.batch_matmul: arguments must have the same ndim, got {ln}, {rn}",
              ValueError)
    batch = tuple(range(ln - 2))
    return red.dot_general(lhs, rhs, (((ln - 1,), (rn - 2,)), (batch, batch)),
                           precision=precision)


def index_take(src, idxs, axes: Sequence[int]):
    """``jax.lax.index_take``: ``src`` at the index arrays ``idxs`` (one 1-D array per axis
    of ``axes``; negative and out-of-range indices wrap), the other dimensions kept."""
    src = asarray_operand(src)
    shape = _aval(src).shape
    axes = tuple(_index("index_take", "each axis", a) for a in axes)
    idxs = [asarray_operand(i) for i in idxs]
    if len(idxs) != len(axes):
        _fail(f"lax.index_take: {len(idxs)} index arrays for {len(axes)} axes", ValueError)
    for i in idxs:
        if not dt.is_int(_aval(i).dtype) or _aval(i).ndim != 1:
            _fail(f"lax.index_take: each index array must be 1-D integer, got "
                  f"{_aval(i).str_short()}")
    if any(not 0 <= a < len(shape) for a in axes):
        _fail(f"lax.index_take: axes {axes} out of range for {shape}", ValueError)
    d = dt.promote_dtypes(*(_aval(i).dtype for i in idxs))
    cols = [sh.expand_dims(ew.convert_element_type(i, d), (1,)) for i in idxs]
    indices = sh.concatenate(cols, 1)
    n = _aval(indices).shape[0]
    sizes = sh.broadcast_in_dim(asarray_operand(np.array([shape[a] for a in axes], d)),
                                (n, len(axes)), (1,))
    indices = ew.rem(ew.add(ew.rem(indices, sizes), sizes), sizes)  # Python's modulo
    slice_sizes = tuple(1 if i in axes else s for i, s in enumerate(shape))
    dnums = sl.GatherDimensionNumbers(
        offset_dims=tuple(range(1, len(shape) - len(axes) + 1)),
        collapsed_slice_dims=axes, start_index_map=axes)
    return sl.gather(src, indices, dnums, slice_sizes)


def scatter_sub(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """``jax.lax.scatter_sub``: each update subtracted from its element of ``operand``."""
    upd = asarray_operand(updates)
    if dt.is_bool(_aval(upd).dtype):
        _fail("lax.scatter_sub does not accept boolean updates")
    return sl.scatter_add(operand, scatter_indices, ew.neg(upd), dimension_numbers,
                          indices_are_sorted=indices_are_sorted,
                          unique_indices=unique_indices, mode=mode)


def _elementwise(func: Callable, x):
    """``func``, a function of a scalar, applied to each element of ``x``."""
    from fusionjit._src.batching import vmap
    shape = _aval(x).shape
    flat = sh.reshape(x, (math.prod(shape),))
    if math.prod(shape) == 0:
        return x
    return sh.reshape(asarray_operand(vmap(func)(flat)), shape)


def scatter_apply(operand, scatter_indices, func: Callable, dimension_numbers, *,
                  update_shape=(), indices_are_sorted=False, unique_indices=False, mode=None):
    """``jax.lax.scatter_apply``: ``func`` (a function of a scalar) applied to the elements
    of ``operand`` the scatter's windows (of ``update_shape``) reach, once per update that
    reaches it (a repeated index applies it again, as XLA's scatter does)."""
    if not callable(func):
        _fail(f"lax.scatter_apply: func must be callable, got {type(func).__name__}")
    x = asarray_operand(operand)
    a = _aval(x)
    ones = red.full(tuple(update_shape), 1, np.int32)
    counts = sl.scatter_add(red.full(a.shape, 0, np.int32), scatter_indices, ones,
                            dimension_numbers, indices_are_sorted=indices_are_sorted,
                            unique_indices=unique_indices, mode=mode)
    applied = _elementwise(func, x)
    if _aval(applied).dtype != a.dtype or _aval(applied).shape != a.shape:
        _fail(f"lax.scatter_apply: func must map {a.dtype} scalars to {a.dtype}, got "
              f"{_aval(applied).dtype}")
    once = ew.select(ew.gt(counts, asarray_operand(np.int32(0))), applied, x)
    if unique_indices:
        return once
    from fusionjit._src.lax.control_flow import while_loop
    most = red.reduce_max(counts, tuple(range(a.ndim))) if a.ndim else counts

    def body(state):
        i, v = state
        return ew.add(i, asarray_operand(np.int32(1))), ew.select(
            ew.gt(counts, sh.broadcast_in_dim(i, a.shape, ())), _elementwise(func, v), v)

    return while_loop(lambda s: ew.lt(s[0], most), body, (asarray_operand(np.int32(1)),
                                                          once))[1]


def approx_max_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """``jax.lax.approx_max_k``: the ``k`` largest entries along ``reduction_dimension``
    and their int32 indices, computed exactly (as JAX on CPU; ``recall_target`` and
    ``reduction_input_size_override`` are accepted, ``aggregate_to_topk=False`` gives the
    same k results)."""
    return _approx_k("approx_max_k", operand, k, reduction_dimension, False)


def approx_min_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """``jax.lax.approx_min_k``: the ``k`` smallest entries along ``reduction_dimension``
    and their int32 indices (exact, as ``approx_max_k``)."""
    return _approx_k("approx_min_k", operand, k, reduction_dimension, True)


def _approx_k(name: str, operand, k, reduction_dimension, smallest: bool):
    from fusionjit._src.lax.sorting import top_k
    x = asarray_operand(operand)
    a = _aval(x)
    if a.ndim == 0:
        _fail(f"lax.{name} needs an operand of rank >= 1", ValueError)
    axis = _axis(name, reduction_dimension, a.ndim)
    k = _index(name, "k", k)
    if not 0 < k <= a.shape[axis]:
        _fail(f"lax.{name}: k={k} must be in [1, {a.shape[axis]}] (the size of dimension "
              f"{axis})", ValueError)
    moved = x if axis == a.ndim - 1 else sh.transpose(
        x, tuple(i for i in range(a.ndim) if i != axis) + (axis,))
    key = moved
    if smallest:
        key = ew.neg(moved) if dt.is_float(a.dtype) else ew.bitwise_not(moved)
    vals, idx = top_k(key, k)
    if smallest:  # (negation and bitwise not are exact and their own inverses)
        vals = ew.neg(vals) if dt.is_float(a.dtype) else ew.bitwise_not(vals)
    if axis != a.ndim - 1:
        back = tuple(range(axis)) + (a.ndim - 1,) + tuple(range(axis, a.ndim - 1))
        vals, idx = sh.transpose(vals, back), sh.transpose(idx, back)
    return vals, idx


def conv_general_dilated_patches(lhs, filter_shape: Sequence[int], window_strides, padding,
                                 lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                                 precision=None, preferred_element_type=None):
    """``jax.lax.conv_general_dilated_patches``: the patches a convolution with a kernel of
    ``filter_shape`` would see, one output feature per (input channel, kernel position)
    (channel-major), computed as JAX does: a convolution with a one-hot kernel."""
    from fusionjit._src.lax import convolution as conv
    x = asarray_operand(lhs)
    a = _aval(x)
    filter_shape = tuple(_index("conv_general_dilated_patches", "filter sizes", f)
                         for f in filter_shape)
    if len(filter_shape) != a.ndim - 2:
        _fail(f"lax.conv_general_dilated_patches: filter_shape {filter_shape} needs one size "
              f"per spatial dimension of {a.str_short()}", ValueError)
    dn = conv.conv_dimension_numbers(a.shape, (1, 1) + filter_shape, dimension_numbers)
    spatial = math.prod(filter_shape)
    channels = a.shape[dn.lhs_spec[1]]
    eye = asarray_operand(np.eye(spatial, dtype=a.dtype))
    rhs = sh.broadcast_in_dim(eye, (channels, spatial, spatial), (1, 2))
    rhs = sh.reshape(rhs, (channels * spatial, 1) + filter_shape)
    # (O, I, spatial...) moved to where the rhs spec keeps each.
    perm = [0] * a.ndim
    for j, d in enumerate(dn.rhs_spec):
        perm[d] = j
    rhs = sh.transpose(rhs, tuple(perm))
    return conv.conv_general_dilated(x, rhs, window_strides, padding, lhs_dilation,
                                     rhs_dilation, dn, feature_group_count=channels,
                                     precision=precision,
                                     preferred_element_type=preferred_element_type)


def optimization_barrier(operand, /):
    """``jax.lax.optimization_barrier``: ``operand`` (a pytree) as it is. In XLA it stops
    computations moving across it; fusionjit schedules by data dependences only, so it is
    the identity here."""
    from fusionjit._src.tree_util import tree_map
    return tree_map(asarray_operand, operand)


# --- shape arithmetic ----------------------------------------------------------------------

def _stride_dim(d: int, window: int, stride: int) -> int:
    return builtins.max(0, (d - window) // stride + 1) if d >= window else 0


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1) -> tuple:
    """``jax.lax.conv_shape_tuple``: a convolution's output shape for shapes in NCHW / OIHW
    order, ``pads`` explicit (low, high) pairs or "SAME"/"VALID"."""
    from fusionjit._src.lax.convolution import padtype_to_pads
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        _fail(f"lax.conv_shape_tuple: wrong number of explicit pads for the convolution: "
              f"expected {len(lhs_shape) - 2}, got {len(pads)}")
    padded = [d + lo + hi for d, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(p < 0 for p in padded):
        _fail(f"lax.conv_shape_tuple: negative padding is larger than the dimension: "
              f"padding={pads} for lhs_shape[2:]={tuple(lhs_shape[2:])}", ValueError)
    space = tuple(_stride_dim(p, w, s) for p, w, s in zip(padded, rhs_shape[2:], strides))
    n = lhs_shape[0] // batch_group_count if batch_group_count > 1 else lhs_shape[0]
    return (int(n), int(rhs_shape[0])) + space


def conv_general_permutations(dimension_numbers) -> tuple:
    """``jax.lax.conv_general_permutations``: the (lhs, rhs, out) permutations to NCHW /
    OIHW order of string ``dimension_numbers`` such as ("NHWC", "HWIO", "NHWC")."""
    lhs, rhs, out = dimension_numbers
    for s, pair in ((lhs, "NC"), (rhs, "OI"), (out, "NC")):
        if any(s.count(c) != 1 for c in pair):
            _fail(f"lax.conv_general_permutations: {s!r} must name one {pair[0]!r} and one "
                  f"{pair[1]!r} dimension", ValueError)
    spatial = [c for c in rhs if c not in "OI"]

    def perm(s, pair):
        return (s.index(pair[0]), s.index(pair[1])) + tuple(s.index(c) for c in spatial)
    return perm(lhs, "NC"), perm(rhs, "OI"), perm(out, "NC")


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                             dimension_numbers) -> tuple:
    """``jax.lax.conv_general_shape_tuple``: ``conv_shape_tuple`` in the layouts of string
    ``dimension_numbers``."""
    lp, rp, op = conv_general_permutations(dimension_numbers)
    out = conv_shape_tuple(tuple(lhs_shape[i] for i in lp), tuple(rhs_shape[i] for i in rp),
                           window_strides, padding)
    return tuple(int(out[i]) for i in np.argsort(op))


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                               dimension_numbers) -> tuple:
    """``jax.lax.conv_transpose_shape_tuple``: the output shape of ``conv_transpose``."""
    from fusionjit._src.lax.conv_transpose import _string_pads
    lp, rp, op = conv_general_permutations(dimension_numbers)
    lhs = tuple(lhs_shape[i] for i in lp)
    rhs = tuple(rhs_shape[i] for i in rp)
    if isinstance(padding, str):
        if padding not in ("SAME", "VALID"):
            _fail(f"lax.conv_transpose_shape_tuple: invalid padding mode {padding!r}",
                  ValueError)
        padding = [_string_pads(padding, k, s) for k, s in zip(rhs[2:], window_strides)]
    space = [(i - 1) * s - k + 2 + lo + hi
             for i, k, s, (lo, hi) in zip(lhs[2:], rhs[2:], window_strides, padding)]
    out = (lhs[0], rhs[0]) + tuple(space)
    return tuple(int(out[i]) for i in np.argsort(op))


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None) -> tuple:
    """``jax.lax.reduce_window_shape_tuple``: the output shape of ``reduce_window`` with
    explicit (low, high) ``padding``."""
    def dilate(shape, dilation):
        return tuple(0 if d == 0 else 1 + r * (d - 1) for d, r in zip(shape, dilation))
    if base_dilation is not None:
        operand_shape = dilate(operand_shape, base_dilation)
    if window_dilation is not None:
        window_dimensions = dilate(window_dimensions, window_dilation)
    padded = tuple(d + lo + hi for d, (lo, hi) in zip(operand_shape, padding))
    return tuple(_stride_dim(p, w, s)
                 for p, w, s in zip(padded, window_dimensions, window_strides))
