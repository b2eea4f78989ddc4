"""The newer jax.lax and top-level names: general and variadic reduce, reduce_precision,
the smaller lax functions, custom_linear_solve / custom_root, and linear_transpose,
custom_gradient, closure_convert, ensure_compile_time_eval... checked against JAX and NumPy,
under jit, vmap and grad, and their errors (located at the caller's line)."""

import numpy as np
import pytest

import fusionjit as fj
import fusionjit.numpy as fnp
from fusionjit import lax
from conftest import assert_close, requires_jax

try:
    import jax
    import jax.numpy as jnp
    from jax import lax as jlax
except ImportError:  # pragma: no cover
    jax = jnp = jlax = None

try:
    import ml_dtypes
    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    ml_dtypes, BF16 = None, None

HERE = r"test_lax_more.py:\d+"


def _same(a, b, rtol=1e-6):
    """Equal pytrees of arrays: shapes, dtypes and values."""
    la, lb = fj.tree_util.tree_leaves(a), fj.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape and x.dtype == y.dtype, (x.shape, x.dtype, y.shape, y.dtype)
        np.testing.assert_allclose(x.astype(np.float64), y.astype(np.float64), rtol=rtol,
                                   atol=1e-6)


# --- reduce ---------------------------------------------------------------------------------

def _argmax_pair(lx):
    def comp(a, b):
        (av, ai), (bv, bi) = a, b
        pick = lx.bitwise_or(lx.gt(av, bv), lx.bitwise_and(lx.eq(av, bv), lx.lt(ai, bi)))
        return lx.select(pick, av, bv), lx.select(pick, ai, bi)
    return comp


def _argmax_reduce(lx, x, axis):
    idx = lx.broadcasted_iota(np.int32, x.shape, axis)
    return lx.reduce((x, idx), (np.float32(-np.inf), np.int32(0)), _argmax_pair(lx), (axis,))


@requires_jax
@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 5), 1), ((4, 1, 6), 0)])
def test_variadic_reduce_argmax_matches_jax(shape, axis, rng):
    x = rng.integers(0, 4, size=shape).astype(np.float32)  # ties: the lower index wins
    got = _argmax_reduce(lax, x, axis)
    _same(got, _argmax_reduce(jlax, x, axis))
    np.testing.assert_array_equal(np.asarray(got[1]), np.argmax(x, axis))
    _same(fj.jit(lambda v: _argmax_reduce(lax, v, axis))(x), got)


def test_variadic_reduce_vmap_and_empty(rng):
    x = rng.normal(size=(4, 9)).astype(np.float32)
    vals, idx = fj.vmap(lambda v: _argmax_reduce(lax, v, 0))(x)
    np.testing.assert_array_equal(np.asarray(idx), np.argmax(x, 1))
    np.testing.assert_array_equal(np.asarray(vals), x.max(1))
    empty = lax.reduce((np.zeros((2, 0), np.float32), np.zeros((2, 0), np.int32)),
                       (np.float32(5), np.int32(-1)), _argmax_pair(lax), (1,))
    np.testing.assert_array_equal(np.asarray(empty[0]), [5, 5])
    np.testing.assert_array_equal(np.asarray(empty[1]), [-1, -1])


@requires_jax
def test_reduce_general_computation_init_and_grad(rng):
    x = rng.normal(size=(3, 4, 5)).astype(np.float32)
    for dims in [(1,), (0, 2), ()]:  # (): each element as it is, as JAX's
        _same(lax.reduce(x, 1.5, lambda a, b: a + b, dims),
              jlax.reduce(x, 1.5, lambda a, b: a + b, dims), rtol=1e-5)
    _same(lax.reduce(x, 1.0, lax.add, (2,)), jlax.reduce(x, 1.0, jlax.add, (2,)), rtol=1e-5)
    _same(lax.reduce(x, -np.inf, lax.max, (0,)), jlax.reduce(x, -np.inf, jlax.max, (0,)))
    v = np.arange(1.0, 6.0, dtype=np.float32)

    def prod(lx):
        return lambda t: lx.reduce(t, 1.0, lambda a, b: a * b, (0,))
    assert_close(fj.grad(prod(lax))(v), np.asarray(jax.grad(prod(jlax))(v)), rtol=1e-5)
    assert_close(fj.jit(fj.grad(prod(lax)))(v), np.asarray(jax.grad(prod(jlax))(v)), rtol=1e-5)


