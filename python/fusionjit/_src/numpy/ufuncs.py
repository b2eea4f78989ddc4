"""Elementwise functions with NumPy's broadcasting and JAX's type promotion."""

from __future__ import annotations

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.lax import lax
from fusionjit._src.numpy.util import (as_one_program, aval, check_arraylike, fail, one_program,
                                       promote_args, promote_args_inexact, to_array)


def _binary(name: str, lax_fn, kinds=None):
    @one_program
    def fn(x1, x2, /):
        x1, x2 = promote_args(name, x1, x2)
        if kinds is not None:
            d = aval(x1).dtype
            if not kinds(d):
                need = "integer or boolean" if kinds is _int_or_bool else "numeric"
                fail(f"{name}() is not supported for dtype {d}; it needs {need} inputs")
        return lax_fn(x1, x2)
    fn.__name__ = name
    fn.__doc__ = f"NumPy's ``{name}``, elementwise with broadcasting."
    return fn


def _not_bool(d):
    return not dt.is_bool(d)


def _int_or_bool(d):
    return not dt.is_float(d)


add = _binary("add",
              lambda a, b: lax.bitwise_or(a, b) if dt.is_bool(aval(a).dtype) else lax.add(a, b))
subtract = _binary("subtract", lax.sub, _not_bool)
multiply = _binary(
    "multiply",
    lambda a, b: lax.bitwise_and(a, b) if dt.is_bool(aval(a).dtype) else lax.mul(a, b))
maximum = _binary("maximum", lax.max)
minimum = _binary("minimum", lax.min)
bitwise_and = _binary("bitwise_and", lax.bitwise_and, _int_or_bool)
bitwise_or = _binary("bitwise_or", lax.bitwise_or, _int_or_bool)
bitwise_xor = _binary("bitwise_xor", lax.bitwise_xor, _int_or_bool)
equal = _binary("equal", lax.eq)
not_equal = _binary("not_equal", lax.ne)
less = _binary("less", lax.lt)
less_equal = _binary("less_equal", lax.le)
greater = _binary("greater", lax.gt)
greater_equal = _binary("greater_equal", lax.ge)


def _shift(name, signed_fn):
    @one_program
    def fn(x1, x2, /):
        x1, x2 = promote_args(name, x1, x2)
        d = aval(x1).dtype
        if not dt.is_int(d):
            fail(f"{name}() needs integer arguments, got {d}")
        if name == "left_shift":
            return lax.shift_left(x1, x2)
        if dt.is_signed(d):
            return lax.shift_right_arithmetic(x1, x2)
        return lax.shift_right_logical(x1, x2)
    fn.__name__ = name
    return fn


left_shift = _shift("left_shift", None)
right_shift = _shift("right_shift", None)


@one_program
def arctan2(x1, x2, /):
    x1, x2 = promote_args_inexact("arctan2", x1, x2)
    return lax.atan2(x1, x2)


@one_program
def true_divide(x1, x2, /):
    x1, x2 = promote_args_inexact("true_divide", x1, x2)
    return lax.div(x1, x2)


divide = true_divide


def _sign_differs(a, b):
    zero_a = lax.lt(a, lax.full((), 0, aval(a).dtype))
    zero_b = lax.lt(b, lax.full((), 0, aval(b).dtype))
    return lax.ne(zero_a, zero_b)


@one_program
def floor_divide(x1, x2, /):
    x1, x2 = promote_args("floor_divide", x1, x2)
    d = aval(x1).dtype
    if dt.is_bool(d):
        fail("floor_divide() is not supported for booleans")
    if dt.is_int(d):
        q = lax.div(x1, x2)
        if not dt.is_signed(d):
            return q
        r = lax.rem(x1, x2)
        zero = lax.full(aval(r).shape, 0, d)
        # As JAX: the signs of the operands (the same as r's where r != 0, except for a
        # zero divisor, whose quotient is then JAX's too).
        adjust = lax.bitwise_and(lax.ne(r, zero), lax.ne(lax.sign(x1), lax.sign(x2)))
        return lax.select(adjust, lax.sub(q, lax.full(aval(q).shape, 1, d)), q)
    return _float_divmod(x1, x2)[0]


def _float_divmod(x1, x2):
    d = aval(x1).dtype
    shape = aval(x1).shape
    zero = lax.full(shape, 0, d)
    mod = lax.rem(x1, x2)
    # (x1 - mod) / x2, but x1 / x2 for a zero divisor: +-inf as NumPy and JAX, not NaN.
    div = lax.div(lax.select(lax.eq(x2, zero), x1, lax.sub(x1, mod)), x2)
    ind = lax.bitwise_and(lax.ne(mod, zero), _sign_differs(mod, x2))
    mod = lax.select(ind, lax.add(mod, x2), mod)
    div = lax.select(ind, lax.sub(div, lax.full(shape, 1, d)), div)
    return lax.round(div), mod


