"""Host callbacks (runtime/host_callback.h, _src/callbacks.py): fusionjit.debug.print and
debug.callback, pure_callback and experimental.io_callback inside compiled code, which calls
the Python function with its values each time it runs, in program order (an effect token
chains them, through loops and branches), kept by the passes although nothing reads them."""

import gc
import threading
import weakref

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
from fusionjit import lax


def lines(capsys) -> list[str]:
    return capsys.readouterr().out.strip().splitlines()


def test_print_inside_jit_prints_on_every_call_in_program_order(capsys):
    @fusionjit.jit
    def f(x):
        y = fnp.sin(x) * 2
        fusionjit.debug.print("y = {}", y)
        fusionjit.debug.print("sum = {s:.3f} first = {f}", s=y.sum(), f=y[0])
        return y + 1

    for x in (np.arange(4, dtype=np.float32), np.arange(4, dtype=np.float32) + 1):
        with fusionjit.disable_jit():  # the same text as the eager call's
            f(x)
        eager = lines(capsys)
        assert len(eager) == 2 and eager[1].startswith("sum = ")
        f(x)
        assert lines(capsys) == eager


def test_callbacks_in_loops_run_each_step_in_order_whatever_the_unrolling(capsys):
    def scanned(x, unroll):
        def step(c, xs):
            fusionjit.debug.print("c={c} x={x}", c=c, x=xs)
            return c + xs, c * xs
        return lax.scan(step, 0.0, x, unroll=unroll)

    x = np.arange(6, dtype=np.float32)
    want = [f"c={float(c)} x={float(v)}" for c, v in zip(np.cumsum(x) - x, x)]
    for unroll in (1, 4, 6):
        fusionjit.jit(scanned, static_argnums=1)(x, unroll)
        assert lines(capsys) == want

    def counted(x):
        def body(c):
            fusionjit.debug.print("while {}", c)
            return c * 3
        inner = lax.fori_loop(0, 2, lambda i, c: (fusionjit.debug.print("i {}", i), c + i)[1], x)
        return lax.while_loop(lambda c: c < 50, body, inner)

    assert float(fusionjit.jit(counted)(1.0)) == 54.0
    assert lines(capsys) == ["i 0", "i 1", "while 2.0", "while 6.0", "while 18.0"]


def test_only_the_taken_branch_calls(capsys):
    def f(x):
        return lax.cond(x > 0, lambda v: (fusionjit.debug.print("pos {}", v), v)[1],
                        lambda v: (fusionjit.debug.print("neg {}", v), -v)[1], x)

    g = fusionjit.jit(f)
    assert (float(g(2.0)), float(g(-3.0))) == (2.0, 3.0)
    assert lines(capsys) == ["pos 2.0", "neg -3.0"]


def test_a_callback_whose_loop_computes_nothing_used_still_runs_and_twice_is_twice(capsys):
    def f(x):
        for _ in range(2):  # two identical loops: not merged into one
            lax.fori_loop(0, 2, lambda i, c: (fusionjit.debug.print("tick {}", i), c)[1], x)
        fusionjit.debug.callback(lambda v: print("unused", v), x * 2)
        return x

    assert float(fusionjit.jit(f)(1.5)) == 1.5
    assert lines(capsys) == ["tick 0", "tick 1", "tick 0", "tick 1", "unused 3.0"]


def test_vmap_calls_once_per_example_and_grad_sees_the_forward_values(capsys):
    fusionjit.jit(fusionjit.vmap(lambda x: (fusionjit.debug.print("v {}", x), x * 2)[1]))(
        np.arange(3.0, dtype=np.float32))
    assert lines(capsys) == ["v 0.0", "v 1.0", "v 2.0"]

    def loss(x):
        fusionjit.debug.print("forward {}", x)
        return (x ** 2).sum()

    x = np.arange(3.0, dtype=np.float32)
    for g in (fusionjit.grad(loss), fusionjit.jit(fusionjit.grad(loss))):
        np.testing.assert_array_equal(np.asarray(g(x)), 2 * x)
        assert lines(capsys) == ["forward [0. 1. 2.]"]  # once: the backward pass does not


