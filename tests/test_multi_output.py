"""Multi-output fusion on the paper's CartPole step: graphs of elementwise ops with several
outputs sharing expensive producers (sin, cos, the done mask) become one kernel, as XLA
fuses them; the reset count's reduction joins that kernel under the fusionjit profile; the
concat-packed step keeps the paper's boundary under `xla` only."""

from __future__ import annotations

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
from fusionjit.testing import count_kernels

from conftest import assert_close

GRAVITY, MASSCART, MASSPOLE, LENGTH, FORCE_MAG, TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
TOTAL_MASS = MASSCART + MASSPOLE
POLEMASS_LENGTH = MASSPOLE * LENGTH
THETA_THRESHOLD = 12 * 2 * np.pi / 360
X_THRESHOLD = 2.4
N = 2048


def physics(xp, x, x_dot, theta, theta_dot, action):
    """Gymnasium's CartPole-v1 step (explicit Euler), written once for fnp and np."""
    force = xp.where(action, FORCE_MAG, -FORCE_MAG)
    costheta, sintheta = xp.cos(theta), xp.sin(theta)
    temp = (force + POLEMASS_LENGTH * theta_dot**2 * sintheta) / TOTAL_MASS
    thetaacc = (GRAVITY * sintheta - costheta * temp) / (
        LENGTH * (4.0 / 3.0 - MASSPOLE * costheta**2 / TOTAL_MASS))
    xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS
    return (x + TAU * x_dot, x_dot + TAU * xacc, theta + TAU * theta_dot,
            theta_dot + TAU * thetaacc)


def done_of(x, theta):
    return (x < -X_THRESHOLD) | (x > X_THRESHOLD) | (theta < -THETA_THRESHOLD) | (
        theta > THETA_THRESHOLD)


def step_separate(x, x_dot, theta, theta_dot, action, reset):
    """The paper's no-concat form: four state arrays, reset where done."""
    new = physics(fnp, x, x_dot, theta, theta_dot, action)
    done = done_of(new[0], new[2])
    return tuple(fnp.where(done, reset[i], v) for i, v in enumerate(new))


def step_separate_count(x, x_dot, theta, theta_dot, action, reset):
    new = physics(fnp, x, x_dot, theta, theta_dot, action)
    done = done_of(new[0], new[2])
    return tuple(fnp.where(done, reset[i], v) for i, v in enumerate(new)) + (fnp.sum(done),)


def step_packed(state, action, reset):
    """The paper's Fig. 2 form: the state packed in one [4, N] array with stack."""
    x, x_dot, theta, theta_dot = state[0], state[1], state[2], state[3]
    new = fnp.stack(physics(fnp, x, x_dot, theta, theta_dot, action))
    done = done_of(new[0], new[2])
    return fnp.where(done, reset, new)


def reference(state, action, reset):
    new = physics(np, *[s.astype(np.float64) for s in state], action)
    done = done_of(new[0], new[2])
    out = [np.where(done, r, v).astype(np.float32) for r, v in zip(reset, new)]
    return out, int(done.sum())


def inputs(n=N, spread=0.3, seed=0):
    rng = np.random.default_rng(seed)
    state = rng.uniform(-spread, spread, (4, n)).astype(np.float32)
    state[0] *= 10   # some carts past the threshold: resets happen
    action = rng.random(n) < 0.5
    reset = rng.uniform(-0.05, 0.05, (4, n)).astype(np.float32)
    return state, action, reset


EXPECTED = {
    # program: {profile: kernels}; the paper's XLA made one simulation kernel of the
    # no-concat step and two of the concat-packed one (one with its concatenate patch).
    "separate": {"xla": 1, "xla+concat": 1, "fusionjit": 1},
    "separate_count": {"xla": 2, "xla+concat": 2, "fusionjit": 1},
    "packed": {"xla": 2, "xla+concat": 1, "fusionjit": 1},
}


def _call(program, fn):
    state, action, reset = inputs()
    if program == "packed":
        return fn(step_packed)(state, action, reset)
    f = step_separate if program == "separate" else step_separate_count
    return fn(f)(*state, action, reset)


@pytest.mark.parametrize("profile", ["xla", "xla+concat", "fusionjit"])
@pytest.mark.parametrize("program", sorted(EXPECTED))
def test_cartpole_step_kernel_counts(program, profile):
    got = _call(program, lambda f: count_kernels(f, fusion=profile))
    assert got == EXPECTED[program][profile], (program, profile)


