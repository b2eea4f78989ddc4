"""The distributions of jax.random beyond uniform/normal (random_dists.py): the same draws
as JAX for the same key (up to the ulps of the float functions between), their moments, the
gamma family's per-lane rejection loops under jit, and argument errors."""

import math

import numpy as np
import pytest

import fusionjit
import fusionjit.random as fr
from conftest import requires_jax

# (name, args after the key) of each distribution, for the comparisons with JAX.
CASES = [("truncated_normal", (-1.5, 2.0, (500,))),
         ("truncated_normal", (np.float32([-1, 0, 1]), 3.0)),
         ("cauchy", ((500,),)), ("pareto", (3.0, (500,))), ("weibull_min", (2.0, 1.5, (500,))),
         ("lognormal", (0.5, (500,))), ("rayleigh", (2.0, (500,))), ("maxwell", ((500,),)),
         ("double_sided_maxwell", (1.0, 2.0, (500,))), ("triangular", (0.0, 0.3, 1.0, (500,))),
         ("geometric", (0.3, (500,))), ("wald", (1.5, (500,))),
         ("gamma", (np.float32([0.3, 1.0, 2.5, 10.0, 0.01]),)), ("gamma", (2.0, (3, 100))),
         ("loggamma", (np.float32([0.001, 0.3, 5.0]),)), ("beta", (0.5, 2.0, (500,))),
         ("dirichlet", (np.float32([0.5, 1.0, 3.0]), (100,))), ("chisquare", (3.0, (500,))),
         ("t", (4.0, (500,))), ("f", (3.0, 5.0, (500,))), ("poisson", (3.0, (500,))),
         ("poisson", (np.float32([0.0, 0.5, 4.0, 9.9, 10.0, 25.0, 300.0]),))]


# JAX's mode of the paper's era for a few: the key schedule differs, the formulas do not.
LEGACY = {"truncated_normal", "gamma", "beta", "geometric", "poisson"}


PARAMS = [pytest.param(name, args, mode, id=f"{name}{i}-{mode}")
          for i, (name, args) in enumerate(CASES) for mode in (True, False)
          if mode or name in LEGACY]


@requires_jax
@pytest.mark.parametrize("name,args,partitionable", PARAMS)
def test_same_draws_as_jax(name, args, partitionable):
    import jax
    jax.config.update("jax_threefry_partitionable", partitionable)
    fusionjit.config.update("fusionjit_threefry_partitionable", partitionable)
    try:
        for seed in (0, 7)[:1 if name in ("gamma", "beta", "t", "f", "dirichlet") else 2]:
            got = np.asarray(getattr(fr, name)(fr.key(seed), *args))
            want = np.asarray(getattr(jax.random, name)(jax.random.key(seed), *args))
            assert got.shape == want.shape and got.dtype == want.dtype
            if got.dtype.kind == "f":
                # Wald's formula cancels (1e-5); the rest are a few ulp of log, pow, tan, erf.
                # truncated_normal's erf bounds move its draws near 0 by ~1e-9.
                np.testing.assert_allclose(got, want, rtol=3e-5 if name == "wald" else 3e-6,
                                           atol=1e-7 if name == "truncated_normal" else 1e-30)
            elif name == "poisson":
                # Knuth's branch (lam < 10) draws JAX's integers. The rejection branch goes
                # through lgamma, whose last-ulp differences from XLA's can flip an
                # acceptance; every element keeps the last k it accepted until all have,
                # so one flip can move others: the same distribution, not the same draws.
                lam = np.broadcast_to(args[0], got.shape)
                np.testing.assert_array_equal(got[lam < 10], want[lam < 10])
            else:
                np.testing.assert_array_equal(got, want)
    finally:
        jax.config.update("jax_threefry_partitionable", True)
        fusionjit.config.update("fusionjit_threefry_partitionable", True)


def _draw(name, *args, n=20000, seed=3):
    return np.asarray(getattr(fr, name)(fr.key(seed), *args, shape=(n,)), np.float64)


@pytest.mark.parametrize("name,args,mean,var", [
    ("gamma", (0.4,), 0.4, 0.4), ("gamma", (3.0,), 3.0, 3.0),
    ("beta", (2.0, 5.0), 2 / 7, 10 / (49 * 8)), ("chisquare", (4.0,), 4.0, 8.0),
    ("t", (6.0,), 0.0, 1.5), ("f", (5.0, 10.0), 10 / 8, 2 * 100 * 13 / (5 * 64 * 6)),
    ("lognormal", (0.5,), math.exp(0.125), (math.exp(0.25) - 1) * math.exp(0.25)),
    ("rayleigh", (2.0,), 2 * math.sqrt(math.pi / 2), (4 - math.pi) / 2 * 4),
    ("weibull_min", (1.0, 2.0), math.sqrt(math.pi) / 2, 1 - math.pi / 4),
    ("triangular", (0.0, 0.3, 1.0), 1.3 / 3, (1 + 0.09 - 0.3) / 18),
    ("geometric", (0.25,), 4.0, 0.75 / 0.0625), ("wald", (1.5,), 1.5, 1.5 ** 3),
    ("poisson", (4.5,), 4.5, 4.5), ("poisson", (40.0,), 40.0, 40.0),
    ("truncated_normal", (-1.0, 2.0), None, None)])
