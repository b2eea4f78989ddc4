"""More elementwise functions, composed of lax primitives: inverse and hyperbolic trig,
hypot, logaddexp, copysign, signbit, trunc, nextafter, isclose, nan_to_num, frexp/ldexp,
gcd/lcm and friends. Each takes care of accuracy over the whole range (tiny and huge
inputs, -0.0, infinities, NaN) and follows JAX's promotion and names."""

from __future__ import annotations

import numpy as np

from fusionjit._src import dtypes as dt
from fusionjit._src.autodiff import with_jvp
from fusionjit._src.eager import eager_jit
from fusionjit._src.lax import lax
from fusionjit._src.numpy import reductions
from fusionjit._src.numpy.util import (aval, check_arraylike, fail, one_program, promote_args,
                                       promote_args_inexact, promote_shapes, to_array)


def _float_args(name, *args):
    return promote_args_inexact(name, *args)


def _c(value, like):
    """``value`` as a rank-0 array of ``like``'s dtype and weak type."""
    a = aval(like)
    return to_array(np.array(value, a.dtype), a.dtype, a.weak_type)


def _full(value, like):
    return lax.broadcast_in_dim(_c(value, like), aval(like).shape, ())


def _uint_type(d):
    return {2: dt.uint16, 4: dt.uint32}.get(np.dtype(d).itemsize, dt.uint64)


def _sign_mask(d):
    return np.array(1 << (np.dtype(d).itemsize * 8 - 1), _uint_type(d))


def _copysign(x, y):
    """``|x|`` with the sign bit of ``y`` (same float dtype and shape)."""
    d = aval(x).dtype
    u = _uint_type(d)
    sign = to_array(_sign_mask(d))
    xb, yb = lax.bitcast_convert_type(x, u), lax.bitcast_convert_type(y, u)
    bits = lax.bitwise_or(lax.bitwise_and(xb, lax.bitwise_not(sign)), lax.bitwise_and(yb, sign))
    out = lax.bitcast_convert_type(bits, d)
    return lax.convert_element_type(out, d, aval(x).weak_type and aval(y).weak_type)


def _unary_float(name, impl, doc):
    @one_program
    def fn(x, /):
        check_arraylike(name, x)
        (x,) = _float_args(name, x)
        return impl(x)
    fn.__name__ = name
    fn.__doc__ = doc
    return fn


# --- inverse trigonometric functions -------------------------------------------------

def _tiny(x):
    """Below this |x|, asin(x), atan(x) (and sin, tan) are x in x's precision."""
    return lax.lt(lax.abs(x), _c(2.0 ** -12 if aval(x).dtype == dt.float32 else 2.0 ** -27, x))


def _arcsin(x):
    # atan2 keeps full relative accuracy near 0 and near +-1 (1 - x is exact there).
    out = lax.atan2(x, lax.sqrt(lax.mul(lax.sub(_c(1, x), x), lax.add(_c(1, x), x))))
    return lax.select(_tiny(x), x, out)


def _arccos(x):
    return lax.mul(_c(2, x), lax.atan2(lax.sqrt(lax.sub(_c(1, x), x)),
                                       lax.sqrt(lax.add(_c(1, x), x))))


def _arctan(x):
    return lax.select(_tiny(x), x, lax.atan2(x, _full(1, x)))


def _arcsin_derivative(x, ans):
    return lax.rsqrt(lax.mul(lax.sub(_c(1, x), x), lax.add(_c(1, x), x)))


arcsin = _unary_float("arcsin", with_jvp(_arcsin, _arcsin_derivative),
                      "Inverse sine, elementwise (NaN outside [-1, 1]).")
arccos = _unary_float("arccos", with_jvp(_arccos, lambda x, ans: lax.neg(
    _arcsin_derivative(x, ans))), "Inverse cosine, elementwise (NaN outside [-1, 1]).")
arctan = _unary_float("arctan", _arctan, "Inverse tangent, elementwise.")
asin, acos, atan = arcsin, arccos, arctan


