"""Whole-loop fusion (the fusionjit profile, beyond XLA): a counted loop whose steps are
elementwise over its lanes runs as one kernel with each lane's state in registers. Results
must match the step-by-step loops of the xla profile (bit for bit where no float sum is
involved), per-step reductions must not depend on the number of threads, and loops that
cannot run whole must say why."""

from __future__ import annotations


import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
from fusionjit import lax

from test_multi_output import done_of, physics
from test_reliability import run_script


def rollout(x, x_dot, theta, theta_dot, actions, resets):
    """CartPole with actions and reset states from pools, the reset count per step."""
    def step(carry, inp):
        action, reset = inp
        new = physics(fnp, *carry, action)
        done = done_of(new[0], new[2])
        new = tuple(fnp.where(done, reset[i], v) for i, v in enumerate(new))
        return new, fnp.sum(done)
    return lax.scan(step, (x, x_dot, theta, theta_dot), (actions, resets))


def cartpole_inputs(rng, n, t):
    state = [rng.uniform(-0.05, 0.05, n).astype(np.float32) for _ in range(4)]
    state[0] *= 40   # carts near the edges: resets start early
    actions = rng.random((t, n)) < 0.5
    resets = rng.uniform(-0.05, 0.05, (t, 4, n)).astype(np.float32)
    return (*state, actions, resets)


def decisions(f, *args, **kw):
    return [d for d in fusionjit.explain(f, **kw)(*args).decisions if d["rule"] == "whole-loop"]


