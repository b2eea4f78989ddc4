"""Forward-mode differentiation through while loops, for ``jvp`` (and so ``jacfwd`` and
``linearize``). ``jvp`` is the reverse pass of the reverse pass (autodiff.py), so it fails
where reverse mode does: at a while loop whose carry changes with the differentiated inputs,
whose reverse pass needs the trip count ahead. Forward mode needs no trip count: as in JAX,
the tangent of ``while_loop(cond, body, carry)`` is a while loop over (carry, tangent) that
tests ``cond`` on the carry and steps ``(carry, tangent) -> jvp(body)(carry, tangent)``.

A program whose derivative reaches such a loop (directly, or inside a scan, a cond or a
checkpoint) is evaluated here, equation by equation. The loop and the scans, conds and
checkpoints that hold one get the forward rules below; every run of other equations between
them is differentiated as one sub-program by ``jvp`` (so by the reverse pass of the reverse
pass, as any program without such loops is). A loop's body goes through ``jvp`` too, so a
loop nested in it is met here again. Tangents are None where zero (JAX's symbolic zeros):
integer values and values the differentiated inputs do not reach get none, and a loop
carries tangents only for the carries they reach.
"""

from __future__ import annotations

import numpy as np

from fusionjit._src import autodiff, core, errors, tree_util
from fusionjit._src import dtypes as dt
from fusionjit._src.lax import control_flow as cf
from fusionjit._src.lax import elementwise as ew
from fusionjit._src.lax import reductions as red


def _zeros(x):
    aval = core.get_aval(x)
    return red.full(aval.shape, 0, aval.dtype)


def _or_zeros(tangent, like):
    return _zeros(like) if tangent is None else tangent


def _read(env: dict, v):
    return np.asarray(v.value, v.aval.dtype) if isinstance(v, core.Literal) else env[id(v)]


def _ids(vars_) -> set:
    return {id(v) for v in vars_ if isinstance(v, core.Var)}


def _sub_programs(eqn: core.Eqn):
    for value in eqn.params.values():
        for p in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(p, core.Program):
                yield p


def _holds_a_while(eqn: core.Eqn) -> bool:
    return eqn.prim is cf.while_p or any(
        _holds_a_while(e) for p in _sub_programs(eqn) for e in p.eqns)


def _needs_rule(eqn: core.Eqn, active) -> bool:
    """Whether ``eqn`` is a while loop, or a scan, cond or checkpoint holding one, that a
    derivative reaches (some operand's id is in ``active``)."""
    return (eqn.prim in _RULES and _holds_a_while(eqn)
            and any(i in active for i in _ids(eqn.invars)))


def reaches_a_while(program: core.Program) -> bool:
    """Whether a derivative of ``program`` by its inputs reaches a while loop (which the
    reverse pass of the reverse pass cannot differentiate): then ``jvp_program`` is used."""
    if not any(e.prim in _RULES and _holds_a_while(e) for e in program.eqns):
        return False  # the common case, decided without the dataflow
    active = autodiff.active_vars(program)
    return any(_needs_rule(e, active) for e in program.eqns)


def _as_tangent(t, var: core.Var):
    """A user's tangent for ``var`` in its dtype (None for an integer value: JAX's float0)."""
    if t is None or not dt.is_float(var.aval.dtype):
        return None
    t = ew.asarray_operand(t)
    got = core.get_aval(t)
    if got.shape != var.aval.shape:
        raise ValueError(errors.located(f"jvp: a tangent of shape {got.shape} for a primal of "
                                        f"shape {var.aval.shape}", errors.user_location()))
    return t if got.dtype == var.aval.dtype else ew.convert_element_type(t, var.aval.dtype)