def test_reduce_non_commutative_keeps_order():
    # An associative but non-commutative computation (keep the first element): the tree
    # combines adjacent runs with the earlier one on the left, and init comes first.
    x = np.arange(11, dtype=np.int32)
    assert int(lax.reduce(x, np.int32(-7), lambda a, b: a, (0,))) == -7
    one = np.ones((2, 1), np.float32)  # one element per output: init not combined in (XLA)
    np.testing.assert_array_equal(np.asarray(lax.reduce(one, 1.5, lambda a, b: a + b, (1,))),
                                  [1.0, 1.0])
    first = lax.reduce((x, np.ones(11, np.int32)), (np.int32(0), np.int32(0)),
                       lambda a, b: (lax.select(lax.eq(a[1], 0), b[0], a[0]),
                                     lax.max(a[1], b[1])), (0,))
    assert int(first[0]) == 0


def test_reduce_errors():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match=HERE + ".*same tree structure"):
        lax.reduce((x, x), (0.0,), lax.add, (1,))
    with pytest.raises(ValueError, match=HERE + ".*out of bounds"):
        lax.reduce(x, 0.0, lax.add, (2,))
    with pytest.raises(ValueError, match=HERE + ".*same shape"):
        lax.reduce((x, x[0]), (0.0, 0.0), lambda a, b: a, (0,))
    with pytest.raises(ValueError, match=HERE + ".*structure"):
        lax.reduce(x, 0.0, lambda a, b: (a, b), (1,))
    with pytest.raises(TypeError, match=HERE + ".*dtypes"):
        lax.reduce(x, np.int32(0), lax.add, (1,))


@requires_jax
def test_reduce_xor(rng):
    x = rng.integers(0, 2**16, size=(5, 6)).astype(np.int32)
    _same(lax.reduce_xor(x, (1,)), jlax.reduce_xor(x, (1,)))
    _same(lax.reduce_xor(x, (0, 1)), jlax.reduce_xor(x, (0, 1)))
    b = rng.integers(0, 2, size=(3, 7)).astype(bool)
    np.testing.assert_array_equal(np.asarray(lax.reduce_xor(b, (1,))), b.sum(1) % 2 == 1)
    with pytest.raises(TypeError, match=HERE):
        lax.reduce_xor(np.ones(3, np.float32), (0,))


# --- reduce_precision --------------------------------------------------------------------------

def _bits_of(d):
    return np.dtype(f"uint{np.dtype(d).itemsize * 8}")


@requires_jax
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_reduce_precision_bit_exact(dtype, rng):
    d = BF16 if dtype == "bfloat16" else np.dtype(dtype)
    if d is None:
        pytest.skip("ml_dtypes is not installed")
    u = _bits_of(d)
    x = rng.integers(0, np.iinfo(u).max, 2000, dtype=u, endpoint=True).view(d)
    special = np.array([0, -0.0, np.inf, -np.inf, np.nan, 1, 3.14159, 65504, 1e-7], np.float32)
    x = np.concatenate([x, special.astype(d)])
    for e, m in [(5, 10), (8, 7), (4, 3), (5, 2), (1, 0), (3, 20)]:
        want = np.asarray(jlax.reduce_precision(x, e, m))
        got = np.asarray(lax.reduce_precision(x, e, m))
        assert got.dtype == want.dtype
        nan = np.isnan(want.astype(np.float32))
        np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
        # (JAX's CPU canonicalises bfloat16 NaN payloads; all other bits must agree.)
        np.testing.assert_array_equal(got.view(u)[~nan], want.view(u)[~nan])
        if d != BF16:
            np.testing.assert_array_equal(got.view(u), want.view(u))


