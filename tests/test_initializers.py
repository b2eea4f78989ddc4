"""nn.initializers (the same weights as JAX for the same key), random.orthogonal and the
Householder linalg.qr under it (against NumPy's LAPACK QR)."""

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
import fusionjit.random as fr
from fusionjit.nn import initializers as init
from conftest import requires_jax

CASES = [("glorot_uniform", (), (64, 32)), ("glorot_normal", (), (64, 32)),
         ("lecun_uniform", (), (4, 64)), ("lecun_normal", (), (4, 64)),
         ("he_uniform", (), (3, 3, 16, 32)), ("he_normal", (), (128, 10)),
         ("xavier_uniform", (), (10, 20)), ("kaiming_normal", (), (10, 20)),
         ("normal", (0.5,), (7, 3)), ("uniform", (2.0,), (5,)),
         ("truncated_normal", (0.1,), (20, 20)), ("constant", (3.0,), (2, 2)),
         ("orthogonal", (), (64, 64)), ("orthogonal", (1.4,), (32, 8)),
         ("orthogonal", (1.0, 0), (8, 32)), ("orthogonal", (), (3, 5, 7)),
         ("delta_orthogonal", (), (3, 3, 4, 8)),
         ("variance_scaling", (0.5, "fan_geo_avg", "normal"), (10, 40)),
         ("variance_scaling", (2.0, "fan_out", "uniform", 0, 1, (), np.float32), (6, 9))]


@requires_jax
@pytest.mark.parametrize("name,args,shape", CASES, ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_same_weights_as_jax(name, args, shape):
    import jax
    import jax.nn.initializers as jinit
    got = np.asarray(getattr(init, name)(*args)(fr.key(3), shape))
    want = np.asarray(getattr(jinit, name)(*args)(jax.random.key(3), shape))
    assert got.shape == want.shape and got.dtype == want.dtype
    # Orthogonal goes through a QR decomposition: rounding differs from LAPACK's.
    np.testing.assert_allclose(got, want, rtol=0, atol=3e-6 if "orthogonal" in name else 3e-7)


def test_variance_and_orthogonality():
    w = np.asarray(init.he_normal()(fr.key(0), (400, 300)), np.float64)
    assert abs(w.var() / (2 / 400) - 1) < 0.05 and np.abs(w).max() <= 2 * np.sqrt(2 / 400) / .8796
    w = np.asarray(init.glorot_uniform()(fr.key(1), (400, 300)), np.float64)
    assert abs(w.var() / (2 / 700) - 1) < 0.05
    q = np.asarray(init.orthogonal(np.sqrt(2))(fr.key(2), (32, 64)), np.float64)
    np.testing.assert_allclose(q @ q.T, 2 * np.eye(32), atol=1e-5)
    k = np.asarray(init.delta_orthogonal()(fr.key(3), (3, 3, 4, 8)))
    assert np.count_nonzero(k[[0, 0, 2], [0, 2, 1]]) == 0
    np.testing.assert_allclose(k[1, 1] @ k[1, 1].T, np.eye(4), atol=1e-6)
    assert np.all(np.asarray(init.zeros(fr.key(0), (2, 3))) == 0)
    assert np.asarray(init.ones(fr.key(0), (2,), np.int32)).dtype == np.int32


def test_initialising_an_mlp_under_jit():
    def params(key):
        k1, k2 = fr.split(key)
        return {"w1": init.lecun_normal()(k1, (4, 64)), "b1": init.zeros(k1, (64,)),
                "w2": init.orthogonal(0.01)(k2, (64, 2)), "b2": init.zeros(k2, (2,))}

    jitted = fusionjit.jit(params)(fr.key(0))
    eager = params(fr.key(0))
    for name in eager:
        np.testing.assert_allclose(np.asarray(jitted[name]), np.asarray(eager[name]), atol=1e-7)


def test_initializer_errors():
    with pytest.raises(ValueError, match="invalid mode"):
        init.variance_scaling(1.0, "fan_mid", "normal")
    with pytest.raises(ValueError, match="invalid distribution"):
        init.variance_scaling(1.0, "fan_in", "cauchy")
    with pytest.raises(ValueError, match="Must be at least 2D"):
        init.glorot_normal()(fr.key(0), (5,))
    with pytest.raises(ValueError, match="at least a 2D shape"):
        init.orthogonal()(fr.key(0), (5,))
    with pytest.raises(ValueError, match="3D, 4D or 5D"):
        init.delta_orthogonal()(fr.key(0), (4, 4))


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 6, 4), (1, 1), (40, 40)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_matches_numpy(shape, mode):
    a = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    got = fnp.linalg.qr(a, mode=mode)
    want = np.linalg.qr(a, mode=mode)
    if mode == "r":
        got, want = (got,), (want,)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), w, atol=2e-5)


def test_qr_keeps_lapacks_signs_and_rank_deficient_columns():
    # Already triangular columns are not reflected (dgeqrf's convention): R = I for I.
    q, r = fnp.linalg.qr(np.eye(3, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(q), np.eye(3))
    np.testing.assert_array_equal(np.asarray(r), np.eye(3))
    a = np.float32([[1, 2, 3], [0, 0, 0], [0, 0, 1], [0, 0, 0]])
    q, r = fnp.linalg.qr(a)
    np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), a, atol=1e-6)
    np.testing.assert_allclose(np.asarray(r), np.linalg.qr(a)[1], atol=1e-6)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        fnp.linalg.qr(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="mode"):
        fnp.linalg.qr(np.ones((2, 2), np.float32), mode="full")
