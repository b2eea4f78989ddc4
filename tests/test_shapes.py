"""Array creation, shape manipulation and basic indexing in fusionjit.numpy against NumPy,
eagerly and under jit. Values, shapes and dtypes are all checked; dtypes follow JAX's rules
with x64 disabled (default int int32, default float float32, weak Python scalars)."""

from __future__ import annotations

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
from conftest import assert_close

F32, I32, U32, BOOL = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.uint32),
                       np.dtype(np.bool_))
MODES = ["eager", "jit"]


def run(fn, mode, *args):
    """``fn`` on fusionjit arrays made from ``args`` (eager) or jit-compiled on ``args``."""
    if mode == "jit":
        out = fusionjit.jit(fn)(*args)
    else:
        out = fn(*[fnp.asarray(a) for a in args])
    return out


def check(got, expected, **kw):
    """``got`` is a fusionjit Array equal to ``expected`` in value, shape and dtype."""
    assert isinstance(got, fusionjit.Array), f"got a {type(got).__name__}, not an Array"
    assert_close(got, expected, **kw)


def sample(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    if dtype.kind == "u":
        return rng.integers(0, 50, shape).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(-50, 50, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


# --- array / asarray -----------------------------------------------------------------

@pytest.mark.parametrize("obj,expected", [
    ([1, 2, 3], np.array([1, 2, 3], np.int32)),
    ([[1.0, 2.0], [3, 4]], np.array([[1, 2], [3, 4]], np.float32)),
    ([1, 2.5], np.array([1, 2.5], np.float32)),
    ([True, False, True], np.array([True, False, True])),
    ([True, 2], np.array([1, 2], np.int32)),
    ((1, 2, 3), np.array([1, 2, 3], np.int32)),
    ([[[1], [2]], [[3], [4]]], np.arange(1, 5, dtype=np.int32).reshape(2, 2, 1)),
    ([[]], np.zeros((1, 0), np.float32)),
    ([], np.zeros((0,), np.float32)),
    ([-2147483648, 2147483647], np.array([-2147483648, 2147483647], np.int32)),
], ids=["ints", "floats2d", "int_float", "bools", "bool_int", "tuple", "rank3", "empty2d",
        "empty", "int32_limits"])
def test_array_from_nested_lists(obj, expected):
    check(fnp.array(obj), expected)
    check(fnp.asarray(obj), expected)


@pytest.mark.parametrize("src,expected_dtype", [
    (np.arange(6.0).reshape(2, 3), F32),              # float64 -> float32 without x64
    (np.arange(6).reshape(3, 2), I32),                 # int64 -> int32
    (np.arange(6, dtype=np.float32), F32),
    (np.arange(6, dtype=np.int32), I32),
    (np.arange(6, dtype=np.uint32), U32),
    (np.arange(6, dtype=np.uint64), U32),
    (np.array([True, False]), BOOL),
    (np.zeros((2, 0, 3)), F32),
    (np.array(2.5), F32),
], ids=["f64", "i64", "f32", "i32", "u32", "u64", "bool", "zero_size", "0d"])
def test_array_from_numpy(src, expected_dtype):
    out = fnp.array(src)
    check(out, src.astype(expected_dtype))
    assert out.weak_type is False
    check(fnp.asarray(src), src.astype(expected_dtype))


def test_array_from_non_contiguous_numpy():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    for view in (base[::2], base.T, base[:, ::-3], base[1:3, 2:5].T):
        check(fnp.asarray(view), np.ascontiguousarray(view))


def test_array_copies_numpy_input():
    src = np.arange(4, dtype=np.float32)
    out = fnp.array(src)
    src[0] = 100.0
    check(out, np.arange(4, dtype=np.float32))


@pytest.mark.parametrize("value,dtype,weak", [
    (3, I32, True), (-7, I32, True), (2.5, F32, True), (True, BOOL, False),
    (np.int32(4), I32, False), (np.float32(1.5), F32, False), (np.int64(9), I32, False),
    (np.bool_(False), BOOL, False), (np.uint32(7), U32, False),
])
def test_array_from_scalars(value, dtype, weak):
    for f in (fnp.array, fnp.asarray):
        out = f(value)
        check(out, np.array(value, dtype))
        assert out.weak_type is weak


def test_array_from_numpy_float64_scalar_is_not_weak(x64):
    out = fnp.asarray(np.float64(2.5))
    assert out.dtype == np.float64
    assert out.weak_type is False
    # A strongly typed float64 wins over float32, as in JAX and NumPy 2.
    assert (fnp.ones(3, dtype=np.float32) + np.float64(1.0)).dtype == np.float64


def test_array_scalar_int_out_of_range_raises():
    with pytest.raises(OverflowError):
        fnp.array(2**40)


def test_array_list_int_out_of_range_raises():
    with pytest.raises(OverflowError):
        fnp.array([1, 2**40])


@pytest.mark.parametrize("obj,dtype,expected", [
    ([1, 2, 3], np.float32, np.array([1, 2, 3], np.float32)),
    ([1.7, -2.7, 0.2], np.int32, np.array([1, -2, 0], np.int32)),
    ([0, 2, -1], bool, np.array([False, True, True])),
    (np.arange(3.0), np.int32, np.arange(3, dtype=np.int32)),
    (np.arange(3, dtype=np.int32), np.uint32, np.arange(3, dtype=np.uint32)),
    (7, np.float32, np.array(7, np.float32)),
    (2.9, np.int32, np.array(2, np.int32)),
    ([1, 2], np.float64, np.array([1, 2], np.float32)),  # float64 canonicalises to float32
    ([1, 2], float, np.array([1, 2], np.float32)),
    ([1, 2], int, np.array([1, 2], np.int32)),
], ids=["int2f32", "float2i32", "int2bool", "np_f2i", "i32_u32", "scalar", "scalar_trunc",
        "f64_canon", "py_float", "py_int"])
def test_array_dtype_argument(obj, dtype, expected):
    out = fnp.array(obj, dtype=dtype)
    check(out, expected)
    assert out.weak_type is False
    check(fnp.asarray(obj, dtype=dtype), expected)


def test_array_of_fusionjit_array_is_identity_like():
    x = fnp.arange(5)
    assert fnp.asarray(x) is x
    check(fnp.array(x), np.arange(5, dtype=np.int32))
    check(fnp.array(x, dtype=np.float32), np.arange(5, dtype=np.float32))


def test_array_ndmin():
    check(fnp.array([1, 2], ndmin=3), np.array([1, 2], np.int32, ndmin=3))
    check(fnp.array(5.0, ndmin=2), np.array(5.0, np.float32, ndmin=2))
    check(fnp.array(np.ones((2, 3)), ndmin=1), np.ones((2, 3), np.float32))


def test_array_rejects_unsupported_objects():
    with pytest.raises(TypeError):
        fnp.array("abc")
    with pytest.raises(TypeError):
        fnp.array([1j, 2])
    with pytest.raises((TypeError, ValueError)):
        fnp.array([[1, 2], [3]])


def test_array_stacks_traced_scalars_under_jit():
    f = fusionjit.jit(lambda x, y: fnp.array([x, y]))
    check(f(np.float32(1.5), np.float32(-2.0)), np.array([1.5, -2.0], np.float32))
    # Not constant-folded: a second call with new values gives new results.
    check(f(np.float32(3.0), np.float32(4.0)), np.array([3.0, 4.0], np.float32))
    check(f(np.int32(3), np.int32(-4)), np.array([3, -4], np.int32))
    check(f(np.int32(3), np.float32(0.5)), np.array([3.0, 0.5], np.float32))
    check(f(np.bool_(True), np.bool_(False)), np.array([True, False]))


def test_array_stacks_traced_arrays_under_jit():
    a = sample((2, 3), F32, 1)
    b = sample((2, 3), F32, 2)
    check(fusionjit.jit(lambda x, y: fnp.array([x, y, x]))(a, b), np.array([a, b, a]))
    check(fusionjit.jit(lambda x, y: fnp.array((y, x)))(a, b), np.array([b, a]))
    ai = sample((4,), I32, 3)
    af = sample((4,), F32, 4)
    check(fusionjit.jit(lambda x, y: fnp.array([x, y]))(ai, af),
          np.array([ai.astype(np.float32), af]))


def test_array_stacks_nested_traced_and_constant_elements_under_jit():
    f = fusionjit.jit(lambda x, y: fnp.array([[x, 1.0], [2, y]]))
    check(f(np.float32(5.0), np.float32(-1.0)), np.array([[5.0, 1.0], [2.0, -1.0]], np.float32))
    g = fusionjit.jit(lambda x: fnp.array([x, 2 * x, x + 1]))
    check(g(np.int32(3)), np.array([3, 6, 4], np.int32))
    h = fusionjit.jit(lambda v: fnp.array([v, np.zeros(3, np.float32), v * 2]))
    v = sample((3,), F32, 4)
    check(h(v), np.array([v, np.zeros(3, np.float32), v * 2]))


def test_array_stacks_traced_values_with_dtype_under_jit():
    f = fusionjit.jit(lambda x, y: fnp.array([x, y], dtype=np.int32))
    check(f(np.float32(1.9), np.float32(-1.9)), np.array([1, -1], np.int32))
    g = fusionjit.jit(lambda x: fnp.array(x, dtype=np.float32))
    check(g(np.arange(3, dtype=np.int32)), np.arange(3, dtype=np.float32))


def test_array_stacks_eager_arrays():
    a, b = fnp.ones(3), fnp.zeros(3)
    check(fnp.array([a, b]), np.array([np.ones(3), np.zeros(3)], np.float32))
    check(fnp.array([fnp.asarray(np.int32(1)), 2.5]), np.array([1.0, 2.5], np.float32))


def test_array_of_traced_values_with_different_shapes_raises():
    with pytest.raises(ValueError):
        fusionjit.jit(lambda x, y: fnp.array([x, y]))(np.ones(2, np.float32),
                                                         np.ones(3, np.float32))
    with pytest.raises(ValueError):
        fnp.array([fnp.ones(2), fnp.ones(3)])


def test_array_of_traced_weak_scalars_is_strongly_typed():
    out = fusionjit.jit(lambda x, y: fnp.array([x, y]))(1, 2)
    assert out.dtype == np.int32
    assert out.weak_type is False
    # Observable consequence: a strong int32 meets uint32 -> int32 (JAX, x64 off), not uint32.
    u = np.array([1, 1], np.uint32)
    res = fusionjit.jit(lambda x, y, z: fnp.array([x, y]) + z)(1, 2, u)
    # The same list of concrete Python ints is strong:
    assert (fnp.array([1, 2]) + u).dtype == np.int32
    assert res.dtype == np.int32


# --- zeros, ones, full, *_like --------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(), 0, 3, (2, 3), (2, 0, 4), [1, 2], (np.int64(2), 3)],
                         ids=["0d", "zero", "int", "2d", "zero_size", "list", "np_int"])
def test_zeros_ones(mode, shape):
    np_shape = tuple(int(d) for d in shape) if isinstance(shape, (tuple, list)) else shape
    check(run(lambda: fnp.zeros(shape), mode), np.zeros(np_shape, np.float32))
    check(run(lambda: fnp.ones(shape), mode), np.ones(np_shape, np.float32))
    for d in (np.int32, np.float32, bool, np.uint32, int, float):
        expected_dtype = {int: I32, float: F32}.get(d, np.dtype(d))
        check(run(lambda d=d: fnp.zeros(shape, dtype=d), mode), np.zeros(np_shape, expected_dtype))
        check(run(lambda d=d: fnp.ones(shape, d), mode), np.ones(np_shape, expected_dtype))


@pytest.mark.parametrize("mode", MODES)
def test_full(mode):
    check(run(lambda: fnp.full((2, 3), 7), mode), np.full((2, 3), 7, np.int32))
    check(run(lambda: fnp.full((2, 3), 7.5), mode), np.full((2, 3), 7.5, np.float32))
    check(run(lambda: fnp.full(4, True), mode), np.full(4, True))
    check(run(lambda: fnp.full((2,), 3.7, dtype=np.int32), mode), np.array([3, 3], np.int32))
    check(run(lambda: fnp.full((2,), 3, dtype=np.float32), mode), np.array([3, 3], np.float32))
    check(run(lambda: fnp.full((), -1.0), mode), np.array(-1.0, np.float32))
    check(run(lambda: fnp.full((0, 2), 1.0), mode), np.zeros((0, 2), np.float32))
    check(run(lambda: fnp.full((2, 3), np.float32(2)), mode), np.full((2, 3), 2, np.float32))
    row = np.arange(3, dtype=np.int32)
    check(run(lambda: fnp.full((2, 3), row), mode), np.full((2, 3), row))
    check(run(lambda: fnp.full((4, 2, 3), row, dtype=np.float32), mode),
          np.full((4, 2, 3), row, np.float32))


def test_full_with_traced_fill_value():
    f = fusionjit.jit(lambda v: fnp.full((2, 3), v))
    check(f(np.float32(1.5)), np.full((2, 3), 1.5, np.float32))
    check(f(np.float32(-4.0)), np.full((2, 3), -4.0, np.float32))
    check(f(np.arange(3, dtype=np.int32)), np.full((2, 3), np.arange(3, dtype=np.int32)))


def test_full_weak_typing():
    # Python scalars fill weakly typed arrays (as lax.full in JAX): they adopt the other dtype.
    i = fnp.full((3,), 2)
    assert i.dtype == np.int32 and i.weak_type is True
    check(i + np.array([1, 2, 3], np.uint32), np.array([3, 4, 5], np.uint32))
    f = fnp.full((3,), 2.0)
    assert f.dtype == np.float32 and f.weak_type is True
    assert fnp.full((3,), 2.0, dtype=np.float32).weak_type is False


def test_creation_rejects_bad_shapes():
    for f in (fnp.zeros, fnp.ones):
        with pytest.raises(ValueError):
            f((2, -1))
        with pytest.raises(TypeError):
            f((2.5, 3))
    with pytest.raises(ValueError):
        fnp.full((-3,), 1.0)
    with pytest.raises(TypeError):
        fnp.zeros((2,), dtype=np.complex64)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [F32, I32, BOOL, U32])