@pytest.mark.parametrize("n", [2048, 17, 5, 1])
def test_cartpole_rollout_runs_as_one_kernel_and_matches_the_step_loop(n, rng):
    args = cartpole_inputs(rng, n, 50)
    (d,) = decisions(rollout, *args)
    assert d["fuse"] and "50 steps run in one kernel" in d["reason"]
    counts = fusionjit.testing.launch_counts(rollout)(*args)
    assert counts["loops"] == [] and counts["per_call"] == 2   # the loop, and its resets' sum
    want = fusionjit.jit(rollout, fusion="xla")(*args)
    got = fusionjit.jit(rollout)(*args)
    for g, w in zip(fusionjit.tree_util.tree_leaves(got), fusionjit.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    assert np.asarray(got[1]).sum() > 0   # resets happened


def rollout_with_a_step_counter(x, x_dot, theta, theta_dot, actions, resets):
    """The CartPole study's `no_concat` step: a scalar step counter beside the state picks
    the reset row from a pool of them."""
    def step(carry, action):
        *state, t = carry
        new = physics(fnp, *state, action)
        done = done_of(new[0], new[2])
        reset = resets[t % resets.shape[0]]
        new = tuple(fnp.where(done, reset[i], v) for i, v in enumerate(new))
        return (*new, t + 1), fnp.sum(done)
    return lax.scan(step, (x, x_dot, theta, theta_dot, 0), actions)


@pytest.mark.parametrize("n", [1, 3])
def test_one_environment_beside_a_step_counter_runs_as_one_kernel(n, rng):
    # With one environment the lanes are [1], and the scalar counter had their non-unit
    # dimensions (none) too: it counted as a lane, the pool's dynamic-slice at it "moved the
    # lanes' values", and the loop ran step by step, unrolled, ~12 launches a step.
    *state, actions, resets = cartpole_inputs(rng, n, 60)
    args = (*state, actions, resets[:7])
    (d,) = decisions(rollout_with_a_step_counter, *args)
    assert d["fuse"] and "60 steps run in one kernel" in d["reason"], d["reason"]
    counts = fusionjit.testing.launch_counts(rollout_with_a_step_counter)(*args)
    assert counts["loops"] == [] and counts["per_call"] <= 2, counts
    want = fusionjit.jit(rollout_with_a_step_counter, fusion="xla")(*args)
    got = fusionjit.jit(rollout_with_a_step_counter)(*args)
    for g, w in zip(fusionjit.tree_util.tree_leaves(got), fusionjit.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    assert np.asarray(got[1]).sum() > 0   # resets happened


def test_a_pytree_scan_with_outputs_in_reverse(rng):
    xs = rng.random((9, 33), np.float32)

    def f(xs):
        def step(c, x):
            a, b = c
            a = fnp.tanh(a + x)
            b = b * 0.5 + a
            return (a, b), (a * 2, b - a)
        return lax.scan(step, (fnp.zeros(33), fnp.ones(33)), xs, reverse=True)

    assert decisions(f, xs)[0]["fuse"]
    want = fusionjit.jit(f, fusion="xla")(xs)
    got = fusionjit.jit(f)(xs)
    for g, w in zip(fusionjit.tree_util.tree_leaves(got), fusionjit.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_uniform_carries_like_a_prng_key():
    # 4096 lanes: with 1000 the cost model rightly keeps XLA's plan (measured 50 us, the
    # whole loop on one thread 66 us), and there is no whole-loop kernel to check.
    n = 4096

    def f(key, x):
        def step(c, _):
            key, x = c
            key, sub = fusionjit.random.split(key)
            u = fusionjit.random.uniform(sub, (n,))
            x = fnp.where(u < 0.5, x * 0.9, x + u)
            return (key, x), x.max()
        return lax.scan(step, (key, x), None, length=40)

    key, x = fusionjit.random.PRNGKey(3), np.ones(n, np.float32)
    assert decisions(f, key, x)[0]["fuse"]
    want = fusionjit.jit(f, fusion="xla")(key, x)
    got = fusionjit.jit(f)(key, x)
    for g, w in zip(fusionjit.tree_util.tree_leaves(got), fusionjit.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))   # max is exact


def test_a_step_reduction_reads_the_lanes_values_in_the_estimate():
    """A per-step reduction over the lanes (the step's max) combines the values each lane
    computed: the cost model must not price the lanes' work twice. (It did: the PRNG scan
    above lost to XLA's plan at 8 lanes, though measured at 0.6x its time.)"""
    n, t = 4096, 40

    def f(x):
        def step(c, _):
            e = fnp.exp(c)
            return e, e.max()
        return lax.scan(step, x, None, length=t)

    x = np.zeros(n, np.float32)
    assert decisions(f, x)[0]["fuse"]
    from fusionjit._src.api import Jitted
    entry, _ = Jitted(f, None, None, None)._entry((x,), {})
    (loop,) = [k for k in entry.compilation.kernel_graph if k["kind"] == "kWholeLoop"]
    exp_flops = 12.0   # ElementCost of a float32 exp (cpp/analysis/cost_model.cc)
    assert n * t * exp_flops < loop["flops"] < 1.3 * n * t * exp_flops


def test_a_whole_loop_kernels_arithmetic_is_priced_as_register_work():
    """A whole-loop kernel keeps its state in registers from step to step: its ops run
    about 2.25x as fast as the same ops in a kernel over arrays (loads and stores between
    them) at the vector units' width, 1.67x where the vectors are twice as wide as their
    units (Zen 4), as measured on the CartPole rollouts (benchmarks/cost_model.py:
    estimated at 1.6-2.5x their measured time before, 0.8-1.1 since)."""
    n, t = 4096, 40

    def loop(x):
        return lax.scan(lambda c, _: (fnp.exp(c), None), x, None, length=t)[0]

    def per_flop(f, x, kind):  # the CPU's figures (the GPU's threads keep no such state)
        entry, _ = fusionjit.jit(f, backend="cpu")._entry((x,), {})
        (k,) = [k for k in entry.compilation.kernel_graph if k["kind"] == kind]
        return k["estimated_us"] / k["flops"]

    whole = per_flop(loop, np.zeros(n, np.float32), "kWholeLoop")
    array = per_flop(fnp.exp, np.zeros(n * t, np.float32), "kLoop")
    assert 1.5 < array / whole < 2.5


def test_float_sums_per_step_do_not_depend_on_the_thread_count():
    code = """
import numpy as np, fusionjit, fusionjit.numpy as fnp
from fusionjit import lax
x = np.random.default_rng(0).standard_normal(100_000).astype(np.float32)
f = fusionjit.jit(lambda x: lax.scan(lambda c, _: (c * 0.99 + 0.01, (c * c).sum()), x, None,
                                     length=20))
c, s = f(x)
print(np.asarray(s).tobytes().hex()[:64], np.asarray(c).sum())
"""
    outs = [run_script(code, env={"FUSIONJIT_NUM_THREADS": t}) for t in ("1", "2", "3")]
    for p in outs:
        assert p.returncode == 0, p.stderr[-2000:]
    assert outs[0].stdout == outs[1].stdout == outs[2].stdout


def test_loops_that_cannot_run_whole_say_why_and_stay_correct(rng):
    x = rng.random(64).astype(np.float32)

    def normalised(x):   # each step reads every lane's value
        return lax.scan(lambda c, _: (c / c.sum(), c.sum()), x, None, length=5)

    (d,) = decisions(normalised, x)
    assert not d["fuse"] and "combines or moves the lanes" in d["reason"]
    c, s = fusionjit.jit(normalised)(x)
    want = x.copy()
    for _ in range(5):
        want = want / want.sum()
    np.testing.assert_allclose(np.asarray(c), want, rtol=1e-5)

    def data_dependent(x):
        return lax.while_loop(lambda c: c.sum() < 100.0, lambda c: c * 2.0, x)

    (d,) = decisions(data_dependent, x)
    assert not d["fuse"] and "trip count is not known" in d["reason"]

    (d,) = decisions(normalised, x, fusion="fusionjit")
    assert not d["fuse"]
    # XLA's rules: never
    assert decisions(rollout, *cartpole_inputs(rng, 16, 4), fusion="xla") == []


def packed_rollout(state, actions, resets):
    """The paper's Fig. 2 form: the state packed in one [4, N] array with stack."""
    def step(state, inp):
        action, reset = inp
        x, x_dot, theta, theta_dot = state[0], state[1], state[2], state[3]
        new = fnp.stack(physics(fnp, x, x_dot, theta, theta_dot, action))
        done = done_of(new[0], new[2])
        return fnp.where(done, reset, new), fnp.sum(done)
    return lax.scan(step, state, (actions, resets))


def test_a_concat_packed_carry_is_split_and_runs_as_the_separate_one_does(rng):
    """Frontend repair of loop carries: the packed state is carried as four rows, so the
    paper's baseline form compiles to the same loop kernel as its no-concat refactoring."""
    *rows, actions, resets = cartpole_inputs(rng, 256, 30)
    state = np.stack(rows)
    (d,) = decisions(packed_rollout, state, actions, resets)
    assert d["fuse"] and "keeps its 4 carries" in d["reason"]
    packed = fusionjit.testing.launch_counts(packed_rollout)(state, actions, resets)
    separate = fusionjit.testing.launch_counts(rollout)(*rows, actions, resets)
    assert packed["loops"] == [] == separate["loops"]
    # Around the loop: the rows taken apart before it and packed after it.
    assert packed["per_call"] <= separate["per_call"] + 2
    step = fusionjit.jit(packed_rollout).lower(state, actions, resets).as_text("optimized")
    body = step.split("%fused_whole_loop_fusion")[1].split("\n}\n")[0]
    assert "concatenate" not in body   # the step never packs the state
    want = fusionjit.jit(packed_rollout, fusion="xla")(state, actions, resets)
    got = fusionjit.jit(packed_rollout)(state, actions, resets)
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))
    np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))
    # Under XLA's rules the concatenate stays (the paper's boundary): a step-by-step loop.
    xla = fusionjit.testing.launch_counts(packed_rollout, fusion="xla")(state, actions, resets)
    assert xla["loops"] and xla["loops"][0]["launches_per_iteration"] >= 2