@one_program
def atan2(x1, x2, /):
    """The array API's name for ``arctan2``."""
    from fusionjit._src.numpy.ufuncs import arctan2
    return arctan2(x1, x2)


# --- hyperbolic functions ------------------------------------------------------------

def _large_threshold(x):
    """Above this |x|, exp(-|x|) no longer changes sinh or cosh in x's precision."""
    return _c(20.0 if aval(x).dtype == dt.float32 else 40.0, x)


def _half_exp_squared(a):
    """exp(a) / 2 without overflowing before the result does."""
    h = lax.exp(lax.mul(a, _c(0.5, a)))
    return lax.mul(lax.mul(h, _c(0.5, a)), h)


def _sinh(x):
    a = lax.abs(x)
    e = lax.expm1(a)
    # sinh(a) = (e + e / (e + 1)) / 2 with e = expm1(a): no cancellation for small a.
    small = lax.mul(_c(0.5, a), lax.add(e, lax.div(e, lax.add(e, _c(1, a)))))
    r = lax.select(lax.lt(a, _large_threshold(a)), small, _half_exp_squared(a))
    return _copysign(r, x)


def _cosh(x):
    a = lax.abs(x)
    e = lax.exp(a)
    small = lax.add(lax.mul(_c(0.5, a), e), lax.div(_c(0.5, a), e))
    return lax.select(lax.lt(a, _large_threshold(a)), small, _half_exp_squared(a))


def _big(x):
    """1/sqrt(eps): above it, sqrt(1 + x^2) is x in x's precision."""
    return _c(2.0 ** 12 if aval(x).dtype == dt.float32 else 2.0 ** 27, x)


def _arcsinh(x):
    a = lax.abs(x)
    a2 = lax.mul(a, a)
    # log(a + sqrt(a^2 + 1)) = log1p(a + a^2 / (1 + sqrt(1 + a^2))), accurate near 0.
    small = lax.log1p(lax.add(a, lax.div(a2, lax.add(_c(1, a), lax.sqrt(lax.add(_c(1, a), a2))))))
    large = lax.add(lax.log(a), _c(np.log(2.0), a))
    return _copysign(lax.select(lax.gt(a, _big(a)), large, small), x)


def _arccosh(x):
    t = lax.sub(x, _c(1, x))     # exact near 1
    small = lax.log1p(lax.add(t, lax.sqrt(lax.mul(t, lax.add(t, _c(2, x))))))
    large = lax.add(lax.log(x), _c(np.log(2.0), x))
    r = lax.select(lax.gt(x, _big(x)), large, small)
    return lax.select(lax.lt(x, _c(1, x)), _full(np.nan, x), r)


def _arctanh(x):
    a = lax.abs(x)
    # atanh(a) = log1p(2a / (1 - a)) / 2: accurate near 0, and 1 - a is exact near 1.
    r = lax.mul(_c(0.5, a), lax.log1p(lax.div(lax.mul(_c(2, a), a), lax.sub(_c(1, a), a))))
    return _copysign(r, x)


def _arctanh_derivative(x, ans):
    return lax.div(lax.reciprocal(lax.add(_c(1, x), x)), lax.sub(_c(1, x), x))


# (Each partial is the other function, rule and all: second derivatives follow the rules.)
sinh = _unary_float("sinh", with_jvp(_sinh, lambda x, ans: cosh(x)),
                    "Hyperbolic sine, elementwise.")
cosh = _unary_float("cosh", with_jvp(_cosh, lambda x, ans: sinh(x)),
                    "Hyperbolic cosine, elementwise.")
arcsinh = _unary_float("arcsinh", with_jvp(_arcsinh, lambda x, ans: lax.rsqrt(
    lax.add(lax.mul(x, x), _c(1, x)))), "Inverse hyperbolic sine, elementwise.")
arccosh = _unary_float("arccosh", with_jvp(_arccosh, lambda x, ans: lax.rsqrt(
    lax.mul(lax.sub(x, _c(1, x)), lax.add(x, _c(1, x))))),
    "Inverse hyperbolic cosine (NaN below 1).")
