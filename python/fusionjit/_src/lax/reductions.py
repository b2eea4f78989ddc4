"""lax primitives that combine elements: reductions, contractions and integer powers
(the namespace is ``lax.py``)."""

from __future__ import annotations

import builtins

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.lowering import register
from fusionjit._src.lax.common import (
    _BOOL, _FLOAT, _INT, _NUM, Primitive, ShapedArray, _check_kinds, _fail, _weak_all,
    asarray_operand)
from fusionjit._src.lax.elementwise import convert_element_type, ne
from fusionjit._src.lax.shapes import _shape_tuple, broadcast_in_dim


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
    return argmax_p.bind(asarray_operand(x), axis=int(axis),
                         index_dtype=dt.canonicalize(index_dtype))


def argmin(x, axis, index_dtype):
    return argmin_p.bind(asarray_operand(x), axis=int(axis),
                         index_dtype=dt.canonicalize(index_dtype))


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


def holds(src, d) -> bool:
    """Whether dtype ``d`` holds every value of ``src`` (bfloat16 included)."""
    if dt.is_float(d) and dt.is_float(src):
        return d.itemsize >= src.itemsize and (d.itemsize > src.itemsize or d == src)
    return not dt.is_bool(src) and np.can_cast(src, d, "safe")


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """``lax.dot_general``; with ``preferred_element_type`` the products are summed in that
    type where it holds the operands' values (int8 in int32, bfloat16 in float32), as JAX's,
    else computed in the operands' type and converted (``precision`` is accepted: sums are in
    the operands' precision)."""
    lhs, rhs = asarray_operand(lhs), asarray_operand(rhs)
    if preferred_element_type is not None:
        d = dt.canonicalize(preferred_element_type)
        lhs, rhs = (convert_element_type(x, d) if holds(core.get_aval(x).dtype, d) else x
                    for x in (lhs, rhs))
        out = dot_general(lhs, rhs, dimension_numbers)
        return out if core.get_aval(out).dtype == d else convert_element_type(out, d)
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    if dt.is_bool(core.get_aval(lhs).dtype) and dt.is_bool(core.get_aval(rhs).dtype):
        # As JAX: a product of booleans is whether any pair along the contraction is true
        # (counted in int32, then compared).
        counts = dot_general_p.bind(convert_element_type(lhs, np.int32),
                                    convert_element_type(rhs, np.int32), dimension_numbers=dn)
        return ne(counts, full(core.get_aval(counts).shape, 0, np.int32))
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dn)


def dot(lhs, rhs, precision=None, preferred_element_type=None):
    """Vector-vector, matrix-vector or matrix-matrix product (rank <= 2)."""
    lhs, rhs = asarray_operand(lhs), asarray_operand(rhs)
    la, ra = core.get_aval(lhs), core.get_aval(rhs)
    if la.ndim not in (1, 2) or ra.ndim not in (1, 2):
        _fail(f"lax.dot needs rank-1 or rank-2 operands, got {la.shape} and {ra.shape}")
    return dot_general(lhs, rhs, (((la.ndim - 1,), (0,)), ((), ())),
                       preferred_element_type=preferred_element_type)


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
        one = ctx.op("broadcast", [ctx.scalar(1, d)], dtype=d, dims=avals_in[0].shape,
                     dimensions=[])
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
