"""Control flow, as ``jax.lax``: scan, fori_loop, while_loop, cond, switch and map.

Each traces its functions into sub-programs once (values they close over become extra
operands: closure conversion), binds one primitive (scan, while, cond), and lowers to a
while loop or a conditional of the C++ IR. ``scan``'s ``unroll`` is a parameter of the
lowered loop: the traced program is the same for every factor, and the C++ compiler
unrolls. Outside ``jit`` each call runs compiled (once per signature), as in JAX.
"""

from __future__ import annotations

import builtins
import operator
from typing import Callable, Sequence

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.lax.common import ShapedArray, _fail
from fusionjit._src.lowering import (TOKEN_AVAL, has_effects, lower_eqns, lower_subcomputation,
                                     register)
from fusionjit._src.tree_util import tree_flatten, tree_map, tree_unflatten

# --- tracing sub-programs ---------------------------------------------------------------


def _avals_str(avals) -> str:
    return "(" + ", ".join(a.str_short() for a in avals) + ")"


def _trace(fun: Callable, args_tree, in_avals, name: str):
    """Traces ``fun(*args)`` for arguments of structure ``args_tree`` (a tuple of the
    positional arguments) and abstract values ``in_avals``; returns a closed program
    (inputs: its captured constants, then the arguments), those constants, and the output
    tree."""
    trace = core.new_trace(name)
    try:
        tracers = [trace.new_arg(a) for a in in_avals]
        out = fun(*tree_unflatten(args_tree, tracers))
        out_leaves, out_tree = tree_flatten(out)
        for leaf in out_leaves:
            try:
                core.get_aval(leaf)
            except TypeError:
                _fail(f"{name} returned a value of type {type(leaf).__name__}; it must return "
                      f"arrays, numbers or pytrees of them")
        program = trace.to_program(tracers, out_leaves, name)
    finally:
        core.end_trace(trace)
    consts = list(program.consts)
    closed = core.Program(program.constvars + program.invars, [], [], program.eqns,
                          program.outvars, name)
    return closed, consts, out_tree


def _leaf_avals(leaves):
    return [core.get_aval(x) for x in leaves]


def _strong(avals, outs):
    """``avals`` promoted where a weakly typed initial carry (a Python number: ``0``,
    ``0.0``) comes out of the body as another type: to the type of both, strongly typed
    (JAX's rule: ``fori_loop(0, n, lambda i, acc: acc + r[i], 0)`` with float ``r``
    carries a float)."""
    if len(avals) != len(outs):
        return list(avals)  # a structure error, reported by _check_carry
    out = []
    for a, o in zip(avals, outs):
        if a.weak_type and a.shape == o.shape and (a.dtype != o.dtype or not o.weak_type):
            joined = dt.promote([(a.dtype, True), (o.dtype, o.weak_type)])[0]
            a = a.update(dtype=joined, weak_type=False)
        out.append(a)
    return out


def _check_carry(what: str, in_tree, out_tree, in_avals, out_avals):
    if in_tree != out_tree:
        _fail(f"{what} must return a carry of the same structure as its input: it takes "
              f"{in_tree} but returns {out_tree}")
    for i, (a, b) in enumerate(zip(in_avals, out_avals)):
        if a.shape != b.shape or a.dtype != b.dtype:
            _fail(f"{what} changes carry component {i}: it goes in as {a.str_short()} but comes "
                  f"out as {b.str_short()}; a loop carry keeps its shape and dtype (convert "
                  f"with .astype, or fix the initial value)")


def _operands(leaves):
    """Loop and branch operands as arrays or tracers (Python numbers keep weak types)."""
    from fusionjit._src.lax.common import asarray_operand
    return [asarray_operand(x) for x in leaves]