@one_program
def remainder(x1, x2, /):
    x1, x2 = promote_args("remainder", x1, x2)
    d = aval(x1).dtype
    if dt.is_bool(d):
        fail("remainder() is not supported for booleans")
    if dt.is_float(d):
        return _float_divmod(x1, x2)[1]
    zero = lax.full(aval(x2).shape, 0, d)
    # x % 0 is 0, as NumPy and JAX (XLA's remainder would give x).
    x2 = lax.select(lax.eq(x2, zero), lax.full(aval(x2).shape, 1, d), x2)
    r = lax.rem(x1, x2)
    if not dt.is_signed(d):
        return r
    zero = lax.full(aval(r).shape, 0, d)
    adjust = lax.bitwise_and(lax.ne(r, zero), _sign_differs(r, x2))
    return lax.select(adjust, lax.add(r, x2), r)


mod = remainder


def divmod(x1, x2, /):  # noqa: A001
    return floor_divide(x1, x2), remainder(x1, x2)


@one_program
def power(x1, x2, /):
    check_arraylike("power", x1, x2)
    # x ** n for a Python int n is a chain of multiplications, as in JAX.
    if isinstance(x2, int) and not isinstance(x2, bool) and not isinstance(x1, (int, float)):
        x1 = to_array(x1)
        if dt.is_bool(aval(x1).dtype):
            x1 = lax.convert_element_type(x1, dt.default_int(), aval(x1).weak_type)
        if x2 < 0 and not dt.is_float(aval(x1).dtype):
            fail("integers to negative integer powers are not allowed", ValueError)
        return lax.integer_pow(x1, x2)
    x1, x2 = promote_args("power", x1, x2)
    if dt.is_bool(aval(x1).dtype):
        x1 = lax.convert_element_type(x1, dt.default_int())
        x2 = lax.convert_element_type(x2, dt.default_int())
    return lax.pow(x1, x2)


def _unary_inexact(name, lax_fn):
    @one_program
    def fn(x, /):
        check_arraylike(name, x)
        (x,) = promote_args_inexact(name, x)
        return lax_fn(x)
    fn.__name__ = name
    fn.__doc__ = f"NumPy's ``{name}``, elementwise (integers are converted to float)."
    return fn


exp = _unary_inexact("exp", lax.exp)
expm1 = _unary_inexact("expm1", lax.expm1)
log = _unary_inexact("log", lax.log)
log1p = _unary_inexact("log1p", lax.log1p)
sqrt = _unary_inexact("sqrt", lax.sqrt)
sin = _unary_inexact("sin", lax.sin)
cos = _unary_inexact("cos", lax.cos)
tan = _unary_inexact("tan", lax.tan)
tanh = _unary_inexact("tanh", lax.tanh)


@one_program
def exp2(x, /):
    (x,) = promote_args_inexact("exp2", x)
    return lax.exp(lax.mul(x, to_array(np.log(2.0), aval(x).dtype, aval(x).weak_type)))


@one_program
def log2(x, /):
    (x,) = promote_args_inexact("log2", x)
    return lax.div(lax.log(x), to_array(np.log(2.0), aval(x).dtype, aval(x).weak_type))


@one_program
def log10(x, /):
    (x,) = promote_args_inexact("log10", x)
    return lax.div(lax.log(x), to_array(np.log(10.0), aval(x).dtype, aval(x).weak_type))


def _unary_same(name, lax_fn, allow_bool=False, int_identity=False):
    @one_program
    def fn(x, /):
        check_arraylike(name, x)
        x = to_array(x)
        d = aval(x).dtype
        if dt.is_bool(d) and not allow_bool:
            fail(f"{name}() is not supported for booleans")
        if int_identity and not dt.is_float(d):
            return x
        return lax_fn(x)
    fn.__name__ = name
    return fn


negative = _unary_same("negative", lax.neg)
absolute = _unary_same("absolute", lambda x: x if dt.is_bool(aval(x).dtype) else lax.abs(x),
                       allow_bool=True)
abs = absolute  # noqa: A001
sign = _unary_same("sign", lax.sign)
floor = _unary_same("floor", lax.floor, allow_bool=True, int_identity=True)
ceil = _unary_same("ceil", lax.ceil, allow_bool=True, int_identity=True)


@one_program
def positive(x, /):
    check_arraylike("positive", x)
    return to_array(x)


def round(a, decimals: int = 0):  # noqa: A001
    """Rounds half to even, as NumPy."""
    check_arraylike("round", a)
    a = to_array(a)
    d = aval(a).dtype
    if not dt.is_float(d):
        return a if decimals >= 0 or dt.is_bool(d) else _round_int(a, -decimals)
    even = lax.RoundingMethod.TO_NEAREST_EVEN
    if decimals == 0:
        return lax.round(a, even)
    factor = to_array(10.0 ** decimals, d, aval(a).weak_type)
    return lax.div(lax.round(lax.mul(a, factor), even), factor)


around = round


