"""Property-based tests (Hypothesis) of fusionjit.numpy against NumPy: broadcasting of binary
ops, comparisons and where over random shapes (rank <= 4, zero-size dims included) and dtypes,
weak-typed Python scalars, reductions over random axes, reshape/transpose round trips,
random basic indices and random advanced (integer array) indices, eagerly and under jit.

Expected values are computed by NumPy on inputs first converted to the dtype JAX's promotion
gives (x64 disabled), so the comparison checks fusionjit's values, shapes and dtypes."""

from __future__ import annotations

import operator
import warnings

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusionjit
import fusionjit.numpy as fnp
from conftest import assert_close

F32, I32, BOOL = np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.bool_)
DTYPES = [F32, I32, BOOL]
_RANK = {BOOL: 0, I32: 1, F32: 2}


def promote(*dtypes):
    """JAX's promotion of strong bool/int32/float32 (x64 disabled): a chain."""
    return max((np.dtype(d) for d in dtypes), key=_RANK.__getitem__)


def elements(dtype, wide=True):
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return st.booleans()
    if dtype == I32:
        return st.integers(-2**31, 2**31 - 1) if wide else st.integers(-1000, 1000)
    if wide:
        return st.floats(width=32, allow_subnormal=False)  # with inf and nan
    return st.floats(-1000, 1000, width=32, allow_subnormal=False)


def arrays(dtype, shape, wide=True):
    return hnp.arrays(dtype, shape, elements=elements(dtype, wide))


def both(fn, *args):
    """(eager result, jit result) of ``fn`` on ``args``."""
    eager = fn(*[fnp.asarray(a) for a in args])
    jitted = fusionjit.jit(fn)(*args)
    return eager, jitted


def check_both(fn, args, expected, **kw):
    eager, jitted = both(fn, *args)
    for got in (eager, jitted):
        assert isinstance(got, fusionjit.Array)
        assert_close(got, expected, **kw)


BROADCAST_SHAPES = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4,
                                                     min_side=0, max_side=5)
BROADCAST_SHAPES3 = hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=4,
                                                      min_side=0, max_side=5)


@st.composite
def broadcast_operands(draw, shapes=BROADCAST_SHAPES, wide=True):
    bshapes = draw(shapes)
    out = []
    for s in bshapes.input_shapes:
        d = draw(st.sampled_from(DTYPES))
        out.append(draw(arrays(d, s, wide)))
    return out, bshapes.result_shape


ARITH = [("add", fnp.add, np.add), ("multiply", fnp.multiply, np.multiply),
         ("subtract", fnp.subtract, np.subtract), ("maximum", fnp.maximum, np.maximum),
         ("minimum", fnp.minimum, np.minimum), ("op+", operator.add, np.add),
         ("op*", operator.mul, np.multiply)]
COMPARE = [("equal", fnp.equal, np.equal), ("not_equal", fnp.not_equal, np.not_equal),
           ("less", fnp.less, np.less), ("less_equal", fnp.less_equal, np.less_equal),
           ("greater", fnp.greater, np.greater),
           ("greater_equal", fnp.greater_equal, np.greater_equal),
           ("op<", operator.lt, np.less), ("op>=", operator.ge, np.greater_equal)]


@settings(max_examples=30)
@given(st.sampled_from(ARITH), broadcast_operands())
def test_arithmetic_broadcasting(op, operands):
    name, f, np_f = op
    (x, y), result_shape = operands
    rt = promote(x.dtype, y.dtype)
    if name == "subtract" and rt == BOOL:
        with pytest.raises(TypeError):
            f(fnp.asarray(x), fnp.asarray(y))
        return
    with np.errstate(all="ignore"):
        expected = np_f(x.astype(rt), y.astype(rt))
    assert expected.shape == result_shape
    check_both(f, (x, y), expected)


@settings(max_examples=30)
@given(st.sampled_from(COMPARE), broadcast_operands())
def test_comparison_broadcasting(op, operands):
    _, f, np_f = op
    (x, y), _ = operands
    rt = promote(x.dtype, y.dtype)
    with np.errstate(all="ignore"):
        expected = np_f(x.astype(rt), y.astype(rt))
    check_both(f, (x, y), expected)


