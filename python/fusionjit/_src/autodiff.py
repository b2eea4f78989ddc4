"""Reverse-mode automatic differentiation: ``grad``, ``value_and_grad`` and ``vjp`` with
JAX's API. The function is traced into a Program; the program is evaluated forward (each
primitive bound again, so it runs eagerly or records into an enclosing ``jit`` trace), and
its cotangents are then propagated backward by a rule per primitive (the rules are written
with ``lax``, so the backward pass fuses and compiles like any other code under ``jit``).
``scan`` and ``cond``/``switch`` are differentiated by scans and switches of the body's
backward pass; a ``while_loop`` (whose trip count is not known ahead) only where the
derivative passes through it unchanged or does not reach it, as in JAX; sorting has no
rule. A gradient through what has none raises an error that names the user's line and the
transform the user called. Only the values computed from the differentiated inputs get
cotangents (JAX's symbolic zeros). Forward mode (``jvp``) is the reverse pass of the reverse
pass, except through while loops (autodiff_forward.py)."""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any, Callable, Sequence

import numpy as np

from fusionjit._src import core, errors, lowering, tracing, tree_util
from fusionjit._src import dtypes as dt
from fusionjit._src.lax import elementwise as ew
from fusionjit._src.lax import reductions as red

Rule = Callable[..., Sequence[Any]]
_VJP: dict[core.Primitive, Rule] = {}
_FWD: dict[core.Primitive, Callable] = {}  # defvjp_forward
_VJP_ACTIVE: dict[core.Primitive, Callable] = {}  # defvjp_active


def _fail(message: str, exc_type=TypeError):
    raise exc_type(errors.located(message, errors.user_location()))


class _Called(threading.local):
    """The public transform the user called, for errors: the outermost one running on this
    thread. Transforms call one another (``jvp`` is ``vjp`` twice, ``hessian`` is ``jacfwd``
    of ``jacrev``), and the user knows only the outermost."""

    name: str | None = None


_CALLED = _Called()


@contextlib.contextmanager
def _calling(name: str):
    """Names ``name`` as the transform the user called, unless an enclosing one is."""
    outer = _CALLED.name
    _CALLED.name = outer or name
    try:
        yield
    finally:
        _CALLED.name = outer


def transform_name() -> str:
    """``fusionjit.<transform>`` for errors: the transform the user called."""
    return f"fusionjit.{_CALLED.name or 'grad'}"


def _registrar(table: dict, prims) -> Callable:
    def register(rule: Callable) -> Callable:
        for p in prims:
            table[p] = rule
        return rule
    return register


def defvjp(*prims: core.Primitive):
    """Registers ``rule(ct, invals, out, **params) -> cotangents`` for the primitives:
    ``ct`` is the output's cotangent (a list for primitives with several results), the
    result one cotangent (or None: zero) per operand."""
    return _registrar(_VJP, prims)


def defvjp_forward(*prims: core.Primitive):
    """Registers ``forward(invals, **params) -> (outs, residuals)`` for primitives whose
    backward rule needs values the forward pass computes anyway (a scan's carry at each
    step): the forward pass of ``vjp`` binds it instead of the primitive, and the rule gets
    ``residuals=`` (computed apart, they cost a second copy of the forward loop)."""
    return _registrar(_FWD, prims)


def defvjp_active(*prims: core.Primitive):
    """Registers ``rule(ct, active, source=, **params) -> cotangents`` for primitives
    differentiable only in part (a while loop: through the carries it passes on
    unchanged): ``ct`` holds None for an output with no cotangent, ``active`` whether each
    operand is computed from the differentiated inputs (JAX's non-zero tangents), so that
    the rule can tell the part it cannot differentiate from the part no derivative
    reaches; ``source`` is the primitive's line, for errors."""
    return _registrar(_VJP_ACTIVE, prims)


def active_vars(program: core.Program, inputs=None) -> set:
    """The ids of the float variables of ``program`` computed from its (float) inputs, or
    from those of them whose ids are in ``inputs``: the values a derivative reaches."""
    active = {id(v) for v in program.invars if _is_float(v.aval)
              and (inputs is None or id(v) in inputs)}
    for eqn in program.eqns:
        if eqn.prim is ew.stop_gradient_p:  # no derivative passes (JAX: a zero tangent)
            continue
        if any(isinstance(v, core.Var) and id(v) in active for v in eqn.invars):
            active.update(id(v) for v in eqn.outvars if _is_float(v.aval))
    return active


def reached_in_loop(body, carries, seeds) -> set:
    """The ids of the float values of a loop's step computed from ``seeds`` (ids of its
    inputs) after any number of steps: a carry they reach feeds the next step."""
    reached = set(seeds)
    while True:
        inside = active_vars(body, reached)
        more = {id(c) for c, out in zip(carries, body.outvars) if id(out) in inside}
        if more <= reached:
            return inside
        reached |= more