@requires_jax
def test_reduce_precision_transformations(rng):
    x = rng.normal(size=(4, 3)).astype(np.float32) * 10

    def f(lx):
        return lambda t: lx.reduce_precision(t * 3.0, 5, 2)
    _same(fj.jit(f(lax))(x), f(jlax)(x))
    _same(fj.vmap(f(lax))(x), jax.vmap(f(jlax))(x))
    assert_close(fj.grad(lambda t: f(lax)(t).sum())(x),
                 np.asarray(jax.grad(lambda t: f(jlax)(t).sum())(x)))
    _same(fj.jvp(f(lax), (x,), (x * 1.1,))[1], jax.jvp(f(jlax), (x,), (x * 1.1,))[1])


def test_reduce_precision_errors():
    with pytest.raises(ValueError, match=HERE + ".*exponent_bits"):
        lax.reduce_precision(np.ones(2, np.float32), 0, 3)
    with pytest.raises(ValueError, match=HERE + ".*mantissa_bits"):
        lax.reduce_precision(np.ones(2, np.float32), 5, -1)
    with pytest.raises(TypeError, match=HERE + ".*floating-point"):
        lax.reduce_precision(np.ones(2, np.int32), 5, 3)


# --- smaller lax functions -------------------------------------------------------------------

@requires_jax
def test_shape_functions_match_jax(rng):
    x = rng.normal(size=(3, 4, 5)).astype(np.float32)
    cases = [("split", (x, [1, 3], 1)), ("split", (x, [0, 5], -1)), ("tile", (x, (2, 1, 3))),
             ("broadcast_to_rank", (x, 5)), ("collapse", (x, 1)), ("collapse", (x, 0, 2)),
             ("stack", ([x, x + 1], 1)), ("unstack", (x, 2)), ("empty", ((2, 3), np.int32)),
             ("full_like", (x, 3)), ("full_like", (x, 2, np.int32, (2,))),
             ("broadcast_like", (x[0, :, :1], x))]
    for name, args in cases:
        _same(getattr(lax, name)(*args), getattr(jlax, name)(*args))
    _same(fj.jit(lambda v: lax.split(v, (2, 2), 1))(x), jlax.split(x, (2, 2), 1))
    assert_close(fj.grad(lambda v: lax.tile(v, (2, 1, 1)).sum() + lax.unstack(v)[1].sum())(x),
                 np.asarray(jax.grad(lambda v: jlax.tile(v, (2, 1, 1)).sum()
                                     + jlax.unstack(v)[1].sum())(x)))
    assert lax.broadcast_shapes((2, 1), (3,), ()) == jlax.broadcast_shapes((2, 1), (3,), ())
    assert lax.dtype(1.0) == jlax.dtype(1.0) and lax.dtype(np.int64) == jlax.dtype(np.int64)


def test_shape_function_errors():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match=HERE + ".*add up"):
        lax.split(x, [1, 1], 0)
    with pytest.raises(ValueError, match=HERE + ".*one entry per dimension"):
        lax.tile(x, (2,))
    with pytest.raises(ValueError, match=HERE + ".*incompatible"):
        lax.broadcast_shapes((2,), (3,))
    with pytest.raises(ValueError, match=HERE + ".*invalid dimension range"):
        lax.collapse(x, 1, 0)
    with pytest.raises(ValueError, match=HERE + ".*out of bounds"):
        lax.stack([x], 3)


@requires_jax
@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int8, np.uint16])
def test_mulhi_clz_match_jax(dtype, rng):
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, 200, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, 200, endpoint=True).astype(dtype)
    a[:4] = [0, info.max, info.min, 1]
    _same(lax.mulhi(a, b), jlax.mulhi(a, b))
    _same(fj.jit(lax.clz)(a), jlax.clz(a))
    _same(fj.vmap(lax.mulhi)(a, b), jlax.mulhi(a, b))
    with pytest.raises(TypeError, match=HERE):
        lax.clz(np.ones(2, np.float32))


