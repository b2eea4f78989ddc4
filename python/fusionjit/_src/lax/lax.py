"""lax: the primitives, each with its shape rule and lowering rule right below it.

Like jax.lax, these ops are strict: operands have equal dtypes and shapes (rank-0 operands
and Python scalars broadcast). ``fusionjit.numpy`` adds NumPy's promotion and broadcasting
on top.
"""

from __future__ import annotations

import builtins
from typing import Sequence

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src import errors
from fusionjit._src.lowering import register

Primitive = core.Primitive
ShapedArray = core.ShapedArray


def _fail(message: str, exc_type=TypeError):
    raise exc_type(errors.located(message, errors.user_location()))


def _weak_all(*avals) -> bool:
    return builtins.all(a.weak_type for a in avals)


# --- converting inputs ----------------------------------------------------------------

def _is_value(x) -> bool:
    return isinstance(x, core.Tracer) or core.is_concrete_array(x)


def asarray_operand(x, like_dtype=None):
    """A lax operand: tracers and Arrays as they are; scalars and NumPy arrays become
    arrays (a Python scalar takes ``like_dtype`` if given, staying weak)."""
    if _is_value(x):
        return x
    if isinstance(x, np.ndarray):
        from fusionjit._src import array as array_mod
        return array_mod.from_numpy(x)
    info = dt.scalar_info(x)
    if info is None:
        _fail(f"expected an array or a number, got {type(x).__name__}")
    d, weak = info
    if like_dtype is not None and weak:
        d = np.dtype(like_dtype)
    if isinstance(x, int) and not isinstance(x, bool) and dt.is_int(d):
        dt.check_int_range(x, d, errors.user_location())
    return _scalar_array(x, d, weak)


def _scalar_array(x, d, weak):
    from fusionjit._src import array as array_mod
    return array_mod.scalar(x, d, weak)


def _binary_operands(name: str, x, y):
    """Converts scalar operands to the other's dtype and broadcasts rank-0 operands."""
    x_val, y_val = _is_value(x) or isinstance(x, np.ndarray), _is_value(y) or isinstance(y, np.ndarray)
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

_FLOAT = "float"
_INT = "int"
_BOOL = "bool"
_NUM = (_INT, _FLOAT)


def _kind(d) -> str:
    if dt.is_bool(d):
        return _BOOL
    return _FLOAT if dt.is_float(d) else _INT


def _check_kinds(name: str, d, allowed: Sequence[str]):
    if _kind(d) not in allowed:
        names = {_FLOAT: "floating-point", _INT: "integer", _BOOL: "boolean"}
        want = " or ".join(names[k] for k in allowed)
        _fail(f"{name} does not accept {d} values; it needs {want} inputs")


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
round_p = _unary("round", "round-nearest-even", (_FLOAT,))
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


def round(x, rounding_method=1):  # noqa: A001
    """Rounds to the nearest integer, halves to even (JAX's ``ROUND_TO_NEAREST_EVEN``)."""
    return round_p.bind(asarray_operand(x))


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
    """``on_true`` where ``pred`` else ``on_false``, elementwise (rank-0 operands broadcast)."""
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
        _fail(f"fma needs equal shapes and dtypes, got {a.str_short()}, {b.str_short()}, {c.str_short()}")
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
    if x.dtype.itemsize != np.dtype(new_dtype).itemsize or dt.is_bool(x.dtype) or dt.is_bool(new_dtype):
        _fail(f"bitcast_convert_type from {x.dtype} to {new_dtype} needs equal bit widths")
    return ShapedArray(x.shape, new_dtype, False)


@register(bitcast_convert_type_p)
def _bitcast_lower(ctx, avals_in, avals_out, x, *, new_dtype):
    return ctx.op("bitcast-convert", [x], dtype=new_dtype, dims=avals_in[0].shape)


def bitcast_convert_type(x, new_dtype):
    """Reinterprets the bits of each element as ``new_dtype`` (same width)."""
    return bitcast_convert_type_p.bind(asarray_operand(x), new_dtype=dt.canonicalize(new_dtype))


# --- shapes ---------------------------------------------------------------------------