# Slice sinking (the fusionjit profile's frontend repair) moves a slice into the producer
# of what it slices. Found by the large fuzzer tier: a broadcast's stretched unit dimension
# was sliced like the output's, and a dynamic slice's start was shifted before its clamp.
@pytest.mark.parametrize("profile", ["xla", "fusionjit"])
def test_slice_of_a_broadcast_of_a_unit_dimension(profile):
    x = np.arange(9, dtype=np.float32).reshape(1, 9)
    got = fusionjit.jit(lambda x: fnp.broadcast_to(x, (2, 9))[:, 7:9], fusion=profile)(x)
    np.testing.assert_array_equal(np.asarray(got), np.broadcast_to(x, (2, 9))[:, 7:9])


@pytest.mark.parametrize("profile", ["xla", "fusionjit"])
@pytest.mark.parametrize("start", [-2, -20, 0, 1, 2, 5, 20])
def test_slice_of_a_dynamic_slice_clamps_the_start_first(profile, start):
    x = np.arange(10, dtype=np.int32)

    def reference(x, k, size):
        k = k + x.shape[0] if k < 0 else k   # from the end, as JAX
        k = min(max(k, 0), x.shape[0] - size)
        return x[k:k + size]

    f = fusionjit.jit(lambda x, k: lax.dynamic_slice(x, (k,), (8,))[7:8], fusion=profile)
    np.testing.assert_array_equal(np.asarray(f(x, np.int32(start))), reference(x, start, 8)[7:8])
    g = fusionjit.jit(lambda x, k: lax.dynamic_slice(x[2:9], (k,), (4,))[1:3], fusion=profile)
    want = reference(x[2:9], start, 4)[1:3]
    np.testing.assert_array_equal(np.asarray(g(x, np.int32(start))), want)
    # A window that only shrinks (large-tier seed 216651): the start is clamped for the
    # larger window, then the slice keeps its front.
    h = fusionjit.jit(lambda x, k: lax.dynamic_slice(x, (k,), (8,))[0:3], fusion=profile)
    np.testing.assert_array_equal(np.asarray(h(x, np.int32(start))), reference(x, start, 8)[0:3])


# --- loops that run step by step: what explain says, and their launches -------------------

def _matrix_scan(x):
    def body(c, _):
        return c @ c * 0.001 + 1.0, None
    return lax.scan(body, x, None, length=100)[0]


def test_explain_says_why_a_loop_runs_step_by_step_and_how_it_is_unrolled():
    x = np.ones((16, 16), np.float32)
    ex = fusionjit.explain(_matrix_scan)(x)
    (loop,) = ex.loops
    text = " ".join(loop["decisions"])
    assert "runs step by step" in text and "dot" in text
    # scan's default unroll=1 leaves the factor to the cost model under fusionjit.
    assert "cost model" in text, text
    assert "test_whole_loop.py" in loop["source"]
    assert "every step of loop %" in str(ex) and f"loop %{loop['name']}" in str(ex)
    # A whole-loop kernel says so too.
    ex2 = fusionjit.explain(lambda x: lax.scan(lambda c, _: (fnp.sin(c) * 0.9, None), x, None,
                                                length=50)[0])(x)
    assert any("run in one kernel" in d for lp in ex2.loops for d in lp["decisions"])
    # Under xla rules nothing is chosen for the user.
    ex3 = fusionjit.explain(_matrix_scan, fusion="xla")(x)
    assert all("cost model" not in d for lp in ex3.loops for d in lp["decisions"])


def test_a_loop_counter_shares_a_launch_with_the_step_under_fusionjit():
    # The counter's increment is a kernel of its own under XLA's rules (3 launches a step:
    # counter, dot, epilogue); fusionjit runs it beside the epilogue (2 a step).
    x = np.full((16, 16), 0.01, np.float32)
    xla = fusionjit.testing.launch_counts(_matrix_scan, fusion="xla")(x)
    fj = fusionjit.testing.launch_counts(_matrix_scan, fusion="fusionjit")(x)
    assert xla["per_call"] == 300
    assert fj["per_call"] <= 200, fj
    np.testing.assert_allclose(np.asarray(fusionjit.jit(_matrix_scan)(x)),
                               np.asarray(fusionjit.jit(_matrix_scan, fusion="xla")(x)),
                               rtol=1e-6)


def test_a_carry_dead_after_the_loop_keeps_its_buffer_through_the_loop():
    # Regression: the state element of a carry nothing reads after the loop was freed before
    # the loop ran, and the body's temporaries overwrote it (wrong values under fusion).
    a = np.array([5, 1, 7, 3, 0, 6, 2, 4], np.float32)

    def body(i, s):
        v, k = s
        pk = lax.dynamic_slice(lax.concatenate([k, k], 0), [i], (8,))
        pv = lax.dynamic_slice(lax.concatenate([v, v], 0), [i], (8,))
        swap = lax.lt(pk, k)
        return lax.select(swap, pv, v), lax.select(swap, pk, k)

    def dead_key(v):
        key = lax.bitwise_xor(lax.bitcast_convert_type(v, np.int32), 5)
        return lax.fori_loop(0, 3, body, (v, key))[0]

    want = np.asarray(fusionjit.jit(dead_key, fusion="none")(a))
    for profile in ("xla", "fusionjit"):
        np.testing.assert_array_equal(np.asarray(fusionjit.jit(dead_key, fusion=profile)(a)), want)


@pytest.mark.parametrize("profile", ["none", "xla", "fusionjit"])
def test_two_loops_that_start_from_one_state(profile):
    # Regression: CSE gives both sorts one initial state tuple; the first loop took its
    # elements over as its own state and the second started from what the first left.
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    got = fusionjit.jit(lambda a: (fnp.sort(a, axis=1), fnp.sort(a * 1.0 + 0.0, axis=1)),
                        fusion=profile)(x)
    for g in got:
        np.testing.assert_array_equal(np.asarray(g), np.sort(x, axis=1))


