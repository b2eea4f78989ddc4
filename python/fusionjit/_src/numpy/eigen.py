"""``linalg.eigh`` and ``linalg.svd`` written with fusionjit's own ops (no LAPACK), by Jacobi
rotations, every matrix of a batch at once. A sweep is n - 1 rounds of n / 2 disjoint
rotations (a round-robin of the index pairs); a rotation changes its two rows and columns
only, so the rest of the matrix stays exact. Sweeps run until the off-diagonal part is at
rounding level (a ``while_loop``: under ``vmap`` each matrix stops on its own; 30 at most).
Jacobi is accurate and simple; a sweep costs n^3, so it suits the small and medium matrices
of ML code (covariances, preconditioners, whitening), not large ones.

``eigh`` returns ascending eigenvalues, ``svd`` descending singular values, as JAX. Their
gradients are JAX's closed forms, transposed by fusionjit's own reverse mode (``custom_vjp``:
the loops are not differentiated)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from fusionjit._src import dtypes as dt
from fusionjit._src.autodiff import custom_vjp, vjp
from fusionjit._src.lax import lax
from fusionjit._src.lax.control_flow import fori_loop, while_loop
from fusionjit._src.numpy import gather, math_ufuncs, products, reductions, shapes, sorting, ufuncs
from fusionjit._src.numpy.decompositions import _diagonal, _householder, _square
from fusionjit._src.numpy.util import (aval, check_arraylike, fail, promote_dtypes_inexact,
                                       to_array)


class EighResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class SVDResult(NamedTuple):
    U: Any
    S: Any
    Vh: Any


_MAX_SWEEPS = 30


def _round_robin(m: int):
    """For m even: (partner, first), each (m - 1, m): round r pairs index i with partner[r, i];
    first[r, i] is 1 where i is the smaller of its pair, else -1."""
    players = list(range(m))
    partner = np.zeros((m - 1, m), np.int32)
    first = np.zeros((m - 1, m), np.float64)
    for r in range(m - 1):
        for k in range(m // 2):
            a, b = players[k], players[m - 1 - k]
            partner[r, a], partner[r, b] = b, a
            first[r, min(a, b)], first[r, max(a, b)] = 1.0, -1.0
        players = [players[0], players[-1]] + players[1:-1]
    return partner, first


def _rotate_columns(x, c, t, partner):
    """x J for the round's rotations: column i becomes c_i x_i + t_i x_partner(i)."""
    return ufuncs.add(ufuncs.multiply(x, shapes.expand_dims(c, -2)),
                      ufuncs.multiply(gather.take(x, partner, axis=-1), shapes.expand_dims(t, -2)))


def _negligible(alpha, beta, gamma, floor, d):
    """Whether gamma, off the diagonal of [[alpha, gamma], [gamma, beta]], is below rounding:
    |gamma| <= eps sqrt(|alpha beta|), or <= ``floor`` (for zero diagonals)."""
    eps = float(dt.finfo(d).eps)
    bound = ufuncs.maximum(ufuncs.multiply(ufuncs.sqrt(ufuncs.abs(ufuncs.multiply(alpha, beta))),
                                           eps), floor)
    return ufuncs.less_equal(ufuncs.abs(gamma), bound)


def _rotation(alpha, beta, gamma, first, floor, d):
    """c and t (-s for the first of a pair, +s for the second) of the rotation that zeroes
    gamma in [[alpha, gamma], [gamma, beta]] (the smaller angle); none (c = 1, t = 0) where
    gamma is negligible, so that converged pairs stay exactly as they are."""
    zero = _negligible(alpha, beta, gamma, floor, d)
    safe = ufuncs.where(zero, to_array(1, d, False), gamma)
    zeta = ufuncs.divide(ufuncs.subtract(beta, alpha), ufuncs.multiply(safe, 2.0))
    t = ufuncs.divide(ufuncs.where(ufuncs.less(zeta, 0.0), -1.0, 1.0),
                      ufuncs.add(ufuncs.abs(zeta), math_ufuncs.hypot(zeta, 1.0)))
    t = ufuncs.where(zero, to_array(0, d, False), t)
    c = lax.rsqrt(ufuncs.add(ufuncs.multiply(t, t), 1.0))
    return c, ufuncs.multiply(ufuncs.multiply(t, c), ufuncs.negative(first))


