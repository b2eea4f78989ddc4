"""fusionjit.vmap: each program batched by vmap gives what the same program gives applied to
one example at a time (the loop is the oracle, bit for bit where no reduction order
changes), eagerly and under jit; against jax.vmap where JAX is installed; its compositions
with jit, grad and itself; the kernels it compiles to; and its error paths."""

from __future__ import annotations

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
import fusionjit.random as fr
import fusionjit.scipy.special as fsp
from fusionjit import lax
from conftest import requires_jax

B = 5
_r = np.random.default_rng(0)
X = _r.uniform(-1, 1, (B, 3, 4)).astype(np.float32)
V = _r.uniform(-1, 1, (B, 4)).astype(np.float32)
W = _r.uniform(-1, 1, (4, 6)).astype(np.float32)
XT = np.moveaxis(X, 0, 2)  # the examples along the last axis
B6 = _r.uniform(-1, 1, (B, 6)).astype(np.float32)
IDX = np.array([0, 3, 1, 2, 3], np.int32)


def _step(state, action):
    """One CartPole step for one environment (gymnax style: vmapped over environments)."""
    x, x_dot, theta, theta_dot = state
    force = fnp.where(action, 10.0, -10.0)
    cos, sin = fnp.cos(theta), fnp.sin(theta)
    temp = (force + 0.05 * theta_dot ** 2 * sin) / 1.1
    theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
    x_acc = temp - 0.05 * theta_acc * cos / 1.1
    new = fnp.stack([x + 0.02 * x_dot, x_dot + 0.02 * x_acc, theta + 0.02 * theta_dot,
                     theta_dot + 0.02 * theta_acc])
    done = (fnp.abs(new[0]) > 2.4) | (fnp.abs(new[2]) > 0.2095)
    return fnp.where(done, fnp.zeros(4), new), done


def _rollout(state, key):
    def body(carry, _):
        s, k = carry
        k, sub = fr.split(k)
        s, done = _step(s, fr.bernoulli(sub))
        return (s, k), done
    return lax.scan(body, (state, key), None, length=20)


def _while_count(x):
    return lax.while_loop(lambda c: c[1] < 4.0, lambda c: (c[0] + 1, c[1] + fnp.abs(x) + 0.5),
                          (0, 0.0))


def _mlp(w1, b1, w2, x):
    return fnp.tanh(x @ w1 + b1) @ w2