@pytest.mark.parametrize("profile", ["none", "xla", "fusionjit"])
def test_outputs_of_two_sizes_per_step(profile):
    # Per-step outputs of 8 and of 4 x 8 values from a small carry, no lane carry: whole-loop
    # fusion once took the larger as the lanes and wrote the smaller's rows over them
    # (garbage from the second step on).
    def draws(c):
        def step(c, _):
            c = c * 1.5 + 1.0
            return c, (fnp.arange(8.0) * c[0], fnp.arange(32.0).reshape(4, 8) + c[1])
        return lax.scan(step, c, None, length=3)

    c0 = np.array([1.0, 2.0], np.float32)
    c, (small, large) = fusionjit.jit(draws, fusion=profile)(c0)
    want_c, want_small, want_large = c0.copy(), [], []
    for _ in range(3):
        want_c = want_c * np.float32(1.5) + np.float32(1.0)
        want_small.append(np.arange(8.0, dtype=np.float32) * want_c[0])
        want_large.append(np.arange(32.0, dtype=np.float32).reshape(4, 8) + want_c[1])
    np.testing.assert_array_equal(np.asarray(c), want_c)
    np.testing.assert_array_equal(np.asarray(small), np.stack(want_small))
    np.testing.assert_array_equal(np.asarray(large), np.stack(want_large))
    if profile == "fusionjit":
        (d,) = decisions(draws, c0)
        assert not d["fuse"] and "does not have the lanes' shape" in d["reason"], d


def per_lane_mlp(x, y, w1, w2, steps=7):
    """Each lane's (x, y) through a 2-16-3 MLP; the next state from the argmax and the row's
    mean: each lane gets rows of its own (the stack, the hidden units), the weights are shared."""
    def step(carry, _):
        x, y = carry
        h = fnp.tanh(fnp.stack([x, y], axis=1) @ w1)        # [N, 16]
        logits = h @ w2                                     # [N, 3]
        a = fnp.argmax(logits, axis=1).astype(x.dtype)
        return (fnp.tanh(y + 0.1 * a), fnp.tanh(x - h.mean(axis=1))), fnp.sum(a)
    return lax.scan(step, (x, y), None, length=steps)


# 1003 lanes on the CPU: groups of wide vectors, then a wide vector, a machine vector and the
# 3 lanes left over as one more (its other lanes repeating the last); 37 lanes end with 5.
@pytest.mark.parametrize("n", [37, 1003])
def test_a_per_lane_mlp_runs_in_the_loop_kernel_and_keeps_its_hidden_rows(n, rng):
    x, y = (rng.uniform(-1, 1, n).astype(np.float32) for _ in range(2))
    w1 = rng.normal(0, 1, (2, 16)).astype(np.float32)
    w2 = rng.normal(0, 1, (16, 3)).astype(np.float32)
    (d,) = decisions(per_lane_mlp, x, y, w1, w2)
    assert d["fuse"], d["reason"]
    (fx, fy), counts = fusionjit.jit(per_lane_mlp)(x, y, w1, w2)
    (rx, ry), rcounts = fusionjit.jit(per_lane_mlp, fusion="xla")(x, y, w1, w2)
    np.testing.assert_allclose(np.asarray(fx), np.asarray(rx), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(fy), np.asarray(ry), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(counts), np.asarray(rcounts))
    # NumPy, step by step.
    wx, wy, wc = x.copy(), y.copy(), []
    for _ in range(7):
        h = np.tanh(np.stack([wx, wy], axis=1) @ w1)
        a = np.argmax(h @ w2, axis=1).astype(np.float32)
        wx, wy = np.tanh(wy + np.float32(0.1) * a), np.tanh(wx - h.mean(axis=1))
        wc.append(a.sum())
    np.testing.assert_allclose(np.asarray(fx), wx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(counts), wc)
    # The hidden units are computed once per lane and step, kept for both matrix products.
    llvm = fusionjit.jit(per_lane_mlp).lower(x, y, w1, w2).as_text("llvm")
    assert "lane_row." in llvm


@pytest.mark.cpu_only
def test_a_loop_over_few_lanes_with_much_arithmetic_runs_on_the_threads(rng):
    """Whether a kernel runs on the thread pool counts its arithmetic, not only its elements:
    the CartPole policy (a 4-64-2 MLP) over 256 environments for 200 steps ran on one thread,
    1.6x slower than on two, as its 51,200 lane-steps were below the elements' threshold."""
    w1 = rng.normal(0, 1, (2, 64)).astype(np.float32)
    w2 = rng.normal(0, 1, (64, 3)).astype(np.float32)
    mlp = fusionjit.jit(per_lane_mlp, static_argnums=4)
    for n, steps, parallel in ((16, 2, False), (256, 200, True)):
        x, y = (rng.uniform(-1, 1, n).astype(np.float32) for _ in range(2))
        kernels = mlp.lower(x, y, w1, w2, steps).compile().kernels
        (loop,) = [k for k in kernels if k["kind"] == "kWholeLoop"]
        assert loop["parallel"] == parallel, loop
    (fx, fy), counts = mlp(x, y, w1, w2, 200)  # the 256 lanes, on the threads
    xla = fusionjit.jit(per_lane_mlp, static_argnums=4, fusion="xla")
    (rx, ry), rcounts = xla(x, y, w1, w2, 200)
    np.testing.assert_array_equal(np.asarray(counts), np.asarray(rcounts))
    np.testing.assert_allclose(np.asarray(fx), np.asarray(rx), rtol=1e-5, atol=1e-6)


