"""ML and RL programs the other suites do not write, each written once for a namespace `L`
as a JAX user writes it (jax.numpy, lax, nn, random, scipy, tree_util, grad, vmap, jvp) and
run under `fusionjit.jit` and `jax.jit` on the same inputs and the same PRNG keys: an LSTM
language model over embeddings, a multi-head GPT block with dropout and tied embeddings, a
CNN trained by a hand-written Adam with donated buffers, a VAE's ELBO, a PPO epoch over
permuted minibatches of a Gaussian policy, DP-SGD's per-example clipped gradients, vmapped
environments that reset by `lax.cond`, a C51 distributional projection by scatter-add,
V-trace, TRPO's conjugate gradient on Fisher-vector products (forward over reverse), MAML's
second-order meta-gradient, a straight-through Gumbel-softmax, a mixture density network,
batch norm with running statistics and `nn.initializers`, and value iteration in a
`while_loop`, SAC's twin-Q critic and temperature, a transposed-convolution decoder. Each
is also checked against a NumPy program in float64, a closed form or an identity (so the
file tests something without JAX).

Tolerances: fusionjit and JAX agree to 1e-5 relative and 1e-6 absolute (the largest gap
measured is under 1e-6 absolute plus 1.4e-6 relative, in MAML's second derivative). Against
float64: values to 1e-5 relative, float32 gradients to 2e-3 of central finite differences
along random directions or 1e-4 of a closed form elementwise, and TRPO's 20 float32 steps
of conjugate gradient to 1e-3 of the exact solve."""

from __future__ import annotations

import functools
import math
import types
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import fusionjit
import fusionjit.flatten_util
import fusionjit.nn
import fusionjit.nn.initializers
import fusionjit.numpy
import fusionjit.random
import fusionjit.scipy.special
import fusionjit.scipy.stats
import fusionjit.tree_util
from conftest import HAVE_JAX
from fusionjit.tree_util import tree_flatten, tree_leaves, tree_map
# NumPy's loops and the comparisons, as test_rl_programs has them.
from test_rl_programs import (_np_log_softmax, _np_logsumexp, _np_scan, _np_while_loop,
                              assert_trees_close, check_finite_differences, f32, f64)


@dataclass(frozen=True)
class Lib:
    np: Any
    lax: Any
    nn: Any
    random: Any
    jit: Any
    grad: Any
    value_and_grad: Any
    vmap: Any
    jvp: Any
    tree: Any  # tree_util
    stats: Any  # scipy.stats
    special: Any  # scipy.special
    ravel: Any  # flatten_util.ravel_pytree
    init: Any  # nn.initializers


def fj_lib() -> Lib:
    return Lib(fusionjit.numpy, fusionjit.lax, fusionjit.nn, fusionjit.random, fusionjit.jit,
               fusionjit.grad, fusionjit.value_and_grad, fusionjit.vmap, fusionjit.jvp,
               fusionjit.tree_util, fusionjit.scipy.stats, fusionjit.scipy.special,
               fusionjit.flatten_util.ravel_pytree, fusionjit.nn.initializers)


def jax_lib() -> Lib:
    import jax
    import jax.flatten_util
    import jax.numpy as jnp
    import jax.scipy.special
    import jax.scipy.stats
    return Lib(jnp, jax.lax, jax.nn, jax.random, jax.jit, jax.grad, jax.value_and_grad,
               jax.vmap, jax.jvp, jax.tree_util, jax.scipy.stats, jax.scipy.special,
               jax.flatten_util.ravel_pytree, jax.nn.initializers)


FJ = fj_lib()


# --- NumPy as a library with lax's loops, run eagerly in float64: the reference -------------


def _np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _np_gelu(x):  # jax.nn.gelu's default: the tanh approximation
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


NP = Lib(
    np,
    types.SimpleNamespace(scan=_np_scan, while_loop=_np_while_loop,
                          fori_loop=lambda lo, hi, body, init: functools.reduce(
                              lambda c, i: body(i, c), range(lo, hi), init),
                          stop_gradient=lambda x: x, rsqrt=lambda x: 1 / np.sqrt(x)),
    types.SimpleNamespace(relu=lambda x: np.maximum(x, 0), sigmoid=_np_sigmoid,
                          softplus=lambda x: np.logaddexp(0, x),
                          log_sigmoid=lambda x: -np.logaddexp(0, -x),
                          swish=lambda x: x * _np_sigmoid(x), gelu=_np_gelu,
                          logsumexp=_np_logsumexp, log_softmax=_np_log_softmax,
                          softmax=lambda x, axis=-1: np.exp(_np_log_softmax(x, axis)),
                          one_hot=lambda i, k: (np.asarray(i)[..., None] == np.arange(k)) * 1.0),
    random=None, jit=lambda f: f, grad=None, value_and_grad=None, vmap=None, jvp=None,
    tree=fusionjit.tree_util,
    stats=types.SimpleNamespace(norm=types.SimpleNamespace(
        logpdf=lambda x, loc=0.0, scale=1.0: -0.5 * ((x - loc) / scale) ** 2 - np.log(scale)
        - 0.5 * np.log(2 * np.pi))),
    special=types.SimpleNamespace(logsumexp=_np_logsumexp), ravel=None, init=None)


def np_with(**random_fns):
    """NP whose `random` namespace returns given draws (those fusionjit drew)."""
    import dataclasses
    return dataclasses.replace(NP, random=types.SimpleNamespace(**random_fns))


# --- helpers --------------------------------------------------------------------------------


def run_both(program, args, rtol=1e-5, atol=1e-6, wrap=None, **kw):
    """`program(L, *args, **kw)` (transformed by `wrap(L, f)`) jitted by fusionjit, and by JAX
    where it is installed: the results agree (dtypes included). Returns fusionjit's."""
    def build(L):
        f = functools.partial(program, L, **kw)
        return L.jit(wrap(L, f) if wrap else f)

    got = build(FJ)(*args)
    if HAVE_JAX:
        assert_trees_close(got, build(jax_lib())(*args), rtol, atol)
    return got


def mlp_params(rng, sizes, scale=1.0):
    p = {}
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        p[f"w{i}"] = f32(rng, a, b, scale=scale / math.sqrt(a))
        p[f"b{i}"] = f32(rng, b, scale=0.1)
    return p


def mlp(L, p, x):
    n = len(p) // 2
    for i in range(n):
        x = x @ p[f"w{i}"] + p[f"b{i}"]
        if i < n - 1:
            x = L.np.tanh(x)
    return x


def key(seed):
    return np.array([0, seed], np.uint32)  # PRNGKey(seed) as NumPy, for fusionjit and JAX


# --- 1. an LSTM language model over an embedding table --------------------------------------

def lstm_lm_loss(L, p, tokens):
    np, nn = L.np, L.nn
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    x = p["embed"][inputs]  # [B, T, E]: a gather
    B, H = x.shape[0], p["wh"].shape[0]

    def cell(carry, xt):
        h, c = carry
        gates = xt @ p["wx"] + h @ p["wh"] + p["b"]
        i, f, g, o = np.split(gates, 4, axis=-1)
        c = nn.sigmoid(f + 1.0) * c + nn.sigmoid(i) * np.tanh(g)
        h = nn.sigmoid(o) * np.tanh(c)
        return (h, c), h

    init = (np.zeros((B, H)), np.zeros((B, H)))
    _, hs = L.lax.scan(cell, init, np.swapaxes(x, 0, 1))  # [T, B, H]
    logits = np.einsum("tbh,hv->btv", hs, p["out"]) + p["out_b"]
    logp = nn.log_softmax(logits)
    nll = -np.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    return nll.mean()


def lstm_inputs(seed=0, B=4, T=10, V=20, E=8, H=16):
    rng = np.random.default_rng(seed)
    p = {"embed": f32(rng, V, E), "wx": f32(rng, E, 4 * H, scale=E ** -0.5),
         "wh": f32(rng, H, 4 * H, scale=H ** -0.5), "b": f32(rng, 4 * H, scale=0.1),
         "out": f32(rng, H, V, scale=H ** -0.5), "out_b": np.zeros(V, np.float32)}
    return p, rng.integers(0, V, (B, T + 1)).astype(np.int32)