def test_like_functions(mode, dtype):
    x = sample((2, 3), dtype)
    check(run(fnp.zeros_like, mode, x), np.zeros_like(x))
    check(run(fnp.ones_like, mode, x), np.ones_like(x))
    check(run(lambda a: fnp.full_like(a, 1), mode, x), np.full_like(x, 1))
    check(run(lambda a: fnp.full_like(a, 2.7), mode, x), np.full_like(x, 2.7))
    check(run(lambda a: fnp.zeros_like(a, dtype=np.float32), mode, x), np.zeros((2, 3), F32))
    check(run(lambda a: fnp.ones_like(a, dtype=np.int32), mode, x), np.ones((2, 3), I32))
    check(run(lambda a: fnp.full_like(a, 3, dtype=bool), mode, x), np.full((2, 3), True))
    check(run(lambda a: fnp.zeros_like(a, shape=(4,)), mode, x), np.zeros(4, dtype))
    check(run(lambda a: fnp.full_like(a, 5, shape=(1, 2, 1)), mode, x),
          np.full((1, 2, 1), 5, dtype))


def test_like_functions_of_numpy_and_scalars():
    check(fnp.zeros_like(np.arange(3)), np.zeros(3, np.int32))
    check(fnp.ones_like(np.arange(3.0)), np.ones(3, np.float32))
    check(fnp.full_like(np.zeros((2, 2), np.float32), -1.5), np.full((2, 2), -1.5, np.float32))
    check(fnp.zeros_like(2.0), np.array(0.0, np.float32))
    check(fnp.ones_like(np.float32(3.0)), np.array(1.0, np.float32))


