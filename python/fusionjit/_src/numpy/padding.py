"""``pad`` with NumPy's modes, axis by axis as NumPy pads: constant and empty (lax.pad),
edge, wrap, reflect and symmetric (the NumPy index map of each axis compressed into slices),
odd reflections (an exact integer matrix applied along the axis), linear_ramp, and the
statistics modes maximum, minimum, mean and median."""

from __future__ import annotations

import operator

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src import errors
from fusionjit._src.eager import eager_jit
from fusionjit._src.lax import lax
from fusionjit._src.numpy import reductions
from fusionjit._src.numpy.manipulation import take_static
from fusionjit._src.numpy.util import aval, check_arraylike, fail, to_array

_MODE_KWARGS = {
    "constant": {"constant_values"}, "empty": set(), "edge": set(), "wrap": set(),
    "reflect": {"reflect_type"}, "symmetric": {"reflect_type"},
    "linear_ramp": {"end_values"}, "maximum": {"stat_length"}, "minimum": {"stat_length"},
    "mean": {"stat_length"}, "median": {"stat_length"},
}


def _pairs(value, ndim: int, what: str, integer: bool = True) -> np.ndarray:
    """``value`` broadcast to (ndim, 2), as NumPy broadcasts pad_width-like arguments."""
    if isinstance(value, core.Tracer):
        fail(f"pad: {what} must be concrete (it determines the result's shape)",
             errors.ConcretizationTypeError)
    arr = np.asarray(value)
    if integer and arr.dtype.kind not in "iu":
        fail(f"pad: {what} must be integers, got {value!r}")
    try:
        return np.broadcast_to(arr, (ndim, 2)) if arr.ndim else np.full((ndim, 2), arr)
    except ValueError:
        fail(f"pad: {what} of shape {arr.shape} cannot be broadcast to ({ndim}, 2)", ValueError)


@eager_jit("pad_width", "mode", "reflect_type", "stat_length", "end_values")
def pad(array, pad_width, mode="constant", **kwargs):
    """``array`` padded by ``pad_width`` (an int, a (before, after) pair, or one pair per
    axis) in NumPy's ``mode``: 'constant' (``constant_values``), 'empty', 'edge', 'wrap',
    'reflect' and 'symmetric' (``reflect_type`` 'even' or 'odd'), 'linear_ramp'
    (``end_values``), 'maximum', 'minimum', 'mean', 'median' (``stat_length``)."""
    check_arraylike("pad", array)
    x = to_array(array)
    ndim = aval(x).ndim
    if callable(mode):
        fail("pad: a callable mode is not supported", NotImplementedError)
    if mode not in _MODE_KWARGS:
        fail(f"pad: mode {mode!r} is not supported; supported modes: "
             f"{', '.join(sorted(_MODE_KWARGS))}", ValueError)
    unknown = set(kwargs) - _MODE_KWARGS[mode]
    if unknown:
        fail(f"pad: unsupported keyword arguments for mode {mode!r}: {sorted(unknown)}",
             ValueError)
    widths = _pairs(pad_width, ndim, "pad_width").astype(np.int64)
    if (widths < 0).any():
        fail(f"pad: index can't contain negative values, got pad_width {pad_width!r}",
             ValueError)
    if mode in ("constant", "empty"):
        return _pad_constant(x, widths, kwargs.get("constant_values", 0) if mode == "constant"
                             else 0)
    for axis in range(ndim):
        before, after = (int(w) for w in widths[axis])
        if before == 0 and after == 0:
            continue
        n = aval(x).shape[axis]
        if n == 0:
            fail(f"pad: can't extend the empty axis {axis} using mode {mode!r}", ValueError)
        if mode in ("edge", "wrap", "reflect", "symmetric"):
            x = _pad_indexed(x, axis, before, after, mode, kwargs.get("reflect_type", "even"))
        elif mode == "linear_ramp":
            ends = _pairs(kwargs.get("end_values", 0), ndim, "end_values", False)
            x = _pad_ramp(x, axis, before, after, ends[axis])
        else:
            lengths = kwargs.get("stat_length")
            lengths = None if lengths is None else _pairs(lengths, ndim, "stat_length")[axis]
            x = _pad_stat(x, axis, before, after, mode, lengths)
    return x


def _pad_constant(x, widths, values):
    ndim = aval(x).ndim
    d = aval(x).dtype
    if isinstance(values, core.Tracer) or core.is_concrete_array(values):
        if aval(values).shape != ():
            fail("pad: traced constant_values must be a scalar")
        value_pairs = [[values, values]] * ndim
    else:
        value_pairs = _pairs(values, ndim, "constant_values", False).tolist()
    for axis in range(ndim):
        for side in (0, 1):
            w = int(widths[axis][side])
            if not w:
                continue
            config = [(0, 0, 0)] * ndim
            config[axis] = (w, 0, 0) if side == 0 else (0, w, 0)
            v = value_pairs[axis][side]
            if isinstance(v, core.Tracer) or core.is_concrete_array(v):
                v = lax.convert_element_type(v, d)
            else:
                v = to_array(np.asarray(v).astype(d))
            x = lax.pad(x, v, config)
    return x