# --- 2. a GPT block: multi-head causal attention, dropout, GELU, tied embeddings ------------

def layer_norm(L, x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = L.np.var(x, axis=-1, keepdims=True)
    return (x - mu) * L.lax.rsqrt(var + eps) * g + b


def gpt_loss(L, p, tokens, rng_key, drop, n_heads=4):
    np, nn = L.np, L.nn
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    B, T = inputs.shape
    V, D = p["wte"].shape
    dh = D // n_heads
    x = p["wte"][inputs] + p["wpe"][:T]
    h = layer_norm(L, x, p["ln1_g"], p["ln1_b"])
    q, k, v = np.split(h @ p["w_qkv"] + p["b_qkv"], 3, axis=-1)
    heads = lambda t: t.reshape(B, T, n_heads, dh).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = heads(q), heads(k), heads(v)
    att = q @ k.swapaxes(-1, -2) / math.sqrt(dh)  # [B, heads, T, T]
    mask = np.tril(np.ones((T, T), dtype=bool))
    att = nn.softmax(np.where(mask, att, np.finfo(att.dtype).min), axis=-1)
    k_att, k_mlp = L.random.split(rng_key)
    keep = L.random.bernoulli(k_att, 1 - drop, att.shape)
    att = np.where(keep, att / (1 - drop), 0.0)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    x = x + y @ p["w_o"]
    h = layer_norm(L, x, p["ln2_g"], p["ln2_b"])
    h = nn.gelu(h @ p["w_fc"] + p["b_fc"]) @ p["w_proj"]
    keep = L.random.bernoulli(k_mlp, 1 - drop, h.shape)
    x = x + np.where(keep, h / (1 - drop), 0.0)
    x = layer_norm(L, x, p["lnf_g"], p["lnf_b"])
    logits = x @ p["wte"].T  # tied output embedding
    return -(nn.log_softmax(logits) * nn.one_hot(targets, V)).sum(-1).mean()


def gpt_inputs(seed=1, B=2, T=8, V=16, D=16):
    rng = np.random.default_rng(seed)
    p = {"wte": f32(rng, V, D, scale=0.3), "wpe": f32(rng, T, D, scale=0.1),
         "w_qkv": f32(rng, D, 3 * D, scale=D ** -0.5), "b_qkv": f32(rng, 3 * D, scale=0.05),
         "w_o": f32(rng, D, D, scale=D ** -0.5), "w_fc": f32(rng, D, 4 * D, scale=D ** -0.5),
         "b_fc": f32(rng, 4 * D, scale=0.05), "w_proj": f32(rng, 4 * D, D, scale=0.25 / D ** 0.5)}
    for n in ("ln1", "ln2", "lnf"):
        p[n + "_g"] = 1 + f32(rng, D, scale=0.1)
        p[n + "_b"] = f32(rng, D, scale=0.1)
    return p, rng.integers(0, V, (B, T + 1)).astype(np.int32), key(5), np.float32(0.1)


# --- 3. a CNN trained by a hand-written Adam over a pytree, buffers donated ------------------

def cnn_forward(L, p, x):
    lax = L.lax
    dn = ("NHWC", "HWIO", "NHWC")
    h = lax.conv_general_dilated(x, p["c1"], (1, 1), "SAME", dimension_numbers=dn) + p["cb1"]
    h = L.nn.relu(h)
    h = lax.reduce_window(h, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = lax.conv_general_dilated(h, p["c2"], (2, 2), "VALID", dimension_numbers=dn) + p["cb2"]
    h = L.nn.relu(h).mean(axis=(1, 2))
    return h @ p["w"] + p["b"]


def cnn_loss(L, p, x, labels):
    logits = cnn_forward(L, p, x)
    loss = -(L.nn.one_hot(labels, logits.shape[-1]) * L.nn.log_softmax(logits)).sum(-1).mean()
    return loss, (L.np.argmax(logits, -1) == labels).mean()


def adam_step(L, params, opt_state, x, labels, lr=1e-2, b1=0.9, b2=0.999, eps=1e-8):
    (loss, acc), grads = L.value_and_grad(functools.partial(cnn_loss, L), has_aux=True)(
        params, x, labels)
    tm = L.tree.tree_map
    count, mu, nu = opt_state
    count = count + 1
    mu = tm(lambda m, g: b1 * m + (1 - b1) * g, mu, grads)
    nu = tm(lambda v, g: b2 * v + (1 - b2) * g ** 2, nu, grads)
    mu_hat = tm(lambda m: m / (1 - b1 ** count), mu)
    nu_hat = tm(lambda v: v / (1 - b2 ** count), nu)
    params = tm(lambda p, m, v: p - lr * m / (L.np.sqrt(v) + eps), params, mu_hat, nu_hat)
    return params, (count, mu, nu), loss, acc


def cnn_inputs(seed=2, B=8, HW=12, C=3, K=5):
    rng = np.random.default_rng(seed)
    p = {"c1": f32(rng, 3, 3, C, 8, scale=(9 * C) ** -0.5), "cb1": f32(rng, 8, scale=0.1),
         "c2": f32(rng, 3, 3, 8, 16, scale=(72) ** -0.5), "cb2": f32(rng, 16, scale=0.1),
         "w": f32(rng, 16, K, scale=0.25), "b": np.zeros(K, np.float32)}
    opt = (np.zeros((), np.int32), tree_map(np.zeros_like, p), tree_map(np.zeros_like, p))
    return p, opt, f32(rng, B, HW, HW, C), rng.integers(0, K, B).astype(np.int32)


# --- 4. a VAE's ELBO with the reparameterisation trick -----------------------------------------

def vae_loss(L, p, x, rng_key):
    np, nn = L.np, L.nn
    h = nn.relu(x @ p["e1"] + p["eb1"])
    mu, logvar = np.split(h @ p["e2"] + p["eb2"], 2, axis=-1)
    eps = L.random.normal(rng_key, mu.shape)
    z = mu + np.exp(0.5 * logvar) * eps
    logits = nn.relu(z @ p["d1"] + p["db1"]) @ p["d2"] + p["db2"]
    rec = -(x * nn.log_sigmoid(logits) + (1 - x) * nn.log_sigmoid(-logits)).sum(-1)
    kl = -0.5 * (1 + logvar - mu ** 2 - np.exp(logvar)).sum(-1)
    return (rec + kl).mean(), (rec.mean(), kl.mean(), eps)


def vae_step(L, p, x, rng_key, lr=1e-2):
    rng_key, sub = L.random.split(rng_key)
    (loss, aux), g = L.value_and_grad(functools.partial(vae_loss, L), has_aux=True)(p, x, sub)
    return L.tree.tree_map(lambda a, b: a - lr * b, p, g), rng_key, loss, aux


def vae_inputs(seed=3, B=16, D=20, H=16, Z=4):
    rng = np.random.default_rng(seed)
    # (biases not 0: an input row of zeros would sit every first-layer ReLU on its kink)
    p = {"e1": f32(rng, D, H, scale=D ** -0.5), "eb1": f32(rng, H, scale=0.1),
         "e2": f32(rng, H, 2 * Z, scale=H ** -0.5), "eb2": np.zeros(2 * Z, np.float32),
         "d1": f32(rng, Z, H, scale=Z ** -0.5), "db1": np.zeros(H, np.float32),
         "d2": f32(rng, H, D, scale=H ** -0.5), "db2": np.zeros(D, np.float32)}
    return p, (rng.random((B, D)) < 0.3).astype(np.float32), key(11)


# --- 5. a PPO epoch: a Gaussian policy over permuted minibatches in a scan ---------------------

def gaussian_ppo_loss(L, p, batch, clip=0.2):
    np = L.np
    obs, act, old_logp, adv, ret = batch
    h = np.tanh(obs @ p["w1"] + p["b1"])
    mean = h @ p["wmu"] + p["bmu"]
    logp = L.stats.norm.logpdf(act, mean, np.exp(p["log_std"])).sum(-1)
    value = (h @ p["wv"])[:, 0] + p["bv"]
    ratio = np.exp(logp - old_logp)
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg = -np.minimum(ratio * adv, np.clip(ratio, 1 - clip, 1 + clip) * adv).mean()
    vf = ((value - ret) ** 2).mean()
    ent = (0.5 + 0.5 * np.log(2 * np.pi) + p["log_std"]).sum()
    return pg + 0.5 * vf - 0.01 * ent, {"pg": pg, "vf": vf, "kl": (old_logp - logp).mean()}


def ppo_epoch(L, params, data, rng_key, n_minibatches=4, lr=3e-3):
    n = data[0].shape[0]
    perm = L.random.permutation(rng_key, n)
    shuffled = L.tree.tree_map(
        lambda x: x[perm].reshape((n_minibatches, -1) + x.shape[1:]), data)

    def step(params, mb):
        (loss, info), g = L.value_and_grad(functools.partial(gaussian_ppo_loss, L),
                                           has_aux=True)(params, mb)
        return L.tree.tree_map(lambda p, g: p - lr * g, params, g), (loss, info)

    params, (losses, infos) = L.lax.scan(step, params, shuffled)
    return params, losses, infos, perm


def ppo_inputs(seed=4, N=64, D=5, H=16, A=2):
    rng = np.random.default_rng(seed)
    p = {"w1": f32(rng, D, H, scale=D ** -0.5), "b1": np.zeros(H, np.float32),
         "wmu": f32(rng, H, A, scale=0.1), "bmu": np.zeros(A, np.float32),
         "log_std": np.full(A, -0.5, np.float32), "wv": f32(rng, H, 1, scale=0.3),
         "bv": np.zeros((), np.float32)}
    obs = f32(rng, N, D)
    mean = np.tanh(obs @ p["w1"]) @ p["wmu"]
    act = (mean + np.exp(-0.5) * rng.standard_normal((N, A))).astype(np.float32)
    logp = (-0.5 * ((act - mean) / np.exp(-0.5)) ** 2 + 0.5 - 0.5 * np.log(2 * np.pi)).sum(-1)
    old_logp = (logp + rng.normal(0, 0.2, N)).astype(np.float32)
    return p, (obs, act, old_logp, f32(rng, N), f32(rng, N)), key(21)


# --- 6. DP-SGD: per-example gradients by vmap(grad), clipped, noised --------------------------

def bce_one(L, p, x, y):
    logit = mlp(L, p, x)[0]  # one example: x [D]
    return L.np.maximum(logit, 0) - logit * y + L.np.log1p(L.np.exp(-L.np.abs(logit)))


def dp_sgd_step(L, p, x, y, rng_key, clip=1.0, sigma=0.5, lr=0.1):
    np, tree = L.np, L.tree
    grads = L.vmap(L.grad(functools.partial(bce_one, L)), in_axes=(None, 0, 0))(p, x, y)
    sq = [np.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in tree.tree_leaves(grads)]
    norms = np.sqrt(sum(sq))
    factor = np.minimum(1.0, clip / (norms + 1e-6))
    summed = tree.tree_map(
        lambda g: (g * factor.reshape((-1,) + (1,) * (g.ndim - 1))).sum(0), grads)
    leaves, treedef = tree.tree_flatten(summed)
    keys = L.random.split(rng_key, len(leaves))
    noisy = [(g + sigma * clip * L.random.normal(keys[i], g.shape)) / x.shape[0]
             for i, g in enumerate(leaves)]
    noisy = tree.tree_unflatten(treedef, noisy)
    return tree.tree_map(lambda a, g: a - lr * g, p, noisy), norms, grads


def dp_inputs(seed=5, B=32, D=6, H=8):
    rng = np.random.default_rng(seed)
    return (mlp_params(rng, (D, H, 1), scale=2.0), f32(rng, B, D),
            (rng.random(B) < 0.5).astype(np.float32), key(31))


# --- 7. vmapped environments that reset by lax.cond, a categorical policy, REINFORCE ----------

FORCES = np.array([[1, 0], [-1, 0], [0, 1], [0, -1]], np.float32) * 0.3


def env_reset(L, rng_key):
    pos = L.random.uniform(rng_key, (2,), minval=-1.5, maxval=1.5)
    return {"pos": pos, "vel": L.np.zeros(2), "t": L.np.zeros((), L.np.int32)}


def env_step(L, state, action, rng_key, horizon=12):
    np = L.np
    vel = 0.8 * state["vel"] + np.asarray(FORCES)[action]
    pos = np.clip(state["pos"] + 0.5 * vel, -2.0, 2.0)
    t = state["t"] + 1
    dist = np.sqrt(np.sum(pos ** 2))
    done = (dist < 0.3) | (t >= horizon)
    reward = np.where(dist < 0.3, 10.0, -dist)
    new = {"pos": pos, "vel": vel, "t": t}
    new = L.lax.cond(done, lambda: env_reset(L, rng_key), lambda: new)
    return new, reward, done


def rollout_one(L, w, rng_key, T):
    np = L.np
    rng_key, k0 = L.random.split(rng_key)

    def step(carry, _):
        state, k = carry
        k, k_act, k_reset = L.random.split(k, 3)
        obs = np.concatenate([state["pos"], state["vel"]])
        logits = mlp(L, w, obs)
        a = L.random.categorical(k_act, logits)
        logp = L.nn.log_softmax(logits)[a]
        state, r, d = env_step(L, state, a, k_reset)
        return (state, k), (obs, a, r, d, logp)

    return L.lax.scan(step, (env_reset(L, k0), rng_key), None, length=T)[1]


def discounted(L, rewards, dones, gamma=0.9):
    def step(ret, x):
        r, d = x
        ret = r + gamma * ret * (1.0 - d)
        return ret, ret

    return L.lax.scan(step, L.np.zeros(rewards.shape[1:]), (rewards, dones), reverse=True)[1]


def reinforce(L, w, rng_key, n_envs=8, T=24):
    def loss(w):
        keys = L.random.split(rng_key, n_envs)
        obs, a, r, d, logp = L.vmap(functools.partial(rollout_one, L, T=T), in_axes=(None, 0))(
            w, keys)
        ret = discounted(L, r.T, d.T.astype(r.dtype)).T  # [envs, T]
        return -(logp * L.lax.stop_gradient(ret)).mean(), (obs, a, r, d, ret)

    return L.value_and_grad(loss, has_aux=True)(w)


# --- 8. C51: the categorical projection of a distributional target by scatter-add --------------

def c51_loss(L, online, target, obs, actions, rewards, next_obs, dones, n_actions=3,
             v_min=-4.0, v_max=4.0, n_atoms=11, gamma=0.9):
    np, nn = L.np, L.nn
    B = obs.shape[0]
    support = np.linspace(v_min, v_max, n_atoms)
    dz = (v_max - v_min) / (n_atoms - 1)
    dist_logits = lambda p, o: mlp(L, p, o).reshape(o.shape[0], n_actions, n_atoms)  # noqa
    next_probs = nn.softmax(dist_logits(target, next_obs), axis=-1)
    a_star = np.argmax((next_probs * support).sum(-1), axis=-1)
    p_next = next_probs[np.arange(B), a_star]  # [B, atoms]
    tz = np.clip(rewards[:, None] + gamma * (1.0 - dones[:, None]) * support, v_min, v_max)
    b = (tz - v_min) / dz
    lo, hi = np.floor(b), np.ceil(b)
    w_lo = np.where(hi == lo, 1.0, hi - b)
    w_hi = b - lo

    def project(pn, lo, hi, w_lo, w_hi):
        m = np.zeros(n_atoms)
        m = m.at[lo.astype(np.int32)].add(pn * w_lo)
        return m.at[hi.astype(np.int32)].add(pn * w_hi)

    m = L.lax.stop_gradient(L.vmap(project)(p_next, lo, hi, w_lo, w_hi))
    logits = dist_logits(online, obs)[np.arange(B), actions]
    return -(m * nn.log_softmax(logits)).sum(-1).mean(), (m, a_star)


def c51_inputs(seed=6, B=24, D=4, A=3, K=11):
    rng = np.random.default_rng(seed)
    return (mlp_params(rng, (D, 16, A * K)), mlp_params(rng, (D, 16, A * K)), f32(rng, B, D),
            rng.integers(0, A, B).astype(np.int32), f32(rng, B, scale=3),
            f32(rng, B, D), (rng.random(B) < 0.25).astype(np.float32))


# --- 9. IMPALA's V-trace ---------------------------------------------------------------------

def vtrace_loss(L, p, obs, actions, behaviour_logp, rewards, discounts, bootstrap_obs,
                clip_rho=1.0, clip_c=1.0):
    np, sg = L.np, L.lax.stop_gradient
    h = np.tanh(obs @ p["w1"] + p["b1"])  # obs [T, B, D]
    logits, values = h @ p["wpi"], (h @ p["wv"])[..., 0]
    boot = (np.tanh(bootstrap_obs @ p["w1"] + p["b1"]) @ p["wv"])[..., 0]
    logp_all = L.nn.log_softmax(logits)
    logp = np.take_along_axis(logp_all, actions[..., None], axis=-1)[..., 0]
    rhos = np.exp(sg(logp) - behaviour_logp)
    v, boot = sg(values), sg(boot)
    clipped_rhos, cs = np.minimum(clip_rho, rhos), np.minimum(clip_c, rhos)
    v_tp1 = np.concatenate([v[1:], boot[None]], axis=0)
    deltas = clipped_rhos * (rewards + discounts * v_tp1 - v)

    def step(acc, x):
        delta, disc, c = x
        acc = delta + disc * c * acc
        return acc, acc

    _, vs_minus_v = L.lax.scan(step, np.zeros_like(boot), (deltas, discounts, cs), reverse=True)
    vs = vs_minus_v + v
    pg_adv = clipped_rhos * (rewards + discounts * np.concatenate([vs[1:], boot[None]]) - v)
    pg_loss = -(logp * pg_adv).mean()
    v_loss = 0.5 * ((vs - values) ** 2).mean()
    entropy = -(np.exp(logp_all) * logp_all).sum(-1).mean()
    return pg_loss + 0.5 * v_loss - 0.01 * entropy, (vs, pg_adv)


def vtrace_inputs(seed=7, T=12, B=4, D=5, H=16, A=3):
    rng = np.random.default_rng(seed)
    p = {"w1": f32(rng, D, H, scale=D ** -0.5), "b1": f32(rng, H, scale=0.1),
         "wpi": f32(rng, H, A, scale=0.5), "wv": f32(rng, H, 1, scale=0.5)}
    actions = rng.integers(0, A, (T, B)).astype(np.int32)
    behaviour_logp = np.log(rng.uniform(0.1, 0.6, (T, B))).astype(np.float32)
    discounts = (0.95 * (rng.random((T, B)) > 0.1)).astype(np.float32)
    return p, (f32(rng, T, B, D), actions, behaviour_logp, f32(rng, T, B), discounts,
               f32(rng, B, D))


# --- 10. TRPO: conjugate gradient on Fisher-vector products (jvp of grad) -----------------------

def trpo_step(L, p, obs, actions, adv, iters=10, damping=0.1, max_kl=0.01):
    np, sg = L.np, L.lax.stop_gradient
    flat, unravel = L.ravel(p)
    logp_fn = lambda fp: L.nn.log_softmax(mlp(L, unravel(fp), obs))  # noqa: E731
    old = sg(logp_fn(flat))

    def kl(fp):
        return (np.exp(old) * (old - logp_fn(fp))).sum(-1).mean()

    def surrogate(fp):
        lp = np.take_along_axis(logp_fn(fp), actions[:, None], axis=1)[:, 0]
        return (np.exp(lp - sg(lp)) * adv).mean()

    g = L.grad(surrogate)(flat)

    def fvp(v):
        return L.jvp(L.grad(kl), (flat,), (v,))[1] + damping * v

    def cg(i, c):
        x, r, d, rr = c
        Ad = fvp(d)
        alpha = rr / (d @ Ad)
        x, r = x + alpha * d, r - alpha * Ad
        rr_new = r @ r
        return x, r, r + rr_new / rr * d, rr_new

    x, _, _, rr = L.lax.fori_loop(0, iters, cg, (np.zeros_like(g), g, g, g @ g))
    step = np.sqrt(2 * max_kl / (x @ fvp(x))) * x
    return unravel(flat + step), x, g, rr


def trpo_inputs(seed=8, B=32, D=3, H=4, A=3):
    rng = np.random.default_rng(seed)
    return (mlp_params(rng, (D, H, A), scale=1.5), f32(rng, B, D),
            rng.integers(0, A, B).astype(np.int32), f32(rng, B))


# --- 11. MAML: a meta-gradient through an inner SGD step, vmapped over tasks --------------------

def mse(L, p, x, y):
    return ((mlp(L, p, x) - y) ** 2).mean()


def maml_loss(L, p, x_tr, y_tr, x_te, y_te, inner_lr=0.3):
    def task(xtr, ytr, xte, yte):
        g = L.grad(functools.partial(mse, L))(p, xtr, ytr)
        adapted = L.tree.tree_map(lambda a, b: a - inner_lr * b, p, g)
        return mse(L, adapted, xte, yte)

    return L.vmap(task)(x_tr, y_tr, x_te, y_te).mean()


def maml_inputs(seed=9, tasks=5, K=8, H=12):
    rng = np.random.default_rng(seed)
    amp, phase = rng.uniform(0.5, 2, (tasks, 1, 1)), rng.uniform(0, np.pi, (tasks, 1, 1))
    xs = rng.uniform(-3, 3, (2, tasks, K, 1))
    ys = amp * np.sin(xs + phase)
    return (mlp_params(rng, (1, H, 1)), *(a.astype(np.float32) for a in
                                          (xs[0], ys[0], xs[1], ys[1])))


# --- 12. a straight-through Gumbel-softmax -----------------------------------------------------

def gumbel_st_loss(L, w, codebook, x, target, rng_key, tau=0.5):
    np, nn = L.np, L.nn
    logits = x @ w
    g = L.random.gumbel(rng_key, logits.shape)
    y = nn.softmax((logits + g) / tau, axis=-1)
    hard = nn.one_hot(np.argmax(y, axis=-1), logits.shape[-1])
    y_st = hard - L.lax.stop_gradient(y) + y
    return ((y_st @ codebook - target) ** 2).mean(), (hard, g)


def gumbel_inputs(seed=10, B=16, D=4, K=6, E=3):
    rng = np.random.default_rng(seed)
    return f32(rng, D, K), f32(rng, K, E), f32(rng, B, D), f32(rng, B, E), key(41)


# --- 13. a mixture density network --------------------------------------------------------------

def mdn_nll(L, p, x, y):
    np, nn = L.np, L.nn
    logit_pi, mu, s = np.split(mlp(L, p, x), 3, axis=-1)
    sigma = nn.softplus(s) + 1e-3
    comp = L.stats.norm.logpdf(y[:, None], mu, sigma)
    return -L.special.logsumexp(nn.log_softmax(logit_pi) + comp, axis=-1).mean()


def mdn_inputs(seed=11, B=64, K=5, H=16):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (B, 1)).astype(np.float32)
    y = (np.sin(3 * x[:, 0]) + 0.3 * rng.standard_normal(B) * (x[:, 0] > 0)).astype(np.float32)
    return mlp_params(rng, (1, H, 3 * K)), x, y


# --- 14. batch norm with running statistics, initialised by nn.initializers ----------------------

def bn_init(L, rng_key, D=6, H=16, K=4):
    k1, k2 = L.random.split(rng_key)
    params = {"w1": L.init.glorot_uniform()(k1, (D, H)), "gamma": L.np.ones(H),
              "beta": L.np.zeros(H), "w2": L.init.he_normal()(k2, (H, K)),
              "b2": L.np.zeros(K)}
    return params, {"mean": L.np.zeros(H), "var": L.np.ones(H)}


def bn_loss(L, p, state, x, labels, momentum=0.9):
    np, nn = L.np, L.nn
    h = x @ p["w1"]
    mean, var = h.mean(0), h.var(0)
    h = nn.swish((h - mean) * L.lax.rsqrt(var + 1e-5) * p["gamma"] + p["beta"])
    logits = h @ p["w2"] + p["b2"]
    nll = nn.logsumexp(logits, axis=-1) - logits[np.arange(x.shape[0]), labels]
    n = x.shape[0]
    sg = L.lax.stop_gradient
    new_state = {"mean": momentum * state["mean"] + (1 - momentum) * sg(mean),
                 "var": momentum * state["var"] + (1 - momentum) * sg(var) * n / (n - 1)}
    return nll.mean(), new_state


def bn_train(L, rng_key, x, labels, steps=5, lr=0.1, beta=0.9):
    params, state = bn_init(L, rng_key, x.shape[1])
    velocity = L.tree.tree_map(L.np.zeros_like, params)

    def step(carry, _):
        params, state, velocity = carry
        (loss, state), g = L.value_and_grad(functools.partial(bn_loss, L), has_aux=True)(
            params, state, x, labels)
        velocity = L.tree.tree_map(lambda v, g: beta * v + g, velocity, g)
        params = L.tree.tree_map(lambda p, v: p - lr * v, params, velocity)
        return (params, state, velocity), (loss, state)

    (params, state, _), (losses, states) = L.lax.scan(step, (params, state, velocity), None,
                                                      length=steps)
    return params, state, losses, states


def bn_inputs(seed=12, B=32, D=6, K=4):
    rng = np.random.default_rng(seed)
    return key(51), f32(rng, B, D, scale=3) + 1, rng.integers(0, K, B).astype(np.int32)


# --- 15. value iteration in a while_loop on a random tabular MDP ---------------------------------

def value_iteration(L, P, R, gamma=0.9, tol=1e-4):
    np = L.np

    def cond(c):
        return (c[1] > tol) & (c[2] < 500)

    def body(c):
        V, _, i = c
        V_new = (R + gamma * np.einsum("sat,t->sa", P, V)).max(-1)
        return V_new, np.abs(V_new - V).max(), i + 1

    init = (np.zeros(R.shape[0]), np.asarray(np.inf, np.float32), np.asarray(0, np.int32))
    V, delta, iters = L.lax.while_loop(cond, body, init)
    Q = R + gamma * np.einsum("sat,t->sa", P, V)
    return V, np.argmax(Q, -1), iters


def mdp_inputs(seed=13, S=12, A=3):
    rng = np.random.default_rng(seed)
    P = rng.random((S, A, S)) ** 4
    P /= P.sum(-1, keepdims=True)
    return P.astype(np.float32), f32(rng, S, A)


# --- 16. SAC's critic (twin Q, clipped double-Q target) and temperature updates -------------

def sac_policy(L, p, obs, rng_key):
    np = L.np
    h = L.nn.relu(obs @ p["w1"] + p["b1"])
    mu, log_std = np.split(h @ p["w2"] + p["b2"], 2, axis=-1)
    log_std = np.clip(log_std, -5.0, 2.0)
    u = mu + np.exp(log_std) * L.random.normal(rng_key, mu.shape)
    # log(1 - tanh(u)^2) in its stable form, as SAC implementations write it
    logp = (L.stats.norm.logpdf(u, mu, np.exp(log_std))
            - 2.0 * (np.log(2.0) - u - L.nn.softplus(-2.0 * u))).sum(-1)
    return np.tanh(u), logp


def twin_q(L, p, obs, act):
    x = L.np.concatenate([obs, act], axis=-1)
    return [(L.nn.relu(x @ p[f"w1_{i}"] + p[f"b1_{i}"]) @ p[f"w2_{i}"])[:, 0] for i in (0, 1)]


def sac_update(L, q_params, q_target, pi_params, log_alpha, batch, rng_key, gamma=0.99,
               tau=0.005, lr=3e-3, target_entropy=-2.0):
    np, sg = L.np, L.lax.stop_gradient
    obs, act, rew, next_obs, done = batch
    k_next, k_now = L.random.split(rng_key)
    next_act, next_logp = sac_policy(L, pi_params, next_obs, k_next)
    q1_t, q2_t = twin_q(L, q_target, next_obs, next_act)
    y = sg(rew + gamma * (1.0 - done) * (np.minimum(q1_t, q2_t) - np.exp(log_alpha) * next_logp))

    def critic_loss(qp):
        q1, q2 = twin_q(L, qp, obs, act)
        return ((q1 - y) ** 2).mean() + ((q2 - y) ** 2).mean()

    c_loss, q_grads = L.value_and_grad(critic_loss)(q_params)
    q_params = L.tree.tree_map(lambda p, g: p - lr * g, q_params, q_grads)
    _, logp = sac_policy(L, pi_params, obs, k_now)
    a_loss, a_grad = L.value_and_grad(
        lambda la: -(la * sg(logp + target_entropy)).mean())(log_alpha)
    q_target = L.tree.tree_map(lambda t, o: (1 - tau) * t + tau * o, q_target, q_params)
    return q_params, q_target, log_alpha - lr * a_grad, c_loss, q_grads, a_loss, logp, y


def sac_update_inputs(seed=14, B=32, D=5, A=2, H=16):
    rng = np.random.default_rng(seed)
    q = {}
    for i in (0, 1):
        q.update({f"w1_{i}": f32(rng, D + A, H, scale=0.4), f"b1_{i}": f32(rng, H, scale=0.1),
                  f"w2_{i}": f32(rng, H, 1, scale=0.4)})
    pi = {"w1": f32(rng, D, H, scale=0.4), "b1": f32(rng, H, scale=0.1),
          "w2": f32(rng, H, 2 * A, scale=0.4), "b2": f32(rng, 2 * A, scale=0.1)}
    batch = (f32(rng, B, D), np.tanh(f32(rng, B, A)), f32(rng, B), f32(rng, B, D),
             (rng.random(B) < 0.2).astype(np.float32))
    target = tree_map(lambda a: a + f32(rng, *a.shape, scale=0.05), q)
    return q, target, pi, np.float32(-0.5), batch, key(61)


# --- 17. a convolutional decoder by conv_transpose -----------------------------------------------

def deconv_loss(L, w1, w2, z, target):
    dn = ("NHWC", "HWIO", "NHWC")
    h = L.nn.relu(L.lax.conv_transpose(z, w1, (2, 2), "SAME", dimension_numbers=dn))
    h = L.lax.conv_transpose(h, w2, (2, 2), "SAME", dimension_numbers=dn)
    return ((L.nn.sigmoid(h) - target) ** 2).mean()


# === the tests ===================================================================================

VG = lambda L, f: L.value_and_grad(f)  # noqa: E731
VG_AUX = lambda L, f: L.value_and_grad(f, has_aux=True)  # noqa: E731


def test_lstm_language_model_loss_and_grad():
    p, tokens = lstm_inputs()
    # a scan of matrix products and its reverse scan: 1e-4 relative
    loss, g = run_both(lstm_lm_loss, (p, tokens), wrap=VG)
    np.testing.assert_allclose(float(loss), lstm_lm_loss(NP, f64(p), tokens), rtol=1e-5)
    check_finite_differences(lambda q: lstm_lm_loss(NP, q, tokens), p, g)
    # rows of the embedding no input token reads get no gradient (the gather's transpose)
    unused = np.setdiff1d(np.arange(20), tokens[:, :-1])
    assert unused.size and np.all(np.asarray(g["embed"])[unused] == 0)


def test_gpt_block_with_dropout_and_tied_embeddings():
    p, tokens, k, drop = gpt_inputs()
    loss, g = run_both(gpt_loss, (p, tokens, k, drop), wrap=VG)
    # without dropout (keep probability 1), against NumPy in float64 and its finite
    # differences
    no_drop = np_with(split=lambda key: (None, None),
                      bernoulli=lambda key, p, shape: np.ones(shape, bool))
    loss0, g0 = FJ.jit(FJ.value_and_grad(functools.partial(gpt_loss, FJ)))(
        p, tokens, k, np.float32(0.0))
    np.testing.assert_allclose(float(loss0), gpt_loss(no_drop, f64(p), tokens, None, 0.0),
                               rtol=1e-5)
    check_finite_differences(lambda q: gpt_loss(no_drop, q, tokens, None, 0.0), p, g0)
    assert abs(float(loss) - float(loss0)) > 1e-4  # the dropout masks drop something
    assert set(g) == set(p) and all(np.isfinite(np.asarray(v)).all() for v in g.values())


def _np_conv(x, w, stride, pad):
    """NHWC x HWIO cross-correlation in NumPy: shifted slices times the kernel's taps."""
    x = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    kh, kw = w.shape[:2]
    ho, wo = (x.shape[1] - kh) // stride + 1, (x.shape[2] - kw) // stride + 1
    return sum(np.einsum("nhwc,co->nhwo", x[:, i:i + stride * (ho - 1) + 1:stride,
                                            j:j + stride * (wo - 1) + 1:stride], w[i, j])
               for i in range(kh) for j in range(kw))


def _np_cnn_forward(p, x):
    h = np.maximum(_np_conv(x, p["c1"], 1, 1) + p["cb1"], 0)
    n, hh, ww, c = h.shape
    h = h.reshape(n, hh // 2, 2, ww // 2, 2, c).max(axis=(2, 4))
    h = np.maximum(_np_conv(h, p["c2"], 2, 0) + p["cb2"], 0).mean(axis=(1, 2))
    return h @ p["w"] + p["b"]


@pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")
def test_cnn_trained_by_adam_over_a_pytree_with_donated_buffers():
    p, opt, x, labels = cnn_inputs()
    logits = FJ.jit(functools.partial(cnn_forward, FJ))(p, x)
    np.testing.assert_allclose(np.asarray(logits), _np_cnn_forward(f64(p), f64(x)), rtol=1e-5,
                               atol=1e-6)
    runs = []
    for L, asarray in [(FJ, fusionjit.numpy.asarray)] + (
            [(jax_lib(), __import__("jax").numpy.asarray)] if HAVE_JAX else []):
        step = L.jit(functools.partial(adam_step, L), donate_argnums=(0, 1))
        params, state = tree_map(asarray, p), tree_map(asarray, opt)
        losses = []
        for i in range(4):
            old = tree_leaves((params, state))
            params, state, loss, acc = step(params, state, x, labels)
            losses.append(float(loss))
            if L is FJ:  # the optimiser step writes each parameter over its old value
                assert all(a.is_deleted() for a in old)
                if i == 0:
                    moved = np.abs(np.asarray(params["w"]) - p["w"])
        runs.append((params, state, np.array(losses)))
    params, state, losses = runs[0]
    assert int(state[0]) == 4 and losses[-1] < losses[0]
    # Adam's first step moves each weight by lr (m / sqrt(v) = g / |g|), or not at all where
    # the gradient is 0 (a channel the ReLU keeps at 0 for the whole batch)
    assert (moved > 0).mean() > 0.5
    np.testing.assert_allclose(moved[moved > 0], 1e-2, rtol=1e-3)
    if HAVE_JAX:
        assert_trees_close(runs[0], runs[1], 1e-5, 1e-6)


def test_vae_elbo_with_the_reparameterisation_trick():
    p, x, k = vae_inputs()
    new_p, new_k, loss, (rec, kl, eps) = run_both(vae_step, (p, x, k))
    eps = np.asarray(eps)
    assert eps.shape == (16, 4) and eps.dtype == np.float32
    k_next, k_eps = fusionjit.random.split(k)
    np.testing.assert_array_equal(np.asarray(new_k), np.asarray(k_next))
    # the reference draws the same noise: the loss and gradient at it, in NumPy float64
    L = np_with(normal=lambda key, shape: f64(eps))
    want_loss, (want_rec, want_kl, _) = vae_loss(L, f64(p), f64(x), None)
    np.testing.assert_allclose([float(loss), float(rec), float(kl)],
                               [want_loss, want_rec, want_kl], rtol=1e-5)
    assert float(kl) > 0
    g = FJ.jit(FJ.grad(lambda p: vae_loss(FJ, p, x, k_eps)[0]))(p)
    assert_trees_close(new_p, tree_map(lambda a, b: a - 1e-2 * b, p, g), 1e-6, 1e-7,
                       check_dtype=False)
    check_finite_differences(lambda q: vae_loss(L, q, f64(x), None)[0], p, g)


def test_ppo_epoch_over_permuted_minibatches_of_a_gaussian_policy():
    p, data, k = ppo_inputs()
    new_p, losses, infos, perm = run_both(ppo_epoch, (p, data, k))
    perm = np.asarray(perm)
    assert perm.dtype == np.int32 and sorted(perm.tolist()) == list(range(64))
    assert (perm != np.arange(64)).any()
    # the scan's steps, one jitted value_and_grad at a time over the same minibatches
    vg = FJ.jit(FJ.value_and_grad(functools.partial(gaussian_ppo_loss, FJ), has_aux=True))
    q = p
    for i in range(4):
        mb = tree_map(lambda a: a[perm[16 * i:16 * (i + 1)]], data)
        (loss, info), g = vg(q, mb)
        np.testing.assert_allclose(float(loss), float(np.asarray(losses)[i]), rtol=1e-5)
        if i == 0:  # at the initial parameters: NumPy float64 and its finite differences
            want, want_info = gaussian_ppo_loss(NP, f64(p), f64(mb))
            np.testing.assert_allclose(float(loss), want, rtol=1e-5)
            np.testing.assert_allclose(float(info["kl"]), want_info["kl"], rtol=1e-4,
                                       atol=1e-6)
            check_finite_differences(lambda r: gaussian_ppo_loss(NP, r, f64(mb))[0], p, g)
        q = tree_map(lambda a, b: a - 3e-3 * b, q, g)
    assert_trees_close(new_p, q, 1e-5, 1e-6)


def test_dp_sgd_per_example_gradients_clipped_and_noised():
    p, x, y, k = dp_inputs()
    new_p, norms, grads = run_both(dp_sgd_step, (p, x, y, k))
    norms = np.asarray(norms)
    # per-example gradients: finite differences of single examples' losses; their sum is
    # the gradient of the summed loss; their norms are the tree's global norms
    for i in (0, 7, 31):
        check_finite_differences(lambda q: bce_one(NP, q, f64(x[i]), f64(y[i])), p,
                                 tree_map(lambda g: np.asarray(g)[i], grads))
    total = FJ.jit(FJ.grad(lambda p: FJ.vmap(functools.partial(bce_one, FJ),
                                             in_axes=(None, 0, 0))(p, x, y).sum()))(p)
    assert_trees_close(tree_map(lambda g: g.sum(0), grads), total, 1e-5, 1e-6)
    want_norms = np.sqrt(sum((np.asarray(g, np.float64).reshape(32, -1) ** 2).sum(1)
                             for g in tree_leaves(grads)))
    np.testing.assert_allclose(norms, want_norms, rtol=1e-5)
    assert (norms > 1).any() and (norms < 1).any()  # some examples clipped, some not
    # without noise the step is the mean of the clipped gradients
    no_noise = FJ.jit(functools.partial(dp_sgd_step, FJ, sigma=0.0))(p, x, y, k)[0]
    factor = np.minimum(1.0, 1.0 / (want_norms + 1e-6))
    want = tree_map(lambda a, g: a - 0.1 * np.tensordot(factor, np.asarray(g, np.float64), 1)
                    / 32, f64(p), grads)
    assert_trees_close(no_noise, want, 1e-5, 1e-6, check_dtype=False)
    assert not all(np.allclose(a, b) for a, b in zip(tree_leaves(no_noise), tree_leaves(new_p)))


def test_vmapped_environments_reset_by_cond_and_a_reinforce_gradient():
    w = mlp_params(np.random.default_rng(15), (4, 16, 4))
    (loss, (obs, a, r, d, ret)), g = run_both(reinforce, (w, key(3)))
    obs, a, r, d, ret = (np.asarray(v) for v in (obs, a, r, d, ret))
    n_envs, T = a.shape
    assert obs.shape == (n_envs, T, 4) and a.dtype == np.int32 and d.dtype == np.bool_
    assert d.any() and (~d).any() and ((a >= 0) & (a < 4)).all()
    # replay the dynamics in NumPy: the reward, the done flag, and the next observation
    # (the next state, or a reset: zero velocity, a position in [-1.5, 1.5))
    for e in range(n_envs):
        t_in_episode = 0
        for t in range(T - 1):
            vel = 0.8 * obs[e, t, 2:] + FORCES[a[e, t]]
            pos = np.clip(obs[e, t, :2] + 0.5 * vel, -2.0, 2.0)
            dist = np.sqrt((pos ** 2).sum())
            t_in_episode += 1
            if abs(dist - 0.3) > 1e-5:
                assert d[e, t] == ((dist < 0.3) or t_in_episode >= 12), (e, t)
                np.testing.assert_allclose(r[e, t], 10.0 if dist < 0.3 else -dist, rtol=1e-5)
            if d[e, t]:
                t_in_episode = 0
                assert (obs[e, t + 1, 2:] == 0).all() and (np.abs(obs[e, t + 1, :2]) <= 1.5).all()
            else:
                np.testing.assert_allclose(obs[e, t + 1], np.concatenate([pos, vel]),
                                           rtol=1e-5, atol=1e-6)
    want_ret = _np_scan(lambda c, x: (x[0] + 0.9 * c * (1 - x[1]),) * 2, np.zeros(n_envs),
                        (r.T.astype(np.float64), d.T.astype(np.float64)), reverse=True)[1].T
    np.testing.assert_allclose(ret, want_ret, rtol=1e-5, atol=1e-5)
    # the REINFORCE gradient is that of the log-probabilities of the actions taken
    logp = lambda L, w: np.take_along_axis(  # noqa: E731
        L.nn.log_softmax(mlp(L, w, obs)), a[..., None], -1)[..., 0]
    np.testing.assert_allclose(float(loss), -(logp(NP, f64(w)) * ret).mean(), rtol=1e-5)
    check_finite_differences(lambda q: -(logp(NP, q) * ret).mean(), w, g)


def _np_c51(online, target, obs, actions, rewards, next_obs, dones, A=3, K=11, v_min=-4.0,
            v_max=4.0, gamma=0.9):
    B = obs.shape[0]
    support = np.linspace(v_min, v_max, K)
    next_probs = NP.nn.softmax(mlp(NP, target, next_obs).reshape(B, A, K))
    p_next = next_probs[np.arange(B), (next_probs * support).sum(-1).argmax(-1)]
    tz = np.clip(rewards[:, None] + gamma * (1 - dones[:, None]) * support, v_min, v_max)
    b = (tz - v_min) / ((v_max - v_min) / (K - 1))
    m = np.zeros((B, K))
    for i in range(B):
        for j in range(K):
            lo, hi = int(np.floor(b[i, j])), int(np.ceil(b[i, j]))
            if lo == hi:
                m[i, lo] += p_next[i, j]
            else:
                m[i, lo] += p_next[i, j] * (hi - b[i, j])
                m[i, hi] += p_next[i, j] * (b[i, j] - lo)
    logits = mlp(NP, online, obs).reshape(B, A, K)[np.arange(B), actions]
    return -(m * NP.nn.log_softmax(logits)).sum(-1).mean(), m, p_next, tz


def test_c51_categorical_projection_by_scatter_add():
    args = c51_inputs()
    (loss, (m, a_star)), g = run_both(c51_loss, args, wrap=VG_AUX)
    want_loss, want_m, p_next, tz = _np_c51(*f64(args))
    np.testing.assert_allclose(np.asarray(m), want_m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(loss), want_loss, rtol=1e-5)
    m = np.asarray(m, np.float64)
    np.testing.assert_allclose(m.sum(-1), 1.0, rtol=1e-5)  # a distribution
    # the projection keeps the mean of the (clipped) shifted atoms
    np.testing.assert_allclose((m * np.linspace(-4, 4, 11)).sum(-1), (p_next * tz).sum(-1),
                               rtol=1e-4, atol=1e-5)
    assert (tz == 4.0).any() or (tz == -4.0).any()  # some atoms clipped at the edges
    check_finite_differences(lambda q: _np_c51(q, *f64(args[1:]))[0], args[0], g)


def test_vtrace_targets_and_an_impala_loss():
    p, batch = vtrace_inputs()
    (loss, (vs, pg_adv)), g = run_both(vtrace_loss, (p, *batch), wrap=VG_AUX)
    want_loss, (want_vs, want_adv) = vtrace_loss(NP, f64(p), *f64(batch))
    np.testing.assert_allclose(float(loss), want_loss, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(vs), want_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(pg_adv), want_adv, rtol=1e-5, atol=1e-5)
    # with the targets held (stop_gradient), the value head's gradient is that of
    # 0.25 * mean((vs - v)^2): -0.5 / N * h^T (vs - v)
    obs = f64(batch[0])
    h = np.tanh(obs @ f64(p["w1"]) + f64(p["b1"]))
    v = (h @ f64(p["wv"]))[..., 0]
    want_gwv = -0.5 / v.size * np.einsum("tbh,tb->h", h, want_vs - v)[:, None]
    np.testing.assert_allclose(np.asarray(g["wv"]), want_gwv, rtol=1e-4, atol=1e-6)


def _np_policy_jacobians(p, obs, eps=1e-6):
    """d logits_b / d theta (float64 central differences) over the raveled parameters."""
    flat, unravel = fusionjit.flatten_util.ravel_pytree(f64(p))
    flat = np.asarray(flat, np.float64)
    leaves, treedef = tree_flatten(f64(p))
    sizes = np.cumsum([0] + [x.size for x in leaves])

    def logits(v):
        tree = treedef.unflatten([v[a:b].reshape(x.shape) for a, b, x in
                                  zip(sizes[:-1], sizes[1:], leaves)])
        return mlp(NP, tree, f64(obs))

    cols = []
    for i in range(flat.size):
        e = np.zeros_like(flat)
        e[i] = eps
        cols.append((logits(flat + e) - logits(flat - e)) / (2 * eps))
    return np.stack(cols, -1), logits(flat)  # [B, A, n], [B, A]


def test_trpo_conjugate_gradient_on_fisher_vector_products():
    p, obs, actions, adv = trpo_inputs()
    new_p, x, g, rr = run_both(trpo_step, (p, obs, actions, adv), iters=20)
    # the Fisher matrix and the surrogate's gradient in closed form from the Jacobians
    J, logits = _np_policy_jacobians(p, obs)
    probs = NP.nn.softmax(logits)
    B, A, n = J.shape
    fisher = np.einsum("bai,bac,bcj->ij", J, probs[:, :, None] * np.eye(A)
                       - probs[:, :, None] * probs[:, None, :], J) / B
    onehot = np.eye(A)[actions]
    want_g = np.einsum("b,bai,ba->i", f64(adv), J, onehot - probs) / B
    np.testing.assert_allclose(np.asarray(g), want_g, rtol=1e-4, atol=1e-6)
    want_x = np.linalg.solve(fisher + 0.1 * np.eye(n), want_g)
    np.testing.assert_allclose(np.asarray(x), want_x, rtol=1e-3, atol=1e-3 * np.abs(
        want_x).max())
    assert float(rr) < 1e-6 * float(want_g @ want_g)
    # the step's quadratic KL is max_kl
    flat = np.asarray(fusionjit.flatten_util.ravel_pytree(f64(p))[0], np.float64)
    step = np.asarray(fusionjit.flatten_util.ravel_pytree(f64(new_p))[0], np.float64) - flat
    np.testing.assert_allclose(0.5 * step @ (fisher + 0.1 * np.eye(n)) @ step, 0.01, rtol=1e-3)


def _np_mse_grad(p, x, y):
    h = np.tanh(x @ p["w0"] + p["b0"])
    d = 2 * (h @ p["w1"] + p["b1"] - y) / y.size
    dh = d @ p["w1"].T * (1 - h ** 2)
    return {"w0": x.T @ dh, "b0": dh.sum(0), "w1": h.T @ d, "b1": d.sum(0)}


def _np_maml_loss(p, x_tr, y_tr, x_te, y_te, inner_lr=0.3):
    losses = []
    for task in range(x_tr.shape[0]):
        g = _np_mse_grad(p, x_tr[task], y_tr[task])
        adapted = {k: p[k] - inner_lr * g[k] for k in p}
        losses.append(mse(NP, adapted, x_te[task], y_te[task]))
    return np.mean(losses)


def test_maml_meta_gradient_through_an_inner_sgd_step():
    args = maml_inputs()
    # a second derivative through vmapped tasks: 1e-4 relative
    loss, g = run_both(maml_loss, args, wrap=VG)
    np.testing.assert_allclose(float(loss), _np_maml_loss(*f64(args)), rtol=1e-5)
    check_finite_differences(lambda q: _np_maml_loss(q, *f64(args[1:])), args[0], g)
    # the first-order approximation (the inner gradient held) is a different gradient
    first_order = FJ.jit(FJ.grad(lambda p: FJ.vmap(lambda a, b, c, d: mse(
        FJ, tree_map(lambda w, gw: w - 0.3 * fusionjit.lax.stop_gradient(gw), p,
                     FJ.grad(functools.partial(mse, FJ))(p, a, b)), c, d))(*args[1:]).mean()))(
        args[0])
    assert not np.allclose(np.asarray(first_order["w0"]), np.asarray(g["w0"]), rtol=1e-3)


def test_straight_through_gumbel_softmax():
    w, codebook, x, target, k = gumbel_inputs()
    (loss, (hard, gumbels)), (gw, gc) = run_both(
        gumbel_st_loss, (w, codebook, x, target, k),
        wrap=lambda L, f: L.value_and_grad(f, argnums=(0, 1), has_aux=True))
    hard, gumbels = np.asarray(hard, np.float64), np.asarray(gumbels, np.float64)
    x, w, codebook, target = f64((x, w, codebook, target))
    logits = x @ w
    np.testing.assert_array_equal(hard, np.eye(6)[np.argmax(logits + gumbels, -1)])
    # forward: the hard one-hot codes; backward: through the tempered softmax
    err = hard @ codebook - target
    np.testing.assert_allclose(float(loss), (err ** 2).mean(), rtol=1e-5)
    dy = 2 * err @ codebook.T / err.size
    s = NP.nn.softmax((logits + gumbels) / 0.5)
    dlogits = s * (dy - (dy * s).sum(-1, keepdims=True)) / 0.5
    np.testing.assert_allclose(np.asarray(gw), x.T @ dlogits, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(gc), hard.T @ (2 * err / err.size), rtol=1e-4,
                               atol=1e-6)


def test_mixture_density_network_nll():
    p, x, y = mdn_inputs()
    loss, g = run_both(mdn_nll, (p, x, y), wrap=VG)
    np.testing.assert_allclose(float(loss), mdn_nll(NP, f64(p), f64(x), f64(y)), rtol=1e-5)
    check_finite_differences(lambda q: mdn_nll(NP, q, f64(x), f64(y)), p, g)


def test_batch_norm_with_running_statistics_from_initializers():
    k, x, labels = bn_inputs()
    params, state, losses, states = run_both(bn_train, (k, x, labels))
    losses = np.asarray(losses)
    assert losses[-1] < losses[0]
    assert_trees_close(state, tree_map(lambda s: s[-1], states))
    p0, s0 = bn_init(FJ, k)  # eagerly: the same weights
    w1 = np.asarray(p0["w1"])
    limit = math.sqrt(6 / (6 + 16))  # glorot_uniform
    assert np.abs(w1).max() <= limit and np.abs(w1).max() > 0.8 * limit
    want_loss, _ = bn_loss(NP, f64(p0), f64(s0), f64(x), labels)
    np.testing.assert_allclose(losses[0], want_loss, rtol=1e-5)
    # one step: the running statistics move a tenth of the way to the batch's (unbiased)
    state1 = tree_map(lambda s: s[0], states)
    h = f64(x) @ f64(w1)
    np.testing.assert_allclose(np.asarray(state1["mean"]), 0.1 * h.mean(0), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(np.asarray(state1["var"]), 0.9 + 0.1 * h.var(0, ddof=1),
                               rtol=1e-5)


def test_value_iteration_in_a_while_loop():
    P, R = mdp_inputs()
    V, policy, iters = run_both(value_iteration, (P, R))
    V, policy, iters = np.asarray(V, np.float64), np.asarray(policy), int(iters)
    want_V, want_policy, want_iters = value_iteration(NP, *f64((P, R)))
    np.testing.assert_array_equal(policy, want_policy)
    assert abs(iters - want_iters) <= 1 and 10 < iters < 500
    np.testing.assert_allclose(V, want_V, rtol=1e-4, atol=1e-4)
    # the greedy policy's own value, by a linear solve, is within the stopping bound
    S = P.shape[0]
    P_pi, R_pi = f64(P)[np.arange(S), policy], f64(R)[np.arange(S), policy]
    V_pi = np.linalg.solve(np.eye(S) - 0.9 * P_pi, R_pi)
    assert np.abs(V - V_pi).max() < 2 * 1e-4 * 0.9 / 0.1 + 1e-4


def test_sac_critic_and_temperature_updates():
    args = sac_update_inputs()
    q, q_target, log_alpha, c_loss, q_grads, a_loss, logp, y = run_both(sac_update, args)
    q0, t0, _, la0, batch, _ = args
    # Polyak averaging of the target towards the updated critic
    assert_trees_close(q_target, tree_map(lambda t, o: 0.995 * t + 0.005 * np.asarray(o), t0, q),
                       1e-6, 1e-6)
    # the temperature's gradient is -mean(logp + target entropy)
    logp = np.asarray(logp, np.float64)
    np.testing.assert_allclose(float(log_alpha), la0 + 3e-3 * (logp - 2.0).mean(), rtol=1e-6)
    np.testing.assert_allclose(float(a_loss), -(la0 * (logp - 2.0)).mean(), rtol=1e-5)
    # the critic's loss and gradient at the (held) targets, in NumPy
    obs, act = f64(batch[0]), f64(batch[1])

    def critic(qp):
        return sum(((qi - f64(y)) ** 2).mean() for qi in twin_q(NP, qp, obs, act))

    np.testing.assert_allclose(float(c_loss), critic(f64(q0)), rtol=1e-5)
    check_finite_differences(critic, q0, q_grads)
    assert_trees_close(q, tree_map(lambda a, g: a - 3e-3 * np.asarray(g), q0, q_grads), 1e-6,
                       1e-7)


def test_convolutional_decoder_by_conv_transpose():
    rng = np.random.default_rng(16)
    args = (f32(rng, 3, 3, 8, 4, scale=0.3), f32(rng, 3, 3, 4, 1, scale=0.3), f32(rng, 2, 4, 4, 8),
            rng.random((2, 16, 16, 1)).astype(np.float32))
    loss, (g1, g2) = run_both(deconv_loss, args,
                              wrap=lambda L, f: L.value_and_grad(f, argnums=(0, 1)))
    # a stride-2 SAME transposed convolution of a 4x4 map is 8x8, twice: 16x16
    out = FJ.jit(lambda w1, z: fusionjit.lax.conv_transpose(
        z, w1, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))(args[0], args[2])
    assert out.shape == (2, 8, 8, 4)
    # a conv_transpose is linear in its kernel: <d loss/d w2, w2> is the loss's derivative
    # along w2's ray, computed from the forward pass at two scales
    f = FJ.jit(functools.partial(deconv_loss, FJ))
    eps = 1e-2
    fd = (float(f(args[0], args[1] * (1 + eps), *args[2:]))
          - float(f(args[0], args[1] * (1 - eps), *args[2:]))) / (2 * eps)
    np.testing.assert_allclose(float(np.sum(np.asarray(g2) * args[1])), fd, rtol=2e-3)
