"""Loops and branches (lax.scan, fori_loop, while_loop, cond, switch, map): results against
NumPy reference loops and against JAX where installed, pytrees, reverse, lengths 0 and 1,
nested control flow, closures over traced values, eager use, and the errors misuse gets."""

from __future__ import annotations

import re

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
from fusionjit import lax

from conftest import HAVE_JAX, assert_close, requires_jax


def _leaves(tree):
    return fusionjit.tree_util.tree_leaves(tree)


def assert_trees_close(got, want, rtol=1e-5, atol=1e-6):
    g, w = _leaves(got), _leaves(want)
    assert len(g) == len(w)
    for a, b in zip(g, w):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


# --- scan ----------------------------------------------------------------------------------

def np_scan(f, init, xs, length=None, reverse=False):
    """The reference: a Python loop over NumPy values."""
    n = length if xs is None else len(_leaves(xs)[0])
    carry, ys = init, []
    steps = range(n - 1, -1, -1) if reverse else range(n)
    for t in steps:
        x = None if xs is None else fusionjit.tree_util.tree_map(lambda a: a[t], xs)
        carry, y = f(carry, x)
        ys.append(y)
    if reverse:
        ys = ys[::-1]
    if not ys:
        return carry, None
    stacked = fusionjit.tree_util.tree_map(lambda *v: np.stack(v), *ys)
    return carry, stacked


def physics_step(carry, x):
    a, b = carry
    a = a * np.float32(0.9) + x["x"]
    b = b + np.cos(x["y"]) * a.sum()
    return (a, b), {"s": a + b, "t": x["x"] * 2}


def fj_step(carry, x):
    a, b = carry
    a = a * 0.9 + x["x"]
    b = b + fnp.cos(x["y"]) * a.sum()
    return (a, b), {"s": a + b, "t": x["x"] * 2}


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("length", [0, 1, 7])
def test_scan_over_pytrees_matches_a_python_loop(length, reverse, rng):
    xs = {"x": rng.random((length, 3), np.float32), "y": rng.random(length).astype(np.float32)}
    init = (np.zeros(3, np.float32), np.float32(0.5))
    got = fusionjit.jit(lambda c, xs: lax.scan(fj_step, c, xs, reverse=reverse))(init, xs)
    want_carry, want_ys = np_scan(physics_step, init, xs, reverse=reverse)
    assert_trees_close(got[0], want_carry)
    if length:
        assert_trees_close(got[1], want_ys)
    else:
        assert got[1]["s"].shape == (0, 3) and got[1]["t"].shape == (0, 3)


@pytest.mark.parametrize("unroll", [1, 2, 3, 5, 7, 8, True, 0])
def test_scan_results_do_not_depend_on_unroll(unroll, rng):
    xs = rng.random((7, 4), np.float32)

    def f(c, x):
        c = fnp.sin(c) + x
        return c, c.sum()

    got = fusionjit.jit(lambda xs: lax.scan(f, fnp.zeros(4), xs, unroll=unroll))(xs)
    want = np_scan(lambda c, x: (np.sin(c) + x, (np.sin(c) + x).sum()), np.zeros(4, np.float32), xs)
    assert_trees_close(got, want)


def test_scan_without_xs_uses_length():
    got = fusionjit.jit(lambda c: lax.scan(lambda c, _: (c + 1.0, c * c), c, None, length=4))(
        np.float32(1.5))
    assert_trees_close(got, (np.float32(5.5), np.array([1.5, 2.5, 3.5, 4.5], np.float32) ** 2))


def test_scan_closes_over_traced_and_concrete_values(rng):
    w = np.arange(3, dtype=np.float32)

    @fusionjit.jit
    def f(xs, scale):
        return lax.scan(lambda c, x: (c + scale * x * w, c.sum()), fnp.zeros(3), xs)

    xs = rng.random((5, 3), np.float32)
    carry, ys = f(xs, np.float32(2))
    want = np_scan(lambda c, x: (c + 2 * x * w, c.sum()), np.zeros(3, np.float32), xs)
    assert_trees_close((carry, ys), want)