arctanh = _unary_float("arctanh", with_jvp(_arctanh, _arctanh_derivative),
                       "Inverse hyperbolic tangent (NaN outside [-1, 1]).")
asinh, acosh, atanh = arcsinh, arccosh, arctanh


@one_program
def deg2rad(x, /):
    """Degrees to radians."""
    (x,) = _float_args("deg2rad", x)
    return lax.mul(x, _c(np.pi / 180, x))


@one_program
def rad2deg(x, /):
    """Radians to degrees."""
    (x,) = _float_args("rad2deg", x)
    return lax.mul(x, _c(180 / np.pi, x))


radians, degrees = deg2rad, rad2deg


@one_program
def sinc(x, /):
    """``sin(pi x) / (pi x)``, 1 at 0."""
    (x,) = _float_args("sinc", x)
    zero = lax.eq(x, _c(0, x))
    pix = lax.mul(_c(np.pi, x), lax.select(zero, _full(1, x), x))
    return lax.select(zero, _full(1, x), lax.div(lax.sin(pix), pix))


# --- two-argument functions ----------------------------------------------------------

@one_program
def hypot(x1, x2, /):
    """``sqrt(x1**2 + x2**2)`` without overflow or underflow; inf if either is infinite
    (even when the other is NaN), as IEEE 754. The slope by x1 is x1 / hypot: 1/2 at the
    origin and 0 where hypot is infinite, as JAX's."""
    x1, x2 = _float_args("hypot", x1, x2)
    return _hypot(x1, x2)


def _hypot_partial(x, out):
    slope = lax.div(x, lax.select(lax.eq(out, _c(0, out)), _full(1, out), out))
    slope = lax.select(lax.eq(out, _c(np.inf, out)), _full(0, out), slope)
    return lax.select(lax.eq(out, _c(0, out)), _full(0.5, out), slope)


def _hypot_value(x1, x2):
    a, b = lax.abs(x1), lax.abs(x2)
    hi, lo = lax.max(a, b), lax.min(a, b)
    exponent = 50 if aval(hi).dtype == dt.float32 else 450
    safe = lax.bitwise_and(lax.ge(hi, _c(2.0 ** -exponent, hi)),
                           lax.le(hi, _c(2.0 ** exponent, hi)))
    direct = lax.sqrt(lax.add(lax.mul(a, a), lax.mul(b, b)))
    ratio = lax.div(lo, lax.select(lax.eq(hi, _c(0, hi)), _full(1, hi), hi))
    scaled = lax.mul(hi, lax.sqrt(lax.add(_c(1, hi), lax.mul(ratio, ratio))))
    out = lax.select(safe, direct, scaled)
    inf = lax.bitwise_or(lax.eq(a, _c(np.inf, a)), lax.eq(b, _c(np.inf, b)))
    return lax.select(inf, _full(np.inf, out), out)


_hypot = with_jvp(_hypot_value, lambda x1, x2, out: _hypot_partial(x1, out),
                  lambda x1, x2, out: _hypot_partial(x2, out))


def _posinf_as_zero(x):
    return lax.select(lax.eq(x, _c(np.inf, x)), _full(0, x), x)


def _logaddexp_partials(exp):
    """The derivatives of logaddexp (exp: exp) or logaddexp2 (exp: 2**) by x1 and by x2:
    exp(x - out), +inf read as 0, as JAX (1/2 where x1 == x2, 1 and 0 where one is -inf)."""
    def by(k):
        return lambda x1, x2, ans: exp(lax.sub(_posinf_as_zero((x1, x2)[k]), _posinf_as_zero(ans)))
    return by(0), by(1)


@one_program
def logaddexp(x1, x2, /):
    """``log(exp(x1) + exp(x2))`` without overflow."""
    x1, x2 = _float_args("logaddexp", x1, x2)
    return _logaddexp(x1, x2)


def _logaddexp_value(x1, x2):
    delta = lax.sub(x1, x2)
    out = lax.add(lax.max(x1, x2), lax.log1p(lax.exp(lax.neg(lax.abs(delta)))))
    # delta is NaN for NaN inputs and for equal infinities; x1 + x2 is right for both.
    return lax.select(lax.ne(delta, delta), lax.add(x1, x2), out)