def test_a_step_that_contracts_across_lanes_runs_step_by_step(rng):
    n = 24
    x, y = (rng.uniform(-1, 1, n).astype(np.float32) for _ in range(2))

    def gram(x, y):
        def step(carry, _):
            x, y = carry
            h = fnp.stack([x, y], axis=1)                   # [N, 2]
            g = h.T @ h                                     # [2, 2]: sums over the lanes
            return (fnp.tanh(x * g[0, 1]), fnp.tanh(y + g[1, 1] / n)), x * g[0, 0]
        return lax.scan(step, (x, y), None, length=4)

    (d,) = decisions(gram, x, y)
    assert not d["fuse"] and "combines or moves the lanes" in d["reason"]
    (fx, _), fg = fusionjit.jit(gram)(x, y)
    wx, wy, wg = x.copy(), y.copy(), []
    for _ in range(4):
        h = np.stack([wx, wy], axis=1)
        g = h.T @ h
        wg.append(wx * g[0, 0])
        wx, wy = np.tanh(wx * g[0, 1]), np.tanh(wy + g[1, 1] / n)
    np.testing.assert_allclose(np.asarray(fx), wx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(fg), np.stack(wg), rtol=1e-4, atol=1e-5)

@pytest.mark.parametrize("n, reduce", [(2, "max"), (17, "max"), (17, "sum"), (40, "sum")])
def test_a_per_step_reduction_the_step_reads_again_runs_step_by_step(n, reduce, rng):
    """A reduction over the lanes stacked as a step's output and read by the step itself
    (the next carry is computed from it, as a differentiated scan keeps a step's max): not
    one kernel, whose lanes would each see their own partial result. Fused, the carry came
    from one lane's values (a wrong gradient, seed 10166 of tests/test_grad_fuzz_loops.py)
    or from a scalar where a vector was expected (invalid LLVM IR, seed 97)."""
    x = rng.uniform(-1, 1, n).astype(np.float32)
    red = {"max": (fnp.max, np.max), "sum": (fnp.sum, np.sum)}[reduce]

    def roll(x, red):
        def step(c, _):
            m = red(c)
            return fnp.broadcast_to(-m, c.shape), m
        return lax.scan(step, x, None, length=4)

    (d,) = decisions(lambda x: roll(x, red[0]), x)
    assert not d["fuse"] and "combines or moves the lanes" in d["reason"]
    c, ms = fusionjit.jit(lambda x: roll(x, red[0]))(x)
    wc, wm = x.astype(np.float64), []
    for _ in range(4):
        wm.append(red[1](wc))
        wc = np.full(n, -wm[-1])
    np.testing.assert_allclose(np.asarray(ms), wm, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(c), wc, rtol=1e-5, atol=1e-5)


# --- found by the loops fuzzer (tests/fuzz_loops.py) ------------------------------------

def test_a_loop_in_the_step_of_a_loop_fused_whole():
    # Loops seed 65, shrunk: the inner loop updates the small carry, the lanes read it.
    # Whole-loop fusion of the outer loop took in the inner loop, already one kernel of its
    # own (codegen: "no elemental rule for get-tuple-element"); the outer loop now runs
    # step by step and says why.
    def f(lanes, u):
        def step(i, c):
            lanes, u = c
            return lanes + u[0], lax.fori_loop(0, 2, lambda j, v: v * 0.5, u)
        return lax.fori_loop(0, 2, step, (lanes, u))

    lanes, u = np.ones(34, np.float32), np.array([1.0, 2.0, 3.0], np.float32)
    got = fusionjit.jit(f, fusion="fusionjit")(lanes, u)
    want = fusionjit.jit(f, fusion="xla")(lanes, u)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    reasons = [d["reason"] for d in decisions(f, lanes, u)]
    assert any("a loop that runs as one kernel of its own" in r for r in reasons), reasons


@pytest.mark.parametrize("read_as", ["closure", "initial carry"])
def test_a_value_computed_before_a_loop_fused_whole_has_an_explained_boundary(read_as):
    # Loops seeds 20, 84 and 1319, shrunk (77 of 1318 loop programs hit this).
    def f(x, u):
        m = fnp.tanh(x)
        if read_as == "closure":
            return lax.scan(lambda c, _: (c * 0.5 + m, None), u, None, length=3)[0]
        return lax.scan(lambda c, _: (c * 0.5 + 1.0, None), m, None, length=3)[0]

    ex = fusionjit.explain(f, fusion="fusionjit")(np.ones(3, np.float32), np.zeros(3, np.float32))
    assert ex.num_kernels == 2
    assert [str(b) for b in ex.boundaries if b.rule == "no-decision"] == []
    assert any("computed again in every step" in str(b) for b in ex.boundaries), ex.boundaries


def test_a_per_step_reduction_with_keepdims_next_to_an_unchanged_carry():
    # Loops seed 107, shrunk: the lanes pass through; each step keeps max(x) as a [1] row.
    def f(lanes, xs):
        return lax.scan(lambda c, x: (c, fnp.max(x, keepdims=True)), lanes, xs)

    lanes, xs = np.ones(64, np.int32), np.array([[1, 5], [7, 2]], np.int32)
    c, ys = fusionjit.jit(f, fusion="fusionjit")(lanes, xs)
    np.testing.assert_array_equal(np.asarray(c), lanes)
    np.testing.assert_array_equal(np.asarray(ys), [[5], [7]])
    last = fusionjit.jit(lambda lanes, xs: f(lanes, xs)[1][-1], fusion="fusionjit")(lanes, xs)
    np.testing.assert_array_equal(np.asarray(last), [7])


def test_a_chain_of_key_splits_compiles_in_seconds():
    # Loops seeds 371 (a hang after 120 s) and 167 (unroll=33 of split + uniform), shrunk:
    # the cost model unrolled the chain by 8; the unrolled body is now kept small.
    p = run_script("""
        import numpy as np, fusionjit, fusionjit.random as random
        from fusionjit import lax
        f = fusionjit.jit(lambda key: lax.scan(lambda k, _: (random.split(k)[0], None), key,
                                               None, length=16)[0])
        print(np.asarray(f(np.array([1, 1], np.uint32))).tolist())
    """, timeout=15)
    assert p.returncode == 0, p.stderr[-2000:]