# --- arange, linspace, eye -----------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("args,kwargs,expected_dtype", [
    ((5,), {}, I32),
    ((0,), {}, I32),
    ((2, 9), {}, I32),
    ((2, 9, 3), {}, I32),
    ((10, 0, -3), {}, I32),
    ((-3, 4, 2), {}, I32),
    ((5, 2), {}, I32),
    ((2, 5, -1), {}, I32),
    ((5.0,), {}, F32),
    ((0.0, 1.0, 0.25), {}, F32),
    ((1, 4.5), {}, F32),
    ((1.0, -1.0, -0.25), {}, F32),
    ((0, 2, 0.5), {}, F32),
    ((0, 1, 0.1), {}, F32),
    ((-1, 1, 0.3), {}, F32),
    ((5,), {"dtype": np.float32}, F32),
    ((1, 7, 2), {"dtype": np.uint32}, U32),
    ((0.5, 4), {"dtype": np.int32}, I32),
    ((np.int32(3),), {}, I32),
    ((np.float32(2),), {}, F32),
], ids=lambda v: repr(v).replace(" ", ""))
def test_arange(mode, args, kwargs, expected_dtype):
    expected = np.arange(*args, **kwargs).astype(expected_dtype)
    got = run(lambda: fnp.arange(*args, **kwargs), mode)
    check(got, expected, rtol=1e-6, atol=1e-6)


def test_arange_errors():
    with pytest.raises(ValueError):
        fnp.arange(0, 5, 0)
    with pytest.raises(Exception, match="concrete"):
        fusionjit.jit(lambda n: fnp.arange(n))(3)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("start,stop,num,endpoint", [
    (0, 1, 5, True), (0, 1, 5, False), (0, 1, 7, True), (-2.5, 3.0, 11, True),
    (3.0, -1.0, 4, True), (3.0, -1.0, 4, False), (0, 1, 0, True), (0, 1, 0, False),
    (2, 5, 1, True), (2, 5, 1, False), (1, 1, 3, True), (0, 10, 50, True),
    (0, 10, 2, True), (0, 10, 2, False),
])
def test_linspace(mode, start, stop, num, endpoint):
    expected = np.linspace(start, stop, num, endpoint=endpoint).astype(np.float32)
    got = run(lambda: fnp.linspace(start, stop, num, endpoint=endpoint), mode)
    check(got, expected, rtol=1e-6, atol=1e-6)
    if num > 1 and endpoint:
        # The last element is exactly ``stop``.
        assert np.asarray(got)[-1] == np.float32(stop)


@pytest.mark.parametrize("mode", MODES)
def test_linspace_dtype_and_retstep(mode):
    check(run(lambda: fnp.linspace(0, 10, 4, dtype=np.int32), mode),
          np.linspace(0, 10, 4, dtype=np.int32))
    check(run(lambda: fnp.linspace(-5, 5, 4, dtype=np.int32), mode),
          np.linspace(-5, 5, 4, dtype=np.int32))
    samples, step = run(lambda: fnp.linspace(0, 10, 5, retstep=True), mode)
    exp_samples, exp_step = np.linspace(0, 10, 5, retstep=True)
    check(samples, exp_samples.astype(np.float32))
    check(step, np.array(exp_step, np.float32))
    samples, step = run(lambda: fnp.linspace(1, 2, 4, endpoint=False, retstep=True), mode)
    exp_samples, exp_step = np.linspace(1, 2, 4, endpoint=False, retstep=True)
    check(samples, exp_samples.astype(np.float32))
    check(step, np.array(exp_step, np.float32))


def test_linspace_errors():
    with pytest.raises(ValueError):
        fnp.linspace(0, 1, -1)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("args,kwargs", [
    ((3,), {}), ((0,), {}), ((1,), {}), ((3, 5), {}), ((5, 3), {}), ((3, 5), {"k": 2}),
    ((4, 3), {"k": -1}), ((3,), {"k": 5}), ((3,), {"k": -3}), ((4,), {"k": 1}),
    ((3, 4), {"k": -2, "dtype": np.int32}), ((2, 2), {"dtype": bool}),
    ((2, 3), {"dtype": np.uint32, "k": 1}),
], ids=lambda v: repr(v).replace(" ", ""))
def test_eye(mode, args, kwargs):
    expected = np.eye(*args, **kwargs)
    if "dtype" not in kwargs:
        expected = expected.astype(np.float32)
    check(run(lambda: fnp.eye(*args, **kwargs), mode), expected)


def test_identity():
    check(fnp.identity(4), np.identity(4, np.float32))
    check(fnp.identity(2, dtype=np.int32), np.identity(2, np.int32))


# --- manipulation --------------------------------------------------------------------

