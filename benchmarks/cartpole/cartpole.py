"""CartPole-v1 batched over N environments in a `lax.scan` of T steps, written as a JAX user
writes it, once for every array library: `lib` carries `np` (fusionjit.numpy or jax.numpy),
`lax` and `random` (see `fusionjit_lib` and `jax_lib`).

Gymnasium's physics (explicit Euler), its constants and thresholds; reward 1 per step;
termination tested on the new state; done environments are reset in the same step
(gymnax-style) to four values drawn from uniform(-0.05, 0.05). The paper's variants (Snider &
Liang 2023, Sec. IV-V), each a builder `variant(lib, steps)` returning a rollout:

- `baseline`: the paper's Fig. 2: the state packed with `np.array([...])`, a random action
  and a random reset state drawn inside every step from a key carried by the loop;
- `pool`: the same step with its random numbers drawn before the loop (the paper's 1.87x);
- `no_concat`: `pool` with the four state arrays carried separately (3.41x);
- `unroll`: `no_concat` with `scan(..., unroll=10)` (10.56x);
- `policy`: `no_concat` with actions from a small MLP policy (4-64-2, tanh, argmax);
- `vmapped`: `no_concat` written for one environment and vectorised with `vmap` over the
  environments, as gymnax writes its environments (not one of the paper's variants).

Every rollout returns (final state [4, N], resets per step [T] int32) first. The pools come
from `random_pool`, which replays the baseline's key schedule: with as many reset rows as
steps, `pool`, `no_concat` and `unroll` compute exactly the baseline's trajectories.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

GRAVITY = 9.8
MASSCART = 1.0
MASSPOLE = 0.1
TOTAL_MASS = MASSPOLE + MASSCART
LENGTH = 0.5  # half the pole's length
POLEMASS_LENGTH = MASSPOLE * LENGTH
FORCE_MAG = 10.0
TAU = 0.02
THETA_THRESHOLD = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4
RESET_LOW, RESET_HIGH = -0.05, 0.05
UNROLL = 10
HIDDEN = 64


@dataclass(frozen=True)
class Lib:
    """An array library with JAX's API: numpy, lax, random, jit and vmap (None where a
    library has no random numbers, compiler or vmap: the NumPy and PyTorch peers)."""

    name: str
    np: Any
    lax: Any
    random: Any
    jit: Any = None
    vmap: Any = None


def fusionjit_lib() -> Lib:
    import fusionjit
    import fusionjit.numpy
    import fusionjit.random
    from fusionjit import lax
    return Lib("fusionjit", fusionjit.numpy, lax, fusionjit.random, fusionjit.jit,
               fusionjit.vmap)


def jax_lib() -> Lib:
    import jax
    import jax.numpy
    return Lib("jax", jax.numpy, jax.lax, jax.random, jax.jit, jax.vmap)


def physics(np, x, x_dot, theta, theta_dot, action):
    """One Euler step of Gymnasium's CartPoleEnv.step for every environment."""
    force = np.where(action, FORCE_MAG, -FORCE_MAG)
    costheta = np.cos(theta)
    sintheta = np.sin(theta)
    temp = (force + POLEMASS_LENGTH * theta_dot**2 * sintheta) / TOTAL_MASS
    thetaacc = (GRAVITY * sintheta - costheta * temp) / (
        LENGTH * (4.0 / 3.0 - MASSPOLE * costheta**2 / TOTAL_MASS))
    xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS
    return (x + TAU * x_dot, x_dot + TAU * xacc, theta + TAU * theta_dot,
            theta_dot + TAU * thetaacc)


def terminated(x, theta):
    return (x < -X_THRESHOLD) | (x > X_THRESHOLD) | (theta < -THETA_THRESHOLD) | (
        theta > THETA_THRESHOLD)


def draw(random, key, n, dtype):
    """The baseline's random numbers for one step: the next key, the actions, the resets."""
    key, k_action, k_reset = random.split(key, 3)
    action = random.bernoulli(k_action, 0.5, (n,))
    reset = random.uniform(k_reset, (4, n), dtype, RESET_LOW, RESET_HIGH)
    return key, action, reset


# --- the paper's variants -------------------------------------------------------------------