def test_a_chain_of_key_splits_the_user_unrolls_compiles_in_seconds():
    # Was an xfail: the 16 key splits fused into one kernel, where the first splits' ops
    # were emitted 64 or more times per element (about 12 s of instruction fusion). The
    # 'code-size' rule refuses such fusions: 6 kernels, about 2.5 s.
    p = run_script("""
        import numpy as np, fusionjit, fusionjit.random as random
        from fusionjit import lax
        f = fusionjit.jit(lambda key: lax.scan(lambda k, _: (random.split(k)[0], None), key,
                                               None, length=16, unroll=16)[0])
        print(np.asarray(f(np.array([1, 1], np.uint32))).tolist())
    """, timeout=10 if fusionjit.config.fusionjit_default_backend == "cpu" else 30)
    # (The emulated GPU run assembles each kernel's PTX with ptxas too: 7-8 s unloaded.)
    assert p.returncode == 0, p.stderr[-2000:]


@pytest.mark.parametrize("shape", [(1,), (1, 1)])
def test_a_one_element_carry_that_reads_the_loop_index(shape):
    # Loops seed 289, shrunk: the carry was min(lanes, keepdims=True) in a while loop's step.
    def f(v):
        return lax.fori_loop(0, 3, lambda i, v: v + i.astype(np.float32), v)

    got = fusionjit.jit(f, fusion="fusionjit")(np.ones(shape, np.float32))
    np.testing.assert_array_equal(np.asarray(got), np.full(shape, 4.0, np.float32))


@pytest.mark.parametrize("reduce", ["sum", "max", "any"])
def test_stacked_outputs_only_reduced_after_the_loop_are_reduced_in_it(reduce, rng):
    # A vmapped rollout's per-environment rewards [T, N], summed over environments after the
    # scan: the loop reduces each step's row instead, and runs as one kernel writing [T].
    n, t = 2048, 50
    x = rng.uniform(-1, 1, n).astype(np.float32)

    def f(x):
        def step(c, _):
            c = c * 0.9 + fnp.sin(c)
            return c, (c * c, c > 0.5, c * 2)
        c, (sq, up, tw) = lax.scan(step, x, None, length=t)
        rows = {"sum": sq.sum(1), "max": sq.max(1), "any": up.any(1)}[reduce]
        return c, rows, tw[:, :3].sum(1)    # tw is read otherwise: it stays stacked

    want = [np.asarray(o) for o in fusionjit.jit(f, fusion="xla")(x)]
    compiled = fusionjit.jit(f).lower(x).compile()
    got = [np.asarray(o) for o in compiled(x)]
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6)
    loop = [k for k in compiled.kernels if k["kind"] == "kWholeLoop"]
    assert len(loop) == 1
    # tw's rows ([t, n] floats) are written for the slice; the reduced rows are not.
    assert t * n * 4 <= loop[0]["bytes_written"] < t * n * 4 + t * n


def test_vmapped_cartpole_writes_no_per_environment_rows(rng):
    import fusionjit.random as fr
    state, key = rng.uniform(-0.05, 0.05, (4, 512)).astype(np.float32), fr.PRNGKey(0)

    def one(s, k):
        def step(c, k):
            s = physics(fnp, *c, fr.bernoulli(k))
            done = done_of(s[0], s[2])
            return tuple(fnp.where(done, 0.0, v) for v in s), done.astype(np.int32)
        return lax.scan(step, tuple(s), fr.split(k, 100))

    def rollout(s, k):
        final, done = fusionjit.vmap(one, in_axes=(1, None), out_axes=(0, 1))(s, k)
        return final, done.sum(1)

    compiled = fusionjit.jit(rollout).lower(state, key).compile()
    (loop,) = [k for k in compiled.kernels if k["kind"] == "kWholeLoop"]
    assert loop["bytes_written"] < 100 * 512 * 4       # not the [100, 512] done flags
    got = compiled(state, key)
    want = fusionjit.jit(rollout, fusion="xla")(state, key)
    np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))


def test_a_vmapped_step_that_stacks_its_state_runs_as_one_kernel(rng):
    # gymnax style: one environment's state is a [4] array, stacked again each step; vmapped
    # it is [N, 4], split into its columns (the carry split along the last axis) so that
    # the loop runs as one kernel, as the hand-batched [4, N] state does.
    n, t = 512, 30
    state = rng.uniform(-0.05, 0.05, (n, 4)).astype(np.float32)
    state[:, 0] *= 40
    actions = rng.random((n, t)) < 0.5

    def one(s, acts):
        def step(s, a):
            new = fnp.stack(physics(fnp, s[0], s[1], s[2], s[3], a))
            done = done_of(new[0], new[2])
            return fnp.where(done, fnp.zeros(4), new), done
        return lax.scan(step, s, acts)

    batched = fusionjit.jit(fusionjit.vmap(one))
    compiled = batched.lower(state, actions).compile()
    assert [k["kind"] for k in compiled.kernels].count("kWholeLoop") == 1, compiled.kernels
    got = [np.asarray(o) for o in compiled(state, actions)]
    want = [np.asarray(o) for o in fusionjit.jit(fusionjit.vmap(one), fusion="xla")(
        state, actions)]
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-7)
    assert got[1].any()


def newton_sqrt(a):
    """One example's while loop: how many steps it takes depends on its value."""
    def body(c):
        x, n = c
        return 0.5 * (x + a / x), n + 1
    return lax.while_loop(lambda c: fnp.abs(c[0] * c[0] - a) > 1e-4 * a, body, (a, 0))


def newton_sqrt_numpy(a):
    xs, ns = [], []
    for v in a:
        x, n = v, 0
        while np.abs(x * x - v) > np.float32(1e-4) * v:
            x, n = np.float32(0.5) * (x + v / x), n + 1
        xs.append(x)
        ns.append(n)
    return np.array(xs, np.float32), np.array(ns, np.int32)


