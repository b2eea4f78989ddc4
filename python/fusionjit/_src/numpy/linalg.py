"""``fusionjit.numpy.linalg``: the array-API linalg functions that reduce to dot and
elementwise work (norms, products, traces and diagonals). qr, cholesky, solve, inv, det and
slogdet are in decompositions.py; eigh and svd in eigen.py; eig is not available yet."""

from __future__ import annotations

import numpy as np

from fusionjit._src.eager import eager_jit
from fusionjit._src.lax import lax
from fusionjit._src.numpy import contractions, manipulation, products, reductions
from fusionjit._src.numpy.util import (aval, canonical_axes, check_arraylike, fail,
                                       promote_dtypes_inexact, to_array)

matrix_transpose = contractions.matrix_transpose


def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
    """The matrix product (``@``)."""
    return products.matmul(x1, x2, preferred_element_type=preferred_element_type)


def vecdot(x1, x2, /, *, axis: int = -1, precision=None, preferred_element_type=None):
    """The dot product along ``axis`` (broadcasting the other dimensions)."""
    return contractions.vecdot(x1, x2, axis=axis, preferred_element_type=preferred_element_type)


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None):
    """``fusionjit.numpy.tensordot`` with the array API's keyword-only ``axes``."""
    return contractions.tensordot(x1, x2, axes, preferred_element_type=preferred_element_type)


def outer(x1, x2, /):
    """The outer product of two 1-D arrays."""
    check_arraylike("outer", x1, x2)
    for x in (x1, x2):
        if aval(to_array(x)).ndim != 1:
            fail(f"linalg.outer needs 1-D arrays, got shape {aval(to_array(x)).shape}",
                 ValueError)
    return products.outer(x1, x2)


def trace(x, /, *, offset: int = 0, dtype=None):
    """The sums along the ``offset`` diagonal of the last two axes."""
    check_arraylike("trace", x)
    x = to_array(x)
    if aval(x).ndim < 2:
        fail(f"linalg.trace needs an array of at least 2 dimensions, got {aval(x).shape}",
             ValueError)
    return manipulation.trace(x, offset, -2, -1, dtype)


def diagonal(x, /, *, offset: int = 0):
    """The ``offset`` diagonal of the last two axes."""
    check_arraylike("diagonal", x)
    x = to_array(x)
    if aval(x).ndim < 2:
        fail(f"linalg.diagonal needs an array of at least 2 dimensions, got {aval(x).shape}",
             ValueError)
    return manipulation.diagonal(x, offset, -2, -1)


def cross(x1, x2, /, *, axis: int = -1):
    """The cross product of 3-vectors along ``axis``."""
    check_arraylike("cross", x1, x2)
    for x in (x1, x2):
        shape = aval(to_array(x)).shape
        if not shape or shape[axis] != 3:
            fail(f"linalg.cross needs vectors of size 3 along axis {axis}, got shape {shape}",
                 ValueError)
    return contractions.cross(x1, x2, axis=axis)


def _abs_float(x):
    (x,) = promote_dtypes_inexact(to_array(x))
    return x, lax.abs(x)


def vector_norm(x, /, *, axis=None, keepdims: bool = False, ord=2):
    """The vector ``ord``-norm over ``axis`` (all axes, flattened, if None): inf (max |x|),
    -inf (min |x|), 0 (the number of non-zeros), or any p: ``sum(|x|^p)^(1/p)``."""
    check_arraylike("vector_norm", x)
    x, a = _abs_float(x)
    if isinstance(ord, str):
        fail(f"vector_norm: invalid ord {ord!r} for vectors", ValueError)
    d = aval(a).dtype
    if ord == np.inf:
        return reductions.max(a, axis=axis, keepdims=keepdims, initial=0)
    if ord == -np.inf:
        return reductions.min(a, axis=axis, keepdims=keepdims)
    if ord == 0:
        nz = lax.convert_element_type(lax.ne(a, lax.full(aval(a).shape, 0, d)), d)
        return reductions.sum(nz, axis=axis, keepdims=keepdims)
    if ord == 1:
        return reductions.sum(a, axis=axis, keepdims=keepdims)
    if ord == 2:
        return lax.sqrt(reductions.sum(lax.mul(a, a), axis=axis, keepdims=keepdims))
    p = to_array(np.array(ord, d))
    total = reductions.sum(lax.pow(a, lax.broadcast_in_dim(p, aval(a).shape, ())), axis=axis,
                           keepdims=keepdims)
    return lax.pow(total, lax.broadcast_in_dim(lax.div(to_array(np.array(1, d)), p),
                                               aval(total).shape, ()))


def _matrix_norm(x, axes, keepdims, ord):
    x, a = _abs_float(x)
    r, c = axes
    if ord in ("fro", "f", None):
        return lax.sqrt(reductions.sum(lax.mul(a, a), axis=axes, keepdims=keepdims))
    if ord in (1, -1, np.inf, -np.inf):
        # 1: the largest column sum; inf: the largest row sum (negative: the smallest).
        inner, outer = (r, c) if ord in (1, -1) else (c, r)
        sums = reductions.sum(a, axis=inner, keepdims=True)
        pick = reductions.max if ord in (1, np.inf) else reductions.min
        out = pick(sums, axis=(inner, outer), keepdims=True)
        if not keepdims:
            out = lax.squeeze(out, tuple(sorted(axes)))
        return out
    if ord in ("nuc", 2, -2):
        # The singular values' sum, largest or smallest (the two axes moved to the end).
        from fusionjit._src.numpy import eigen, shapes
        moved = shapes.moveaxis(x, (r, c), (-2, -1))
        s = eigen.svdvals(moved)
        out = (reductions.sum if ord == "nuc" else reductions.max if ord == 2
               else reductions.min)(s, axis=-1)
        if keepdims:
            out = lax.expand_dims(out, tuple(sorted(axes)))
        return out
    fail(f"invalid norm order {ord!r} for matrices", ValueError)


def matrix_norm(x, /, *, keepdims: bool = False, ord="fro"):
    """The matrix norm of the last two axes: 'fro', 1, -1, inf, -inf, 'nuc', 2, -2 (the
    last three from the singular values)."""
    check_arraylike("matrix_norm", x)
    x = to_array(x)
    nd = aval(x).ndim
    if nd < 2:
        fail(f"matrix_norm needs an array of at least 2 dimensions, got {aval(x).shape}",
             ValueError)
    return _matrix_norm(x, (nd - 2, nd - 1), keepdims, ord)


@eager_jit("ord", "axis", "keepdims")
def norm(x, ord=None, axis=None, keepdims: bool = False):
    """NumPy's ``linalg.norm``: the 2-norm of the flattened array by default; a vector norm
    over one axis, or a matrix norm over two."""
    check_arraylike("norm", x)
    x = to_array(x)
    nd = aval(x).ndim
    if axis is None:
        if ord is None:
            return vector_norm(x)
        if nd == 1:
            return vector_norm(x, ord=ord, keepdims=keepdims)
        if nd == 2:
            return _matrix_norm(x, (0, 1), keepdims, ord)
        fail("norm: ord needs axis for arrays of more than 2 dimensions", ValueError)
    axes = canonical_axes(axis, nd)
    if len(axes) == 1:
        return vector_norm(x, axis=axes, keepdims=keepdims, ord=2 if ord is None else ord)
    if len(axes) == 2:
        return _matrix_norm(x, axes, keepdims, ord)
    fail(f"norm: axis must be one or two axes, got {axis!r}", ValueError)