def baseline(lib: Lib, steps: int):
    """Fig. 2: the state packed in one [4, N] array, random numbers drawn in the step.
    rollout(state [4, N], key) -> (state, resets per step, the final key)."""
    np, lax, random = lib.np, lib.lax, lib.random

    def rollout(state, key):
        def step(carry, _):
            state, key = carry
            key, action, reset = draw(random, key, state.shape[1], state.dtype)
            x, x_dot, theta, theta_dot = state
            state = np.array(physics(np, x, x_dot, theta, theta_dot, action))
            done = terminated(state[0], state[2])
            state = np.where(done, reset, state)
            return (state, key), done.sum()

        (state, key), resets = lax.scan(step, (state, key), None, length=steps)
        return state, resets, key
    return rollout


def pool(lib: Lib, steps: int, unroll: int = 1):
    """Fig. 2 with actions [T, N] and reset states [R, 4, N] drawn before the loop; step t
    resets from row t % R. rollout(state, actions, resets) -> (state, resets per step)."""
    np, lax = lib.np, lib.lax

    def rollout(state, actions, resets):
        def step(carry, action):
            state, t = carry
            x, x_dot, theta, theta_dot = state
            state = np.array(physics(np, x, x_dot, theta, theta_dot, action))
            done = terminated(state[0], state[2])
            state = np.where(done, resets[t % resets.shape[0]], state)
            return (state, t + 1), done.sum()

        (state, _), resets_per_step = lax.scan(step, (state, 0), actions, unroll=unroll)
        return state, resets_per_step
    return rollout


def step_separate(np, state, action, reset, t):
    """One step of the four state arrays carried separately; done environments take `reset`
    ([4, N]). Returns ((x, x_dot, theta, theta_dot, t + 1), resets this step)."""
    x, x_dot, theta, theta_dot = physics(np, *state, action)
    done = terminated(x, theta)
    x = np.where(done, reset[0], x)
    x_dot = np.where(done, reset[1], x_dot)
    theta = np.where(done, reset[2], theta)
    theta_dot = np.where(done, reset[3], theta_dot)
    return (x, x_dot, theta, theta_dot, t + 1), done.sum()


def no_concat(lib: Lib, steps: int, unroll: int = 1):
    """`pool` with the four state arrays carried separately."""
    np, lax = lib.np, lib.lax

    def rollout(state, actions, resets):
        def step(carry, action):
            x, x_dot, theta, theta_dot, t = carry
            reset = resets[t % resets.shape[0]]
            return step_separate(np, (x, x_dot, theta, theta_dot), action, reset, t)

        init = (state[0], state[1], state[2], state[3], 0)
        (*final, _), resets_per_step = lax.scan(step, init, actions, unroll=unroll)
        return np.stack(final), resets_per_step
    return rollout


def unroll(lib: Lib, steps: int):
    """`no_concat` with the loop unrolled ten times, as the paper's scan(..., unroll=10)."""
    return no_concat(lib, steps, unroll=UNROLL)


def policy(lib: Lib, steps: int):
    """`no_concat` with each action chosen by an MLP policy (4-64-2, tanh, argmax) from the
    observation. rollout(state, resets, params) -> (state, resets per step)."""
    np, lax = lib.np, lib.lax

    def rollout(state, resets, params):
        w1, b1, w2, b2 = params

        def step(carry, _):
            x, x_dot, theta, theta_dot, t = carry
            obs = np.stack([x, x_dot, theta, theta_dot], axis=1)
            logits = np.tanh(obs @ w1 + b1) @ w2 + b2
            action = np.argmax(logits, axis=1) == 1
            reset = resets[t % resets.shape[0]]
            return step_separate(np, (x, x_dot, theta, theta_dot), action, reset, t)

        init = (state[0], state[1], state[2], state[3], 0)
        (*final, _), resets_per_step = lax.scan(step, init, None, length=steps)
        return np.stack(final), resets_per_step
    return rollout


