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
from fusionjit._src.numpy import gather, linalg_lanes, reductions, shapes, ufuncs
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


# --- Cholesky, LU and the solvers built on them -----------------------------------------------

def _square(name: str, a):
    check_arraylike(name, a)
    (a,) = promote_dtypes_inexact(to_array(a))
    shape = aval(a).shape
    if len(shape) < 2 or shape[-1] != shape[-2]:
        fail(f"{name}() needs square matrices (..., n, n), got shape {shape}", ValueError)
    if not dt.is_float(aval(a).dtype):
        fail(f"{name}() supports float arrays, got {aval(a).dtype}")
    return a


def _iotas(n: int):
    i32 = np.dtype(np.int32)
    return lax.broadcasted_iota(i32, (n, 1), 0), lax.broadcasted_iota(i32, (1, n), 1)


def _row(m, rows, i):
    """Row ``i`` of the matrices ``m`` (..., n, k) as (..., 1, k); ``i`` a scalar or a
    (..., 1, 1) array of indices."""
    zero = to_array(0, aval(m).dtype, False)
    return reductions.sum(ufuncs.where(ufuncs.equal(rows, i), m, zero), axis=-2, keepdims=True)


def _col(m, cols, j):
    zero = to_array(0, aval(m).dtype, False)
    return reductions.sum(ufuncs.where(ufuncs.equal(cols, j), m, zero), axis=-1, keepdims=True)


def _swap_rows(m, rows, k, p):
    """m with rows k and p exchanged (p a (..., 1, 1) array of indices)."""
    row_k, row_p = _row(m, rows, k), _row(m, rows, p)
    return ufuncs.where(ufuncs.equal(rows, k), row_p,
                        ufuncs.where(ufuncs.equal(rows, p), row_k, m))


def _cholesky_lower(a):
    """L with L L^T = a, column by column (nan where a is not positive definite)."""
    n = aval(a).shape[-1]
    rows, cols = _iotas(n)

    def column(j, low):
        s = reductions.sum(ufuncs.multiply(low, _row(low, rows, j)), axis=-1, keepdims=True)
        c = ufuncs.subtract(_col(a, cols, j), s)
        d = ufuncs.sqrt(_row(c, rows, j))
        new = ufuncs.where(ufuncs.greater(rows, j), ufuncs.divide(c, d),
                           ufuncs.where(ufuncs.equal(rows, j), d, 0.0))
        return ufuncs.where(ufuncs.equal(cols, j), new, low)

    return fori_loop(0, n, column, ufuncs.multiply(a, 0.0))


def cholesky(a, *, upper: bool = False, symmetrize_input: bool = True):
    """The Cholesky factor of symmetric positive-definite matrices (lower, or upper with
    ``upper=True``; nan where not positive definite), as ``jax.numpy.linalg.cholesky``."""
    a = _square("cholesky", a)
    if symmetrize_input:
        a = ufuncs.multiply(ufuncs.add(a, shapes.swapaxes(a, -1, -2)), 0.5)
    batch = aval(a).shape[:-2]
    if linalg_lanes.pays(batch):
        low = linalg_lanes.from_lanes(linalg_lanes.cholesky_lower(linalg_lanes.to_lanes(a)), batch)
    else:
        low = _cholesky_lower(a)
    # Not positive definite (a pivot not > 0): nan below and on the diagonal, as JAX.
    rows, cols = _iotas(aval(a).shape[-1])
    diag = _diagonal(low)
    failed = reductions.any(ufuncs.logical_not(ufuncs.greater(diag, 0.0)), axis=-1,
                            keepdims=True)
    failed = shapes.expand_dims(failed, -1)
    low = ufuncs.where(failed, ufuncs.where(ufuncs.greater_equal(rows, cols), np.nan, 0.0), low)
    return shapes.swapaxes(low, -1, -2) if upper else low


