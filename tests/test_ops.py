"""Every fusionjit.numpy operation against NumPy, for every supported dtype, eagerly and
under jit (and eager == jit)."""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
from fusionjit import lax
from conftest import assert_close

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
I32, I64 = np.dtype(np.int32), np.dtype(np.int64)
U32, U64 = np.dtype(np.uint32), np.dtype(np.uint64)
BOOL = np.dtype(np.bool_)
FLOATS = (F32, F64)
INTS = (I32, I64, U32, U64)
SIGNED = (I32, I64)
NUMERIC = FLOATS + INTS
ALL = NUMERIC + (BOOL,)
X64 = {F64, I64, U64}

SHAPES = [(), (7,), (3, 17), (2, 3, 5)]


def gen(kind, dtype, shape, rng):
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    if dtype.kind == "u":
        lo, hi = {"default": (0, 40), "nonzero": (1, 40), "small": (0, 6), "shift": (0, 40),
                  "exponent": (0, 9)}.get(kind, (0, 40))
        return rng.integers(lo, hi, shape).astype(dtype)
    if dtype.kind == "i":
        lo, hi = {"default": (-20, 20), "nonzero": (1, 20), "small": (-3, 6), "shift": (0, 40),
                  "positive": (1, 20), "exponent": (0, 9)}.get(kind, (-20, 20))
        x = rng.integers(lo, hi, shape).astype(dtype)
        if kind == "nonzero":
            x = np.where(rng.random(shape) < 0.5, x, -x).astype(dtype)
        return x
    ranges = {"default": (-3, 3), "positive": (0.1, 5), "log1p": (-0.9, 5), "nonzero": (0.5, 4),
              "small": (-2, 2), "trig": (-10, 10), "wide": (-30, 30)}
    lo, hi = ranges.get(kind, (-3, 3))
    x = rng.uniform(lo, hi, shape).astype(dtype)
    if kind == "nonzero":
        x = np.where(rng.random(shape) < 0.5, x, -x).astype(dtype)
    return np.asarray(x, dtype)


def same(d):
    return d


def to_float(d):
    return d if d.kind == "f" else (F64 if d in X64 else F32)


def to_bool(d):
    return BOOL


# name, fusionjit fn, numpy fn, arity, dtypes, input kinds, result dtype rule, rtol
UNARY = [
    ("negative", fnp.negative, np.negative, NUMERIC, "default", same, None),
    ("abs", fnp.abs, np.abs, NUMERIC, "default", same, None),
    ("sign", fnp.sign, np.sign, NUMERIC, "default", same, None),
    ("floor", fnp.floor, np.floor, FLOATS, "wide", same, None),
    ("ceil", fnp.ceil, np.ceil, FLOATS, "wide", same, None),
    ("round", fnp.round, np.round, FLOATS, "wide", same, None),
    ("exp", fnp.exp, np.exp, ALL, "default", to_float, 2e-6),
    ("expm1", fnp.expm1, np.expm1, FLOATS, "small", to_float, 3e-6),
    ("log", fnp.log, np.log, FLOATS, "positive", to_float, 2e-6),
    ("log1p", fnp.log1p, np.log1p, FLOATS, "log1p", to_float, 3e-6),
    ("sqrt", fnp.sqrt, np.sqrt, FLOATS + INTS, "positive", to_float, 1e-6),
    ("sin", fnp.sin, np.sin, FLOATS, "trig", to_float, 2e-6),
    ("cos", fnp.cos, np.cos, FLOATS, "trig", to_float, 2e-6),
    ("tan", fnp.tan, np.tan, FLOATS, "small", to_float, 4e-6),
    ("tanh", fnp.tanh, np.tanh, FLOATS, "default", to_float, 3e-6),
    ("square", fnp.square, np.square, NUMERIC, "small", same, None),
    ("reciprocal", fnp.reciprocal, np.reciprocal, FLOATS, "nonzero", same, None),
    ("logical_not", fnp.logical_not, np.logical_not, ALL, "default", to_bool, None),
    ("invert", fnp.invert, np.invert, INTS + (BOOL,), "default", same, None),
    ("isfinite", fnp.isfinite, np.isfinite, ALL, "default", to_bool, None),
    ("isnan", fnp.isnan, np.isnan, ALL, "default", to_bool, None),
    ("isinf", fnp.isinf, np.isinf, ALL, "default", to_bool, None),
    ("log2", fnp.log2, np.log2, FLOATS, "positive", to_float, 3e-6),
    ("log10", fnp.log10, np.log10, FLOATS, "positive", to_float, 3e-6),
    ("exp2", fnp.exp2, np.exp2, FLOATS, "default", to_float, 3e-6),
]

BINARY = [
    ("add", fnp.add, np.add, ALL, ("default", "default"), same, None),
    ("subtract", fnp.subtract, np.subtract, NUMERIC, ("default", "default"), same, None),
    ("multiply", fnp.multiply, np.multiply, ALL, ("default", "default"), same, None),
    ("true_divide", fnp.true_divide, np.true_divide, NUMERIC, ("default", "nonzero"), to_float,
     1e-6),
    ("floor_divide", fnp.floor_divide, np.floor_divide, NUMERIC, ("default", "nonzero"), same,
     None),
    ("remainder", fnp.remainder, np.remainder, NUMERIC, ("default", "nonzero"), same, 1e-5),
    ("power", fnp.power, np.power, FLOATS, ("positive", "default"), same, 4e-6),
    ("power_int", fnp.power, np.power, INTS, ("small", "exponent"), same, None),
    ("maximum", fnp.maximum, np.maximum, ALL, ("default", "default"), same, None),
    ("minimum", fnp.minimum, np.minimum, ALL, ("default", "default"), same, None),
    ("arctan2", fnp.arctan2, np.arctan2, FLOATS, ("default", "default"), to_float, 2e-6),
    ("equal", fnp.equal, np.equal, ALL, ("small", "small"), to_bool, None),
    ("not_equal", fnp.not_equal, np.not_equal, ALL, ("small", "small"), to_bool, None),
    ("less", fnp.less, np.less, ALL, ("small", "small"), to_bool, None),
    ("less_equal", fnp.less_equal, np.less_equal, ALL, ("small", "small"), to_bool, None),
    ("greater", fnp.greater, np.greater, ALL, ("small", "small"), to_bool, None),
    ("greater_equal", fnp.greater_equal, np.greater_equal, ALL, ("small", "small"), to_bool, None),
    ("logical_and", fnp.logical_and, np.logical_and, ALL, ("small", "small"), to_bool, None),
    ("logical_or", fnp.logical_or, np.logical_or, ALL, ("small", "small"), to_bool, None),
    ("logical_xor", fnp.logical_xor, np.logical_xor, ALL, ("small", "small"), to_bool, None),
    ("bitwise_and", fnp.bitwise_and, np.bitwise_and, INTS + (BOOL,), ("default", "default"),
     same, None),
    ("bitwise_or", fnp.bitwise_or, np.bitwise_or, INTS + (BOOL,), ("default", "default"),
     same, None),
    ("bitwise_xor", fnp.bitwise_xor, np.bitwise_xor, INTS + (BOOL,), ("default", "default"),
     same, None),
    ("left_shift", fnp.left_shift, np.left_shift, INTS, ("small", "small"), same, None),
    ("right_shift", fnp.right_shift, np.right_shift, INTS, ("default", "small"), same, None),
]