_logaddexp = with_jvp(_logaddexp_value, *_logaddexp_partials(lax.exp))


@one_program
def logaddexp2(x1, x2, /):
    """``log2(2**x1 + 2**x2)`` without overflow."""
    x1, x2 = _float_args("logaddexp2", x1, x2)
    return _logaddexp2(x1, x2)


def _logaddexp2_value(x1, x2):
    delta = lax.sub(x1, x2)
    ln2 = _c(np.log(2.0), delta)
    tail = lax.div(lax.log1p(exp2_accurate(lax.neg(lax.abs(delta)))), ln2)
    return lax.select(lax.ne(delta, delta), lax.add(x1, x2), lax.add(lax.max(x1, x2), tail))


_logaddexp2 = with_jvp(_logaddexp2_value, *_logaddexp_partials(lambda v: exp2_accurate(v)))


def _copysign_derivative(x1, x2, ans):
    """JAX's, of where(signbit(x2), -|x1|, |x1|): |x1|'s is 1 at 0."""
    one = _full(1, x1)
    outward = lax.select(lax.ge(x1, _c(0, x1)), one, lax.neg(one))
    return lax.select(signbit(x2), lax.neg(outward), outward)


_copysign_differentiable = with_jvp(_copysign, _copysign_derivative, None)


@one_program
def copysign(x1, x2, /):
    """The magnitude of ``x1`` with the sign bit of ``x2`` (-0.0 and NaN signs count)."""
    x1, x2 = _float_args("copysign", x1, x2)
    return _copysign_differentiable(x1, x2)


@one_program
def signbit(x, /):
    """True where the sign bit is set (also for -0.0 and negative NaNs)."""
    check_arraylike("signbit", x)
    x = to_array(x)
    d = aval(x).dtype
    if dt.is_bool(d):
        return lax.full(aval(x).shape, False, dt.bool_)
    if not dt.is_float(d):
        return lax.lt(x, to_array(0, d))
    bits = lax.bitcast_convert_type(x, _uint_type(d))
    sign = lax.bitwise_and(bits, to_array(_sign_mask(d)))
    return lax.ne(sign, to_array(np.zeros((), _uint_type(d))))


@one_program
def nextafter(x1, x2, /):
    """The next representable value after ``x1`` towards ``x2`` (subnormals included)."""
    x1, x2 = _float_args("nextafter", x1, x2)
    d = aval(x1).dtype
    u = _uint_type(d)
    bits = lax.bitcast_convert_type(x1, u)
    one = to_array(np.ones((), u))
    away = lax.eq(lax.gt(x2, x1), lax.gt(x1, _c(0, x1)))    # away from zero
    stepped = lax.select(away, lax.add(bits, one), lax.sub(bits, one))
    tiny = lax.bitwise_or(lax.bitwise_and(lax.bitcast_convert_type(x2, u), to_array(_sign_mask(d))),
                          one)                              # +-smallest subnormal
    stepped = lax.select(lax.eq(x1, _c(0, x1)), tiny, stepped)
    out = lax.bitcast_convert_type(stepped, d)
    out = lax.select(lax.eq(x1, x2), x2, out)
    nan = lax.bitwise_or(lax.ne(x1, x1), lax.ne(x2, x2))
    return lax.convert_element_type(lax.select(nan, lax.add(x1, x2), out), d, aval(x1).weak_type)


@one_program
def fmax(x1, x2, /):
    """Elementwise maximum that ignores NaN (NaN only where both are NaN): x1 where x1 > x2
    or x2 is NaN, else x2, as JAX (ties, -0.0 against 0.0 included, and their slopes)."""
    x1, x2 = promote_args("fmax", x1, x2)
    if not dt.is_float(aval(x1).dtype):
        return lax.max(x1, x2)
    return lax.select(lax.bitwise_or(lax.gt(x1, x2), lax.ne(x2, x2)), x1, x2)