@requires_jax
def test_nextafter_batch_matmul_index_take(rng):
    x = rng.normal(size=(3, 4, 5)).astype(np.float32)
    _same(lax.nextafter(x, np.zeros_like(x)), jlax.nextafter(x, np.zeros_like(x)))
    y = rng.normal(size=(3, 5, 2)).astype(np.float32)
    _same(lax.batch_matmul(x, y), jlax.batch_matmul(x, y), rtol=1e-5)
    idxs = (np.array([0, 2, -1, 4]), np.array([1, 5, 3, -7]))
    _same(lax.index_take(x, idxs, (0, 2)), jlax.index_take(x, idxs, (0, 2)))
    with pytest.raises(ValueError, match=HERE + ".*same ndim"):
        lax.batch_matmul(x, y[0])
    with pytest.raises(TypeError, match=HERE):
        lax.nextafter(np.ones(2, np.int32), np.ones(2, np.int32))


@requires_jax
def test_scatter_sub_and_apply():
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    jdn = jlax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                       scatter_dims_to_operand_dims=(0,))
    v = np.arange(6, dtype=np.float32)
    idx = np.array([[1], [4], [1]])
    upd = np.array([1.0, 2.0, 3.0], np.float32)
    _same(lax.scatter_sub(v, idx, upd, dn), jlax.scatter_sub(v, idx, upd, jdn))
    _same(fj.jit(lambda t: lax.scatter_apply(t, idx, lambda s: s * 2 + 1, dn,
                                             update_shape=(3,)))(v),
          jlax.scatter_apply(v, idx, lambda s: s * 2 + 1, jdn, update_shape=(3,)))
    _same(lax.scatter_apply(v, idx[:2], fnp.sin, dn, update_shape=(2,), unique_indices=True),
          jlax.scatter_apply(v, idx[:2], jnp.sin, jdn, update_shape=(2,), unique_indices=True))


@requires_jax
def test_approx_k_and_patches(rng):
    x = rng.normal(size=(3, 8, 5)).astype(np.float32)
    for fn in ("approx_max_k", "approx_min_k"):
        for dim in (-1, 1):
            _same(getattr(lax, fn)(x, 3, dim), getattr(jlax, fn)(x, 3, dim))
    with pytest.raises(ValueError, match=HERE + ".*k=9"):
        lax.approx_max_k(x, 9, 1)
    img = rng.normal(size=(2, 3, 6, 5)).astype(np.float32)
    _same(lax.conv_general_dilated_patches(img, (2, 3), (1, 2), "SAME"),
          jlax.conv_general_dilated_patches(img, (2, 3), (1, 2), "SAME"))
    nhwc = img.transpose(0, 2, 3, 1)
    dn = ("NHWC", "HWIO", "NHWC")
    _same(lax.conv_general_dilated_patches(nhwc, (2, 2), (1, 1), "VALID", dimension_numbers=dn,
                                           rhs_dilation=(2, 1)),
          jlax.conv_general_dilated_patches(nhwc, (2, 2), (1, 1), "VALID", dimension_numbers=dn,
                                            rhs_dilation=(2, 1)))


@requires_jax
def test_shape_tuples_match_jax():
    dn = ("NHWC", "HWIO", "NHWC")
    assert lax.conv_shape_tuple((2, 3, 9, 9), (4, 3, 3, 2), (2, 1), "SAME") == \
        tuple(int(d) for d in jlax.conv_shape_tuple((2, 3, 9, 9), (4, 3, 3, 2), (2, 1), "SAME"))
    for fn, args in [("conv_general_shape_tuple", ((2, 9, 8, 3), (3, 2, 3, 4), (2, 1), "VALID")),
                     ("conv_transpose_shape_tuple", ((2, 9, 8, 3), (3, 2, 3, 4), (2, 1), "SAME")),
                     ("conv_transpose_shape_tuple",
                      ((2, 9, 8, 3), (3, 2, 3, 4), (2, 3), [(1, 2), (0, 1)]))]:
        want = tuple(int(d) for d in getattr(jlax, fn)(*args, dn))
        assert getattr(lax, fn)(*args, dn) == want
    args = ((9, 8), (3, 2), (2, 1), [(1, 1), (0, 2)], (2, 1), (1, 2))
    assert lax.reduce_window_shape_tuple(*args) == jlax.reduce_window_shape_tuple(*args)
    assert lax.conv_general_permutations(dn) == jlax.conv_general_permutations(dn)