def _run_compiled(api: Callable, fns: tuple, static: dict, args: tuple):
    """Outside any trace, ``api(*fns, *args, **static)`` runs as one compiled program,
    cached per (function, static parameters) and then per signature, as in JAX."""
    from fusionjit._src.api import Jitted
    from fusionjit._src.dispatch import LruCache
    key = (api.__name__, fns, tuple(sorted(static.items())))
    cache = _COMPILED[0]
    if cache is None:
        cache = _COMPILED[0] = LruCache()
    fn = cache.get(key)
    if fn is None:
        def run(*xs):
            return api(*fns, *xs, **static)
        run.__name__ = run.__qualname__ = api.__name__
        # Compiled even under disable_jit, like a primitive: run() calls ``api`` outside any
        # trace, which would come straight back here.
        fn = Jitted(run, _primitive=True)
        cache.put(key, fn)
    return fn(*args)


_COMPILED: list = [None]


def _outside_traces() -> bool:
    """Whether a call runs by itself, as one compiled program (``_run_compiled``): outside
    any trace. Within ``ensure_compile_time_eval`` under a trace the functions are traced
    and the primitive bound as under ``jit``, and ``bind`` decides: operands (or closed-over
    values) of the hidden trace record it there, concrete ones run it now. (Regression: such
    calls went to ``_run_compiled``, whose jitted function inlined traced operands and so
    came straight back, recursing without end.)"""
    return core.current_trace() is None and not core.in_compile_time_eval()


# --- scan ---------------------------------------------------------------------------------

scan_p = core.Primitive("scan", multiple_results=True)


@scan_p.def_abstract_eval
def _scan_abstract_eval(*avals, program, num_consts, num_carry, length, reverse, unroll):
    carry = program.out_avals[:num_carry]
    ys = program.out_avals[num_carry:]
    return list(carry) + [ShapedArray((length,) + y.shape, y.dtype, y.weak_type) for y in ys]


def _int_param(name: str, value, minimum: int, kinds: str = "an int", hint: str = "") -> int:
    """``value`` as a Python int of at least ``minimum``, or a located error naming
    ``name`` (a parameter of the user's call, such as "scan: length")."""
    try:
        n = operator.index(value)
    except TypeError:
        _fail(f"{name} must be {kinds}, got {type(value).__name__}")
    if n < minimum:
        _fail(f"{name} must be >= {minimum}{hint}, got {n}", ValueError)
    return n


def _unroll_factor(unroll, length: int) -> int:
    if isinstance(unroll, (bool, np.bool_)):
        return builtins.max(length, 1) if unroll else 1
    u = _int_param("scan: unroll", unroll, 0, "an int or a bool", " (0 or True unroll fully)")
    return builtins.max(length, 1) if u == 0 else u