def _cases(table):
    for entry in table:
        for d in entry[3]:
            for mode in ("eager", "jit"):
                yield pytest.param(entry, d, mode, id=f"{entry[0]}-{d}-{mode}")


def _run(fn, mode, *args):
    if mode == "jit":
        return fusionjit.jit(fn)(*args)
    return fn(*[fnp.asarray(a) for a in args])


@pytest.fixture
def dtype_mode(request):
    return None


def _maybe_x64(d):
    if np.dtype(d) in X64:
        fusionjit.config.update("fusionjit_enable_x64", True)
        return True
    return False


@pytest.mark.parametrize("entry,dtype,mode", list(_cases(UNARY)))
def test_unary(entry, dtype, mode):
    name, f, np_f, _, kind, rule, rtol = entry
    x64 = _maybe_x64(dtype)
    try:
        rng = np.random.default_rng(zlib.crc32(name.encode()))  # not hash(): salted per process
        for shape in SHAPES:
            x = gen(kind, dtype, shape, rng)
            out_dtype = rule(np.dtype(dtype))
            # NumPy computes float functions of bools in float16: use the result type.
            np_x = x.astype(out_dtype) if out_dtype.kind == "f" and x.dtype.kind != "f" else x
            expected = np.asarray(np_f(np_x)).astype(out_dtype)
            got = _run(f, mode, x)
            assert isinstance(got, fusionjit.Array)
            assert_close(got, expected, rtol=rtol, atol=rtol)
    finally:
        if x64:
            fusionjit.config.update("fusionjit_enable_x64", False)


@pytest.mark.parametrize("entry,dtype,mode", list(_cases(BINARY)))
def test_binary(entry, dtype, mode):
    name, f, np_f, _, kinds, rule, rtol = entry
    x64 = _maybe_x64(dtype)
    try:
        rng = np.random.default_rng(zlib.crc32(name.encode()))  # not hash(): salted per process
        for shape in SHAPES:
            x = gen(kinds[0], dtype, shape, rng)
            y = gen(kinds[1], dtype, shape, rng)
            with np.errstate(all="ignore"):
                expected = np.asarray(np_f(x, y)).astype(rule(np.dtype(dtype)))
            got = _run(f, mode, x, y)
            assert_close(got, expected, rtol=rtol, atol=rtol)
    finally:
        if x64:
            fusionjit.config.update("fusionjit_enable_x64", False)


REDUCTIONS = [
    ("sum", fnp.sum, np.sum, NUMERIC + (BOOL,)),
    ("prod", fnp.prod, np.prod, NUMERIC),
    ("max", fnp.max, np.max, ALL),
    ("min", fnp.min, np.min, ALL),
    ("mean", fnp.mean, np.mean, NUMERIC),
    ("any", fnp.any, np.any, ALL),
    ("all", fnp.all, np.all, ALL),
    ("argmax", fnp.argmax, np.argmax, NUMERIC),
    ("argmin", fnp.argmin, np.argmin, NUMERIC),
]


def _reduction_result_dtype(name, d, x64):
    d = np.dtype(d)
    if name in ("any", "all"):
        return BOOL
    if name in ("argmax", "argmin"):
        return I64 if x64 else I32
    if name == "mean":
        return d if d.kind == "f" else (F64 if x64 else F32)
    if name in ("sum", "prod") and d == BOOL:
        return I64 if x64 else I32
    return d


@pytest.mark.parametrize("name,f,np_f,dtypes", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_reductions(name, f, np_f, dtypes, mode):
    rng = np.random.default_rng(1)
    for dtype in dtypes:
        x64 = _maybe_x64(dtype)
        try:
            kind = "small" if name == "prod" else "default"
            x = gen(kind, dtype, (4, 5, 6), rng)
            axes = [None, 0, 1, 2, -1] if name in ("argmax", "argmin") else \
                [None, 0, 1, 2, -1, (0, 2), (1, 2)]
            for axis in axes:
                for keepdims in (False, True):
                    def fn(a, axis=axis, keepdims=keepdims):
                        return f(a, axis=axis, keepdims=keepdims)
                    expected = np.asarray(np_f(x, axis=axis, keepdims=keepdims))
                    expected = expected.astype(_reduction_result_dtype(name, dtype, x64))
                    got = _run(fn, mode, x)
                    rtol = 2e-6 if np.dtype(dtype) == F32 else None
                    assert_close(got, expected, rtol=rtol, atol=rtol)
        finally:
            if x64:
                fusionjit.config.update("fusionjit_enable_x64", False)


def test_argmax_returns_first_nan_and_first_tie():
    x = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, np.nan, 5.0, np.nan]], np.float32)
    np.testing.assert_array_equal(fnp.argmax(x, axis=1), np.argmax(x, axis=1))
    np.testing.assert_array_equal(fnp.argmin(x, axis=1), np.argmin(x, axis=1))
    np.testing.assert_array_equal(fusionjit.jit(lambda a: fnp.argmax(a, axis=1))(x), [1, 1])


def test_reductions_over_large_rows_are_accurate():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 100_003)).astype(np.float32)
    got = fusionjit.jit(lambda a: fnp.sum(a, axis=1))(x)
    assert_close(got, x.astype(np.float64).sum(axis=1).astype(np.float32), rtol=1e-4, atol=1e-3)
    got = fusionjit.jit(lambda a: fnp.max(a, axis=0))(x)
    assert_close(got, x.max(axis=0))


def test_empty_reductions():
    x = np.zeros((0, 3), np.float32)
    assert_close(fnp.sum(x, axis=0), np.zeros(3, np.float32))
    assert_close(fnp.prod(x, axis=0), np.ones(3, np.float32))
    with pytest.raises(ValueError, match="zero-size"):
        fnp.max(x, axis=0)