def _triangular(m, b, lower: bool, unit_diagonal: bool = False):
    """x with m x = b for triangular m (..., n, n) and b (..., n, k), row by row (a large
    batch: column by column, in lanes)."""
    n = aval(m).shape[-1]
    batch = tuple(np.broadcast_shapes(aval(m).shape[:-2], aval(b).shape[:-2]))
    if linalg_lanes.pays(batch):
        m = linalg_lanes.to_lanes(shapes.broadcast_to(m, batch + aval(m).shape[-2:]))
        b = linalg_lanes.to_lanes(shapes.broadcast_to(b, batch + aval(b).shape[-2:]))
        return linalg_lanes.from_lanes(linalg_lanes.triangular(m, b, lower, unit_diagonal), batch)
    rows, cols = _iotas(n)

    def row(step, x):
        i = step if lower else n - 1 - step
        m_i = _row(m, rows, i)  # (..., 1, n)
        known = ufuncs.less(cols, i) if lower else ufuncs.greater(cols, i)
        coef = shapes.swapaxes(ufuncs.where(known, m_i, 0.0), -1, -2)  # (..., n, 1)
        s = reductions.sum(ufuncs.multiply(coef, x), axis=-2, keepdims=True)
        x_i = ufuncs.subtract(_row(b, rows, i), s)
        if not unit_diagonal:
            x_i = ufuncs.divide(x_i, _col(m_i, cols, i))
        return ufuncs.where(ufuncs.equal(rows, i), x_i, x)

    return fori_loop(0, n, row, ufuncs.multiply(b, 0.0))


def _lu(a):
    """(lu, permutation (..., n) int32, sign of the permutation) by Gaussian elimination
    with partial pivoting (the first largest |pivot|, as LAPACK's getrf)."""
    shape = aval(a).shape
    n = shape[-1]
    if linalg_lanes.pays(shape[:-2]):
        lu, perm, sign = linalg_lanes.lu(linalg_lanes.to_lanes(a))
        perm = lax.reshape(lax.transpose(perm, (2, 1, 0)), shape[:-1])
        return linalg_lanes.from_lanes(lu, shape[:-2]), perm, lax.reshape(sign, shape[:-2])
    rows, cols = _iotas(n)
    i32 = np.dtype(np.int32)
    perm0 = shapes.broadcast_to(lax.broadcasted_iota(i32, (n, 1), 0), shape[:-2] + (n, 1))
    sign0 = lax.full(shape[:-2] + (1, 1), 1.0, aval(a).dtype)

    def step(k, carry):
        m, perm, sign = carry
        c = _col(m, cols, k)  # (..., n, 1)
        cand = ufuncs.where(ufuncs.greater_equal(rows, k), ufuncs.abs(c), -1.0)
        p = lax.convert_element_type(reductions.argmax(cand, axis=-2, keepdims=True), i32)
        m, perm = _swap_rows(m, rows, k, p), _swap_rows(perm, rows, k, p)
        sign = ufuncs.where(ufuncs.equal(p, k), sign, ufuncs.negative(sign))
        row_k = _row(m, rows, k)
        pivot = _col(row_k, cols, k)
        # A zero pivot (a singular matrix) leaves its zero column as it is, as getrf does.
        safe = ufuncs.where(ufuncs.equal(pivot, 0.0), 1.0, pivot)
        low = ufuncs.where(ufuncs.greater(rows, k), ufuncs.divide(_col(m, cols, k), safe), 0.0)
        update = ufuncs.multiply(low, ufuncs.where(ufuncs.greater(cols, k), row_k, 0.0))
        m = ufuncs.subtract(m, update)
        m = ufuncs.where(ufuncs.logical_and(ufuncs.greater(rows, k), ufuncs.equal(cols, k)), low, m)
        return m, perm, sign

    lu, perm, sign = fori_loop(0, n, step, (a, perm0, sign0))
    return lu, lax.reshape(perm, shape[:-1]), lax.reshape(sign, shape[:-2])