def test_scan_with_random_keys_split_in_the_loop():
    def body(key, _):
        key, sub = fusionjit.random.split(key)
        return key, fusionjit.random.uniform(sub, (3,))

    got = fusionjit.jit(lambda k: lax.scan(body, k, None, length=4))(fusionjit.random.PRNGKey(0))
    key, want = fusionjit.random.PRNGKey(0), []
    for _ in range(4):
        key, sub = fusionjit.random.split(key)
        want.append(np.asarray(fusionjit.random.uniform(sub, (3,))))
    np.testing.assert_array_equal(np.asarray(got[1]), np.stack(want))
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(key))


# Found by the loops fuzzer (seed 920208): fusion grew a kernel one producer at a time by
# rebuilding it, and priced and counted the whole kernel again for every candidate producer,
# so compile time grew with the cube of a fully unrolled scan's length (this program: 188 s
# under the default profile). Producers are now fused in place, with the kernel's counts and
# cost kept per kernel (16 s here with the IR verifier on, half of it LLVM; 32 steps take
# about 4x as long: a kernel is priced anew after each producer). Not a benchmark: a bound
# far above today's time that the old growth exceeds three times over.
@pytest.mark.parametrize("profile", ["fusionjit", "xla"])
def test_a_fully_unrolled_scan_with_key_splits_compiles_in_seconds(profile):
    import time

    def step(carry, _):
        a, b, i, key = carry
        key, sub = fusionjit.random.split(key)
        coin = fusionjit.random.bernoulli(sub, 0.3, (2,))
        both = b.astype(bool) * coin
        stacked = fnp.stack([coin, both, coin], axis=0) + both
        b = fnp.sin(b + np.float32(0.5) * fnp.tanh(a))
        return (fnp.tanh(b), b, i + 1, key), (i + 1, b, stacked)

    def program(a, b, key):
        return lax.scan(step, (a, b, np.int32(0), key), None, length=16, unroll=16)

    a = np.array([-0.2, 1.7], np.float32)
    b = np.array([-0.6, -0.1], np.float32)
    key = fusionjit.random.PRNGKey(3)
    f = fusionjit.jit(program, fusion=profile)
    start = time.perf_counter()
    f.lower(a, b, key).compile()
    seconds = time.perf_counter() - start
    assert seconds < 60, f"compiling a 16-step unrolled scan took {seconds:.1f} s"
    (_, b_end, steps, _), (counts, bs, _) = f(a, b, key)
    assert int(steps) == 16 and np.asarray(counts).tolist() == list(range(1, 17))
    want = b.copy()
    for _ in range(16):
        want = np.sin(want + np.float32(0.5) * np.tanh(a))
        a = np.tanh(want)
    np.testing.assert_allclose(np.asarray(b_end), want, rtol=1e-5, atol=1e-6)


# Found by the loops fuzzer (seed 923633): a fully unrolled scan stacks each step's output
# with a chain of dynamic-update-slices at constant indices; a program that read one step's
# output (`ys[0]`) computed every step's in the kernel that read it (the xla profile: 20 s
# of compilation, 130k lines of LLVM IR for that kernel). A slice of such an update chain
# now reads the one update it falls in, or what lies below the updates it misses.
@pytest.mark.parametrize("profile", ["xla", "fusionjit"])
def test_reading_one_step_of_an_unrolled_scan_computes_only_the_steps_it_needs(profile, rng):
    def program(x):
        def step(c, _):
            c = fnp.sin(c) * np.float32(1.5)
            return c, c
        return lax.scan(step, x, None, length=12, unroll=12)[1][3]

    x = rng.random(64, np.float32)
    f = fusionjit.jit(program, fusion=profile)
    text = f.lower(x).as_text("optimized")
    assert len(re.findall(r" sine\(", text)) == 4, text   # steps 0 to 3
    want = x.copy()
    for _ in range(4):
        want = np.sin(want) * np.float32(1.5)
    assert_close(f(x), want, rtol=1e-6)