@pytest.mark.parametrize("profile", ["none", "xla", "xla+concat", "fusionjit"])
@pytest.mark.parametrize("program", sorted(EXPECTED))
def test_cartpole_step_matches_numpy(program, profile):
    state, action, reset = inputs()
    (want, resets) = reference(state, action, reset)
    assert 0 < resets < N
    out = _call(program, lambda f: fusionjit.jit(f, fusion=profile))
    if program == "packed":
        assert_close(out, np.stack(want), rtol=2e-5, atol=2e-6)
        return
    for g, w in zip(out[:4], want):
        assert_close(g, w, rtol=2e-5, atol=2e-6)
    if program == "separate_count":
        assert int(out[4]) == resets


def test_the_concat_boundary_is_named_by_explain():
    state, action, reset = inputs()
    ex = fusionjit.explain(step_packed, fusion="xla")(state, action, reset)
    assert ex.num_kernels == 2
    (boundary,) = {(b.producer_opcode, b.rule) for b in ex.boundaries}
    assert boundary == ("concatenate", "concat-multi-user")
    assert "concatenate" in str(ex) and "users" in str(ex)


def test_the_reset_count_is_computed_in_the_state_kernel():
    """Under fusionjit the reduction runs in the same loop as the four outputs (a
    reduction with side outputs): the state is written once and never read back."""
    state, action, reset = inputs()
    (kernel,) = fusionjit.jit(step_separate_count).lower(*state, action, reset).compile().kernels
    assert kernel["bytes_written"] == 4 * N * 4 + 4
    # Large enough for the tree reduction: the side outputs ride along in the partial sums,
    # which the thread pool shares.
    big = inputs(1 << 20)
    kernels = fusionjit.jit(step_separate_count).lower(*big[0], *big[1:]).compile().kernels
    assert len(kernels) == 2 and kernels[0]["parallel"]
    out = fusionjit.jit(step_separate_count)(*big[0], *big[1:])
    want, resets = reference(*big)
    assert int(out[4]) == resets
    for g, w in zip(out[:4], want):
        assert_close(g, w, rtol=2e-5, atol=2e-6)


def test_rows_shorter_than_a_vector_keep_their_elementwise_outputs_apart():
    # A classifier's log-softmax over 6 classes beside its sum of exp: as side outputs of
    # the sum, stored from its loop, the log-softmax was computed one element at a time
    # with the sum's rows (53 us for [4096, 6] in a training step; apart, the two kernels
    # take 17). Over rows of 16 and more the side outputs still ride in the reduction's loop.
    def f(z, m):
        d = z - m[:, None]
        return d, fnp.sum(fnp.exp(d), axis=-1)

    rng = np.random.default_rng(3)
    for cols, kernels in ((6, 2), (32, 1)):
        z = rng.standard_normal((4096, cols)).astype(np.float32)
        m = z.max(-1)
        ex = fusionjit.explain(f)(z, m)
        assert ex.num_kernels == kernels, str(ex)
        if cols < 16:
            assert any(d["rule"] == "reduction-side-outputs" and not d["fuse"] and
                       "one at a time" in d["reason"] for d in ex.decisions), str(ex)
        d, s = fusionjit.jit(f)(z, m)
        np.testing.assert_array_equal(np.asarray(d), z - m[:, None])
        assert_close(s, np.exp(z - m[:, None]).sum(-1), rtol=2e-6, atol=0)


@pytest.mark.parametrize("profile", ["xla", "fusionjit"])
def test_siblings_and_producers_with_several_users_make_one_kernel(profile):
    """Shared sin/cos and a select mask read by several outputs: one multi-output kernel."""
    def f(a, b):
        s, c = fnp.sin(a), fnp.cos(a)
        mask = (s * c) > 0.1
        return (fnp.where(mask, s, b), fnp.where(mask, c * b, a), s * c + b,
                fnp.where(mask, a, 0.0))

    a = np.linspace(-3, 3, 1000, dtype=np.float32)
    b = np.linspace(1, 2, 1000, dtype=np.float32)
    assert count_kernels(f, fusion=profile)(a, b) == 1
    s, c = np.sin(a), np.cos(a)
    m = (s * c) > 0.1
    want = (np.where(m, s, b), np.where(m, c * b, a), s * c + b,
            np.where(m, a, 0).astype(np.float32))
    for g, w in zip(fusionjit.jit(f, fusion=profile)(a, b), want):
        assert_close(g, w, rtol=1e-5, atol=1e-6)