# name, function of one array, input shape
MANIPULATIONS = [
    ("reshape", lambda a: fnp.reshape(a, (4, 6)), (2, 3, 4)),
    ("reshape_neg1_first", lambda a: fnp.reshape(a, (-1, 4)), (2, 3, 4)),
    ("reshape_neg1_mid", lambda a: fnp.reshape(a, (2, -1, 3)), (2, 3, 4)),
    ("reshape_int", lambda a: fnp.reshape(a, 24), (2, 3, 4)),
    ("reshape_neg1_only", lambda a: fnp.reshape(a, -1), (2, 3, 4)),
    ("reshape_kw", lambda a: fnp.reshape(a, shape=(3, 8)), (2, 3, 4)),
    ("reshape_to_0d", lambda a: fnp.reshape(a, ()), (1, 1)),
    ("reshape_from_0d", lambda a: fnp.reshape(a, (1, 1, 1)), ()),
    ("reshape_zero_size", lambda a: fnp.reshape(a, (-1, 3)), (0, 3)),
    ("reshape_zero_size2", lambda a: fnp.reshape(a, (3, -1)), (0, 3)),
    ("reshape_method", lambda a: a.reshape(6, 4), (2, 3, 4)),
    ("reshape_method_tuple", lambda a: a.reshape((4, -1)), (2, 3, 4)),
    ("ravel", fnp.ravel, (2, 3, 4)),
    ("ravel_0d", fnp.ravel, ()),
    ("ravel_method", lambda a: a.ravel(), (3, 4)),
    ("flatten_method", lambda a: a.flatten(), (3, 4)),
    ("ravel_of_transpose", lambda a: fnp.ravel(fnp.transpose(a)), (2, 3, 4)),
    ("transpose", fnp.transpose, (2, 3, 4)),
    ("transpose_axes", lambda a: fnp.transpose(a, (1, 2, 0)), (2, 3, 4)),
    ("transpose_neg_axes", lambda a: fnp.transpose(a, (-1, 0, -2)), (2, 3, 4)),
    ("transpose_1d", fnp.transpose, (5,)),
    ("transpose_0d", fnp.transpose, ()),
    ("T", lambda a: a.T, (3, 4)),
    ("transpose_method", lambda a: a.transpose(2, 0, 1), (2, 3, 4)),
    ("transpose_method_tuple", lambda a: a.transpose((0, 2, 1)), (2, 3, 4)),
    ("swapaxes", lambda a: fnp.swapaxes(a, 0, 2), (2, 3, 4)),
    ("swapaxes_neg", lambda a: fnp.swapaxes(a, -1, 1), (2, 3, 4)),
    ("swapaxes_same", lambda a: fnp.swapaxes(a, 1, 1), (2, 3, 4)),
    ("swapaxes_method", lambda a: a.swapaxes(0, 1), (2, 3, 4)),
    ("moveaxis", lambda a: fnp.moveaxis(a, 0, -1), (2, 3, 4)),
    ("moveaxis_back", lambda a: fnp.moveaxis(a, -1, 0), (2, 3, 4)),
    ("moveaxis_multi", lambda a: fnp.moveaxis(a, (0, 1), (-1, 0)), (2, 3, 4, 5)),
    ("moveaxis_multi2", lambda a: fnp.moveaxis(a, (3, 0), (0, 2)), (2, 3, 4, 5)),
    ("expand_dims_0", lambda a: fnp.expand_dims(a, 0), (2, 3)),
    ("expand_dims_end", lambda a: fnp.expand_dims(a, 2), (2, 3)),
    ("expand_dims_neg", lambda a: fnp.expand_dims(a, -1), (2, 3)),
    ("expand_dims_neg2", lambda a: fnp.expand_dims(a, -2), (2, 3)),
    ("expand_dims_tuple", lambda a: fnp.expand_dims(a, (0, 2)), (2, 3)),
    ("expand_dims_tuple_neg", lambda a: fnp.expand_dims(a, (0, -1)), (2, 3)),
    ("expand_dims_tuple_mixed", lambda a: fnp.expand_dims(a, (-1, 1, 3)), (2, 3)),
    ("expand_dims_0d", lambda a: fnp.expand_dims(a, (0, 1)), ()),
    ("squeeze_all", fnp.squeeze, (1, 3, 1, 2)),
    ("squeeze_axis", lambda a: fnp.squeeze(a, axis=2), (1, 3, 1, 2)),
    ("squeeze_neg_axis", lambda a: fnp.squeeze(a, axis=-2), (1, 3, 1, 2)),
    ("squeeze_tuple", lambda a: fnp.squeeze(a, axis=(0, 2)), (1, 3, 1, 2)),
    ("squeeze_none_to_squeeze", fnp.squeeze, (2, 3)),
    ("squeeze_to_0d", fnp.squeeze, (1, 1)),
    ("squeeze_0d", fnp.squeeze, ()),
    ("squeeze_method", lambda a: a.squeeze(), (1, 4, 1)),
    ("broadcast_to", lambda a: fnp.broadcast_to(a, (2, 3)), (3,)),
    ("broadcast_to_inner", lambda a: fnp.broadcast_to(a, (4, 2, 3)), (2, 1)),
    ("broadcast_to_same", lambda a: fnp.broadcast_to(a, (2, 3)), (2, 3)),
    ("broadcast_to_0d", lambda a: fnp.broadcast_to(a, (3, 2)), ()),
    ("broadcast_to_zero", lambda a: fnp.broadcast_to(a, (0, 3)), (1, 3)),
    ("broadcast_to_int", lambda a: fnp.broadcast_to(a, 4), (1,)),
    ("flip_all", fnp.flip, (2, 3, 4)),
    ("flip_axis", lambda a: fnp.flip(a, 1), (2, 3, 4)),
    ("flip_neg_axis", lambda a: fnp.flip(a, -1), (2, 3, 4)),
    ("flip_tuple", lambda a: fnp.flip(a, (0, 2)), (2, 3, 4)),
    ("flip_1d", fnp.flip, (7,)),
    ("concat_self", lambda a: fnp.concatenate([a, a]), (2, 3)),
    ("concat_axis1", lambda a: fnp.concatenate([a, a[:, :1], a], axis=1), (2, 3)),
    ("concat_neg_axis", lambda a: fnp.concatenate((a, a), axis=-1), (2, 3, 4)),
    ("concat_axis_none", lambda a: fnp.concatenate([a, a[0]], axis=None), (2, 3)),
    ("concat_single", lambda a: fnp.concatenate([a]), (2, 3)),
    ("concat_zero_size", lambda a: fnp.concatenate([a, a[:0]]), (2, 3)),
    ("stack0", lambda a: fnp.stack([a, a + a]), (2, 3)),
    ("stack_neg", lambda a: fnp.stack([a, a, a], axis=-1), (2, 3)),
    ("stack1", lambda a: fnp.stack((a, a), axis=1), (2, 3)),
    ("stack_0d", lambda a: fnp.stack([a, a]), ()),
]