def _pair_roles(values, partner, first):
    """(value of the pair's first index, of its second) at every index."""
    other = gather.take(values, partner, axis=-1)
    is_first = ufuncs.greater(first, 0.0)
    return ufuncs.where(is_first, values, other), ufuncs.where(is_first, other, values)


def _jacobi(x, state, step, converged, off, scale):
    """Sweeps of rounds ``step(partner_r, first_r, state)`` while some matrix is neither
    ``converged(state)`` nor stalled near rounding level: its ``off(state)`` (the
    off-diagonal part) below (64 n eps)^2 ``scale`` and not halved by the last sweep (there
    rotations only stir rounding errors). (Far from it a sweep may well not halve it.)"""
    m = aval(x).shape[-1]
    d = aval(x).dtype
    partner_table, first_table = _round_robin(m)
    partner_table = to_array(partner_table, np.int32, False)
    first_table = to_array(first_table.astype(d), d, False)

    def sweep(carry):
        st, k, _ = carry

        def one_round(r, st):
            partner = gather.take(partner_table, r, axis=0)
            first = gather.take(first_table, r, axis=0)
            return step(partner, first, st)

        return fori_loop(0, m - 1, one_round, st), ufuncs.add(k, 1), off(st)

    near = ufuncs.multiply(scale, (64 * m * float(dt.finfo(d).eps)) ** 2)

    def more(carry):
        st, k, before = carry
        now = off(st)
        progress = ufuncs.logical_or(ufuncs.less(now, ufuncs.multiply(before, 0.5)),
                                     ufuncs.greater(now, near))
        going = ufuncs.logical_and(ufuncs.logical_not(converged(st)), progress)
        return ufuncs.logical_and(ufuncs.less(k, _MAX_SWEEPS), reductions.any(going))

    start = ufuncs.add(off(state), np.inf)
    return while_loop(more, sweep, (state, to_array(0, np.int32, False), start))[0]


def _eigh_unsorted(a):
    """(w, V) of symmetric matrices a (..., n, n) by two-sided Jacobi."""
    d = aval(a).dtype
    n = aval(a).shape[-1]
    m = n + n % 2  # odd n: a decoupled extra row and column, dropped after
    if m != n:
        a = _pad_last_two(a, 1, 1)
    eye = np.eye(m, dtype=d)
    eps = float(dt.finfo(d).eps)
    # (..., 1): the least off-diagonal entry worth a rotation, 2 eps |a| (the rounding of
    # the rows' updates: below it, rotations only stir rounding errors, without end)
    floor = ufuncs.multiply(ufuncs.sqrt(reductions.sum(ufuncs.square(a), axis=(-2, -1))),
                            2 * eps)
    floor = shapes.expand_dims(floor, -1)

    def step(partner, first, st):
        a, v = st
        diag = _diagonal(a)
        row = reductions.sum(ufuncs.multiply(a, lax.convert_element_type(
            ufuncs.equal(shapes.expand_dims(partner, -1), np.arange(m, dtype=np.int32)), d)),
            axis=-1)  # a[i, partner(i)]
        # Both members of a pair take the same rotation: of a's entry and its mirror, which
        # rounding leaves a little apart (else the rotations are not orthogonal, and the
        # sweeps drift and cycle).
        gamma = ufuncs.multiply(ufuncs.add(row, gather.take(row, partner, axis=-1)), 0.5)
        alpha, beta = _pair_roles(diag, partner, first)
        c, t = _rotation(alpha, beta, gamma, first, floor, d)
        # J^T a J: rows, then columns, of each pair combined.
        rows = ufuncs.add(ufuncs.multiply(a, shapes.expand_dims(c, -1)),
                          ufuncs.multiply(gather.take(a, partner, axis=-2),
                                          shapes.expand_dims(t, -1)))
        return _rotate_columns(rows, c, t, partner), _rotate_columns(v, c, t, partner)

    def converged(st):  # no rotation left to make
        diag = _diagonal(st[0])
        small = _negligible(shapes.expand_dims(diag, -1), shapes.expand_dims(diag, -2), st[0],
                            shapes.expand_dims(floor, -1), d)
        return reductions.all(ufuncs.logical_or(small, eye > 0), axis=(-2, -1))

    def off(st):
        return reductions.sum(ufuncs.square(ufuncs.multiply(st[0], 1.0 - eye)), axis=(-2, -1))

    v0 = shapes.broadcast_to(eye, aval(a).shape)
    norm2 = reductions.sum(ufuncs.square(a), axis=(-2, -1))
    a, v = _jacobi(a, (a, v0), step, converged, off, norm2) if m > 1 else (a, v0)
    w = _diagonal(a)
    if m != n:
        w = lax.slice_in_dim(w, 0, n, axis=aval(w).ndim - 1)
        v = lax.slice_in_dim(lax.slice_in_dim(v, 0, n, axis=aval(v).ndim - 1), 0, n,
                             axis=aval(v).ndim - 2)
    return w, v