@pytest.mark.parametrize("n", [4099, 64, 17, 1])
def test_a_vmapped_while_loop_runs_as_one_kernel_whose_lanes_stop_one_by_one(n, rng):
    a = rng.uniform(0.01, 100, n).astype(np.float32)
    a[::5] = 1.0   # done before the first step
    a[1::7] = 9e4  # the longest
    f = fusionjit.vmap(newton_sqrt)
    (d,) = decisions(f, a)
    assert d["fuse"] and "lanes stop one by one" in d["reason"]
    assert fusionjit.testing.launch_counts(f)(a)["loops"] == []
    got = fusionjit.jit(f)(a)
    want = fusionjit.jit(f, fusion="xla")(a)   # step by step, all lanes every step
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    x, steps = newton_sqrt_numpy(a)
    np.testing.assert_array_equal(np.asarray(got[1]), steps)
    np.testing.assert_allclose(np.asarray(got[0]), x, rtol=1e-6)
    if n > 17:
        assert len(set(steps.tolist())) > 3


def test_a_while_loop_over_lanes_runs_whole_only_where_done_lanes_stay_as_they_are(rng):
    x = rng.uniform(0.1, 30, 1000).astype(np.float32)

    def doubling(body):
        return lambda x: lax.while_loop(lambda c: fnp.any(c < 10.0), body, x)

    def reference(x, grow):
        x = x.copy()
        while (x < 10.0).any():
            x = np.where(grow(x), x * 2, x).astype(np.float32)
        return x

    frozen = doubling(lambda c: fnp.where(c < 10.0, c * 2.0, c))
    every_lane = doubling(lambda c: c * 2.0)              # also the lanes that are done
    other_predicate = doubling(lambda c: fnp.where(c < 20.0, c * 2.0, c))
    (d,) = decisions(frozen, x)
    assert d["fuse"]
    want = reference(x, lambda v: v < 10)
    np.testing.assert_array_equal(np.asarray(fusionjit.jit(frozen)(x)), want)
    for f, grow in ((every_lane, lambda v: v == v), (other_predicate, lambda v: v < 20)):
        (d,) = decisions(f, x)
        assert not d["fuse"] and "not select(predicate, next, carry)" in d["reason"], d["reason"]
        np.testing.assert_array_equal(np.asarray(fusionjit.jit(f)(x)), reference(x, grow))


def test_a_vmapped_while_loop_over_rows_runs_step_by_step_and_says_why(rng):
    def halve_until_small(v):   # one example's state is a row: the lanes are not the examples
        return lax.while_loop(lambda c: fnp.sum(c * c) > 1.0, lambda c: c * 0.5, v)

    x = rng.uniform(-4, 4, (50, 3)).astype(np.float32)
    f = fusionjit.vmap(halve_until_small)
    (d,) = decisions(f, x)
    assert not d["fuse"] and "holds a row for each lane" in d["reason"], d["reason"]
    want = np.array([r * np.float32(0.5) ** max(0, int(np.ceil(np.log2(np.sqrt((r * r).sum())))))
                     for r in x])
    got = np.asarray(fusionjit.jit(f)(x))
    assert (np.sum(got * got, axis=1) <= 1.0).all()
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_random_vmapped_while_loops_match_the_step_by_step_loop(seed):
    """Random elementwise steps, per-example trip counts (a limit, a flag, a bound on the
    state): the lanes stopping one by one must give the xla profile's results bit for bit."""
    rng = np.random.default_rng(seed)
    unary = [fnp.sin, fnp.tanh, fnp.abs, lambda v: -v, fnp.exp, lambda v: fnp.minimum(v, 3.0)]
    binary = [lambda a, b: a + b, lambda a, b: a * b, fnp.maximum,
              lambda a, b: fnp.where(a > b, a, b * 0.5)]
    for _ in range(6):
        nc, kind = int(rng.integers(1, 4)), int(rng.integers(3))
        ops = [(rng.integers(len(unary)), rng.integers(len(binary)), rng.integers(nc),
                rng.integers(nc), np.float32(rng.standard_normal())) for _ in range(nc)]

        def one(x, limit, nc=nc, kind=kind, ops=ops):
            def cond(c):
                xs, n, flag = c
                return [n < limit, (n < limit) & flag, (fnp.abs(xs[0]) < 50.0) & (n < limit)][kind]

            def body(c):
                xs, n, flag = c
                new = [fnp.clip(binary[b](unary[u](xs[i]), xs[j] * w) + 0.1, -100.0, 100.0)
                       for u, b, i, j, w in ops]
                return new, n + 1, flag & (new[0] < 5.0)
            return lax.while_loop(cond, body, ([x * (k + 1) for k in range(nc)], 0, x > -1.0))

        n = int(rng.choice([1, 7, 33, 300]))
        args = (rng.standard_normal(n).astype(np.float32), rng.integers(0, 12, n).astype(np.int32))
        f = fusionjit.vmap(one)
        (d,) = decisions(f, *args)
        assert d["fuse"], d["reason"]
        got = fusionjit.tree_util.tree_leaves(fusionjit.jit(f)(*args))
        want = fusionjit.tree_util.tree_leaves(fusionjit.jit(f, fusion="xla")(*args))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("seed", range(3))
def test_a_fori_loop_to_a_bound_known_when_it_runs_is_one_kernel(seed):
    """The condition is the same for every lane (a counter against a traced bound): every
    block of lanes runs it and steps as often as the loop; bit for bit the step-by-step loop."""
    rng = np.random.default_rng(seed)
    unary = [fnp.sin, fnp.tanh, lambda v: -v, fnp.exp, lambda v: fnp.minimum(v, 3.0)]
    for _ in range(5):
        u, scale = rng.integers(len(unary)), np.float32(rng.standard_normal())

        def f(x, v, n, u=u, scale=scale):
            def body(i, c):
                x, v = c
                return fnp.clip(x + 0.1 * v, -50.0, 50.0), v * scale + unary[u](x) + 0.01 * i
            return lax.fori_loop(0, n, body, (x, v))

        lanes = int(rng.choice([1, 7, 33, 300]))
        x, v = (rng.standard_normal(lanes).astype(np.float32) for _ in range(2))
        n = np.int32(rng.integers(0, 12))
        (d,) = decisions(f, x, v, n)
        assert d["fuse"] and "before each step" in d["reason"], d["reason"]
        got = fusionjit.jit(f)(x, v, n)
        want = fusionjit.jit(f, fusion="xla")(x, v, n)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    assert fusionjit.testing.launch_counts(f)(x, v, n)["loops"] == []