# --- the transformation ---------------------------------------------------------------

def _is_float(aval) -> bool:
    return dt.is_float(aval.dtype)


def _zeros(aval):
    return red.full(aval.shape, 0, aval.dtype)


def _read(env, v):
    if isinstance(v, core.Literal):
        return np.asarray(v.value, v.aval.dtype)
    return env[id(v)]


def _forward(program: core.Program, args, residuals: bool = False) -> dict:
    """The values of the program's variables; with ``residuals``, also what the backward
    rules registered with defvjp_forward keep (under ``("residuals", id(eqn))``)."""
    env: dict = {}
    for var, val in zip(program.constvars, program.consts):
        env[id(var)] = val
    for var, val in zip(program.invars, args):
        env[id(var)] = val
    for eqn in program.eqns:
        invals = [_read(env, v) for v in eqn.invars]
        if residuals and eqn.prim in _FWD:
            outs, env[("residuals", id(eqn))] = _FWD[eqn.prim](invals, **eqn.params)
        else:
            outs = eqn.prim.bind(*invals, **eqn.params)
        for var, val in zip(eqn.outvars, outs if eqn.prim.multiple_results else [outs]):
            env[id(var)] = val
    return env


def eval_program(program: core.Program, args) -> list:
    """The outputs of a (closed) program applied to ``args``, each primitive bound again."""
    env = _forward(program, args)
    return [_read(env, v) for v in program.outvars]


def _backward(program: core.Program, env: dict, out_cts) -> list:
    cts: dict = {}

    active = active_vars(program)

    def add(var, ct):  # (a value the inputs do not reach needs none)
        if ct is None or isinstance(var, core.Literal) or id(var) not in active:
            return
        ct = _as_aval(ct, var.aval)
        cts[id(var)] = ct if id(var) not in cts else ew.add(cts[id(var)], ct)

    for var, ct in zip(program.outvars, out_cts):
        add(var, ct)
    for eqn in reversed(program.eqns):
        outs = [cts.pop(id(v), None) for v in eqn.outvars]
        reached = [isinstance(v, core.Var) and id(v) in active for v in eqn.invars]
        if all(ct is None for ct in outs) or not any(reached):
            continue  # nothing to pass back to (an iota, random bits, constants' arithmetic)
        if eqn.prim in _VJP_ACTIVE:
            for var, c in zip(eqn.invars, _VJP_ACTIVE[eqn.prim](outs, reached, source=eqn.source,
                                                               **eqn.params)):
                add(var, c)
            continue
        rule = _VJP.get(eqn.prim)
        if rule is None:
            raise NotImplementedError(
                f"{eqn.source}: {transform_name()} has no rule for '{eqn.prim.name}' yet "
                f"(sorting is not differentiable in this version); wrap "
                f"what does not need a gradient in lax.stop_gradient")
        if eqn.prim.multiple_results:
            ct = [c if c is not None else _zeros(v.aval) for c, v in zip(outs, eqn.outvars)]
            out = [_read(env, v) for v in eqn.outvars]
        else:
            ct, out = outs[0], _read(env, eqn.outvars[0])
        invals = [_read(env, v) for v in eqn.invars]
        kept = {}
        if ("residuals", id(eqn)) in env:
            kept["residuals"] = env[("residuals", id(eqn))]
        if eqn.prim is custom_vjp_call_p:
            kept["reached"] = reached
        for var, c in zip(eqn.invars, rule(ct, invals, out, **kept, **eqn.params)):
            add(var, c)
    return [cts.get(id(v)) for v in program.invars]


def _as_aval(ct, aval):
    """A cotangent in its variable's dtype (a weakly typed scalar may differ); a rule that
    gives another shape is a bug in the rule, caught here rather than broadcast."""
    ct = ew.asarray_operand(ct) if not isinstance(ct, core.Tracer) else ct
    got = core.get_aval(ct)
    if got.shape != aval.shape:
        raise AssertionError(f"{transform_name()}: a cotangent of shape {got.shape} for a value "
                             f"of shape {aval.shape} (a bug in a differentiation rule)")
    if got.dtype != aval.dtype:
        ct = ew.convert_element_type(ct, aval.dtype)
    return ct


def _trace(fun: Callable, primals, name: str):
    leaves, in_tree = tree_util.tree_flatten(primals)
    leaves = [ew.asarray_operand(x) for x in leaves]
    out_tree: list = []

    def flat(*xs):
        out = fun(*tree_util.tree_unflatten(in_tree, xs))
        out_leaves, tree = tree_util.tree_flatten(out)
        out_tree.append(tree)
        return out_leaves

    program = tracing.trace_to_program(flat, [core.get_aval(x) for x in leaves], name)
    return program, leaves, in_tree, out_tree[0]