# (name, f, args, in_axes): f applied to one example at a time is the oracle.
CASES = [
    ("elementwise", lambda x: fnp.sin(x) * 2 + fnp.exp(-x) - 1, (X,), 0),
    ("unmapped operand", lambda x, w: x @ w + w.sum(), (X, W), (0, None)),
    ("mapped axis 1", lambda x: x.sum(0) * x[0], (XT,), 2),
    ("negative axis", lambda v: fnp.cumsum(v), (XT,), -1),
    ("reductions", lambda x: (x.max(1), x.argmin(0), x.prod(), fnp.any(x > 0.9)), (X,), 0),
    ("softmax and layer norm",
     lambda x: (fusionjit.nn.softmax(x, axis=-1),
                (x - x.mean(-1, keepdims=True)) / fnp.sqrt(x.var(-1, keepdims=True) + 1e-5)),
     (X,), 0),
    ("dot both mapped", lambda x, v: x @ v, (X, V), 0),
    ("dot lhs mapped", lambda x, w: fnp.einsum("ij,jk->ki", x, w), (X, W), (0, None)),
    ("dot rhs mapped", lambda v, x: fnp.einsum("ij,kj->ki", x, v[:, None] * v), (V, X[0]),
     (0, None)),
    ("dot rhs mapped with batch dims",
     lambda a, b: lax.dot_general(a, b, (((1,), (1,)), ((0,), (0,)))),
     (X[0][None].repeat(2, 0), X[:, None, :, :2].repeat(2, 1)), (None, 0)),
    ("mlp", _mlp, (W, B6, W.T, V), (None, 0, None, 0)),
    ("shapes", lambda x: (x.T.reshape(-1)[::2], fnp.concatenate([x, x[::-1]], 1),
                          fnp.flip(x, 0), fnp.pad(x, ((1, 0), (0, 2)))), (X,), 0),
    ("concatenate unmapped", lambda x, w: fnp.concatenate([x, w[:3]], 1), (X, W), (0, None)),
    ("pad value mapped", lambda x, p: fnp.pad(x, 1, constant_values=p), (X, V[:, 0]), 0),
    ("dynamic_slice mapped start", lambda x, i: lax.dynamic_slice(x, (i, 1), (2, 2)),
     (X, IDX), 0),
    ("dynamic_slice unmapped operand", lambda x, i: lax.dynamic_slice(x, (0, i), (3, 2)),
     (X[0], IDX), (None, 0)),
    ("dynamic_update_slice mapped start",
     lambda x, i: lax.dynamic_update_slice(x, fnp.ones((2, 2)), (i, i)), (X, IDX), 0),
    ("dynamic_update_slice unmapped start",
     lambda x, u: lax.dynamic_update_slice(x, u, (1, 2)), (X, V[:, :2].reshape(B, 1, 2)), 0),
    # (an unmapped argument is passed as it is: a fusionjit array here, as a NumPy array
    # cannot be indexed by a traced index, in JAX either)
    ("gather mapped index", lambda v, i: v[i], (fnp.asarray(V[0]), IDX), (None, 0)),
    ("gather mapped operand", lambda v: v[np.array([3, 0, 0])], (V,), 0),
    ("gather both mapped", lambda x, i: x[:, i], (X, IDX), 0),
    ("take_along_axis", lambda x: fnp.take_along_axis(x, fnp.argsort(x, 1), 1), (X,), 0),
    ("scatter set mapped index", lambda v, i: v.at[i].set(-5.0), (V, IDX), 0),
    ("scatter add unmapped operand", lambda i, u: fnp.zeros(4).at[i].add(u), (IDX, V[:, 0]), 0),
    ("scatter mapped updates", lambda u: fnp.zeros((3, 4)).at[1].set(u), (V,), 0),
    ("sort", lambda x: (fnp.sort(x, 0), fnp.sort(x, 1)), (X,), 0),
    ("select and clip", lambda x, v: (fnp.where(x > 0, x, v), fnp.clip(x, -0.5, 0.5)),
     (X, V), 0),
    ("integers", lambda i: (i * 3 // 2, i << 2, fnp.bitwise_xor(i, 5), i.astype(np.float32)),
     (IDX,), 0),
    ("random keys mapped", lambda k: (fr.uniform(k, (3,)), fr.normal(k, (2,)), fr.split(k, 3),
                                      fr.bernoulli(k, 0.3, (4,)), fr.permutation(k, 6)),
     (np.asarray(fr.split(fr.PRNGKey(1), B)),), 0),
    ("scan", lambda c, xs: lax.scan(lambda a, x: (a * 0.5 + x, a * x), c, xs),
     (V[:, 0], X[:, 0]), 0),
    ("scan unmapped xs", lambda c, xs: lax.scan(lambda a, x: (a * 0.5 + x, a), c, xs),
     (V[:, 0], X[0, 0]), (0, None)),
    ("scan carry batched by the step", lambda v, c: lax.scan(lambda a, _: (a + v, a), c, None,
                                                             length=3), (V[:, 0], 1.0),
     (0, None)),
    ("cartpole rollout", _rollout, (V, np.asarray(fr.split(fr.PRNGKey(2), B))), 0),
    ("fori_loop", lambda x: lax.fori_loop(0, 4, lambda i, a: a * x + i, x), (V,), 0),
    ("while mapped predicate", _while_count, (V[:, 0],), 0),
    ("while unmapped predicate",
     lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * x), (0, x)),
     (V,), 0),
    ("cond mapped predicate", lambda p, x: lax.cond(p, lambda u: u * 2, lambda u: -u, x),
     (V[:, 0] > 0, X), 0),
    ("cond unmapped predicate", lambda p, x: lax.cond(p, lambda u: u * 2, lambda u: -u, x),
     (True, X), (None, 0)),
    ("switch mapped index", lambda i, x: lax.switch(i, [lambda u: u, lambda u: u * 3,
                                                        lambda u: fnp.sin(u)], x),
     (IDX, V), 0),
    ("custom_vjp", lambda x: (fsp.gammaln(x), fsp.xlogy(x, x + 1)), (np.abs(V) + 0.5,), 0),
]