def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1):
    """``jax.lax.scan``: loops ``carry, y = f(carry, x)`` over the leading axis of ``xs``
    (or ``length`` times with ``x = None``); returns the final carry and the stacked ys."""
    if not callable(f):
        _fail(f"scan: f must be callable, got {type(f).__name__}")
    if _outside_traces():
        return _run_compiled(scan, (f,), dict(length=length, reverse=bool(reverse),
                                              unroll=unroll), (init, xs))
    init_leaves, init_tree = tree_flatten(init)
    xs_leaves, xs_tree = tree_flatten(xs)
    init_leaves, xs_leaves = _operands(init_leaves), _operands(xs_leaves)
    xs_avals = _leaf_avals(xs_leaves)
    lengths = {a.shape[0] if a.shape else None for a in xs_avals}
    if None in lengths:
        _fail("scan: every leaf of xs must have a leading axis to scan over; got "
              f"{_avals_str(xs_avals)}")
    if length is not None:
        length = _int_param("scan: length", length, 0)
        if lengths and lengths != {length}:
            _fail(f"scan: length={length} but xs have leading axes {sorted(lengths)}",
                  ValueError)
    elif len(lengths) > 1:
        _fail(f"scan: the leaves of xs have different leading axes {sorted(lengths)}; they must "
              f"all have the same length", ValueError)
    elif not lengths:
        _fail("scan: give xs or length (there is nothing to scan over)", ValueError)
    else:
        (length,) = lengths
    factor = _unroll_factor(unroll, length)
    x_avals = [ShapedArray(a.shape[1:], a.dtype, a.weak_type) for a in xs_avals]
    carry_avals = _leaf_avals(init_leaves)

    def body(*flat):
        carry = tree_unflatten(init_tree, list(flat[:len(carry_avals)]))
        x = tree_unflatten(xs_tree, list(flat[len(carry_avals):])) if xs is not None else None
        out = f(carry, x)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            _fail("scan: f must return a pair (carry, y)")
        return tuple(out)

    flat_tree = tree_flatten(tuple(range(len(carry_avals) + len(x_avals))))[1]
    for _ in range(3):
        program, consts, out_tree = _trace(body, flat_tree, carry_avals + x_avals, "scan body")
        carry_out_tree = out_tree.children()[0]
        carry_out = program.out_avals[:len(carry_avals)]
        promoted = _strong(carry_avals, carry_out)
        if promoted == carry_avals:
            break
        carry_avals = promoted
    _check_carry("the scan body", init_tree, carry_out_tree, carry_avals, carry_out)
    ys_tree = out_tree.children()[1]
    init_leaves = [_as_aval(x, a) for x, a in zip(init_leaves, carry_avals)]
    outs = scan_p.bind(*consts, *init_leaves, *xs_leaves, program=program,
                       num_consts=len(consts), num_carry=len(carry_avals), length=length,
                       reverse=bool(reverse), unroll=factor)
    carry = tree_unflatten(init_tree, outs[:len(carry_avals)])
    return carry, tree_unflatten(ys_tree, outs[len(carry_avals):])


def _as_aval(x, aval):
    """``x`` of ``aval``'s type (a promoted initial carry)."""
    a = core.get_aval(x)
    if a.weak_type != aval.weak_type or a.dtype != aval.dtype:
        from fusionjit._src.lax.elementwise import convert_element_type
        return convert_element_type(x, aval.dtype, weak_type=aval.weak_type)
    return x


@register(scan_p)
def _scan_lower(ctx, avals_in, avals_out, *operands, program, num_consts, num_carry, length,
                reverse, unroll):
    consts = list(operands[:num_consts])
    init = list(operands[num_consts:num_consts + num_carry])
    xs = list(operands[num_consts + num_carry:])
    xs_avals = avals_in[num_consts + num_carry:]
    ys_avals = avals_out[num_carry:]
    ys_init = [ctx.op("broadcast", [ctx.scalar(0, a.dtype)], dtype=a.dtype, dims=a.shape,
                      dimensions=[]) for a in ys_avals]
    if length == 0:
        return init + ys_init
    s32 = np.dtype(np.int32)
    zero = ctx.scalar(0, s32)
    state = [zero] + consts + init + xs + ys_init
    n_c, n_x = len(consts), len(xs)

    def body(sub, p):
        i, cs = p[0], p[1:1 + n_c]
        carry = p[1 + n_c:1 + n_c + num_carry]
        xs_in = p[1 + n_c + num_carry:1 + n_c + num_carry + n_x]
        ys_in = p[1 + n_c + num_carry + n_x:]
        idx = i if not reverse else sub.op("subtract", [sub.scalar(length - 1, s32), i])
        x_t = []
        for x, a in zip(xs_in, xs_avals):
            starts = [idx] + [sub.scalar(0, s32)] * (len(a.shape) - 1)
            piece = sub.op("dynamic-slice", [x] + starts, dimensions=(1,) + a.shape[1:])
            x_t.append(sub.op("reshape", [piece], dtype=a.dtype, dims=a.shape[1:]))
        outs = lower_eqns(sub, program, cs + carry + x_t)
        ys_out = []
        for y_full, y, a in zip(ys_in, outs[num_carry:], ys_avals):
            update = sub.op("reshape", [y], dtype=a.dtype, dims=(1,) + a.shape[1:])
            starts = [idx] + [sub.scalar(0, s32)] * (len(a.shape) - 1)
            ys_out.append(sub.op("dynamic-update-slice", [y_full, update] + starts))
        i_next = sub.op("add", [i, sub.scalar(1, s32)])
        return [i_next] + list(cs) + outs[:num_carry] + list(xs_in) + ys_out

    def cond(sub, p):
        return sub.op("compare", [p[0], sub.scalar(length, s32)], direction="LT")

    # unroll=1 (JAX's default) asks for nothing: the compiler may unroll as it sees fit (the
    # fusionjit profile's cost model does; results do not change, only the kernels).
    final = _while_loop_lower(ctx, state, body, cond, 0 if unroll == 1 else unroll,
                              has_effects(program))
    return final[1 + n_c:1 + n_c + num_carry] + final[1 + n_c + num_carry + n_x:]


