"""``lax.reduce`` with any computation and any number of operands, ``reduce_xor`` and
``reduce_precision``: composed of the primitives (slices, the computation applied
elementwise, bit operations), so jit, vmap and grad see only those.

A reduction whose computation is a known monoid (``lax.add`` with init 0, ...) binds the
matching reduce primitive; any other is a balanced tree of the computation over the reduced
elements, adjacent pairs first (the left operand always the earlier elements, so an
associative computation need not commute), with the initial values combined in once, on the
left, as XLA's CPU loop does (a single element per output is taken as it is, as XLA
simplifies that case).
"""

from __future__ import annotations

import operator
from typing import Callable, Sequence

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.lax import elementwise as ew
from fusionjit._src.lax import reductions as red
from fusionjit._src.lax import shapes as sh
from fusionjit._src.lax.common import _fail, asarray_operand
from fusionjit._src.tree_util import tree_flatten, tree_unflatten

# computation -> (reducer, its identity as a function of the dtype)
_MONOIDS: dict = {
    ew.add: (red.reduce_sum, lambda d: 0),
    ew.mul: (red.reduce_prod, lambda d: 1),
    ew.max: (red.reduce_max, dt.lowest),
    ew.min: (red.reduce_min, dt.highest),
    ew.bitwise_and: (red.reduce_and, lambda d: True if dt.is_bool(d) else -1),
    ew.bitwise_or: (red.reduce_or, lambda d: 0),
}


def _identity_init(computation, init, d) -> bool:
    """Whether ``init`` is a concrete value equal to ``computation``'s identity for ``d``."""
    if isinstance(init, core.Tracer):
        return False
    try:
        value = np.asarray(init)
    except Exception:  # noqa: BLE001 - not concrete
        return False
    if value.shape != ():
        return False
    want = np.asarray(_MONOIDS[computation][1](d)).astype(d)
    return bool(value.astype(d) == want) or (dt.is_float(d) and value == want)


def _dims(dimensions, ndim: int, shape) -> tuple:
    try:
        dims = tuple(operator.index(a) for a in dimensions)
    except TypeError:
        _fail(f"lax.reduce: dimensions must be a sequence of ints, got {dimensions!r}")
    if any(not 0 <= a < ndim for a in dims) or len(set(dims)) != len(dims):
        _fail(f"lax.reduce: reduction axes {dims} are out of bounds or repeated for an operand "
              f"of shape {shape}", ValueError)
    return dims


def _trace_computation(computation: Callable, tree, avals: list, name: str = "lax.reduce"):
    """``computation`` traced on two pytrees of scalars of ``avals`` (structure ``tree``):
    its closed program and the constants it closes over, after checking that it returns a
    pytree of the same structure, shapes and dtypes (errors name the caller, ``name``)."""
    from fusionjit._src.lax.control_flow import _trace
    pair_tree = tree_flatten((tree_unflatten(tree, avals), tree_unflatten(tree, avals)))[1]
    program, consts, out_tree = _trace(computation, pair_tree, avals + avals,
                                       f"the {name} computation")
    if out_tree != tree:
        _fail(f"{name}: the computation must return a pytree of the operands' structure "
              f"{tree}, got {out_tree}", ValueError)
    for a, o in zip(avals, program.out_avals):
        if o.shape != () or o.dtype != a.dtype:
            _fail(f"{name}: the computation must return scalars of the operands' dtypes "
                  f"({', '.join(x.str_short() for x in avals)}), got "
                  f"{', '.join(x.str_short() for x in program.out_avals)}")
    return program, consts


def _elementwise(program, consts):
    """The traced scalar computation applied elementwise to two lists of 1-D arrays of one
    length (by batching its program along that axis)."""
    from fusionjit._src import batching

    def combine(xs: list, ys: list) -> list:
        size = core.get_aval(xs[0]).shape[0]
        args = list(consts) + xs + ys
        batched = [False] * len(consts) + [True] * (len(xs) + len(ys))
        outs, bats = batching.batch_program(program, args, batched, size)
        return [o if b else batching.broadcast_batch(o, size) for o, b in zip(outs, bats)]
    return combine


def _tree_reduce(combine, leaves: list, rows: int, n: int) -> list:
    """Reduces each of ``leaves`` (flat, ``rows`` runs of ``n`` elements) to ``rows``
    values: adjacent pairs combined, level by level."""
    while n > 1:
        half = n // 2
        mats = [sh.reshape(x, (rows, n)) for x in leaves]
        left = [sh.reshape(sh.slice(m, (0, 0), (rows, 2 * half), (1, 2)), (rows * half,))
                for m in mats]
        right = [sh.reshape(sh.slice(m, (0, 1), (rows, 2 * half), (1, 2)), (rows * half,))
                 for m in mats]
        pairs = [sh.reshape(p, (rows, half)) for p in combine(left, right)]
        if n % 2:
            pairs = [sh.concatenate([p, sh.slice(m, (0, n - 1), (rows, n))], 1)
                     for p, m in zip(pairs, mats)]
        n = half + n % 2
        leaves = [sh.reshape(p, (rows * n,)) for p in pairs]
    return leaves