def _loop(f, args, in_axes):
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    per = []
    for b in range(B):
        one = [a if ax is None else fnp.asarray(np.take(np.asarray(a), b, axis=ax))
               for a, ax in zip(args, axes)]
        per.append(fusionjit.tree_util.tree_map(np.asarray, f(*one)))
    return fusionjit.tree_util.tree_map(lambda *xs: np.stack(xs), *per)


def _close(got, want, exact: bool):
    got_l, want_l = fusionjit.tree_util.tree_leaves(got), fusionjit.tree_util.tree_leaves(want)
    assert len(got_l) == len(want_l)
    for g, w in zip(got_l, want_l):
        g = np.asarray(g)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if exact or not np.issubdtype(w.dtype, np.floating):
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name,f,args,in_axes", CASES, ids=[c[0] for c in CASES])
def test_vmap_matches_a_loop(name, f, args, in_axes, jit):
    batched = fusionjit.vmap(f, in_axes=in_axes)
    if jit:
        batched = fusionjit.jit(batched)
    want = _loop(f, args, in_axes)
    # Reassociated sums (a batched dot, a sum over an axis that moved) may differ in the
    # last bits; everything else is bit for bit.
    exact = name in ("elementwise", "shapes", "gather mapped index", "sort", "integers",
                     "random keys mapped", "select and clip", "scatter set mapped index")
    _close(batched(*args), want, exact)


def test_axes_in_and_out():
    x, w = X, W
    got = fusionjit.vmap(lambda a, d: (a["u"] @ d["w"], a["v"]), in_axes=({"u": 0, "v": 2},
                                                                          {"w": None}),
                         out_axes=(1, -1))({"u": x, "v": XT}, {"w": w})
    np.testing.assert_allclose(got[0], np.moveaxis(x @ w, 0, 1), rtol=1e-6)
    np.testing.assert_array_equal(got[1], XT)
    # Keyword arguments are mapped over their leading axis; an output that does not depend
    # on the mapped arguments may be returned once (out_axes=None) or broadcast.
    got = fusionjit.vmap(lambda a, *, b: (a + b, fnp.ones(2)), out_axes=(0, None))(V, b=V)
    np.testing.assert_array_equal(got[0], V + V)
    np.testing.assert_array_equal(got[1], np.ones(2))
    np.testing.assert_array_equal(fusionjit.vmap(lambda: fnp.arange(3), axis_size=2)(),
                                  np.tile(np.arange(3), (2, 1)))
    np.testing.assert_array_equal(fusionjit.vmap(lambda a: 7.0)(V), np.full(B, 7.0))


def test_unmapped_arguments_stay_as_they_are():
    # As in JAX: an argument with in_axes None reaches the function as it was given, so a
    # Python number can steer Python control flow or be a static argument of a jit inside.
    def f(x, n, mode):
        y = x
        for _ in range(n):
            y = y * 2 if mode == "double" else y + 1
        return y

    got = fusionjit.vmap(f, in_axes=(0, None, None))(V, 3, "double")
    np.testing.assert_array_equal(got, V * 8)
    g = fusionjit.jit(lambda x, n: x ** n, static_argnums=1)
    np.testing.assert_allclose(fusionjit.vmap(g, in_axes=(0, None))(V, 3), V ** 3, rtol=1e-6)