def _while_loop_lower(ctx, state, body, cond, unroll=0, effects=False):
    """A while loop over ``state`` (instructions); ``body(sub_ctx, elements)`` returns the
    next state, ``cond(sub_ctx, elements)`` a pred[]. Returns the final state elements.
    With ``effects`` (the body's equations have some: host callbacks) the loop also carries
    the effect token (LoweringContext.token), so that each step's effects follow the last
    step's, and the enclosing computation's next ones follow the loop's."""
    if effects:
        state = [*state, ctx.effect_token()]
        inner = body

        def body(sub, p):
            sub.token = p[-1]
            return [*inner(sub, p[:-1]), sub.effect_token()]
    avals = [_instr_aval(x) for x in state]
    tuple_in = ctx.op("tuple", state)
    prog = _ShapeOnlyProgram(avals)
    body_comp = lower_subcomputation(ctx, prog, "while_body", wrap=body)
    cond_comp = lower_subcomputation(ctx, prog, "while_cond", wrap=lambda s, p: cond(s, p))
    loop = ctx.op("while", [tuple_in], called=[cond_comp, body_comp], unroll=unroll)
    final = [ctx.op("get-tuple-element", [loop], index=i) for i in range(len(state))]
    if effects:
        ctx.token = final.pop()
    return final


class _ShapeOnlyProgram:
    """The inputs of a nested computation when its lowering is written by hand."""

    def __init__(self, avals):
        self.invars = [core.Var(a) for a in avals]


def _instr_aval(instr) -> core.ShapedArray:
    dtype, dims = instr.shape
    return core.ShapedArray(dims, dt.from_ir_name(dtype))


# --- while_loop ----------------------------------------------------------------------------

while_p = core.Primitive("while", multiple_results=True)


@while_p.def_abstract_eval
def _while_abstract_eval(*avals, cond_program, body_program, cond_nconsts, body_nconsts):
    return list(body_program.out_avals)


def while_loop(cond_fun: Callable, body_fun: Callable, init_val):
    """``jax.lax.while_loop``: ``while cond_fun(val): val = body_fun(val)``."""
    for name, fn in (("cond_fun", cond_fun), ("body_fun", body_fun)):
        if not callable(fn):
            _fail(f"while_loop: {name} must be callable, got {type(fn).__name__}")
    if _outside_traces():
        return _run_compiled(while_loop, (cond_fun, body_fun), {}, (init_val,))
    leaves, tree = tree_flatten(init_val)
    leaves = _operands(leaves)
    avals = _leaf_avals(leaves)
    one_tree = tree_flatten((tree_unflatten(tree, list(range(len(avals)))),))[1]
    for _ in range(3):
        body_prog, body_consts, out_tree = _trace(body_fun, one_tree, avals, "while_loop body")
        promoted = _strong(avals, body_prog.out_avals)
        if promoted == avals:
            break
        avals = promoted
    _check_carry("the while_loop body", tree, out_tree, avals, body_prog.out_avals)
    cond_prog, cond_consts, cond_tree = _trace(cond_fun, one_tree, avals, "while_loop cond")
    outs = cond_prog.out_avals
    if len(outs) != 1 or outs[0].shape != () or outs[0].dtype != dt.bool_:
        _fail(f"while_loop: cond_fun must return a boolean scalar, got {_avals_str(outs)}; "
              f"reduce an array condition with .all() or .any()")
    leaves = [_as_aval(x, a) for x, a in zip(leaves, avals)]
    out = while_p.bind(*cond_consts, *body_consts, *leaves, cond_program=cond_prog,
                       body_program=body_prog, cond_nconsts=len(cond_consts),
                       body_nconsts=len(body_consts))
    return tree_unflatten(tree, out)


