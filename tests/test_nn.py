"""fusionjit.nn against NumPy formulas (and jax.nn where JAX is installed), eagerly and under
jit, and the MLP/softmax/loss programs they make fused into few kernels."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fusionjit
import fusionjit.nn as fnn
import fusionjit.numpy as fnp
from conftest import requires_jax

X = np.linspace(-6, 6, 97, dtype=np.float32).reshape(1, 97) * np.array([[1], [0.1]], np.float32)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x.astype(np.float64)))


REFERENCE = {
    "relu": lambda x: np.maximum(x, 0),
    "relu6": lambda x: np.clip(x, 0, 6),
    "sigmoid": _sigmoid,
    "log_sigmoid": lambda x: np.log(_sigmoid(x)),
    "softplus": lambda x: np.log1p(np.exp(x.astype(np.float64))),
    "silu": lambda x: x * _sigmoid(x),
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "elu": lambda x: np.where(x > 0, x, np.expm1(x.astype(np.float64))),
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.01 * x),
    "hard_tanh": lambda x: np.clip(x, -1, 1),
    "celu": lambda x: np.maximum(x, 0) + np.minimum(np.expm1(x.astype(np.float64)), 0),
    "selu": lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(
        x.astype(np.float64))),
    "hard_sigmoid": lambda x: np.clip(x + 3, 0, 6) / 6,
    "hard_silu": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "mish": lambda x: x * np.tanh(np.log1p(np.exp(x.astype(np.float64)))),
    "soft_sign": lambda x: x / (np.abs(x) + 1),
    "squareplus": lambda x: (x + np.sqrt(x.astype(np.float64) ** 2 + 4)) / 2,
    "sparse_plus": lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1.0) ** 2 / 4)),
    "sparse_sigmoid": lambda x: np.clip(x + 1.0, 0, 2) / 2,
    "identity": lambda x: x,
    "tanh": lambda x: np.tanh(x.astype(np.float64)),
}


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_activations(name):
    want = REFERENCE[name](X)
    for got in (getattr(fnn, name)(fnp.asarray(X)), fusionjit.jit(getattr(fnn, name))(X)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-6, atol=2e-7)


def test_exact_gelu_uses_erf():
    got = np.asarray(fusionjit.jit(lambda x: fnn.gelu(x, approximate=False))(X))
    want = np.array([[v * (1 + math.erf(v / math.sqrt(2))) / 2 for v in row] for row in
                     X.astype(np.float64)])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_softmax_log_softmax_logsumexp_and_masks():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((8, 10)) * 30).astype(np.float32)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    sm = e / e.sum(-1, keepdims=True)
    np.testing.assert_allclose(fusionjit.jit(fnn.softmax)(x), sm, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(fusionjit.jit(fnn.log_softmax)(x), np.log(sm), rtol=1e-5,
                               atol=1e-4)
    lse = np.log(e.sum(-1)) + x64.max(-1)
    np.testing.assert_allclose(fusionjit.jit(lambda x: fnn.logsumexp(x, axis=-1))(x), lse,
                               rtol=1e-6)
    assert float(fnn.logsumexp(fnp.asarray([-np.inf, -np.inf]))) == -np.inf
    mask = np.arange(10) < 4
    masked = np.asarray(fusionjit.jit(lambda x: fnn.softmax(x, where=mask))(x))
    assert not masked[:, 4:].any()
    np.testing.assert_allclose(masked.sum(-1), 1, rtol=1e-5)
    v, s = fnn.logsumexp(fnp.asarray([1.0, 2.0]), b=fnp.asarray([1.0, -2.0]), return_sign=True)
    assert float(s) == -1 and abs(float(v) - np.log(2 * np.e ** 2 - np.e)) < 1e-5


def test_one_hot_and_standardize():
    a = np.array([0, 2, 5, -1], np.int32)
    np.testing.assert_array_equal(fusionjit.jit(lambda a: fnn.one_hot(a, 4))(a),
                                  (a[:, None] == np.arange(4)).astype(np.float32))
    np.testing.assert_array_equal(fnn.one_hot(fnp.asarray(a), 4, axis=0, dtype=fnp.int32),
                                  (a[None, :] == np.arange(4)[:, None]).astype(np.int32))
    with pytest.raises(TypeError, match="integers"):
        fnn.one_hot(fnp.ones(3), 4)
    x = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(fusionjit.jit(fnn.standardize)(x), want, rtol=1e-5, atol=1e-5)


def test_a_policy_loss_fuses_into_few_kernels():
    # An actor-critic style loss: an MLP's logits, log_softmax, the log-probabilities of the
    # actions taken (a gather), an entropy bonus.
    rng = np.random.default_rng(2)
    obs = rng.standard_normal((256, 8)).astype(np.float32)
    w1 = (rng.standard_normal((8, 32)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((32, 4)) * 0.3).astype(np.float32)
    act = rng.integers(0, 4, 256).astype(np.int32)
    adv = rng.standard_normal(256).astype(np.float32)

    def loss(obs, w1, w2, act, adv):
        logits = fnn.relu(obs @ w1) @ w2
        logp = fnn.log_softmax(logits)
        taken = fnp.take_along_axis(logp, act[:, None], axis=1)[:, 0]
        entropy = -fnp.sum(fnp.exp(logp) * logp, axis=-1)
        return -fnp.mean(taken * adv) - 0.01 * fnp.mean(entropy)

    h = np.maximum(obs @ w1, 0) @ w2
    lp = h - h.max(-1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
    want = -np.mean(lp[np.arange(256), act] * adv) + 0.01 * np.mean((np.exp(lp) * lp).sum(-1))
    f = fusionjit.jit(loss)
    np.testing.assert_allclose(float(f(obs, w1, w2, act, adv)), want, rtol=1e-4)
    assert f.lower(obs, w1, w2, act, adv).compile().num_kernels <= 6


@requires_jax
def test_match_jax_nn():
    import jax
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((6, 7)) * 4).astype(np.float32)
    for name in sorted(REFERENCE) + ["softmax", "log_softmax", "logsumexp", "standardize",
                                     "logmeanexp"]:
        want = np.asarray(getattr(jax.nn, name if name != "logsumexp" else "logsumexp")(x))
        got = np.asarray(fusionjit.jit(getattr(fnn, name))(x))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(fusionjit.jit(lambda x: fnn.gelu(x, approximate=False))(x),
                               jax.nn.gelu(x, approximate=False), rtol=1e-5, atol=1e-6)
    pos = np.abs(x) + 0.01
    np.testing.assert_allclose(fnn.log1mexp(pos), jax.nn.log1mexp(pos), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fnn.logmeanexp(x, axis=0, where=x > 0),
                               jax.nn.logmeanexp(x, axis=0, where=x > 0), rtol=1e-5)
    np.testing.assert_allclose(fnn.glu(x[:, :6], axis=1), jax.nn.glu(x[:, :6], axis=1),
                               rtol=1e-6)


def test_log1mexp_logmeanexp_and_glu():
    x = np.float32([1e-4, 0.5, np.log(2), 3.0, 30.0])
    np.testing.assert_allclose(np.asarray(fnn.log1mexp(x)),
                               [math.log(-math.expm1(-float(v))) if v < 0.7 else
                                math.log1p(-math.exp(-float(v))) for v in x], rtol=1e-6)
    m = np.float32([[0.0, 1.0, 2.0], [5.0, 5.0, 5.0]])
    np.testing.assert_allclose(np.asarray(fnn.logmeanexp(m, axis=1)),
                               np.log(np.exp(m.astype(np.float64)).mean(1)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fnn.logmeanexp(m, axis=1, where=m > 0.5)),
                               [math.log((math.e + math.e ** 2) / 2), 5.0], rtol=1e-6)
    g = np.asarray(fnn.glu(np.float32([[1, 2, 0, 10]])))
    np.testing.assert_allclose(g, [[1 * 0.5, 2 / (1 + math.exp(-10))]], rtol=1e-6)
    with pytest.raises(ValueError, match="must be even"):
        fnn.glu(np.ones((2, 3), np.float32))


@requires_jax
def test_logsumexp_standardize_and_softmax_with_where_agree_with_jax():
    # Regression: standardize(where=) took an unmasked mean; logsumexp had no where=.
    import jax
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 7)).astype(np.float32)
    m = rng.random((3, 7)) > 0.4
    for name, kw in [("logsumexp", dict(axis=-1)), ("logsumexp", dict(axis=None)),
                     ("standardize", dict(axis=-1)), ("softmax", dict(axis=-1)),
                     ("log_softmax", dict(axis=-1))]:
        want = np.asarray(getattr(jax.nn, name)(x, where=m, **kw))
        got = np.asarray(getattr(fnn, name)(x, where=m, **kw))
        keep = np.isfinite(want)
        np.testing.assert_allclose(got[keep], want[keep], rtol=1e-5, atol=1e-5, err_msg=name)


def _attention_reference(q, k, v, causal):
    """[T, N, H] attention in float64, query head n reading key/value head n // (N // K)."""
    n, kh = q.shape[1], k.shape[1]
    k, v = np.repeat(k, n // kh, axis=1), np.repeat(v, n // kh, axis=1)
    s = np.einsum("tnh,snh->nts", q, k) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[1:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("nts,snh->tnh", p / p.sum(-1, keepdims=True), v)


@pytest.mark.parametrize("causal", [False, True])
def test_dot_product_attention_with_grouped_heads_matches_a_reference(causal):
    rng = np.random.default_rng(4)
    q = rng.standard_normal((2, 6, 4, 8)).astype(np.float32)
    k, v = (rng.standard_normal((2, 5 if not causal else 6, 2, 8)).astype(np.float32)
            for _ in range(2))
    got = fusionjit.jit(lambda q, k, v: fnn.dot_product_attention(q, k, v, is_causal=causal))(
        q, k, v)
    for b in range(2):
        np.testing.assert_allclose(np.asarray(got)[b], _attention_reference(
            q[b].astype(np.float64), k[b], v[b], causal), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        fnn.dot_product_attention(q[:, :, :3], k, v)
    with pytest.raises(ValueError, match="mask must be boolean"):
        fnn.dot_product_attention(q, k, v, mask=np.ones((1, 1, 6, k.shape[1]), np.float32))