def vjp(fun: Callable, *primals, has_aux: bool = False):
    """``(fun(*primals), vjp_fn)`` as ``jax.vjp``: ``vjp_fn(cotangent)`` gives the
    cotangents of the primals (a tuple, one per primal) for a cotangent of the output's
    structure. With ``has_aux``, ``fun`` returns ``(out, aux)`` and so does this
    (``(out, vjp_fn, aux)``)."""
    name = getattr(fun, "__name__", "fun")
    with _calling("vjp"):
        traced = _trace(fun, primals, f"vjp({name})")
        return _vjp_traced(*traced, name=name, has_aux=has_aux)


def _vjp_traced(program: core.Program, leaves, in_tree, out_tree, *, name: str,
                has_aux: bool = False):
    """``vjp`` of the function ``_trace`` traced into ``program``."""
    env = _forward(program, leaves, residuals=True)
    outs = [_read(env, v) for v in program.outvars]
    out = tree_util.tree_unflatten(out_tree, outs)
    aux = None
    if has_aux:
        if not isinstance(out, tuple) or len(out) != 2:
            _fail(f"vjp(..., has_aux=True): {name} must return a pair (out, aux)",
                        TypeError)
        out, _ = out
        outs = tree_util.tree_leaves(out)
        # Aux values the function returned as they were (a Python number, a constant), not
        # computed from the inputs, come back as they were, as JAX's do.
        consts = {id(v): c for v, c in zip(program.constvars, program.consts)}
        given = [v.value if isinstance(v, core.Literal) else consts.get(id(v), env.get(id(v)))
                 for v in program.outvars]
        aux = tree_util.tree_unflatten(out_tree, given)[1]
    out_avals = [core.get_aval(o) for o in outs]

    def vjp_fn(cotangent):
        ct_leaves, ct_tree = tree_util.tree_flatten(cotangent)
        want = tree_util.tree_structure(out)
        if ct_tree != want:
            _fail(f"vjp: the cotangent's structure {ct_tree} differs from the "
                        f"output's {want}", TypeError)
        for c, a in zip(ct_leaves, out_avals):
            if tuple(np.shape(c)) != a.shape:
                _fail(f"vjp: a cotangent of shape {tuple(np.shape(c))} for an output "
                            f"of shape {a.shape}", ValueError)
        full = list(ct_leaves) + [None] * (len(program.outvars) - len(ct_leaves))
        with _calling("vjp"):
            cts = _backward(program, env, full)
        cts = [_weak_as(c if c is not None else _zeros(core.get_aval(x)), x)
               for c, x in zip(cts, leaves)]
        return tuple(tree_util.tree_unflatten(in_tree, cts))

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _weak_as(ct, primal):
    """``ct`` weakly typed where ``primal`` is (a Python float's gradient), as JAX's: it then
    takes the type of the arrays it meets (a float16 one's)."""
    if core.get_aval(primal).weak_type and not core.get_aval(ct).weak_type:
        return ew.convert_element_type(ct, core.get_aval(ct).dtype, weak_type=True)
    return ct


def _int_leaves(trees) -> tuple[list, list]:
    """Each tree's (leaves, treedef), and which of its leaves are integers or booleans (held
    constant by ``allow_int`` and ``custom_jvp``: not differentiated)."""
    flat = [tree_util.tree_flatten(t) for t in trees]
    return flat, [[not dt.is_float(core.get_aval(leaf).dtype) for leaf in leaves]
                  for leaves, _ in flat]


def _float_leaves(flat, ints, of: Callable = lambda leaf: leaf) -> list:
    """For each tree, ``of`` its float leaves."""
    return [[of(leaf) for leaf, i in zip(leaves, is_int) if not i]
            for (leaves, _), is_int in zip(flat, ints)]


def _rebuild(flat, ints, floats, int_leaf: Callable) -> list:
    """The trees again: float leaves from ``floats`` (a sequence per tree), integer ones as
    ``int_leaf(leaf)``."""
    out = []
    for (leaves, treedef), is_int, f in zip(flat, ints, floats):
        it = iter(f)
        out.append(tree_util.tree_unflatten(
            treedef, [int_leaf(leaf) if i else next(it) for leaf, i in zip(leaves, is_int)]))
    return out