def test_optimization_barrier_is_identity():
    x = np.arange(3.0, dtype=np.float32)
    out = fj.jit(lambda t: lax.optimization_barrier((t, t * 2)))(x)
    np.testing.assert_array_equal(np.asarray(out[1]), x * 2)
    assert_close(fj.grad(lambda t: lax.optimization_barrier(t * t).sum())(x), 2 * x)


# --- custom_linear_solve and custom_root -----------------------------------------------------

def _linear_solve(lx, la):
    def f(a, b):
        return lx.custom_linear_solve(lambda x: a @ x, b, lambda mv, y: la.solve(a, y),
                                      lambda vm, y: la.solve(a.T, y))
    return f


@requires_jax
def test_custom_linear_solve_matches_jax(rng):
    a = rng.normal(size=(3, 3)).astype(np.float32) + 3 * np.eye(3, dtype=np.float32)
    b = rng.normal(size=3).astype(np.float32)
    f, g = _linear_solve(lax, fnp.linalg), _linear_solve(jlax, jnp.linalg)
    _same(f(a, b), g(a, b), rtol=1e-5)
    for got, want in zip(fj.grad(lambda *p: f(*p).sum(), (0, 1))(a, b),
                         jax.grad(lambda *p: g(*p).sum(), (0, 1))(a, b)):
        assert_close(got, np.asarray(want), rtol=1e-4, atol=1e-6)
    _same(fj.jvp(f, (a, b), (np.ones_like(a), b))[1], jax.jvp(g, (a, b), (np.ones_like(a), b))[1],
          rtol=1e-4)
    bs = np.stack([b, 2 * b])
    _same(fj.jit(fj.vmap(f, (None, 0)))(a, bs), jax.vmap(g, (None, 0))(a, bs), rtol=1e-5)
    with pytest.raises(TypeError, match=HERE + ".*transpose_solve required"):
        fj.grad(lambda a: lax.custom_linear_solve(lambda x: a @ x, b,
                                                  lambda mv, y: fnp.linalg.solve(a, y)).sum())(a)


def _sqrt_root(lx, npm):
    def root(c):
        def solve(f, x0):
            return lx.while_loop(lambda x: npm.abs(f(x)) > 1e-6, lambda x: x - f(x) / (2 * x), x0)
        return lx.custom_root(lambda x: x * x - c, 1.0, solve, lambda g, y: y / g(1.0))
    return root


@requires_jax
def test_custom_root_matches_jax():
    f, g = _sqrt_root(lax, fnp), _sqrt_root(jlax, jnp)
    assert_close(f(2.0), np.asarray(g(2.0)))
    assert_close(fj.grad(f)(2.0), np.asarray(jax.grad(g)(2.0)), rtol=1e-5)
    assert_close(fj.jit(fj.grad(f))(4.0), np.float32(0.25), rtol=1e-5)
    assert_close(fj.vmap(fj.grad(f))(np.array([1.0, 4.0, 9.0], np.float32)),
                 np.array([0.5, 0.25, 1 / 6], np.float32), rtol=1e-5)
    with pytest.raises(TypeError, match=HERE + ".*structure"):
        lax.custom_root(lambda x: (x, x), 1.0, lambda f, x: x, lambda g, y: y)


# --- top-level API --------------------------------------------------------------------------

@requires_jax
def test_linear_transpose_matches_jax(rng):
    a = rng.normal(size=(2, 3)).astype(np.float32)

    def lin(x, y):
        return a @ x + 2 * y[:2]
    prims = (fj.ShapeDtypeStruct((3,), np.float32), np.zeros(4, np.float32))
    ct = np.array([1.0, -2.0], np.float32)
    got = fj.linear_transpose(lin, *prims)(ct)
    want = jax.linear_transpose(lin, jax.ShapeDtypeStruct((3,), np.float32),
                                np.zeros(4, np.float32))(ct)
    _same(got, want, rtol=1e-5)
    with pytest.raises(TypeError, match=HERE + ".*floating-point"):
        fj.linear_transpose(lambda x: x, np.zeros(2, np.int32))
    with pytest.raises(TypeError, match=HERE + ".*does not match"):
        fj.linear_transpose(lin, *prims)(np.ones(2, np.int32))


