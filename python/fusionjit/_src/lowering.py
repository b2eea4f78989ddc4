"""Lowering: a traced Program becomes a C++ Module, one builder call per equation.
Lowering rules live beside their primitives (``_src/lax``) and are registered here."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from fusionjit import _core
from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src import errors

_RULES: dict[core.Primitive, Callable] = {}

# Primitives with an effect beyond their results (host callbacks): their equations are
# chained, in program order, by a token each takes and gives (LoweringContext.token), which
# loops carry and branches pass through, so that no schedule reorders them.
EFFECTFUL: set = set()


def register(prim: core.Primitive):
    def decorator(fn):
        _RULES[prim] = fn
        return fn
    return decorator


class LoweringContext:
    """What a lowering rule sees: the computation builder and the equation's location."""

    def __init__(self, module_builder, computation, source: str = ""):
        self.module_builder = module_builder
        self.computation = computation
        self.source = source
        self._combiners: dict[tuple[str, str], Any] = {}
        self.token = None  # the last effect's token in this computation (None: none yet)

    def op(self, opcode: str, operands, dtype=None, dims=None, called=(), **attrs):
        """Adds an instruction; ``dtype``/``dims`` give the result shape where the operands do
        not determine it (convert, broadcast, reshape, iota, argmax)."""
        return self.computation.add(
            opcode, list(operands), None if dtype is None else dt.ir_name(dtype),
            None if dims is None else [int(d) for d in dims], attrs, list(called), self.source)

    def constant(self, value) -> Any:
        value = np.asarray(value)
        if not value.flags.c_contiguous:
            value = value.copy()  # (np.ascontiguousarray would turn 0-d into 1-d)
        return self.computation.constant(value)

    def scalar(self, value, dtype) -> Any:
        return self.constant(np.asarray(value, dtype=dtype))

    def host_callback(self, fn: Callable, operands, operand_avals, result_avals) -> list:
        """Calls ``fn`` (a list of NumPy arrays, the operands' values, to a list of arrays
        of ``result_avals``) from the compiled program, on the CPU, after the effects
        before it (``token``); returns its results' instructions. The module holds ``fn``
        while it, its copies or its executables live."""
        def call(values):
            # (The token comes last among the operands and goes first among the results.)
            return [np.zeros((), np.int32)] + list(fn(values[:-1]) or [])

        def specs(avals):
            return [(dt.ir_name(a.dtype), list(a.shape)) for a in avals]

        results = specs((TOKEN_AVAL, *result_avals))
        callback = self.module_builder.host_callback(
            call, specs((*operand_avals, TOKEN_AVAL)), results)
        outs = self.computation.custom_call(f"host_callback.{callback}",
                                            [*operands, self.effect_token()], results,
                                            self.source)
        self.token = outs[0]
        return outs[1:]

    def effect_token(self):
        """The token the next effect takes (a constant before the first)."""
        if self.token is None:
            self.token = self.scalar(0, np.int32)
        return self.token

    def combiner(self, opcode: str, dtype) -> Any:
        key = (opcode, dt.ir_name(dtype))
        if key not in self._combiners:
            self._combiners[key] = self.module_builder.scalar_combiner(*key)
        return self._combiners[key]


TOKEN_AVAL = core.ShapedArray((), np.int32)


def has_effects(program) -> bool:
    """Whether ``program`` (or a program in its equations' parameters: a loop's body, a
    branch) has an equation of EFFECTFUL."""
    def within(value) -> bool:
        if isinstance(value, core.Program):
            return has_effects(value)
        return isinstance(value, tuple) and any(within(v) for v in value)
    return any(e.prim in EFFECTFUL or any(within(v) for v in e.params.values())
               for e in program.eqns)


def lower_program(program: core.Program, name: str) -> Any:
    """Returns the verified ``_core.Module`` for ``program``."""
    mb = _core.ModuleBuilder(name)
    comp = mb.entry
    ctx = LoweringContext(mb, comp)
    args = [comp.parameter(i, dt.ir_name(v.aval.dtype), list(v.aval.shape), f"arg{i}")
            for i, v in enumerate(program.invars)]
    outs = lower_eqns(ctx, program, args)
    comp.set_root(comp.add("tuple", outs))
    return mb.build()


def lower_eqns(ctx: LoweringContext, program: core.Program, args) -> list:
    """Lowers ``program``'s equations into ``ctx.computation``, its inputs bound to the
    instructions ``args`` (its constants become constants); returns its outputs."""
    env: dict[int, Any] = {}
    for v, a in zip(program.invars, args):
        env[id(v)] = a
    for v, value in zip(program.constvars, program.consts):
        env[id(v)] = ctx.constant(np.asarray(value, dtype=v.aval.dtype))

    def read(x):
        if isinstance(x, core.Literal):
            return ctx.scalar(x.value, x.aval.dtype)
        return env[id(x)]

    saved_source = ctx.source
    for eqn in program.eqns:
        rule = _RULES.get(eqn.prim)
        if rule is None:
            raise NotImplementedError(errors.located(
                f"fusionjit cannot compile primitive {eqn.prim.name} yet", eqn.source))
        ctx.source = eqn.source
        try:
            out = rule(ctx, [_aval(x) for x in eqn.invars], [v.aval for v in eqn.outvars],
                       *[read(x) for x in eqn.invars], **eqn.params)
        except _core.FusionJitError as e:
            raise TypeError(errors.located(str(e), eqn.source)) from None
        outs = out if eqn.prim.multiple_results else [out]
        for v, instr in zip(eqn.outvars, outs):
            _check_shape(eqn, v.aval, instr)
            env[id(v)] = instr
    ctx.source = saved_source
    return [read(v) for v in program.outvars]


def lower_subcomputation(ctx: LoweringContext, program: core.Program, name: str,
                         wrap=None):
    """A nested computation (a loop body or condition, a branch) computing ``program``
    from one tuple parameter holding its inputs. ``wrap(sub_ctx, param_elements)`` may
    replace the plain lowering: it returns the root's operands. Returns the computation."""
    comp = ctx.module_builder.add_computation(name)
    avals = [v.aval for v in program.invars]
    param = comp.tuple_parameter(0, [(dt.ir_name(a.dtype), list(a.shape)) for a in avals], "p")
    sub = LoweringContext(ctx.module_builder, comp, ctx.source)
    sub._combiners = ctx._combiners  # one combiner computation per (op, dtype) per module
    elements = [sub.op("get-tuple-element", [param], index=i) for i in range(len(avals))]
    outs = wrap(sub, elements) if wrap else lower_eqns(sub, program, elements)
    comp.set_root(sub.op("tuple", outs) if isinstance(outs, list) else outs)
    return comp


def _check_shape(eqn: core.Eqn, aval: core.ShapedArray, instr) -> None:
    """The C++ shape rules must agree with the Python ones: a disagreement is a bug in
    fusionjit (e.g. an overflow in one of them), never something to run with."""
    want = (dt.ir_name(aval.dtype), aval.shape)
    if instr.shape != want:
        raise _core.InternalError(errors.located(
            f"internal error in fusionjit (please report it): {eqn.prim.name} has shape "
            f"{aval.str_short()} by its Python rule but {instr.shape[0]}"
            f"{list(instr.shape[1])} in the C++ IR", eqn.source))


def _aval(x) -> core.ShapedArray:
    return x.aval
