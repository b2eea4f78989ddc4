"""RL and ML programs written as a JAX user writes them (GAE, PPO, DQN, SAC, Adam, attention,
GRU, vmapped rollouts, epsilon-greedy, n-step returns), each written once for a namespace `L`
(numpy, lax, nn, random, grad, vmap, tree_map) and run with fusionjit, with NumPy in float64
(the reference: loops run as Python loops, `stop_gradient` is the identity), and with JAX
where it is installed. Gradients are checked against JAX and against central finite
differences of the NumPy program along random directions."""

from __future__ import annotations

import functools
import math
import types
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import fusionjit
import fusionjit.nn
import fusionjit.numpy
import fusionjit.random
from conftest import HAVE_JAX, requires_jax
from fusionjit import lax as flax
from fusionjit.tree_util import tree_flatten, tree_leaves, tree_map, tree_unflatten


@dataclass(frozen=True)
class Lib:
    np: Any
    lax: Any
    nn: Any
    random: Any = None
    jit: Any = None
    grad: Any = None
    value_and_grad: Any = None
    vmap: Any = None
    tree_map: Any = None


def fj_lib(fusion=None) -> Lib:
    return Lib(fusionjit.numpy, flax, fusionjit.nn, fusionjit.random,
               functools.partial(fusionjit.jit, fusion=fusion), fusionjit.grad,
               fusionjit.value_and_grad, fusionjit.vmap, tree_map)


def jax_lib() -> Lib:
    import jax
    import jax.numpy as jnp
    return Lib(jnp, jax.lax, jax.nn, jax.random, jax.jit, jax.grad, jax.value_and_grad,
               jax.vmap, jax.tree_util.tree_map)


# --- NumPy as a library with lax's loops, run eagerly: the float64 reference ---------------

def _np_scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    n = length if xs is None else len(tree_leaves(xs)[0])
    carry, ys = init, [None] * n
    for i in (range(n - 1, -1, -1) if reverse else range(n)):
        carry, ys[i] = f(carry, None if xs is None else tree_map(lambda a: a[i], xs))
    return carry, tree_map(lambda *a: np.stack(a), *ys)


def _np_while_loop(cond, body, init):
    while cond(init):
        init = body(init)
    return init


def _np_logsumexp(x, axis=-1, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis)


def _np_log_softmax(x, axis=-1):
    return x - _np_logsumexp(x, axis, keepdims=True)


NP = Lib(
    np,
    types.SimpleNamespace(scan=_np_scan, while_loop=_np_while_loop,
                          fori_loop=lambda lo, hi, body, init: functools.reduce(
                              lambda c, i: body(i, c), range(lo, hi), init),
                          stop_gradient=lambda x: x,
                          dynamic_slice_in_dim=lambda a, s, n, axis=0: a[s:s + n]),
    types.SimpleNamespace(relu=lambda x: np.maximum(x, 0), sigmoid=lambda x: 1 / (1 + np.exp(-x)),
                          softplus=lambda x: np.logaddexp(0, x), logsumexp=_np_logsumexp,
                          log_softmax=_np_log_softmax,
                          softmax=lambda x, axis=-1: np.exp(_np_log_softmax(x, axis)),
                          one_hot=lambda i, k: (np.asarray(i)[..., None] == np.arange(k)) * 1.0),
    jit=lambda f: f, tree_map=tree_map)

FJ = fj_lib()
KEY0 = np.array([0, 0], np.uint32)  # PRNGKey(0) as NumPy: a key for fusionjit and JAX alike
PROFILES = [None, "xla"]


# --- helpers --------------------------------------------------------------------------------

def f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def f64(tree):
    return tree_map(lambda a: np.asarray(a, np.float64) if np.asarray(a).dtype.kind == "f"
                    else np.asarray(a), tree)


def assert_trees_close(actual, expected, rtol=1e-5, atol=1e-5, check_dtype=True):
    a_leaves, a_def = tree_flatten(actual)
    e_leaves, e_def = tree_flatten(expected)
    assert a_def == e_def, f"{a_def} != {e_def}"
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape, f"leaf {i}: shape {a.shape} != {e.shape}"
        if check_dtype:
            assert a.dtype == e.dtype, f"leaf {i}: dtype {a.dtype} != {e.dtype}"
        if e.dtype.kind in "biu":
            np.testing.assert_array_equal(a, e, err_msg=f"leaf {i}")
        else:
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=f"leaf {i}")


def check_jax(program, args, got, rtol=1e-5, atol=1e-5, wrap=None, **kw):
    """`program(L, *args)` (transformed by `wrap(L, f)`: grad, ...) under jax.jit agrees with
    fusionjit's `got`, dtypes included."""
    if HAVE_JAX:
        jl = jax_lib()
        f = functools.partial(program, jl, **kw)
        assert_trees_close(got, jl.jit(wrap(jl, f) if wrap else f)(*args), rtol, atol)


def check_finite_differences(f, params, grads, seed=0, n_dirs=3, eps=1e-6, rtol=2e-3,
                             atol=1e-5):
    """Directional derivatives of the float64 NumPy function `f(params)` along random
    directions agree with the dot product of fusionjit's float32 gradients with them."""
    rng = np.random.default_rng(seed)
    leaves, treedef = tree_flatten(f64(params))
    g = [np.asarray(x, np.float64) for x in tree_leaves(grads)]
    assert len(g) == len(leaves)
    for _ in range(n_dirs):
        d = [rng.standard_normal(np.shape(x)) for x in leaves]
        plus = tree_unflatten(treedef, [x + eps * di for x, di in zip(leaves, d)])
        minus = tree_unflatten(treedef, [x - eps * di for x, di in zip(leaves, d)])
        fd = (float(f(plus)) - float(f(minus))) / (2 * eps)
        an = sum(float(np.sum(gi * di)) for gi, di in zip(g, d))
        assert abs(fd - an) <= rtol * abs(an) + atol, (fd, an)