@one_program
def fmin(x1, x2, /):
    """Elementwise minimum that ignores NaN (NaN only where both are NaN): x1 where x1 < x2
    or x2 is NaN, else x2, as JAX."""
    x1, x2 = promote_args("fmin", x1, x2)
    if not dt.is_float(aval(x1).dtype):
        return lax.min(x1, x2)
    return lax.select(lax.bitwise_or(lax.lt(x1, x2), lax.ne(x2, x2)), x1, x2)


@one_program
def fmod(x1, x2, /):
    """C's fmod: the remainder with the sign of ``x1`` (integers: 0 where ``x2`` is 0)."""
    x1, x2 = promote_args("fmod", x1, x2)
    d = aval(x1).dtype
    if dt.is_bool(d):
        fail("fmod() is not supported for booleans")
    if dt.is_int(d):
        x2 = lax.select(lax.eq(x2, _c(0, x2)), _full(1, x2), x2)
    return lax.rem(x1, x2)


@one_program
def heaviside(x1, x2, /):
    """0 where ``x1 < 0``, 1 where ``x1 > 0``, ``x2`` where ``x1 == 0``, NaN where ``x1`` is
    NaN (as NumPy and ``jnp.heaviside``)."""
    x1, x2 = _float_args("heaviside", x1, x2)
    out = lax.select(lax.lt(x1, _c(0, x1)), _full(0, x2),
                     lax.select(lax.gt(x1, _c(0, x1)), _full(1, x2), x2))
    return lax.select(lax.ne(x1, x1), x1, out)


@one_program
def float_power(x1, x2, /):
    """``x1 ** x2`` in floating point (JAX: the promoted float type, not always float64)."""
    x1, x2 = _float_args("float_power", x1, x2)
    return lax.pow(x1, x2)


def _cbrt(x):
    a = lax.abs(x)
    r = lax.pow(a, _c(1.0 / 3.0, a))
    # One Newton step, r += (a / r^2 - r) / 3, fixes the rounding of 1/3 in the exponent.
    refined = lax.add(r, lax.div(lax.sub(lax.div(a, lax.mul(r, r)), r), _c(3, r)))
    special = lax.bitwise_or(lax.eq(r, _c(0, r)), lax.bitwise_not(lax.is_finite(r)))
    return _copysign(lax.select(special, r, refined), x)


_cbrt_differentiable = with_jvp(_cbrt, lambda x, ans: lax.div(_c(1 / 3, x), lax.mul(ans, ans)))


@one_program
def cbrt(x, /):
    """The real cube root (negative for negative ``x``)."""
    (x,) = _float_args("cbrt", x)
    return _cbrt_differentiable(x)


# --- rounding, classification --------------------------------------------------------

@one_program
def trunc(x, /):
    """Rounds toward zero (integers and booleans are returned unchanged, as JAX)."""
    check_arraylike("trunc", x)
    x = to_array(x)
    if not dt.is_float(aval(x).dtype):
        return x
    return lax.select(lax.lt(x, _c(0, x)), lax.ceil(x), lax.floor(x))


fix = trunc


@one_program
def rint(x, /):
    """Rounds to the nearest integer, halves to even; integers become floats (as JAX)."""
    (x,) = _float_args("rint", x)
    return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)


def _fraction(x):
    frac = lax.select(lax.is_finite(x), lax.sub(x, trunc(x)), lax.select(lax.ne(x, x), x,
                                                                          _full(0, x)))
    return _copysign(frac, x)


_fraction_differentiable = with_jvp(_fraction, lambda x, ans: _full(1, x))


def modf(x, /):
    """(fractional part, integral part), both with the sign of ``x``."""
    (x,) = _float_args("modf", x)
    return _fraction_differentiable(x), trunc(x)


@one_program
def fabs(x, /):
    """Absolute value as a float."""
    (x,) = _float_args("fabs", x)
    return lax.abs(x)


