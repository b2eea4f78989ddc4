"""Donated arguments (jit's donate_argnums/donate_argnames): an output takes the donated
array's buffer over, as in JAX, and the array is deleted. The replay buffer's insert, the
optimiser's step and a loop carrying a buffer then change it in place instead of copying
it. A buffer something else still reads (a NumPy view, another argument) is not taken."""
from __future__ import annotations

import functools
import sys
import threading
import warnings

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
from fusionjit import lax
from conftest import assert_close

# The CPU backend takes donated buffers over; the GPU's arguments are device copies.
pytestmark = pytest.mark.cpu_only


def address(x) -> int:
    """Where x's elements are (the NumPy view made here is gone when this returns)."""
    return np.asarray(x).ctypes.data


def aliases(jitted, *args):
    return jitted.lower(*args).compile()._entry.compilation.executable.output_aliases


def test_a_replay_buffer_insert_writes_the_rows_into_the_donated_buffer():
    insert = fusionjit.jit(lambda buf, rows, i: lax.dynamic_update_slice_in_dim(buf, rows, i, 0),
                           donate_argnums=0)
    buf = fnp.zeros((1000, 4))
    where = address(buf)
    expected = np.zeros((1000, 4), np.float32)
    rows = np.arange(8, dtype=np.float32).reshape(2, 4)
    for step in range(5):  # the first call traces (Python's path), the rest the C++ one
        new = insert(buf, rows + step, 2 * step)
        expected[2 * step:2 * step + 2] = rows + step
        assert buf.is_deleted() and not new.is_deleted()
        assert address(new) == where
        buf = new
    np.testing.assert_array_equal(buf, expected)
    # Updated in place: the kernel writes the two rows, not the 1000.
    assert aliases(insert, buf, rows, 0) == [(0, True)]
    kernels = insert.lower(buf, rows, 0).compile().kernels
    assert [k["bytes_written"] for k in kernels] == [rows.nbytes]


def test_a_ring_buffer_scatter_is_in_place_and_matches_numpy():
    @functools.partial(fusionjit.jit, donate_argnums=0)
    def add(buf, batch, ptr):
        idx = (ptr + fnp.arange(batch.shape[0])) % buf.shape[0]
        return buf.at[idx].set(batch)

    rng = np.random.default_rng(0)
    buf, expected = fnp.zeros((50, 3)), np.zeros((50, 3), np.float32)
    where = address(buf)
    for ptr in (0, 16, 32, 48):  # the last wraps around
        batch = rng.standard_normal((16, 3)).astype(np.float32)
        buf = add(buf, batch, ptr)
        expected[(ptr + np.arange(16)) % 50] = batch
    np.testing.assert_array_equal(buf, expected)
    assert address(buf) == where
    assert aliases(add, buf, batch, 0) == [(0, True)]


def test_an_optimizer_step_writes_each_parameter_over_its_old_value():
    def sgd(params, grads, lr):
        return fusionjit.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)

    donated = fusionjit.jit(sgd, donate_argnums=0)
    kept = fusionjit.jit(sgd)
    rng = np.random.default_rng(1)
    init = {"w": rng.standard_normal((64, 32)).astype(np.float32),
            "b": rng.standard_normal(32).astype(np.float32)}
    grads = {k: fnp.asarray(rng.standard_normal(v.shape).astype(np.float32))
             for k, v in init.items()}
    params = {k: fnp.array(v) for k, v in init.items()}
    reference = {k: fnp.array(v) for k, v in init.items()}
    where = {k: address(v) for k, v in params.items()}
    for _ in range(3):
        old = params
        params = donated(params, grads, 0.1)
        reference = kept(reference, grads, 0.1)
        assert all(v.is_deleted() for v in old.values())
    for k in init:
        np.testing.assert_array_equal(params[k], reference[k])  # the same bits
        assert address(params[k]) == where[k]
        assert not reference[k].is_deleted()