_MANIP_NUMPY = {
    "reshape": lambda a: np.reshape(a, (4, 6)),
    "reshape_neg1_first": lambda a: np.reshape(a, (-1, 4)),
    "reshape_neg1_mid": lambda a: np.reshape(a, (2, -1, 3)),
    "reshape_int": lambda a: np.reshape(a, 24),
    "reshape_neg1_only": lambda a: np.reshape(a, -1),
    "reshape_kw": lambda a: np.reshape(a, (3, 8)),
    "reshape_to_0d": lambda a: np.reshape(a, ()),
    "reshape_from_0d": lambda a: np.reshape(a, (1, 1, 1)),
    "reshape_zero_size": lambda a: np.reshape(a, (-1, 3)),
    "reshape_zero_size2": lambda a: np.reshape(a, (3, -1)),
    "reshape_method": lambda a: a.reshape(6, 4),
    "reshape_method_tuple": lambda a: a.reshape((4, -1)),
    "ravel": np.ravel,
    "ravel_0d": np.ravel,
    "ravel_method": lambda a: a.ravel(),
    "flatten_method": lambda a: a.flatten(),
    "ravel_of_transpose": lambda a: np.ravel(np.transpose(a)),
    "transpose": np.transpose,
    "transpose_axes": lambda a: np.transpose(a, (1, 2, 0)),
    "transpose_neg_axes": lambda a: np.transpose(a, (-1, 0, -2)),
    "transpose_1d": np.transpose,
    "transpose_0d": np.transpose,
    "T": lambda a: a.T,
    "transpose_method": lambda a: a.transpose(2, 0, 1),
    "transpose_method_tuple": lambda a: a.transpose((0, 2, 1)),
    "swapaxes": lambda a: np.swapaxes(a, 0, 2),
    "swapaxes_neg": lambda a: np.swapaxes(a, -1, 1),
    "swapaxes_same": lambda a: np.swapaxes(a, 1, 1),
    "swapaxes_method": lambda a: a.swapaxes(0, 1),
    "moveaxis": lambda a: np.moveaxis(a, 0, -1),
    "moveaxis_back": lambda a: np.moveaxis(a, -1, 0),
    "moveaxis_multi": lambda a: np.moveaxis(a, (0, 1), (-1, 0)),
    "moveaxis_multi2": lambda a: np.moveaxis(a, (3, 0), (0, 2)),
    "expand_dims_0": lambda a: np.expand_dims(a, 0),
    "expand_dims_end": lambda a: np.expand_dims(a, 2),
    "expand_dims_neg": lambda a: np.expand_dims(a, -1),
    "expand_dims_neg2": lambda a: np.expand_dims(a, -2),
    "expand_dims_tuple": lambda a: np.expand_dims(a, (0, 2)),
    "expand_dims_tuple_neg": lambda a: np.expand_dims(a, (0, -1)),
    "expand_dims_tuple_mixed": lambda a: np.expand_dims(a, (-1, 1, 3)),
    "expand_dims_0d": lambda a: np.expand_dims(a, (0, 1)),
    "squeeze_all": np.squeeze,
    "squeeze_axis": lambda a: np.squeeze(a, axis=2),
    "squeeze_neg_axis": lambda a: np.squeeze(a, axis=-2),
    "squeeze_tuple": lambda a: np.squeeze(a, axis=(0, 2)),
    "squeeze_none_to_squeeze": np.squeeze,
    "squeeze_to_0d": np.squeeze,
    "squeeze_0d": np.squeeze,
    "squeeze_method": lambda a: a.squeeze(),
    "broadcast_to": lambda a: np.broadcast_to(a, (2, 3)),
    "broadcast_to_inner": lambda a: np.broadcast_to(a, (4, 2, 3)),
    "broadcast_to_same": lambda a: np.broadcast_to(a, (2, 3)),
    "broadcast_to_0d": lambda a: np.broadcast_to(a, (3, 2)),
    "broadcast_to_zero": lambda a: np.broadcast_to(a, (0, 3)),
    "broadcast_to_int": lambda a: np.broadcast_to(a, 4),
    "flip_all": np.flip,
    "flip_axis": lambda a: np.flip(a, 1),
    "flip_neg_axis": lambda a: np.flip(a, -1),
    "flip_tuple": lambda a: np.flip(a, (0, 2)),
    "flip_1d": np.flip,
    "concat_self": lambda a: np.concatenate([a, a]),
    "concat_axis1": lambda a: np.concatenate([a, a[:, :1], a], axis=1),
    "concat_neg_axis": lambda a: np.concatenate((a, a), axis=-1),
    "concat_axis_none": lambda a: np.concatenate([a, a[0]], axis=None),
    "concat_single": lambda a: np.concatenate([a]),
    "concat_zero_size": lambda a: np.concatenate([a, a[:0]]),
    "stack0": lambda a: np.stack([a, a + a]),
    "stack_neg": lambda a: np.stack([a, a, a], axis=-1),
    "stack1": lambda a: np.stack((a, a), axis=1),
    "stack_0d": lambda a: np.stack([a, a]),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [F32, I32, BOOL], ids=str)
@pytest.mark.parametrize("name,fn,shape", MANIPULATIONS, ids=[m[0] for m in MANIPULATIONS])
def test_manipulation(name, fn, shape, dtype, mode):
    x = sample(shape, dtype, seed=len(name))
    expected = np.asarray(_MANIP_NUMPY[name](x))
    check(run(fn, mode, x), expected)


def test_manipulation_table_is_complete():
    assert {m[0] for m in MANIPULATIONS} == set(_MANIP_NUMPY)


@pytest.mark.parametrize("mode", MODES)
def test_concatenate_promotes_dtypes(mode):
    i = np.arange(3, dtype=np.int32)
    f = np.array([0.5, 1.5], np.float32)
    b = np.array([True, False])
    u = np.array([7], np.uint32)
    check(run(lambda a, c: fnp.concatenate([a, c]), mode, i, f),
          np.concatenate([i, f]).astype(np.float32))
    check(run(lambda a, c: fnp.concatenate([c, a]), mode, i, f),
          np.concatenate([f, i]).astype(np.float32))
    check(run(lambda a, c: fnp.concatenate([a, c]), mode, b, i),
          np.concatenate([b, i]).astype(np.int32))
    check(run(lambda a, c: fnp.concatenate([a, c]), mode, b, f),
          np.concatenate([b, f]).astype(np.float32))
    check(run(lambda a, c: fnp.concatenate([a, c]), mode, u, f),
          np.concatenate([u, f]).astype(np.float32))
    check(run(lambda a, c: fnp.concatenate([a, c], dtype=np.float32), mode, i, i),
          np.concatenate([i, i]).astype(np.float32))
    check(run(lambda a, c: fnp.stack([a, c]), mode, f, f[::-1]), np.stack([f, f[::-1]]))
    check(run(lambda a, c: fnp.stack([a[:2], c]), mode, i, f),
          np.stack([i[:2], f]).astype(np.float32))


def test_concatenate_of_a_2d_array_concatenates_rows():
    x = sample((3, 4), F32)
    check(fnp.concatenate(fnp.asarray(x)), np.concatenate(x))
    check(fnp.concatenate(x), np.concatenate(x))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,arg,axis", [
    ((6,), 3, 0), ((6,), 1, 0), ((2, 6, 4), 3, 1), ((2, 6, 4), 2, -1), ((4, 3), 2, 0),
    ((10,), [2, 5, 20], 0), ((10,), [-3, 8], 0), ((10,), [5, 2], 0), ((10,), [], 0),
    ((3, 10), [0, 3, 3, 10], 1), ((3, 10), (4,), -1), ((0, 4), 2, 1),
], ids=lambda v: repr(v).replace(" ", ""))
def test_split(mode, shape, arg, axis):
    x = sample(shape, F32)
    expected = np.split(x, arg, axis=axis)
    got = run(lambda a: fnp.split(a, arg, axis=axis), mode, x)
    assert isinstance(got, (list, tuple)) and len(got) == len(expected)
    for g, e in zip(got, expected):
        check(g, e)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [F32, I32, BOOL, U32], ids=str)