def test_custom_gradient_and_closure_convert():
    @fj.custom_gradient
    def f(x):
        return x ** 2, lambda g: (g * 10 * x,)
    assert float(f(3.0)) == 9.0
    assert float(fj.grad(f)(3.0)) == 30.0
    assert_close(fj.vmap(fj.grad(f))(np.arange(3.0, dtype=np.float32)),
                 np.array([0.0, 10.0, 20.0], np.float32))

    def outer(y):
        conv, consts = fj.closure_convert(lambda x: x * y, 1.0)
        return conv(2.0, *consts), len(consts)
    assert outer(3.0)[1] == 0  # nothing traced to hoist
    assert float(fj.grad(lambda y: outer(y)[0])(3.0)) == 2.0
    assert float(fj.jit(lambda y: outer(y)[0])(3.0)) == 6.0


def test_ensure_compile_time_eval_and_small_names():
    @fj.jit
    def h(x):
        with fj.ensure_compile_time_eval():
            k = int(fnp.sum(fnp.arange(4)))  # concrete inside jit
            y = x * 2  # traced values stay traced
        return y + k
    assert float(h(1.0)) == 8.0
    assert fj.typeof(fnp.arange(3)).shape == (3,)
    assert fj.typeof(fnp.arange(3)).dtype == np.int32
    named = fj.named_call(lambda x: x + 1, name="step")
    assert named.__name__ == "step" and int(named(1)) == 2
    assert "fusionjit" in fj.print_environment_info(return_string=True)
    with fj.default_matmul_precision("highest"):
        assert float(fnp.dot(np.ones(3, np.float32), np.ones(3, np.float32))) == 3.0
    pol = fj.checkpoint_policies
    g = fj.grad(fj.checkpoint(lambda x: fnp.sin(x) * 2, policy=pol.dots_saveable))(1.0)
    assert_close(g, np.float32(2 * np.cos(1.0)))
    assert pol.everything_saveable() and not pol.nothing_saveable()


# --- ensure_compile_time_eval around control flow -------------------------------------------

@requires_jax
def test_compile_time_eval_control_flow_on_traced_and_concrete_operands():
    # Regression: inside jit, within the block, control flow on traced operands recursed
    # without end (and closed-over traced values failed); concrete operands must give
    # concrete results there, traced ones stay traced, as in JAX.
    def body(lx, ctx, x):
        with ctx():
            c, ys = lx.scan(lambda c, v: (c + v, c * v), x, np.arange(4.0, dtype=np.float32))
            c2, _ = lx.scan(lambda c, v: (c + v * x, c), 1.0, np.arange(4.0, dtype=np.float32))
            a = lx.fori_loop(0, 3, lambda i, v: v * 2, x)
            b = lx.while_loop(lambda v: v < 10, lambda v: v * 2, x)
            e = lx.cond(x > 1, lambda v: v + 1, lambda v: v - 1, x)
            s = lx.switch(1, [lambda v: v + 1, lambda v: v - 1], x)
            n = lx.fori_loop(0, 3, lambda i, v: v * 2, 1.0)  # concrete operands
            k = int(n) + int(lx.cond(True, lambda v: v + 1, lambda v: v - 1, 3.0))
            m = int(lx.scan(lambda c, v: (c + v, None), 0, np.arange(5))[0])
        return c, ys, c2, a, b, e, s, x + k + m

    x = np.float32(2.0)
    got = fj.jit(lambda x: body(lax, fj.ensure_compile_time_eval, x))(x)
    want = jax.jit(lambda x: body(jlax, jax.ensure_compile_time_eval, x))(x)
    _same(got, want)
    assert float(got[-1]) == 2.0 + 8 + 4 + 10


