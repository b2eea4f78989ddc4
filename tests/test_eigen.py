"""linalg.eigh and linalg.svd (Jacobi rotations, fusionjit/_src/numpy/eigen.py) and what is
built on them: against NumPy's LAPACK in float64, gradients against JAX's where installed."""
from __future__ import annotations

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
from conftest import assert_close

def symmetric(rng, *shape):
    a = rng.standard_normal(shape).astype(np.float32)
    return a + np.swapaxes(a, -1, -2)


def orthonormal_columns(v, atol):
    k = v.shape[-1]
    np.testing.assert_allclose(np.swapaxes(v, -1, -2) @ v,
                               np.broadcast_to(np.eye(k), v.shape[:-2] + (k, k)), atol=atol)


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 3), (8, 8), (4, 5, 5), (33, 33)])
def test_eigh_matches_lapack_and_reconstructs(shape):
    rng = np.random.default_rng(101)
    a = symmetric(rng, *shape)
    w, v = fnp.linalg.eigh(a)
    w, v = np.asarray(w), np.asarray(v)
    scale = np.abs(a).max()
    assert_close(w, np.linalg.eigvalsh(a.astype(np.float64)).astype(np.float32), rtol=0,
                 atol=2e-6 * shape[-1] * scale)
    assert np.all(np.diff(w, axis=-1) >= 0)  # ascending, as JAX
    orthonormal_columns(v, 2e-6 * shape[-1])
    rebuilt = v @ (w[..., None] * np.swapaxes(v, -1, -2))
    np.testing.assert_allclose(rebuilt, a, atol=2e-6 * shape[-1] * scale)
    assert_close(fnp.linalg.eigvalsh(a), w)


def test_eigh_under_jit_and_vmap_and_of_special_matrices():
    rng = np.random.default_rng(102)
    a = symmetric(rng, 6, 4, 4)
    w = np.linalg.eigvalsh(a)
    assert_close(fusionjit.jit(fnp.linalg.eigvalsh)(a), w, rtol=1e-5, atol=1e-5)
    assert_close(fusionjit.vmap(fnp.linalg.eigvalsh)(a), w, rtol=1e-5, atol=1e-5)
    for special in (np.zeros((3, 3)), np.eye(4), np.diag([3.0, -1.0, 2.0]), np.ones((5, 5))):
        special = special.astype(np.float32)
        w, v = map(np.asarray, fnp.linalg.eigh(special))
        assert_close(w, np.linalg.eigvalsh(special), rtol=0, atol=1e-5)
        orthonormal_columns(v, 1e-5)
        np.testing.assert_allclose(v @ np.diag(w) @ v.T, special, atol=1e-5)


def test_eigh_reads_one_triangle_without_symmetrize_input():
    rng = np.random.default_rng(103)
    a = symmetric(rng, 4, 4)
    lower = np.tril(a) + np.triu(rng.standard_normal((4, 4)).astype(np.float32), 1)
    w = fnp.linalg.eigh(lower, symmetrize_input=False).eigenvalues
    assert_close(w, np.linalg.eigvalsh(a), rtol=1e-5, atol=1e-5)
    upper = np.triu(a) + np.tril(rng.standard_normal((4, 4)).astype(np.float32), -1)
    assert_close(fnp.linalg.eigvalsh(upper, "U", symmetrize_input=False),
                 np.linalg.eigvalsh(a), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="square"):
        fnp.linalg.eigh(np.ones((2, 3), np.float32))


@pytest.mark.parametrize("shape, full", [((5, 3), True), ((5, 3), False), ((3, 5), True),
                                         ((3, 5), False), ((4, 4), True), ((6, 1), True),
                                         ((1, 6), False), ((2, 40, 7), False),
                                         ((48, 12), True), ((12, 40), False)])
