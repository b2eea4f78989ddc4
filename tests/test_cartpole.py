"""The paper's CartPole (benchmarks/cartpole): the physics against Gymnasium's CartPoleEnv
step for step over whole episodes (float64 to 1e-9, float32 within a stated tolerance),
every variant, fusion profile and threefry lowering against every other (bit for bit) and
against JAX on the same inputs (random draws bit for bit), and the kernels each profile
makes of the paper's baseline."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import fusionjit

from conftest import requires_jax

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.cartpole import cartpole as cp  # noqa: E402

FJ = cp.fusionjit_lib()
try:
    import gymnasium  # noqa: F401
    HAVE_GYMNASIUM = True
except ImportError:  # pragma: no cover - Gymnasium is an optional peer
    HAVE_GYMNASIUM = False
requires_gymnasium = pytest.mark.skipif(not HAVE_GYMNASIUM, reason="Gymnasium is not installed")
PROFILES = ("xla", "xla+concat", "fusionjit")
LOWERINGS = ("custom_call", "fused")
SAME_WORKLOAD = ("baseline", "pool", "no_concat", "unroll", "vmapped")


@pytest.fixture
def lowering():
    """Sets the threefry lowering for one test and restores the default after it."""
    def set_lowering(name):
        fusionjit.config.update("fusionjit_threefry_lowering", name)
    yield set_lowering
    fusionjit.config.update("fusionjit_threefry_lowering", "fused")


def _leaves(out):
    return [np.asarray(o) for o in out]


# --- the physics against Gymnasium --------------------------------------------------------

def _episodes_against_gymnasium(variant, dtype, envs=16, steps=300, seed=3):
    """Steps `envs` Gymnasium CartPoleEnvs and the variant's rollout (one step per call,
    compiled once) from the same states with the same actions; where Gymnasium terminates,
    both continue from the same reset state. Returns the largest difference of any state
    value at any step, and the terminations per step of each."""
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv
    rng = np.random.default_rng(seed)
    state = rng.uniform(-0.05, 0.05, (4, envs))
    actions = rng.random((steps, envs)) < 0.5
    resets = rng.uniform(-0.05, 0.05, (steps, 4, envs))
    step = fusionjit.jit(cp.VARIANTS[variant](FJ, 1))
    gyms = [CartPoleEnv() for _ in range(envs)]
    for i, env in enumerate(gyms):
        env.reset(seed=i)
        env.unwrapped.state = state[:, i].copy()
    ours = state.astype(dtype)
    worst, ours_done, gym_done = 0.0, [], []
    for t in range(steps):
        ours, count = _leaves(step(ours, actions[t:t + 1], resets[t:t + 1].astype(dtype)))
        assert ours.dtype == dtype
        done = 0
        for i, env in enumerate(gyms):
            _, reward, terminated, truncated, _ = env.step(int(actions[t, i]))
            assert reward == 1.0 and not truncated
            if terminated:
                done += 1
                env.reset()
                env.unwrapped.state = resets[t, :, i].copy()
            worst = max(worst, float(np.abs(ours[:, i] - env.unwrapped.state).max()))
        ours_done.append(int(count[0]))
        gym_done.append(done)
    return worst, ours_done, gym_done


@requires_gymnasium
@pytest.mark.parametrize("variant", ["pool", "no_concat"])
def test_float64_matches_gymnasium_step_for_step_over_whole_episodes(x64, variant):
    worst, ours_done, gym_done = _episodes_against_gymnasium(variant, np.float64)
    assert sum(gym_done) > 100          # whole episodes: terminations and resets included
    assert ours_done == gym_done
    assert worst <= 1e-9


@requires_gymnasium
def test_float32_matches_gymnasium_within_its_tolerance():
    # Gymnasium steps in float64; in float32 the state stays within 5e-4 of it over whole
    # episodes (random actions: ~20 steps each), and every termination happens on the same
    # step.
    worst, ours_done, gym_done = _episodes_against_gymnasium("no_concat", np.float32)
    assert sum(gym_done) > 100
    assert ours_done == gym_done
    assert worst <= 5e-4


@requires_gymnasium
def test_constants_and_thresholds_are_gymnasiums():
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv
    env = CartPoleEnv()
    assert (cp.GRAVITY, cp.MASSCART, cp.MASSPOLE, cp.LENGTH, cp.FORCE_MAG, cp.TAU) == (
        env.gravity, env.masscart, env.masspole, env.length, env.force_mag, env.tau)
    assert cp.TOTAL_MASS == env.total_mass and cp.POLEMASS_LENGTH == env.polemass_length
    assert cp.THETA_THRESHOLD == env.theta_threshold_radians
    assert cp.X_THRESHOLD == env.x_threshold and env.kinematics_integrator == "euler"


def test_a_long_rollout_is_its_steps_one_by_one():
    # One scan of 40 steps (one kernel for the whole loop under the default profile) and 40
    # calls of one step compute the same trajectory.
    inputs = cp.inputs(33, 40, pool_rows=None)
    whole = _leaves(fusionjit.jit(cp.no_concat(FJ, 40))(*inputs.args("no_concat")))
    step = fusionjit.jit(cp.no_concat(FJ, 1))
    state, counts = inputs.state, []
    for t in range(40):
        state, count = _leaves(step(state, inputs.actions[t:t + 1], inputs.resets[t:t + 1]))
        counts.append(int(count[0]))
    np.testing.assert_array_equal(whole[0], state)
    assert whole[1].tolist() == counts and sum(counts) > 0


# --- every variant, profile and lowering: the same trajectories ---------------------------

ENVS, STEPS = 40, 60


@pytest.fixture(scope="module")
def full_pool():
    # One reset row per step: `pool`, `no_concat` and `unroll` then draw exactly what the
    # baseline draws inside its loop. Carts start near the edges so that resets come early.
    inputs = cp.inputs(ENVS, STEPS, pool_rows=None, seed=1)
    inputs.state[0] *= 40
    return inputs


@pytest.fixture(scope="module")
def reference(full_pool):
    fusionjit.config.update("fusionjit_threefry_lowering", "custom_call")
    try:
        out = fusionjit.jit(cp.baseline(FJ, STEPS), fusion="xla")(*full_pool.args("baseline"))
        return _leaves(out)
    finally:
        fusionjit.config.update("fusionjit_threefry_lowering", "fused")


@pytest.mark.parametrize("variant", SAME_WORKLOAD)
def test_every_variant_profile_and_lowering_computes_the_baselines_trajectories(
        variant, full_pool, reference, lowering):
    assert reference[1].sum() > 20        # resets happened
    args = full_pool.args(variant)
    for name in LOWERINGS if cp.DRAWS_IN_LOOP[variant] else ("fused",):
        lowering(name)
        for profile in PROFILES:
            out = _leaves(fusionjit.jit(cp.VARIANTS[variant](FJ, STEPS), fusion=profile)(*args))
            np.testing.assert_array_equal(out[0], reference[0], err_msg=f"{profile} {name}")
            np.testing.assert_array_equal(out[1], reference[1], err_msg=f"{profile} {name}")
            if variant == "baseline":
                np.testing.assert_array_equal(out[2], reference[2])   # the final key


def test_the_policy_variant_agrees_under_every_profile():
    inputs = cp.inputs(ENVS, STEPS, seed=2)
    outs = [_leaves(fusionjit.jit(cp.policy(FJ, STEPS), fusion=p)(*inputs.args("policy")))
            for p in PROFILES]
    for out in outs[1:]:
        np.testing.assert_array_equal(out[0], outs[0][0])
        np.testing.assert_array_equal(out[1], outs[0][1])
    assert outs[0][1].sum() > 0


@requires_jax
def test_the_pools_draws_are_jaxs_bit_for_bit():
    ours = cp.inputs(ENVS, STEPS, pool_rows=8, seed=5)
    theirs = cp.inputs(ENVS, STEPS, pool_rows=8, seed=5, lib=cp.jax_lib())
    for name in ("state", "key", "actions", "resets"):
        a, b = getattr(ours, name), getattr(theirs, name)
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert 0.3 < ours.actions.mean() < 0.7


@requires_jax
@pytest.mark.parametrize("variant", SAME_WORKLOAD + ("policy",))
def test_jax_computes_the_same_trajectories(variant, full_pool, reference):
    import jax
    args = full_pool.args(variant)
    out = _leaves(jax.jit(cp.VARIANTS[variant](cp.jax_lib(), STEPS))(*args))
    want = reference if variant != "policy" else _leaves(
        fusionjit.jit(cp.policy(FJ, STEPS))(*args))
    # Same random draws, same resets on the same steps; sin, cos (and the policy's tanh)
    # differ in the last bits between the libraries.
    np.testing.assert_array_equal(out[1], want[1])
    np.testing.assert_allclose(out[0], want[0], atol=1e-4)
    if variant == "baseline":
        np.testing.assert_array_equal(out[2], want[2])   # the same key stream


# --- kernels ------------------------------------------------------------------------------

def _launches_per_step(variant, profile, inputs):
    counts = fusionjit.testing.launch_counts(cp.VARIANTS[variant](FJ, inputs.steps),
                                             fusion=profile)(*inputs.args(variant))
    return counts["per_call"] / inputs.steps, counts


def test_the_baseline_keeps_xlas_three_boundaries_under_xla(lowering):
    lowering("custom_call")
    inputs = cp.inputs(64, 10)
    e = fusionjit.explain(cp.baseline(FJ, 10), fusion="xla")(*inputs.args("baseline"))
    rules = {b.rule for b in e.boundaries}
    assert {"custom-call-barrier", "concat-multi-user"} <= rules
    # The loop's tuple: each step's results are written to memory for the next.
    assert any(d["rule"] == "program-output" and d["consumer_opcode"] == "tuple"
               for d in e.decisions)
    assert any(k.kind == "custom-call" for k in e.kernels)


def test_fusionjit_runs_the_unmodified_baseline_as_one_kernel_for_the_whole_loop():
    inputs = cp.inputs(64, 50)
    per_step, counts = _launches_per_step("baseline", "fusionjit", inputs)
    assert counts["loops"] == [] and counts["per_call"] <= 6    # no per-step launches
    xla_per_step, _ = _launches_per_step("baseline", "xla", inputs)
    assert xla_per_step >= 5 > 10 * per_step


def test_fusionjit_runs_the_policy_and_the_physics_in_one_kernel_for_the_whole_loop():
    # The MLP's matrix products (4-64-2), tanh and argmax stay inside the loop's kernel: each
    # environment's row of hidden units is its own, the weights the same for all.
    inputs = cp.inputs(64, 20)
    per_step, counts = _launches_per_step("policy", "fusionjit", inputs)
    assert counts["loops"] == [] and counts["per_call"] <= 4, counts
    (d,) = [d for d in fusionjit.explain(cp.policy(FJ, 20))(*inputs.args("policy")).decisions
            if d["rule"] == "whole-loop"]
    assert d["fuse"], d["reason"]
    assert _launches_per_step("policy", "xla", inputs)[0] >= 4   # dot, tanh, dot, physics


def test_the_vmapped_variant_compiles_to_the_kernels_of_no_concat():
    # Written for one environment and vmapped: the per-environment step counts are summed
    # in the loop (not written [T, N] and summed after it), and the reset pool is read in
    # its own layout (not transposed by vmap and gathered lane by lane).
    inputs = cp.inputs(256, 40)
    kernels = {}
    for v in ("no_concat", "vmapped"):
        compiled = fusionjit.jit(cp.VARIANTS[v](FJ, inputs.steps)).lower(
            *inputs.args(v)).compile()
        kernels[v] = [(k["kind"], k["bytes_read"], k["bytes_written"])
                      for k in compiled.kernels if k["kind"] == "kWholeLoop"]
        assert compiled.num_kernels <= 4, compiled.kernels
    assert kernels["vmapped"] == kernels["no_concat"]
    text = fusionjit.jit(cp.vmapped(FJ, inputs.steps)).lower(*inputs.args("vmapped")).as_text(
        "llvm")
    assert "masked.gather" not in text


def test_kernels_per_step_follow_the_papers_order_under_xla(lowering):
    lowering("custom_call")
    inputs = cp.inputs(64, 20)
    k = {v: _launches_per_step(v, "xla", inputs)[0] for v in SAME_WORKLOAD}
    # The random pool removes the threefry kernels, no concat the copy kernels, unrolling
    # divides the launches per step.
    assert k["baseline"] > k["pool"] > k["no_concat"] > k["unroll"]
    assert k["unroll"] < k["no_concat"] / 2
    assert _launches_per_step("pool", "xla+concat", inputs)[0] < k["pool"]


# --- regressions found by this benchmark ----------------------------------------------------

def test_a_scan_that_drops_its_key_carry_under_custom_call_threefry(lowering):
    # Was wrong values under fusionjit: the dropped key's state buffer was freed before the
    # loop ran (buffer assignment).
    import fusionjit.numpy as fnp
    import fusionjit.random as fr
    lowering("custom_call")

    def f(x, key):
        def step(carry, _):
            x, key = carry
            key, k1, k2 = fr.split(key, 3)
            x = x + fr.uniform(k1, (8,)) + fr.uniform(k2, (8,))
            return (x, key), fnp.sum(x)
        return fusionjit.lax.scan(step, (x, key), None, length=3)[1]

    x, key = np.zeros(8, np.float32), fr.PRNGKey(0)
    want = np.asarray(fusionjit.jit(f, fusion="xla")(x, key))
    np.testing.assert_array_equal(np.asarray(fusionjit.jit(f, fusion="fusionjit")(x, key)), want)


def test_compiling_the_baseline_again_and_again_in_one_process():
    # An earlier build failed on about the 3rd to 26th compile of this program in one process
    # (IndexError from module.compile, then on every later compile).
    import gc
    inputs = cp.inputs(256, 48)
    for _ in range(8):
        fusionjit.jit(cp.baseline(FJ, 48)).lower(*inputs.args("baseline")).compile()
        gc.collect()


def test_the_gpu_emulator_is_not_taken_for_a_gpu():
    # The experiment once ran its GPU half on the emulator (fusionjit.devices() lists
    # "gpu_emulated:0" on every machine): notebook 3 then ran for minutes.
    from benchmarks.cartpole import experiment
    devices = [str(d) for d in fusionjit.devices()]
    if any(d.startswith("gpu:") for d in devices):
        assert experiment.gpu_missing() is None
    else:
        assert any(d.startswith("gpu_emulated") for d in devices)
        assert "no GPU backend" in experiment.gpu_missing()