@settings(max_examples=30)
@given(broadcast_operands(BROADCAST_SHAPES3))
def test_where_broadcasting(operands):
    (c, x, y), result_shape = operands
    rt = promote(x.dtype, y.dtype)
    expected = np.where(c, x.astype(rt), y.astype(rt))
    assert expected.shape == result_shape
    check_both(fnp.where, (c, x, y), expected)


@settings(max_examples=20)
@given(BROADCAST_SHAPES, st.sampled_from(DTYPES), st.data())
def test_broadcast_to_and_broadcast_arrays(bshapes, dtype, data):
    a_shape, b_shape = bshapes.input_shapes
    target = bshapes.result_shape
    x = data.draw(arrays(dtype, a_shape))
    y = data.draw(arrays(dtype, b_shape))
    check_both(lambda a: fnp.broadcast_to(a, target), (x,), np.broadcast_to(x, target))
    ex, ey = np.broadcast_arrays(x, y)
    for got in (fnp.broadcast_arrays(fnp.asarray(x), fnp.asarray(y)),
                fusionjit.jit(fnp.broadcast_arrays)(x, y)):
        assert len(got) == 2
        assert_close(got[0], ex)
        assert_close(got[1], ey)


def _scalar_result_dtype(array_dtype, scalar):
    """JAX: Python int/float scalars are weak (take the array's kind if it is at least as
    high), Python bools are strong bools."""
    if isinstance(scalar, bool):
        return promote(array_dtype, BOOL)
    if isinstance(scalar, int):
        return I32 if array_dtype == BOOL else array_dtype
    return F32


@settings(max_examples=30)
@given(st.sampled_from(ARITH[:2] + ARITH[3:] + COMPARE), st.sampled_from(DTYPES),
       hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5), st.data())
def test_binary_with_weak_python_scalars(op, dtype, shape, data):
    _, f, np_f = op
    x = data.draw(arrays(dtype, shape, wide=False))
    scalar = data.draw(st.one_of(st.booleans(), st.integers(-1000, 1000),
                                 st.floats(-1000, 1000, width=32, allow_subnormal=False)))
    rt = _scalar_result_dtype(x.dtype, scalar)
    scalar_first = data.draw(st.booleans())
    xa, sa = x.astype(rt), np.asarray(scalar).astype(rt)
    with np.errstate(all="ignore"):
        expected = np.asarray(np_f(sa, xa) if scalar_first else np_f(xa, sa))
    if expected.dtype != BOOL:
        expected = expected.astype(rt)
    fn = (lambda a: f(scalar, a)) if scalar_first else (lambda a: f(a, scalar))
    check_both(fn, (x,), expected)
    # The scalar may also be a (weakly typed) argument of the jitted function.
    g = (lambda s, a: f(s, a)) if scalar_first else (lambda s, a: f(a, s))
    assert_close(fusionjit.jit(g)(scalar, x), expected)


# --- reductions ----------------------------------------------------------------------

# Exactly representable values whose sums and products (over <= 120 elements) are exact in
# float32, so any summation order gives NumPy's result.
EXACT_FLOATS = st.sampled_from([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0])
REDUCTION_SHAPES = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5).filter(
    lambda s: int(np.prod(s)) <= 120)


@st.composite
def axes_for(draw, ndim, allow_tuple=True):
    if ndim == 0:
        return draw(st.sampled_from([None, ()] if allow_tuple else [None]))
    kinds = ["none", "int", "tuple"] if allow_tuple else ["none", "int"]
    kind = draw(st.sampled_from(kinds))
    if kind == "none":
        return None
    if kind == "int":
        return draw(st.integers(-ndim, ndim - 1))
    axes = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
    negate = draw(st.lists(st.booleans(), min_size=len(axes), max_size=len(axes)))
    return tuple(a - ndim if n else a for a, n in zip(axes, negate))


def _sum_dtype(d):
    return I32 if d == BOOL else d


