"""Smaller top-level functions of JAX's API: ``linear_transpose``, ``custom_gradient``,
``closure_convert``, ``named_call``, ``ensure_compile_time_eval``, ``typeof``,
``print_environment_info``, ``default_matmul_precision`` and ``checkpoint_policies``, each
built on the transformations of autodiff.py and the tracing of core.py."""

from __future__ import annotations

import contextlib
import functools
import platform
import sys
import types
from typing import Callable

import numpy as np

from fusionjit._src import core, errors, tracing, tree_util
from fusionjit._src import dtypes as dt
from fusionjit._src.autodiff import custom_vjp, eval_program, vjp
from fusionjit._src.lax import reductions as red


def _fail(message: str, exc_type=TypeError):
    raise exc_type(errors.located(message, errors.user_location()))


def _aval_of(x) -> core.ShapedArray:
    aval = getattr(x, "aval", None)
    if isinstance(aval, core.ShapedArray):
        return aval
    if hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, core.Tracer):
        return core.ShapedArray(x.shape, dt.canonicalize(x.dtype),
                                getattr(x, "weak_type", False))
    return core.get_aval(x)


def linear_transpose(fun: Callable, *primals, reduce_axes=()):
    """``jax.linear_transpose``: the transpose of the linear function ``fun`` at arguments
    shaped like ``primals`` (arrays or ShapeDtypeStructs; only their shapes and dtypes
    count). The result maps a cotangent of ``fun``'s output to a tuple of cotangents, one
    per primal. ``fun`` must be linear (not checked, as in JAX) in floating-point
    arguments."""
    if not callable(fun):
        _fail(f"linear_transpose: fun must be callable, got {type(fun).__name__}")
    if reduce_axes:
        _fail("linear_transpose: reduce_axes is not supported", NotImplementedError)
    leaves, tree = tree_util.tree_flatten(primals)
    avals = [_aval_of(x) for x in leaves]
    for a in avals:
        if not dt.is_float(a.dtype):
            _fail(f"linear_transpose only supports floating-point inputs, got {a.str_short()}")
    zeros = tree_util.tree_unflatten(tree, [red.full(a.shape, 0, a.dtype) for a in avals])
    out, pull = vjp(fun, *zeros)
    out_leaves, out_tree = tree_util.tree_flatten(out)
    out_avals = [core.get_aval(o) for o in out_leaves]
    for a in out_avals:
        if not dt.is_float(a.dtype):
            _fail(f"linear_transpose only supports floating-point outputs, got "
                  f"{a.str_short()}")

    def transposed(out_cotangent):
        ct_leaves, ct_tree = tree_util.tree_flatten(out_cotangent)
        if ct_tree != out_tree:
            _fail(f"linear_transpose: the cotangent's structure {ct_tree} differs from the "
                  f"output's {out_tree}")
        for c, a in zip(ct_leaves, out_avals):
            got = _aval_of(c)
            if got.shape != a.shape or got.dtype != a.dtype:
                _fail(f"linear_transpose: cotangent {got.str_short()} does not match the "
                      f"function's output {a.str_short()}")
        return pull(out_cotangent)

    return transposed


def custom_gradient(fun: Callable) -> Callable:
    """``jax.custom_gradient``: ``fun`` returns ``(value, vjp)``, where ``vjp(g)`` gives
    the tuple of cotangents of ``fun``'s positional arguments for the output cotangent
    ``g``; the result returns ``value`` and differentiates by ``vjp``."""
    if not callable(fun):
        _fail(f"custom_gradient: fun must be callable, got {type(fun).__name__}")

    def _pair(out):
        if not isinstance(out, tuple) or len(out) != 2 or not callable(out[1]):
            _fail("custom_gradient: the function must return a pair (value, vjp function)")
        return out

    @functools.wraps(fun)
    def value_only(*args):
        return _pair(fun(*args))[0]

    wrapped = custom_vjp(value_only)

    def fwd(*args):
        return _pair(fun(*args))

    def bwd(rule, g):
        cts = rule(g)
        return tuple(cts) if isinstance(cts, (tuple, list)) else (cts,)

    wrapped.defvjp(fwd, bwd)
    return functools.wraps(fun)(lambda *args: wrapped(*args))


def closure_convert(fun: Callable, *example_args):
    """``jax.closure_convert``: ``(converted, consts)``, where ``converted(*args, *consts)``
    computes ``fun(*args)`` for arguments shaped like ``example_args`` and ``consts`` are
    the traced floating-point values ``fun`` closes over (hoisted out of its closure, so
    that a ``custom_vjp`` can differentiate by them); concrete values stay closed over."""
    if not callable(fun):
        _fail(f"closure_convert: fun must be callable, got {type(fun).__name__}")
    leaves, in_tree = tree_util.tree_flatten(example_args)
    avals = [_aval_of(x) for x in leaves]
    out_tree: list = []

    def flat(*xs):
        out = fun(*tree_util.tree_unflatten(in_tree, list(xs)))
        out_leaves, tree = tree_util.tree_flatten(out)
        out_tree.append(tree)
        return out_leaves

    program = tracing.trace_to_program(flat, avals, f"closure_convert({fun.__name__})"
                                       if hasattr(fun, "__name__") else "closure_convert")
    hoist = [isinstance(c, core.Tracer) and dt.is_float(core.get_aval(c).dtype)
             for c in program.consts]
    hoisted = [c for c, h in zip(program.consts, hoist) if h]
    closed = core.Program(program.constvars + program.invars, [], [], program.eqns,
                          program.outvars, program.name)

    def converted(*args):
        n = len(args) - len(hoisted)
        if n < 0:
            _fail(f"closure_convert: the converted function takes the arguments and then "
                  f"{len(hoisted)} hoisted values, got {len(args)} arguments")
        arg_leaves, tree = tree_util.tree_flatten(tuple(args[:n]))
        if tree != in_tree:
            _fail(f"closure_convert: arguments of structure {tree}, traced for {in_tree}")
        it = iter(args[n:])
        consts = [next(it) if h else c for c, h in zip(program.consts, hoist)]
        return tree_util.tree_unflatten(out_tree[0], eval_program(closed, consts + arg_leaves))

    return converted, hoisted