@pytest.mark.parametrize("target", [np.float32, np.int32, np.uint32, bool, int, float, np.float64,
                                    np.int64], ids=lambda t: getattr(t, "__name__", str(t)))
def test_astype(mode, dtype, target):
    x = sample((3, 4), dtype, seed=5)
    if dtype == F32 and target in (np.uint32,):
        x = np.abs(x)  # negative float -> unsigned is undefined in NumPy
    canon = {int: I32, float: F32, np.float64: F32, np.int64: I32}.get(target, np.dtype(target))
    expected = x.astype(canon)
    check(run(lambda a: a.astype(target), mode, x), expected)
    check(run(lambda a: fnp.astype(a, target), mode, x), expected)


def test_astype_float_to_int_truncates_toward_zero():
    x = np.array([-1.7, 1.7, -0.5, 0.5, 2.999, -2.999], np.float32)
    check(fnp.asarray(x).astype(np.int32), x.astype(np.int32))
    check(fusionjit.jit(lambda a: a.astype(np.int32))(x), x.astype(np.int32))


def test_reshape_errors():
    x = fnp.arange(24)
    with pytest.raises(ValueError):
        fnp.reshape(x, (5, 5))
    with pytest.raises(ValueError):
        fnp.reshape(x, (5, -1))
    with pytest.raises(ValueError):
        fnp.reshape(x, (-1, -1))
    with pytest.raises(ValueError):
        x.reshape(7, -1)
    with pytest.raises(NotImplementedError):
        fnp.reshape(x, (4, 6), order="F")
    with pytest.raises(ValueError):
        fusionjit.jit(lambda a: a.reshape(5, 5))(np.arange(24, dtype=np.int32))


def test_manipulation_errors():
    x = fnp.zeros((1, 3, 1, 2))
    with pytest.raises(ValueError):
        fnp.squeeze(x, axis=1)
    with pytest.raises(ValueError):
        fnp.squeeze(x, axis=(0, 3))
    with pytest.raises(ValueError):
        fnp.squeeze(x, axis=4)
    with pytest.raises(ValueError):
        fnp.broadcast_to(fnp.arange(3), (2, 4))
    with pytest.raises(ValueError):
        fnp.broadcast_to(fnp.ones((2, 3)), (3,))
    with pytest.raises(ValueError):
        fnp.transpose(x, (0, 0, 1, 2))
    with pytest.raises(ValueError):
        fnp.transpose(x, (1, 0))
    with pytest.raises(ValueError):
        fnp.swapaxes(x, 0, 4)
    with pytest.raises(ValueError):
        fnp.expand_dims(x, 5)
    with pytest.raises(ValueError):
        fnp.expand_dims(x, (1, 1))
    with pytest.raises(ValueError):
        fnp.moveaxis(x, (0, 0), (1, 2))
    with pytest.raises(ValueError):
        fnp.moveaxis(x, (0, 1), (0,))
    with pytest.raises(ValueError):
        fnp.flip(x, 4)
    with pytest.raises(ValueError):
        fnp.split(fnp.arange(10), 3)
    with pytest.raises(ValueError):
        fnp.stack([fnp.ones(2), fnp.ones(3)])
    with pytest.raises(ValueError):
        fnp.stack([])
    with pytest.raises(ValueError):
        fnp.concatenate([])
    with pytest.raises(ValueError):
        fnp.concatenate([fnp.asarray(1.0), fnp.asarray(2.0)])
    with pytest.raises(ValueError):
        fnp.concatenate([fnp.ones((2, 2)), fnp.ones(3)])
    with pytest.raises((TypeError, ValueError)):
        fnp.concatenate([fnp.ones((2, 2)), fnp.ones((3, 3))])
    with pytest.raises(TypeError):
        fnp.reshape([1, 2, 3], (3, 1))  # lists are not arrays (JAX's rule)


# --- indexing ------------------------------------------------------------------------

INDICES = [
    0, -1, 2, -3, (1, 2), (-1, -2, -3), (0, 0, 0), (2, -4, 4),
    slice(None), slice(1, None), slice(None, 2), slice(None, None, 2), slice(None, None, -1),
    slice(None, None, -2), slice(1, 3), slice(-2, None), slice(-100, 100), slice(5, 1),
    slice(1, 5, -1), slice(10, -10, -1), slice(3, -5, -2), slice(0, 0), slice(100, 200),
    slice(-200, -100), slice(None, None, 5), slice(None, None, -7),
    (slice(None), slice(1, None, 2)),
    (slice(None, None, -1), slice(None, None, -1), slice(None, None, -1)),
    (slice(3, -5, -1), slice(4, None, -1), slice(None, None, -4)),
    None, (None,), (None, None), (slice(None), None, 1), (None, Ellipsis, None),
    Ellipsis, (Ellipsis,), (Ellipsis, 2), (1, Ellipsis), (1, Ellipsis, 2), (Ellipsis, 0, 0, 0),
    (1, Ellipsis, slice(None, None, -2)), (slice(2, None, -2), None, slice(-1, 0, -3), 0),
    (None, 0, Ellipsis, None, slice(1, None), None), (Ellipsis, None), (0, None, Ellipsis),
    (), (np.int32(1),), np.int64(-1), (np.int64(-1), slice(1, 3)), (np.uint32(2), 1),
    (slice(None), -1, slice(None, None, -3)), (-1, slice(2, 0, -1), None, -5),
]


def _index_id(i):
    return repr(i).replace(" ", "").replace("slice", "s").replace("Ellipsis", "E")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("index", INDICES, ids=[_index_id(i) for i in INDICES])
def test_basic_indexing(index, mode):
    x = sample((3, 4, 5), F32, seed=11)
    check(run(lambda a: a[index], mode, x), x[index])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [I32, BOOL, U32], ids=str)
def test_basic_indexing_other_dtypes(mode, dtype):
    x = sample((4, 6), dtype, seed=12)
    for index in [(1, slice(None, None, -2)), (slice(None, None, -1), None, -2), (Ellipsis, 3),
                  (slice(1, 3), slice(5, 0, -2))]:
        check(run(lambda a, index=index: a[index], mode, x), x[index])


@pytest.mark.parametrize("mode", MODES)
def test_indexing_0d_and_zero_size(mode):
    s = np.array(3.5, np.float32)
    check(run(lambda a: a[()], mode, s), s[()])
    check(run(lambda a: a[None], mode, s), s[None])
    check(run(lambda a: a[...], mode, s), s[...])
    check(run(lambda a: a[None, ..., None], mode, s), s[None, ..., None])
    z = np.zeros((0, 3), np.float32)
    check(run(lambda a: a[:, 1], mode, z), z[:, 1])
    check(run(lambda a: a[::-1, ::2], mode, z), z[::-1, ::2])
    check(run(lambda a: a[1:3], mode, sample((5,), I32)[:0]), np.zeros((0,), np.int32))