def _float0_zeros(leaf):
    return np.zeros(core.get_aval(leaf).shape, dt.float0)


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   allow_int: bool = False):
    """``fun``'s value and its gradient with respect to the arguments ``argnums``, as
    ``jax.value_and_grad``: ``fun`` returns a float scalar (or ``(scalar, aux)`` with
    ``has_aux``); the gradient has the structure of the argument (a tuple of them for a
    tuple of argnums). With ``allow_int``, integer and boolean leaves (a train state's step
    counter) are held constant and get ``float0`` zeros, as JAX gives them."""
    many = not isinstance(argnums, int)
    nums = tuple(argnums) if many else (argnums,)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        with _calling("value_and_grad"):
            return value_and_grad_at(args, kwargs)

    def value_and_grad_at(args, kwargs):
        nums_ = _check_diff_args("grad", args, nums, allow_int)
        flat, ints = _int_leaves([args[n] for n in nums_])

        def part(*diff):
            full = list(args)
            for n, tree in zip(nums_, _rebuild(flat, ints, diff, lambda leaf: leaf)):
                full[n] = tree
            return fun(*full, **kwargs)

        out = vjp(part, *_float_leaves(flat, ints), has_aux=has_aux)
        value, pullback = out[0], out[1]
        leaves = tree_util.tree_leaves(value)
        aval = core.get_aval(leaves[0]) if len(leaves) == 1 else None
        if aval is None or aval.shape != () or not dt.is_float(aval.dtype):
            what = "several values" if len(leaves) != 1 else aval.str_short()
            _fail(f"grad requires a scalar floating-point output of "
                        f"{getattr(fun, '__name__', 'fun')}, got {what}", TypeError)
        grads = _rebuild(flat, ints, pullback(red.full((), 1, aval.dtype)), _float0_zeros)
        g = tuple(grads) if many else grads[0]
        return ((value, out[2]), g) if has_aux else (value, g)

    return wrapped


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         allow_int: bool = False):
    """The gradient of ``fun`` (a float scalar) with respect to ``argnums``, as
    ``jax.grad``; with ``has_aux``, ``(gradient, aux)``; ``allow_int`` as in
    ``value_and_grad``."""
    vg = value_and_grad(fun, argnums, has_aux, allow_int)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        with _calling("grad"):
            value, g = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapped


# --- forward mode and Jacobians ------------------------------------------------------

def jvp(fun: Callable, primals, tangents):
    """``(fun(*primals), tangent of the output)`` as ``jax.jvp``: the derivative of ``fun`` at
    ``primals`` applied to ``tangents`` (tuples of the same structure). Computed as the
    reverse pass of the reverse pass (the pullback is linear in its cotangent, so its own
    pullback is the pushforward): about three times the forward work, where JAX's forward
    mode takes about two. Where a derivative reaches a while loop, whose reverse pass would
    need the trip count ahead, the program is differentiated forward instead
    (autodiff_forward.py)."""
    primals, tangents = tuple(primals), tuple(tangents)
    if tree_util.tree_structure(primals) != tree_util.tree_structure(tangents):
        _fail("jvp: primals and tangents must have the same structure", TypeError)
    name = getattr(fun, "__name__", "fun")
    with _calling("jvp"):
        program, leaves, in_tree, out_tree = _trace(fun, primals, f"vjp({name})")
        return jvp_traced(program, leaves, in_tree, out_tree, tangents)


def jvp_traced(program: core.Program, leaves, in_tree, out_tree, tangents):
    """``jvp`` of the function ``_trace`` traced into ``program`` (``tangents`` of the
    primals' structure)."""
    if autodiff_forward.reaches_a_while(program):
        t_leaves = tree_util.tree_leaves(tangents)
        outs, t_outs = autodiff_forward.jvp_program(program, leaves, t_leaves)
        t_outs = [_zeros(core.get_aval(o)) if t is None else t for o, t in zip(outs, t_outs)]
        return (tree_util.tree_unflatten(out_tree, outs),
                tree_util.tree_unflatten(out_tree, t_outs))
    out, pullback = _vjp_traced(program, leaves, in_tree, out_tree, name=program.name)
    zero = tree_util.tree_map(lambda o: _zeros(core.get_aval(o)), out)
    _, pushforward = vjp(pullback, zero)
    (tangent_out,) = pushforward(tangents)
    return out, tangent_out


def _basis(aval):
    """The unit arrays of ``aval``'s shape stacked: [n, *shape], one per element, in
    row-major order."""
    n = int(np.prod(aval.shape, dtype=np.int64))
    return np.eye(n, dtype=aval.dtype).reshape((n,) + tuple(aval.shape))


def linearize(fun: Callable, *primals):
    """``(fun(*primals), f_jvp)`` as ``jax.linearize``: ``f_jvp(*tangents)`` is the
    derivative of ``fun`` at ``primals`` applied to the tangents (``jvp``'s tangent out;
    computed anew at each call, where JAX keeps the linearised program)."""
    out = fun(*primals)

    def f_jvp(*tangents):
        if len(tangents) != len(primals):
            _fail(f"linearize: f_jvp takes {len(primals)} tangents (one per primal), got "
                  f"{len(tangents)}", TypeError)
        with _calling("linearize"):
            return jvp(fun, primals, tangents)[1]
    return out, f_jvp