def test_slices_of_an_unrolled_scans_stacked_outputs_match_numpy(rng):
    # Slices that read one step, several, none of the last steps (strided past them) or
    # parts of steps: each simplifies or not, and gives NumPy's values.
    def stacked(x):
        def step(c, _):
            c = c * np.float32(0.5) + np.float32(1)
            return c, c
        return lax.scan(step, x, None, length=9, unroll=9)[1]

    x = rng.random((3, 5), np.float32)
    want = []
    c = x.copy()
    for _ in range(9):
        c = c * np.float32(0.5) + np.float32(1)
        want.append(c)
    want = np.stack(want)
    cases = [np.s_[4], np.s_[2:5], np.s_[1::3], np.s_[::4], np.s_[8:], np.s_[3, 1:],
             np.s_[:, 2], np.s_[5, ::2, 1:4:2], np.s_[0:9:8, 1], np.s_[7:2:-2]]
    for k, index in enumerate(cases):
        got = fusionjit.jit(lambda x, index=index: stacked(x)[index])(x)
        np.testing.assert_array_equal(np.asarray(got), want[index], err_msg=str(k))


def test_dynamic_slices_at_constant_starts_clamp_as_lax():
    # As JAX: a negative start counts from the end, then the start is clamped to fit.
    x = np.arange(10, dtype=np.float32)
    for start in (-3, -13, 0, 4, 7, 9, 100):
        got = fusionjit.jit(lambda x, s=start: lax.dynamic_slice(x, (s,), (3,)))(x)
        first = min(max(start + 10 if start < 0 else start, 0), 7)
        np.testing.assert_array_equal(np.asarray(got), x[first:first + 3], err_msg=str(start))
        lo = max(first - 1, 0)   # one element before the update, where there is one
        got = fusionjit.jit(lambda x, s=start: lax.dynamic_update_slice(
            x, np.full(3, -1, np.float32), (s,))[lo:first + 4])(x)
        want = x.copy()
        want[first:first + 3] = -1
        np.testing.assert_array_equal(np.asarray(got), want[lo:first + 4], err_msg=str(start))


def test_scan_runs_eagerly_outside_jit_compiled_once():
    from fusionjit._src.dispatch import stats
    xs = np.arange(4, dtype=np.float32)

    def f(c, x):
        return c + x, c

    carry, ys = lax.scan(f, 0.0, xs)
    assert float(carry) == 6.0
    np.testing.assert_array_equal(np.asarray(ys), [0, 0, 1, 3])
    stats.reset()
    for _ in range(3):
        lax.scan(f, 0.0, xs)
    assert stats.compiles == 0


def test_map_applies_a_function_to_each_slice(rng):
    xs = rng.random((5, 3), np.float32)
    got = fusionjit.jit(lambda xs: lax.map(lambda x: x.sum() * 2, xs))(xs)
    np.testing.assert_allclose(np.asarray(got), xs.sum(1) * 2, rtol=1e-6)


# --- fori_loop and while_loop ----------------------------------------------------------------

def test_fori_loop_with_concrete_and_traced_bounds():
    x = np.ones(4, np.float32)
    want = x.copy()
    for i in range(7):
        want = want * np.float32(1.1) + i
    got = fusionjit.jit(lambda x: lax.fori_loop(0, 7, lambda i, v: v * 1.1 + i, x))(x)
    assert_close(got, want, rtol=1e-6)
    got = fusionjit.jit(lambda x, n: lax.fori_loop(0, n, lambda i, v: v * 1.1 + i, x))(x, 7)
    assert_close(got, want, rtol=1e-6)
    assert_close(fusionjit.jit(lambda x: lax.fori_loop(5, 2, lambda i, v: v + 1, x))(x), x)


def test_while_loop_runs_until_the_condition_fails():
    def cond(c):
        return c[0] < 100.0

    def body(c):
        return c[0] * 2 + c[1], c[1] + 1.0

    got = fusionjit.jit(lambda x: lax.while_loop(cond, body, (x, 1.0)))(np.float32(1))
    c = (1.0, 1.0)
    while c[0] < 100:
        c = (c[0] * 2 + c[1], c[1] + 1)
    assert_trees_close(got, c)
    # Zero iterations.
    got = fusionjit.jit(lambda x: lax.while_loop(cond, body, (x, 1.0)))(np.float32(500))
    assert_trees_close(got, (500.0, 1.0))


# --- cond and switch -------------------------------------------------------------------------