def _inf_test(name, sign):
    def fn(x, /):
        check_arraylike(name, x)
        x = to_array(x)
        if not dt.is_float(aval(x).dtype):
            return lax.full(aval(x).shape, False, dt.bool_)
        return lax.eq(x, _c(sign * np.inf, x))
    fn.__name__ = name
    fn.__doc__ = f"True where ``x`` is {'+' if sign > 0 else '-'}inf."
    return fn


isposinf = _inf_test("isposinf", 1)
isneginf = _inf_test("isneginf", -1)


@eager_jit("equal_nan")
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False):
    """``|a - b| <= atol + rtol * |b|`` elementwise; equal infinities are close; NaNs are
    close to each other only with ``equal_nan``. Integers compare exactly, as in JAX."""
    a, b = promote_args("isclose", a, b)
    d = aval(a).dtype
    if not dt.is_float(d):
        return lax.eq(a, b)
    rtol, atol = to_array(rtol, d, True), to_array(atol, d, True)
    close = lax.le(lax.abs(lax.sub(a, b)), lax.add(atol, lax.mul(rtol, lax.abs(b))))
    inf_a, inf_b = lax.eq(lax.abs(a), _c(np.inf, a)), lax.eq(lax.abs(b), _c(np.inf, b))
    any_inf = lax.bitwise_or(inf_a, inf_b)
    same_inf = lax.bitwise_and(lax.bitwise_and(inf_a, inf_b), lax.eq(a, b))
    close = lax.bitwise_or(lax.bitwise_and(close, lax.bitwise_not(any_inf)), same_inf)
    if equal_nan:
        close = lax.bitwise_or(close, lax.bitwise_and(lax.ne(a, a), lax.ne(b, b)))
    return close


@eager_jit("equal_nan")
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False):
    """Whether every element of ``a`` is close to ``b`` (a boolean array scalar)."""
    return reductions.all(isclose(a, b, rtol, atol, equal_nan))


@eager_jit("copy")
def nan_to_num(x, copy: bool = True, nan=0.0, posinf=None, neginf=None):
    """Replaces NaN by ``nan`` and infinities by ``posinf``/``neginf`` (default: the
    largest finite values); integers and booleans are returned unchanged."""
    check_arraylike("nan_to_num", x)
    x = to_array(x)
    d = aval(x).dtype
    if not dt.is_float(d):
        return x
    info = dt.finfo(d)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf

    def fill(value):
        return promote_shapes(to_array(value, d, aval(x).weak_type), x)[0]

    out = lax.select(lax.ne(x, x), fill(nan), x)
    out = lax.select(lax.eq(out, _c(np.inf, out)), fill(posinf), out)
    return lax.select(lax.eq(out, _c(-np.inf, out)), fill(neginf), out)


# --- exponent and mantissa -----------------------------------------------------------

def _float_layout(d):
    """(unsigned type, mantissa bits, exponent bias) of a float dtype."""
    info = dt.finfo(d)
    return _uint_type(d), info.nmant, info.maxexp - 1


def _exact_power_of_two(k, d):
    """2.0**k for integer arrays ``k`` in [min subnormal, max] (0 below, inf above)."""
    u, mant, bias = _float_layout(d)
    k_int = aval(k).dtype
    lowest = -bias - mant + 1
    k = lax.clamp(to_array(lowest - 1, k_int), k, to_array(bias + 1, k_int))
    normal_bits = lax.shift_left(lax.convert_element_type(lax.add(k, to_array(bias, k_int)), u),
                                 to_array(np.array(mant, u)))
    sub_shift = lax.convert_element_type(lax.sub(k, to_array(lowest, k_int)), u)
    sub_bits = lax.shift_left(to_array(np.ones((), u)), sub_shift)
    bits = lax.select(lax.ge(k, to_array(1 - bias, k_int)), normal_bits, sub_bits)
    out = lax.bitcast_convert_type(bits, d)
    out = lax.select(lax.lt(k, to_array(lowest, k_int)), lax.full(aval(k).shape, 0, d), out)
    return lax.select(lax.gt(k, to_array(bias, k_int)), lax.full(aval(k).shape, np.inf, d), out)