def _round_int(a, digits: int):
    """Integers rounded to a multiple of 10**digits, halves to even, as NumPy (JAX raises
    NotImplementedError; the integers were returned unchanged)."""
    d = aval(a).dtype
    if 10 ** digits > np.iinfo(d).max:
        return lax.full(aval(a).shape, 0, d)
    f = to_array(np.array(10 ** digits, d))
    q = floor_divide(a, f)
    r = lax.sub(a, lax.mul(q, f))  # in [0, f)
    half = to_array(np.array(10 ** digits // 2, d))
    odd = lax.ne(lax.rem(q, to_array(np.array(2, d))), to_array(np.array(0, d)))
    up = lax.bitwise_or(lax.gt(r, half), lax.bitwise_and(lax.eq(r, half), odd))
    return lax.mul(lax.add(q, lax.convert_element_type(up, d)), f)


@one_program
def square(x, /):
    check_arraylike("square", x)
    x = to_array(x)
    if dt.is_bool(aval(x).dtype):   # as JAX: booleans square as integers
        x = lax.convert_element_type(x, dt.default_int(), aval(x).weak_type)
    return lax.integer_pow(x, 2)


@one_program
def reciprocal(x, /):
    (x,) = promote_args_inexact("reciprocal", x)
    return lax.div(to_array(1, aval(x).dtype, aval(x).weak_type), x)


@one_program
def invert(x, /):
    check_arraylike("invert", x)
    x = to_array(x)
    if dt.is_float(aval(x).dtype):
        fail("invert() (~) needs integer or boolean arguments")
    return lax.bitwise_not(x)


bitwise_not = invert


def _truthy(x):
    x = to_array(x)
    if dt.is_bool(aval(x).dtype):
        return x
    return lax.ne(x, to_array(0, aval(x).dtype))


@one_program
def logical_and(x1, x2, /):
    x1, x2 = promote_args("logical_and", x1, x2)
    return lax.bitwise_and(_truthy(x1), _truthy(x2))


@one_program
def logical_or(x1, x2, /):
    x1, x2 = promote_args("logical_or", x1, x2)
    return lax.bitwise_or(_truthy(x1), _truthy(x2))


@one_program
def logical_xor(x1, x2, /):
    x1, x2 = promote_args("logical_xor", x1, x2)
    return lax.bitwise_xor(_truthy(x1), _truthy(x2))


@one_program
def logical_not(x, /):
    check_arraylike("logical_not", x)
    return lax.bitwise_not(_truthy(x))


@one_program
def isfinite(x, /):
    check_arraylike("isfinite", x)
    x = to_array(x)
    if not dt.is_float(aval(x).dtype):
        return lax.full(aval(x).shape, True, dt.bool_)
    return lax.is_finite(x)


@one_program
def isnan(x, /):
    check_arraylike("isnan", x)
    x = to_array(x)
    if not dt.is_float(aval(x).dtype):
        return lax.full(aval(x).shape, False, dt.bool_)
    return lax.ne(x, x)


@one_program
def isinf(x, /):
    check_arraylike("isinf", x)
    x = to_array(x)
    if not dt.is_float(aval(x).dtype):
        return lax.full(aval(x).shape, False, dt.bool_)
    return lax.eq(lax.abs(x), to_array(np.inf, aval(x).dtype))


def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """``x`` where ``condition`` else ``y``, with broadcasting and promotion; with the
    condition alone, ``nonzero(condition, size=, fill_value=)``, as JAX."""
    if x is None and y is None:
        from fusionjit._src.numpy.sorting import nonzero
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        fail("where() takes the condition alone, or the condition, x and y", ValueError)
    if size is not None or fill_value is not None:
        fail("where(): size and fill_value go with the condition alone", ValueError)
    out = as_one_program(_where3, condition, x, y)
    return _where3(condition, x, y) if out is None else out


def _where3(condition, x, y):
    from fusionjit._src import random as _random
    if _random.any_key(x, y):
        return _random.map_key_data(
            lambda a, b: where(lax.expand_dims(_truthy(condition), (-1,))
                               if getattr(condition, "ndim", 0) else condition, a, b), x, y)
    check_arraylike("where", condition, x, y)
    x, y = promote_args("where", x, y)
    cond = _truthy(condition)
    cond, x, y = promote_shapes_3(cond, x, y)
    return lax.select(cond, x, y)


def promote_shapes_3(a, b, c):
    from fusionjit._src.numpy.util import promote_shapes
    return promote_shapes(a, b, c)


def clip(a, a_min=None, a_max=None, /, *, min=None, max=None):  # noqa: A002
    """Limits values to [min, max]; either bound (or both: ``a`` itself) may be None."""
    a_min = a_min if min is None else min
    a_max = a_max if max is None else max
    check_arraylike("clip", a)
    if a_min is None and a_max is None:
        return to_array(a)
    if a_min is not None:
        a = maximum(a, a_min)
    if a_max is not None:
        a = minimum(a, a_max)
    return a


def isscalar(x) -> bool:
    """Python and NumPy scalars, and 0-d arrays (traced ones too), as JAX's."""
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return True
    return (isinstance(x, np.ndarray) or _is_value(x)) and len(x.shape) == 0


def _is_value(x) -> bool:
    return isinstance(x, core.Tracer) or core.is_concrete_array(x)