def _check_diff_args(what: str, args, nums, allow_int: bool = False) -> tuple:
    """``nums`` as non-negative positions, checked: in range, floating-point leaves (or
    integer ones too, with ``allow_int``)."""
    for n in nums:
        if not -len(args) <= n < len(args):
            _fail(f"{what}: argnums {n} for {len(args)} positional arguments", ValueError)
    nums = tuple(n % len(args) for n in nums)
    for n in nums:
        for leaf in tree_util.tree_leaves(args[n]):
            d = core.get_aval(leaf).dtype
            if allow_int and (dt.is_int(d) or dt.is_bool(d)):
                continue
            if not dt.is_float(d):
                _fail(f"{what} requires real-valued (floating-point) inputs, but argument {n} "
                      f"has a leaf of {d}; for integer or boolean inputs, use vjp or set "
                      f"allow_int=True", TypeError)
    return nums


def _jacrev_array(part: Callable, x):
    """The Jacobian of ``part`` (array to array) at ``x``: the reverse pass applied to every
    unit cotangent at once (vmapped); shape ``out.shape + x.shape``."""
    from fusionjit._src.batching import vmap
    from fusionjit._src.lax import shapes as sh
    out, pullback = vjp(part, x)
    x_aval, out_shape = core.get_aval(x), tuple(core.get_aval(out).shape)
    basis = _basis(core.get_aval(out))
    if not len(basis) or not x_aval.size:
        return red.full(out_shape + x_aval.shape, 0, x_aval.dtype)
    rows = vmap(lambda e: pullback(e)[0])(basis)
    return sh.reshape(rows, out_shape + x_aval.shape)


def _jacfwd_array(part: Callable, x):
    """The Jacobian of ``part`` by ``jvp`` applied to every unit tangent at once (vmapped)."""
    from fusionjit._src.batching import vmap
    from fusionjit._src.lax import shapes as sh
    x_aval = core.get_aval(x)
    basis = _basis(x_aval)
    if not len(basis):  # an empty x: only the output's shape is needed
        out_shape = core.get_aval(part(x)).shape
        return red.full(out_shape + x_aval.shape, 0, x_aval.dtype)
    cols = vmap(lambda e: jvp(part, (x,), (e,))[1], out_axes=-1)(basis)
    out_shape = core.get_aval(cols).shape[:-1]
    return sh.reshape(cols, out_shape + x_aval.shape)


def _jacobian(what: str, array_jacobian: Callable, fun: Callable, argnums, has_aux: bool):
    """``jax.jacrev``/``jax.jacfwd``: pytrees in (``argnums`` an int or a tuple) and out,
    computed over the leaves raveled into one vector each way; the result has the output's
    structure with, at each output leaf, the input's structure of blocks shaped
    ``out_leaf.shape + in_leaf.shape`` (a tuple over the arguments for tuple argnums)."""
    @functools.wraps(fun)
    def wrapped(*args):
        with _calling(what):
            return jacobian(*args)

    def jacobian(*args):
        from fusionjit._src.flatten_util import ravel_pytree
        from fusionjit._src.lax import shapes as sh
        many = isinstance(argnums, (tuple, list))
        nums = _check_diff_args(what, args, tuple(argnums) if many else (argnums,))

        def at(xs):
            full = list(args)
            for n, x in zip(nums, xs):
                full[n] = x
            out = fun(*full)
            if has_aux:
                if not (isinstance(out, (tuple, list)) and len(out) == 2):
                    _fail(f"{what}(has_aux=True): the function must return a pair (output, "
                          f"aux), got {type(out).__name__}", TypeError)
                return out
            return out, None

        from fusionjit._src.api_util import eval_shape
        xs = tuple(args[n] for n in nums)
        # The output's structure and shapes by tracing alone; aux by the call itself.
        aux = at(xs)[1] if has_aux else None
        out = eval_shape(lambda *parts: at(parts)[0], *xs)
        x_leaves, x_tree = tree_util.tree_flatten(xs if many else xs[0])
        out_leaves, out_tree = tree_util.tree_flatten(out)
        simple = (not many and len(x_leaves) == 1 and x_tree == tree_util.tree_structure(0)
                  and len(out_leaves) == 1 and out_tree == tree_util.tree_structure(0))
        if simple:  # array in, array out
            jac = array_jacobian(lambda x: at((x,))[0], ew.asarray_operand(xs[0]))
            return (jac, aux) if has_aux else jac
        flat_x, unravel = ravel_pytree(xs if many else xs[0])

        def flat_fun(v):
            parts = unravel(v)
            return ravel_pytree(at(parts if many else (parts,))[0])[0]
        jac = array_jacobian(flat_fun, flat_x)   # [outputs, inputs]
        x_shapes = [tuple(core.get_aval(ew.asarray_operand(leaf)).shape) for leaf in x_leaves]
        out_shapes = [tuple(leaf.shape) for leaf in out_leaves]
        x_ends = np.cumsum([0] + [int(np.prod(sh_, dtype=np.int64)) for sh_ in x_shapes])
        o_ends = np.cumsum([0] + [int(np.prod(sh_, dtype=np.int64)) for sh_ in out_shapes])
        blocks = []
        for i, o_shape in enumerate(out_shapes):
            row = []
            for j, x_shape in enumerate(x_shapes):
                block = sh.slice(jac, (int(o_ends[i]), int(x_ends[j])),
                                 (int(o_ends[i + 1]), int(x_ends[j + 1])))
                row.append(sh.reshape(block, o_shape + x_shape))
            blocks.append(tree_util.tree_unflatten(x_tree, row))
        result = tree_util.tree_unflatten(out_tree, blocks)
        return (result, aux) if has_aux else result
    return wrapped