def test_nested_and_composed():
    f = lambda a, b: fnp.dot(a, b)  # noqa: E731
    outer = fusionjit.vmap(fusionjit.vmap(f, in_axes=(0, None)), in_axes=(None, 1))
    np.testing.assert_allclose(outer(X[0], W[:, :3]), (X[0] @ W[:, :3]).T, rtol=1e-5)
    # vmap of a jitted function inlines it; jit of vmap compiles the batched program.
    g = fusionjit.jit(lambda v: fnp.tanh(v) @ W)
    np.testing.assert_allclose(fusionjit.vmap(g)(V), np.tanh(V) @ W, rtol=1e-5)
    # Per-example gradients, and the gradient of a batched loss.
    loss = lambda w, x: fnp.sum(fnp.tanh(x @ w) ** 2)  # noqa: E731
    per = fusionjit.jit(fusionjit.vmap(fusionjit.grad(loss), in_axes=(None, 0)))(W, V)
    want = np.stack([np.asarray(fusionjit.grad(loss)(W, v)) for v in V])
    np.testing.assert_allclose(per, want, rtol=1e-5, atol=1e-6)
    total = fusionjit.grad(lambda w: fusionjit.vmap(loss, in_axes=(None, 0))(w, V).sum())(W)
    np.testing.assert_allclose(total, want.sum(0), rtol=1e-5, atol=1e-5)
    # The custom backward pass survives vmap: grad of a vmapped gammaln is digamma.
    x = np.abs(V[:, 0]) + 0.5
    np.testing.assert_allclose(fusionjit.grad(lambda v: fusionjit.vmap(fsp.gammaln)(v).sum())(x),
                               fsp.digamma(x), rtol=1e-5)


def test_batched_program_fuses_like_the_hand_batched_one():
    f = lambda v: fnp.tanh(v * 2 + 1) - v  # noqa: E731
    assert fusionjit.jit(fusionjit.vmap(f)).lower(V).compile().num_kernels == 1
    params = (W, B6[0], W.T)
    hand = fusionjit.jit(lambda x: _mlp(*params, x)).lower(V).compile()
    mapped = fusionjit.jit(fusionjit.vmap(lambda x: _mlp(*params, x))).lower(V).compile()
    assert mapped.num_kernels == hand.num_kernels


@requires_jax
def test_matches_jax_vmap():
    import jax
    import jax.numpy as jnp

    def f(np_, lax_, x, i, p):
        y = np_.where(p, np_.sin(x), x ** 2).sum(0)
        return lax_.dynamic_slice(y, (i,), (2,)) @ x[:, :2].T, np_.cumsum(x, 1)[i % 3]

    ours = fusionjit.vmap(lambda *a: f(fnp, lax, *a), in_axes=(0, 0, None))(X, IDX, True)
    theirs = jax.vmap(lambda *a: f(jnp, jax.lax, *a), in_axes=(0, 0, None))(X, IDX, True)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o, t, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call,message", [
    (lambda: fusionjit.vmap(lambda a, b: a + b)(V, W), "inconsistent sizes"),
    (lambda: fusionjit.vmap(lambda a: a, in_axes=3)(V), "no such axis"),
    (lambda: fusionjit.vmap(lambda a: a, in_axes=(0, 0))(V), "2 entries for 1"),
    (lambda: fusionjit.vmap(lambda a: a, out_axes=None)(V), "out_axes=None"),
    (lambda: fusionjit.vmap(lambda a: a, in_axes=None)(V), "axis_size"),
    (lambda: fusionjit.vmap(lambda a: a, in_axes=({"x": 0},))(V), "tree prefix"),
    (lambda: fusionjit.vmap(lambda a: a, spmd_axis_name="i")(V), "spmd_axis_name"),
    (lambda: fusionjit.vmap(lambda a: a[a > 0])(V), "not known inside vmap"),
])
def test_errors(call, message):
    with pytest.raises((ValueError, TypeError, NotImplementedError), match=message) as info:
        call()
    if not isinstance(info.value, NotImplementedError):
        assert "test_vmap.py" in str(info.value)
    with pytest.raises(TypeError, match="callable"):
        fusionjit.vmap(3)