def vmapped(lib: Lib, steps: int):
    """`no_concat` for one environment (its state four scalars, its actions [T], its reset
    rows [R, 4]), vectorised over the environments with vmap. The same trajectories and, once
    compiled, the same kernels as `no_concat`."""
    np, lax = lib.np, lib.lax

    def one_environment(state, actions, resets):
        def step(carry, action):
            *s, t = carry
            return step_separate(np, s, action, resets[t % resets.shape[0]], t)

        (*final, _), done = lax.scan(step, (state[0], state[1], state[2], state[3], 0),
                                     actions)
        return np.stack(final), done

    def rollout(state, actions, resets):
        final, done = lib.vmap(one_environment, in_axes=(1, 1, 2), out_axes=1)(
            state, actions, resets)
        return final, done.sum(1)
    return rollout


VARIANTS = {"baseline": baseline, "pool": pool, "no_concat": no_concat, "unroll": unroll,
            "policy": policy, "vmapped": vmapped}
# The inputs each variant's rollout takes, by name (see `Inputs`).
ARGS = {"baseline": ("state", "key"), "pool": ("state", "actions", "resets"),
        "no_concat": ("state", "actions", "resets"), "unroll": ("state", "actions", "resets"),
        "policy": ("state", "resets", "params"), "vmapped": ("state", "actions", "resets")}
# Whether the variant draws random numbers inside its loop (the threefry lowering matters).
DRAWS_IN_LOOP = {"baseline": True, "pool": False, "no_concat": False, "unroll": False,
                 "policy": False, "vmapped": False}


# --- inputs ---------------------------------------------------------------------------------

@dataclass
class Inputs:
    """The same inputs for every variant and peer, as NumPy arrays."""

    state: Any    # [4, N] starting states
    key: Any      # uint32[2], the baseline's key
    actions: Any  # [T, N] bool, the baseline's actions
    resets: Any   # [R, 4, N], the baseline's reset draws of its first R steps
    params: Any   # (w1 [4, 64], b1 [64], w2 [64, 2], b2 [2]) of the policy

    @property
    def envs(self) -> int:
        return self.state.shape[1]

    @property
    def steps(self) -> int:
        return self.actions.shape[0]

    def args(self, variant: str) -> tuple:
        return tuple(getattr(self, name) for name in ARGS[variant])


def random_pool(lib: Lib, key, envs: int, steps: int, rows: int, dtype="float32"):
    """(actions [steps, N], resets [rows, 4, N]): the random numbers `baseline` draws in its
    first steps, bit for bit, drawn before the loop."""
    lax, random = lib.lax, lib.random

    def draws(key, length):
        def step(key, _):
            key, action, reset = draw(random, key, envs, dtype)
            return key, (action, reset)
        return lax.scan(step, key, None, length=length)[1]

    actions = draws(key, steps)[0]
    resets = draws(key, rows)[1]
    return actions, resets


def policy_params(seed: int = 0, dtype="float32"):
    """Weights of the MLP policy, drawn as a framework's default initialiser would."""
    import numpy as np
    rng = np.random.default_rng(seed)
    w1 = rng.normal(0, 1 / math.sqrt(4), (4, HIDDEN))
    w2 = rng.normal(0, 1 / math.sqrt(HIDDEN), (HIDDEN, 2))
    b1, b2 = rng.normal(0, 0.1, HIDDEN), rng.normal(0, 0.1, 2)
    return tuple(p.astype(dtype) for p in (w1, b1, w2, b2))


def inputs(envs: int, steps: int, pool_rows: int | None = 16, seed: int = 0,
           dtype: str = "float32", lib: Lib | None = None) -> Inputs:
    """Starting states, the baseline's key and its random numbers as pools (`pool_rows`
    reset rows; None for one per step, which makes every variant the baseline)."""
    import numpy as np
    lib = lib or fusionjit_lib()
    rng = np.random.default_rng(seed)
    state = rng.uniform(RESET_LOW, RESET_HIGH, (4, envs)).astype(dtype)
    key = np.asarray(lib.random.PRNGKey(seed))
    rows = steps if pool_rows is None else min(pool_rows, steps)
    actions, resets = lib.jit(lambda k: random_pool(lib, k, envs, steps, max(rows, 1), dtype))(key)
    return Inputs(state, key, np.asarray(actions), np.asarray(resets), policy_params(seed, dtype))