def jacrev(fun: Callable, argnums=0, has_aux: bool = False):
    """The Jacobian of ``fun`` with respect to argument(s) ``argnums`` (an int or a tuple),
    by the reverse pass applied to every unit cotangent at once (vmapped), as
    ``jax.jacrev``: for an array in and out, shape ``out.shape + x.shape``; for pytrees,
    the output's structure of the inputs' structures of such blocks."""
    return _jacobian("jacrev", _jacrev_array, fun, argnums, has_aux)


def jacfwd(fun: Callable, argnums=0, has_aux: bool = False):
    """The Jacobian of ``fun`` by ``jvp`` applied to every unit tangent at once (vmapped);
    shapes and structures as ``jacrev``'s, as ``jax.jacfwd``."""
    return _jacobian("jacfwd", _jacfwd_array, fun, argnums, has_aux)


def hessian(fun: Callable, argnums=0, has_aux: bool = False):
    """The Hessian of a scalar ``fun`` with respect to argument(s) ``argnums``, as
    ``jax.hessian`` (``jacfwd(jacrev(fun))``): for pytrees, blocks by pairs of leaves."""
    jac = jacfwd(jacrev(fun, argnums, has_aux=has_aux), argnums, has_aux=has_aux)

    @functools.wraps(fun)
    def wrapped(*args):
        with _calling("hessian"):
            return jac(*args)
    return wrapped


# --- custom gradients -----------------------------------------------------------------

class _ProgramCall(core.Primitive):
    """A traced program called as one primitive whose backward pass is its own (a
    ``custom_vjp``'s, or ``checkpoint``'s recomputation). Compiled, the program itself;
    outside any trace it runs as it is (each primitive eagerly)."""

    def bind(self, *args, **params):
        if core.find_trace(args) is None:
            return eval_program(params["program"], list(args))
        return super().bind(*args, **params)


custom_vjp_call_p = _ProgramCall("custom_vjp_call", multiple_results=True)


@custom_vjp_call_p.def_abstract_eval
def _custom_vjp_call_abstract_eval(*avals, program, custom, nconsts):
    return program.out_avals


@lowering.register(custom_vjp_call_p)
def _custom_vjp_call_lower(ctx, avals_in, avals_out, *args, program, custom, nconsts):
    return lowering.lower_eqns(ctx, program, list(args))


class custom_vjp:
    """A function with its own backward pass, as ``jax.custom_vjp``::

        @fusionjit.custom_vjp
        def f(x): ...
        def f_fwd(x): return f(x), residuals
        def f_bwd(residuals, g): return (gx,)   # one cotangent per argument
        f.defvjp(f_fwd, f_bwd)

    ``fusionjit.grad`` calls ``f_fwd`` and ``f_bwd`` instead of differentiating ``f``'s
    operations; everywhere else ``f`` runs as written. Arguments in ``nondiff_argnums``
    are passed to ``f_bwd`` first and get no cotangent."""

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None

    def defvjp(self, fwd: Callable, bwd: Callable) -> None:
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args):
        if self.fwd is None:
            _fail(f"custom_vjp {getattr(self.fun, '__name__', 'function')} is called before "
                  f"defvjp(fwd, bwd) gave it a backward pass", AttributeError)
        nondiff = {i % len(args) for i in self.nondiff_argnums}
        static = {i: args[i] for i in nondiff}
        diff = [a for i, a in enumerate(args) if i not in nondiff]

        def with_static(parts):
            it = iter(parts)
            return [static[i] if i in nondiff else next(it) for i in range(len(args))]

        program, leaves, in_tree, out_tree = _trace(
            lambda *d: self.fun(*with_static(d)), tuple(diff),
            f"custom_vjp({getattr(self.fun, '__name__', 'fun')})")
        closed = closed_program(program)
        custom = _Custom(self, with_static, in_tree, out_tree, len(diff))
        outs = custom_vjp_call_p.bind(*program.consts, *leaves, program=closed, custom=custom,
                                      nconsts=len(program.consts))
        return tree_util.tree_unflatten(out_tree, outs)