@pytest.mark.parametrize("mode", MODES)
def test_chained_indexing(mode):
    x = sample((4, 5, 6), I32, seed=13)
    check(run(lambda a: a[::-1][1][:, 2:][..., ::-2], mode, x), x[::-1][1][:, 2:][..., ::-2])
    check(run(lambda a: a.T[1:, None][0], mode, x), x.T[1:, None][0])


def test_dynamic_integer_index_under_jit():
    x = sample((3, 4, 5), F32, seed=14)
    f = fusionjit.jit(lambda a, i: a[i])
    for i in range(-3, 3):
        check(f(x, i), x[i])
        check(f(x, np.int32(i)), x[i])
    g = fusionjit.jit(lambda a, i, j: a[i, :, j])
    for i, j in [(0, 0), (1, -2), (-1, 4), (-3, -5), (2, 3)]:
        check(g(x, i, j), x[i, :, j])
    h = fusionjit.jit(lambda a, i: a[..., i])
    for i in (-5, -1, 0, 4):
        check(h(x, i), x[..., i])
    u = fusionjit.jit(lambda a, i: a[i])
    check(u(x, np.uint32(2)), x[2])


def test_dynamic_index_mixed_with_static_indices_under_jit():
    x = sample((3, 4, 5), F32, seed=15)
    cases = [
        (lambda a, i: a[None, ::-1, i, 1:4:2], lambda i: x[None, ::-1, i, 1:4:2], (-1, 0, 3, -4)),
        (lambda a, i: a[::-2, i], lambda i: x[::-2, i], (-1, 0, 2)),
        (lambda a, i: a[i, 3:0:-2], lambda i: x[i, 3:0:-2], (-3, 2)),
        (lambda a, i: a[1, i, ::-1], lambda i: x[1, i, ::-1], (-4, 1, 3)),
        (lambda a, i: a[i, ..., None, -1], lambda i: x[i, ..., None, -1], (0, -2)),
        (lambda a, i: a[1:, -1][i], lambda i: x[1:, -1][i], (0, -1, 1)),
    ]
    for fn, np_fn, idxs in cases:
        f = fusionjit.jit(fn)
        for i in idxs:
            check(f(x, i), np_fn(i))


def test_dynamic_index_with_two_traced_indices_and_int_dtypes():
    x = sample((4, 5), I32, seed=16)
    f = fusionjit.jit(lambda a, i, j: a[i, j])
    for i, j in [(0, 0), (-1, -5), (3, 4), (-4, 2)]:
        check(f(x, i, j), x[i, j])
    b = sample((4, 5), BOOL, seed=17)
    check(f(b, 2, -1), b[2, -1])


def test_dynamic_index_out_of_range_clamps_as_in_jax():
    # NumPy would raise; under jit the index is a runtime value and (as in JAX) it is clamped.
    x = np.arange(5, dtype=np.float32) * 10
    f = fusionjit.jit(lambda a, i: a[i])
    for i, expected in [(5, 40.0), (7, 40.0), (2**31 - 1, 40.0), (-6, 0.0), (-100, 0.0),
                        (-2**31, 0.0)]:
        check(f(x, i), np.float32(expected))


def test_concrete_array_as_index():
    x = sample((3, 4), F32, seed=18)
    check(fnp.asarray(x)[fnp.asarray(np.int32(2))], x[2])
    check(fnp.asarray(x)[fnp.asarray(-1)], x[-1])
    check(fnp.asarray(x)[1, fnp.asarray(np.int32(-2))], x[1, -2])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("index", [3, -4, (0, 4), (0, -5), (Ellipsis, 4), (None, 3),
                                   (slice(None), 7), np.int32(10), (1, 1 << 40)],
                         ids=_index_id)
def test_out_of_range_integer_index_raises(index, mode):
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(IndexError):
        run(lambda a: a[index], mode, x)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("index", [(0, 0, 0), (Ellipsis, 0, 0, 0), (Ellipsis, 1, Ellipsis),
                                   1.0, (0, 1.5), "a"],
                         ids=_index_id)