@pytest.mark.parametrize("batch_size", [None, 1, 4, 5, 7])
def test_lax_map_in_vmapped_chunks(batch_size):
    # jax.lax.map's batch_size: chunks of that many slices, f vmapped over each, the slices
    # left over (5 % 4, 5 % 7) one more vmapped call.
    def f(t):
        return {"s": fnp.tanh(t["x"]).sum(), "y": t["x"] * t["w"]}

    xs = {"x": X[:, 0], "w": V}
    want = [np.stack([np.asarray(f({"x": a, "w": b})[k]) for a, b in zip(X[:, 0], V)])
            for k in ("s", "y")]
    mapped = lambda xs: lax.map(f, xs, batch_size=batch_size)  # noqa: E731
    for got in (mapped(xs), fusionjit.jit(mapped)(xs)):
        np.testing.assert_allclose(got["s"], want[0], rtol=1e-6)
        np.testing.assert_allclose(got["y"], want[1], rtol=1e-6)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        lax.map(f, xs, batch_size=0)


def test_grad_of_a_vmapped_cond_takes_no_nan_from_the_branch_not_taken():
    # With an index per example every branch runs on every example and a select keeps each
    # example's own; the branch not taken gets its operands without a derivative, as in
    # JAX, so a cond guarding a sqrt sends no NaN back (hunt 6: [0.25, nan, nan]).
    f = lambda v: lax.cond(v > 0, fnp.sqrt, lambda u: u, v)  # noqa: E731
    x = np.array([4.0, -1.0, 0.0], np.float32)
    for wrap in (lambda g: g, fusionjit.jit):
        g = wrap(fusionjit.grad(lambda x: fusionjit.vmap(f)(x).sum()))(x)
        np.testing.assert_array_equal(np.asarray(g), [0.25, 1, 1])

    def g(v, w):
        k = (v > 0).astype(np.int32) + (v > 5).astype(np.int32)
        return lax.switch(k, [lambda u, w: fnp.log(u) * w, lambda u, w: u * w,
                              lambda u, w: u ** 2 * w], v, w)

    gx, gw = fusionjit.grad(lambda x, w: fusionjit.vmap(g, in_axes=(0, None))(x, w).sum(),
                            argnums=(0, 1))(np.array([1.0, 2.0, 6.0], np.float32), 3.0)
    np.testing.assert_allclose(np.asarray(gx), [3, 3, 36])
    assert float(gw) == 39.0  # (JAX's figures)


# --- collectives over named axes ----------------------------------------------------------

Y = _r.uniform(-1, 1, (2, 3)).astype(np.float32)
C = np.array([1.0, 3.0, 2.0], np.float32)