def test_the_callback_gets_numpy_copies_and_its_exception_propagates():
    seen = []

    def keep(a):
        assert isinstance(a, np.ndarray)
        a += 100  # a copy: the program's values do not change
        seen.append(a.copy())

    f = fusionjit.jit(lambda x: (fusionjit.debug.callback(keep, x), x * 2)[1])
    np.testing.assert_array_equal(np.asarray(f(np.ones(3, np.float32))), [2, 2, 2])
    np.testing.assert_array_equal(seen[0], [101, 101, 101])

    calls = []

    def bad(i):
        calls.append(int(i))
        raise KeyError(f"step {i}")

    g = fusionjit.jit(lambda x: lax.fori_loop(
        0, 5, lambda i, c: (fusionjit.debug.callback(bad, i), c + 1)[1], x))
    with pytest.raises(KeyError, match="step 0"):
        g(0)
    assert calls == [0]  # the run calls no more callbacks after the first failure
    assert float(fusionjit.jit(lambda x: x + 1)(1.0)) == 2.0  # and nothing is left pending


def test_a_loop_that_calls_the_host_runs_step_by_step_and_explain_says_why():
    def rollout(x):
        def step(c, _):
            c = c * 0.5 + 1
            fusionjit.debug.callback(lambda s: None, c.sum())
            return c, c.sum()
        return lax.scan(step, x, None, length=3)[1]

    x = np.ones(1000, np.float32)
    np.testing.assert_allclose(np.asarray(fusionjit.jit(rollout)(x)), [1500, 1750, 1875])
    text = str(fusionjit.explain(fusionjit.jit(rollout))(x))
    assert "host callback (fusionjit.debug.print or debug.callback)" in text
    assert "calls the host" in text and "test_host_callbacks.py" in text


def test_the_function_is_freed_with_the_last_program_that_calls_it():
    class Sink:
        def __call__(self, v):
            pass

    sink = Sink()
    alive = weakref.ref(sink)
    def calling(fn):
        return fusionjit.jit(lambda x: (fusionjit.debug.callback(fn, x), x)[1])

    f = calling(sink)
    f(np.float32(3))  # a shape of its own: nothing else shares the program
    del sink
    gc.collect()
    assert alive() is not None  # f's program holds it
    del f
    gc.collect()
    assert alive() is None