def test_compile_time_eval_control_flow_stays_traced_and_matches_numpy():
    seen = []

    @fj.jit
    def f(x, w):
        with fj.ensure_compile_time_eval():
            out = lax.scan(lambda c, v: (c * w + v, c), x, fnp.arange(3.0))
            seen.append(type(out[0]).__name__)
        return out

    c, ys = f(np.float32(1.5), np.float32(0.5))
    assert seen == ["Tracer"]
    want_c, want_ys = 1.5, []
    for v in range(3):
        want_ys.append(want_c)
        want_c = want_c * 0.5 + v
    assert_close(c, np.float32(want_c))
    assert_close(ys, np.array(want_ys, np.float32))


# --- reduce_window with any computation -----------------------------------------------------

_WINDOWS = [((7,), (3,), (2,), "SAME", None, None),
            ((6, 5), (2, 3), (1, 2), "SAME", None, None),
            ((6, 5), (2, 2), (2, 1), "SAME_LOWER", (1, 2), None),
            ((6, 5), (2, 2), (1, 1), [(1, 2), (0, 1)], (2, 1), (1, 2)),
            ((2, 5, 4, 3), (1, 3, 2, 1), (1, 2, 1, 1), "SAME", None, (1, 1, 2, 1)),
            ((5, 4), (2, 2), (1, 1), [(-1, 1), (2, 0)], None, None),
            ((1, 3), (3, 3), (1, 1), [(1, 1), (1, 1)], (1, 2), (1, 1)),
            ((0, 4), (1, 2), (1, 1), "VALID", None, None)]

# name -> (the computation for a lax and a numpy module, dtypes, init value)
_COMPUTATIONS = {
    "a+b+ab": (lambda lx, npm: lambda a, b: a + b + a * b, [np.float32], 0.0),
    "logaddexp": (lambda lx, npm: npm.logaddexp, [np.float32], -np.inf),
    "or": (lambda lx, npm: lx.bitwise_or, [np.int32, np.uint8], 0),
    "xor": (lambda lx, npm: lambda a, b: a ^ b, [np.bool_, np.int32], 0),
    "maximum": (lambda lx, npm: lambda a, b: npm.maximum(a, b), [np.float16, np.int32], 1),
    "add, init 3": (lambda lx, npm: lx.add, [np.float32], 3.0),
}


@requires_jax
@pytest.mark.parametrize("window", _WINDOWS, ids=lambda w: f"{w[0]}-{w[3]}")
def test_reduce_window_any_computation_matches_jax(window, rng):
    shape, dims, strides, padding, base, dil = window
    for make, dtypes, init in _COMPUTATIONS.values():
        for d in dtypes:
            if np.dtype(d).kind in "biu":
                x = rng.integers(0, 2 if d == np.bool_ else 50, size=shape).astype(d)
            else:
                x = (rng.normal(size=shape) * 0.3).astype(d)
            iv = np.asarray(init, d)
            got = fj.jit(lambda x: lax.reduce_window(x, iv, make(lax, fnp), dims, strides,
                                                     padding, base, dil))(x)
            want = jlax.reduce_window(x, iv, make(jlax, jnp), dims, strides, padding, base, dil)
            _same(got, want, rtol=1e-5)


def test_reduce_window_computation_is_not_guessed_from_probes():
    # Regression: a function was taken for lax.add because it gave a + b on two probes.
    x = np.array([1.0, 20.0, 3.0, 4.0], np.float32)
    got = lax.reduce_window(x, 0.0, lambda a, b: fnp.where(b > 10, a, a + b), (2,), (1,))
    np.testing.assert_array_equal(np.asarray(got), [1.0, 3.0, 7.0])


@requires_jax
def test_reduce_window_folds_into_the_init_value_on_the_left():
    # As XLA's loop, acc = f(acc, cell), row-major (unpadded windows: XLA's CPU order
    # changes where the last dimension is padded).
    x = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
    for f in (lambda a, b: a - b, lambda a, b: 3 * a + b):
        for dims in ((1, 1), (2, 2), (3, 2)):
            _same(lax.reduce_window(x, 1, f, dims, (1, 1)),
                  jlax.reduce_window(x, 1, f, dims, (1, 1)))


