"""Forward mode (jvp, jacfwd, linearize) through while loops whose carry changes with the
differentiated inputs, which reverse mode cannot differentiate: against JAX where installed
and against central finite differences in float64; eagerly and under jit; loops nested, in
scans, fori_loops, conds and checkpoints; tangents only for the carries they reach; and the
errors of what remains reverse mode only, naming the transform the user called."""

from __future__ import annotations

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
from fusionjit import lax


def _sin_loop(np_, lax_, x):
    # The brief's example: four steps of x -> 1.5 sin(x), counted by an integer carry.
    return lax_.while_loop(lambda c: c[1] < 4, lambda c: (np_.sin(c[0]) * 1.5, c[1] + 1),
                           (x, 0))[0]


def _newton_sqrt(np_, lax_, a):
    # Newton's iteration for sqrt(a), elementwise, until every residual is small: the trip
    # count depends on a, so only forward mode differentiates it.
    def body(c):
        x, i = c
        return x - (x * x - a) / (2 * x), i + 1

    def running(c):
        return np_.logical_and(np_.max(np_.abs(c[0] * c[0] - a) / a) > 1e-6, c[1] < 50)

    return lax_.while_loop(running, body, (a, 0))[0]


def _nested(np_, lax_, x):
    # An inner loop whose trip count is set by the outer loop's counter, and whose carry
    # reads the outer loop's carry.
    def outer(c):
        y, i = c
        z = lax_.while_loop(lambda d: d[1] < i + 2,
                            lambda d: (np_.sin(d[0]) + y * 0.5, d[1] + 1), (y, 0))[0]
        return z * 1.1, i + 1

    return lax_.while_loop(lambda c: c[1] < 3, outer, (x, 0))[0]


def _in_scan(np_, lax_, x, ws):
    def step(c, w):
        y = lax_.while_loop(lambda d: d[1] < 3, lambda d: (np_.cos(d[0]) * w, d[1] + 1),
                            (c, 0))[0]
        return y + c, y * 2

    return lax_.scan(step, x, ws)


def _in_fori(np_, lax_, x):
    def step(i, c):
        return lax_.while_loop(lambda d: d[0] < 2, lambda d: (d[0] + 1, np_.sin(d[1]) * 1.2 + c),
                               (0, c))[1] * 0.5

    return lax_.fori_loop(0, 3, step, x)


def _jax():
    jax = pytest.importorskip("jax")
    return jax, jax.numpy, jax.lax