def test_invalid_index_raises_index_error(index, mode):
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(IndexError):
        run(lambda a: a[index], mode, x)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("make_index", [
    lambda: [0, 1], lambda: np.array([0, 2]), lambda: fnp.array([1, 0]),
    lambda: np.array([True, False, True]), lambda: (slice(None), [1, 2]),
    lambda: (0, np.array([1])), lambda: [[0], [1]],
], ids=["list", "np_array", "fnp_array", "bool_mask", "slice_list", "int_array1", "nested_list"])
def test_advanced_indexing(make_index, mode):
    """Array indices (a composed gather until gather is an IR op; tests/test_array_api.py
    covers more)."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    index = make_index()
    expected = x[tuple(np.asarray(i) if isinstance(i, fusionjit.Array) else i for i in index)
                 if isinstance(index, tuple) else np.asarray(index)]
    check(run(lambda a: a[index], mode, x), expected)


def test_advanced_indexing_with_traced_array():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    check(fusionjit.jit(lambda a, i: a[i])(x, np.array([0, -1], np.int32)), x[[0, -1]])


def test_traced_values_cannot_be_shapes_or_slice_bounds():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.raises(fusionjit.TracerIntegerConversionError):
        fusionjit.jit(lambda a, i: a[i:])(x, 1)
    with pytest.raises(fusionjit.TracerIntegerConversionError):
        fusionjit.jit(lambda a, n: a.reshape(n, -1))(x, 3)
    with pytest.raises(TypeError):
        fusionjit.jit(lambda n: fnp.zeros(n))(3)
    # Static arguments are concrete.
    check(fusionjit.jit(lambda a, i: a[i:], static_argnums=1)(x, 1), x[1:])
    check(fusionjit.jit(lambda a, n: a.reshape(n, -1), static_argnames="n")(x, n=6),
          x.reshape(6, -1))
    check(fusionjit.jit(lambda n: fnp.arange(n), static_argnums=0)(4), np.arange(4, dtype=np.int32))


def test_slice_bounds_of_numpy_ints_and_concrete_arrays():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    X = fnp.asarray(x)
    check(X[np.int32(1):np.int64(3), ::np.int32(-1)], x[1:3, ::-1])
    check(X[fnp.asarray(1):3], x[1:3])


def test_shape_queries_len_and_iteration():
    x = np.zeros((3, 4, 0), np.float32)
    X = fnp.asarray(x)
    assert fnp.shape(X) == (3, 4, 0) and fnp.ndim(X) == 3 and fnp.size(X) == 0
    assert fnp.size(X, 1) == 4 and fnp.shape(3.0) == () and fnp.ndim(np.ones((2, 2))) == 2
    assert len(X) == 3
    y = np.arange(6, dtype=np.int32).reshape(3, 2)
    rows = list(fnp.asarray(y))
    assert len(rows) == 3
    for r, e in zip(rows, y):
        check(r, e)
    rows = fusionjit.jit(lambda a: [r for r in a])(y)
    for r, e in zip(rows, y):
        check(r, e)
    with pytest.raises(TypeError):
        len(fnp.asarray(1.0))


@pytest.mark.parametrize("mode", MODES)
def test_manipulation_of_large_arrays(mode):
    # Big enough for the parallel code paths.
    rng = np.random.default_rng(20)
    x = rng.standard_normal((64, 300, 70)).astype(np.float32)
    y = rng.standard_normal((300, 1)).astype(np.float32)
    cases = [
        (lambda a: fnp.transpose(a, (2, 0, 1)), np.transpose(x, (2, 0, 1))),
        (lambda a: a[::-3, 5:290:7, ::-1], x[::-3, 5:290:7, ::-1]),
        (lambda a: fnp.concatenate([a, a[:, ::-1]], axis=1), np.concatenate([x, x[:, ::-1]], 1)),
        (lambda a: a * y + fnp.flip(a, 0), x * y + np.flip(x, 0)),
        (lambda a: fnp.reshape(fnp.swapaxes(a, 0, 2), (70, -1)),
         np.reshape(np.swapaxes(x, 0, 2), (70, -1))),
        (lambda a: fnp.stack([a, a * 2], axis=-1)[..., 1], x * 2),
        (lambda a: fnp.split(a, [10, 100], axis=1)[1] + 1, x[:, 10:100] + 1),
        (lambda a: fnp.broadcast_to(a[:, :1, :], (64, 300, 70)),
         np.broadcast_to(x[:, :1], x.shape)),
    ]
    for fn, expected in cases:
        check(run(fn, mode, x), expected)


# --- jax.lax's helpers: dynamic slices along one axis, negative starts, select_n ---------

def _lax_pair():
    import fusionjit.lax as flax
    jax = pytest.importorskip("jax")
    return flax, jax.lax


@pytest.mark.parametrize("start", [-12, -3, -1, 0, 2, 7, 30])
def test_dynamic_slices_count_negative_starts_from_the_end_as_jax(start):
    # Before, a negative start was clamped to 0: lax.dynamic_slice(x, (-3,), (2,)) read
    # x[0:2] where JAX reads x[7:9], silently.
    flax, jlax = _lax_pair()
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    u = -np.ones((2, 4), np.float32)
    cases = [
        (lambda lx, x, s: lx.dynamic_slice(x, (s, 1), (2, 3))),
        (lambda lx, x, s: lx.dynamic_update_slice(x, u, (s, 0))),
        (lambda lx, x, s: lx.dynamic_slice_in_dim(x, s, 3, axis=0)),
        (lambda lx, x, s: lx.dynamic_slice_in_dim(x, s, 2, axis=-1)),
        (lambda lx, x, s: lx.dynamic_index_in_dim(x, s, 0, keepdims=False)),
        (lambda lx, x, s: lx.dynamic_index_in_dim(x, s, 1)),
        (lambda lx, x, s: lx.dynamic_update_slice_in_dim(x, u, s, 0)),
        (lambda lx, x, s: lx.dynamic_update_index_in_dim(x, u[0], s, 0)),
        (lambda lx, x, s: lx.dynamic_update_index_in_dim(x, u[:, :1], s, 1)),
    ]
    for k, case in enumerate(cases):
        want = np.asarray(case(jlax, x, start))
        for got in (case(flax, x, start), case(flax, fnp.asarray(x), np.int32(start)),
                    fusionjit.jit(lambda x, s, case=case: case(flax, x, s))(x, np.int32(start)),
                    fusionjit.jit(lambda x, case=case: case(flax, x, start))(x)):
            np.testing.assert_array_equal(np.asarray(got), want, err_msg=str(k))


def test_index_in_dim_select_n_square_reciprocal_stop_gradient_agree_with_jax():
    flax, jlax = _lax_pair()
    x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    for index, axis, keep in [(1, 0, True), (-1, 1, False), (0, -1, True)]:
        np.testing.assert_array_equal(np.asarray(flax.index_in_dim(x, index, axis, keep)),
                                      np.asarray(jlax.index_in_dim(x, index, axis, keep)))
    with pytest.raises(IndexError, match="out of bounds"):
        flax.index_in_dim(x, 3, 0)
    which_b = x > 6
    which_i = (x.astype(np.int32) % 3)
    for which, cases in [(which_b, (x, -x)), (which_i, (x, -x, 2 * x)), (np.int32(1), (x, -x)),
                         (True, (x, -x))]:
        want = np.asarray(jlax.select_n(which, *cases))
        np.testing.assert_array_equal(np.asarray(flax.select_n(which, *cases)), want)
        got = fusionjit.jit(lambda w, *c: flax.select_n(w, *c))(which, *cases)
        np.testing.assert_array_equal(np.asarray(got), want)
    with pytest.raises(TypeError, match="equal shapes and dtypes"):
        flax.select_n(which_b, x, x[0])
    np.testing.assert_array_equal(np.asarray(flax.square(x)), np.asarray(jlax.square(x)))
    np.testing.assert_array_equal(np.asarray(flax.reciprocal(x)), np.asarray(jlax.reciprocal(x)))
    tree = {"a": x, "b": [2.0]}
    got = fusionjit.jit(lambda t: flax.stop_gradient(t))(tree)
    np.testing.assert_array_equal(np.asarray(got["a"]), x)
    assert float(got["b"][0]) == 2.0


def test_device_get_gives_numpy_arrays_for_a_pytree():
    x = fnp.arange(3.0)
    got = fusionjit.device_get({"x": x, "n": 3, "l": [fnp.ones(2)]})
    assert isinstance(got["x"], np.ndarray) and got["n"] == 3
    np.testing.assert_array_equal(got["x"], [0, 1, 2])
    np.testing.assert_array_equal(got["l"][0], [1, 1])
    with pytest.raises(TypeError, match="traced"):
        fusionjit.jit(lambda x: fusionjit.device_get(x))(x)


@pytest.mark.parametrize("mode", MODES)
def test_linspace_logspace_geomspace_with_array_endpoints_and_axis_as_numpy(mode):
    # Before: array endpoints failed with a lax shape error and axis != 0 was refused.
    a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    b = np.array([10.0, 40.0], np.float32)
    cases = [("linspace", (a, b), dict(num=4)), ("linspace", (a, b), dict(num=4, axis=-1)),
             ("linspace", (a, b), dict(num=3, axis=1, endpoint=False)),
             ("linspace", (b, 5.0), dict(num=6)), ("linspace", (0, 10), dict(num=4, dtype=I32)),
             ("linspace", (2.0, b), dict(num=1)), ("logspace", (a, b / 10), dict(num=3, axis=2)),
             ("geomspace", (a, b), dict(num=3, axis=1)), ("geomspace", (-a, -b), dict(num=4))]
    for name, args, kw in cases:
        want = getattr(np, name)(*args, **kw)
        got = run(lambda *x, name=name, kw=kw: getattr(fnp, name)(*x, **kw), mode, *args)
        assert got.shape == want.shape and got.dtype == want.astype(got.dtype).dtype
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-6, atol=1e-5,
                                   err_msg=f"{name} {kw}")
    out, step = fnp.linspace(b, 5.0, 6, retstep=True)
    np.testing.assert_allclose(np.asarray(step), np.linspace(b, 5.0, 6, retstep=True)[1])