@register(while_p)
def _while_lower(ctx, avals_in, avals_out, *operands, cond_program, body_program, cond_nconsts,
                 body_nconsts):
    cc = list(operands[:cond_nconsts])
    bc = list(operands[cond_nconsts:cond_nconsts + body_nconsts])
    init = list(operands[cond_nconsts + body_nconsts:])
    nc, nb = len(cc), len(bc)

    def body(sub, p):
        new = lower_eqns(sub, body_program, p[nc:nc + nb] + p[nc + nb:])
        return list(p[:nc + nb]) + new

    def cond(sub, p):
        return lower_eqns(sub, cond_program, p[:nc] + p[nc + nb:])[0]

    return _while_loop_lower(ctx, cc + bc + init, body, cond, 0,
                             has_effects(body_program) or has_effects(cond_program))[nc + nb:]


def fori_loop(lower, upper, body_fun: Callable, init_val, *, unroll: int | bool | None = None):
    """``jax.lax.fori_loop``: ``for i in range(lower, upper): val = body_fun(i, val)``.
    With concrete bounds it is a scan (a counted loop that ``unroll`` applies to); with
    traced bounds a while_loop."""
    if not callable(body_fun):
        _fail(f"fori_loop: body_fun must be callable, got {type(body_fun).__name__}")
    from fusionjit._src.lax.common import asarray_operand
    lo_t, hi_t = (core.get_aval(asarray_operand(b)).dtype for b in (lower, upper))
    if lo_t != hi_t:
        _fail(f"fori_loop: lower and upper must have equal types, got {lo_t} and {hi_t}")
    concrete = not isinstance(lower, core.Tracer) and not isinstance(upper, core.Tracer)
    if concrete:
        try:
            # (Float bounds count as JAX counts them: int(upper) - int(lower) steps.)
            lo, hi = ((int(lower), int(upper)) if dt.is_float(lo_t)
                      else (operator.index(lower), operator.index(upper)))
        except TypeError:
            concrete = False
            lo = hi = None
    if concrete:
        def step(carry, _):
            i, val = carry
            return (i + 1, body_fun(i, val)), None

        i0 = asarray_operand(lower if isinstance(lower, np.generic) or dt.is_float(lo_t) else lo)
        (_, val), _ = scan(step, (i0, init_val), None, length=builtins.max(hi - lo, 0),
                           unroll=1 if unroll is None else unroll)
        return val
    if unroll not in (None, 1, False):
        _fail("fori_loop: unroll needs concrete bounds (with traced bounds the trip count is not "
              "known)", ValueError)

    def cond(carry):
        return carry[0] < carry[1]

    def body(carry):
        i, hi, val = carry
        return i + 1, hi, body_fun(i, val)

    lo_v, hi_v = asarray_operand(lower), asarray_operand(upper)
    return while_loop(cond, body, (lo_v, hi_v, init_val))[2]


# --- cond and switch -----------------------------------------------------------------------

cond_p = core.Primitive("cond", multiple_results=True)


@cond_p.def_abstract_eval
def _cond_abstract_eval(index, *avals, branches, nconsts):
    # A value is weakly typed only if every branch gives it weakly typed.
    return [ShapedArray(a.shape, a.dtype, builtins.all(b.out_avals[i].weak_type for b in branches))
            for i, a in enumerate(branches[0].out_avals)]