def test_svd_matches_lapack(shape, full):
    rng = np.random.default_rng(104)
    a = rng.standard_normal(shape).astype(np.float32)
    u, s, vh = map(np.asarray, fnp.linalg.svd(a, full_matrices=full))
    ru, rs, rvh = np.linalg.svd(a.astype(np.float64), full_matrices=full)
    assert u.shape == ru.shape and s.shape == rs.shape and vh.shape == rvh.shape
    assert_close(s, rs.astype(np.float32), rtol=1e-5, atol=1e-5)
    k = min(shape[-2:])
    rebuilt = (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :]
    np.testing.assert_allclose(rebuilt, a, atol=1e-5)
    orthonormal_columns(u, 1e-5)
    orthonormal_columns(np.swapaxes(vh, -1, -2), 1e-5)
    assert_close(fnp.linalg.svd(a, compute_uv=False), s, rtol=1e-5, atol=1e-5)
    assert_close(fnp.linalg.svdvals(a), s, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", [64, 728, 843])
def test_sweeps_go_on_while_far_from_converged(seed):
    # A sweep far from convergence may not halve the off-diagonal part: these matrices
    # stopped after one sweep (singular values 30% off) when any sweep that did not halve
    # it counted as a stall, not only one at rounding level.
    a = np.random.default_rng(seed).standard_normal((4, 4)).astype(np.float32)
    assert_close(fnp.linalg.svdvals(a), np.linalg.svd(a, compute_uv=False), rtol=1e-5,
                 atol=1e-5)
    b = a + a.T
    assert_close(fnp.linalg.eigvalsh(b), np.linalg.eigvalsh(b), rtol=1e-5, atol=1e-5)


def test_svd_of_rank_deficient_and_zero_matrices_keeps_u_orthonormal():
    rng = np.random.default_rng(106)
    low = (rng.standard_normal((6, 2)) @ rng.standard_normal((2, 4))).astype(np.float32)
    # (Matrices at least twice as tall as wide go through QR first: rank 1 of 12 x 4 too.)
    tall = (rng.standard_normal((12, 1)) @ rng.standard_normal((1, 4))).astype(np.float32)
    for a in (low, np.zeros((3, 3), np.float32), np.ones((4, 2), np.float32), tall,
              np.zeros((9, 3), np.float32)):
        u, s, vh = map(np.asarray, fnp.linalg.svd(a))
        assert_close(s, np.linalg.svd(a, compute_uv=False), rtol=0, atol=1e-5)
        orthonormal_columns(u, 1e-5)
        orthonormal_columns(vh.T, 1e-5)
        k = min(a.shape)
        np.testing.assert_allclose((u[:, :k] * s) @ vh[:k], a, atol=1e-5)
    assert int(fnp.linalg.matrix_rank(low)) == 2
    assert int(fnp.linalg.matrix_rank(np.zeros((3, 3), np.float32))) == 0
    assert int(fnp.linalg.matrix_rank(np.array([0.0, 2.0]))) == 1


def test_hermitian_svd_and_pinv_cond_lstsq():
    rng = np.random.default_rng(107)
    a = symmetric(rng, 5, 5)
    u, s, vh = map(np.asarray, fnp.linalg.svd(a, hermitian=True))
    assert_close(s, np.linalg.svd(a, compute_uv=False), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose((u * s) @ vh, a, atol=1e-5)
    b = rng.standard_normal((6, 4)).astype(np.float32)
    assert_close(fnp.linalg.pinv(b), np.linalg.pinv(b), rtol=1e-4, atol=1e-5)
    assert_close(fnp.linalg.cond(a), np.linalg.cond(a), rtol=1e-4)
    assert_close(fnp.linalg.cond(a, 1), np.linalg.cond(a, 1), rtol=1e-4)
    y = rng.standard_normal(6).astype(np.float32)
    x, resid, rank, sv = fnp.linalg.lstsq(b, y)
    rx, rresid, rrank, rsv = np.linalg.lstsq(b, y, rcond=None)
    assert_close(x, rx, rtol=1e-4, atol=1e-5)
    assert_close(resid, rresid, rtol=1e-4)
    assert int(rank) == rrank
    assert_close(sv, rsv, rtol=1e-5)


def test_gradients_as_jax():
    rng = np.random.default_rng(108)
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    a = symmetric(rng, 5, 5)
    w8 = rng.standard_normal((5, 5)).astype(np.float32)

    def eig_loss(np_, a):
        w, v = np_.linalg.eigh(a)
        return (w * np_.arange(1.0, 6.0)).sum() + (np_.abs(v) * w8).sum()

    assert_close(fusionjit.grad(lambda a: eig_loss(fnp, a))(a),
                 np.asarray(jax.grad(lambda a: eig_loss(jnp, a))(a)), rtol=1e-4, atol=1e-5)
    for shape in ((6, 4), (4, 6), (5, 5)):
        b = rng.standard_normal(shape).astype(np.float32)

        def svd_loss(np_, b):
            u, s, vh = np_.linalg.svd(b, full_matrices=False)
            return (s * np_.arange(1.0, 1 + len(s))).sum() + np_.abs(u[:, :2]).sum() \
                + 2 * np_.abs(vh[:2]).sum()

        assert_close(fusionjit.grad(lambda b: svd_loss(fnp, b))(b),
                     np.asarray(jax.grad(lambda b: svd_loss(jnp, b))(b)), rtol=1e-4, atol=1e-5)


def test_gradients_without_jax():
    # The eigenvalues' sum is the trace (gradient: the identity); the squared singular
    # values' sum is the squared Frobenius norm (gradient: 2a); a degenerate spectrum keeps
    # finite gradients of its eigenvalues.
    rng = np.random.default_rng(109)
    a = symmetric(rng, 4, 4)
    assert_close(fusionjit.grad(lambda a: fnp.linalg.eigvalsh(a).sum())(a),
                 np.eye(4, dtype=np.float32), atol=1e-5)
    b = rng.standard_normal((5, 3)).astype(np.float32)
    assert_close(fusionjit.grad(lambda b: (fnp.linalg.svdvals(b) ** 2).sum())(b), 2 * b,
                 rtol=1e-4, atol=1e-5)
    g = fusionjit.jit(fusionjit.grad(lambda a: fnp.linalg.eigvalsh(a).sum()))(
        np.eye(3, dtype=np.float32))
    assert_close(g, np.eye(3, dtype=np.float32), atol=1e-6)
    # Finite differences of the largest eigenvalue.
    d = symmetric(rng, 4, 4) * 1e-3
    top = lambda m: float(np.linalg.eigvalsh(m.astype(np.float64))[-1])  # noqa: E731
    g = np.asarray(fusionjit.grad(lambda m: fnp.linalg.eigvalsh(m)[-1])(a))
    assert abs(float((g * d).sum()) - (top(a + d) - top(a - d)) / 2) < 1e-4