def mlp_params(rng, sizes):
    (i, h, o) = sizes
    return {"w1": f32(rng, i, h, scale=1 / math.sqrt(i)), "b1": f32(rng, h, scale=0.1),
            "w2": f32(rng, h, o, scale=1 / math.sqrt(h)), "b2": f32(rng, o, scale=0.1)}


def mlp(L, p, x, act="tanh"):
    h = L.np.tanh(x @ p["w1"] + p["b1"]) if act == "tanh" else L.nn.relu(x @ p["w1"] + p["b1"])
    return h @ p["w2"] + p["b2"]


# --- GAE and discounted returns ---------------------------------------------------------------

def gae(L, rewards, values, dones, last_value, gamma=0.99, lam=0.95):
    np = L.np
    not_done = 1.0 - dones.astype(rewards.dtype)
    next_values = np.concatenate([values[1:], last_value[None]], axis=0)
    deltas = rewards + gamma * next_values * not_done - values

    def step(adv, x):
        delta, nd = x
        adv = delta + gamma * lam * nd * adv
        return adv, adv

    _, advantages = L.lax.scan(step, np.zeros_like(last_value), (deltas, not_done), reverse=True)
    return advantages, advantages + values


def discounted_returns(L, rewards, dones, last_value, gamma=0.99):
    def step(ret, x):
        r, d = x
        ret = r + gamma * ret * (1.0 - d)
        return ret, ret

    return L.lax.scan(step, last_value, (rewards, dones.astype(rewards.dtype)), reverse=True)[1]


def gae_value_loss(L, values, rewards, dones, last_value):
    adv, _ = gae(L, rewards, values, dones, last_value)
    return L.np.mean(adv ** 2) + 0.1 * L.np.sum(adv[0])


def rollout_batch(seed=0, T=16, N=5):
    rng = np.random.default_rng(seed)
    return (f32(rng, T, N), f32(rng, T, N), rng.random((T, N)) < 0.15, f32(rng, N))


@pytest.mark.parametrize("fusion", PROFILES)
def test_gae_and_discounted_returns_match_a_python_loop(fusion):
    L = fj_lib(fusion)
    rewards, values, dones, last_value = rollout_batch()
    adv, ret = L.jit(functools.partial(gae, L))(rewards, values, dones, last_value)
    disc = L.jit(functools.partial(discounted_returns, L))(rewards, dones, last_value)
    T = rewards.shape[0]
    r, v, d, lv = f64((rewards, values, dones, last_value))
    want_adv, want_disc, a, g = np.zeros_like(r), np.zeros_like(r), np.zeros_like(lv), lv.copy()
    for t in reversed(range(T)):
        nv = lv if t == T - 1 else v[t + 1]
        a = r[t] + 0.99 * nv * (1 - d[t]) - v[t] + 0.99 * 0.95 * (1 - d[t]) * a
        want_adv[t] = a
        g = r[t] + 0.99 * g * (1 - d[t])
        want_disc[t] = g
    assert_trees_close((adv, ret, disc), (want_adv, want_adv + v, want_disc), 1e-5, 1e-5,
                       check_dtype=False)
    assert adv.dtype == np.float32 and disc.dtype == np.float32
    check_jax(gae, (rewards, values, dones, last_value), (adv, ret))
    check_jax(discounted_returns, (rewards, dones, last_value), disc)


def test_grad_of_gae_wrt_values():
    rewards, values, dones, last_value = rollout_batch(1)
    g = FJ.jit(FJ.grad(functools.partial(gae_value_loss, FJ)))(values, rewards, dones,
                                                               last_value)
    check_finite_differences(lambda v: gae_value_loss(NP, v, *f64((rewards, dones, last_value))),
                             values, g)
    check_jax(gae_value_loss, (values, rewards, dones, last_value), g, 1e-5, 1e-6,
              wrap=lambda L, f: L.grad(f))


# --- PPO ---------------------------------------------------------------------------------------

def ppo_loss(L, params, obs, actions, old_logp, advantages, returns, old_values, clip=0.2,
             vf_clip=0.2, ent_coef=0.01, vf_coef=0.5):
    np, nn = L.np, L.nn
    h = np.tanh(obs @ params["w1"] + params["b1"])
    logits = h @ params["wpi"] + params["bpi"]
    value = (h @ params["wv"] + params["bv"])[:, 0]
    logp_all = nn.log_softmax(logits)
    logp = np.take_along_axis(logp_all, actions[:, None], axis=1)[:, 0]
    ratio = np.exp(logp - old_logp)
    adv = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    pg_loss = -np.minimum(ratio * adv, np.clip(ratio, 1 - clip, 1 + clip) * adv).mean()
    v_clipped = old_values + np.clip(value - old_values, -vf_clip, vf_clip)
    vf_loss = 0.5 * np.maximum((value - returns) ** 2, (v_clipped - returns) ** 2).mean()
    entropy = -(np.exp(logp_all) * logp_all).sum(-1).mean()
    approx_kl = ((ratio - 1) - (logp - old_logp)).mean()
    clipfrac = (np.abs(ratio - 1) > clip).mean()
    loss = pg_loss + vf_coef * vf_loss - ent_coef * entropy
    return loss, (pg_loss, vf_loss, entropy, approx_kl, clipfrac)