def switch(index, branches: Sequence[Callable], *operands):
    """``jax.lax.switch``: applies ``branches[index](*operands)``, the index clamped to the
    valid range."""
    branches = tuple(branches)
    if not branches:
        _fail("switch: needs at least one branch", ValueError)
    for b in branches:
        if not callable(b):
            _fail(f"switch: branches must be callable, got {type(b).__name__}")
    if _outside_traces():
        return _run_compiled(_switch_branches_first, (branches,), {}, (index, *operands))
    from fusionjit._src.lax.common import asarray_operand
    index = asarray_operand(index)
    ia = core.get_aval(index)
    if ia.shape != () or not dt.is_int(ia.dtype) or dt.is_bool(ia.dtype):
        _fail(f"switch: the index must be an integer scalar, got {ia.str_short()}")
    return _cond_impl(index, branches, operands, "switch")


def cond(pred, true_fun: Callable, false_fun: Callable, *operands):
    """``jax.lax.cond``: ``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``."""
    for name, fn in (("true_fun", true_fun), ("false_fun", false_fun)):
        if not callable(fn):
            _fail(f"cond: {name} must be callable, got {type(fn).__name__}")
    if _outside_traces():
        return _run_compiled(_cond_branches_first, (true_fun, false_fun), {}, (pred, *operands))
    from fusionjit._src.lax.common import asarray_operand
    pred = asarray_operand(pred)
    pa = core.get_aval(pred)
    if pa.shape != ():
        _fail(f"cond: the predicate must be a scalar, got {pa.str_short()}; reduce it with "
              f".all() or .any(), or use fusionjit.numpy.where for elementwise selection")
    if not (dt.is_bool(pa.dtype) or dt.is_int(pa.dtype) or dt.is_float(pa.dtype)):
        _fail(f"cond: the predicate must be a boolean or a number, got {pa.str_short()}")
    from fusionjit._src.lax import elementwise as ew
    if dt.is_bool(pa.dtype):
        index = ew.convert_element_type(pred, np.int32, weak_type=False)
    else:
        index = ew.convert_element_type(ew.ne(pred, asarray_operand(0, pa.dtype)), np.int32,
                                        weak_type=False)
    return _cond_impl(index, (false_fun, true_fun), operands, "cond")


def _cond_impl(index, branches, operands, what):
    leaves, tree = tree_flatten(tuple(operands))
    leaves = _operands(leaves)
    avals = _leaf_avals(leaves)
    programs, consts, out_trees = [], [], []
    for k, fn in enumerate(branches):
        p, c, t = _trace(fn, tree, avals, f"{what} branch {k}")
        programs.append(p)
        consts.append(c)
        out_trees.append(t)
    for k in range(1, len(programs)):
        a, b = programs[0].out_avals, programs[k].out_avals
        same = out_trees[k] == out_trees[0] and len(a) == len(b) and all(
            x.shape == y.shape and x.dtype == y.dtype for x, y in zip(a, b))
        if not same:
            names = ("false_fun", "true_fun") if what == "cond" else ("branch 0", f"branch {k}")
            _fail(f"{what}: the branches must return the same structure, shapes and dtypes; "
                  f"{names[0]} returns {out_trees[0]} {_avals_str(a)} but {names[1]} returns "
                  f"{out_trees[k]} {_avals_str(b)}")
    flat_consts = [c for cs in consts for c in cs]
    outs = cond_p.bind(index, *flat_consts, *leaves, branches=tuple(programs),
                       nconsts=tuple(len(c) for c in consts))
    return tree_unflatten(out_trees[0], outs)