def exp2_accurate(x):
    """2**x as 2**floor(x) (exact) times exp(frac * log 2): the rounding of x * log(2) would
    cost |x| ulps."""
    d = aval(x).dtype
    limit = 4 * (dt.finfo(d).maxexp + dt.finfo(d).nmant)
    clamped = lax.clamp(_c(-limit, x), x, _c(limit, x))
    whole = lax.floor(clamped)
    frac = lax.exp(lax.mul(lax.sub(clamped, whole), _c(np.log(2.0), x)))
    scale = _exact_power_of_two(lax.convert_element_type(whole, dt.int32), d)
    out = lax.mul(frac, lax.convert_element_type(scale, d, aval(x).weak_type))
    return lax.select(lax.ne(x, x), x, out)


def frexp(x, /):
    """(mantissa in [0.5, 1) with x's sign, int32 exponent) with ``x = m * 2**e``; zeros,
    infinities and NaN give (x, 0). Subnormals are normalised. The mantissa's derivative
    is 2**-e."""
    (x,) = _float_args("frexp", x)
    return _mantissa(x), _frexp(x)[1]


def _frexp(x):
    d = aval(x).dtype
    u, mant, bias = _float_layout(d)
    subnormal = lax.lt(lax.abs(x), _c(dt.finfo(d).smallest_normal, x))
    scaled = lax.select(subnormal, lax.mul(x, _c(2.0 ** (mant + 1), x)), x)
    bits = lax.bitcast_convert_type(scaled, u)
    biased = lax.bitwise_and(lax.shift_right_logical(bits, to_array(np.array(mant, u))),
                             to_array(np.array(2 * bias + 1, u)))
    e = lax.sub(lax.convert_element_type(biased, dt.int32), to_array(np.int32(bias - 1)))
    e = lax.select(subnormal, lax.sub(e, to_array(np.int32(mant + 1))), e)
    # The mantissa: the same sign and fraction bits with the exponent of 0.5.
    keep = to_array(np.array(~((2 * bias + 1) << mant) & ((1 << (8 * np.dtype(d).itemsize)) - 1),
                             u))
    half_exp = to_array(np.array((bias - 1) << mant, u))
    m = lax.bitcast_convert_type(lax.bitwise_or(lax.bitwise_and(bits, keep), half_exp), d)
    special = lax.bitwise_or(lax.eq(x, _c(0, x)), lax.bitwise_not(lax.is_finite(x)))
    return (lax.select(special, x, m),
            lax.select(special, lax.full(aval(x).shape, 0, dt.int32), e))


_mantissa = with_jvp(lambda x: _frexp(x)[0], lambda x, ans: _exact_power_of_two(
    lax.neg(_frexp(x)[1]), aval(x).dtype))


@one_program
def ldexp(x1, x2, /):
    """``x1 * 2**x2`` rounded once (``x2`` integer), with overflow to inf and gradual
    underflow."""
    check_arraylike("ldexp", x1, x2)
    x2 = to_array(x2)
    if not dt.is_int(aval(x2).dtype):
        fail(f"ldexp() needs an integer exponent, got {aval(x2).dtype}")
    (x1,) = _float_args("ldexp", x1)
    x1, x2 = promote_shapes(x1, x2)
    return _ldexp_differentiable(x1, x2)


def _ldexp(x1, x2):
    m, e = _frexp(x1)
    # (2m) * 2**t with t = e + x2 - 1 and 2m in [1, 2): first times 2**max(t, emin), exact
    # (the product is normal or overflows), then times 2**min(t - emin, 0), which rounds
    # once, into the subnormals too.
    k_int = dt.int64 if dt.x64_enabled() else dt.int32
    t = lax.sub(lax.add(lax.convert_element_type(e, k_int), lax.convert_element_type(x2, k_int)),
                to_array(np.ones((), k_int)))
    d = aval(m).dtype
    emin = to_array(np.array(dt.finfo(d).minexp, k_int))
    high = _exact_power_of_two(lax.max(t, emin), d)
    low = _exact_power_of_two(lax.min(lax.sub(t, emin), to_array(np.zeros((), k_int))), d)
    out = lax.mul(lax.mul(lax.mul(m, _c(2, m)), high), low)
    special = lax.bitwise_or(lax.eq(x1, _c(0, x1)), lax.bitwise_not(lax.is_finite(x1)))
    return lax.select(special, x1, out)