@pytest.mark.parametrize("pred", [True, False, 1, 0, 2.5])
def test_cond_picks_a_branch(pred):
    x = np.arange(3, dtype=np.float32)
    got = fusionjit.jit(lambda p, x: lax.cond(p, lambda a: a * 2, lambda a: a - 1, x))(pred, x)
    assert_close(got, x * 2 if pred else x - 1)
    # Regression: outside jit, cond and switch passed their branches in the wrong place
    # and failed on every call.
    assert_close(lax.cond(pred, lambda a: a * 2, lambda a: a - 1, x), x * 2 if pred else x - 1)


@pytest.mark.parametrize("index", [-3, 0, 1, 2, 9])
def test_switch_clamps_the_index(index):
    x = np.arange(3, dtype=np.float32)
    branches = [lambda a: a * 2, lambda a: a - 1, lambda a: fnp.sin(a)]
    got = fusionjit.jit(lambda i, x: lax.switch(i, branches, x))(np.int32(index), x)
    want = [x * 2, x - 1, np.sin(x)][min(max(index, 0), 2)]
    assert_close(got, want, rtol=1e-6)
    assert_close(lax.switch(index, branches, x), want, rtol=1e-6)


def test_cond_inside_a_loop_and_a_loop_inside_cond():
    def f(x):
        return lax.fori_loop(0, 6, lambda i, v: lax.cond(i % 2 == 0, lambda a: a + 1.0,
                                                         lambda a: a * 2.0, v), x)
    v = 1.0
    for i in range(6):
        v = v + 1 if i % 2 == 0 else v * 2
    assert float(fusionjit.jit(f)(np.float32(1))) == v

    def g(p, x):
        return lax.cond(p, lambda a: lax.fori_loop(0, 4, lambda i, v: v * 2, a), lambda a: a, x)
    assert_close(fusionjit.jit(g)(True, np.ones(3, np.float32)), np.full(3, 16, np.float32))
    assert_close(fusionjit.jit(g)(False, np.ones(3, np.float32)), np.ones(3, np.float32))


def test_nested_loops():
    def f(x):
        def outer(c, xi):
            inner = lax.fori_loop(0, 3, lambda j, v: v + xi * j, c)
            return inner, inner.sum()
        return lax.scan(outer, x, np.arange(4, dtype=np.float32))

    c, ys = np.ones(2, np.float32), []
    for xi in range(4):
        for j in range(3):
            c = c + xi * j
        ys.append(c.sum())
    assert_trees_close(fusionjit.jit(f)(np.ones(2, np.float32)), (c, np.array(ys, np.float32)))


# --- against JAX -----------------------------------------------------------------------------

@requires_jax
@pytest.mark.parametrize("unroll", [1, 3])
def test_loops_agree_with_jax(unroll, rng):
    import jax
    import jax.numpy as jnp

    def program(L, np_):
        def f(x, y, p):
            def body(c, xs):
                a, b = c
                a = a * 0.9 + xs[0]
                b = L.cond(b > 2.0, lambda v: v * 0.5, lambda v: v + np_.sin(xs[1]), b)
                return (a, b), a.sum() + b
            (a, b), ys = L.scan(body, (np_.zeros(3), 0.0), (x, y), unroll=unroll)
            w = L.while_loop(lambda c: c < 50.0, lambda c: c * 1.5 + 1.0, b + 1.0)
            s = L.switch(p, [lambda v: v, lambda v: -v, lambda v: v * v], a)
            return a, b, ys, w, s
        return f

    x = rng.random((9, 3), np.float32)
    y = rng.random(9).astype(np.float32) * 3
    for p in (0, 1, 2):
        got = fusionjit.jit(program(lax, fnp))(x, y, np.int32(p))
        want = jax.jit(program(jax.lax, jnp))(x, y, np.int32(p))
        assert_trees_close(got, want, rtol=2e-5, atol=2e-5)


# --- errors ----------------------------------------------------------------------------------

