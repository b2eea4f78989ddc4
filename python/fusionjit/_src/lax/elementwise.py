"""lax primitives: elementwise ops and conversions, each with its shape rule and lowering
rule right below it (the namespace is ``lax.py``)."""

from __future__ import annotations

import enum

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.lowering import register
from fusionjit._src.lax.common import (
    _BOOL, _FLOAT, _INT, _NUM, Primitive, ShapedArray, _check_kinds, _fail, _is_value, _weak_all,
    asarray_operand)
from fusionjit._src.lax.shapes import broadcast_in_dim


def _binary_operands(name: str, x, y):
    """Converts scalar operands to the other's dtype and broadcasts rank-0 operands."""
    x_val = _is_value(x) or isinstance(x, np.ndarray)
    y_val = _is_value(y) or isinstance(y, np.ndarray)
    if x_val and not y_val:
        x = asarray_operand(x)
        y = asarray_operand(y, core.get_aval(x).dtype)
    elif y_val and not x_val:
        y = asarray_operand(y)
        x = asarray_operand(x, core.get_aval(y).dtype)
    else:
        x, y = asarray_operand(x), asarray_operand(y)
    ax, ay = core.get_aval(x), core.get_aval(y)
    if ax.dtype != ay.dtype:
        _fail(f"lax.{name} requires arguments to have the same dtypes, got "
              f"{ax.dtype} and {ay.dtype}; use fusionjit.numpy.{name} for NumPy's promotion "
              f"or convert with .astype")
    if ax.shape != ay.shape:
        if ax.shape == ():
            x = broadcast_in_dim(x, ay.shape, ())
        elif ay.shape == ():
            y = broadcast_in_dim(y, ax.shape, ())
        else:
            _fail(f"lax.{name} got incompatible shapes {ax.shape} and {ay.shape}; use "
                  f"fusionjit.numpy.{name} for NumPy broadcasting")
    return x, y


# --- elementwise primitives -----------------------------------------------------------

def _unary(name: str, opcode: str, kinds, out_dtype=None) -> Primitive:
    prim = Primitive(name)

    @prim.def_abstract_eval
    def _abstract_eval(x, **_):
        _check_kinds(name, x.dtype, kinds)
        if out_dtype is not None:
            return ShapedArray(x.shape, out_dtype, False)
        return x

    @register(prim)
    def _lower(ctx, avals_in, avals_out, x):
        return ctx.op(opcode, [x])

    return prim


def _binary(name: str, opcode: str, kinds, compare: str | None = None) -> Primitive:
    prim = Primitive(name)

    @prim.def_abstract_eval
    def _abstract_eval(x, y, **_):
        if x.dtype != y.dtype or x.shape != y.shape:
            _fail(f"{name} needs equal shapes and dtypes, got {x.str_short()} and {y.str_short()}")
        _check_kinds(name, x.dtype, kinds)
        if compare is not None:
            return ShapedArray(x.shape, dt.bool_, False)
        return ShapedArray(x.shape, x.dtype, _weak_all(x, y))

    @register(prim)
    def _lower(ctx, avals_in, avals_out, x, y):
        if compare is not None:
            return ctx.op("compare", [x, y], direction=compare)
        return ctx.op(opcode, [x, y])

    return prim


neg_p = _unary("neg", "negate", _NUM)
abs_p = _unary("abs", "abs", _NUM)
sign_p = _unary("sign", "sign", _NUM)
floor_p = _unary("floor", "floor", (_FLOAT,))
ceil_p = _unary("ceil", "ceil", (_FLOAT,))
round_p = Primitive("round")


class RoundingMethod(enum.IntEnum):
    """How ``lax.round`` rounds halves, as ``jax.lax.RoundingMethod``."""

    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


@round_p.def_abstract_eval
def _round_abstract_eval(x, *, rounding_method):
    _check_kinds("round", x.dtype, (_FLOAT,))
    return x


@register(round_p)
def _round_lower(ctx, avals_in, avals_out, x, *, rounding_method):
    opcode = ("round-nearest-even" if rounding_method == RoundingMethod.TO_NEAREST_EVEN
              else "round-nearest-afz")
    return ctx.op(opcode, [x])