def _pad_last_two(a, rows, cols):
    zero = to_array(0, aval(a).dtype, False)
    return lax.pad(a, zero, [(0, 0, 0)] * (aval(a).ndim - 2) + [(0, rows, 0), (0, cols, 0)])


def _sorted_columns(values, matrices, descending: bool):
    """values sorted along the last axis, and the columns of each matrix in the same order."""
    order = sorting.argsort(ufuncs.negative(values) if descending else values, axis=-1)
    cols = shapes.expand_dims(order, -2)
    return (gather.take_along_axis(values, order, axis=-1),
            *(gather.take_along_axis(x, cols, axis=-1) for x in matrices))


def _mT(x):
    return shapes.swapaxes(x, -1, -2)


@custom_vjp
def _eigh(a):
    w, v = _eigh_unsorted(a)
    return _sorted_columns(w, [v], descending=False)


def _eigh_fwd(a):
    w, v = _eigh(a)
    return (w, v), (w, v)


def _eigh_jvp(da, w, v):
    """JAX's: dw = diag(V^T dA V), dV = V (F o V^T dA V), F_ij = 1 / (w_j - w_i) off the
    diagonal."""
    n = aval(w).shape[-1]
    eye = np.eye(n, dtype=aval(w).dtype)
    vdv = products.matmul(products.matmul(_mT(v), da), v)
    diffs = ufuncs.subtract(shapes.expand_dims(w, -2), shapes.expand_dims(w, -1))
    # 0 also between equal eigenvalues (JAX: inf there), whose vectors' gradient is not
    # defined: a loss of the eigenvalues alone (or of a whole eigenspace) keeps finite ones.
    unset = ufuncs.logical_or(eye > 0, ufuncs.equal(diffs, 0.0))
    f = ufuncs.where(unset, 0.0, ufuncs.divide(1.0, ufuncs.where(unset, 1.0, diffs)))
    return _diagonal(vdv), products.matmul(
        v, ufuncs.multiply(f, vdv))


def _eigh_bwd(res, g):
    w, v = res
    _, pullback = vjp(lambda da: _eigh_jvp(da, w, v), ufuncs.multiply(
        shapes.expand_dims(w, -1), shapes.expand_dims(w, -2)))
    (ga,) = pullback(g)
    return (ga,)


_eigh.defvjp(_eigh_fwd, _eigh_bwd)


_JITTED: dict = {}


def _compiled(fn, **options):
    """``fn`` under jit (made once): an eager call runs one cached program instead of
    tracing its loops again op by op (inside a trace it is inlined, as any jit)."""
    jitted = _JITTED.get(fn)
    if jitted is None:
        from fusionjit._src.api import jit
        jitted = _JITTED[fn] = jit(fn, **options)
    return jitted


def eigh(a, UPLO: str | None = None, symmetrize_input: bool = True):
    """Eigenvalues (ascending) and eigenvectors (columns) of symmetric matrices (..., n, n),
    as ``jax.numpy.linalg.eigh``; with ``symmetrize_input`` (the default) of (a + a^T) / 2,
    else of the triangle ``UPLO`` ("L", the default, or "U") mirrored."""
    a = _square("eigh", a)
    if UPLO not in (None, "L", "U"):
        fail(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}", ValueError)
    return EighResult(*_compiled(_eigh_of, static_argnums=(1, 2))(a, UPLO, symmetrize_input))