def _diagonal(m):
    n = aval(m).shape[-1]
    rows, cols = _iotas(n)
    return reductions.sum(ufuncs.where(ufuncs.equal(rows, cols), m, 0.0), axis=-1)


def det(a):
    """The determinant, from the LU decomposition with partial pivoting."""
    a = _square("det", a)
    if aval(a).shape[-1] == 0:
        return lax.full(aval(a).shape[:-2], 1.0, aval(a).dtype)
    lu, _, sign = _lu(a)
    return ufuncs.multiply(sign, reductions.prod(_diagonal(lu), axis=-1))


class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


def slogdet(a):
    """(sign, log|det|) of the determinant, without overflow."""
    a = _square("slogdet", a)
    if aval(a).shape[-1] == 0:
        batch, d = aval(a).shape[:-2], aval(a).dtype
        return SlogdetResult(lax.full(batch, 1.0, d), lax.full(batch, 0.0, d))
    lu, _, sign = _lu(a)
    d = _diagonal(lu)
    sign = ufuncs.multiply(sign, reductions.prod(ufuncs.sign(d), axis=-1))
    return SlogdetResult(sign, reductions.sum(ufuncs.log(ufuncs.abs(d)), axis=-1))


def solve(a, b):
    """x with a x = b, by LU with partial pivoting; ``b`` (..., n) is a vector only when it
    is 1-D, else (..., n, k) (NumPy 2's and JAX's rule)."""
    a = _square("solve", a)
    check_arraylike("solve", b)
    a, b = promote_dtypes_inexact(a, to_array(b))
    n = aval(a).shape[-1]
    vector = aval(b).ndim == 1
    if (aval(b).shape[0] if vector else aval(b).shape[-2]) != n:
        fail(f"solve(): b's shape {aval(b).shape} does not match a's {aval(a).shape}", ValueError)
    if vector:
        b = lax.reshape(b, (n, 1))
    batch = tuple(np.broadcast_shapes(aval(a).shape[:-2], aval(b).shape[:-2]))
    a = shapes.broadcast_to(a, batch + (n, n))
    b = shapes.broadcast_to(b, batch + aval(b).shape[-2:])
    if linalg_lanes.pays(batch):  # (all of it in lanes: one transpose in, one out)
        lu, perm, _ = linalg_lanes.lu(linalg_lanes.to_lanes(a))
        y = linalg_lanes.triangular(lu, linalg_lanes.permute_rows(linalg_lanes.to_lanes(b), perm),
                                    lower=True, unit_diagonal=True)
        x = linalg_lanes.from_lanes(linalg_lanes.triangular(lu, y, lower=False), batch)
        return lax.reshape(x, batch + (n,)) if vector else x
    lu, perm, _ = _lu(a)
    k = aval(b).shape[-1]
    index = shapes.broadcast_to(shapes.expand_dims(perm, -1), batch + (n, k))
    y = _triangular(lu, gather.take_along_axis(b, index, axis=-2), lower=True,
                    unit_diagonal=True)
    x = _triangular(lu, y, lower=False)
    return lax.reshape(x, batch + (n,)) if vector else x


def inv(a):
    """The inverse, as solve(a, I)."""
    a = _square("inv", a)
    n = aval(a).shape[-1]
    rows, cols = _iotas(n)
    eye = shapes.broadcast_to(lax.convert_element_type(ufuncs.equal(rows, cols), aval(a).dtype),
                              aval(a).shape)
    return solve(a, eye)


def solve_triangular(a, b, trans=0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, debug=None, check_finite: bool = True):
    """x with a x = b (``trans`` 0), a^T x = b (1 or "T") for triangular ``a``, as
    ``jax.scipy.linalg.solve_triangular`` (b (..., n) or (..., n, k))."""
    a = _square("solve_triangular", a)
    a, b = promote_dtypes_inexact(a, to_array(b))
    if trans in (1, "T", 2, "C"):
        a, lower = shapes.swapaxes(a, -1, -2), not lower
    elif trans not in (0, "N"):
        fail(f"solve_triangular(): trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}",
             ValueError)
    vector = aval(b).ndim == aval(a).ndim - 1
    if vector:
        b = shapes.expand_dims(b, -1)
    x = _triangular(a, b, lower=lower, unit_diagonal=unit_diagonal)
    return lax.reshape(x, aval(x).shape[:-1]) if vector else x