def jvp_program(program: core.Program, args, tangents) -> tuple[list, list]:
    """``program``'s outputs at ``args`` and their tangents for the inputs' ``tangents``
    (None: zero, the tangents out too). The equations are bound again, so this runs eagerly
    or records into the enclosing trace."""
    env = {id(v): val for v, val in zip(program.constvars, program.consts)}
    tan: dict = {}
    for v, val, t in zip(program.invars, args, tangents):
        env[id(v)] = val
        if (t := _as_tangent(t, v)) is not None:
            tan[id(v)] = t
    last_read = {i: len(program.eqns) for i in _ids(program.outvars)}
    for n, e in enumerate(program.eqns):
        for i in _ids(e.invars):
            last_read[i] = max(last_read.get(i, 0), n)

    run: list = []
    for n, eqn in enumerate(program.eqns):
        if eqn.prim in _RULES and _holds_a_while(eqn):
            # The run before it is differentiated first: whether the derivative reaches
            # this loop is known once its operands' tangents are.
            _jvp_run(run, env, tan, {i for i, at in last_read.items() if at >= n})
            run = []
        if not _needs_rule(eqn, tan):
            run.append(eqn)
            continue
        outs, t_outs = _RULES[eqn.prim](eqn, [_read(env, v) for v in eqn.invars],
                                        [tan.get(id(v)) for v in eqn.invars])
        _bind(eqn.outvars, outs, t_outs, env, tan)
    _jvp_run(run, env, tan, _ids(program.outvars))
    return ([_read(env, v) for v in program.outvars],
            [tan.get(id(v)) for v in program.outvars])


def _bind(vars_, outs, t_outs, env: dict, tan: dict) -> None:
    for v, out, t in zip(vars_, outs, t_outs):
        env[id(v)] = out
        if t is not None:
            tan[id(v)] = t


def _jvp_run(eqns: list, env: dict, tan: dict, read_later: set) -> None:
    """Differentiates ``eqns`` (a run of equations of one program) as one sub-program: its
    inputs are what they read from before, its outputs what is read after them."""
    if not eqns:
        return
    defined = _ids(v for e in eqns for v in e.outvars)
    inputs = list({id(v): v for e in eqns for v in e.invars
                   if isinstance(v, core.Var) and id(v) not in defined}.values())
    outputs = [v for e in eqns for v in e.outvars if id(v) in read_later]
    run = core.Program(inputs, [], [], eqns, outputs, "jvp")
    outs, t_outs = jvp_call(run, [env[id(v)] for v in inputs],
                            [tan.get(id(v)) for v in inputs])
    _bind(outputs, outs, t_outs, env, tan)


def jvp_call(program: core.Program, args, tangents) -> tuple[list, list]:
    """``program`` (closed: no constants) at ``args``, and the tangents of its outputs for
    the inputs' ``tangents`` (None: zero, the tangents out too), by ``jvp``: by the reverse
    pass of the reverse pass unless a while loop in it needs ``jvp_program``."""
    which = [k for k, t in enumerate(tangents) if t is not None]
    if not which:
        return autodiff.eval_program(program, list(args)), [None] * len(program.outvars)
    # The inputs without a tangent become constants: the derivative is by the others only.
    fixed = [k for k in range(len(args)) if k not in which]
    varying = [program.invars[k] for k in which]
    part = core.Program(varying, [program.invars[k] for k in fixed],
                        [args[k] for k in fixed], program.eqns, program.outvars, program.name)
    primals = tuple(args[k] for k in which)
    outs, t_outs = autodiff.jvp_traced(
        part, list(primals), tree_util.tree_structure(primals),
        tree_util.tree_structure([0] * len(program.outvars)),
        tuple(tangents[k] for k in which))
    reached = autodiff.active_vars(part)
    return list(outs), [t if id(v) in reached else None
                        for v, t in zip(program.outvars, t_outs)]


# --- the rules: (eqn, operands, their tangents) -> (outputs, their tangents) --------------

def _loop_tangents(body: core.Program, carries, tangents) -> tuple[list[int], set]:
    """The positions of the carries of a loop whose step is ``body`` that carry a tangent:
    those the tangents of its operands (None: zero, one per input of ``body``) reach after
    any number of steps; and the ids of the values of ``body`` they reach."""
    seeds = _ids(v for v, t in zip(body.invars, tangents) if t is not None)
    reached = autodiff.reached_in_loop(body, carries, seeds)
    return [k for k, c in enumerate(carries) if id(c) in reached], reached


def _spread(moving: list[int], t_moving, n: int) -> list:
    """The tangents of a loop's ``n`` carries: ``t_moving`` at the positions ``moving``,
    None (zero) elsewhere."""
    out = [None] * n
    for k, t in zip(moving, t_moving):
        out[k] = t
    return out


