"""CartPole-v1 batched over environments, written as a JAX user writes it, once for every
array library: `xp` is fusionjit.numpy or jax.numpy, `lax` fusionjit.lax or jax.lax.

Gymnasium's physics (explicit Euler), its constants and thresholds; termination is tested
on the new state; done environments are reset (gymnax-style: in the same step) from a pool
of reset states. The rollout variants follow the paper (Snider & Liang 2023, Sec. V):

- ``pool_concat``: the state packed in one [4, N] array (np.array/stack), the paper's
  baseline form, with actions and reset states precomputed outside the loop (its "pool");
- ``pool_no_concat``: the four state arrays carried separately (the paper's 3.41x);
- either with ``unroll`` (the paper's ``scan(..., unroll=10)``).

Every rollout takes (state [4, N] float32, actions [T, N] bool, resets [R, 4, N] float32)
and returns (final state [4, N], resets per step [T] int32); step t resets from pool row
t % R.
"""

from __future__ import annotations

import math

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


def physics(xp, x, x_dot, theta, theta_dot, action):
    """One Euler step of Gymnasium's CartPoleEnv.step for every environment."""
    force = xp.where(action, FORCE_MAG, -FORCE_MAG)
    costheta = xp.cos(theta)
    sintheta = xp.sin(theta)
    temp = (force + POLEMASS_LENGTH * theta_dot**2 * sintheta) / TOTAL_MASS
    thetaacc = (GRAVITY * sintheta - costheta * temp) / (
        LENGTH * (4.0 / 3.0 - MASSPOLE * costheta**2 / TOTAL_MASS))
    xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS
    return (x + TAU * x_dot, x_dot + TAU * xacc, theta + TAU * theta_dot,
            theta_dot + TAU * thetaacc)


def terminated(x, theta):
    return (x < -X_THRESHOLD) | (x > X_THRESHOLD) | (theta < -THETA_THRESHOLD) | (
        theta > THETA_THRESHOLD)


def pool_no_concat(xp, lax, unroll=1):
    """The four state arrays carried separately; actions and resets from pools."""
    def rollout(state, actions, resets):
        pool = resets.shape[0]

        def step(carry, action):
            t, x, x_dot, theta, theta_dot = carry
            x, x_dot, theta, theta_dot = physics(xp, x, x_dot, theta, theta_dot, action)
            done = terminated(x, theta)
            reset = resets[t % pool]
            x = xp.where(done, reset[0], x)
            x_dot = xp.where(done, reset[1], x_dot)
            theta = xp.where(done, reset[2], theta)
            theta_dot = xp.where(done, reset[3], theta_dot)
            return (t + 1, x, x_dot, theta, theta_dot), done.sum()

        init = (0, state[0], state[1], state[2], state[3])
        (_, *final), resets_per_step = lax.scan(step, init, actions, unroll=unroll)
        return xp.stack(final), resets_per_step
    return rollout


def pool_concat(xp, lax, unroll=1):
    """The paper's baseline form: the state packed in one [4, N] array."""
    def rollout(state, actions, resets):
        pool = resets.shape[0]

        def step(carry, action):
            t, state = carry
            x, x_dot, theta, theta_dot = state[0], state[1], state[2], state[3]
            state = xp.stack(physics(xp, x, x_dot, theta, theta_dot, action))
            done = terminated(state[0], state[2])
            state = xp.where(done, resets[t % pool], state)
            return (t + 1, state), done.sum()

        (_, final), resets_per_step = lax.scan(step, (0, state), actions, unroll=unroll)
        return final, resets_per_step
    return rollout


def inputs(envs: int, steps: int, pool: int = 16, seed: int = 0):
    """(state, actions, resets) as NumPy arrays: starting states and the pools."""
    import numpy as np
    rng = np.random.default_rng(seed)
    state = rng.uniform(-0.05, 0.05, (4, envs)).astype(np.float32)
    actions = rng.random((steps, envs)) < 0.5
    resets = rng.uniform(-0.05, 0.05, (pool, 4, envs)).astype(np.float32)
    return state, actions, resets