exp_p = _unary("exp", "exponential", (_FLOAT,))
expm1_p = _unary("expm1", "exponential-minus-one", (_FLOAT,))
log_p = _unary("log", "log", (_FLOAT,))
log1p_p = _unary("log1p", "log-plus-one", (_FLOAT,))
sqrt_p = _unary("sqrt", "sqrt", (_FLOAT,))
rsqrt_p = _unary("rsqrt", "rsqrt", (_FLOAT,))
sin_p = _unary("sin", "sine", (_FLOAT,))
cos_p = _unary("cos", "cosine", (_FLOAT,))
tan_p = _unary("tan", "tan", (_FLOAT,))
tanh_p = _unary("tanh", "tanh", (_FLOAT,))
not_p = _unary("not", "not", (_BOOL, _INT))
is_finite_p = _unary("is_finite", "is-finite", (_FLOAT,), out_dtype=dt.bool_)
population_count_p = _unary("population_count", "popcnt", (_INT,))

add_p = _binary("add", "add", _NUM)
sub_p = _binary("sub", "subtract", _NUM)
mul_p = _binary("mul", "multiply", _NUM)
div_p = _binary("div", "divide", _NUM)
rem_p = _binary("rem", "remainder", _NUM)
pow_p = _binary("pow", "power", _NUM)
max_p = _binary("max", "maximum", (_BOOL, _INT, _FLOAT))
min_p = _binary("min", "minimum", (_BOOL, _INT, _FLOAT))
atan2_p = _binary("atan2", "atan2", (_FLOAT,))
and_p = _binary("and", "and", (_BOOL, _INT))
or_p = _binary("or", "or", (_BOOL, _INT))
xor_p = _binary("xor", "xor", (_BOOL, _INT))
shift_left_p = _binary("shift_left", "shift-left", (_INT,))
shift_right_logical_p = _binary("shift_right_logical", "shift-right-logical", (_INT,))
shift_right_arithmetic_p = _binary("shift_right_arithmetic", "shift-right-arithmetic", (_INT,))
eq_p = _binary("eq", "compare", (_BOOL, _INT, _FLOAT), compare="EQ")
ne_p = _binary("ne", "compare", (_BOOL, _INT, _FLOAT), compare="NE")
lt_p = _binary("lt", "compare", (_BOOL, _INT, _FLOAT), compare="LT")
le_p = _binary("le", "compare", (_BOOL, _INT, _FLOAT), compare="LE")
gt_p = _binary("gt", "compare", (_BOOL, _INT, _FLOAT), compare="GT")
ge_p = _binary("ge", "compare", (_BOOL, _INT, _FLOAT), compare="GE")


def _unary_fn(prim):
    def fn(x):
        return prim.bind(asarray_operand(x))
    fn.__name__ = prim.name
    fn.__doc__ = f"Elementwise {prim.name}."
    return fn


def _binary_fn(prim, name):
    def fn(x, y):
        x, y = _binary_operands(name, x, y)
        return prim.bind(x, y)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} (equal dtypes and shapes)."
    return fn


neg = _unary_fn(neg_p)
abs = _unary_fn(abs_p)  # noqa: A001 (jax.lax spelling)
sign = _unary_fn(sign_p)
floor = _unary_fn(floor_p)
ceil = _unary_fn(ceil_p)
exp = _unary_fn(exp_p)
expm1 = _unary_fn(expm1_p)
log = _unary_fn(log_p)
log1p = _unary_fn(log1p_p)
sqrt = _unary_fn(sqrt_p)
rsqrt = _unary_fn(rsqrt_p)
sin = _unary_fn(sin_p)
cos = _unary_fn(cos_p)
tan = _unary_fn(tan_p)
tanh = _unary_fn(tanh_p)
bitwise_not = _unary_fn(not_p)
is_finite = _unary_fn(is_finite_p)
population_count = _unary_fn(population_count_p)

add = _binary_fn(add_p, "add")
sub = _binary_fn(sub_p, "sub")
mul = _binary_fn(mul_p, "mul")
div = _binary_fn(div_p, "div")
rem = _binary_fn(rem_p, "rem")
pow = _binary_fn(pow_p, "pow")  # noqa: A001
max = _binary_fn(max_p, "max")  # noqa: A001
min = _binary_fn(min_p, "min")  # noqa: A001
atan2 = _binary_fn(atan2_p, "atan2")
bitwise_and = _binary_fn(and_p, "bitwise_and")
bitwise_or = _binary_fn(or_p, "bitwise_or")
bitwise_xor = _binary_fn(xor_p, "bitwise_xor")
shift_left = _binary_fn(shift_left_p, "shift_left")
shift_right_logical = _binary_fn(shift_right_logical_p, "shift_right_logical")
shift_right_arithmetic = _binary_fn(shift_right_arithmetic_p, "shift_right_arithmetic")
eq = _binary_fn(eq_p, "eq")
ne = _binary_fn(ne_p, "ne")
lt = _binary_fn(lt_p, "lt")
le = _binary_fn(le_p, "le")
gt = _binary_fn(gt_p, "gt")
ge = _binary_fn(ge_p, "ge")


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):  # noqa: A001
    """Rounds to the nearest integer; halves away from zero by default, as ``jax.lax.round``
    (``RoundingMethod.TO_NEAREST_EVEN``, or 1, rounds them to even as NumPy does)."""
    try:
        method = RoundingMethod(rounding_method)
    except ValueError:
        _fail(f"lax.round: rounding_method must be a RoundingMethod (0: AWAY_FROM_ZERO, 1: "
              f"TO_NEAREST_EVEN), got {rounding_method!r}", ValueError)
    return round_p.bind(asarray_operand(x), rounding_method=method)