@requires_jax
def test_reduce_window_string_padding_with_base_dilation_matches_jax():
    # Regression: "SAME" was computed from the base-dilated shape; JAX computes it from the
    # operand's (the window dilated).
    x = np.arange(1, 5, dtype=np.float32)
    for padding in ("SAME", "SAME_LOWER"):
        for op, init in ((lax.add, 0.0), (lambda a, b: a + b, 0.0), (lax.max, -np.inf)):
            jop = {lax.add: jlax.add, lax.max: jlax.max}.get(op, op)
            _same(lax.reduce_window(x, init, op, (3,), (2,), padding, (2,), (1,)),
                  jlax.reduce_window(x, init, jop, (3,), (2,), padding, (2,), (1,)))


@requires_jax
def test_variadic_reduce_window_argmax_under_jit_and_vmap(rng):
    x = rng.integers(0, 4, size=(2, 6, 5)).astype(np.float32)  # ties: the lower index wins
    idx = np.arange(x.size, dtype=np.int32).reshape(x.shape)
    init = (np.float32(-np.inf), np.int32(0))
    args = ((1, 3, 2), (1, 2, 1), "SAME")

    def pool(lx, v, i):
        return lx.reduce_window((v, i), init, _argmax_pair(lx), *args)
    _same(fj.jit(lambda v, i: pool(lax, v, i))(x, idx), pool(jlax, x, idx))
    _same(fj.vmap(lambda v, i: pool(lax, v, i))(x[None], idx[None]),
          jax.vmap(lambda v, i: pool(jlax, v, i))(x[None], idx[None]))


@requires_jax
def test_reduce_window_any_computation_derivatives(rng):
    def f(lx):
        return lambda v: lx.reduce_window(v, 0.0, lambda a, b: a + b + a * b, (2, 2), (1, 1),
                                          "SAME")
    x = (rng.normal(size=(4, 5)) * 0.3).astype(np.float32)
    t = rng.normal(size=(4, 5)).astype(np.float32)
    _same(fj.jvp(f(lax), (x,), (t,)), jax.jvp(f(jlax), (x,), (t,)), rtol=1e-5)
    # JAX has no reverse mode here; the gradient of the sum is its forward derivatives'.
    g = fj.grad(lambda v: f(lax)(v).sum())(x)
    want = [jax.jvp(lambda v: f(jlax)(v).sum(), (x,), (e.reshape(x.shape),))[1]
            for e in np.eye(x.size, dtype=np.float32)]
    _same(g, np.reshape(want, x.shape), rtol=1e-5)
    assert_close(fj.vmap(f(lax))(np.stack([x, 2 * x])),
                 np.asarray(jax.vmap(f(jlax))(np.stack([x, 2 * x]))), rtol=1e-5, atol=1e-6)


def test_reduce_window_errors():
    x = np.ones((4, 4), np.float32)
    here = HERE + r".*reduce_window: "
    with pytest.raises(ValueError, match=here + "operand must have the same tree structure"):
        lax.reduce_window((x, x), 0.0, lax.add, (2, 2))
    with pytest.raises(TypeError, match=here + "computation must be callable"):
        lax.reduce_window(x, 0.0, "add", (2, 2))
    with pytest.raises(ValueError, match=here + "all operands must have the same shape"):
        lax.reduce_window((x, x[:2]), (0.0, 0.0), lambda a, b: a, (2, 2))
    with pytest.raises(TypeError, match=here + "init values must be scalars"):
        lax.reduce_window(x, np.zeros(2, np.float32), lambda a, b: a * b, (2, 2))
    with pytest.raises(TypeError, match=here + "the init values' dtypes must match"):
        lax.reduce_window(x, np.int32(0), lambda a, b: a * b, (2, 2))
    with pytest.raises(ValueError, match=here + "the computation must return a pytree"):
        lax.reduce_window(x, 0.0, lambda a, b: (a, b), (2, 2))
    with pytest.raises(TypeError, match=here + r"the computation must return scalars .*bool"):
        lax.reduce_window(x, 0.0, lambda a, b: a > b, (2, 2))
    with pytest.raises(ValueError, match=here + "window_dimensions must be 2 positive"):
        lax.reduce_window(x, 0.0, lambda a, b: a * b, (2,))
    with pytest.raises(ValueError, match=here + "no operands"):
        lax.reduce_window((), (), lambda a, b: a, ())