def flat_reduction_args(what: str, operands, init_values, computation,
                        names: tuple[str, str] = ("operands", "init_values")):
    """The leaves of a reduction's ``operands`` and ``init_values`` (pytrees of one
    structure, at least one operand) and the operands' tree, ``computation`` checked
    callable: ``lax.reduce``'s and ``lax.reduce_window``'s arguments."""
    flat_ops, op_tree = tree_flatten(operands)
    flat_inits, init_tree = tree_flatten(init_values)
    if op_tree != init_tree:
        _fail(f"{what}: {names[0]} must have the same tree structure as {names[1]}: "
              f"{op_tree} vs. {init_tree}", ValueError)
    if not flat_ops:
        _fail(f"{what}: no operands to reduce", ValueError)
    if not callable(computation):
        _fail(f"{what}: computation must be callable, got {type(computation).__name__}")
    return flat_ops, flat_inits, op_tree


def reduce(operands, init_values, computation: Callable, dimensions: Sequence[int]):  # noqa: A001
    """``jax.lax.reduce``: reduces ``operands`` (an array or a pytree of arrays of one shape)
    over ``dimensions`` with ``computation``, a function of two pytrees of scalars shaped
    like ``operands`` returning one, starting from ``init_values`` (scalars, a pytree of
    ``operands``' structure). An argmax, for example, reduces (values, indices) with a
    function picking the pair with the larger value. A known monoid (``lax.add`` with init
    0, ``mul`` 1, ``max`` -inf, ``min`` +inf, ``bitwise_and``, ``bitwise_or``) binds the
    matching reduce primitive, as JAX's does."""
    flat_ops, flat_inits, op_tree = flat_reduction_args("lax.reduce", operands, init_values,
                                                        computation)
    flat_ops = [asarray_operand(x) for x in flat_ops]
    avals = [core.get_aval(x) for x in flat_ops]
    for a in avals[1:]:
        if a.shape != avals[0].shape:
            _fail(f"lax.reduce: all operands must have the same shape, got "
                  f"{', '.join(b.str_short() for b in avals)}", ValueError)
    inits = [asarray_operand(v, a.dtype) for v, a in zip(flat_inits, avals)]
    for v, a in zip(inits, avals):
        i = core.get_aval(v)
        if i.shape != ():
            _fail(f"lax.reduce: init values must be scalars, got {i.str_short()}", ValueError)
        if i.dtype != a.dtype:
            _fail(f"lax.reduce: operand dtypes must match the init values' dtypes, got "
                  f"operands={[str(b.dtype) for b in avals]} and init_values="
                  f"{[str(core.get_aval(w).dtype) for w in inits]}")
    shape = avals[0].shape
    dims = _dims(dimensions, len(shape), shape)
    if (len(flat_ops) == 1 and computation in _MONOIDS
            and _identity_init(computation, flat_inits[0], avals[0].dtype)):
        out = _MONOIDS[computation][0](flat_ops[0], dims)
        return tree_unflatten(op_tree, [out])
    scalar_avals = [core.ShapedArray((), a.dtype, a.weak_type) for a in avals]
    program, consts = _trace_computation(computation, op_tree, scalar_avals)
    combine = _elementwise(program, consts)
    kept = [i for i in range(len(shape)) if i not in dims]
    kept_shape = tuple(shape[i] for i in kept)
    rows = int(np.prod(kept_shape, dtype=np.int64))
    n = int(np.prod([shape[i] for i in dims], dtype=np.int64))
    if rows == 0 or n == 0:
        outs = [sh.broadcast_in_dim(v, kept_shape, ()) for v in inits]
        return tree_unflatten(op_tree, outs)
    leaves = [sh.reshape(sh.transpose(x, tuple(kept) + dims), (rows * n,)) for x in flat_ops]
    if n == 1:
        # One element per output is that element, init not combined in: XLA, which takes
        # the init value for an identity, simplifies such a reduce to a reshape (JAX's
        # results).
        return tree_unflatten(op_tree, [sh.reshape(x, kept_shape) for x in leaves])
    leaves = _tree_reduce(combine, leaves, rows, n)
    outs = combine([sh.broadcast_in_dim(v, (rows,), ()) for v in inits], leaves)
    return tree_unflatten(op_tree, [sh.reshape(o, kept_shape) for o in outs])