# make(lib, lax) -> a function of the arguments, written once for fusionjit and for JAX.
COLLECTIVES = {
    "psum": (lambda m, lx: m.vmap(lambda v: lx.psum(v * v, "i") * v, axis_name="i"), (C,)),
    "pmean": (lambda m, lx: m.vmap(lambda v: lx.pmean(v * v, "i") * v, axis_name="i"), (C,)),
    "pmax": (lambda m, lx: m.vmap(lambda v: lx.pmax(v, "i") - v, axis_name="i"), (X,)),
    "pmin": (lambda m, lx: m.vmap(lambda v: lx.pmin(v, "i") - v, axis_name="i"), (X,)),
    "pytree": (lambda m, lx: m.vmap(lambda v: lx.psum({"a": v, "b": 2 * v}, "i"),
                                   axis_name="i"), (C,)),
    "int_pmean": (lambda m, lx: m.vmap(lambda v: lx.pmean(v, "i"), axis_name="i"),
                  (np.array([1, 2], np.int32),)),
    "bool_psum": (lambda m, lx: m.vmap(lambda v: lx.psum(v, "i"), axis_name="i"),
                  (np.array([True, False, True]),)),
    "axis_size": (lambda m, lx: m.vmap(lambda v: lx.psum(1, "i") + 0 * v, axis_name="i"), (C,)),
    "axis_index": (lambda m, lx: m.vmap(lambda v: lx.axis_index("i") * v, axis_name="i"), (C,)),
    "all_gather": (lambda m, lx: m.vmap(lambda v: lx.all_gather(v, "i", axis=1),
                                       axis_name="i"), (X,)),
    "all_gather_tiled": (lambda m, lx: m.vmap(lambda v: lx.all_gather(v, "i", axis=-1,
                                                                    tiled=True),
                                             axis_name="i"), (X,)),
    "in_axes_1": (lambda m, lx: m.vmap(lambda v: v / lx.psum(v, "i"), in_axes=1, out_axes=1,
                                      axis_name="i"), (Y,)),
    "nested_both": (lambda m, lx: m.vmap(m.vmap(lambda v: lx.psum(v, ("i", "j")),
                                               axis_name="j"), axis_name="i"), (Y,)),
    "nested_outer": (lambda m, lx: m.vmap(m.vmap(lambda v: lx.pmax(v, "j") - lx.psum(v, "i"),
                                                axis_name="j"), axis_name="i"), (Y,)),
    "nested_gather": (lambda m, lx: m.vmap(m.vmap(lambda v: lx.all_gather(v, "i"),
                                                 axis_name="j"), axis_name="i"), (Y,)),
    "nested_index": (lambda m, lx: m.vmap(m.vmap(lambda v: lx.axis_index(("i", "j")),
                                                axis_name="j"), axis_name="i"), (Y,)),
    "in_loop": (lambda m, lx: m.vmap(lambda v: lx.fori_loop(0, 3, lambda k, c: c + lx.psum(
        c, "i"), v), axis_name="i"), (C,)),
    "index_in_loop": (lambda m, lx: m.vmap(lambda v: lx.fori_loop(
        0, 3, lambda k, c: c + lx.axis_index("i"), 0), axis_name="i"), (C,)),
    "in_cond": (lambda m, lx: m.vmap(lambda v: lx.cond(v > 1.5, lambda: lx.pmax(v, "i"),
                                                     lambda: v), axis_name="i"), (C,)),
    "grad_inside": (lambda m, lx: m.vmap(m.grad(lambda v: lx.psum(v * v, "i") * v),
                                        axis_name="i"), (C,)),
    "grad_inside_pmean": (lambda m, lx: m.vmap(m.grad(lambda v: lx.pmean(v * v, "i") * v),
                                              axis_name="i"), (C,)),
    "grad_inside_gather": (lambda m, lx: m.vmap(m.grad(lambda v: (lx.all_gather(
        v * v, "i") * np.arange(3, dtype=np.float32)).sum() * v), axis_name="i"), (C,)),
    "grad_outside": (lambda m, lx: m.grad(lambda x: m.vmap(lambda v: lx.psum(v * v, "i") * v,
                                                          axis_name="i")(x).sum()), (C,)),
    "grad_outside_gather": (lambda m, lx: m.grad(lambda x: m.vmap(
        lambda v: lx.all_gather(v * v, "i")[0] * v, axis_name="i")(x).sum()), (C,)),
    "hessian_inside": (lambda m, lx: m.vmap(m.hessian(lambda v: lx.psum(v ** 3, "i")),
                                           axis_name="i"), (C,)),
    "jvp": (lambda m, lx: lambda x: m.jvp(m.vmap(lambda v: lx.pmean(v * v, "i") * v,
                                                axis_name="i"), (x,), (np.ones(3, np.float32),)),
            (C,)),
}