# By x1: 2**x2 (0 or inf where it underflows or overflows).
_ldexp_differentiable = with_jvp(_ldexp, lambda x1, x2, ans: _ldexp(_full(1, x1), x2), None)


# --- integers --------------------------------------------------------------------------

def _gcd_loop(a, b):
    from fusionjit._src.lax.control_flow import while_loop

    def cond(state):
        return reductions.any(lax.ne(state[1], _c(0, state[1])))

    def body(state):
        x, y = state
        nonzero = lax.ne(y, _c(0, y))
        safe = lax.select(nonzero, y, _full(1, y))
        return lax.select(nonzero, y, x), lax.select(nonzero, lax.rem(x, safe), y)

    return while_loop(cond, body, (a, b))[0]


@one_program
def gcd(x1, x2, /):
    """The greatest common divisor of ``|x1|`` and ``|x2|`` (Euclid's algorithm in a loop)."""
    x1, x2 = promote_args("gcd", x1, x2)
    if not dt.is_int(aval(x1).dtype):
        fail(f"gcd() needs integer arguments, got {aval(x1).dtype}")
    return _gcd_loop(lax.abs(x1) if dt.is_signed(aval(x1).dtype) else x1,
                     lax.abs(x2) if dt.is_signed(aval(x2).dtype) else x2)


@one_program
def lcm(x1, x2, /):
    """The least common multiple of ``|x1|`` and ``|x2|`` (0 if either is 0)."""
    x1, x2 = promote_args("lcm", x1, x2)
    if not dt.is_int(aval(x1).dtype):
        fail(f"lcm() needs integer arguments, got {aval(x1).dtype}")
    if dt.is_signed(aval(x1).dtype):
        x1, x2 = lax.abs(x1), lax.abs(x2)
    g = gcd(x1, x2)
    zero = lax.eq(g, _c(0, g))
    out = lax.mul(lax.div(x1, lax.select(zero, _full(1, g), g)), x2)
    return lax.select(zero, _full(0, out), out)


@one_program
def bitwise_count(x, /):
    """The number of set bits of ``|x|`` (NumPy's and JAX's definition), as uint8 (as
    NumPy and JAX return it)."""
    check_arraylike("bitwise_count", x)
    x = to_array(x)
    d = aval(x).dtype
    if not dt.is_int(d):
        fail(f"bitwise_count() needs integer arguments, got {d}")
    counts = lax.population_count(lax.abs(x) if dt.is_signed(d) else x)
    return lax.convert_element_type(counts, np.dtype(np.uint8))


# --- complex-number functions on real arrays ------------------------------------------

def real(x, /):
    """The real part: ``x`` itself (fusionjit has no complex dtypes)."""
    check_arraylike("real", x)
    return to_array(x)


def imag(x, /):
    """The imaginary part: zeros like ``x`` (fusionjit has no complex dtypes)."""
    check_arraylike("imag", x)
    x = to_array(x)
    return lax.full(aval(x).shape, 0, aval(x).dtype)


def conj(x, /):
    """The complex conjugate: ``x`` itself (fusionjit has no complex dtypes)."""
    check_arraylike("conj", x)
    return to_array(x)


conjugate = conj


def angle(z, deg: bool = False):
    """The argument of ``z``: pi for negative values (and -0.0), else 0."""
    (z,) = _float_args("angle", z)
    out = lax.atan2(_full(0, z), z)
    return lax.mul(out, _c(180 / np.pi, out)) if deg else out


def iscomplex(x):
    check_arraylike("iscomplex", x)
    return lax.full(aval(to_array(x)).shape, False, dt.bool_)


def isreal(x):
    check_arraylike("isreal", x)
    return lax.full(aval(to_array(x)).shape, True, dt.bool_)


def iscomplexobj(x) -> bool:
    return False


def isrealobj(x) -> bool:
    return True