def _eigh_of(a, UPLO, symmetrize_input):
    if symmetrize_input:
        a = ufuncs.multiply(ufuncs.add(a, _mT(a)), 0.5)
    else:
        n = aval(a).shape[-1]
        keep = np.tril(np.ones((n, n), bool)) if UPLO != "U" else np.triu(np.ones((n, n), bool))
        tri = ufuncs.where(keep, a, 0.0)
        a = ufuncs.add(tri, ufuncs.where(np.eye(n, dtype=bool), 0.0, _mT(tri)))
    return _eigh(a)


def eigvalsh(a, UPLO: str | None = None, *, symmetrize_input: bool = True):
    """The eigenvalues (ascending) of symmetric matrices."""
    return eigh(a, UPLO, symmetrize_input).eigenvalues


# --- the singular value decomposition --------------------------------------------------------

def _svd_tall(a):
    """(U, s, V) of a (..., m, n), m >= n, by one-sided Jacobi: U (..., m, n) with orthonormal
    columns where s > 0 (zero columns where s is 0), s descending, V (..., n, n)."""
    d = aval(a).dtype
    n = aval(a).shape[-1]
    m = n + n % 2
    if m != n:
        a = _pad_last_two(a, 0, 1)
    eps = float(dt.finfo(d).eps)
    # (..., 1): eps^2 |a|^2, the least inner product of columns worth a rotation
    floor = shapes.expand_dims(ufuncs.multiply(reductions.sum(ufuncs.square(a), axis=(-2, -1)),
                                               eps * eps), -1)

    def step(partner, first, st):
        u, v = st
        norms = reductions.sum(ufuncs.square(u), axis=-2)
        gamma = reductions.sum(ufuncs.multiply(u, gather.take(u, partner, axis=-1)), axis=-2)
        alpha, beta = _pair_roles(norms, partner, first)
        c, t = _rotation(alpha, beta, gamma, first, floor, d)
        return _rotate_columns(u, c, t, partner), _rotate_columns(v, c, t, partner)

    def converged(st):  # no rotation left to make
        u = st[0]
        norms = reductions.sum(ufuncs.square(u), axis=-2)
        gram = products.matmul(_mT(u), u)
        small = _negligible(shapes.expand_dims(norms, -1), shapes.expand_dims(norms, -2), gram,
                            shapes.expand_dims(floor, -1), d)
        return reductions.all(ufuncs.logical_or(small, np.eye(m, dtype=bool)), axis=(-2, -1))

    def off(st):
        gram = products.matmul(_mT(st[0]), st[0])
        return reductions.sum(ufuncs.square(ufuncs.multiply(gram, 1.0 - np.eye(m, dtype=d))),
                              axis=(-2, -1))

    v0 = shapes.broadcast_to(np.eye(m, dtype=d), aval(a).shape[:-2] + (m, m))
    norm4 = ufuncs.square(reductions.sum(ufuncs.square(a), axis=(-2, -1)))
    u, v = _jacobi(a, (a, v0), step, converged, off, norm4) if m > 1 else (a, v0)
    if m != n:
        u = lax.slice_in_dim(u, 0, n, axis=aval(u).ndim - 1)
        v = lax.slice_in_dim(lax.slice_in_dim(v, 0, n, axis=aval(v).ndim - 1), 0, n,
                             axis=aval(v).ndim - 2)
    s = ufuncs.sqrt(reductions.sum(ufuncs.square(u), axis=-2))
    s, u, v = _sorted_columns(s, [u, v], descending=True)
    # Columns of singular values at rounding level are left zero (completed by the caller).
    tiny = ufuncs.multiply(reductions.max(s, axis=-1, keepdims=True),
                           eps * max(aval(a).shape[-2:]))
    nonzero = ufuncs.greater(s, tiny)
    u = ufuncs.where(shapes.expand_dims(nonzero, -2), ufuncs.divide(
        u, shapes.expand_dims(ufuncs.where(nonzero, s, 1.0), -2)), 0.0)
    return u, s, v