def test_kernels_over_no_elements_compile():
    # A transpose of [0, 0, 0, 0] read flat: the kernel's index arithmetic divided by the
    # zero strides of its operand as it was compiled (SIGFPE; found by hypothesis).
    x = np.zeros((0, 0, 0, 0), np.float32)
    for perm in ((0, 1, 3, 2), (3, 2, 1, 0)):
        got = fusionjit.jit(lambda a, perm=perm: fnp.ravel(fnp.transpose(a, perm) * 2))(x)
        assert got.shape == (0,)
    y = np.zeros((2, 0, 3), np.float32)
    got = fusionjit.jit(lambda a: fnp.transpose(a, (2, 0, 1)).reshape(3, -1) + 1)(y)
    assert got.shape == (3, 0)


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_where_and_clip(mode):
    rng = np.random.default_rng(2)
    c = rng.random((4, 5)) < 0.5
    x = rng.standard_normal((4, 5)).astype(np.float32)
    y = rng.standard_normal((5,)).astype(np.float32)
    assert_close(_run(fnp.where, mode, c, x, y), np.where(c, x, y))
    assert_close(_run(lambda a: fnp.clip(a, -0.5, 0.5), mode, x), np.clip(x, -0.5, 0.5))
    assert_close(_run(lambda a: fnp.clip(a, max=0.1), mode, x), np.clip(x, None, 0.1))
    assert_close(_run(lambda a: fnp.where(a > 0, a, 0.0), mode, x),
                 np.where(x > 0, x, 0.0).astype(np.float32))


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_power_with_python_int_exponent(mode):
    x = np.arange(-3, 4, dtype=np.float32)
    for n in (0, 1, 2, 3, 7, -1, -2):
        assert_close(_run(lambda a, n=n: a ** n, mode, x + 0.5), (x + 0.5) ** n, rtol=1e-6)
    xi = np.arange(-3, 4, dtype=np.int32)
    assert_close(_run(lambda a: a ** 3, mode, xi), xi ** 3)


def test_integer_division_follows_xla_for_zero_divisors():
    # Documented semantics (as XLA): x // 0 == -1 for unsigned trunc division, x % 0 == x.
    x = np.array([7, -7, 0], np.int32)
    y = np.array([0, 0, 0], np.int32)
    got = np.asarray(fusionjit.lax.div(x, y))
    np.testing.assert_array_equal(got, [-1, -1, -1])
    np.testing.assert_array_equal(np.asarray(fusionjit.lax.rem(x, y)), x)
    big = np.array([np.iinfo(np.int32).min], np.int32)
    np.testing.assert_array_equal(np.asarray(fusionjit.lax.div(big, np.array([-1], np.int32))), big)


def test_float_to_int_conversion_saturates():
    x = np.array([np.nan, np.inf, -np.inf, 3.7, -3.7, 3e9], np.float32)
    got = np.asarray(fnp.asarray(x).astype(np.int32))
    np.testing.assert_array_equal(got, [0, 2**31 - 1, -2**31, 3, -3, 2**31 - 1])


def test_shift_by_more_than_the_width():
    x = np.array([1, -8, 5], np.int32)
    s = np.array([40, 33, 31], np.int32)
    np.testing.assert_array_equal(np.asarray(fusionjit.lax.shift_left(x, s)), [0, 0, -2**31])
    np.testing.assert_array_equal(np.asarray(fusionjit.lax.shift_right_arithmetic(x, s)),
                                  [0, -1, 0])
    np.testing.assert_array_equal(np.asarray(fusionjit.lax.shift_right_logical(x, s)), [0, 0, 0])


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_transcendentals_edge_values(mode):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 88.0, -100.0, 1e10],
                 np.float32)
    for f, np_f in [(fnp.exp, np.exp), (fnp.tanh, np.tanh), (fnp.sin, np.sin),
                    (fnp.cos, np.cos), (fnp.expm1, np.expm1)]:
        with np.errstate(all="ignore"):
            expected = np_f(x)
        assert_close(_run(f, mode, x), expected, rtol=3e-6, atol=1e-37)
    pos = np.array([0.0, np.inf, 1e-38, 3e38, 1.0, -1.0, np.nan], np.float32)
    for f, np_f in [(fnp.log, np.log), (fnp.sqrt, np.sqrt), (fnp.log1p, np.log1p)]:
        with np.errstate(all="ignore"):
            expected = np_f(pos)
        assert_close(_run(f, mode, pos), expected, rtol=3e-6)


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_dot_and_matmul(mode):
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.int32):
        a = gen("small", dtype, (3, 4), rng)
        b = gen("small", dtype, (4, 5), rng)
        v = gen("small", dtype, (4,), rng)
        w = gen("small", dtype, (4,), rng)
        t = gen("small", dtype, (2, 4, 6), rng)
        batch = gen("small", dtype, (2, 3, 4), rng)
        rtol = 1e-5 if dtype == np.float32 else None
        assert_close(_run(fnp.dot, mode, a, b), np.dot(a, b), rtol=rtol, atol=rtol)
        assert_close(_run(fnp.dot, mode, a, v), np.dot(a, v), rtol=rtol, atol=rtol)
        assert_close(_run(fnp.dot, mode, v, w), np.dot(v, w), rtol=rtol, atol=rtol)
        assert_close(_run(fnp.dot, mode, a, t), np.dot(a, t), rtol=rtol, atol=rtol)
        assert_close(_run(fnp.matmul, mode, a, b), a @ b, rtol=rtol, atol=rtol)
        assert_close(_run(fnp.matmul, mode, v, b), v @ b, rtol=rtol, atol=rtol)
        assert_close(_run(fnp.matmul, mode, batch, b), batch @ b, rtol=rtol, atol=rtol)
        assert_close(_run(lambda x, y: x @ y, mode, batch, v), batch @ v, rtol=rtol, atol=rtol)
    big_a = rng.standard_normal((64, 70)).astype(np.float32)
    big_b = rng.standard_normal((70, 33)).astype(np.float32)
    assert_close(_run(fnp.matmul, mode, big_a, big_b), big_a @ big_b, rtol=1e-4, atol=1e-4)