def test_moments(name, args, mean, var):
    x = _draw(name, *args)
    if name == "truncated_normal":
        a, b = args
        pdf = lambda v: math.exp(-v * v / 2) / math.sqrt(2 * math.pi)  # noqa: E731
        z = 0.5 * (math.erf(b / math.sqrt(2)) - math.erf(a / math.sqrt(2)))
        mean = (pdf(a) - pdf(b)) / z
        var = 1 + (a * pdf(a) - b * pdf(b)) / z - mean ** 2
        assert x.min() > a and x.max() < b
    se = math.sqrt(var / len(x))
    assert abs(x.mean() - mean) < 5 * se + 1e-3, (x.mean(), mean)
    assert abs(x.var() / var - 1) < 0.1, (x.var(), var)


def test_dirichlet_rows_sum_to_one_with_the_right_means():
    x = np.asarray(fr.dirichlet(fr.key(1), np.float32([0.5, 1.0, 3.0]), (5000,)))
    assert x.shape == (5000, 3)
    np.testing.assert_allclose(x.sum(-1), 1, rtol=1e-5)
    np.testing.assert_allclose(x.mean(0), np.array([0.5, 1, 3]) / 4.5, atol=0.01)


def test_gamma_under_jit_equals_eager_and_draws_per_element():
    a = np.float32([0.2, 1.0, 7.5, 30.0])
    jitted = fusionjit.jit(lambda k, a: fr.gamma(k, a))
    eager = np.asarray(fr.gamma(fr.key(5), a))
    np.testing.assert_array_equal(np.asarray(jitted(fr.key(5), a)), eager)
    assert np.all(eager > 0)
    # A batch of keys, through fusionjit's loops: each row its own draws.
    keys = fr.split(fr.key(9), 3)
    rows = np.asarray(fusionjit.jit(lambda ks: fusionjit.lax.map(
        lambda k: fr.gamma(k, 2.0, (4,)), ks))(keys))
    assert rows.shape == (3, 4) and len({tuple(r) for r in rows}) == 3
    np.testing.assert_array_equal(rows[1], np.asarray(fr.gamma(keys[1], 2.0, (4,))))


GRAD_ALPHAS = np.float32([0.05, 0.3, 1.0, 2.5, 10.0, 50.0])


@requires_jax
def test_gamma_family_gradients_match_jax():
    # Implicit reparameterisation: d sample / d a = -(dP/da) / (dP/dx) at the sample.
    import jax
    seed, a, w = 1, GRAD_ALPHAS, np.arange(6, dtype=np.float32)
    pairs = [
        (lambda r, k: lambda a: r.gamma(k, a).sum(), (a,)),
        (lambda r, k: lambda a: r.loggamma(k, a).sum(), (a,)),
        (lambda r, k: lambda a, b: (r.beta(k, a, b) ** 2).sum(), (a, a[::-1])),
        (lambda r, k: lambda a: (r.dirichlet(k, a) * w).sum(), (a,)),
        (lambda r, k: lambda df: r.chisquare(k, df).sum(), (a + 1,)),
    ]
    for make, args in pairs:
        argnums = tuple(range(len(args)))
        want = jax.grad(make(jax.random, jax.random.PRNGKey(seed)), argnums)(*args)
        got = fusionjit.grad(make(fr, fr.PRNGKey(seed)), argnums)(*args)
        for g, want_g in zip(got, want):
            # (atol: XLA flushes a denormal gradient to 0 where fusionjit keeps it.)
            np.testing.assert_allclose(g, want_g, rtol=1e-4, atol=1e-30)
    # Under jit, with a sample shape that broadcasts a.
    got = fusionjit.jit(fusionjit.grad(lambda a: fr.gamma(fr.PRNGKey(0), a, (3, 6)).sum()))(a)
    want = jax.grad(lambda a: jax.random.gamma(jax.random.PRNGKey(0), a, (3, 6)).sum())(a)
    np.testing.assert_allclose(got, want, rtol=1e-4)
    # Forward mode and typed keys, per element.
    tangent = np.ones_like(a)
    got = fusionjit.jvp(lambda a: fr.gamma(fr.key(seed), a), (a,), (tangent,))[1]
    want = jax.jvp(lambda a: jax.random.gamma(jax.random.key(seed), a), (a,), (tangent,))[1]
    np.testing.assert_allclose(got, want, rtol=1e-4)