# select(pred, on_true, on_false)
select_p = Primitive("select")


@select_p.def_abstract_eval
def _select_abstract_eval(pred, on_true, on_false):
    if pred.dtype != dt.bool_:
        _fail(f"select needs a boolean predicate, got {pred.dtype}")
    if on_true.dtype != on_false.dtype or on_true.shape != on_false.shape:
        _fail(f"select needs branches of equal shape and dtype, got {on_true.str_short()} and "
              f"{on_false.str_short()}")
    if pred.shape != on_true.shape:
        _fail(f"select predicate shape {pred.shape} does not match the branches' {on_true.shape}")
    return ShapedArray(on_true.shape, on_true.dtype, _weak_all(on_true, on_false))


@register(select_p)
def _select_lower(ctx, avals_in, avals_out, pred, on_true, on_false):
    return ctx.op("select", [pred, on_true, on_false])


def select(pred, on_true, on_false):
    """``on_true`` where ``pred`` else ``on_false``, elementwise (rank-0 operands broadcast);
    typed key arrays too."""
    from fusionjit._src import random as _random
    if _random.any_key(on_true, on_false):
        pred = asarray_operand(pred)
        if core.get_aval(pred).shape:
            from fusionjit._src.lax.shapes import expand_dims
            pred = broadcast_in_dim(expand_dims(pred, (-1,)),
                                    (*core.get_aval(pred).shape, 2), tuple(range(
                                        core.get_aval(pred).ndim + 1)))
        return _random.map_key_data(lambda a, b: select(pred, a, b), on_true, on_false)
    on_true, on_false = _binary_operands("select", on_true, on_false)
    pred = asarray_operand(pred)
    pa, va = core.get_aval(pred), core.get_aval(on_true)
    if pa.shape == () and va.shape != ():
        pred = broadcast_in_dim(pred, va.shape, ())
    elif va.shape == () and pa.shape != ():
        on_true = broadcast_in_dim(on_true, pa.shape, ())
        on_false = broadcast_in_dim(on_false, pa.shape, ())
    return select_p.bind(pred, on_true, on_false)


clamp_p = Primitive("clamp")


@clamp_p.def_abstract_eval
def _clamp_abstract_eval(lo, x, hi):
    for b in (lo, hi):
        if b.dtype != x.dtype or (b.shape != () and b.shape != x.shape):
            _fail(f"clamp bounds {b.str_short()} do not match the operand {x.str_short()}")
    _check_kinds("clamp", x.dtype, _NUM)
    return x


@register(clamp_p)
def _clamp_lower(ctx, avals_in, avals_out, lo, x, hi):
    return ctx.op("clamp", [lo, x, hi])


def clamp(min, x, max):  # noqa: A002
    """``minimum(maximum(x, min), max)``; bounds may be scalars."""
    x = asarray_operand(x)
    d = core.get_aval(x).dtype
    return clamp_p.bind(asarray_operand(min, d), x, asarray_operand(max, d))


fma_p = Primitive("fma")


@fma_p.def_abstract_eval
def _fma_abstract_eval(a, b, c):
    if not (a.shape == b.shape == c.shape and a.dtype == b.dtype == c.dtype):
        _fail(f"fma needs equal shapes and dtypes, got {a.str_short()}, {b.str_short()}, "
              f"{c.str_short()}")
    _check_kinds("fma", a.dtype, (_FLOAT,))
    return ShapedArray(a.shape, a.dtype, a.weak_type and b.weak_type and c.weak_type)


register(fma_p)(lambda ctx, avals_in, avals_out, a, b, c: ctx.op("fma", [a, b, c]))


def fma(a, b, c):
    """``a * b + c`` rounded once (an extension: XLA's backends contract to it)."""
    return fma_p.bind(asarray_operand(a), asarray_operand(b), asarray_operand(c))