@requires_jax
@pytest.mark.parametrize("name", sorted(COLLECTIVES))
def test_collectives_under_a_named_vmap_match_jax(name):
    import jax
    make, args = COLLECTIVES[name]
    want = jax.tree_util.tree_leaves(make(jax, jax.lax)(*args))
    for f in (make(fusionjit, lax), fusionjit.jit(make(fusionjit, lax))):
        got = fusionjit.tree_util.tree_leaves(f(*args))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype, (g, w)
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_collectives_against_numpy():
    f = fusionjit.vmap(lambda v: (lax.psum(v, "i"), lax.pmax(v, "i"), lax.axis_index("i"),
                                  lax.all_gather(v, "i")), axis_name="i")
    s, mx, idx, gathered = f(V)
    np.testing.assert_allclose(s, np.broadcast_to(V.sum(0), V.shape), rtol=1e-6)
    np.testing.assert_array_equal(mx, np.broadcast_to(V.max(0), V.shape))
    np.testing.assert_array_equal(idx, np.arange(B))
    np.testing.assert_array_equal(gathered, np.broadcast_to(V, (B,) + V.shape))
    # The gradient of a psum is the psum of the cotangents: the values normalised by their
    # sum across the batch add up to 1 whatever they are, so this derivative is 0.
    g = fusionjit.vmap(fusionjit.grad(lambda v: v / lax.psum(v, "i")), axis_name="i")(C)
    np.testing.assert_allclose(g, np.zeros(3), atol=1e-6)


def test_collectives_in_a_custom_vjp_under_a_named_vmap():
    # The custom_vjp's batching rule vmaps its forward and backward passes over the same
    # named axis, so that their collectives find it.
    @fusionjit.custom_vjp
    def total(v):
        return lax.psum(v, "i")
    total.defvjp(lambda v: (lax.psum(v, "i"), None), lambda r, g: (lax.psum(g, "i"),))

    np.testing.assert_allclose(fusionjit.vmap(total, axis_name="i")(C), np.full(3, C.sum()))
    want = fusionjit.vmap(fusionjit.grad(lambda v: lax.psum(v * v, "i") * v),
                          axis_name="i")(C)
    got = fusionjit.vmap(fusionjit.grad(lambda v: total(v * v) * v), axis_name="i")(C)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    got = fusionjit.grad(lambda x: fusionjit.vmap(lambda v: total(v * v) * v,
                                                  axis_name="i")(x).sum())(C)
    np.testing.assert_allclose(got, [26.0, 50.0, 38.0], rtol=1e-6)


def test_collective_errors():
    with pytest.raises(NameError, match="unbound axis name: 'i'") as info:
        lax.psum(C, "i")
    assert "test_vmap.py" in str(info.value)
    with pytest.raises(NameError, match=r"unbound axis name: 'j'.*bound here are \['i'\]"):
        fusionjit.vmap(lambda v: lax.psum(v, "j"), axis_name="i")(C)
    with pytest.raises(NameError, match="unbound axis name"):
        fusionjit.vmap(lambda v: lax.axis_index("i"))(C)
    with pytest.raises(NotImplementedError, match="'pmax' not implemented"):
        fusionjit.vmap(fusionjit.grad(lambda v: lax.pmax(v * v, "i")), axis_name="i")(C)
    with pytest.raises(NotImplementedError, match="axis_index_groups"):
        fusionjit.vmap(lambda v: lax.psum(v, "i", axis_index_groups=[[0, 1]]),
                       axis_name="i")(C)
    with pytest.raises(ValueError, match="out of bounds"):
        fusionjit.vmap(lambda v: lax.all_gather(v, "i", axis=2), axis_name="i")(C)
    with pytest.raises(TypeError, match="hashable"):
        fusionjit.vmap(lambda v: v, axis_name=["i"])(C)