def test_adam_state_donated_by_name():
    def adam(state, g):
        p, m, v, t = state
        t = t + 1
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        p = p - 1e-3 * (m / (1 - 0.9 ** t)) / (fnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
        return p, m, v, t

    step = fusionjit.jit(adam, donate_argnames="state")
    rng = np.random.default_rng(2)
    p0, g = rng.standard_normal((3, 100)).astype(np.float32)[:2]
    state = (fnp.array(p0), fnp.zeros(100), fnp.zeros(100), fnp.array(0.0))
    p_ref, m_ref, v_ref = p0.astype(np.float64), np.zeros(100), np.zeros(100)
    for t in range(1, 4):
        old = state
        state = step(state, g)
        assert all(x.is_deleted() for x in old[:3])
        m_ref = 0.9 * m_ref + 0.1 * g
        v_ref = 0.999 * v_ref + 0.001 * g * g
        p_ref = p_ref - 1e-3 * (m_ref / (1 - 0.9 ** t)) / (np.sqrt(v_ref / (1 - 0.999 ** t)) + 1e-8)
    assert_close(state[0], p_ref.astype(np.float32), rtol=1e-5, atol=1e-6)


def test_a_loop_carrying_the_donated_buffer_keeps_it_as_its_state():
    @functools.partial(fusionjit.jit, donate_argnums=0)
    def fill(buf, start):
        return lax.fori_loop(0, 10, lambda i, b: b.at[start + i].set(i * 2.0), buf)

    buf = fnp.full(100, -1.0)
    where = address(buf)
    out = fill(buf, 5)
    expected = np.full(100, -1.0, np.float32)
    expected[5:15] = np.arange(10) * 2.0
    np.testing.assert_array_equal(out, expected)
    assert buf.is_deleted() and address(out) == where
    assert aliases(fill, out, 5) == [(0, True)]
    # Neither copied into the loop nor out of it.
    assert "copy into output" not in fill.lower(out, 5).as_text("buffers")


def test_a_scan_over_a_donated_carry_and_its_stacked_outputs():
    def step(carry, x):
        carry = carry.at[x % 4].add(x.astype(fnp.float32))
        return carry, carry.sum()

    f = fusionjit.jit(lambda c, xs: lax.scan(step, c, xs), donate_argnums=0)
    xs = np.arange(12, dtype=np.int32)
    carry = fnp.zeros(4)
    out, sums = f(carry, xs)
    expected, expected_sums = np.zeros(4, np.float32), []
    for x in xs:
        expected[x % 4] += x
        expected_sums.append(expected.sum())
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(sums, np.float32(expected_sums))
    assert carry.is_deleted()


def test_the_donated_array_returned_as_is_is_the_same_buffer():
    f = fusionjit.jit(lambda a, b: (a, b * 2), donate_argnums=0)
    a = fnp.arange(5.0)
    where = address(a)
    same, doubled = f(a, fnp.ones(5))
    assert a.is_deleted() and address(same) == where
    np.testing.assert_array_equal(same, np.arange(5.0, dtype=np.float32))
    assert_close(doubled, np.full(5, 2, np.float32))


@pytest.mark.parametrize("order", ["update first", "read first"])
def test_reads_of_the_old_value_run_before_the_update(order):
    # The program returns both the updated buffer and something read from the old one:
    # the read runs first, whatever the order the function wrote them in.
    def f(buf, x):
        new = buf.at[0].set(x)
        old = buf[0] * 2 + buf[1:].sum()
        return (new, old) if order == "update first" else (old, new)

    g = fusionjit.jit(f, donate_argnums=0)
    start = np.arange(1.0, 9.0, dtype=np.float32)
    buf = fnp.array(start)
    out = g(buf, 100.0)
    new, old = out if order == "update first" else out[::-1]
    assert buf.is_deleted()
    assert_close(old, np.float32(start[0] * 2 + start[1:].sum()))
    expected = start.copy()
    expected[0] = 100
    np.testing.assert_array_equal(new, expected)


def test_a_read_that_needs_the_update_keeps_the_buffer_and_warns():
    # The second output reads the old buffer (rows reversed) in the kernel that needs the
    # updated one: no output can take the buffer over, so the donation is refused, as JAX
    # says, and the answers are right.
    w = np.eye(4, dtype=np.float32) * 2

    def f(buf, x):
        new = buf.at[0].set(x)
        return new, new @ w + buf[::-1]

    start = np.arange(32.0, dtype=np.float32).reshape(8, 4)
    buf = fnp.array(start)
    with pytest.warns(UserWarning, match=r"donated buffers were not usable: float32\[8,4\]"):
        new, y = fusionjit.jit(f, donate_argnums=0)(buf, 10.0)
    expected = start.copy()
    expected[0] = 10
    np.testing.assert_array_equal(new, expected)
    assert_close(y, expected @ w + start[::-1])
    assert not buf.is_deleted()
    np.testing.assert_array_equal(buf, start)


def test_a_held_numpy_view_keeps_the_buffer_and_its_values():
    insert = fusionjit.jit(lambda buf, x: buf.at[1].set(x), donate_argnums=0)
    buf = fnp.zeros(3)
    view = np.asarray(buf)
    mv = memoryview(fnp.zeros(3))
    out = insert(buf, 5.0)
    assert not buf.is_deleted()  # as in JAX: an external reference blocks the donation
    np.testing.assert_array_equal(view, [0, 0, 0])
    np.testing.assert_array_equal(out, [0, 5, 0])
    del view
    out2 = insert(buf, 7.0)  # nothing holds it now
    assert buf.is_deleted()
    np.testing.assert_array_equal(out2, [0, 7, 0])
    assert mv.tolist() == [0, 0, 0]


def test_a_view_outlives_its_deleted_array():
    x = fnp.arange(4.0)
    view = np.asarray(x)
    mv = memoryview(x)
    x.delete()
    assert x.is_deleted()
    np.testing.assert_array_equal(view, np.arange(4.0))
    assert mv.tolist() == [0, 1, 2, 3]


def test_an_array_passed_twice_is_not_taken():
    f = fusionjit.jit(lambda a, b: a.at[0].set(b[1]) + b, donate_argnums=0)
    x = fnp.arange(3.0)
    out = f(x, x)
    assert not x.is_deleted()
    np.testing.assert_array_equal(out, [1 + 0, 1 + 1, 2 + 2])


def test_numpy_and_python_arguments_are_never_written():
    insert = fusionjit.jit(lambda buf, x: buf.at[0].set(x), donate_argnums=(0, 1))
    host = np.zeros(4, np.float32)
    out = insert(host, 3.0)
    out = insert(host, 4.0)  # cached: the C++ path
    np.testing.assert_array_equal(host, np.zeros(4))
    np.testing.assert_array_equal(out, [4, 0, 0, 0])


def test_a_deleted_array_is_an_error_naming_the_line():
    insert = fusionjit.jit(lambda buf, x: buf.at[0].set(x), donate_argnums=0)
    buf = fnp.zeros(4)
    insert(buf, 1.0)
    with pytest.raises(RuntimeError, match=r"Array has been deleted with shape=float32\[4\]") as e:
        insert(buf, 2.0)
    assert f"test_donation.py:{sys._getframe().f_lineno - 1}" in str(e.value)
    with pytest.raises(RuntimeError, match="has been deleted") as e:
        buf + 1
    assert "test_donation.py" in str(e.value)
    with pytest.raises(RuntimeError, match="has been deleted"):
        np.asarray(buf)
    with pytest.raises(RuntimeError, match="has been deleted"):
        repr(buf)
    assert buf.shape == (4,) and buf.dtype == np.float32  # as in JAX
    x = fnp.ones(2)
    x.delete()
    with pytest.raises(RuntimeError, match="has been deleted"):
        fusionjit.jit(lambda a: a * 2)(x)


def test_the_gpu_takes_no_donation_and_says_so():
    f = fusionjit.jit(lambda buf, x: buf.at[0].set(x), donate_argnums=0, backend="gpu_emulated")
    buf = fnp.zeros(4)
    with pytest.warns(UserWarning, match="on the CPU only"):
        out = f(buf, 1.0)
    assert not buf.is_deleted()
    np.testing.assert_array_equal(out, [1, 0, 0, 0])


def test_profile_runs_the_donated_program_without_deleting_the_callers_arrays():
    insert = fusionjit.jit(lambda buf, rows, i: lax.dynamic_update_slice_in_dim(buf, rows, i, 0),
                           donate_argnums=0)
    buf, rows = fnp.zeros((20000, 8)), fnp.ones((4, 8))
    p = fusionjit.profile(insert, runs=2, min_time=0.005)(buf, rows, 8)
    assert not buf.is_deleted()
    assert p.kernels[0].bytes < 1000  # in place: the update, not the 640 kB buffer
    np.testing.assert_array_equal(buf, np.zeros((20000, 8)))


def test_threads_reading_an_array_while_another_donates_it():
    # A run without the GIL holds its arguments: a donation meanwhile leaves the buffer
    # to it (or takes it once the run is over), never changing what it reads.
    big = np.arange(1 << 18, dtype=np.float32)
    total = fusionjit.jit(lambda a: (a * 2).sum())
    insert = fusionjit.jit(lambda buf: buf.at[0].set(-1e9), donate_argnums=0)
    expected = float(total(big))
    for _ in range(20):
        x = fnp.array(big)
        results = []
        t = threading.Thread(target=lambda: results.extend(float(total(x)) for _ in range(3)))
        t.start()
        try:
            insert(x)
        except RuntimeError:
            pass  # deleted by... nothing else here: only if the thread failed
        t.join()
        assert all(r == expected for r in results) or x.is_deleted()


PROGRAMS = {  # each made with a library's lax
    "insert": lambda L: lambda buf, rows, i: L.dynamic_update_slice_in_dim(buf, rows, i, 0),
    "ring": lambda L: lambda buf, rows, i: buf.at[(i + np.arange(2)) % 8].set(rows),
    "sgd": lambda L: lambda buf, rows, i: buf - 0.1 * rows.sum(),
    "fill": lambda L: lambda buf, rows, i: L.fori_loop(
        0, 3, lambda j, b: b.at[i + j].add(rows[0]), buf),
    "as is": lambda L: lambda buf, rows, i: (buf, rows * i),
    "set and read": lambda L: lambda buf, rows, i: (
        buf.at[i].set(rows[0]).at[i + 1].add(rows[1]), (buf * 2).sum()),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_same_results_as_jax_and_never_a_donation_jax_refuses(name):
    jax = pytest.importorskip("jax")
    rows = np.arange(6, dtype=np.float32).reshape(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jb = jax.numpy.ones((8, 3))
        jout = jax.jit(PROGRAMS[name](jax.lax), donate_argnums=0)(jb, rows, 2)
        fb = fnp.ones((8, 3))
        fout = fusionjit.jit(PROGRAMS[name](lax), donate_argnums=0)(fb, rows, 2)
    for a, b in zip(jax.tree_util.tree_leaves(fout), jax.tree_util.tree_leaves(jout)):
        assert_close(a, np.asarray(b))
    assert jb.is_deleted() or not fb.is_deleted()
    if name != "set and read":  # (one kernel reads the old buffer and writes the new one)
        assert fb.is_deleted()


def test_jits_of_one_function_keep_their_own_donations():
    # One function jitted with and without donation (a train and an eval step): each keeps
    # its own programs, and only the donating one deletes arrays, its own argument only.
    def update(params, grads):
        return params - 0.1 * grads

    train = fusionjit.jit(update, donate_argnums=0)
    evaluate = fusionjit.jit(update)
    p, g = fnp.ones(4), fnp.ones(4)
    train(p, g)
    assert p.is_deleted() and not g.is_deleted()
    p, g = fnp.ones(4), fnp.ones(4)
    assert_close(evaluate(p, g), np.full(4, 0.9, np.float32))
    assert not p.is_deleted() and not g.is_deleted()
    p, g = fnp.ones(4), fnp.ones(4)
    fusionjit.jit(update, donate_argnums=1)(p, g)
    assert not p.is_deleted() and g.is_deleted()


def test_a_call_holds_its_arguments_while_python_code_runs_before_it():
    # A static argument's == runs Python code during the cache lookup: another thread that
    # donates (or deletes) an argument meanwhile must neither change what the call reads nor
    # free it under it (found by a review: the call read 7.0, the other thread's result).
    import time

    class Config:
        def __hash__(self):
            return 1

        def __eq__(self, other):
            time.sleep(0.2)
            return isinstance(other, Config)

    n = 1 << 16
    f = fusionjit.jit(lambda x, cfg: x + 0.0, static_argnums=1)
    step = fusionjit.jit(lambda x: x * 0 + 7.0, donate_argnums=0)
    f(fnp.ones(n), Config())
    step(fnp.ones(n))
    for other in ("donate", "delete"):
        x = fnp.asarray(np.ones(n, np.float32))
        results = []

        def meanwhile(x=x, other=other):
            time.sleep(0.05)
            results.append(step(x) if other == "donate" else x.delete())

        t = threading.Thread(target=meanwhile)
        t.start()
        out = np.asarray(f(x, Config()))
        t.join()
        np.testing.assert_array_equal(np.unique(out), [1.0])
        if other == "donate":
            np.testing.assert_array_equal(np.unique(np.asarray(results[0])), [7.0])


def test_explain_says_where_each_donated_buffer_goes():
    def f(buf, rows, i, p, q):
        return lax.dynamic_update_slice_in_dim(buf, rows, i, 0), p * 2, (q + 1).sum()

    jitted = fusionjit.jit(f, donate_argnums=(0, 3, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e = fusionjit.explain(jitted)(fnp.zeros((100, 4)), fnp.ones((2, 4)), 3, fnp.ones(5),
                                      fnp.ones(5))
    assert e.donations == [
        "argument 0 (float32[100,4]): output 0 takes its buffer (updated in place where it is)",
        "argument 3 (float32[5]): output 1 takes its buffer (written over it once its last "
        "reader ran)",
        "argument 4 (float32[5]): kept: no output can take its buffer (none has its shape and "
        "dtype, or the old value is read after the new one would be written)"]
    assert "donated arguments:" in str(e)
    assert fusionjit.explain(fusionjit.jit(f))(fnp.zeros((100, 4)), fnp.ones((2, 4)), 3,
                                               fnp.ones(5), fnp.ones(5)).donations == []