@register(cond_p)
def _cond_lower(ctx, avals_in, avals_out, index, *operands, branches, nconsts):
    n = len(branches)
    total = builtins.sum(nconsts)
    consts, args = list(operands[:total]), list(operands[total:])
    s32 = np.dtype(np.int32)
    # Out-of-range indices go to the nearest branch, as JAX's switch clamps.
    index = ctx.op("clamp", [ctx.scalar(0, s32), index, ctx.scalar(n - 1, s32)])
    # With host callbacks in a branch each branch takes and gives the effect token too
    # (see _while_loop_lower).
    effects = builtins.any(has_effects(prog) for prog in branches)
    token = [ctx.effect_token()] if effects else []
    tuples, comps, start = [], [], 0
    for k, (prog, nc) in enumerate(zip(branches, nconsts)):
        own = consts[start:start + nc]
        start += nc
        tuples.append(ctx.op("tuple", own + args + token))
        if effects:
            comps.append(lower_subcomputation(
                ctx, _ShapeOnlyProgram([*prog.in_avals, TOKEN_AVAL]), f"branch_{k}",
                wrap=lambda sub, p, prog=prog: _with_token(sub, p, prog)))
        else:
            comps.append(lower_subcomputation(ctx, prog, f"branch_{k}"))
    out = ctx.op("conditional", [index] + tuples, called=comps)
    if effects:
        ctx.token = ctx.op("get-tuple-element", [out], index=len(avals_out))
    return [ctx.op("get-tuple-element", [out], index=i) for i in range(len(avals_out))]


def _with_token(sub, elements, program) -> list:
    """``program``'s outputs and then the effect token, computed from ``elements`` (its
    inputs, then the token)."""
    sub.token = elements[-1]
    return [*lower_eqns(sub, program, elements[:-1]), sub.effect_token()]


# The compiled programs of an eager cond or switch take the branches first (_run_compiled
# puts the functions before the arrays); regression: they called cond(true_fun, false_fun,
# pred, ...) and failed on every eager call.
def _cond_branches_first(true_fun, false_fun, pred, *operands):
    return cond(pred, true_fun, false_fun, *operands)


def _switch_branches_first(branches, index, *operands):
    return switch(index, branches, *operands)


def map(f: Callable, xs, *, batch_size: int | None = None):  # noqa: A001 - jax.lax.map
    """``jax.lax.map``: ``f`` applied to each slice of ``xs`` along its leading axis, in a
    loop (a scan without carry). With ``batch_size``, as JAX: the loop steps over chunks of
    that many slices, ``f`` vmapped over each, and the slices left over are one more vmapped
    call."""
    if batch_size is None:
        def step(_, x):
            return (), f(x)
        return scan(step, (), xs)[1]
    from fusionjit._src.batching import vmap
    from fusionjit._src.lax import shapes as sh
    batch_size = _int_param("map: batch_size", batch_size, 1)
    leaves, tree = tree_flatten(xs)
    leaves = _operands(leaves)
    lengths = {a.shape[0] if a.shape else None for a in _leaf_avals(leaves)}
    if None in lengths or len(lengths) != 1:
        _fail(f"map: every leaf of xs needs the same leading axis; got "
              f"{_avals_str(_leaf_avals(leaves))}", ValueError)
    (n,) = lengths
    whole, rest = divmod(n, batch_size)
    g = vmap(lambda x: f(tree_unflatten(tree, x)))
    parts = []
    shapes = [tuple(a.shape) for a in _leaf_avals(leaves)]
    if whole:
        chunks = [sh.reshape(sh.slice(x, (0,) * len(s), (whole * batch_size,) + s[1:]),
                             (whole, batch_size) + s[1:]) for x, s in zip(leaves, shapes)]
        ys = scan(lambda _, x: ((), g(x)), (), chunks)[1]
        parts.append(tree_map(
            lambda y: sh.reshape(y, (whole * batch_size,) + tuple(core.get_aval(y).shape[2:])),
            ys))
    if rest:
        parts.append(g([sh.slice(x, (whole * batch_size,) + (0,) * (len(s) - 1), s)
                        for x, s in zip(leaves, shapes)]))
    if len(parts) == 1:
        return parts[0]
    return tree_map(lambda a, b: sh.concatenate([a, b], 0), parts[0], parts[1])


__all__ = ["cond", "fori_loop", "map", "scan", "switch", "while_loop"]