def _shape_tuple(shape, what: str) -> tuple:
    try:
        return tuple(int(operator_index(d)) for d in shape)
    except TypeError:
        _fail(f"{what} must be a tuple of integers, got {shape!r}")


def operator_index(d):
    import operator
    return operator.index(d)


broadcast_in_dim_p = Primitive("broadcast_in_dim")


@broadcast_in_dim_p.def_abstract_eval
def _broadcast_in_dim_abstract_eval(x, *, shape, broadcast_dimensions):
    if len(broadcast_dimensions) != x.ndim:
        _fail(f"broadcast_in_dim: {len(broadcast_dimensions)} broadcast_dimensions for an "
              f"operand of rank {x.ndim}")
    if list(broadcast_dimensions) != sorted(set(broadcast_dimensions)):
        _fail(f"broadcast_in_dim: broadcast_dimensions {broadcast_dimensions} must be increasing")
    for i, d in enumerate(broadcast_dimensions):
        if not 0 <= d < len(shape) or x.shape[i] not in (1, shape[d]):
            _fail(f"broadcast_in_dim: cannot broadcast {x.shape} to {shape} along "
                  f"{broadcast_dimensions}")
    return ShapedArray(shape, x.dtype, x.weak_type)


@register(broadcast_in_dim_p)
def _broadcast_in_dim_lower(ctx, avals_in, avals_out, x, *, shape, broadcast_dimensions):
    return ctx.op("broadcast", [x], dtype=avals_in[0].dtype, dims=shape,
                  dimensions=list(broadcast_dimensions))


def broadcast_in_dim(x, shape, broadcast_dimensions):
    """Broadcasts ``x`` to ``shape``; operand dim i becomes result dim broadcast_dimensions[i]."""
    x = asarray_operand(x)
    shape = _shape_tuple(shape, "shape")
    aval = core.get_aval(x)
    if aval.shape == shape and tuple(broadcast_dimensions) == tuple(range(len(shape))):
        return x
    return broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=tuple(broadcast_dimensions))


def broadcast(x, sizes):
    """Adds leading dimensions of the given sizes."""
    x = asarray_operand(x)
    aval = core.get_aval(x)
    sizes = _shape_tuple(sizes, "sizes")
    return broadcast_in_dim(x, sizes + aval.shape, tuple(range(len(sizes), len(sizes) + aval.ndim)))


reshape_p = Primitive("reshape")


@reshape_p.def_abstract_eval
def _reshape_abstract_eval(x, *, new_sizes):
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        _fail(f"cannot reshape an array of shape {x.shape} ({x.size} elements) into shape "
              f"{new_sizes}", ValueError)
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


@register(reshape_p)
def _reshape_lower(ctx, avals_in, avals_out, x, *, new_sizes):
    return ctx.op("reshape", [x], dtype=avals_in[0].dtype, dims=new_sizes)


def reshape(x, new_sizes):
    """Row-major reshape."""
    x = asarray_operand(x)
    new_sizes = _shape_tuple(new_sizes, "new_sizes")
    if core.get_aval(x).shape == new_sizes:
        return x
    return reshape_p.bind(x, new_sizes=new_sizes)


def squeeze(x, dimensions):
    x = asarray_operand(x)
    shape = core.get_aval(x).shape
    dims = {d % len(shape) if shape else d for d in dimensions}
    for d in dims:
        if not 0 <= d < len(shape) or shape[d] != 1:
            _fail(f"cannot squeeze dimension {d} of shape {shape}: its size is not 1", ValueError)
    return reshape(x, tuple(s for i, s in enumerate(shape) if i not in dims))


def expand_dims(x, dimensions):
    x = asarray_operand(x)
    shape = list(core.get_aval(x).shape)
    ndim = len(shape) + len(dimensions)
    for d in sorted(d % ndim for d in dimensions):
        shape.insert(d, 1)
    return reshape(x, tuple(shape))


transpose_p = Primitive("transpose")