def named_call(fun: Callable, *, name: str | None = None) -> Callable:
    """``jax.named_call``: ``fun`` as it is (JAX names its part of the program for
    profiles; fusionjit's programs carry source locations instead)."""
    if not callable(fun):
        _fail(f"named_call: fun must be callable, got {type(fun).__name__}")

    @functools.wraps(fun)
    def named(*args, **kwargs):
        return fun(*args, **kwargs)
    if name is not None:
        named.__name__ = named.__qualname__ = name
    return named


@contextlib.contextmanager
def ensure_compile_time_eval():
    """``jax.ensure_compile_time_eval``: inside, operations on concrete values run now
    (eagerly), even while a function is traced by ``jit``, so their results are concrete
    (usable as Python values, shapes, ``if`` conditions). Operations on traced values are
    still traced."""
    with core.compile_time_eval():
        yield


def typeof(x) -> core.ShapedArray:
    """``jax.typeof``: the abstract value (shape, dtype, weak type) of an array, a traced
    value or a Python scalar."""
    return core.get_aval(x)


def print_environment_info(return_string: bool = False):
    """``jax.print_environment_info``: the versions of fusionjit, Python and NumPy, the
    platform and the devices (returned as a string with ``return_string=True``)."""
    import fusionjit
    lines = [f"fusionjit:    {fusionjit.__version__}",
             f"numpy:        {np.__version__}",
             f"python:       {sys.version}",
             f"platform:     {platform.platform()}",
             f"default backend: {fusionjit.default_backend()}",
             "devices:      " + "; ".join(fusionjit.devices())]
    try:
        import ml_dtypes
        lines.insert(2, f"ml_dtypes:    {ml_dtypes.__version__}")
    except ImportError:
        pass
    text = "\n".join(lines) + "\n"
    if return_string:
        return text
    print(text, end="")
    return None


@contextlib.contextmanager
def default_matmul_precision(new_val=None):
    """``jax.default_matmul_precision``: accepted and without effect: fusionjit computes
    every contraction in its operands' precision (float32 as float32, JAX's "highest")."""
    if new_val is not None and not isinstance(new_val, str):
        _fail(f"default_matmul_precision: expected a precision name such as 'highest', "
              f"got {new_val!r}")
    yield


# --- checkpoint policies ----------------------------------------------------------------------
# The policies JAX users pass to ``checkpoint(policy=...)``: ``policy(prim, *avals, **params)``
# says whether a value may be kept for the backward pass. fusionjit's checkpoint accepts any
# and recomputes every value (the policy nothing_saveable), which is always correct.

def _everything_saveable(*_, **__) -> bool:
    return True


def _nothing_saveable(*_, **__) -> bool:
    return False


def _dots_saveable(prim, *_, **__) -> bool:
    return getattr(prim, "name", "") in ("dot_general", "conv_general_dilated")


def _dots_with_no_batch_dims_saveable(prim, *_, **params) -> bool:
    if getattr(prim, "name", "") != "dot_general":
        return False
    dn = params.get("dimension_numbers")
    return dn is None or not (dn[1][0] or dn[1][1])


def _save_only_these_names(*names):
    return _nothing_saveable


def _save_any_names_but_these(*names):
    return _nothing_saveable


def _save_from_both_policies(policy_1, policy_2):
    def policy(*args, **kwargs):
        return bool(policy_1(*args, **kwargs) or policy_2(*args, **kwargs))
    return policy


def _offload_policy(*_, **__):
    return _nothing_saveable


checkpoint_policies = types.SimpleNamespace(
    everything_saveable=_everything_saveable,
    nothing_saveable=_nothing_saveable,
    dots_saveable=_dots_saveable,
    checkpoint_dots=_dots_saveable,
    dots_with_no_batch_dims_saveable=_dots_with_no_batch_dims_saveable,
    checkpoint_dots_with_no_batch_dims=_dots_with_no_batch_dims_saveable,
    save_only_these_names=_save_only_these_names,
    save_any_names_but_these=_save_any_names_but_these,
    save_anything_except_these_names=_save_any_names_but_these,
    save_from_both_policies=_save_from_both_policies,
    offload_dot_with_no_batch_dims=_offload_policy,
    save_and_offload_only_these_names=_offload_policy,
)