class custom_jvp:
    """A function with its own derivative rule, as ``jax.custom_jvp``::

        @fusionjit.custom_jvp
        def f(x, y): ...
        @f.defjvp
        def f_jvp(primals, tangents):
            x, y = primals
            x_dot, y_dot = tangents
            return f(x, y), tangent_out     # linear in the tangents

    (or ``f.defjvps(jvp_x, jvp_y)``: ``jvp_i(g_i, ans, *primals)`` for each argument).
    ``fusionjit.grad`` differentiates through the rule, not through ``f``'s operations: its
    backward pass is the transpose of the rule's tangent map (the reverse pass of the map,
    which is linear in the tangents), as JAX transposes the linearised rule. Arguments in
    ``nondiff_argnums`` are passed to the rule first; integer arguments get ``float0``
    tangents. Outside differentiation ``f`` runs as written."""

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp: Callable | None = None
        # Whether the rule takes None for the tangents of arguments that the differentiated
        # inputs do not reach (with_jvp's rules do: they skip those partials).
        self.none_where_unreached = False

    def defjvp(self, jvp: Callable, symbolic_zeros: bool = False) -> Callable:
        if symbolic_zeros:
            _fail("custom_jvp.defjvp(symbolic_zeros=True) is not supported: the rule gets "
                  "zero tangents as arrays", NotImplementedError)
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps) -> None:
        def jvp(*args):
            primals, tangents = args[-2], args[-1]
            ans = self.fun(*args[:-2], *primals)
            out = None
            for rule, t in zip(jvps, tangents):
                if rule is None:
                    continue
                term = rule(t, ans, *primals)
                out = term if out is None else tree_util.tree_map(ew.add, out, term)
            return ans, (out if out is not None else tree_util.tree_map(
                lambda a: _zeros(core.get_aval(a)), ans))
        self.jvp = jvp

    def __call__(self, *args):
        if self.jvp is None:
            _fail(f"custom_jvp {getattr(self.fun, '__name__', 'function')} is called before "
                  f"defjvp gave it a derivative rule", AttributeError)
        nondiff = sorted({i % len(args) for i in self.nondiff_argnums})
        rule = self.jvp
        f = custom_vjp(self.fun, nondiff_argnums=tuple(nondiff))

        def fwd(*a):
            return self.fun(*a), tuple(x for i, x in enumerate(a) if i not in nondiff)

        def bwd(*rest, reached=None):
            static, primals, ct = rest[:len(nondiff)], rest[len(nondiff)], rest[-1]
            flat, ints = _int_leaves(primals)

            def tangent_map(*float_tangents):
                tangents = _rebuild(flat, ints, float_tangents, _float0_zeros)
                if (reached is not None and self.none_where_unreached
                        and len(reached) == len(tangents)):
                    # (one array per argument) None: a tangent known to be zero
                    tangents = [t if r else None for t, r in zip(tangents, reached)]
                return rule(*static, tuple(primals), tuple(tangents))[1]

            def zeros(leaf):
                return _zeros(core.get_aval(leaf))

            _, pullback = vjp(tangent_map, *_float_leaves(flat, ints, zeros))
            return tuple(_rebuild(flat, ints, pullback(ct), zeros))

        f.defvjp(fwd, bwd)
        f.bwd_takes_reached = True
        return f(*args)


def with_jvp(impl: Callable, *partials) -> custom_jvp:
    """``impl`` with the derivative ``sum_i partials[i](*args, ans) * tangent_i`` (None: no
    derivative by that argument, as for an integer exponent): for functions computed with
    selects between approximations, clamps or bit operations, whose pieces differentiated
    one by one would give 0, NaN or half the slope at a piece's edge, the rule JAX gives the
    function. The partials get ``ans`` as the function computes it, through this rule, so
    that derivatives of the derivative follow the rules too (through ``impl``'s own
    operations, bit operations gave cbrt'' = 0 and erfinv'' = NaN); they should use such
    functions too, not raw helpers."""
    f = custom_jvp(impl)
    f.none_where_unreached = True

    @f.defjvp
    def _jvp(primals, tangents):
        ans = f(*primals)
        out = None
        for partial, t in zip(partials, tangents):
            if partial is not None and t is not None:
                term = ew.mul(t, partial(*primals, ans))
                out = term if out is None else ew.add(out, term)
        return ans, (out if out is not None else _zeros(core.get_aval(ans)))
    return f


class _Custom:
    """What the backward rule of a custom_vjp call needs (hashable by identity)."""

    def __init__(self, f: custom_vjp, with_static, in_tree, out_tree, ndiff: int):
        self.f, self.with_static = f, with_static
        self.in_tree, self.out_tree, self.ndiff = in_tree, out_tree, ndiff