@requires_jax
def test_random_gamma_grad_matches_jax():
    import jax
    a = np.float32([0.01, 0.1, 0.3, 0.5, 1.0, 1.0, 2.5, 2.5, 10, 10, 10, 100, 100, 3.0])
    x = np.float32([1e-30, 0.02, 0.3, 1.5, 0.7, 3.0, 0.5, 6.0, 5, 10, 20, 95, 110, 0.0])
    np.testing.assert_allclose(fusionjit.lax.random_gamma_grad(a, x),
                               jax.lax.random_gamma_grad(a, x), rtol=1e-5)
    bad = fusionjit.lax.random_gamma_grad(np.float32([-1.0, 1.0, np.nan]),
                                          np.float32([1.0, -1.0, 1.0]))
    assert np.isnan(np.asarray(bad)).all()
    with pytest.raises(TypeError, match="floating-point"):
        fusionjit.lax.random_gamma_grad(np.int32(2), np.int32(1))
    with pytest.raises(ValueError, match="same shape"):
        fusionjit.lax.random_gamma_grad(np.ones(2, np.float32), np.ones(3, np.float32))


def test_argument_errors_name_the_line():
    with pytest.raises(ValueError, match=r"test_random_dists.py:\d+.*do not broadcast"):
        fr.gamma(fr.key(0), np.ones(3, np.float32), shape=(4,))
    with pytest.raises(ValueError, match="must be a float dtype"):
        fr.beta(fr.key(0), 1.0, 2.0, dtype=np.int32)
    with pytest.raises(ValueError, match="must be an integer dtype"):
        fr.geometric(fr.key(0), 0.5, dtype=np.float32)
    with pytest.raises(ValueError, match="must be an integer dtype"):
        fr.poisson(fr.key(0), 2.0, (3,), dtype=np.float32)
    with pytest.raises(ValueError, match="alpha.ndim >= 1"):
        fr.dirichlet(fr.key(0), 1.0)
    with pytest.raises(TypeError, match="needs a PRNG key"):
        fr.cauchy(3, (2,))


def test_categorical_broadcasts_the_logits_and_draws_without_replacement():
    key = fr.PRNGKey(3)
    prior = np.log(np.array([[0.1, 0.2, 0.7]], np.float32))   # one distribution, shared
    draws = np.asarray(fr.categorical(key, prior, shape=(20000,)))
    np.testing.assert_allclose(np.bincount(draws, minlength=3) / 20000, [0.1, 0.2, 0.7],
                               atol=0.015)
    with pytest.raises(ValueError, match="must broadcast to shape"):
        fr.categorical(key, np.zeros((2, 3), np.float32), shape=(4,))
    logits = np.random.default_rng(0).standard_normal((4, 10)).astype(np.float32)
    picks = np.asarray(fr.categorical(key, logits, shape=(6, 4), replace=False))
    assert picks.shape == (6, 4) and all(len(set(picks[:, b])) == 6 for b in range(4))
    with pytest.raises(ValueError, match="cannot exceed the number of categories"):
        fr.categorical(key, logits, shape=(11, 4), replace=False)


def test_choice_with_probabilities_without_replacement_prefers_the_likely():
    p = np.full(50, 0.1 / 45, np.float32)
    p[:5] = 0.18
    picks = np.asarray(fusionjit.jit(lambda k: fr.choice(k, 50, (5,), replace=False, p=p))(
        fr.PRNGKey(0)))
    assert len(set(picks.tolist())) == 5
    counts = np.zeros(50)
    for seed in range(40):
        counts[np.asarray(fr.choice(fr.PRNGKey(seed), 50, (5,), replace=False, p=p))] += 1
    assert counts[:5].sum() > 0.75 * counts.sum()


@requires_jax
@pytest.mark.parametrize("case", ["broadcast", "no_replace", "no_replace_axis0", "choice_p",
                                  "choice_rows"])
def test_categorical_and_choice_bits_match_jax(case):
    import jax
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((5, 10)).astype(np.float32)
    p = rng.uniform(0.1, 2, 64).astype(np.float32)
    p /= p.sum()
    rows = np.arange(128, dtype=np.float32).reshape(64, 2)
    calls = {
        "broadcast": lambda r, k: r.categorical(k, logits[:1], shape=(7, 1)),
        "no_replace": lambda r, k: r.categorical(k, logits, shape=(3, 5), replace=False),
        "no_replace_axis0": lambda r, k: r.categorical(k, logits, axis=0, shape=(4, 10),
                                                       replace=False),
        "choice_p": lambda r, k: r.choice(k, 64, (2, 5), replace=False, p=p),
        "choice_rows": lambda r, k: r.choice(k, rows, (10,), replace=False, p=p),
    }
    got = calls[case](fr, fr.PRNGKey(42))
    want = calls[case](jax.random, jax.random.PRNGKey(42))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