def test_a_carry_that_changes_dtype_or_shape_is_an_error_naming_the_line():
    with pytest.raises(TypeError, match=r"test_loops.py:\d+.*carry component 0.*f32\[\].*f32\[2\]"):
        fusionjit.jit(lambda x: lax.scan(lambda c, x: (c + x, c), 0.0, x))(
            np.ones((3, 2), np.float32))
    with pytest.raises(TypeError, match="i32.*f32|f32.*i32"):
        fusionjit.jit(lambda x: lax.fori_loop(0, 3, lambda i, v: v * 1.5, x))(np.int32(1))
    with pytest.raises(TypeError, match="same structure"):
        fusionjit.jit(lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: c[0] + 1, (x, x)))(
            np.float32(0))


def test_branches_with_different_outputs_are_an_error():
    with pytest.raises(TypeError, match=r"test_loops.py:\d+.*branches must return the same"):
        fusionjit.jit(lambda p, x: lax.cond(p, lambda a: a, lambda a: a.sum(), x))(
            True, np.ones(3, np.float32))
    with pytest.raises(TypeError, match="branches must return the same"):
        fusionjit.jit(lambda i, x: lax.switch(i, [lambda a: a, lambda a: (a, a)], x))(
            np.int32(0), np.ones(3, np.float32))


def test_bad_predicates_are_errors():
    with pytest.raises(TypeError, match=r"test_loops.py:\d+.*predicate must be a scalar"):
        fusionjit.jit(lambda p, x: lax.cond(p, lambda a: a, lambda a: -a, x))(
            np.array([True, False]), np.ones(3, np.float32))
    with pytest.raises(TypeError, match="cond_fun must return a boolean scalar"):
        fusionjit.jit(lambda x: lax.while_loop(lambda c: c, lambda c: c - 1, x))(
            np.float32(3))
    with pytest.raises(TypeError, match="index must be an integer scalar"):
        fusionjit.jit(lambda i, x: lax.switch(i, [lambda a: a], x))(np.float32(0), np.ones(2))


def test_scan_argument_errors():
    xs = np.ones((3, 2), np.float32)
    with pytest.raises(ValueError, match="length=4 but xs have leading axes"):
        lax.scan(lambda c, x: (c, x), 0.0, xs, length=4)
    with pytest.raises(ValueError, match="give xs or length"):
        lax.scan(lambda c, x: (c, x), 0.0)
    with pytest.raises(ValueError, match="unroll must be >= 0"):
        lax.scan(lambda c, x: (c, x), 0.0, xs, unroll=-1)
    with pytest.raises(TypeError, match="must return a pair"):
        fusionjit.jit(lambda xs: lax.scan(lambda c, x: c, 0.0, xs))(xs)
    with pytest.raises(ValueError, match="different leading axes"):
        lax.scan(lambda c, x: (c, x), 0.0, (xs, np.ones(4)))


assert HAVE_JAX or True  # JAX comparisons run where JAX is installed (CI installs it)


# --- structure: unrolling, launch counts -----------------------------------------------------

def _scan_program(unroll):
    def f(xs):
        return lax.scan(lambda c, x: (fnp.sin(c) * 0.5 + x, c.sum()), fnp.zeros(4), xs,
                        unroll=unroll)
    return f


def test_unroll_leaves_the_traced_program_unchanged_and_grows_the_ir(rng):
    xs = rng.random((10, 4), np.float32)
    programs = {u: str(fusionjit.make_ir(_scan_program(u))(xs)) for u in (1, 3, 10)}
    strip = [re.sub(r"unroll=\d+", "", p) for p in programs.values()]
    assert strip[0] == strip[1] == strip[2]
    sizes = {}
    for u in (1, 3, 10):
        # (Under the xla profile: the fusionjit profile runs this loop as one kernel.)
        text = fusionjit.jit(_scan_program(u), fusion="xla").lower(xs).as_text("optimized")
        sizes[u] = len(text.splitlines())
        has_loop = " while(" in text
        assert has_loop == (u != 10), u   # fully unrolled: no loop left
    assert sizes[1] < sizes[3]