def test_eager_and_jit_agree_on_a_composite():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 6)).astype(np.float32)

    def f(a):
        b = fnp.tanh(a) * 2.0 - fnp.exp(-a * a)
        return fnp.where(b > 0, b, b / 3) + fnp.mean(a, axis=0)

    eager = f(fnp.asarray(x))
    jitted = fusionjit.jit(f)(x)
    assert_close(jitted, eager, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("width", [1, 4, 8, 16])
def test_every_vector_width_computes_the_same(width):
    """Kernels at each SIMD width (the default is the host's) over sizes around the widths:
    vector main loops, remainders, reductions across and along rows, index arithmetic."""
    def f(x, y):
        z = fnp.where(x > 0, fnp.exp(-x * x), fnp.sin(x)) + y.T
        return (fnp.sum(z, axis=1), fnp.max(z, axis=0), fnp.concatenate([z[::-1], z], axis=0),
                fnp.sum(x * 2.0))

    rng = np.random.default_rng(width)
    fusionjit.config.update("fusionjit_vector_width", width)
    try:
        for n in (1, 3, 15, 16, 17, 33, 100):
            x = rng.uniform(-2, 2, (n, n + 1)).astype(np.float32)
            y = rng.uniform(-2, 2, (n + 1, n)).astype(np.float32)
            got = fusionjit.jit(f)(x, y)
            zn = np.where(x > 0, np.exp(-x * x), np.sin(x)) + y.T
            want = (zn.sum(axis=1), zn.max(axis=0), np.concatenate([zn[::-1], zn], axis=0),
                    np.sum(x * 2.0))
            for g, w in zip(got, want):
                np.testing.assert_allclose(np.asarray(g), w, rtol=2e-5, atol=2e-5)
    finally:
        fusionjit.config.update("fusionjit_vector_width", 0)


def test_vector_width_is_validated():
    with pytest.raises(ValueError, match="vector_width"):
        fusionjit.config.update("fusionjit_vector_width", 3)


@pytest.mark.parametrize("shape", [(196613,),  # a prime count: the last block is padded
                                   (301, 1000)])
def test_large_reductions_to_a_scalar_are_split_and_exact(shape):
    """Reductions of many elements to one value run as partial sums over blocks (in
    parallel) and a reduction of the partials; padding the last block must not change
    any result, whatever the combiner."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    i = rng.integers(-1000, 1000, shape).astype(np.int32)
    p = np.ones(shape, np.float32)  # an exact product: 2^50 * 0.5^45 = 32
    p.reshape(-1)[rng.permutation(p.size)[:95]] = [2.0] * 50 + [0.5] * 45
    got = fusionjit.jit(lambda x, i, p: (fnp.sum(x * 2.0), fnp.max(x), fnp.min(x), fnp.mean(x),
                                         fnp.prod(p), fnp.sum(i), fnp.max(i),
                                         fnp.all(x < 1), fnp.any(x > 0.9999999)))(x, i, p)
    x64 = x.astype(np.float64)
    want = ((x64 * 2).sum(), x.max(), x.min(), x64.mean(), 32.0, i.sum(dtype=np.int32),
            i.max(), (x < 1).all(), (x > 0.9999999).any())
    tols = [1e-6 * x.size, 0, 0, 1e-6, 0, 0, 0, 0, 0]
    for g, w, tol in zip(got, want, tols):
        np.testing.assert_allclose(np.asarray(g), w, rtol=0, atol=tol)
    assert fusionjit.testing.count_kernels(lambda x: fnp.sum(x * 2.0))(x) == 2


@pytest.mark.parametrize("shape,axis", [
    ((100003, 64), 0),           # one vector of columns; prime rows: padded
    ((3, 7, 5000, 16), (1, 2)),  # a reduced run between kept dimensions
    ((4, 65536), 1),             # four rows
    ((2, 30011, 3), 1)])         # a prime run, three columns
def test_reductions_with_few_outputs_are_split_and_exact(shape, axis):
    """Few outputs over many elements: partial results over blocks of the reduced run, then
    their reduction (TreeReductionPass); every combiner, padding included, is exact."""
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    i = rng.integers(-1000, 1000, shape).astype(np.int32)
    got = fusionjit.jit(lambda x, i: (fnp.sum(x * 2.0, axis=axis), fnp.max(x, axis=axis),
                                      fnp.min(x, axis=axis), fnp.sum(i, axis=axis),
                                      fnp.min(i, axis=axis),
                                      fnp.any(x > 0.99999, axis=axis)))(x, i)
    reduced = np.prod([shape[a] for a in np.atleast_1d(axis)])
    want = ((x.astype(np.float64) * 2).sum(axis=axis), x.max(axis=axis), x.min(axis=axis),
            i.sum(axis=axis, dtype=np.int32), i.min(axis=axis), (x > 0.99999).any(axis=axis))
    tols = [2e-6 * reduced, 0, 0, 0, 0, 0]
    for g, w, tol in zip(got, want, tols):
        assert np.asarray(g).shape == w.shape
        np.testing.assert_allclose(np.asarray(g), w, rtol=0, atol=tol)
    # Split: the partials are a kernel of their own.
    assert fusionjit.testing.count_kernels(lambda x: fnp.max(x, axis=axis))(x) == 2


@pytest.mark.cpu_only
@pytest.mark.parametrize("shape,axis", [
    ((4, 16, 16, 8, 8), (1, 2, 4)),  # a group norm's statistics: NHW(GC) over H, W, C
    ((3, 50, 4, 2, 1, 16), (1, 3, 5)),  # a 1 between, runs of 2 and 16
    ((64, 8, 8), 0)])                # a column reduction to [8, 8]: rows of 64
def test_reductions_with_short_minor_runs_read_their_operand_in_vectors(shape, axis):
    """A reduction over a short minor run and over dimensions further out with kept ones
    between (a group norm's statistics) put outputs a whole image apart in one vector, and a
    column reduction to [.., 8, 8] stepped 8 lanes one output row at a time: 19x the time of
    the same sums as a column reduction of rows of 64 (ReductionLayoutPass), which every
    combiner gives exactly."""
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    i = rng.integers(-1000, 1000, shape).astype(np.int32)
    got = fusionjit.jit(lambda x, i: (fnp.sum(x * 2.0, axis=axis), fnp.max(x, axis=axis),
                                      fnp.min(x, axis=axis), fnp.sum(i, axis=axis),
                                      fnp.any(x > 0.999, axis=axis)))(x, i)
    reduced = np.prod([shape[a] for a in np.atleast_1d(axis)])
    want = ((x.astype(np.float64) * 2).sum(axis=axis), x.max(axis=axis), x.min(axis=axis),
            i.sum(axis=axis, dtype=np.int32), (x > 0.999).any(axis=axis))
    for g, w, tol in zip(got, want, [2e-6 * reduced, 0, 0, 0, 0]):
        assert np.asarray(g).shape == w.shape
        np.testing.assert_allclose(np.asarray(g), w, rtol=0, atol=tol)
    # The kernel that reads the operand walks it in vectors.
    kernels = fusionjit.jit(lambda x: fnp.sum(x, axis=axis)).lower(x).compile().kernels
    first = max(kernels, key=lambda k: k["bytes_read"])
    assert first["bytes_read"] == x.nbytes and first["width"] > 1, kernels


@pytest.mark.cpu_only
@pytest.mark.parametrize("columns", [3, 6, 12])
def test_a_column_reduction_to_fewer_outputs_than_a_vector_sums_them_side_by_side(columns):
    """A bias gradient over a policy's few logits, [4096, 6] summed over the batch: each
    output's sum is a chain of adds in order, and the kernel ran them one lane at a time, one
    after another (20 us). Narrower vectors run several chains side by side, each still in
    order: the same bits as one row after another."""
    x = np.random.default_rng(columns).standard_normal((4096, columns)).astype(np.float32)
    b = np.ones(columns, np.float32)
    f = fusionjit.jit(lambda x, b: b - 0.01 * fnp.sum(x, axis=0))
    (kernel,) = f.lower(x, b).compile().kernels
    assert kernel["width"] == 1 << (min(columns, 16).bit_length() - 1), kernel
    sums = np.zeros(columns, np.float32)
    for row in x:
        sums = sums + row
    np.testing.assert_array_equal(np.asarray(f(x, b)), b - np.float32(0.01) * sums)


def test_kernels_that_make_their_own_large_values_are_parallel():
    """A kernel's work counts the arrays it makes itself, not only its inputs and outputs:
    the partial sums of random numbers (from a two-word key) or of an iota were run on one
    thread because the kernel reads 8 bytes and writes 64 values."""
    import fusionjit.random as fr
    cases = [(lambda k: fnp.sum(fr.uniform(k, (1 << 20,))), fr.key(0)),
             (lambda s: fnp.max(fnp.arange(1 << 20, dtype=np.float32) * s), np.float32(0.5))]
    for f, arg in cases:
        kernels = fusionjit.jit(f).lower(arg).compile().kernels
        assert kernels[0]["units"] > 1 and kernels[0]["parallel"], kernels
    assert float(cases[1][0](np.float32(0.5))) == (2 ** 20 - 1) * 0.5


@pytest.mark.cpu_only
def test_threads_get_whole_vectors_of_element_units():
    """The thread pool hands a kernel whose units are elements whole vectors of them: a chunk
    cut mid-vector would run on the scalar tail (a column sum of 300 x 8192 has 300 elements
    to reduce per output, which once made chunks of 54 outputs, none a whole vector)."""
    x = np.ones((300, 8192), np.float32)
    for f in (lambda x: fnp.sum(x, axis=0), lambda x: fnp.exp(x) + 1.0):
        kernels = fusionjit.jit(f).lower(x).compile().kernels
        assert kernels and all(k["parallel"] for k in kernels)
        for k in kernels:
            assert k["width"] > 1 and k["grain"] % k["width"] == 0, k


@pytest.mark.parametrize("dimension", [0, 1])
def test_an_iota_of_rank_two_read_through_a_reshape(dimension):
    # Regression: a reshape hands its operand a flat index, and the iota took it for its
    # own dimension's position (0..11 instead of the row or column numbers).
    from fusionjit._src.lax.shapes import iota_p

    def f():
        i = iota_p.bind(dtype=np.dtype(np.int32), shape=(3, 4), dimension=dimension)
        return lax.reshape(i, (12,)) * 2
    want = (np.indices((3, 4))[dimension] * 2).reshape(12)
    np.testing.assert_array_equal(np.asarray(fusionjit.jit(f)()), want)


# --- selects whose costly operand is computed only where a lane takes it ---------------------

def _costly(x):
    return fnp.sin(x) * fnp.cos(2.0 * x) + fnp.exp(-x * x)


def _costly_np(x):
    return np.sin(x) * np.cos(np.float32(2.0) * x) + np.exp(-x * x)


@pytest.mark.parametrize("n", [64, 37, 5])
@pytest.mark.parametrize("mask", ["none", "all", "some", "last"])
def test_a_select_computes_its_costly_operand_lazily_and_right(n, mask):
    x = np.linspace(-2, 2, n, dtype=np.float32)
    y = np.arange(n, dtype=np.float32)
    m = {"none": np.zeros(n, bool), "all": np.ones(n, bool), "some": np.arange(n) % 7 == 3,
         "last": np.arange(n) == n - 1}[mask]

    def f(x, y, m):
        t = _costly(x).reshape(1, n) + fnp.zeros((2, 1), "float32")   # two rows, one predicate
        return (fnp.where(m, t[0], y), fnp.where(m, t[1] + 1.0, y * 2.0),
                fnp.where(m, y, _costly(y)))                            # the false side

    got = fusionjit.jit(f)(x, y, m)
    c = _costly_np(x)
    want = (np.where(m, c, y), np.where(m, c + 1, y * 2), np.where(m, y, _costly_np(y)))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-6)
    llvm = fusionjit.jit(f).lower(x, y, m).as_text("llvm")
    assert "lazy.select" in llvm


def test_a_costly_value_read_outside_the_select_is_not_lazy():
    n = 40
    x = np.linspace(-2, 2, n, dtype=np.float32)
    m = np.arange(n) % 3 == 0

    def f(x, m):
        c = _costly(x)
        return fnp.where(m, c, 0.0), c.sum()

    sel, total = fusionjit.jit(f)(x, m)
    np.testing.assert_allclose(np.asarray(sel), np.where(m, _costly_np(x), 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(total), _costly_np(x).sum(), rtol=1e-5)
    cheap = fusionjit.jit(lambda x, m: fnp.where(m, x + 1.0, x)).lower(x, m).as_text("llvm")
    assert "lazy.select" not in cheap


@pytest.mark.cpu_only
def test_a_value_a_lazy_select_shares_is_computed_once():
    """A value both the lazy operand and a later op read (`s` below) is computed before the
    select's branch: computed inside, it went with the branch's scope and was computed again
    after it (the kernel had twice the sine code and ran 10% slower than with the sum's
    terms swapped)."""
    x = np.random.default_rng(0).uniform(0, 1, 4096).astype(np.float32)

    def select_first(x):
        s = fnp.sin(x)
        return fnp.where(x > 0.5, fnp.exp(fnp.exp(s) * 3) * fnp.log1p(s * s), 0) + s * 2

    def select_last(x):
        s = fnp.sin(x)
        return s * 2 + fnp.where(x > 0.5, fnp.exp(fnp.exp(s) * 3) * fnp.log1p(s * s), 0)

    first, last = (fusionjit.jit(f).lower(x).as_text("llvm") for f in (select_first, select_last))
    assert "lazy.select" in first
    assert first.count("trig.fast") == last.count("trig.fast") > 0
    s = np.sin(x.astype(np.float64))
    want = np.where(x > 0.5, np.exp(np.exp(s) * 3) * np.log1p(s * s), 0) + s * 2
    np.testing.assert_allclose(np.asarray(fusionjit.jit(select_first)(x)), want, rtol=2e-5)


@pytest.mark.parametrize("shape,perm", [((64, 64), (1, 0)), ((37, 53), (1, 0)),
                                        ((3, 40, 17), (0, 2, 1)), ((5, 6, 70), (2, 1, 0)),
                                        ((2, 3, 4, 35), (3, 1, 0, 2)), ((1, 64), (1, 0)),
                                        ((100, 37), (1, 0)), ((3, 20, 32), (0, 2, 1)),
                                        ((2, 32, 3, 48), (0, 2, 3, 1)),
                                        # few tiles: columns split in blocks too
                                        ((4100, 16), (1, 0)), ((1000, 24), (1, 0)),
                                        ((3, 2000, 40), (0, 2, 1)),
                                        ((2, 4000, 32), (0, 2, 1))])
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_, np.float16, np.int32,
                                   np.float64])
def test_transposes_that_move_the_last_dimension_in_row_tiles(shape, perm, dtype, x64):
    """A kernel that reads across rows computes a tile of rows vector by vector, so that
    the lines one vector reads serve the next rows too (a 1024 x 1024 float32 transpose:
    2.5 ms -> 0.6 ms); 32- and 64-bit elements by blocks transposed in registers
    (IsBlockTransposed): whole tiles, rows before the first whole tile of a thread's rows
    and after the last, columns left over, fused elementwise work before and after; with
    few tiles of rows, blocks of columns (the last one shorter) as units of their own."""
    rng = np.random.default_rng(5)
    x = (rng.normal(size=shape) * 5).astype(dtype)
    y = rng.normal(size=tuple(shape[p] for p in perm)).astype(np.float32)
    f = fusionjit.jit(lambda x, y: (fnp.transpose(x, perm),
                                    fnp.transpose(x, perm).astype(np.float32) * 2 + y,
                                    fnp.transpose(x * 3 + 1, perm)))
    t, u, v = f(x, y)
    np.testing.assert_array_equal(np.asarray(t), np.transpose(x, perm))
    np.testing.assert_array_equal(np.asarray(u),
                                  np.transpose(x, perm).astype(np.float32) * 2 + y)
    np.testing.assert_array_equal(np.asarray(v), np.transpose(x * 3 + 1, perm))


@pytest.mark.cpu_only
def test_positions_of_lanes_divide_in_32_bits():
    # A convolution's gradient computes its patch indices from iotas of [32, 7, 7, 3, 3, 64]
    # reshaped to [N, 1]; each lane's multi-index is its linear position divided by the
    # dimensions' strides. x86 has no vector 64-bit multiply-high, so LLVM divided each lane
    # apart (a DQN gradient's two index kernels: 1.8 and 1.5 ms, 14x and 8x the estimate).
    # Positions below 2^31 divide in 32 bits: vector code, the same indices.
    import re
    shape = (4, 7, 3, 16)

    def f(x):
        i = sum(lax.broadcasted_iota(np.int32, shape, d) * 10 ** (3 - d) for d in range(4))
        return fnp.minimum(i.reshape(-1, 1), x)

    x = np.full((1344, 1), 5000, np.int32)
    x[::7] = 17
    g = fusionjit.jit(f)
    text = g.lower(x).as_text("llvm")
    assert re.search(r"udiv <\d+ x i32>", text) and not re.search(r"udiv <\d+ x i64>", text)
    want = sum(np.indices(shape)[d] * 10 ** (3 - d) for d in range(4)).reshape(-1, 1)
    np.testing.assert_array_equal(np.asarray(g(x)), np.minimum(want, x))


@pytest.mark.cpu_only
def test_a_transpose_kernel_walks_row_tiles():
    # By register blocks where IsBlockTransposed holds, else by gathers in row tiles.
    x = np.ones((64, 64), np.float32)
    blocked = fusionjit.jit(lambda x: x.T).lower(x).as_text("llvm")
    assert "block.rows" in blocked and "strided.rows" not in blocked
    assert "shufflevector" in blocked
    y = np.ones((3, 40, 24), np.float32)   # rows in runs of 24: not whole blocks
    gathered = fusionjit.jit(lambda y: y.transpose(0, 2, 1)).lower(y).as_text("llvm")
    assert "strided.rows" in gathered and "block.rows" not in gathered
    assert "strided.rows" not in fusionjit.jit(lambda x: x * 2).lower(x).as_text("llvm")
    # One tile of 16 rows: threads take blocks of columns (each thread's 8 rows walked by
    # gathers took 2.5x JAX's time for [65536, 16]).
    tall = np.ones((4096, 16), np.float32)
    split = fusionjit.jit(lambda x: x.T).lower(tall).as_text("llvm")
    assert "column.block" in split and "block.rows" in split
    assert "column.block" not in fusionjit.jit(lambda x: x.T).lower(
        np.ones((1024, 1024), np.float32)).as_text("llvm")


def _sequential_matmul(a, b):
    """a @ b summed over k in order, each step a fused multiply-add (one rounding, as
    XLA's CPU dots): the order fusionjit's dot kernels use (tiled or not), so their results
    match it bit for bit. float32 steps are computed in float64 (the product is exact there;
    rounding the sum twice could differ from one rounding, which these inputs never meet);
    float64 has no exact form in NumPy: None."""
    if a.dtype == np.float64:
        return None
    wide = np.float64 if a.dtype == np.float32 else a.dtype
    out = np.zeros(a.shape[:-1] + b.shape[-1:], a.dtype)
    for k in range(a.shape[-1]):
        step = a[..., :, k:k + 1].astype(wide) * b[..., k:k + 1, :].astype(wide) + out.astype(wide)
        out = step.astype(a.dtype)
    return out


def _row_by_row(f, a, b, *rest):
    """f(a, b, *rest) with a's rows two at a time (each beside a copy of itself): too few
    rows for a tile, so each row is computed alone (one output vector at a time). One row
    alone is a vector-matrix product, which the compiler sums as a column reduction."""
    rows = a.reshape(-1, *a.shape[-2:])
    rhs = np.broadcast_to(b, a.shape[:-2] + b.shape[-2:]).reshape(-1, *b.shape[-2:])
    out = [np.asarray(f(rows[i][[r, r]], rhs[i], *rest))[0]
           for i in range(rows.shape[0]) for r in range(rows.shape[1])]
    return np.stack(out).reshape(a.shape[:-1] + b.shape[-1:])


@pytest.mark.parametrize("shape", [
    (256, 96, 160),      # 4-row tiles of 64 columns, 32 columns left over
    (7, 33, 70),         # 1 tile row, 3 rows and 6 columns left over
    (3, 40, 64),         # too few rows for a tile: plain rows
    (2, 5, 17, 128),     # batched: the tiles' rows cross batch boundaries
    (2, 16, 8),          # narrower than a tile
    (21, 64, 6),         # 8-row tiles of 4-lane vectors, 5 rows and 2 columns left over
    (136, 1024, 40),     # blocks of 128 rows (AVX2: packed panels), 8 rows left over
    (40, 2500, 24),      # packed panels a block of k at a time, the sums kept between
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_dot_kernels_sum_in_order_whatever_the_tiling(shape, dtype, request):
    if dtype == np.float64:
        request.getfixturevalue("x64")
    # The CPU computes a dot kernel's rows in tiles (4 rows x 4 vectors with AVX-512) in
    # blocks of rows, the rows and columns left over one vector at a time; all sum over k in
    # order with fused multiply-adds. (Products with one row or one column are reductions:
    # test_dot_forms_*.)
    import fusionjit
    rng = np.random.default_rng(5)
    *batch, m, k, n = shape
    a = (rng.standard_normal((*batch, m, k)) * 4).astype(dtype)
    b = (rng.standard_normal((*batch, k, n)) * 4).astype(dtype)
    bias = (rng.standard_normal(n) * 4).astype(dtype)
    f = fusionjit.jit(lambda a, b, c: fnp.matmul(a, b) + c)
    got = np.asarray(f(a, b, bias))
    alone = _row_by_row(f, a, b, bias)
    np.testing.assert_array_equal(got, alone)
    sequential = _sequential_matmul(a, b)
    if sequential is not None:
        np.testing.assert_array_equal(got, sequential + bias)
    want = got
    if dtype != np.int32:   # an epilogue that is not just the sum: tanh of it
        got = fusionjit.jit(lambda a, b, c: fnp.tanh(fnp.matmul(a, b) + c))(a, b, bias)
        ref = fusionjit.jit(lambda x: fnp.tanh(x), fusion="none")(want)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))


@pytest.mark.cpu_only
def test_a_matmul_with_an_epilogue_runs_in_tiles():
    import fusionjit
    a, b = np.ones((256, 96), np.float32), np.ones((96, 160), np.float32)
    f = fusionjit.jit(lambda a, b: fnp.maximum(a @ b, 0.0))
    assert "dot.rows" in f.lower(a, b).as_text("llvm")
    # One column (a value head): one lane, rows one at a time.
    assert "dot.rows" not in f.lower(a, b[:, :1]).as_text("llvm")
    # A few columns (a policy's logits): vectors that wide, 8 rows a tile.
    assert "dot.rows" in f.lower(a, b[:, :6]).as_text("llvm")
    # A deep product: its rhs panels packed a block of k at a time, the sums kept between.
    deep = f.lower(np.ones((40, 2500), np.float32), np.ones((2500, 24), np.float32)).as_text("llvm")
    assert "dot.panel" in deep and "dot.partial" in deep


def test_a_rhs_contracted_over_its_last_dimension_is_transposed_first():
    # q @ k^T as attention writes it: the dot's output lanes would read k with a stride (a
    # gather per lane and step). The dot-layout pass gives the dot k transposed to
    # [batch, contracting, free] by a kernel of its own; the sums keep their order.
    import fusionjit
    rng = np.random.default_rng(9)
    q = rng.standard_normal((3, 70, 24)).astype(np.float32)
    k = rng.standard_normal((3, 90, 24)).astype(np.float32)
    f = fusionjit.jit(lambda q, k: fnp.einsum("bqd,bkd->bqk", q, k))
    text = f.lower(q, k).compile().as_text()
    (dot,) = [line for line in text.splitlines() if " dot(" in line]
    assert "rhs_contracting_dims={1}" in dot and " transpose(" in text, text
    want = _sequential_matmul(q, np.swapaxes(k, 1, 2))
    np.testing.assert_array_equal(np.asarray(f(q, k)), want)



# --- reductions with where= (masked means are everyday RL losses) ---------------------

_X = (np.arange(24, dtype=np.float32).reshape(4, 6) ** 1.3 - 9).astype(np.float32)
_MASKS = [np.array([True, False, True, True, False, True]),
          np.random.default_rng(3).random((4, 6)) > 0.4,
          np.zeros((4, 6), bool)]


@pytest.mark.parametrize("name, extra", [
    ("sum", {}), ("prod", {}), ("max", dict(initial=-100.0)), ("min", dict(initial=100.0)),
    ("mean", {}), ("any", {}), ("all", {}), ("var", {}), ("var", dict(ddof=1)), ("std", {}),
    ("nansum", {}), ("nanmean", {}), ("nanvar", {}), ("nanmax", dict(initial=-100.0)),
])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_reductions_honour_where_as_numpy(name, extra, axis):
    # Regression: mean, any, all, nanmean, nanvar and nanstd ignored where= (a silently
    # unmasked result), and sum, prod, max, min, var and std refused it.
    x = _X.copy()
    if name.startswith("nan"):
        x[1, 2] = np.nan
    for m, where in enumerate(_MASKS):
        if where.ndim == 1 and axis == 0:
            continue
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")   # NumPy's warnings for empty slices
            want = getattr(np, name)(x > 3 if name in ("any", "all") else x, axis=axis,
                                     where=where, **extra)
        arg = x > 3 if name in ("any", "all") else x
        for got in (getattr(fnp, name)(arg, axis=axis, where=where, **extra),
                    fusionjit.jit(lambda a, w: getattr(fnp, name)(a, axis=axis, where=w,
                                                                  **extra))(arg, where)):
            np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=1e-5,
                                       equal_nan=True, err_msg=f"mask {m}")


def test_where_without_initial_is_an_error_for_max_and_min_and_initial_keeps_the_dtype():
    with pytest.raises(ValueError, match="has no identity: with where=, give initial="):
        fnp.max(_X, where=_MASKS[0])
    got = fnp.max(_X.astype(np.int32), where=_MASKS[0], initial=-5.0)
    assert got.dtype == np.int32   # initial takes the array's dtype, as in JAX
    assert int(got) == int(np.max(_X.astype(np.int32), where=_MASKS[0], initial=-5))


@pytest.mark.parametrize("name", ["sum", "mean", "any", "all", "argmax", "argmin", "nanargmax",
                                  "var", "nanmean"])
def test_out_is_an_error_not_ignored(name):
    # Regression: mean, any, all, argmax, argmin and nanargmax accepted out= and ignored it.
    with pytest.raises(NotImplementedError, match=r"out=\.\.\.\) is not supported") as info:
        getattr(fnp, name)(np.ones(3, np.float32), out=np.zeros((), np.float32))
    assert "test_ops.py" in str(info.value)


def test_where_with_the_condition_alone_is_nonzero_as_in_jax():
    c = np.array([[True, False, True], [False, True, False]])
    for got, want in zip(fnp.where(c), np.where(c)):
        np.testing.assert_array_equal(np.asarray(got), want)
    padded = fusionjit.jit(lambda c: fnp.where(c, size=4, fill_value=-1))(c)
    np.testing.assert_array_equal(np.asarray(padded[1]), [0, 2, 1, -1])
    with pytest.raises(ValueError, match="condition alone, or the condition, x and y"):
        fnp.where(c, 1.0)


def test_clip_without_bounds_and_bitwise_count_dtype_as_numpy():
    x = np.arange(3.0, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(fnp.clip(x)), x)
    v = np.array([-3, 7, 255, -(2**31)], np.int32)
    got = fnp.bitwise_count(v)
    assert got.dtype == np.bitwise_count(v).dtype == np.uint8
    np.testing.assert_array_equal(np.asarray(got), np.bitwise_count(v))


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int8, np.float32])
def test_division_by_zero_in_floor_divide_and_remainder_agrees_with_jax(dtype):
    # Regression: x % 0 gave x for integers (NumPy and JAX: 0), and float x // 0 gave NaN
    # (NumPy and JAX: +-inf).
    rng = np.random.default_rng(1)
    lo = 0 if dtype == np.uint32 else -20
    a = rng.integers(lo, 20, 300).astype(dtype)
    b = rng.integers(0 if dtype == np.uint32 else -3, 4, 300).astype(dtype)
    b[:20] = 0
    if dtype == np.float32:
        a, b = a * np.float32(1.37), b * np.float32(0.5)
        a[:4] = [0.0, -0.0, 3.0, np.inf]
    with np.errstate(all="ignore"):
        assert np.array_equal(np.asarray(fnp.remainder(a, b)), np.remainder(a, b),
                              equal_nan=True)
        if dtype == np.float32:
            assert np.array_equal(np.asarray(fnp.floor_divide(a, b)), np.floor_divide(a, b),
                                  equal_nan=True)
    jnp = pytest.importorskip("jax.numpy")
    for name in ("mod", "floor_divide", "divmod", "fmod"):
        want = np.asarray(getattr(jnp, name)(a, b))
        for f in (getattr(fnp, name), fusionjit.jit(getattr(fnp, name))):
            got = np.asarray(f(a, b))
            assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True), name


def test_take_along_axis_defaults_to_the_last_axis_as_jax():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    i = np.array([[3], [0], [2]], np.int32)
    np.testing.assert_array_equal(np.asarray(fnp.take_along_axis(x, i)),
                                  np.take_along_axis(x, i, axis=-1))


def test_stack_dtype_and_square_of_booleans_as_jax():
    got = fnp.stack([np.ones(2, np.float32), np.zeros(2, np.float32)], dtype=np.int32)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), [[1, 1], [0, 0]])
    sq = fnp.square(np.array([True, False]))
    assert sq.dtype == np.int32   # jnp.square of booleans is int32
    np.testing.assert_array_equal(np.asarray(sq), [1, 0])
    with pytest.raises(NotImplementedError, match="out="):
        fnp.stack([np.ones(2)], out=np.ones((1, 2)))


@pytest.mark.cpu_only
@pytest.mark.parametrize("widths", [(128, 128), (17, 6), (40, 3, 33), (16, 16, 16, 16), (5, 64)])
def test_concatenates_along_the_last_axis_read_one_operand_per_vector(widths):
    # A vector within one operand reads that operand alone, contiguously;
    # those at a boundary read each at clamped positions and select, where the operands a
    # vector is past read one element (load.splat) instead of gathering. The gradient of a
    # split (a sum of zero pads) is such a concatenate.
    rng = np.random.default_rng(len(widths))
    parts = [rng.normal(size=(37, w)).astype(np.float32) for w in widths]
    f = fusionjit.jit(lambda *p: fnp.concatenate([fnp.tanh(q) * (k + 1) for k, q in
                                                  enumerate(p)], axis=-1))
    want = np.concatenate([np.tanh(q) * (k + 1) for k, q in enumerate(parts)], axis=-1)
    np.testing.assert_allclose(np.asarray(f(*parts)), want, rtol=2e-6)
    if all(w % 16 == 0 for w in widths):  # no vector at a boundary: no gather at all
        assert "masked.gather" not in f.lower(*parts).as_text("llvm")
    z = np.concatenate(parts, axis=-1)
    cuts = list(np.cumsum(widths)[:-1])

    def loss(z):
        pieces = fnp.split(z, cuts, axis=-1)
        return sum(fnp.sum(fnp.sin(p) * (k + 1)) for k, p in enumerate(pieces))

    g = fusionjit.jit(fusionjit.grad(loss))
    want_g = np.concatenate([np.cos(p) * (k + 1) for k, p in enumerate(parts)], axis=-1)
    np.testing.assert_allclose(np.asarray(g(z)), want_g, rtol=2e-6, atol=1e-7)
    assert "concatenate" in g.lower(z).as_text("optimized")  # not a sum of pads


@pytest.mark.cpu_only
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.float64, np.bool_])
def test_strided_and_reversed_reads_are_loads_not_gathers(dtype):
    # x[:, ::2] * x[:, 1::2] took 3x JAX's time as gathers; a stride of 2 to 4 loads the run
    # its lanes span (without the elements past the last lane, at the buffer's end here)
    # and picks them out, a flip loads the run reversed.
    x = (np.arange(64 * 96).reshape(64, 96) % 7 - 3).astype(dtype)
    cases = [(lambda x: x[:, ::2] * x[:, 1::2] if dtype != np.bool_ else x[:, ::2] & x[:, 1::2]),
             (lambda x: x[:, 2::3]), (lambda x: x[:, ::4]), (lambda x: fnp.flip(x, -1)),
             (lambda x: x[:, ::-1][:, 5:])]
    for f in cases:
        g = fusionjit.jit(f)
        np.testing.assert_array_equal(np.asarray(g(x)), f(x))
        if dtype in (np.float32, np.int8):
            assert "masked.gather" not in g.lower(x).as_text("llvm")


@pytest.mark.cpu_only
@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.float64])
def test_reads_at_constant_lane_patterns_are_loads_not_gathers(dtype):
    # A vector of a row split by a reshape (a group's statistic over its channels, a head's
    # scale over its features, rotary pairs) reads at lanes (0 x 8, 1 x 8) or (0, 0, 1, 1,
    # ...): gathers, 2-6x the time of loading the few elements they span and shuffling them
    # (LaneMath keeps the quotients and remainders of a ramp from a multiple of the width
    # as constant patterns).
    rng = np.random.default_rng(0)
    x = rng.integers(-50, 50, (64, 4, 4, 64)).astype(dtype)
    m = rng.integers(-50, 50, (64, 1, 1, 8, 1)).astype(dtype)
    s = rng.integers(-50, 50, (64, 32)).astype(dtype)
    h = rng.integers(-50, 50, (64, 4)).astype(dtype)

    def rotary(x):
        pairs = x.reshape(64, 512, 2)
        a, b = pairs[..., 0], pairs[..., 1]
        return fnp.stack([a * 3 - b, a + b * 2], -1).reshape(x.shape)
    cases = [
        ((lambda x, m: (x.reshape(64, 4, 4, 8, 8) - m).reshape(64, 4, 4, 64)), (x, m),
         lambda x, m: (x.reshape(64, 4, 4, 8, 8) - m).reshape(64, 4, 4, 64)),
        ((lambda s: fnp.repeat(s, 2, axis=-1)), (s,), lambda s: np.repeat(s, 2, axis=-1)),
        ((lambda s, h: (s.reshape(64, 4, 8) * h[:, :, None]).reshape(64, 32)), (s, h),
         lambda s, h: (s.reshape(64, 4, 8) * h[:, :, None]).reshape(64, 32)),
        (rotary, (x.reshape(64, 1024),),
         lambda x: np.stack([x[:, ::2] * 3 - x[:, 1::2], x[:, ::2] + x[:, 1::2] * 2],
                            -1).reshape(64, 1024))]
    for f, args, want in cases:
        g = fusionjit.jit(f)
        np.testing.assert_array_equal(np.asarray(g(*args)), want(*args).astype(dtype))
        assert "masked.gather" not in g.lower(*args).as_text("llvm")