# --- conversions ----------------------------------------------------------------------

convert_element_type_p = Primitive("convert_element_type")


@convert_element_type_p.def_abstract_eval
def _convert_abstract_eval(x, *, new_dtype, weak_type):
    return ShapedArray(x.shape, new_dtype, weak_type)


@register(convert_element_type_p)
def _convert_lower(ctx, avals_in, avals_out, x, *, new_dtype, weak_type):
    if avals_in[0].dtype == new_dtype:
        return x
    return ctx.op("convert", [x], dtype=new_dtype, dims=avals_in[0].shape)


def convert_element_type(x, new_dtype, weak_type: bool = False):
    """Converts to ``new_dtype`` (float -> int truncates toward zero and saturates; NaN -> 0)."""
    x = asarray_operand(x)
    new_dtype = dt.canonicalize(new_dtype)
    aval = core.get_aval(x)
    if aval.dtype == new_dtype and aval.weak_type == weak_type:
        return x
    return convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=bool(weak_type))


bitcast_convert_type_p = Primitive("bitcast_convert_type")


@bitcast_convert_type_p.def_abstract_eval
def _bitcast_abstract_eval(x, *, new_dtype):
    if (x.dtype.itemsize != np.dtype(new_dtype).itemsize or dt.is_bool(x.dtype)
            or dt.is_bool(new_dtype)):
        _fail(f"bitcast_convert_type from {x.dtype} to {new_dtype} needs equal bit widths")
    return ShapedArray(x.shape, new_dtype, False)


@register(bitcast_convert_type_p)
def _bitcast_lower(ctx, avals_in, avals_out, x, *, new_dtype):
    return ctx.op("bitcast-convert", [x], dtype=new_dtype, dims=avals_in[0].shape)


def bitcast_convert_type(x, new_dtype):
    """Reinterprets the bits of each element as ``new_dtype`` (same width)."""
    return bitcast_convert_type_p.bind(asarray_operand(x), new_dtype=dt.canonicalize(new_dtype))


def select_n(which, *cases):
    """``cases[which]`` elementwise, as ``jax.lax.select_n``: a boolean ``which`` picks
    between two cases (False: the first), an integer one among all of them."""
    if not cases:
        _fail("select_n needs at least one case", ValueError)
    cases = [asarray_operand(c) for c in cases]
    first = core.get_aval(cases[0])
    if any(core.get_aval(c).shape != first.shape or core.get_aval(c).dtype != first.dtype
           for c in cases):
        _fail("select_n: the cases must have equal shapes and dtypes, got "
              + ", ".join(core.get_aval(c).str_short() for c in cases))
    which = asarray_operand(which)
    w = core.get_aval(which)
    if w.shape not in ((), first.shape):
        _fail(f"select_n: which has shape {w.shape}; it must be a scalar or {first.shape}")
    if len(cases) == 1:
        return cases[0]
    if w.dtype == dt.bool_:
        if len(cases) != 2:
            _fail(f"select_n: a boolean which selects between 2 cases, got {len(cases)}")
        return select(which, cases[1], cases[0])
    if not dt.is_int(w.dtype):
        _fail(f"select_n: which must be boolean or integer, got {w.dtype}")
    out = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        out = select(eq(which, asarray_operand(np.array(k, w.dtype))), cases[k], out)
    return out


def square(x):
    """``x * x``."""
    x = asarray_operand(x)
    return mul(x, x)


def reciprocal(x):
    """``1 / x`` for floats."""
    x = asarray_operand(x)
    _check_kinds("reciprocal", core.get_aval(x).dtype, (_FLOAT,))
    return div(asarray_operand(np.array(1, core.get_aval(x).dtype)), x)


stop_gradient_p = Primitive("stop_gradient")


@stop_gradient_p.def_abstract_eval
def _stop_gradient_abstract_eval(x):
    return x


@register(stop_gradient_p)
def _stop_gradient_lower(ctx, avals_in, avals_out, x):
    return x  # the value itself: only fusionjit.grad sees the primitive


def stop_gradient(x):
    """``x`` (a pytree) with its leaves as arrays, through which ``fusionjit.grad`` passes
    no gradient (as ``jax.lax.stop_gradient``); compiled, it is the value itself."""
    from fusionjit._src import tree_util

    def stop(leaf):
        leaf = asarray_operand(leaf)
        if not dt.is_float(core.get_aval(leaf).dtype) or not isinstance(leaf, core.Tracer):
            return leaf
        return stop_gradient_p.bind(leaf)
    return tree_util.tree_map(stop, x)