def test_launch_counts_per_call_and_per_iteration(rng):
    xs = rng.random((10, 4), np.float32)
    one = fusionjit.testing.launch_counts(_scan_program(1), fusion="xla")(xs)
    (loop,) = one["loops"]
    assert loop["iterations"] == 10 and loop["launches_per_iteration"] >= 1
    assert one["per_call"] == loop["iterations"] * loop["launches_per_iteration"] + (
        one["per_call"] - loop["iterations"] * loop["launches_per_iteration"])
    five = fusionjit.testing.launch_counts(_scan_program(5), fusion="xla")(xs)
    assert five["loops"][0]["iterations"] == 2
    assert five["per_call"] < one["per_call"]   # the paper's effect of unrolling
    full = fusionjit.testing.launch_counts(_scan_program(True), fusion="xla")(xs)
    assert full["loops"] == []


def test_launch_counts_of_nested_and_data_dependent_loops():
    def g(x):
        def outer(c, xi):
            inner = lax.fori_loop(0, 3, lambda j, v: v + xi * j, c)
            return inner, inner.sum()
        return lax.scan(outer, x, np.arange(4, dtype=np.float32))

    counts = fusionjit.testing.launch_counts(g, fusion="xla")(np.ones(2, np.float32))
    outer, inner = counts["loops"]
    assert outer["iterations"] == 4 and inner["iterations"] == 12
    assert inner["parent"] == outer["name"]
    # The outer loop's launches per iteration include its inner loop's three iterations.
    assert outer["launches_per_iteration"] >= 3 * inner["launches_per_iteration"]
    w = fusionjit.testing.launch_counts(
        lambda x: lax.while_loop(lambda c: c < 100.0, lambda c: c * 2.0, x), fusion="xla")(
            np.float32(1))
    assert w["loops"][0]["iterations"] == 7   # 1, 2, ..., 64, 128


def test_launch_counts_of_loops_after_other_loops_and_kernels():
    # Each loop's counter took arena bytes earlier kernels had used and freed, but counters
    # are zeroed when the program starts: the second and third loops counted from their
    # predecessors' data (2139095043 iterations: an inf plus 3). A nested loop after a
    # kernel of its enclosing body must add up over the outer iterations as well.
    def f(x):
        y = lax.fori_loop(0, 24, lambda i, v: v * 0.5 + fnp.sum(v), x)
        z = lax.fori_loop(0, 20, lambda i, v: v * 0.5 - fnp.max(v), y)

        def outer(c, xi):
            c = c * fnp.sum(c * xi)
            return lax.fori_loop(0, 5, lambda j, v: v * 0.5 + fnp.min(v), c), None
        return lax.scan(outer, z, np.ones((6, 2), np.float32))[0]

    x = np.ones((24, 2), np.float32)
    counts = fusionjit.testing.launch_counts(f, fusion="xla")(x)
    top = sorted(lp["iterations"] for lp in counts["loops"] if not lp["parent"])
    inner = [lp["iterations"] for lp in counts["loops"] if lp["parent"]]
    assert top == [6, 20, 24] and inner == [30], counts
    assert counts["per_call"] < 400, counts
    # The fusionjit profile unrolls the first two by factors of their trip counts.
    counts = fusionjit.testing.launch_counts(f)(x)
    top = [lp["iterations"] for lp in counts["loops"] if not lp["parent"]]
    inner = [lp["iterations"] for lp in counts["loops"] if lp["parent"]]
    assert len(top) == 3 and 24 % top[0] == 0 and 20 % top[1] == 0 and top[2] == 6, counts
    assert inner == [30] and counts["per_call"] < 400, counts


def test_a_scan_of_prng_splits_compiles_in_reasonable_time():
    # The cost model once unrolled this 325-op body 8 times into one kernel: LLVM took
    # ~30 s over it (the xla profile: 0.5 s). The unrolled body is now capped in size.
    import time

    import fusionjit.random as fr

    def draws(key):
        def step(key, _):
            key, k_action, k_reset = fr.split(key, 3)
            return key, (fr.bernoulli(k_action, 0.5, (1,)), fr.uniform(k_reset, (4, 1)))
        return lax.scan(step, key, None, length=40)[1]

    start = time.perf_counter()
    actions, resets = fusionjit.jit(draws)(fr.PRNGKey(0))
    assert time.perf_counter() - start < 10.0
    with fusionjit.disable_jit():
        want_actions, want_resets = draws(fr.PRNGKey(0))
    np.testing.assert_array_equal(np.asarray(actions), np.asarray(want_actions))
    np.testing.assert_array_equal(np.asarray(resets), np.asarray(want_resets))