def test_a_scalar_while_loop_runs_in_one_kernel_and_one_reading_across_lanes_does_not(rng):
    def grow(x):
        return lax.while_loop(lambda c: c[0] < 1000.0, lambda c: (c[0] * 1.5 + 1, c[1] + 1), (x, 0))

    (d,) = decisions(grow, np.float32(1.0))
    assert d["fuse"] and "one lane" in d["reason"]
    x, steps = fusionjit.jit(grow)(np.float32(1.0))
    want = np.float32(1.0)
    for _ in range(int(steps)):
        want = want * np.float32(1.5) + np.float32(1)
    assert int(steps) == 15 and float(x) == float(want) and float(x) >= 1000

    def first_lane(x):   # each block of lanes would test a different lane
        return lax.while_loop(lambda c: c[0] < 100.0, lambda c: c * 2.0, x)

    x = rng.uniform(1, 2, 64).astype(np.float32)
    (d,) = decisions(first_lane, x)
    assert not d["fuse"] and "in its condition" in d["reason"], d["reason"]
    got = np.asarray(fusionjit.jit(first_lane)(x))
    k = int(np.ceil(np.log2(100.0 / x[0])))
    np.testing.assert_array_equal(got, x * np.float32(2.0) ** k)


def rnn_loss(params, xs):
    w, u, b = params

    def step(h, x):
        h = fnp.tanh(w @ h + u * x + b)
        return h, h.sum()
    _, ys = lax.scan(step, fnp.zeros(w.shape[0], fnp.float32), xs)
    return (ys ** 2).mean()


@pytest.mark.parametrize("hidden", [6, 32])
def test_a_small_recurrent_gradient_computes_what_its_lanes_share_once_a_step(hidden):
    # The gradient's loop over time runs as one kernel whose lanes are the weights' [h, h]
    # (36 lanes: a wide vector and 4 left over); the hidden units' derivatives, the same for
    # every lane, are computed once a step into a buffer the lanes read, not again for each
    # lane and for each element of the next state's product (hidden 6, 500 steps: 970 us,
    # then 55 us; JAX 110).
    # (Its own generator: the module's gave it other weights whenever the workers took the
    # tests in another order.)
    rng = np.random.default_rng(hidden)
    params = (rng.normal(0, 0.3, (hidden, hidden)).astype(np.float32),
              rng.normal(0, 1, hidden).astype(np.float32),
              rng.normal(0, 0.1, hidden).astype(np.float32))
    xs = rng.normal(0, 1, 60).astype(np.float32)
    grad = fusionjit.jit(fusionjit.grad(rnn_loss))
    got = grad(params, xs)
    want = fusionjit.jit(fusionjit.grad(rnn_loss), fusion="xla")(params, xs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=1e-7)
    # Against BPTT in float64.
    w, u, b = (p.astype(np.float64) for p in params)
    hs = [np.zeros(hidden)]
    for x in xs.astype(np.float64):
        hs.append(np.tanh(w @ hs[-1] + u * x + b))
    dh, dw, du, db = np.zeros(hidden), np.zeros_like(w), np.zeros(hidden), np.zeros(hidden)
    for t in range(len(xs), 0, -1):
        dz = (dh + 2 * hs[t].sum() / len(xs)) * (1 - hs[t] ** 2)
        dw += np.outer(dz, hs[t - 1])
        du += dz * xs[t - 1]
        db += dz
        dh = w.T @ dz
    # (float32 sums over 60 steps of terms up to the gradient's size: where they cancel,
    # off by up to 1e-5 of its largest element over 12 draws of the weights; 2e-5 absolute
    # failed once, at 3.9e-5 of a gradient up to 4)
    for g, r in zip(got, (dw, du, db)):
        np.testing.assert_allclose(np.asarray(g), r, rtol=2e-4, atol=4e-5 * np.abs(r).max())
    if hidden == 6:
        llvm = grad.lower(params, xs).as_text("llvm")
        assert "shared." in llvm


def test_a_step_reads_its_array_constants_not_the_carry():
    # x.at[1].set(v) in a loop lowers to a select with a padded mask that folds to an array
    # constant inside the whole-loop kernel's step; the step's reader took it for carry 0
    # (hunt 6: [F, F, F] for [F, T, F], the padded ones added as zeros, or LLVM refusing the
    # IR). Each is checked against NumPy and the kernel must be a whole loop.
    cases = [
        (lambda: lax.fori_loop(0, 3, lambda i, c: c.at[1].set(True), fnp.zeros(3, bool)),
         np.array([False, True, False])),
        (lambda: lax.fori_loop(0, 4, lambda i, c: c + fnp.pad(fnp.ones(1), (0, 2)),
                               fnp.zeros(3)), np.array([4.0, 0, 0])),
        (lambda: lax.scan(lambda c, x: (x.at[1].set(c[0]),) * 2, fnp.zeros(3),
                          fnp.arange(12.0).reshape(4, 3))[1],
         np.array([[0, 0, 2], [3, 0, 5], [6, 3, 8], [9, 6, 11.0]])),
        (lambda: lax.fori_loop(0, 4, lambda i, c: c.at[0].add(1.0) * 1.5, fnp.zeros((64, 3))),
         np.zeros((64, 3))),
    ]
    want_last = np.zeros((64, 3))
    for _ in range(4):
        want_last[0] += 1
        want_last *= 1.5
    cases[-1] = (cases[-1][0], want_last)
    for f, want in cases:
        np.testing.assert_array_equal(np.asarray(fusionjit.jit(f)()), want)
    text = fusionjit.jit(cases[0][0]).lower().as_text("optimized")
    assert "kWholeLoop" in text and "constant(" in text