def reduce_xor(operand, axes: Sequence[int]):
    """``jax.lax.reduce_xor``: the bitwise exclusive or of the elements along ``axes``
    (booleans: whether an odd number are true)."""
    x = asarray_operand(operand)
    d = core.get_aval(x).dtype
    if not (dt.is_int(d) or dt.is_bool(d)):
        _fail(f"lax.reduce_xor does not accept dtype {d}: it needs integer or boolean inputs")
    return reduce(x, np.zeros((), d), ew.bitwise_xor, axes)


# --- reduce_precision -------------------------------------------------------------------

def _float_layout(d) -> tuple[int, int]:
    """(exponent bits, explicit mantissa bits) of float dtype ``d``."""
    info = dt.finfo(d)
    return int(info.nexp), int(info.nmant)


def _reduce_precision_bits(x, exponent_bits: int, mantissa_bits: int):
    """XLA's ReducePrecision: rounds ``x``'s mantissa to ``mantissa_bits`` (to nearest,
    ties to even) and its exponent range to that of ``exponent_bits`` (overflow to inf,
    underflow, denormals included, to zero), keeping its dtype; NaNs stay NaN."""
    a = core.get_aval(x)
    src_exp, src_mant = _float_layout(a.dtype)
    nbits = a.dtype.itemsize * 8
    u = np.dtype(f"uint{nbits}")

    def c(v):
        return asarray_operand(np.asarray(v, u))

    bits = ew.bitcast_convert_type(x, u)
    if mantissa_bits < src_mant:
        drop = src_mant - mantissa_bits
        last_bit = 1 << drop
        base_bias = (last_bit >> 1) - 1
        kept_last = ew.shift_right_logical(ew.bitwise_and(bits, c(last_bit)), c(drop))
        bits = ew.add(bits, ew.add(kept_last, c(base_bias)))
        bits = ew.bitwise_and(bits, c(~(last_bit - 1) & ((1 << nbits) - 1)))
    if exponent_bits < src_exp:
        sign_mask = 1 << (nbits - 1)
        exp_mask = ((1 << src_exp) - 1) << src_mant
        bias = (1 << (src_exp - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        max_exp, min_exp = bias + reduced_bias, bias - reduced_bias
        exponent = ew.bitwise_and(bits, c(exp_mask))
        overflows = ew.gt(exponent, c(max_exp << src_mant))
        underflows = ew.le(exponent, c(min_exp << src_mant))
        signed_zero = ew.bitwise_and(bits, c(sign_mask))
        signed_inf = ew.bitwise_or(signed_zero, c(exp_mask))
        bits = ew.select(overflows, signed_inf, ew.select(underflows, signed_zero, bits))
    out = ew.bitcast_convert_type(bits, a.dtype)
    # A NaN whose payload the rounding cleared (or carried into the sign) stays the NaN
    # it was.
    return ew.select(ew.ne(x, x), x, out)


def reduce_precision(operand, exponent_bits: int, mantissa_bits: int):
    """``jax.lax.reduce_precision``: each element rounded to the nearest value (ties to
    even) of a float format with ``exponent_bits`` exponent bits and ``mantissa_bits``
    mantissa bits, out-of-range values to +-inf and values below its smallest normal to
    +-0, computed in ``operand``'s dtype (bit for bit as XLA). Its derivative is the
    tangent reduced the same way, as JAX's."""
    try:
        e = operator.index(exponent_bits)
        m = operator.index(mantissa_bits)
    except TypeError:
        _fail(f"lax.reduce_precision: exponent_bits and mantissa_bits must be ints, got "
              f"{exponent_bits!r} and {mantissa_bits!r}")
    if e < 1:
        _fail(f"lax.reduce_precision: exponent_bits must be at least 1, got {e}", ValueError)
    if m < 0:
        _fail(f"lax.reduce_precision: mantissa_bits must be non-negative, got {m}",
              ValueError)
    x = asarray_operand(operand)
    d = core.get_aval(x).dtype
    if not dt.is_float(d):
        _fail(f"lax.reduce_precision does not accept dtype {d}: it needs a floating-point "
              f"operand")
    src_exp, src_mant = _float_layout(d)
    if e >= src_exp and m >= src_mant:
        return x
    return _rounded()(x, e, m)


_ROUNDED: list = [None]


def _rounded():
    """``_reduce_precision_bits`` whose derivative is the cotangent reduced the same way
    (JAX's transpose rule): made once, on first use (autodiff sits above lax)."""
    if _ROUNDED[0] is None:
        from fusionjit._src.autodiff import custom_vjp
        f = custom_vjp(_reduce_precision_bits, nondiff_argnums=(1, 2))
        f.defvjp(lambda v, e, m: (f(v, e, m), None),
                 lambda e, m, _, g: (reduce_precision(g, e, m),))
        _ROUNDED[0] = f
    return _ROUNDED[0]