def _close(got, want, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


def test_jvp_through_a_while_loop_matches_jax_eagerly_and_under_jit():
    f = lambda x: _sin_loop(fnp, lax, x)  # noqa: E731
    for out, t in (fusionjit.jvp(f, (0.7,), (1.0,)),
                   fusionjit.jit(lambda x, t: fusionjit.jvp(f, (x,), (t,)))(0.7, 1.0)):
        _close(out, 1.4820249)   # jax.jvp's values
        _close(t, 0.11217748)
    out, f_jvp = fusionjit.linearize(f, 0.7)
    _close(f_jvp(2.0), 2 * 0.11217748)
    jax, jnp, jlax = _jax()
    x = np.array([0.7, -0.2, 1.9], np.float32)
    t = np.array([1.0, 0.5, -2.0], np.float32)
    want = jax.jvp(lambda x: _sin_loop(jnp, jlax, x), (x,), (t,))
    for g, w in zip(fusionjit.jvp(f, (x,), (t,)), want):
        _close(g, w)


def test_jacfwd_of_a_newton_solver_eagerly_and_under_jit():
    a = np.array([2.0, 3.0, 0.5, 40.0], np.float32)
    f = lambda a: _newton_sqrt(fnp, lax, a)  # noqa: E731
    want = np.diag(0.5 / np.sqrt(a.astype(np.float64)))
    for jac in (fusionjit.jacfwd(f)(a), fusionjit.jit(fusionjit.jacfwd(f))(a)):
        assert np.shape(jac) == (4, 4)
        _close(jac, want, rtol=1e-4)
    # Forward over forward: the second derivative, -1/4 a^(-3/2) on the diagonal.
    hess = fusionjit.jit(fusionjit.jacfwd(fusionjit.jacfwd(f)))(a)
    second = np.zeros((4, 4, 4))
    second[range(4), range(4), range(4)] = -0.25 * a.astype(np.float64) ** -1.5
    _close(hess, second, rtol=1e-3, atol=1e-5)
    jax, jnp, jlax = _jax()
    _close(fusionjit.jacfwd(f)(a), jax.jacfwd(lambda a: _newton_sqrt(jnp, jlax, a))(a))


def test_vmap_of_jvp_runs_each_example_for_its_own_trip_count():
    # Batched primals make the loop's condition batched: each example's carry and tangent
    # stop where its own iteration converges.
    a = np.array([2.0, 30.0, 0.5], np.float32)
    g = fusionjit.vmap(lambda a: fusionjit.jvp(lambda a: _newton_sqrt(fnp, lax, a), (a,),
                                               (np.float32(1.0),)))
    out, t = g(a)
    _close(out, np.sqrt(a))
    _close(t, 0.5 / np.sqrt(a), rtol=1e-4)


def test_nested_while_loops_against_finite_differences_and_jax(x64):
    x = np.array([0.3, -0.4], np.float64)
    t = np.array([1.0, -0.5], np.float64)
    f = lambda x: _nested(fnp, lax, x)  # noqa: E731
    h = 1e-6
    fd = (np.asarray(f(x + h * t)) - np.asarray(f(x - h * t))) / (2 * h)
    for out, tan in (fusionjit.jvp(f, (x,), (t,)),
                     fusionjit.jit(lambda x, t: fusionjit.jvp(f, (x,), (t,)))(x, t)):
        _close(out, f(x), rtol=1e-12)
        _close(tan, fd, rtol=1e-6, atol=1e-8)
    jax, jnp, jlax = _jax()
    x32 = x.astype(np.float32)
    _close(fusionjit.jit(fusionjit.jacfwd(lambda x: _nested(fnp, lax, x)))(x32),
           jax.jacfwd(lambda x: _nested(jnp, jlax, x))(x32), rtol=1e-5)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_while_loops_inside_scan_and_fori_loop_match_jax(jit):
    jax, jnp, jlax = _jax()
    wrap = fusionjit.jit if jit else (lambda f: f)
    x, ws = np.float32(0.3), np.array([0.5, 1.2, -0.3], np.float32)
    got = wrap(fusionjit.jacfwd(lambda x, ws: _in_scan(fnp, lax, x, ws), argnums=(0, 1)))(x, ws)
    want = jax.jacfwd(lambda x, ws: _in_scan(jnp, jlax, x, ws), argnums=(0, 1))(x, ws)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        _close(g, w)
    v = np.array([0.2, -0.7], np.float32)
    _close(wrap(fusionjit.jacfwd(lambda v: _in_fori(fnp, lax, v)))(v),
           jax.jacfwd(lambda v: _in_fori(jnp, jlax, v))(v))
    # With traced bounds fori_loop is itself a while loop.
    n_steps = lambda np_, lax_: lambda v, n: lax_.fori_loop(  # noqa: E731
        0, n, lambda i, c: np_.sin(c) + i, v)
    _close(wrap(fusionjit.jacfwd(n_steps(fnp, lax)))(v, 3),
           jax.jacfwd(n_steps(jnp, jlax))(v, 3))


def test_while_loops_inside_cond_and_checkpoint_match_jax():
    jax, jnp, jlax = _jax()
    x, t = np.array([0.3, -0.4], np.float32), np.array([1.0, 2.0], np.float32)

    def branchy(np_, lax_, x, s):
        # The first branch closes over x: its constant has a tangent too.
        return lax_.cond(np_.sum(x) * s > 0, lambda y: _sin_loop(np_, lax_, y) + x * 0.5,
                         lambda y: y * 2.0, x * x)

    for s in (1.0, -1.0):
        got = fusionjit.jvp(lambda x: branchy(fnp, lax, x, s), (x,), (t,))
        want = jax.jvp(lambda x: branchy(jnp, jlax, x, s), (x,), (t,))
        for g, w in zip(got, want):
            _close(g, w)
    got = fusionjit.jvp(fusionjit.checkpoint(lambda x: _nested(fnp, lax, x)), (x,), (t,))
    want = jax.jvp(jax.checkpoint(lambda x: _nested(jnp, jlax, x)), (x,), (t,))
    for g, w in zip(got, want):
        _close(g, w)


def test_tangents_only_for_the_carries_the_derivative_reaches():
    def f(x, k, n):
        # A loop the derivative does not reach (it runs as before), then one with an
        # integer counter, a carry computed from a constant and one from the other input.
        steps = lax.while_loop(lambda c: c < n, lambda c: c + 1, 0)

        def body(c):
            a, b, i, z = c
            return a * 0.9 + b, b * 0.5, i + 1, z + 1.0

        return lax.while_loop(lambda c: c[2] < steps, body, (x, fnp.ones(()), 0, k))

    x, k = np.float32(0.3), np.float32(2.0)
    zero = np.zeros((), fusionjit.dtypes.float0)
    out, (ta, tb, ti, tz) = fusionjit.jvp(f, (x, k, 4), (np.float32(1.0), np.float32(0.0), zero))
    _close(out[0], 0.3 * 0.9 ** 4 + sum(0.5 ** j * 0.9 ** (3 - j) for j in range(4)))
    _close(ta, 0.9 ** 4)
    for zero_tangent in (tb, ti, tz):
        assert not np.any(np.asarray(zero_tangent))
    # The tangent loop carries one tangent: of `a`, the only carry x reaches.
    program = fusionjit.jit(lambda x: fusionjit.jvp(lambda x: f(x, k, 4), (x,), (x,))).trace(x)
    loops = [e for e in program.eqns if e.prim.name == "while"]
    assert [len(e.outvars) for e in loops] == [1, 4 + 1]
    # Without a derivative reaching the loop, jvp is the reverse pass of the reverse pass,
    # as before.
    out, t = fusionjit.jvp(lambda x: x * lax.while_loop(lambda c: c < 3, lambda c: c + 1, 0),
                           (np.float32(0.7),), (np.float32(1.0),))
    _close(out, 2.1)
    _close(t, 3.0)


def test_reverse_mode_through_a_while_loop_still_raises_naming_the_transform_called():
    f = lambda x: _sin_loop(fnp, lax, x)  # noqa: E731
    x = np.float32(0.7)
    for name, call in (("grad", lambda: fusionjit.grad(f)(x)),
                       ("vjp", lambda: fusionjit.vjp(f, x)[1](x)),
                       ("jacrev", lambda: fusionjit.jacrev(f)(x)),
                       ("hessian", lambda: fusionjit.hessian(f)(x))):
        with pytest.raises(NotImplementedError,
                           match=rf"test_forward_while.py:\d+.*fusionjit\.{name} cannot "
                                 rf"differentiate through a while_loop whose carry 0"):
            call()
    # Forward mode where it still has no rule says so, not "fusionjit.grad".
    def zeta(s):
        return fusionjit.scipy.special.zeta(s, 2.0)

    with pytest.raises(NotImplementedError, match=r"fusionjit\.jvp of zeta"):
        fusionjit.jvp(zeta, (np.float32(3),), (x,))
    with pytest.raises(NotImplementedError, match=r"fusionjit\.jacfwd of zeta"):
        fusionjit.jacfwd(zeta)(np.full(2, 3, np.float32))
    with pytest.raises(NotImplementedError, match=r"fusionjit\.grad of zeta"):
        fusionjit.grad(zeta)(np.float32(3))