REDUCTIONS = [
    ("sum", fnp.sum, lambda x, **kw: np.sum(x, dtype=_sum_dtype(x.dtype), **kw)),
    ("prod", fnp.prod, lambda x, **kw: np.prod(x, dtype=_sum_dtype(x.dtype), **kw)),
    ("max", fnp.max, np.max),
    ("min", fnp.min, np.min),
    ("mean", fnp.mean, lambda x, **kw: np.mean(x.astype(np.float64), **kw).astype(np.float32)),
    ("any", fnp.any, np.any),
    ("all", fnp.all, np.all),
    ("argmax", fnp.argmax, lambda x, **kw: np.argmax(x, **kw).astype(np.int32)),
    ("argmin", fnp.argmin, lambda x, **kw: np.argmin(x, **kw).astype(np.int32)),
]


@settings(max_examples=30)
@given(st.sampled_from(REDUCTIONS), st.sampled_from(DTYPES), REDUCTION_SHAPES, st.booleans(),
       st.data())
def test_reductions_over_random_axes(red, dtype, shape, keepdims, data):
    name, f, np_f = red
    elems = EXACT_FLOATS if dtype == F32 else elements(dtype, wide=name != "mean")
    x = data.draw(hnp.arrays(dtype, shape, elements=elems))
    axis = data.draw(axes_for(len(shape), allow_tuple=not name.startswith("arg")))

    def fn(a):
        return f(a, axis=axis, keepdims=keepdims)

    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # mean of an empty slice
            expected = np.asarray(np_f(x, axis=axis, keepdims=keepdims))
    except ValueError:  # max/min/argmax/argmin of an empty selection
        with pytest.raises(ValueError):
            fn(fnp.asarray(x))
        with pytest.raises(ValueError):
            fusionjit.jit(fn)(x)
        return
    check_both(fn, (x,), expected)


@settings(max_examples=20)
@given(st.sampled_from(DTYPES), REDUCTION_SHAPES, st.data())
def test_reduction_methods_match_functions(dtype, shape, data):
    x = data.draw(arrays(dtype, shape, wide=False))
    axis = data.draw(axes_for(len(shape)))
    check_both(lambda a: a.any(axis=axis), (x,), np.any(x, axis=axis))
    check_both(lambda a: a.sum(axis=axis, keepdims=True), (x,),
               np.sum(x, axis=axis, keepdims=True, dtype=_sum_dtype(x.dtype)))


# --- reshape / transpose round trips -------------------------------------------------

SHAPES = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)


def _prime_factors(n):
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


@st.composite
def reshape_targets(draw, shape):
    """A random shape with the same number of elements, possibly with one -1."""
    size = int(np.prod(shape))
    rank = draw(st.integers(0 if size == 1 else 1, 4))
    if size == 0:
        dims = [draw(st.integers(0, 5)) for _ in range(rank)]
        dims[draw(st.integers(0, rank - 1))] = 0
        return tuple(dims)
    dims = [1] * rank
    for p in _prime_factors(size):
        dims[draw(st.integers(0, rank - 1))] *= p
    if rank and draw(st.booleans()):
        dims[draw(st.integers(0, rank - 1))] = -1
    return tuple(dims)


@settings(max_examples=30)
@given(st.sampled_from(DTYPES), SHAPES, st.data())
def test_reshape_round_trip(dtype, shape, data):
    x = data.draw(arrays(dtype, shape, wide=False))
    target = data.draw(reshape_targets(shape))
    expected = np.reshape(x, target)
    check_both(lambda a: fnp.reshape(a, target), (x,), expected)
    check_both(lambda a: fnp.reshape(fnp.reshape(a, target), shape), (x,), x)
    check_both(lambda a: a.reshape(target).ravel(), (x,), x.ravel())


@settings(max_examples=30)
@given(st.sampled_from(DTYPES), SHAPES, st.data())
def test_transpose_round_trip(dtype, shape, data):
    x = data.draw(arrays(dtype, shape, wide=False))
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    inverse = tuple(np.argsort(perm))
    check_both(lambda a: fnp.transpose(a, perm), (x,), np.transpose(x, perm))
    check_both(lambda a: fnp.transpose(fnp.transpose(a, perm), inverse), (x,), x)
    check_both(lambda a: fnp.transpose(a).T, (x,), x)
    # A transpose followed by a reshape reads the transposed (not the original) order.
    check_both(lambda a: fnp.ravel(fnp.transpose(a, perm)), (x,), np.transpose(x, perm).ravel())


