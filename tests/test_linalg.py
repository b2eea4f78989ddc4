"""Decompositions and solvers written with fusionjit's loops (numpy/decompositions.py):
cholesky, solve, inv, det, slogdet, solve_triangular, cho_solve, against NumPy (LAPACK),
batched and under jit, their edge cases as JAX has them, and random.multivariate_normal."""

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
import fusionjit.random as fr
from fusionjit.scipy import linalg as fsl
from conftest import requires_jax


def spd(rng, n, batch=()):
    m = rng.normal(size=batch + (n, n))
    return (m @ np.swapaxes(m, -1, -2) + n * np.eye(n)).astype(np.float32)


# (Batches of 8 or more are factorised in lanes, the batch as the minor dimension.)
@pytest.mark.parametrize("n,batch", [(1, ()), (3, ()), (8, (2,)), (24, ()), (5, (2, 3)),
                                     (6, (16,)), (1, (9,)), (4, (2, 5))])
def test_against_numpy(n, batch, rng):
    a = rng.normal(size=batch + (n, n)).astype(np.float32)
    b = rng.normal(size=batch + (n, 2)).astype(np.float32)
    s = spd(rng, n, batch)
    tol = dict(rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(np.asarray(fnp.linalg.cholesky(s)), np.linalg.cholesky(s), **tol)
    np.testing.assert_allclose(np.asarray(fnp.linalg.cholesky(s, upper=True)),
                               np.swapaxes(np.linalg.cholesky(s), -1, -2), **tol)
    np.testing.assert_allclose(np.asarray(fnp.linalg.solve(a, b)), np.linalg.solve(a, b),
                               rtol=2e-3, atol=2e-4)
    np.testing.assert_allclose(np.asarray(fnp.linalg.inv(s)), np.linalg.inv(s), **tol)
    np.testing.assert_allclose(np.asarray(fnp.linalg.det(a)), np.linalg.det(a), rtol=2e-4,
                               atol=1e-5)
    sign, logdet = fnp.linalg.slogdet(a)
    want = np.linalg.slogdet(a)
    np.testing.assert_array_equal(np.asarray(sign), want[0])
    np.testing.assert_allclose(np.asarray(logdet), want[1], rtol=2e-4, atol=2e-5)


def test_vectors_triangular_and_cholesky_solves(rng):
    a = rng.normal(size=(4, 4)).astype(np.float32)
    v = rng.normal(size=4).astype(np.float32)
    np.testing.assert_allclose(np.asarray(fnp.linalg.solve(a, v)), np.linalg.solve(a, v),
                               rtol=1e-4, atol=1e-5)
    low = np.tril(a) + 4 * np.eye(4, dtype=np.float32)
    for trans in (0, 1, "T"):
        for lower in (True, False):
            m = low if lower else low.T
            op = m.T if trans in (1, "T") else m
            np.testing.assert_allclose(
                np.asarray(fsl.solve_triangular(m, v, trans=trans, lower=lower)),
                np.linalg.solve(op, v), rtol=1e-5, atol=1e-6)
    unit = np.tril(a, -1) + np.eye(4, dtype=np.float32)
    np.testing.assert_allclose(
        np.asarray(fsl.solve_triangular(np.tril(a, -1) + 7 * np.eye(4, dtype=np.float32), v,
                                        lower=True, unit_diagonal=True)),
        np.linalg.solve(unit, v), rtol=1e-5, atol=1e-5)
    s = spd(rng, 5)
    b = rng.normal(size=(5, 3)).astype(np.float32)
    for lower in (True, False):
        c = fsl.cho_factor(s, lower=lower)
        np.testing.assert_allclose(np.asarray(fsl.cho_solve(c, b)), np.linalg.solve(s, b),
                                   rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(fsl.cholesky(s)), np.linalg.cholesky(s).T, rtol=1e-5)


def test_edge_cases_as_jax():
    # Not positive definite: nan on and below the diagonal.
    c = np.asarray(fnp.linalg.cholesky(np.float32([[1, 2], [2, 1]])))
    assert np.isnan(c[0, 0]) and np.isnan(c[1, 0]) and np.isnan(c[1, 1]) and c[0, 1] == 0
    # Singular: the determinant is 0 (a zero pivot is left alone, as getrf does).
    assert float(fnp.linalg.det(np.zeros((3, 3), np.float32))) == 0.0
    sign, logdet = fnp.linalg.slogdet(np.float32([[1, 2], [2, 4]]))
    assert float(sign) == 0.0 and float(logdet) == -np.inf
    # A permutation's determinant is its sign.
    p = np.eye(4, dtype=np.float32)[[1, 0, 3, 2]]
    assert float(fnp.linalg.det(p)) == 1.0 and float(fnp.linalg.det(p[[1, 0, 2, 3]])) == -1.0
    with pytest.raises(ValueError, match=r"test_linalg.py:\d+.*square"):
        fnp.linalg.det(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="does not match"):
        fnp.linalg.solve(np.eye(3, dtype=np.float32), np.ones((4,), np.float32))


def test_gaussian_log_likelihood_under_jit(rng):
    """A multivariate Gaussian's log-density, as a GP or a full-covariance policy computes
    it: Cholesky, a triangular solve and the log-determinant, in one jitted function."""
    s = spd(rng, 6)
    x = rng.normal(size=(6,)).astype(np.float32)

    @fusionjit.jit
    def logpdf(x, cov):
        low = fnp.linalg.cholesky(cov)
        z = fsl.solve_triangular(low, x, lower=True)
        return -0.5 * fnp.sum(z * z) - fnp.sum(fnp.log(fnp.diagonal(low))) - 3 * np.log(2 * np.pi)

    s64 = s.astype(np.float64)
    want = -0.5 * x @ np.linalg.solve(s64, x) - 0.5 * np.linalg.slogdet(s64)[1] - \
        3 * np.log(2 * np.pi)
    np.testing.assert_allclose(float(logpdf(x, s)), want, rtol=1e-5)


def test_multivariate_normal(rng):
    mean = np.float32([1.0, -2.0, 0.5])
    cov = spd(rng, 3)
    x = np.asarray(fr.multivariate_normal(fr.key(2), mean, cov, (40000,)))
    assert x.shape == (40000, 3)
    np.testing.assert_allclose(x.mean(0), mean, atol=0.05)
    np.testing.assert_allclose(np.cov(x.T), cov, rtol=0.05, atol=0.05)
    assert np.asarray(fr.multivariate_normal(fr.key(0), np.zeros((2, 3), np.float32),
                                             cov)).shape == (2, 3)
    with pytest.raises(ValueError, match="cov.shape"):
        fr.multivariate_normal(fr.key(0), mean, np.eye(2, dtype=np.float32))
    with pytest.raises(NotImplementedError, match="svd"):
        fr.multivariate_normal(fr.key(0), mean, cov, method="svd")


@requires_jax
def test_agrees_with_jax(rng):
    import jax
    mean = np.float32([1.0, -2.0, 0.5])
    cov = spd(rng, 3)
    for shape in (None, (5,), (2, 4)):
        np.testing.assert_allclose(
            np.asarray(fr.multivariate_normal(fr.key(1), mean, cov, shape)),
            np.asarray(jax.random.multivariate_normal(jax.random.key(1), mean, cov, shape)),
            rtol=1e-5, atol=1e-5)
    a = rng.normal(size=(2, 5, 5)).astype(np.float32)
    for name in ("det", "inv"):
        np.testing.assert_allclose(np.asarray(getattr(fnp.linalg, name)(a)),
                                   np.asarray(getattr(jax.numpy.linalg, name)(a)), rtol=1e-4,
                                   atol=1e-5)


def test_matrix_power_multi_dot_tensorinv_tensorsolve(rng):
    a = rng.normal(size=(2, 4, 4)).astype(np.float32) / 2
    for n in (0, 1, 2, 5, -1, -3):
        np.testing.assert_allclose(np.asarray(fnp.linalg.matrix_power(a, n)),
                                   np.linalg.matrix_power(a, n), rtol=1e-3, atol=1e-4)
    xs = [rng.normal(size=s).astype(np.float32) for s in [(3,), (3, 4), (4, 5), (5,)]]
    np.testing.assert_allclose(np.asarray(fnp.linalg.multi_dot(xs)), np.linalg.multi_dot(xs),
                               rtol=1e-5)
    t = rng.normal(size=(4, 6, 8, 3)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(fnp.linalg.tensorinv(t, 2)), np.linalg.tensorinv(t, 2),
                               rtol=1e-3, atol=1e-4)
    a = rng.normal(size=(3, 8, 6, 4)).astype(np.float32)
    b = rng.normal(size=(6, 4)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(fnp.linalg.tensorsolve(a, b, axes=(0, 1))),
                               np.linalg.tensorsolve(a, b, axes=(0, 1)), rtol=1e-3, atol=1e-4)
    with pytest.raises(ValueError, match="product of the first"):
        fnp.linalg.tensorinv(np.ones((2, 3), np.float32), 1)
    with pytest.raises(ValueError, match="at least two"):
        fnp.linalg.multi_dot([np.ones(2, np.float32)])


def test_review_fixes(rng):
    # A batch of matrices against one vector.
    a = rng.normal(size=(2, 3, 4, 4)).astype(np.float32) + 4 * np.eye(4, dtype=np.float32)
    v = np.ones(4, np.float32)
    got = np.asarray(fnp.linalg.solve(a, v))
    assert got.shape == (2, 3, 4)
    np.testing.assert_allclose(got, np.linalg.solve(a, v[:, None])[..., 0], rtol=1e-4, atol=1e-5)
    # A positive semi-definite, singular matrix is not positive definite: nan, as JAX.
    c = np.asarray(fnp.linalg.cholesky(np.float32([[1, 1], [1, 1]])))
    assert np.isnan(c[0, 0]) and np.isnan(c[1, 1]) and c[0, 1] == 0
    # Empty matrices: det 1, slogdet (1, 0).
    assert float(fnp.linalg.det(np.zeros((0, 0), np.float32))) == 1.0
    sign, logdet = fnp.linalg.slogdet(np.zeros((2, 0, 0), np.float32))
    np.testing.assert_array_equal(np.asarray(sign), [1, 1])
    np.testing.assert_array_equal(np.asarray(logdet), [0, 0])
    # Integer powers of integer matrices stay integers.
    fib = fnp.linalg.matrix_power(np.int32([[1, 1], [1, 0]]), 10)
    assert np.asarray(fib).dtype == np.int32
    np.testing.assert_array_equal(np.asarray(fib), [[89, 55], [55, 34]])
    # SciPy's QR modes and solve's assume_a.
    q, r = fsl.qr(np.ones((5, 3), np.float32))
    assert np.asarray(q).shape == (5, 5) and np.asarray(r).shape == (5, 3)
    q, r = fsl.qr(np.ones((5, 3), np.float32), mode="economic")
    assert np.asarray(q).shape == (5, 3) and np.asarray(r).shape == (3, 3)
    (r,) = fsl.qr(np.ones((5, 3), np.float32), mode="r")
    assert np.asarray(r).shape == (5, 3)
    s = spd(rng, 4)
    for assume in ("gen", "pos"):
        np.testing.assert_allclose(np.asarray(fsl.solve(s, v, assume_a=assume)),
                                   np.linalg.solve(s, v), rtol=1e-5, atol=1e-6)


def test_factorisation_loops_are_not_unrolled_into_copies_of_their_kernels(rng):
    # Each step of an LU factorisation is several kernels (pivot search, row swaps, update):
    # the cost model unrolled its 24 steps by 8 into 88 kernels that took 3 s to compile,
    # for no gain. Kept as loops, solve(24 x 24) is a few dozen kernels per step at most.
    a = rng.normal(size=(24, 24)).astype(np.float32)
    b = rng.normal(size=(24, 2)).astype(np.float32)
    counts = fusionjit.testing.launch_counts(fnp.linalg.solve)(a, b)
    assert len(counts["loops"]) == 3
    assert all(loop["iterations"] == 24 for loop in counts["loops"]), counts
    text = fusionjit.jit(fnp.linalg.solve).lower(a, b).as_text("optimized")
    assert text.count(" while(") == 3
    np.testing.assert_allclose(np.asarray(fusionjit.jit(fnp.linalg.solve)(a, b)),
                               np.linalg.solve(a, b), rtol=2e-3, atol=2e-4)


def test_batches_in_lanes_keep_the_edge_cases_of_each_matrix(rng):
    # A batch of 8 is factorised in lanes: each matrix's failure stays its own.
    s = spd(rng, 3, (8,))
    s[2] = [[1, 2, 0], [2, 1, 0], [0, 0, 1]]          # not positive definite
    low = np.asarray(fnp.linalg.cholesky(s))
    assert np.isnan(low[2][np.tril_indices(3)]).all() and (np.triu(low[2], 1) == 0).all()
    others = [k for k in range(8) if k != 2]
    np.testing.assert_allclose(low[others], np.linalg.cholesky(s[others]), rtol=2e-5, atol=2e-5)
    a = rng.normal(size=(8, 4, 4)).astype(np.float32)
    a[1] = 0.0                                         # singular: a zero pivot left alone
    a[5] = np.eye(4, dtype=np.float32)[[1, 0, 3, 2]]   # a permutation: det = its sign
    a[6, :, 2] = a[6, :, 0]                            # rank deficient
    det = np.asarray(fnp.linalg.det(a))
    assert det[1] == 0.0 and det[5] == 1.0
    np.testing.assert_allclose(det, np.linalg.det(a), rtol=2e-4, atol=1e-5)
    sign, logdet = fnp.linalg.slogdet(a)
    want = np.linalg.slogdet(a)
    assert np.asarray(sign)[1] == 0.0 and np.asarray(logdet)[1] == -np.inf
    np.testing.assert_array_equal(np.asarray(sign)[[0, 2, 3, 4, 5, 7]], want[0][[0, 2, 3, 4, 5, 7]])
    b = rng.normal(size=(8, 4)).astype(np.float32)
    ok = [0, 2, 3, 4, 5, 7]
    x = np.asarray(fnp.linalg.solve(a, b[..., None]))[..., 0]
    np.testing.assert_allclose(x[ok], np.linalg.solve(a[ok], b[ok][..., None])[..., 0],
                               rtol=2e-3, atol=2e-4)


def test_batches_in_lanes_under_vmap_jit_and_grad(rng):
    s = spd(rng, 5, (12,))
    b = rng.normal(size=(12, 5, 2)).astype(np.float32)
    want = np.linalg.cholesky(s)
    np.testing.assert_allclose(np.asarray(fusionjit.vmap(fnp.linalg.cholesky)(s)), want,
                               rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(np.asarray(fusionjit.jit(fnp.linalg.solve)(s, b)),
                               np.linalg.solve(s, b), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(
        np.asarray(fsl.solve_triangular(want, b, lower=True)),
        np.linalg.solve(want, b), rtol=1e-4, atol=1e-5)

    def loss(s):   # a Gaussian's log-determinant, batched: d/ds = inv(s) (symmetric)
        return fnp.sum(fnp.log(fnp.diagonal(fnp.linalg.cholesky(s), axis1=-2, axis2=-1)))
    np.testing.assert_allclose(np.asarray(fusionjit.grad(loss)(s)), 0.5 * np.linalg.inv(s),
                               rtol=2e-3, atol=2e-4)
    grad_solve = fusionjit.grad(lambda a: fnp.sum(fnp.linalg.solve(a, b)))
    np.testing.assert_allclose(np.asarray(grad_solve(s)), _solve_grad(s, b), rtol=2e-3,
                               atol=2e-4)


def _solve_grad(a, b):
    """d sum(solve(a, b)) / d a = -(a^-T 1) x^T, per matrix."""
    x = np.linalg.solve(a.astype(np.float64), b.astype(np.float64))
    g = np.linalg.solve(np.swapaxes(a, -1, -2).astype(np.float64), np.ones_like(x))
    return -(g @ np.swapaxes(x, -1, -2))