def ppo_batch(seed=0, B=64, D=6, H=32, A=4):
    rng = np.random.default_rng(seed)
    params = {"w1": f32(rng, D, H, scale=0.4), "b1": f32(rng, H, scale=0.1),
              "wpi": f32(rng, H, A, scale=0.3), "bpi": np.zeros(A, np.float32),
              "wv": f32(rng, H, 1, scale=0.3), "bv": np.zeros(1, np.float32)}
    obs = f32(rng, B, D)
    actions = rng.integers(0, A, B).astype(np.int32)
    # old log-probabilities near the current ones, so that some ratios are clipped
    h = np.tanh(obs @ params["w1"] + params["b1"])
    logp = _np_log_softmax((h @ params["wpi"]).astype(np.float64))[np.arange(B), actions]
    old_logp = (logp + rng.normal(0, 0.25, B)).astype(np.float32)
    old_values = ((h @ params["wv"])[:, 0] + rng.normal(0, 0.3, B)).astype(np.float32)
    return params, (obs, actions, old_logp, f32(rng, B), f32(rng, B), old_values)


@pytest.mark.parametrize("fusion", PROFILES)
def test_ppo_loss_value_and_grad_through_an_mlp_policy(fusion):
    L = fj_lib(fusion)
    params, batch = ppo_batch()
    (loss, aux), grads = L.jit(L.value_and_grad(functools.partial(ppo_loss, L), has_aux=True))(
        params, *batch)
    want_loss, want_aux = ppo_loss(NP, f64(params), *f64(batch))
    assert_trees_close((loss, aux), (want_loss, want_aux), 1e-5, 1e-5, check_dtype=False)
    assert 0 < float(aux[4]) < 1  # some ratios clipped, some not
    assert set(grads) == set(params)
    check_finite_differences(lambda p: ppo_loss(NP, p, *f64(batch))[0], params, grads)
    check_jax(ppo_loss, (params, *batch), ((loss, aux), grads),
              wrap=lambda L, f: L.value_and_grad(f, has_aux=True))


# --- DQN / double DQN -------------------------------------------------------------------------

def dqn_loss(L, online, target, obs, actions, rewards, next_obs, dones, gamma=0.99,
             double=True):
    np = L.np
    n = obs.shape[0]
    q_sa = mlp(L, online, obs, "relu")[np.arange(n), actions]
    q_next_target = mlp(L, target, next_obs, "relu")
    if double:
        a_star = np.argmax(mlp(L, online, next_obs, "relu"), axis=-1)
        q_next = q_next_target[np.arange(n), a_star]
    else:
        a_star = q_next_target.argmax(-1)
        q_next = q_next_target.max(axis=-1)
    td_target = rewards + gamma * (1.0 - dones) * q_next
    td = q_sa - L.lax.stop_gradient(td_target)
    huber = np.where(np.abs(td) <= 1.0, 0.5 * td ** 2, np.abs(td) - 0.5)
    return huber.mean(), (td, a_star)


@pytest.mark.parametrize("double", [True, False], ids=["double", "dqn"])
def test_dqn_td_loss_and_grad(double):
    rng = np.random.default_rng(2)
    B, D, A = 48, 5, 3
    online, target = mlp_params(rng, (D, 24, A)), mlp_params(rng, (D, 24, A))
    batch = (f32(rng, B, D), rng.integers(0, A, B).astype(np.int32), f32(rng, B, scale=2),
             f32(rng, B, D), (rng.random(B) < 0.2).astype(np.float32))
    (loss, (td, a_star)), g = FJ.jit(FJ.value_and_grad(
        functools.partial(dqn_loss, FJ, double=double), has_aux=True))(online, target, *batch)
    want = dqn_loss(NP, f64(online), f64(target), *f64(batch), double=double)
    assert_trees_close((loss, (td, a_star)), want, 1e-5, 1e-5, check_dtype=False)
    assert a_star.dtype == np.int32 and (np.abs(np.asarray(td)) > 1).any()
    check_finite_differences(
        lambda p: dqn_loss(NP, p, f64(target), *f64(batch), double=double)[0], online, g)
    check_jax(dqn_loss, (online, target, *batch), ((loss, (td, a_star)), g), double=double,
              wrap=lambda L, f: L.value_and_grad(f, has_aux=True))


# --- SAC: tanh-squashed Gaussian with reparameterisation --------------------------------------

def sac_actor_loss(L, p, qw, obs, eps, alpha=0.2):
    np, nn = L.np, L.nn
    h = nn.relu(obs @ p["w1"] + p["b1"])
    mu = h @ p["wmu"] + p["bmu"]
    log_std = np.clip(h @ p["wls"] + p["bls"], -5.0, 2.0)
    u = mu + np.exp(log_std) * eps
    a = np.tanh(u)
    logp = (-0.5 * eps ** 2 - log_std - 0.5 * np.log(2 * np.pi)).sum(-1)
    logp = logp - (2.0 * (np.log(2.0) - u - nn.softplus(-2.0 * u))).sum(-1)
    q = np.tanh(np.concatenate([obs, a], axis=-1) @ qw).sum(-1)
    return (alpha * logp - q).mean()


def sac_step(L, p, qw, obs, key):
    key, k_eps = L.random.split(key)
    eps = L.random.normal(k_eps, (obs.shape[0], p["bmu"].shape[0]))
    loss, g = L.value_and_grad(functools.partial(sac_actor_loss, L))(p, qw, obs, eps)
    return key, eps, loss, g


def sac_inputs(seed=3, B=32, D=5, H=16, A=2):
    rng = np.random.default_rng(seed)
    p = {"w1": f32(rng, D, H, scale=0.5), "b1": f32(rng, H, scale=0.1),
         "wmu": f32(rng, H, A, scale=0.5), "bmu": f32(rng, A, scale=0.1),
         "wls": f32(rng, H, A, scale=0.5), "bls": f32(rng, A, scale=0.1) - 0.5}
    return p, f32(rng, D + A, 8, scale=0.5), f32(rng, B, D)