def _complete(u, full: bool):
    """Orthonormal columns for U (..., m, k) from Householder QR: its own columns up to
    rounding where they are nonzero, a completion where they are zero, and with ``full`` the
    m - k columns more of a square U."""
    k = aval(u).shape[-1]
    q, r = _householder(u)
    diag = _diagonal(lax.slice_in_dim(r, 0, k, axis=aval(r).ndim - 2))
    sign = ufuncs.where(ufuncs.less(diag, 0.0), -1.0, 1.0)
    cols = ufuncs.multiply(lax.slice_in_dim(q, 0, k, axis=aval(q).ndim - 1),
                           shapes.expand_dims(sign, -2))
    if not full or aval(q).shape[-1] == k:
        return cols
    rest = lax.slice_in_dim(q, k, aval(q).shape[-1], axis=aval(q).ndim - 1)
    return lax.concatenate([cols, rest], aval(q).ndim - 1)


# A matrix at least this many times taller than wide is reduced to its QR decomposition's R
# first (as LAPACK's gesvd): the Jacobi sweeps then rotate n x n columns, not m x n.
_QR_FIRST = 2


def _svd_of_tall(a, want_u: bool = True):
    """_svd_tall of a (..., m, n), m >= n, through R of a = QR where m >= 2n: a = Q (U_R s V^T),
    so U = Q U_R (a zero column of U_R stays zero)."""
    m, n = aval(a).shape[-2:]
    if m < _QR_FIRST * n or n < 2:
        return _svd_tall(a)
    q, r = _householder(a)
    nd = aval(r).ndim
    u, s, v = _svd_tall(lax.slice_in_dim(r, 0, n, axis=nd - 2))
    if want_u:
        u = products.matmul(lax.slice_in_dim(q, 0, n, axis=nd - 1), u)
    return u, s, v


def _svd_parts(a):
    """(U, s, V) with k = min(m, n) columns: the Jacobi SVD of a or of its transpose."""
    m, n = aval(a).shape[-2:]
    if m >= n:
        u, s, v = _svd_of_tall(a)
        return _complete(u, False), s, v
    u, s, v = _svd_of_tall(_mT(a))  # a^T = u s v^T, so a = v s u^T
    return v, s, _complete(u, False)


@custom_vjp
def _svd_reduced(a):
    u, s, v = _svd_parts(a)
    return u, s, _mT(v)


def _svd_fwd(a):
    out = _svd_reduced(a)
    return out, out


def _svd_jvp(da, u, s, vt):
    """JAX's svd_jvp_rule (real matrices, reduced factors)."""
    k = aval(s).shape[-1]
    eye = np.eye(k, dtype=aval(s).dtype)
    v = _mT(vt)
    ds_mat = products.matmul(products.matmul(_mT(u), da), v)
    ds = _diagonal(ds_mat)
    s_row = shapes.expand_dims(s, -2)
    s_col = shapes.expand_dims(s, -1)
    diffs = ufuncs.multiply(ufuncs.add(s_row, s_col), ufuncs.subtract(s_row, s_col))
    unset = ufuncs.logical_or(eye > 0, ufuncs.equal(diffs, 0.0))
    f = ufuncs.where(unset, 0.0, ufuncs.divide(1.0, ufuncs.where(unset, 1.0, diffs)))
    dss = ufuncs.multiply(s_row, ds_mat)
    sds = ufuncs.multiply(s_col, ds_mat)
    du = products.matmul(u, ufuncs.multiply(f, ufuncs.add(dss, _mT(dss))))
    dv = products.matmul(v, ufuncs.multiply(f, ufuncs.add(sds, _mT(sds))))
    s_inv = ufuncs.where(ufuncs.equal(s_row, 0.0), 0.0,
                         ufuncs.divide(1.0, ufuncs.where(ufuncs.equal(s_row, 0.0), 1.0, s_row)))
    m, n = aval(da).shape[-2:]
    if m > k:
        dav = products.matmul(da, v)
        du = ufuncs.add(du, ufuncs.multiply(ufuncs.subtract(
            dav, products.matmul(u, products.matmul(_mT(u), dav))), s_inv))
    if n > k:
        dahu = products.matmul(_mT(da), u)
        dv = ufuncs.add(dv, ufuncs.multiply(ufuncs.subtract(
            dahu, products.matmul(v, products.matmul(vt, dahu))), s_inv))
    return du, ds, _mT(dv)