def test_threads_call_their_callbacks_without_deadlock():
    out = []
    f = fusionjit.jit(lambda x: lax.fori_loop(
        0, 50, lambda i, c: (fusionjit.debug.callback(lambda v: out.append(v), c), c + 1)[1],
        x))
    x = np.zeros(100000, np.float32)  # large enough to run without holding the GIL
    threads = [threading.Thread(target=lambda: f(x).block_until_ready()) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert len(out) == 150


def test_donated_arguments_are_read_by_the_callback_before_they_are_written():
    seen = []
    f = fusionjit.jit(lambda x: (fusionjit.debug.callback(lambda v: seen.append(v[:2]), x),
                                 x.at[0].set(7.0))[1], donate_argnums=0)
    x = fusionjit.device_put(np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(f(x)), [7, 1, 2, 3])
    np.testing.assert_array_equal(seen[0], [0, 1])


@pytest.mark.cpu_only
def test_the_gpu_backends_refuse_host_callbacks_clearly():
    f = fusionjit.jit(lambda x: (fusionjit.debug.print("{}", x), x)[1], backend="gpu_emulated")
    with pytest.raises(NotImplementedError, match="run on the CPU backend only"):
        f(1.0)


def test_prints_match_jax_in_a_training_loop(capsys):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def train(L, np_, w):
        def step(w, i):
            loss = ((w - i) ** 2).sum()
            L.debug.print("step {i} loss {loss:.3f} w {w}", i=i, loss=loss, w=w)
            return w - 0.1 * 2 * (w - i), loss
        return L.lax.scan(step, w, np_.arange(4.0))[1]

    w = np.array([1.0, -2.0], np.float32)
    fusionjit.jit(lambda w: train(fusionjit, fnp, w))(w)
    ours = lines(capsys)
    jax.block_until_ready(jax.jit(lambda w: train(jax, jnp, w))(w))
    jax.effects_barrier()
    assert ours == lines(capsys) and len(ours) == 4


S = fusionjit.ShapeDtypeStruct


def test_pure_callback_computes_in_python_under_jit_and_eagerly():
    def f(x):
        y = fusionjit.pure_callback(lambda v: np.sin(v), S(x.shape, x.dtype), x)
        return y * 2

    x = np.arange(3.0, dtype=np.float32)
    want = np.sin(x) * 2
    np.testing.assert_allclose(np.asarray(fusionjit.jit(f)(x)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(f(x)), want, rtol=1e-6)
    # pytrees of results, converted to their dtypes; inside a scan, once per step
    calls = []

    def tree(v):
        calls.append(v.shape)
        return {"a": v + 1, "b": (v * 2).astype(np.float64)}

    out = fusionjit.jit(lambda x: fusionjit.pure_callback(
        tree, {"a": S((3,), np.float32), "b": S((3,), np.int32)}, x))(x)
    assert out["b"].dtype == np.int32 and out["b"].tolist() == [0, 2, 4]

    def step(c, v):
        y = fusionjit.pure_callback(lambda a: a ** 2, S((), np.float32), v)
        return c + y, y

    total, ys = fusionjit.jit(lambda xs: lax.scan(step, 0.0, xs))(np.arange(4, dtype=np.float32))
    assert float(total) == 14.0 and np.asarray(ys).tolist() == [0, 1, 4, 9]


def test_pure_callback_under_vmap_follows_its_vmap_method():
    seen = []

    def add(a, b):
        seen.append((a.shape, b.shape))
        return a + b

    def f(method):
        return lambda x, y: fusionjit.pure_callback(add, S(x.shape, x.dtype), x, y,
                                                    vmap_method=method)

    x, y = np.arange(4.0, dtype=np.float32), np.float32(1)
    for method, shapes in (("sequential", [((), ())] * 4), ("expand_dims", [((4,), (1,))]),
                           ("broadcast_all", [((4,), (4,))])):
        seen.clear()
        out = fusionjit.jit(fusionjit.vmap(f(method), in_axes=(0, None)))(x, y)
        assert np.asarray(out).tolist() == [1, 2, 3, 4] and seen == shapes, method
    with pytest.raises(NotImplementedError, match=r"test_host_callbacks.py:\d+.*vmap_method"):
        fusionjit.jit(fusionjit.vmap(f(None), in_axes=(0, None)))(x, y)
    with pytest.raises(ValueError, match="vmap_method must be one of"):
        f("parallel")(x, y)


def test_pure_callback_errors_name_the_line():
    x = np.arange(3.0, dtype=np.float32)
    wrong_shape = fusionjit.jit(lambda x: fusionjit.pure_callback(
        lambda v: np.zeros(5), S(x.shape, x.dtype), x))
    with pytest.raises(ValueError, match=r"test_host_callbacks.py:\d+.*has shape \(5,\).*f32\[3\]"):
        wrong_shape(x)
    wrong_tree = fusionjit.jit(lambda x: fusionjit.pure_callback(
        lambda v: (v, v), S(x.shape, x.dtype), x))
    with pytest.raises(TypeError, match="structure"):
        wrong_tree(x)
    with pytest.raises(ValueError, match=r"test_host_callbacks.py:\d+.*do not support differ"):
        fusionjit.grad(lambda x: fusionjit.pure_callback(
            np.sin, S(x.shape, x.dtype), x).sum())(x)
    with pytest.raises(TypeError, match="result_shape_dtypes must be a pytree"):
        fusionjit.jit(lambda x: fusionjit.pure_callback(np.sin, (3,), x))(x)


def test_a_pure_callback_gets_its_derivative_from_custom_jvp():
    @fusionjit.custom_jvp
    def sin(x):
        return fusionjit.pure_callback(np.sin, S(x.shape, x.dtype), x)

    @sin.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return sin(x), fnp.cos(x) * t

    x = np.linspace(0, 1, 5, dtype=np.float32)
    g = fusionjit.jit(fusionjit.grad(lambda x: sin(x).sum()))(x)
    np.testing.assert_allclose(np.asarray(g), np.cos(x), rtol=1e-6)


def test_io_callback_runs_every_call_in_order(capsys):
    from fusionjit.experimental import io_callback

    def f(x):
        def body(i, c):
            return c + io_callback(lambda v: (print("io", v), v * 10)[1], S((), np.int32), i)
        return lax.fori_loop(0, 3, body, x)

    assert int(fusionjit.jit(f)(np.int32(0))) == 30
    assert lines(capsys) == ["io 0", "io 1", "io 2"]


def test_pure_callback_matches_jax_under_vmap():
    jax = pytest.importorskip("jax")

    def program(L, x):
        return L.vmap(lambda v: L.pure_callback(
            lambda a: np.cumsum(a) * 2, L.ShapeDtypeStruct(v.shape, v.dtype), v,
            vmap_method="sequential") + 1)(x)

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(np.asarray(fusionjit.jit(lambda x: program(fusionjit, x))(x)),
                                  np.asarray(jax.jit(lambda x: program(jax, x))(x)))