@settings(max_examples=25)
@given(st.sampled_from(DTYPES), SHAPES, st.data())
def test_moveaxis_swapaxes_expand_squeeze(dtype, shape, data):
    x = data.draw(arrays(dtype, shape, wide=False))
    ndim = len(shape)
    if ndim:
        i = data.draw(st.integers(-ndim, ndim - 1))
        j = data.draw(st.integers(-ndim, ndim - 1))
        check_both(lambda a: fnp.swapaxes(a, i, j), (x,), np.swapaxes(x, i, j))
        check_both(lambda a: fnp.moveaxis(a, i, j), (x,), np.moveaxis(x, i, j))
    k = data.draw(st.integers(-(ndim + 1), ndim))
    expanded = np.expand_dims(x, k)
    check_both(lambda a: fnp.expand_dims(a, k), (x,), expanded)
    check_both(lambda a: fnp.squeeze(fnp.expand_dims(a, k), axis=k), (x,), x)
    check_both(fnp.squeeze, (x,), np.squeeze(x))


# --- random basic indices ------------------------------------------------------------

@settings(max_examples=30)
@given(st.sampled_from(DTYPES),
       hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=6), st.data())
def test_random_basic_indices(dtype, shape, data):
    x = data.draw(arrays(dtype, shape, wide=False))
    index = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    check_both(lambda a: a[index], (x,), x[index])


@st.composite
def slices_for(draw, n):
    bound = st.one_of(st.none(), st.integers(-2 * n - 2, 2 * n + 2))
    step = draw(st.one_of(st.none(), st.integers(-4, 4).filter(lambda s: s != 0)))
    return slice(draw(bound), draw(bound), step)


@settings(max_examples=30)
@given(st.sampled_from(DTYPES), hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=7),
       st.data())
def test_random_slices_with_steps(dtype, shape, data):
    x = data.draw(arrays(dtype, shape, wide=False))
    index = tuple(data.draw(slices_for(n)) for n in shape)
    check_both(lambda a: a[index], (x,), x[index])


@settings(max_examples=25)
@given(st.sampled_from(DTYPES), hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5),
       st.data())
def test_traced_integer_index(dtype, shape, data):
    x = data.draw(arrays(dtype, shape, wide=False))
    axis = data.draw(st.integers(0, len(shape) - 1))
    i = data.draw(st.integers(-shape[axis], shape[axis] - 1))
    prefix = (slice(None),) * axis
    rest = data.draw(st.sampled_from([(), (Ellipsis,), (None,)]))
    f = fusionjit.jit(lambda a, k: a[prefix + (k,) + rest])
    expected = x[prefix + (i,) + rest]
    assert_close(f(x, i), expected)
    assert_close(f(x, np.int32(i)), expected)
    assert_close(fnp.asarray(x)[prefix + (i,) + rest], expected)


# --- random advanced (integer array) indices -----------------------------------------

@settings(max_examples=40, deadline=None)
@given(st.sampled_from(DTYPES + [np.dtype(np.float16), np.dtype(np.uint8)]),
       hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6), st.data())
def test_random_advanced_indices(dtype, shape, data):
    # Integer arrays (negative entries included, broadcast together) on a random subset of
    # the axes, slices on the others: NumPy's placement of the advanced dimensions (first
    # when the indexed axes are not adjacent). Traced under jit, a gather per array.
    x = data.draw(arrays(dtype, shape, wide=False)) if dtype in DTYPES else \
        data.draw(arrays(I32, shape, wide=False)).astype(dtype)
    axes = sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1)))
    arrays_ = data.draw(hnp.integer_array_indices(
        tuple(shape[a] for a in axes), result_shape=hnp.array_shapes(min_dims=0, max_dims=2,
                                                                     max_side=4)))
    slices = {a: data.draw(slices_for(shape[a])) for a in range(len(shape)) if a not in axes}

    def index(parts):
        it = iter(parts)
        return tuple(next(it) if a in axes else slices[a] for a in range(len(shape)))

    arrays_ = [a.astype(np.int32) for a in arrays_]
    expected = x[index(arrays_)]
    assert_close(fusionjit.jit(lambda a, *ix: a[index(ix)])(x, *arrays_), expected)
    assert_close(fnp.asarray(x)[index(arrays_)], expected)