def _svd_bwd(res, g):
    u, s, vt = res
    _, pullback = vjp(lambda da: _svd_jvp(da, u, s, vt),
                      products.matmul(u, ufuncs.multiply(shapes.expand_dims(s, -1), vt)))
    (ga,) = pullback(g)
    return (ga,)


_svd_reduced.defvjp(_svd_fwd, _svd_bwd)


@custom_vjp
def _singular_values(a):
    m, n = aval(a).shape[-2:]
    return _svd_of_tall(a if m >= n else _mT(a), want_u=False)[1]


def _singular_values_fwd(a):
    u, s, v = _svd_parts(a)
    return s, (u, v)


def _singular_values_bwd(res, g):
    u, v = res  # d s = diag(U^T dA V): its transpose, U diag(g) V^T
    return (products.matmul(ufuncs.multiply(u, shapes.expand_dims(g, -2)), _mT(v)),)


_singular_values.defvjp(_singular_values_fwd, _singular_values_bwd)


def _matrices(name, a):
    check_arraylike(name, a)
    (a,) = promote_dtypes_inexact(to_array(a))
    if aval(a).ndim < 2:
        fail(f"{name}() needs an array of at least 2 dimensions, got shape {aval(a).shape}",
             ValueError)
    if not dt.is_float(aval(a).dtype):
        fail(f"{name}() supports float arrays, got {aval(a).dtype}")
    return a


def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False,
        subset_by_index=None):
    """The singular value decomposition a = U diag(S) Vh of matrices (..., m, n), as
    ``jax.numpy.linalg.svd``: S descending; U (..., m, m) and Vh (..., n, n) with
    ``full_matrices``, else k = min(m, n) columns and rows; S alone without
    ``compute_uv``. ``hermitian``: from ``eigh`` of a symmetric ``a``. Gradients as JAX's
    (not of full U and Vh when m != n, as in JAX)."""
    a = _matrices("svd", a)
    if subset_by_index is not None:
        fail("svd: subset_by_index is not supported", NotImplementedError)
    out = _compiled(_svd_of, static_argnums=(1, 2, 3))(a, full_matrices, compute_uv, hermitian)
    return SVDResult(*out) if compute_uv else out


def _svd_of(a, full_matrices, compute_uv, hermitian):
    if hermitian:
        w, v = eigh(a)
        s, v, signed = _sorted_columns(ufuncs.abs(w), [v, ufuncs.multiply(
            v, shapes.expand_dims(ufuncs.where(ufuncs.less(w, 0.0), -1.0, 1.0), -2))],
            descending=True)
        return s if not compute_uv else (v, s, _mT(signed))
    if not compute_uv:
        return _singular_values(a)
    m, n = aval(a).shape[-2:]
    if not full_matrices or m == n:
        return tuple(_svd_reduced(a))
    u, s, v = (_svd_tall(a) if m >= n else _svd_tall(_mT(a)))
    if m >= n:
        return _complete(u, True), s, _mT(v)
    return v, s, _mT(_complete(u, True))


def svdvals(x, /):
    """The singular values, descending (the array API's name)."""
    return svd(x, compute_uv=False)


def pinv(a, rtol=None, hermitian: bool = False, *, rcond=None):
    """The Moore-Penrose pseudo-inverse: singular values below ``rtol`` (``rcond``) times
    the largest dropped, by default 10 * max(m, n) * eps, as JAX."""
    a = _matrices("pinv", a)
    if rtol is not None and rcond is not None:
        fail("pinv: give rtol or rcond, not both", ValueError)
    rtol = rcond if rtol is None else rtol
    m, n = aval(a).shape[-2:]
    if rtol is None:
        rtol = 10 * max(m, n) * float(dt.finfo(aval(a).dtype).eps)
    u, s, vt = _svd_reduced(a)
    cutoff = ufuncs.multiply(reductions.max(s, axis=-1, keepdims=True), rtol)
    keep = ufuncs.greater(s, cutoff)
    s_inv = ufuncs.where(keep, ufuncs.divide(1.0, ufuncs.where(keep, s, 1.0)), 0.0)
    return products.matmul(ufuncs.multiply(_mT(vt), shapes.expand_dims(s_inv, -2)), _mT(u))


