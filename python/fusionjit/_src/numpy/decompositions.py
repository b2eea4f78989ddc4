"""Matrix decompositions written with fusionjit's own ops (no LAPACK): ``linalg.qr`` by
Householder reflections, one ``fori_loop`` step per column, every matrix of a batch at once.
LAPACK's conventions (dgeqrf's reflector signs, no reflection where a column is already
zero below the diagonal), so Q and R agree with NumPy's and JAX's to rounding."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from fusionjit._src import dtypes as dt
from fusionjit._src.lax import lax
from fusionjit._src.lax.control_flow import fori_loop
from fusionjit._src.numpy import reductions, shapes, ufuncs
from fusionjit._src.numpy.util import aval, check_arraylike, fail, promote_dtypes_inexact, to_array


class QRResult(NamedTuple):
    Q: Any
    R: Any


def _householder(a):
    """(Q, R) of the full decomposition of ``a`` (..., m, n): Q (..., m, m), R (..., m, n)."""
    shape, d = aval(a).shape, aval(a).dtype
    batch, (m, n) = shape[:-2], shape[-2:]
    i32 = np.dtype(np.int32)
    rows = lax.broadcasted_iota(i32, (m, 1), 0)
    cols = lax.broadcasted_iota(i32, (1, n), 1)
    eye = lax.convert_element_type(ufuncs.equal(rows, lax.broadcasted_iota(i32, (1, m), 1)), d)
    q0 = shapes.broadcast_to(eye, batch + (m, m))

    def column(j, carry):
        r, q = carry
        x = reductions.sum(ufuncs.where(ufuncs.equal(cols, j), r, 0.0), axis=-1, keepdims=True)
        on = ufuncs.equal(rows, j)
        xj = reductions.sum(ufuncs.where(on, x, 0.0), axis=-2, keepdims=True)
        below = ufuncs.where(ufuncs.greater(rows, j), x, 0.0)
        tail = reductions.sum(ufuncs.multiply(below, below), axis=-2, keepdims=True)
        # dlarfg: beta = -sign(x_j) * |x[j:]|; no reflection where x below j is zero.
        norm = ufuncs.sqrt(ufuncs.add(ufuncs.multiply(xj, xj), tail))
        alpha = ufuncs.where(ufuncs.less(xj, 0.0), norm, ufuncs.negative(norm))
        v = ufuncs.add(below, ufuncs.where(on, ufuncs.subtract(xj, alpha), 0.0))
        vv = reductions.sum(ufuncs.multiply(v, v), axis=-2, keepdims=True)
        reflect = ufuncs.greater(tail, 0.0)
        scale = ufuncs.where(reflect, ufuncs.divide(2.0, ufuncs.where(reflect, vv, 1.0)), 0.0)
        vt_r = reductions.sum(ufuncs.multiply(v, r), axis=-2, keepdims=True)
        r = ufuncs.subtract(r, ufuncs.multiply(ufuncs.multiply(scale, v), vt_r))
        v_row = shapes.swapaxes(v, -1, -2)
        q_v = reductions.sum(ufuncs.multiply(q, v_row), axis=-1, keepdims=True)
        q = ufuncs.subtract(q, ufuncs.multiply(ufuncs.multiply(scale, q_v), v_row))
        return r, q

    return fori_loop(0, min(m, n), column, (a, q0))[::-1]


def qr(a, mode: str = "reduced"):
    """The QR decomposition of ``a`` (..., m, n), as ``jax.numpy.linalg.qr``: Q and R with
    k = min(m, n) columns and rows ("reduced"), square Q ("complete"), or R only ("r")."""
    check_arraylike("qr", a)
    (a,) = promote_dtypes_inexact(to_array(a))
    if mode not in ("reduced", "complete", "r"):
        fail(f"qr(): mode must be 'reduced', 'complete' or 'r', got {mode!r}", ValueError)
    shape = aval(a).shape
    if len(shape) < 2:
        fail(f"qr() needs an array of at least 2 dimensions, got shape {shape}", ValueError)
    if not dt.is_float(aval(a).dtype):
        fail(f"qr() supports float arrays, got {aval(a).dtype}")
    m, n = shape[-2:]
    k = min(m, n)
    q, r = _householder(a)
    if mode == "complete":
        return QRResult(q, r)
    r = lax.slice_in_dim(r, 0, k, axis=len(shape) - 2)
    if mode == "r":
        return r
    return QRResult(lax.slice_in_dim(q, 0, k, axis=len(shape) - 1), r)