@defvjp(custom_vjp_call_p)
def _custom_vjp_call_vjp(ct, invals, out, *, program, custom, nconsts, reached=None):
    f = custom.f
    if (reached is not None and any(reached[:nconsts])
            and not getattr(f, "bwd_takes_reached", False)):
        # (A custom_jvp's rule sees its closure; a custom_vjp's bwd gives cotangents only
        # for the explicit arguments, as in JAX, which raises here too.)
        _fail(f"the custom_vjp function {getattr(f.fun, '__name__', 'fun')} closes over a "
              f"value being differentiated: its backward pass gives cotangents only for its "
              f"explicit arguments. Pass the value as an argument (and adapt fwd and bwd), or "
              f"wrap the function with fusionjit.closure_convert", TypeError)
    diff = tree_util.tree_unflatten(custom.in_tree, invals[nconsts:])
    _, residuals = f.fwd(*custom.with_static(diff))
    g = tree_util.tree_unflatten(custom.out_tree, ct)
    args = custom.with_static(diff)
    skip = {j % len(args) for j in f.nondiff_argnums}
    # A custom_jvp's rule learns which arguments the differentiated inputs reach.
    extra = ({"reached": reached[nconsts:]}
             if reached is not None and getattr(f, "bwd_takes_reached", False) else {})
    cts = f.bwd(*(a for i, a in enumerate(args) if i in skip), residuals, g, **extra)
    if not isinstance(cts, (tuple, list)) or len(cts) != custom.ndiff:
        _fail(f"the custom_vjp backward pass of {getattr(f.fun, '__name__', 'fun')} must "
              f"return a tuple of {custom.ndiff} cotangents (one per differentiated "
              f"argument), got {type(cts).__name__}", TypeError)
    leaves: list = []
    for arg, c in zip(diff, cts):
        n = len(tree_util.tree_leaves(arg))
        leaves += [None] * n if c is None else tree_util.tree_leaves(c)
    return [None] * nconsts + leaves


def checkpoint(fun: Callable | None = None, *, prevent_cse: bool = True, policy=None,
               static_argnums: int | Sequence[int] = ()):
    """``jax.checkpoint`` (``remat``): under ``grad``, ``fun``'s backward pass computes
    ``fun``'s values again from its arguments instead of keeping them. Its use is a scan's
    step: the forward loop then stores each step's inputs (the carry) rather than the
    step's residuals, memory of T carries for a second forward computation of each step in
    the backward loop. Outside ``grad``, ``fun`` as it is. Arguments in ``static_argnums``
    are Python values passed as given. ``policy`` (which values to keep anyway) is
    accepted; every value is computed again (JAX's default, ``nothing_saveable``).
    ``prevent_cse`` is accepted: outside a loop the compiler may merge the two computations
    of a value (then nothing is recomputed, and nothing is lost but memory)."""
    if fun is None:
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy,
                                 static_argnums=static_argnums)
    if not callable(fun):
        _fail(f"checkpoint: fun must be callable, got {type(fun).__name__}", TypeError)
    static_nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    name = getattr(fun, "__name__", "fun")

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        static = {i % len(args) for i in static_nums if -len(args) <= i < len(args)}
        diff = [i for i in range(len(args)) if i not in static]

        def call(*values):
            full = list(args)
            for i, v in zip(diff, values):
                full[i] = v
            return fun(*full, **kwargs)

        if core.find_trace(tree_util.tree_leaves([args[i] for i in diff])) is None:
            return fun(*args, **kwargs)  # nothing to differentiate: fun as it is
        program, leaves, _, out_tree = _trace(call, tuple(args[i] for i in diff),
                                              f"checkpoint({name})")
        outs = checkpoint_p.bind(*program.consts, *leaves, program=closed_program(program))
        return tree_util.tree_unflatten(out_tree, outs)

    return wrapped


def closed_program(program: core.Program) -> core.Program:
    """``program`` with its constants as its first inputs."""
    return core.Program(program.constvars + program.invars, [], [], program.eqns,
                        program.outvars, program.name)


checkpoint_p = _ProgramCall("checkpoint", multiple_results=True)


@checkpoint_p.def_abstract_eval
def _checkpoint_abstract_eval(*avals, program):
    return program.out_avals


@lowering.register(checkpoint_p)
def _checkpoint_lower(ctx, avals_in, avals_out, *args, program):
    return lowering.lower_eqns(ctx, program, list(args))


@defvjp(checkpoint_p)
def _checkpoint_vjp(ct, invals, out, *, program):
    # The program's forward pass traced again here, in the backward pass, from its inputs.
    _, pull = vjp(lambda *a: eval_program(program, list(a)), *invals)
    return list(pull(list(ct)))


remat = checkpoint


from fusionjit._src import autodiff_forward  # noqa: E402 (forward mode, through while loops)
from fusionjit._src import autodiff_rules  # noqa: E402,F401 (registers the rules)