@transpose_p.def_abstract_eval
def _transpose_abstract_eval(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        _fail(f"transpose permutation {permutation} is not a permutation of {x.ndim} axes",
              ValueError)
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


@register(transpose_p)
def _transpose_lower(ctx, avals_in, avals_out, x, *, permutation):
    return ctx.op("transpose", [x], dimensions=list(permutation))


def transpose(x, permutation):
    x = asarray_operand(x)
    permutation = tuple(int(p) for p in permutation)
    if permutation == tuple(range(len(permutation))):
        return x
    return transpose_p.bind(x, permutation=permutation)


slice_p = Primitive("slice")


@slice_p.def_abstract_eval
def _slice_abstract_eval(x, *, start_indices, limit_indices, strides):
    if not (len(start_indices) == len(limit_indices) == len(strides) == x.ndim):
        _fail(f"slice of a rank-{x.ndim} array needs {x.ndim} start, limit and stride values")
    shape = []
    for s, l, st, d in zip(start_indices, limit_indices, strides, x.shape):
        if not (0 <= s <= l <= d) or st < 1:
            _fail(f"slice [{s}:{l}:{st}] is out of bounds for a dimension of size {d}", IndexError)
        shape.append((l - s + st - 1) // st)
    return ShapedArray(shape, x.dtype, x.weak_type)


@register(slice_p)
def _slice_lower(ctx, avals_in, avals_out, x, *, start_indices, limit_indices, strides):
    return ctx.op("slice", [x], slice_starts=list(start_indices), slice_limits=list(limit_indices),
                  slice_strides=list(strides))


def slice(x, start_indices, limit_indices, strides=None):  # noqa: A001
    x = asarray_operand(x)
    start_indices = _shape_tuple(start_indices, "start_indices")
    limit_indices = _shape_tuple(limit_indices, "limit_indices")
    strides = (1,) * len(start_indices) if strides is None else _shape_tuple(strides, "strides")
    aval = core.get_aval(x)
    if start_indices == (0,) * aval.ndim and limit_indices == aval.shape and strides == (1,) * aval.ndim:
        return x
    return slice_p.bind(x, start_indices=start_indices, limit_indices=limit_indices, strides=strides)


def slice_in_dim(x, start_index, limit_index, stride=1, axis=0):
    x = asarray_operand(x)
    shape = core.get_aval(x).shape
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start_index, limit_index, stride
    return slice(x, starts, limits, strides)


rev_p = Primitive("rev")


@rev_p.def_abstract_eval
def _rev_abstract_eval(x, *, dimensions):
    if any(not 0 <= d < x.ndim for d in dimensions) or len(set(dimensions)) != len(dimensions):
        _fail(f"rev dimensions {dimensions} are invalid for rank {x.ndim}", ValueError)
    return x


@register(rev_p)
def _rev_lower(ctx, avals_in, avals_out, x, *, dimensions):
    return ctx.op("reverse", [x], dimensions=list(dimensions))


def rev(x, dimensions):
    """Reverses the order of elements along ``dimensions``."""
    dimensions = tuple(int(d) for d in dimensions)
    x = asarray_operand(x)
    return x if not dimensions else rev_p.bind(x, dimensions=dimensions)


concatenate_p = Primitive("concatenate")


@concatenate_p.def_abstract_eval
def _concatenate_abstract_eval(*xs, dimension):
    first = xs[0]
    if not 0 <= dimension < first.ndim:
        _fail(f"concatenate dimension {dimension} is out of range for rank {first.ndim}", ValueError)
    size = 0
    for x in xs:
        same = x.ndim == first.ndim and all(a == b for i, (a, b) in enumerate(zip(x.shape, first.shape))
                                           if i != dimension)
        if x.dtype != first.dtype or not same:
            _fail(f"concatenate operands {first.str_short()} and {x.str_short()} do not match "
                  f"outside dimension {dimension}")
        size += x.shape[dimension]
    shape = list(first.shape)
    shape[dimension] = size
    return ShapedArray(shape, first.dtype, _weak_all(*xs))


@register(concatenate_p)
def _concatenate_lower(ctx, avals_in, avals_out, *xs, dimension):
    return ctx.op("concatenate", list(xs), dimensions=[dimension])


def concatenate(operands, dimension):
    operands = [asarray_operand(x) for x in operands]
    if not operands:
        _fail("concatenate needs at least one array", ValueError)
    if len(operands) == 1:
        return operands[0]
    return concatenate_p.bind(*operands, dimension=int(dimension))


pad_p = Primitive("pad")


@pad_p.def_abstract_eval
def _pad_abstract_eval(x, padding_value, *, padding_config):
    if padding_value.shape != () or padding_value.dtype != x.dtype:
        _fail("pad: the padding value must be a scalar of the operand's dtype")
    if len(padding_config) != x.ndim:
        _fail(f"pad: padding_config has {len(padding_config)} entries for rank {x.ndim}")
    shape = []
    for (lo, hi, interior), d in zip(padding_config, x.shape):
        if interior < 0:
            _fail("pad: interior padding must be non-negative", ValueError)
        n = lo + hi + d + builtins.max(d - 1, 0) * interior
        if n < 0:
            _fail("pad: negative padding removes more than the dimension holds", ValueError)
        shape.append(n)
    return ShapedArray(shape, x.dtype, x.weak_type)


@register(pad_p)
def _pad_lower(ctx, avals_in, avals_out, x, padding_value, *, padding_config):
    return ctx.op("pad", [x, padding_value], padding=[tuple(p) for p in padding_config])


def pad(x, padding_value, padding_config):
    x = asarray_operand(x)
    padding_value = asarray_operand(padding_value, core.get_aval(x).dtype)
    config = tuple((int(lo), int(hi), int(i)) for lo, hi, i in padding_config)
    return pad_p.bind(x, padding_value, padding_config=config)


dynamic_slice_p = Primitive("dynamic_slice")


@dynamic_slice_p.def_abstract_eval
def _dynamic_slice_abstract_eval(x, *starts, slice_sizes):
    if len(starts) != x.ndim or len(slice_sizes) != x.ndim:
        _fail(f"dynamic_slice of a rank-{x.ndim} array needs {x.ndim} start indices and sizes")
    for s in starts:
        if s.shape != () or not dt.is_int(s.dtype):
            _fail("dynamic_slice start indices must be integer scalars")
    for size, d in zip(slice_sizes, x.shape):
        if not 0 <= size <= d:
            _fail(f"dynamic_slice size {size} does not fit a dimension of size {d}", IndexError)
    return ShapedArray(slice_sizes, x.dtype, x.weak_type)


@register(dynamic_slice_p)
def _dynamic_slice_lower(ctx, avals_in, avals_out, x, *starts, slice_sizes):
    return ctx.op("dynamic-slice", [x, *starts], dimensions=list(slice_sizes))


def dynamic_slice(x, start_indices, slice_sizes):
    """A slice at traced start indices, clamped so the slice stays in bounds (as XLA)."""
    x = asarray_operand(x)
    starts = [asarray_operand(s) for s in start_indices]
    return dynamic_slice_p.bind(x, *starts, slice_sizes=_shape_tuple(slice_sizes, "slice_sizes"))


dynamic_update_slice_p = Primitive("dynamic_update_slice")


@dynamic_update_slice_p.def_abstract_eval
def _dus_abstract_eval(x, update, *starts):
    if update.dtype != x.dtype or update.ndim != x.ndim or any(u > d for u, d in zip(update.shape, x.shape)):
        _fail(f"dynamic_update_slice: update {update.str_short()} does not fit {x.str_short()}")
    if len(starts) != x.ndim or any(s.shape != () or not dt.is_int(s.dtype) for s in starts):
        _fail(f"dynamic_update_slice needs {x.ndim} integer scalar start indices")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


@register(dynamic_update_slice_p)
def _dus_lower(ctx, avals_in, avals_out, x, update, *starts):
    return ctx.op("dynamic-update-slice", [x, update, *starts])


def dynamic_update_slice(x, update, start_indices):
    x = asarray_operand(x)
    update = asarray_operand(update, core.get_aval(x).dtype)
    return dynamic_update_slice_p.bind(x, update, *[asarray_operand(s) for s in start_indices])


iota_p = Primitive("iota")


@iota_p.def_abstract_eval
def _iota_abstract_eval(*, dtype, shape, dimension):
    if not 0 <= dimension < len(shape):
        _fail(f"iota dimension {dimension} is out of range for shape {shape}")
    _check_kinds("iota", dtype, _NUM)
    return ShapedArray(shape, dtype, False)


@register(iota_p)
def _iota_lower(ctx, avals_in, avals_out, *, dtype, shape, dimension):
    return ctx.op("iota", [], dtype=dtype, dims=shape, dimensions=[dimension])


def iota(dtype, size):
    """``[0, 1, ..., size-1]``."""
    return broadcasted_iota(dtype, (int(size),), 0)


def broadcasted_iota(dtype, shape, dimension):
    return iota_p.bind(dtype=dt.canonicalize(dtype), shape=_shape_tuple(shape, "shape"),
                       dimension=int(dimension))


# --- reductions -----------------------------------------------------------------------

def _reduce_primitive(name: str, opcode: str, kinds):
    prim = Primitive(name)

    @prim.def_abstract_eval
    def _abstract_eval(x, *, axes):
        _check_kinds(name, x.dtype, kinds)
        if any(not 0 <= a < x.ndim for a in axes) or len(set(axes)) != len(axes):
            _fail(f"{name}: axes {axes} are invalid for rank {x.ndim}", ValueError)
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return ShapedArray(shape, x.dtype, x.weak_type)

    @register(prim)
    def _lower(ctx, avals_in, avals_out, x, *, axes):
        d = avals_in[0].dtype
        init = ctx.scalar(_identity(name, d), d)
        return ctx.op("reduce", [x, init], called=[ctx.combiner(opcode, d)],
                      dimensions=sorted(axes))

    return prim


def _identity(name: str, d):
    d = np.dtype(d)
    if name == "reduce_sum" or name == "reduce_or":
        return 0
    if name == "reduce_prod" or name == "reduce_and":
        return 1
    if name == "reduce_max":
        if dt.is_bool(d):
            return False
        return -np.inf if dt.is_float(d) else np.iinfo(d).min
    if name == "reduce_min":
        if dt.is_bool(d):
            return True
        return np.inf if dt.is_float(d) else np.iinfo(d).max
    raise ValueError(name)


reduce_sum_p = _reduce_primitive("reduce_sum", "add", _NUM)
reduce_prod_p = _reduce_primitive("reduce_prod", "multiply", _NUM)
reduce_max_p = _reduce_primitive("reduce_max", "maximum", (_BOOL, _INT, _FLOAT))
reduce_min_p = _reduce_primitive("reduce_min", "minimum", (_BOOL, _INT, _FLOAT))
reduce_and_p = _reduce_primitive("reduce_and", "and", (_BOOL, _INT))
reduce_or_p = _reduce_primitive("reduce_or", "or", (_BOOL, _INT))


def _reducer(prim):
    def fn(x, axes):
        x = asarray_operand(x)
        return prim.bind(x, axes=tuple(sorted(int(a) for a in axes)))
    fn.__name__ = prim.name
    return fn


reduce_sum = _reducer(reduce_sum_p)
reduce_prod = _reducer(reduce_prod_p)
reduce_max = _reducer(reduce_max_p)
reduce_min = _reducer(reduce_min_p)
reduce_and = _reducer(reduce_and_p)
reduce_or = _reducer(reduce_or_p)


def _arg_reduce_primitive(name: str, opcode: str):
    prim = Primitive(name)

    @prim.def_abstract_eval
    def _abstract_eval(x, *, axis, index_dtype):
        if not 0 <= axis < x.ndim:
            _fail(f"{name}: axis {axis} is out of range for rank {x.ndim}", ValueError)
        if x.shape[axis] == 0:
            _fail(f"{name} of an empty dimension (axis {axis} of shape {x.shape})", ValueError)
        shape = tuple(d for i, d in enumerate(x.shape) if i != axis)
        return ShapedArray(shape, index_dtype, False)

    @register(prim)
    def _lower(ctx, avals_in, avals_out, x, *, axis, index_dtype):
        return ctx.op(opcode, [x], dtype=index_dtype, dims=avals_out[0].shape, dimensions=[axis])

    return prim


argmax_p = _arg_reduce_primitive("argmax", "argmax")
argmin_p = _arg_reduce_primitive("argmin", "argmin")


def argmax(x, axis, index_dtype):
    """Index of the first maximum along ``axis`` (the first NaN, if any, as NumPy)."""
    return argmax_p.bind(asarray_operand(x), axis=int(axis), index_dtype=dt.canonicalize(index_dtype))


def argmin(x, axis, index_dtype):
    return argmin_p.bind(asarray_operand(x), axis=int(axis), index_dtype=dt.canonicalize(index_dtype))


# --- contractions ---------------------------------------------------------------------

dot_general_p = Primitive("dot_general")


@dot_general_p.def_abstract_eval
def _dot_general_abstract_eval(lhs, rhs, *, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    if lhs.dtype != rhs.dtype:
        _fail(f"dot_general needs equal dtypes, got {lhs.dtype} and {rhs.dtype}")
    if len(lc) != len(rc) or len(lb) != len(rb):
        _fail("dot_general: dimension numbers do not pair up")
    for a, b in zip(lc, rc):
        if lhs.shape[a] != rhs.shape[b]:
            _fail(f"dot_general: contracting dimensions of {lhs.str_short()} and "
                  f"{rhs.str_short()} differ in size ({lhs.shape[a]} vs {rhs.shape[b]})")
    for a, b in zip(lb, rb):
        if lhs.shape[a] != rhs.shape[b]:
            _fail("dot_general: batch dimensions differ in size")
    batch = [lhs.shape[a] for a in lb]
    lfree = [d for i, d in enumerate(lhs.shape) if i not in lc and i not in lb]
    rfree = [d for i, d in enumerate(rhs.shape) if i not in rc and i not in rb]
    return ShapedArray(batch + lfree + rfree, lhs.dtype, _weak_all(lhs, rhs))


@register(dot_general_p)
def _dot_general_lower(ctx, avals_in, avals_out, lhs, rhs, *, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    return ctx.op("dot", [lhs, rhs], lhs_contracting=list(lc), rhs_contracting=list(rc),
                  lhs_batch=list(lb), rhs_batch=list(rb))


def dot_general(lhs, rhs, dimension_numbers):
    lhs, rhs = asarray_operand(lhs), asarray_operand(rhs)
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dn)


def dot(lhs, rhs):
    """Vector-vector, matrix-vector or matrix-matrix product (rank <= 2)."""
    lhs, rhs = asarray_operand(lhs), asarray_operand(rhs)
    la, ra = core.get_aval(lhs), core.get_aval(rhs)
    if la.ndim not in (1, 2) or ra.ndim not in (1, 2):
        _fail(f"lax.dot needs rank-1 or rank-2 operands, got {la.shape} and {ra.shape}")
    return dot_general(lhs, rhs, (((la.ndim - 1,), (0,)), ((), ())))


# --- integer powers -------------------------------------------------------------------

integer_pow_p = Primitive("integer_pow")


@integer_pow_p.def_abstract_eval
def _integer_pow_abstract_eval(x, *, y):
    _check_kinds("integer_pow", x.dtype, _NUM)
    if y < 0 and not dt.is_float(x.dtype):
        _fail(f"integer_pow: a negative exponent ({y}) needs a floating-point base, not {x.dtype}",
              ValueError)
    return x


@register(integer_pow_p)
def _integer_pow_lower(ctx, avals_in, avals_out, x, *, y):
    d = avals_in[0].dtype
    if y == 0:
        one = ctx.scalar(1, d)
        return ctx.op("broadcast", [one], dtype=d, dims=avals_in[0].shape, dimensions=[])
    # Square-and-multiply with the exponent known at trace time.
    result, base, n = None, x, abs_builtin(y)
    while n:
        if n & 1:
            result = base if result is None else ctx.op("multiply", [result, base])
        n >>= 1
        if n:
            base = ctx.op("multiply", [base, base])
    if y < 0:
        one = ctx.op("broadcast", [ctx.scalar(1, d)], dtype=d, dims=avals_in[0].shape, dimensions=[])
        result = ctx.op("divide", [one, result])
    return result


abs_builtin = builtins.abs


def integer_pow(x, y: int):
    """``x ** y`` for a Python int ``y`` (multiplications, no pow call)."""
    return integer_pow_p.bind(asarray_operand(x), y=int(y))


def full(shape, fill_value, dtype=None):
    shape = _shape_tuple(shape, "shape")
    value = asarray_operand(fill_value, dt.canonicalize(dtype) if dtype is not None else None)
    if dtype is not None:
        value = convert_element_type(value, dtype)
    return broadcast_in_dim(value, shape, ())