def test_sac_squashed_gaussian_log_prob_and_reparameterised_grad():
    p, qw, obs = sac_inputs()
    key = np.asarray(fusionjit.random.PRNGKey(7))
    got = FJ.jit(functools.partial(sac_step, FJ))(p, qw, obs, key)
    eps, loss, g = np.asarray(got[1]), got[2], got[3]
    assert eps.dtype == np.float32 and abs(eps.mean()) < 0.3 and 0.7 < eps.std() < 1.3
    want = sac_actor_loss(NP, f64(p), *f64((qw, obs, eps)))
    np.testing.assert_allclose(float(loss), want, rtol=1e-5, atol=1e-5)
    check_finite_differences(lambda q: sac_actor_loss(NP, q, *f64((qw, obs, eps))), p, g)
    # the same key gives JAX's noise (normal() goes through erf_inv: a few ulps apart at most,
    # as in tests/test_random.py), the same loss and gradients
    check_jax(sac_step, (p, qw, obs, key), got, 1e-5, 1e-5)


# --- Adam with global-norm clipping over a pytree ----------------------------------------------

def clip_by_global_norm(L, grads, max_norm):
    norm = L.np.sqrt(sum(L.np.sum(g ** 2) for g in tree_leaves(grads)))
    scale = L.np.minimum(1.0, max_norm / (norm + 1e-6))
    return L.tree_map(lambda g: g * scale, grads), norm


def adam_init(L, params):
    zeros = L.tree_map(L.np.zeros_like, params)
    return zeros, zeros, L.np.zeros((), L.np.int32)


def adam_update(L, params, grads, state, lr=0.05, b1=0.9, b2=0.999, eps=1e-8):
    m, v, t = state
    t = t + 1
    m = L.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
    v = L.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
    c1, c2 = 1 - b1 ** t, 1 - b2 ** t
    params = L.tree_map(lambda p, m, v: p - lr * (m / c1) / (L.np.sqrt(v / c2) + eps), params, m,
                        v)
    return params, (m, v, t)


def adam_on_given_grads(L, params, grad_seq, max_norm=3.5):
    def step(carry, grads):
        params, state = carry
        grads, norm = clip_by_global_norm(L, grads, max_norm)
        params, state = adam_update(L, params, grads, state)
        return (params, state), norm

    (params, (m, v, t)), norms = L.lax.scan(step, (params, adam_init(L, params)), grad_seq)
    return params, m, v, t, norms


def test_adam_with_bias_correction_and_global_norm_clipping_in_a_scan():
    rng = np.random.default_rng(4)
    params = {"w": f32(rng, 3, 4), "b": f32(rng, 4), "head": (f32(rng, 4, 2), f32(rng, 2))}
    grad_seq = tree_map(lambda p: f32(rng, 7, *p.shape, scale=0.7), params)
    got = FJ.jit(functools.partial(adam_on_given_grads, FJ))(params, grad_seq)
    want = adam_on_given_grads(NP, f64(params), f64(grad_seq))
    assert_trees_close(got, want, 2e-5, 2e-5, check_dtype=False)
    assert np.asarray(got[3]).dtype == np.int32 and int(got[3]) == 7
    norms = np.asarray(got[4])
    assert (norms > 3.5).any() and (norms < 3.5).any()  # clipping active on some steps only
    check_jax(adam_on_given_grads, (params, grad_seq), got, 2e-5, 2e-5)


def regression_loss(L, params, x, y):
    return L.np.mean((mlp(L, params, x) - y) ** 2)


def train(L, params, x, y, steps=25):
    def body(i, carry):
        params, state, losses = carry
        loss, grads = L.value_and_grad(functools.partial(regression_loss, L))(params, x, y)
        grads, _ = clip_by_global_norm(L, grads, 1.0)
        params, state = adam_update(L, params, grads, state, lr=0.02)
        return params, state, losses.at[i].set(loss)

    init = (params, adam_init(L, params), L.np.zeros(steps, x.dtype))
    params, state, losses = L.lax.fori_loop(0, steps, body, init)
    return params, losses


def test_a_training_loop_of_grad_clip_and_adam_in_fori_loop():
    rng = np.random.default_rng(5)
    params = mlp_params(rng, (3, 16, 1))
    x = f32(rng, 64, 3)
    y = np.sin(x.sum(-1, keepdims=True)).astype(np.float32)
    new_params, losses = FJ.jit(functools.partial(train, FJ))(params, x, y)
    losses = np.asarray(losses)
    np.testing.assert_allclose(losses[0], regression_loss(NP, f64(params), *f64((x, y))),
                               rtol=1e-5)
    assert losses[-1] < 0.5 * losses[0]
    # the same steps taken one jitted call at a time
    step = FJ.jit(lambda p, s: adam_update(FJ, p, clip_by_global_norm(
        FJ, FJ.grad(functools.partial(regression_loss, FJ))(p, x, y), 1.0)[0], s, lr=0.02))
    p, s = params, adam_init(FJ, params)
    for _ in range(25):
        p, s = step(p, s)
    assert_trees_close(new_params, p, 1e-5, 1e-5)
    check_jax(train, (params, x, y), (new_params, losses), 1e-4, 1e-5)


# --- layer norm + causal single-head attention -------------------------------------------------