def _pad_indexed(x, axis, before, after, mode, reflect_type):
    if reflect_type not in ("even", "odd"):
        fail(f"pad: reflect_type must be 'even' or 'odd', got {reflect_type!r}", ValueError)
    n = aval(x).shape[axis]
    if reflect_type == "odd" and mode in ("reflect", "symmetric"):
        # Odd reflections are affine in x: NumPy's padding of the identity gives the exact
        # integer coefficients of every output element.
        coeffs = np.pad(np.eye(n, dtype=np.int64), ((before, after), (0, 0)), mode=mode,
                        reflect_type="odd")
        return _apply_matrix(x, coeffs, axis)
    index_map = np.pad(np.arange(n), (before, after), mode=mode)
    return take_static(x, index_map, axis)


def _apply_matrix(x, coeffs, axis):
    d = aval(x).dtype
    if dt.is_bool(d):
        fail("pad: reflect_type='odd' is not defined for booleans")
    c = to_array(coeffs.astype(d))
    out = lax.dot_general(c, x, (((1,), (axis,)), ((), ())))
    # The result's padded axis comes first; move it back.
    order = list(range(1, aval(x).ndim))
    order.insert(axis, 0)
    return lax.transpose(out, order)


def _edge(x, axis, side):
    n = aval(x).shape[axis]
    return lax.slice_in_dim(x, 0, 1, 1, axis) if side == 0 else \
        lax.slice_in_dim(x, n - 1, n, 1, axis)


def _pad_ramp(x, axis, before, after, end_values):
    d = aval(x).dtype
    compute = d if dt.is_float(d) else dt.default_float()
    shape = aval(x).shape
    parts = []
    for side, width in ((0, before), (1, after)):
        if not width:
            parts.append(None)
            continue
        edge = lax.convert_element_type(_edge(x, axis, side), compute)
        end = to_array(np.asarray(end_values[side]).astype(compute))
        region = list(shape)
        region[axis] = width
        region = tuple(region)
        edge = lax.broadcast_in_dim(edge, region, tuple(range(len(shape))))
        step = lax.div(lax.sub(edge, lax.broadcast_in_dim(end, region, ())),
                       to_array(np.asarray(width, compute)))
        i = lax.broadcasted_iota(compute, region, axis)
        if side == 1:
            i = lax.rev(i, (axis,))
        ramp = lax.add(lax.mul(i, step), lax.broadcast_in_dim(end, region, ()))
        if compute != d:
            ramp = lax.convert_element_type(lax.floor(ramp), d)
        parts.append(ramp)
    pieces = [p for p in (parts[0], x, parts[1]) if p is not None]
    return lax.concatenate(pieces, axis)


def _pad_stat(x, axis, before, after, mode, lengths):
    n = aval(x).shape[axis]
    shape = aval(x).shape
    pieces = []
    for side, width in ((0, before), (1, after)):
        if not width:
            pieces.append(None)
            continue
        length = n if lengths is None else operator.index(int(lengths[side]))
        if length <= 0:
            fail("pad: stat_length of 0 yields no value for padding", ValueError)
        length = min(length, n)
        part = lax.slice_in_dim(x, 0, length, 1, axis) if side == 0 else \
            lax.slice_in_dim(x, n - length, n, 1, axis)
        stat = _stat(part, axis, mode)
        region = list(shape)
        region[axis] = width
        pieces.append(lax.broadcast_in_dim(stat, tuple(region), tuple(range(len(shape)))))
    parts = [p for p in (pieces[0], x, pieces[1]) if p is not None]
    return lax.concatenate(parts, axis)


def _stat(part, axis, mode):
    d = aval(part).dtype
    if mode == "maximum":
        return reductions.max(part, axis=axis, keepdims=True)
    if mode == "minimum":
        return reductions.min(part, axis=axis, keepdims=True)
    if mode == "mean":
        value = reductions.mean(part, axis=axis, keepdims=True)
    else:
        from fusionjit._src.numpy.statistics import median
        value = median(part, axis=axis, keepdims=True)
    if dt.is_float(d):
        return lax.convert_element_type(value, d)
    # NumPy rounds integer statistics half to even.
    return lax.convert_element_type(lax.round(value, lax.RoundingMethod.TO_NEAREST_EVEN), d)