# Found by the loops fuzzer (seed 920494): under profile 'none' a scan of 13 steps unrolled
# by 8 (its 5 last steps peeled, each with an inner scan) followed by another loop returned a
# wrong final carry. The unrolled loop read the zeros `v5` in place as an unchanged state
# element, which kept their buffer alive to the loop result's last read; the peeled steps'
# inner scans then took that buffer over as their own state (they judged its life by the
# zeros' own last reader) and overwrote it before the `max` over `v5` read it.
def test_a_peeled_unrolled_scan_before_another_loop_under_profile_none():
    F = np.float32

    def program(v1):
        v5 = fnp.zeros((2,), F)

        def f1(c, _):
            v8, v10 = c
            v14 = fnp.max(v5, axis=(0,), keepdims=True)
            _, v31 = lax.scan(lambda c, x: (c, x), v10, v10, length=2)
            return (fnp.sin(v8 + F(0.5) * fnp.tanh(v14)), v31), None

        (v39, v41), _ = lax.scan(f1, (v1, v5), None, length=13, unroll=8)

        def f3(c, _):
            v50, v51 = c
            v66 = fnp.sin(v51 + F(0.5) * fnp.tanh(v50))
            return (v51, v66), v66

        _, v74 = lax.scan(f3, (v41, fnp.cos(v5)), None, length=3, unroll=3)
        return v74[-1], v39

    x = np.linspace(-2, 2, 60).astype(F)
    want = x.copy()
    for _ in range(13):
        want = np.sin(want)
    np.testing.assert_allclose(np.asarray(fusionjit.jit(program, fusion="fusionjit")(x)[1]), want,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(fusionjit.jit(program, fusion="none")(x)[1]), want,
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("profile", ["fusionjit", "xla"])
def test_stacked_outputs_of_one_value_are_each_updated_in_place(profile, rng):
    """A step that outputs one value twice (or a value and the carry, as a differentiated
    scan keeps them): each stacked output is updated in place by a kernel of its own. The
    sibling multi-output fusion of the two updates made one kernel that wrote both whole
    buffers at every step (5.4 ms for 32 steps of [256, 32] instead of 0.39 ms); XLA's
    LegalToFuse refuses a dynamic-update-slice root for this reason."""
    w = (rng.standard_normal((32, 32)) * 0.1).astype(np.float32)
    x = rng.standard_normal((32, 256, 32)).astype(np.float32)

    def f(x):
        def body(h, xt):
            h2 = fnp.tanh(xt + h @ w)
            return h2, (h2, h2, h)
        return lax.scan(body, fnp.zeros((256, 32), np.float32), x)

    explained = fusionjit.explain(f, fusion=profile)(x)
    updates = [k for k in explained.kernels
               if any(op["opcode"] == "dynamic-update-slice" for op in k.ops)]
    assert len(updates) == 3 and all(
        sum(op["opcode"] == "dynamic-update-slice" for op in k.ops) == 1 for k in updates)
    # Each reads and writes its step's row (explain, the launch records and the cost
    # model alike), not the [32, 256, 32] buffer: priced as a copy of the buffer, a stacked
    # output cost 1 MiB of traffic a step, the loop ~45x its measured time.
    row = 256 * 32 * 4
    assert all(k.bytes_written == row and k.bytes_read <= row + 8 for k in updates)
    launched = fusionjit.jit(f, fusion=profile).lower(x).compile().kernels
    launched = [k for k in launched if "dynamic_update_slice" in k["name"]]
    assert len(launched) == 3
    assert all(k["bytes_written"] == row and k["bytes_read"] <= row + 8 for k in launched)
    h, (a, b, prev) = fusionjit.jit(f, fusion=profile)(x)
    want, hs = np.zeros((256, 32), np.float32), []
    for t in range(32):
        hs.append(want)
        want = np.tanh(x[t] + want @ w)
    np.testing.assert_allclose(np.asarray(a), np.asarray(b))
    np.testing.assert_allclose(np.asarray(prev)[1:], np.asarray(a)[:-1])
    np.testing.assert_allclose(np.asarray(h), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(prev), np.stack(hs), rtol=1e-4, atol=1e-5)


def test_a_chain_of_row_updates_in_a_loop_is_written_in_place_in_order(rng):
    # Two updates of the loop's buffer in one kernel (an unrolled scan's rows are a chain of
    # ten): the kernel writes their rows into the buffer, one update after the other (the
    # second overlaps the first and the next row), not the whole buffer every step.
    def f(buf, v):
        def body(i, b):
            b = lax.dynamic_update_slice(b, fnp.full((1, 4), v * i), (i, 0))
            return lax.dynamic_update_slice(b, fnp.full((2, 2), -v * i), (i, 1))
        return lax.fori_loop(0, 7, body, buf)

    buf = rng.normal(0, 1, (8, 4)).astype(np.float32)
    compiled = fusionjit.jit(f).lower(buf, np.float32(1.5)).compile()
    want = buf.copy()
    for i in range(7):
        want[i, :] = 1.5 * i
        want[i:i + 2, 1:3] = -1.5 * i
    np.testing.assert_array_equal(np.asarray(compiled(buf, np.float32(1.5))), want)
    chain = [k for k in compiled.kernels if "dynamic_update_slice" in k["name"]]
    assert [k["bytes_written"] for k in chain] == [(4 + 4) * 4], compiled.kernels


def test_an_unrolled_scans_stacked_rows_go_in_place(rng):
    # A recurrent layer's scan, unrolled ten steps a trip: each trip's ten rows of its
    # stacked states ([500, 6, 1], a product's residual) were one kernel rewriting the whole
    # stack (19 us a trip); they are written in place (0.1 us).
    w = rng.normal(0, 0.3, (6, 6)).astype(np.float32)
    xs = rng.normal(0, 1, 500).astype(np.float32)

    def f(w, xs):
        def step(h, x):
            z = (w @ h[:, None])
            return fnp.tanh(z[:, 0] + x), z
        return lax.scan(step, fnp.zeros(6, fnp.float32), xs, unroll=10)

    compiled = fusionjit.jit(f).lower(w, xs).compile()
    h, zs = compiled(w, xs)
    ref_h, ref_zs = np.zeros(6, np.float32), []
    for x in xs:
        z = w @ ref_h[:, None]
        ref_h = np.tanh(z[:, 0] + x)
        ref_zs.append(z)
    np.testing.assert_allclose(np.asarray(zs), np.stack(ref_zs), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(h), ref_h, rtol=1e-5, atol=1e-6)
    stacked = 500 * 6 * 4
    in_loop = [k for k in compiled.kernels if k["loop"]]
    assert all(k["bytes_written"] < stacked for k in in_loop), in_loop


def test_a_loop_steps_large_update_is_not_walked_element_by_element_beside_its_counter(rng):
    # An RNN gradient's loop step adds outer(dh, h) to the weights' [128, 128] gradient and
    # increments its counter; the two are independent small kernels, but as one horizontal
    # kernel the product would be walked element by element, its row and column derived
    # from the position each time (11.8 us a step, on its own 1.1).
    hidden = 128
    params = (rng.normal(0, 0.1, (hidden, hidden)).astype(np.float32),
              rng.normal(0, 1, hidden).astype(np.float32),
              rng.normal(0, 0.1, hidden).astype(np.float32))
    xs = rng.normal(0, 1, 8).astype(np.float32)

    def loss(params, xs):
        w, u, b = params

        def step(h, x):
            h = fnp.tanh(w @ h + u * x + b)
            return h, h.sum()
        _, ys = lax.scan(step, fnp.zeros(hidden, fnp.float32), xs)
        return (ys ** 2).mean()

    grad = fusionjit.grad(loss)
    compiled = fusionjit.jit(grad).lower(params, xs).compile()
    got = compiled(params, xs)
    want = fusionjit.jit(grad, fusion="xla")(params, xs)
    for g, r in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-4, atol=1e-6)
    both = [k for k in compiled.kernels if k["bytes_written"] == hidden * hidden * 4 + 4]
    assert not both, compiled.kernels