def matrix_rank(M, rtol=None, *, tol=None):
    """The number of singular values above ``tol`` (absolute) or ``rtol`` times the largest
    (by default max(m, n) * eps), as JAX."""
    check_arraylike("matrix_rank", M)
    (M,) = promote_dtypes_inexact(to_array(M))
    if aval(M).ndim < 2:
        return lax.convert_element_type(reductions.any(ufuncs.not_equal(M, 0)), np.int32)
    s = svd(M, compute_uv=False)
    if tol is None:
        if rtol is None:
            rtol = max(aval(M).shape[-2:]) * float(dt.finfo(aval(s).dtype).eps)
        tol = ufuncs.multiply(reductions.max(s, axis=-1, keepdims=True), rtol)
    elif rtol is not None:
        fail("matrix_rank: give rtol or tol, not both", ValueError)
    return reductions.sum(ufuncs.greater(s, tol), axis=-1, dtype=np.int32)


def cond(x, p=None):
    """The condition number: the ratio of the extreme singular values (p None, 2 or -2),
    else ``norm(x, p) * norm(inv(x), p)``."""
    x = _matrices("cond", x)
    if p in (None, 2, -2):
        s = svd(x, compute_uv=False)
        first = lax.slice_in_dim(s, 0, 1, axis=aval(s).ndim - 1)
        last = lax.slice_in_dim(s, aval(s).shape[-1] - 1, aval(s).shape[-1],
                                axis=aval(s).ndim - 1)
        r = ufuncs.divide(first, last) if p != -2 else ufuncs.divide(last, first)
        return shapes.squeeze(r, -1)
    from fusionjit._src.numpy import decompositions, linalg
    return ufuncs.multiply(linalg.norm(x, p, axis=(-2, -1)),
                           linalg.norm(decompositions.inv(x), p, axis=(-2, -1)))


def lstsq(a, b, rcond=None, *, numpy_resid: bool = False):
    """The least-squares solution x of a x = b, as ``jax.numpy.linalg.lstsq``: (x, the
    squared residuals' sums, the rank of a, its singular values). Singular values below
    ``rcond`` times the largest (by default eps * max(m, n)) count as zero."""
    a = _matrices("lstsq", a)
    check_arraylike("lstsq", b)
    (a, b) = promote_dtypes_inexact(a, to_array(b))
    if aval(a).ndim != 2:
        fail(f"lstsq: a must be a 2-D array, got shape {aval(a).shape}", ValueError)
    vector = aval(b).ndim == 1
    if vector:
        b = shapes.expand_dims(b, -1)
    m, n = aval(a).shape
    if aval(b).ndim != 2 or aval(b).shape[0] != m:
        fail(f"lstsq: b must have {m} rows, got shape {aval(b).shape}", ValueError)
    if rcond is None:
        rcond = float(dt.finfo(aval(a).dtype).eps) * max(m, n)
    u, s, vt = _svd_reduced(a)
    keep = ufuncs.greater_equal(s, ufuncs.multiply(reductions.max(s), rcond))
    rank = reductions.sum(keep, dtype=np.int32)
    s_inv = ufuncs.where(keep, ufuncs.divide(1.0, ufuncs.where(keep, s, 1.0)), 0.0)
    x = products.matmul(_mT(vt), ufuncs.multiply(shapes.expand_dims(s_inv, -1),
                                                 products.matmul(_mT(u), b)))
    resid = reductions.sum(ufuncs.square(ufuncs.subtract(b, products.matmul(a, x))), axis=0)
    if numpy_resid and m <= n:  # NumPy's: no residuals for an underdetermined system
        resid = lax.slice_in_dim(resid, 0, 0, axis=0)
    if vector:
        x = shapes.squeeze(x, -1)
    return x, resid, rank, s