def _while(eqn, invals, tangents):
    cond, body = eqn.params["cond_program"], eqn.params["body_program"]
    nc, nb = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
    cond_consts, body_consts, init = invals[:nc], invals[nc:nc + nb], invals[nc + nb:]
    t_consts, t_init = tangents[nc:nc + nb], tangents[nc + nb:]
    moving, _ = _loop_tangents(body, body.invars[nb:], [*t_consts, *t_init])

    def cond_fun(state):
        carry, _ = state
        return autodiff.eval_program(cond, [*cond_consts, *carry])[0]

    def body_fun(state):
        carry, t_moving = state
        outs, t_outs = jvp_call(body, [*body_consts, *carry],
                                [*t_consts, *_spread(moving, t_moving, len(carry))])
        return outs, [_or_zeros(t_outs[k], outs[k]) for k in moving]

    t0 = [_or_zeros(t_init[k], init[k]) for k in moving]
    outs, t_moving = cf.while_loop(cond_fun, body_fun, (list(init), t0))
    return outs, _spread(moving, t_moving, len(outs))


def _scan(eqn, invals, tangents):
    # A scan over (carry, tangents of the moving carries) and (xs, their tangents), whose
    # step is the body's jvp; the ys get tangents where the body's outputs are reached.
    body, nk, nc = eqn.params["program"], eqn.params["num_consts"], eqn.params["num_carry"]
    consts, init, xs = invals[:nk], invals[nk:nk + nc], invals[nk + nc:]
    t_consts, t_init, t_xs = tangents[:nk], tangents[nk:nk + nc], tangents[nk + nc:]
    moving, reached = _loop_tangents(body, body.invars[nk:nk + nc], tangents)
    ys_moving = [j for j, v in enumerate(body.outvars[nc:]) if id(v) in reached]
    xs_moving = [j for j, t in enumerate(t_xs) if t is not None]

    def step(state, x_all):
        (carry, t_moving), (x, t_x) = state, x_all
        outs, t_outs = jvp_call(body, [*consts, *carry, *x],
                                [*t_consts, *_spread(moving, t_moving, nc),
                                 *_spread(xs_moving, t_x, len(x))])
        ys, t_ys = outs[nc:], t_outs[nc:]
        return ((outs[:nc], [_or_zeros(t_outs[k], outs[k]) for k in moving]),
                (ys, [_or_zeros(t_ys[j], ys[j]) for j in ys_moving]))

    t0 = [_or_zeros(t_init[k], init[k]) for k in moving]
    (final, t_final), (ys, t_ys) = cf.scan(
        step, (list(init), t0), (list(xs), [t_xs[j] for j in xs_moving]),
        length=eqn.params["length"], reverse=eqn.params["reverse"],
        unroll=eqn.params["unroll"])
    return [*final, *ys], [*_spread(moving, t_final, nc), *_spread(ys_moving, t_ys, len(ys))]


def _cond(eqn, invals, tangents):
    # A switch on the same index over the branches' jvps; an output gets a tangent where
    # some branch computes it from an operand with one (the others give zeros).
    branches, nconsts = eqn.params["branches"], eqn.params["nconsts"]
    total = sum(nconsts)
    given = [k for k, t in enumerate(tangents[1:]) if t is not None]
    starts = [sum(nconsts[:b]) for b in range(len(branches))]

    def mine(b, values):  # branch b's inputs among every branch's constants and operands
        return [*values[starts[b]:starts[b] + nconsts[b]], *values[total:]]

    moving = set()
    for b, branch in enumerate(branches):
        seeds = _ids(v for v, t in zip(branch.invars, mine(b, tangents[1:])) if t is not None)
        reached = autodiff.active_vars(branch, seeds)
        moving |= {n for n, v in enumerate(branch.outvars) if id(v) in reached}
    moving = sorted(moving)

    def jvp_branch(b):
        def run(values, t_given):
            outs, t_outs = jvp_call(branches[b], mine(b, values),
                                    mine(b, _spread(given, t_given, len(values))))
            return outs, [_or_zeros(t_outs[n], outs[n]) for n in moving]
        return run

    outs, t_moving = cf.switch(invals[0], [jvp_branch(b) for b in range(len(branches))],
                               list(invals[1:]), [tangents[1 + k] for k in given])
    return outs, _spread(moving, t_moving, len(outs))


def _checkpoint(eqn, invals, tangents):
    # Forward mode keeps no residuals, so a checkpoint has nothing to change: its program
    # is differentiated where it stands.
    return jvp_program(eqn.params["program"], invals, tangents)


_RULES = {cf.while_p: _while, cf.scan_p: _scan, cf.cond_p: _cond,
          autodiff.checkpoint_p: _checkpoint}