# --- built on the above -----------------------------------------------------------------------

def matrix_power(a, n: int):
    """a to the integer power n (negative: of the inverse), by repeated squaring."""
    import operator
    check_arraylike("matrix_power", a)
    a = to_array(a)
    shape = aval(a).shape
    if len(shape) < 2 or shape[-1] != shape[-2]:
        fail(f"matrix_power() needs square matrices (..., n, n), got shape {shape}", ValueError)
    n = operator.index(n)
    if n < 0 and not dt.is_float(aval(a).dtype):
        fail("matrix_power(): negative powers of integer matrices are not integers", TypeError)
    if n == 0:
        rows, cols = _iotas(aval(a).shape[-1])
        return shapes.broadcast_to(lax.convert_element_type(ufuncs.equal(rows, cols),
                                                            aval(a).dtype), aval(a).shape)
    from fusionjit._src.numpy import products
    if n < 0:
        a, n = inv(a), -n
    result = None
    while n:
        if n & 1:
            result = a if result is None else products.matmul(result, a)
        n >>= 1
        if n:
            a = products.matmul(a, a)
    return result


def multi_dot(arrays, *, precision=None):
    """The product of a chain of matrices (the first and last may be vectors), left to
    right."""
    from fusionjit._src.numpy import products
    arrays = [to_array(x) for x in arrays]
    if len(arrays) < 2:
        fail(f"multi_dot() needs at least two arrays, got {len(arrays)}", ValueError)
    out = arrays[0]
    for x in arrays[1:]:
        out = products.matmul(out, x)
    return out


def tensorinv(a, ind: int = 2):
    """The inverse of ``a`` seen as a matrix of its first ``ind`` dims by the rest."""
    import math
    import operator
    check_arraylike("tensorinv", a)
    a = to_array(a)
    ind = operator.index(ind)
    if ind <= 0:
        fail(f"ind must be a positive integer; got ind={ind}", ValueError)
    shape = aval(a).shape
    rows, cols = math.prod(shape[:ind]), math.prod(shape[ind:])
    if rows != cols:
        fail(f"tensorinv is only possible when the product of the first `ind` dimensions "
             f"equals that of the remaining dimensions. got a.shape={shape} with ind={ind}.",
             ValueError)
    return lax.reshape(inv(lax.reshape(a, (rows, cols))), shape[ind:] + shape[:ind])


def tensorsolve(a, b, axes=None):
    """x with tensordot(a, x, x.ndim) = b."""
    import math
    check_arraylike("tensorsolve", a, b)
    a, b = to_array(a), to_array(b)
    if axes is not None:
        order = [d for d in range(aval(a).ndim) if d not in [k % aval(a).ndim for k in axes]]
        a = lax.transpose(a, tuple(order) + tuple(k % aval(a).ndim for k in axes))
    ashape, bshape = aval(a).shape, aval(b).shape
    out_shape = ashape[len(bshape):]
    if ashape[:len(bshape)] != bshape:
        fail("After moving axes to end, leading shape of a must match shape of b. got "
             f"a.shape={ashape}, b.shape={bshape}", ValueError)
    size = math.prod(bshape)
    if size != math.prod(out_shape):
        fail("Input arrays must have prod(a.shape[:b.ndim]) == prod(a.shape[b.ndim:]); got "
             f"a.shape={ashape}, b.ndim={len(bshape)}.", ValueError)
    x = solve(lax.reshape(a, (size, size)), lax.reshape(b, (size,)))
    return lax.reshape(x, out_shape)