def layer_norm(L, x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / L.np.sqrt(var + eps) * g + b


def attention_block(L, p, x):
    np = L.np
    T, D = x.shape[-2:]
    h = layer_norm(L, x, p["g"], p["b"])
    q, k, v = h @ p["wq"], h @ p["wk"], h @ p["wv"]
    s = np.einsum("btd,bsd->bts", q, k) / math.sqrt(D)
    mask = np.tril(np.ones((T, T), dtype=bool))
    s = np.where(mask, s, -np.inf)
    out = x + L.nn.softmax(s, axis=-1) @ v @ p["wo"]
    return layer_norm(L, out, p["g2"], p["b2"])


def attention_loss(L, p, x, y):
    return L.np.mean((attention_block(L, p, x) - y) ** 2)


@pytest.mark.parametrize("fusion", PROFILES)
def test_layer_norm_and_causal_attention_forward_and_grad(fusion):
    L = fj_lib(fusion)
    rng = np.random.default_rng(6)
    B, T, D = 3, 7, 8
    p = {"g": 1 + f32(rng, D, scale=0.1), "b": f32(rng, D, scale=0.1),
         "wq": f32(rng, D, D, scale=0.4), "wk": f32(rng, D, D, scale=0.4),
         "wv": f32(rng, D, D, scale=0.4), "wo": f32(rng, D, D, scale=0.4),
         "g2": 1 + f32(rng, D, scale=0.1), "b2": f32(rng, D, scale=0.1)}
    x, y = f32(rng, B, T, D), f32(rng, B, T, D)
    out = L.jit(functools.partial(attention_block, L))(p, x)
    assert_trees_close(out, attention_block(NP, f64(p), f64(x)), 1e-4, 1e-5, check_dtype=False)
    # causality: changing the last position changes nothing before it
    x2 = x.copy()
    x2[:, -1] += 1.0
    out2 = L.jit(functools.partial(attention_block, L))(p, x2)
    np.testing.assert_array_equal(np.asarray(out2)[:, :-1], np.asarray(out)[:, :-1])
    g, gx = L.jit(L.grad(functools.partial(attention_loss, L), argnums=(0, 1)))(p, x, y)
    check_finite_differences(lambda q: attention_loss(NP, q, *f64((x, y))), p, g)
    check_finite_differences(lambda xx: attention_loss(NP, f64(p), xx, f64(y)), x, gx)
    check_jax(attention_block, (p, x), out)
    check_jax(attention_loss, (p, x, y), (g, gx), 1e-4, 1e-5,
              wrap=lambda L, f: L.grad(f, argnums=(0, 1)))


# --- GRU unrolled with scan -----------------------------------------------------------------------

def gru_cell(L, p, h, x):
    np, nn = L.np, L.nn
    z = nn.sigmoid(x @ p["wz"] + h @ p["uz"] + p["bz"])
    r = nn.sigmoid(x @ p["wr"] + h @ p["ur"] + p["br"])
    n = np.tanh(x @ p["wn"] + (r * h) @ p["un"] + p["bn"])
    return (1 - z) * n + z * h


def gru_loss(L, p, xs, target):
    h0 = L.np.zeros((xs.shape[1], p["uz"].shape[0]), xs.dtype)

    def step(h, x):
        h = gru_cell(L, p, h, x)
        return h, h.mean(-1)

    h, means = L.lax.scan(step, h0, xs)
    return L.np.mean((h @ p["out"] - target) ** 2) + 0.01 * L.np.mean(means ** 2)


@pytest.mark.parametrize("fusion", PROFILES)
def test_gru_unrolled_with_scan_grad_wrt_params(fusion):
    L = fj_lib(fusion)
    rng = np.random.default_rng(7)
    T, B, D, H = 12, 4, 3, 8
    p = {k: f32(rng, D if k[0] == "w" else H, H, scale=0.5) for k in
         ("wz", "uz", "wr", "ur", "wn", "un")}
    p.update({k: f32(rng, H, scale=0.1) for k in ("bz", "br", "bn")})
    p["out"] = f32(rng, H, 2, scale=0.5)
    xs, target = f32(rng, T, B, D), f32(rng, B, 2)
    loss, g = L.jit(L.value_and_grad(functools.partial(gru_loss, L)))(p, xs, target)
    np.testing.assert_allclose(float(loss), gru_loss(NP, f64(p), *f64((xs, target))),
                               rtol=1e-5)
    check_finite_differences(lambda q: gru_loss(NP, q, *f64((xs, target))), p, g)
    check_jax(gru_loss, (p, xs, target), (loss, g), wrap=lambda L, f: L.value_and_grad(f))


# --- a vmapped per-environment rollout with an argmax MLP policy ---------------------------------

def cartpole_physics(np, x, x_dot, theta, theta_dot, push_right):
    force = np.where(push_right, 10.0, -10.0)
    cos, sin = np.cos(theta), np.sin(theta)
    temp = (force + 0.05 * theta_dot ** 2 * sin) / 1.1
    acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
    x_acc = temp - 0.05 * acc * cos / 1.1
    return x + 0.02 * x_dot, x_dot + 0.02 * x_acc, theta + 0.02 * theta_dot, \
        theta_dot + 0.02 * acc


def env_rollout(L, policy, state, steps=40):
    """One environment: state [4]; returns (episode return, alive at the end, actions [T],
    states [T, 4])."""
    np = L.np

    def step(carry, _):
        s, alive, ret = carry
        a = np.argmax(mlp(L, policy, s))
        x, xd, th, thd = cartpole_physics(np, s[0], s[1], s[2], s[3], a == 1)
        done = (np.abs(x) > 2.4) | (np.abs(th) > 0.2095)
        ret = ret + alive.astype(s.dtype)
        alive = alive & ~done
        s = np.stack([x, xd, th, thd])
        return (s, alive, ret), (a, s)

    init = (state, np.ones((), dtype=bool), np.zeros((), state.dtype))
    (_, alive, ret), (actions, states) = L.lax.scan(step, init, None, length=steps)
    return ret, alive, actions, states


def vmapped_rollout(L, policy, states):
    return L.vmap(functools.partial(env_rollout, L), in_axes=(None, 0))(policy, states)


@pytest.mark.parametrize("fusion", PROFILES)
def test_vmapped_rollouts_of_an_argmax_mlp_policy(fusion):
    L = fj_lib(fusion)
    rng = np.random.default_rng(8)
    policy = mlp_params(rng, (4, 16, 2))
    policy["w1"] *= 3
    states = rng.uniform(-0.1, 0.1, (6, 4)).astype(np.float32)
    got = L.jit(functools.partial(vmapped_rollout, L))(policy, states)
    ret, alive, actions, traj = (np.asarray(a) for a in got)
    assert actions.dtype == np.int32 and alive.dtype == np.bool_ and ret.dtype == np.float32
    # NumPy in float32, one environment at a time
    want = [env_rollout(NP, policy, s) for s in states]
    want = tuple(np.stack([w[i] for w in want]) for i in range(4))
    assert_trees_close((ret, alive, actions, traj), want, 1e-4, 1e-5, check_dtype=False)
    assert 0 < actions.mean() < 1 and not alive.all()
    check_jax(vmapped_rollout, (policy, states), got, 1e-4, 1e-5)


# --- softmax cross-entropy with label smoothing ---------------------------------------------------

def smoothed_xent(L, w, b, x, labels, smoothing=0.1):
    np, nn = L.np, L.nn
    logits = x @ w + b
    k = logits.shape[-1]
    targets = nn.one_hot(labels, k) * (1 - smoothing) + smoothing / k
    logp = logits - nn.logsumexp(logits, axis=-1, keepdims=True)
    loss = -(targets * logp).sum(-1).mean()
    gap = np.abs(logp - nn.log_softmax(logits)).max()
    accuracy = (np.argmax(logits, -1) == labels).mean()
    return loss, (accuracy, gap)


def test_label_smoothed_cross_entropy_with_one_hot_and_logsumexp():
    rng = np.random.default_rng(9)
    B, D, K = 40, 6, 5
    w, b, x = f32(rng, D, K, scale=3), f32(rng, K), f32(rng, B, D)
    labels = rng.integers(0, K, B).astype(np.int32)
    (loss, (acc, gap)), (gw, gb) = FJ.jit(FJ.value_and_grad(
        functools.partial(smoothed_xent, FJ), argnums=(0, 1), has_aux=True))(w, b, x, labels)
    want_loss, (want_acc, _) = smoothed_xent(NP, *f64((w, b, x)), labels)
    np.testing.assert_allclose(float(loss), want_loss, rtol=1e-5)
    np.testing.assert_allclose(float(acc), want_acc, rtol=1e-6)
    assert float(gap) < 1e-5
    check_finite_differences(lambda p: smoothed_xent(NP, *p, f64(x), labels)[0], (w, b),
                             (gw, gb))
    # the gradient wrt the logits is softmax - targets: the bias gradient sums it
    logits = f64(x) @ f64(w) + f64(b)
    sm = np.exp(_np_log_softmax(logits))
    tg = np.eye(K)[labels] * 0.9 + 0.1 / K
    np.testing.assert_allclose(np.asarray(gb), (sm - tg).mean(0), rtol=1e-4, atol=1e-6)
    check_jax(smoothed_xent, (w, b, x, labels), ((loss, (acc, gap)), (gw, gb)),
              wrap=lambda L, f: L.value_and_grad(f, argnums=(0, 1), has_aux=True))


# --- Polyak target update and epsilon-greedy / Boltzmann actions ----------------------------------

def polyak(L, target, online, tau=0.05):
    return L.tree_map(lambda t, o: (1 - tau) * t + tau * o, target, online)


def act(L, params, obs, key, epsilon, temperature=0.5):
    np, random = L.np, L.random
    key, k_explore, k_rand, k_cat = random.split(key, 4)
    q = mlp(L, params, obs, "relu")
    n, a = q.shape
    greedy = np.argmax(q, axis=-1)
    explore = random.uniform(k_explore, (n,)) < epsilon
    random_actions = random.randint(k_rand, (n,), 0, a)
    actions = np.where(explore, random_actions, greedy)
    boltzmann = random.categorical(k_cat, q / temperature, axis=-1)
    return key, actions, explore, greedy, boltzmann


def act_for_steps(L, params, obs_seq, key, eps_start=0.9, eps_end=0.1):
    """Epsilon decays linearly over the steps of a scan that carries the key."""
    steps = obs_seq.shape[0]

    def step(key, xs):
        obs, i = xs
        eps = eps_start + (eps_end - eps_start) * i / (steps - 1)
        key, *out = act(L, params, obs, key, eps)
        return key, tuple(out)

    return L.lax.scan(step, key, (obs_seq, L.np.arange(steps)))


def act_inputs(seed=10, T=8, N=64, D=4, A=5):
    rng = np.random.default_rng(seed)
    return mlp_params(rng, (D, 16, A)), f32(rng, T, N, D)


def test_polyak_update_and_epsilon_greedy_actions():
    params, obs_seq = act_inputs()
    target = mlp_params(np.random.default_rng(11), (4, 16, 5))
    new_target = FJ.jit(functools.partial(polyak, FJ))(target, params)
    assert_trees_close(new_target, polyak(NP, f64(target), f64(params)), 1e-6, 1e-6,
                       check_dtype=False)
    key, (actions, explore, greedy, boltzmann) = FJ.jit(functools.partial(act_for_steps, FJ))(
        params, obs_seq, fusionjit.random.PRNGKey(0))
    actions, explore, greedy, boltzmann = map(np.asarray, (actions, explore, greedy, boltzmann))
    assert actions.dtype == greedy.dtype == boltzmann.dtype == np.int32
    np.testing.assert_array_equal(greedy, mlp(NP, params, obs_seq, "relu").argmax(-1))
    np.testing.assert_array_equal(actions[~explore], greedy[~explore])
    assert ((actions >= 0) & (actions < 5)).all() and ((boltzmann >= 0) & (boltzmann < 5)).all()
    frac = explore.mean(-1)  # epsilon decays from 0.9 to 0.1
    assert frac[0] > 0.7 and frac[-1] < 0.3
    assert (actions[explore] != greedy[explore]).any()


@requires_jax
def test_epsilon_greedy_and_categorical_bits_match_jax():
    params, obs_seq = act_inputs()
    got = FJ.jit(functools.partial(act_for_steps, FJ))(params, obs_seq, KEY0)
    check_jax(act_for_steps, (params, obs_seq, KEY0), got)
    # eagerly too, one step at a time
    jl, key = jax_lib(), np.array([0, 3], np.uint32)
    jkey = key
    for t in range(3):
        got = act(FJ, params, obs_seq[t], key, 0.3)
        want = act(jl, params, obs_seq[t], jkey, 0.3)
        assert_trees_close(got, want)
        key, jkey = got[0], want[0]


# --- n-step returns, cumsum discounting, while_loop episode lengths, masked means ----------------

def n_step_returns(L, rewards, dones, values, n=3, gamma=0.9):
    """values [T + 1, N]: V(s_0) .. V(s_T). Truncated at the end of the rollout."""
    np, lax = L.np, L.lax
    T, N = rewards.shape
    pad = np.zeros((n, N), rewards.dtype)
    r_pad = np.concatenate([rewards, pad])
    nd_pad = np.concatenate([1.0 - dones.astype(rewards.dtype), pad])
    t = np.arange(T)[:, None]

    def body(k, carry):
        ret, disc = carry
        in_range = t + k < T
        ret = ret + np.where(in_range, disc * lax.dynamic_slice_in_dim(r_pad, k, T), 0.0)
        disc = np.where(in_range, disc * gamma * lax.dynamic_slice_in_dim(nd_pad, k, T), disc)
        return ret, disc

    ret, disc = lax.fori_loop(0, n, body, (np.zeros_like(rewards), np.ones_like(rewards)))
    boot = values[np.minimum(np.arange(T) + n, T)]
    return ret + disc * boot


def cumsum_discounting(L, rewards, gamma=0.9):
    np = L.np
    disc = gamma ** np.arange(rewards.shape[0], dtype=rewards.dtype)
    return np.cumsum((rewards * disc[:, None])[::-1], axis=0)[::-1] / disc[:, None]


def episode_stats(L, rewards, dones):
    """Per environment, the length of the first episode (T where it does not end) by a
    while_loop, and the mean reward within it by masked means."""
    np = L.np
    T, N = rewards.shape

    def cond(c):
        t, _, found = c
        return (t < T) & ~np.all(found)

    def body(c):
        t, length, found = c
        d = dones[t]
        return t + 1, np.where(d & ~found, t + 1, length), found | d

    init = (np.asarray(0, np.int32), np.full((N,), T, np.int32), np.zeros((N,), bool))
    steps, length, _ = L.lax.while_loop(cond, body, init)
    mask = np.arange(T)[:, None] < length
    mean_a = np.where(mask, rewards, 0.0).sum(0) / mask.sum(0)
    mean_b = np.mean(rewards, axis=0, where=mask)
    return steps, length, mean_a, mean_b, np.sum(rewards, where=mask) / mask.sum()


def test_n_step_returns_in_fori_loop():
    rewards, values, dones, _ = rollout_batch(12, T=10, N=4)
    values = np.concatenate([values, f32(np.random.default_rng(1), 1, 4)])
    got = FJ.jit(functools.partial(n_step_returns, FJ))(rewards, dones, values)
    r, v, d = f64((rewards, values, dones))
    want = np.zeros_like(r)
    for t in range(10):
        g, disc = np.zeros(4), np.ones(4)
        for k in range(3):
            if t + k >= 10:
                break
            g += disc * r[t + k]
            disc *= 0.9 * (1 - d[t + k])
        want[t] = g + disc * v[min(t + 3, 10)]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    check_jax(n_step_returns, (rewards, dones, values), got)
    # with n = T and no dones the bootstrap is V(s_T) discounted by gamma^(T - t)
    no_dones = np.zeros_like(dones)
    full = FJ.jit(functools.partial(n_step_returns, FJ, n=10))(rewards, no_dones, values)
    want = cumsum_discounting(NP, r) + 0.9 ** (10 - np.arange(10))[:, None] * v[10]
    np.testing.assert_allclose(np.asarray(full), want, rtol=1e-5, atol=1e-5)


def test_cumsum_discounting_agrees_with_a_reverse_scan_and_its_grad():
    rewards = rollout_batch(13)[0]
    got = FJ.jit(functools.partial(cumsum_discounting, FJ))(rewards)
    scanned = FJ.jit(functools.partial(discounted_returns, FJ, gamma=0.9))(
        rewards, np.zeros(rewards.shape, bool), np.zeros(rewards.shape[1], np.float32))
    np.testing.assert_allclose(np.asarray(got), np.asarray(scanned), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(np.asarray(got), cumsum_discounting(NP, f64(rewards)),
                               rtol=2e-5, atol=2e-5)
    g = FJ.jit(FJ.grad(lambda r: cumsum_discounting(FJ, r)[0].sum()))(rewards)
    # d/dr_k of sum_n returns_0 = gamma^k
    np.testing.assert_allclose(np.asarray(g), np.broadcast_to(
        0.9 ** np.arange(16)[:, None], rewards.shape), rtol=1e-5)
    check_jax(cumsum_discounting, (rewards,), got, 2e-5, 2e-5)


def test_episode_lengths_by_while_loop_and_masked_means():
    rng = np.random.default_rng(14)
    T, N = 12, 6
    rewards = f32(rng, T, N)
    dones = rng.random((T, N)) < 0.12
    dones[:, 0] = False  # one environment never ends
    dones[:, 1] = True  # one ends at once
    dones[:, 2] = False
    dones[-1, 2] = True  # one ends at the last step
    got = FJ.jit(functools.partial(episode_stats, FJ))(rewards, dones)
    want = episode_stats(NP, f64(rewards), dones)
    assert_trees_close(got, want, 1e-5, 1e-6, check_dtype=False)
    steps, length = np.asarray(got[0]), np.asarray(got[1])
    assert length.dtype == np.int32 and length[0] == T and length[1] == 1 and length[2] == T
    assert steps == T  # env 0 never ends: the loop runs to the end
    check_jax(episode_stats, (rewards, dones), got, 1e-5, 1e-6)


# --- JAX API an RL program reaches for that fusionjit lacks or refuses ----------------------------

def test_categorical_draws_every_environment_from_one_shared_prior():
    logits = np.log(np.array([[0.1, 0.2, 0.7]], np.float32))
    f = lambda L, key: L.random.categorical(key, logits, shape=(4096,))  # noqa: E731
    got = np.asarray(FJ.jit(functools.partial(f, FJ))(KEY0))
    assert got.dtype == np.int32 and got.shape == (4096,)
    np.testing.assert_allclose(np.bincount(got, minlength=3) / 4096, [0.1, 0.2, 0.7], atol=0.03)
    check_jax(f, (KEY0,), got)


def test_prioritised_replay_samples_without_replacement():
    priorities = np.random.default_rng(16).uniform(0.1, 2.0, 64).astype(np.float32)

    def sample(L, priorities, key, batch=16, alpha=0.6, beta=0.4):
        p = priorities ** alpha / (priorities ** alpha).sum()
        idx = L.random.choice(key, p.shape[0], (batch,), replace=False, p=p)
        w = (p.shape[0] * p[idx]) ** -beta
        return idx, w / w.max()

    idx, w = FJ.jit(functools.partial(sample, FJ))(priorities, KEY0)
    assert len(set(np.asarray(idx).tolist())) == 16 and float(np.asarray(w).max()) == 1.0
    check_jax(sample, (priorities, KEY0), (idx, w))


def test_grad_of_a_train_state_with_an_int_step_counter():
    state = {"params": mlp_params(np.random.default_rng(17), (3, 8, 1)), "step": np.int32(3)}
    x = f32(np.random.default_rng(18), 16, 3)

    def loss(L, state):  # a learning-rate-like weight decays with the step
        return regression_loss(L, state["params"], x, 0.0) * 0.9 ** state["step"]

    g = FJ.jit(FJ.grad(functools.partial(loss, FJ), allow_int=True))(state)
    want = FJ.jit(FJ.grad(lambda p: loss(FJ, {"params": p, "step": np.int32(3)})))(
        state["params"])
    assert_trees_close(g["params"], want)
    assert set(g) == {"params", "step"}


def test_causal_attention_agrees_with_nn_dot_product_attention():
    rng = np.random.default_rng(19)
    q, k, v = (f32(rng, 2, 7, 1, 8) for _ in range(3))  # [batch, time, heads, head dim]
    s = np.einsum("btnh,bsnh->bnts", *f64((q, k))) / math.sqrt(8)
    s = np.where(np.tril(np.ones((7, 7), bool)), s, -np.inf)
    want = np.einsum("bnts,bsnh->btnh", NP.nn.softmax(s, axis=-1), f64(v))
    got = fusionjit.jit(lambda q, k, v: fusionjit.nn.dot_product_attention(
        q, k, v, is_causal=True))(q, k, v)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_debug_print_logs_the_loss_from_inside_a_jitted_training_scan(capsys):
    rng = np.random.default_rng(20)
    params, x = mlp_params(rng, (3, 8, 1)), f32(rng, 16, 3)

    def run(params):
        def step(p, i):
            loss, g = fusionjit.value_and_grad(functools.partial(regression_loss, FJ))(p, x, 0.0)
            fusionjit.debug.print("step {i} loss {loss:.4f}", i=i, loss=loss)
            return tree_map(lambda a, b: a - 0.1 * b, p, g), loss
        return flax.scan(step, params, fusionjit.numpy.arange(3))[1]

    losses = np.asarray(fusionjit.jit(run)(params))
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == [f"step {i} loss {v:.4f}" for i, v in enumerate(losses)]


def test_an_evolution_strategies_step_over_a_raveled_pytree():
    from fusionjit.flatten_util import ravel_pytree
    rng = np.random.default_rng(21)
    params, x = mlp_params(rng, (3, 8, 1)), f32(rng, 32, 3)
    y = np.sin(x.sum(-1, keepdims=True)).astype(np.float32)

    def es_step(L, params, key, ravel, sigma=0.05, pop=32):
        flat, unravel = ravel(params)
        eps = L.random.normal(key, (pop, flat.shape[0]))
        fit = L.vmap(lambda e: -regression_loss(L, unravel(flat + sigma * e), x, y))(eps)
        fit = (fit - fit.mean()) / (fit.std() + 1e-8)
        return unravel(flat + 0.01 / (pop * sigma) * eps.T @ fit)

    flat, unravel = ravel_pytree(params)
    assert flat.shape == (41,)
    assert_trees_close(unravel(flat), params)
    got = FJ.jit(functools.partial(es_step, FJ, ravel=ravel_pytree))(params, KEY0)
    if HAVE_JAX:
        from jax.flatten_util import ravel_pytree as jax_ravel
        check_jax(es_step, (params, KEY0), got, 1e-4, 1e-5, ravel=jax_ravel)
