"""Host callbacks: Python functions a compiled program calls with its values, as JAX's
``pure_callback``, ``io_callback`` and ``debug.callback`` (debugging.py). Each records a
``host_callback`` equation; compiled, it is a custom call the passes keep and an effect
token chains in program order, through loops and branches (lowering.py,
runtime/host_callback.h), on the CPU backend. Outside a trace the function is called at
once. The function gets NumPy arrays (JAX passes its arrays; NumPy's functions take either)
and returns values of ``result_shape_dtypes``' shapes and dtypes.

Unlike JAX, a ``pure_callback`` whose results nothing reads still runs: every host callback
is kept, in order."""

from __future__ import annotations

from typing import Callable

import numpy as np

from fusionjit._src import autodiff, batching, core, errors, lowering, tree_util
from fusionjit._src import dtypes as dt

_VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                 "legacy_vectorized")


class HostFunction:
    """What a ``host_callback`` equation calls: ``call(values)`` with its operands' values (a
    list of NumPy arrays) returns its results (a list), checked against ``result_avals`` and
    converted to their dtypes. Hashable by identity, as an equation parameter is.
    ``source`` is the user's line, for errors."""

    def __init__(self, call: Callable, result_avals=(), source: str = ""):
        self.call, self.result_avals, self.source = call, tuple(result_avals), source

    def __call__(self, values) -> list:
        outs = self.call(values)
        if not self.result_avals:
            return []
        leaves = list(outs)
        if len(leaves) != len(self.result_avals):
            raise TypeError(errors.located(
                f"the callback returned {len(leaves)} values where result_shape_dtypes has "
                f"{len(self.result_avals)}", self.source))
        results = []
        for k, (x, aval) in enumerate(zip(leaves, self.result_avals)):
            x = np.asarray(x, dtype=aval.dtype)
            if not x.flags.c_contiguous:
                x = x.copy()  # (np.ascontiguousarray would make a 0-d array 1-d)
            if x.shape != aval.shape:
                raise ValueError(errors.located(
                    f"the callback's result {k} has shape {x.shape}, but result_shape_dtypes "
                    f"says {aval.str_short()}", self.source))
            results.append(x)
        return results


def _host_value(x):
    """An argument as the function gets it: arrays and numbers as NumPy arrays of the dtype
    a traced program would give them (float32 for float64 without x64)."""
    try:
        aval = core.get_aval(x)
    except TypeError:
        return x  # (only outside a trace: a string, say)
    return np.asarray(x, aval.dtype)


class _CallbackPrimitive(core.Primitive):
    """Outside any trace (a batched or differentiated program run eagerly) the function is
    called at once."""

    def bind(self, *args, **params):
        if core.find_trace(args) is None:
            from fusionjit._src.interop import device_put
            return [device_put(x) for x in params["callback"]([_host_value(a) for a in args])]
        return super().bind(*args, **params)


host_callback_p = _CallbackPrimitive("host_callback", multiple_results=True)
host_callback_p.def_abstract_eval(lambda *avals, callback, vmap_method: list(callback.result_avals))
lowering.EFFECTFUL.add(host_callback_p)


@lowering.register(host_callback_p)
def _lower(ctx, avals, out_avals, *operands, callback, vmap_method):
    return ctx.host_callback(callback, operands, avals, out_avals)


@batching.defbatch(host_callback_p)
def _batch(size, values, batched, *, callback, vmap_method):
    """``vmap_method`` as JAX's: ``sequential`` calls once per example and stacks the
    results; ``expand_dims`` once, the unbatched operands with a leading axis of one;
    ``broadcast_all`` once, those tiled; ``legacy_vectorized`` once, those as they are.
    (debug.callback's are sequential, with no results.)"""
    if vmap_method not in _VMAP_METHODS:
        raise NotImplementedError(errors.located(
            f"vmap of a pure_callback needs its vmap_method: one of {', '.join(_VMAP_METHODS)} "
            f"(got {vmap_method!r}), as JAX's", callback.source))
    out_avals = tuple(a.update(shape=(size, *a.shape)) for a in callback.result_avals)
    if vmap_method.startswith("sequential"):
        def call(leaves):
            outs = [callback([x[i] if b else x for x, b in zip(leaves, batched)])
                    for i in range(size)]
            return [np.stack(r) for r in zip(*outs)] if out_avals else []
    else:
        def call(leaves):
            def widen(x, b):
                if b or vmap_method == "legacy_vectorized":
                    return x
                x = x[None]
                return np.broadcast_to(x, (size, *x.shape[1:])) \
                    if vmap_method == "broadcast_all" else x
            return callback.call([widen(x, b) for x, b in zip(leaves, batched)])
    batched_fn = HostFunction(call, out_avals, callback.source)
    outs = host_callback_p.bind(*values, callback=batched_fn, vmap_method=vmap_method)
    return outs, [True] * len(outs)


@autodiff.defvjp(host_callback_p)
def _vjp(ct, invals, out, *, callback, vmap_method):
    raise ValueError(errors.located(
        "pure callbacks do not support differentiation (as in JAX); wrap the callback in "
        "fusionjit.custom_jvp or custom_vjp to give it a derivative", callback.source))


def bind(call: Callable, leaves, result_avals, vmap_method, source: str) -> list:
    """Records (or, outside a trace, makes) a host callback of ``call`` on ``leaves``."""
    if core.find_trace(leaves) is None:  # (values of any type are fine here)
        from fusionjit._src.interop import device_put
        fn = HostFunction(call, result_avals, source)
        return [device_put(x) for x in fn([_host_value(x) for x in leaves])]
    for leaf in leaves:
        try:
            core.get_aval(leaf)
        except TypeError:
            raise TypeError(errors.located(
                f"a host callback (pure_callback, io_callback, debug.callback/print) takes "
                f"arrays, numbers or pytrees of them, not {type(leaf).__name__}",
                source)) from None
    return host_callback_p.bind(*leaves, callback=HostFunction(call, result_avals, source),
                                vmap_method=vmap_method)


def _result_avals(result_shape_dtypes, what: str, source: str):
    leaves, tree = tree_util.tree_flatten(result_shape_dtypes)
    avals = []
    for x in leaves:
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            raise TypeError(errors.located(
                f"{what}: result_shape_dtypes must be a pytree of values with a shape and a "
                f"dtype (fusionjit.ShapeDtypeStruct), got {type(x).__name__}", source))
        avals.append(core.ShapedArray(x.shape, dt.canonicalize(x.dtype)))
    return avals, tree


def _calling(callback: Callable, tree, out_tree, source: str) -> Callable:
    """``callback`` applied to values (a list) rebuilt as its arguments; its result's leaves
    (it must have ``out_tree``'s structure)."""
    def call(values):
        args, kwargs = tree_util.tree_unflatten(tree, values)
        out = callback(*args, **kwargs)
        leaves, got = tree_util.tree_flatten(out)
        if got != out_tree:
            raise TypeError(errors.located(
                f"the callback returned a value of structure {got}, where "
                f"result_shape_dtypes has {out_tree}", source))
        return leaves
    return call


def pure_callback(callback: Callable, result_shape_dtypes, *args, sharding=None,
                  vmap_method: str | None = None, **kwargs):
    """``jax.pure_callback``: ``callback(*args, **kwargs)`` computed by Python, called by the
    compiled program with the arguments' values as NumPy arrays; it returns values of
    ``result_shape_dtypes``' structure, shapes and dtypes. ``vmap_method``: see
    ``_batch``. Not differentiable (wrap it in ``custom_jvp``/``custom_vjp``)."""
    del sharding  # one device
    source = errors.user_location(2)
    if vmap_method is not None and vmap_method not in _VMAP_METHODS:
        raise ValueError(errors.located(
            f"vmap_method must be one of {', '.join(_VMAP_METHODS)} or None, got "
            f"{vmap_method!r}", source))
    avals, out_tree = _result_avals(result_shape_dtypes, "pure_callback", source)
    leaves, tree = tree_util.tree_flatten((args, kwargs))
    outs = bind(_calling(callback, tree, out_tree, source), leaves, avals, vmap_method, source)
    return tree_util.tree_unflatten(out_tree, outs)


def io_callback(callback: Callable, result_shape_dtypes, *args, sharding=None,
                ordered: bool = False, **kwargs):
    """``jax.experimental.io_callback``: as ``pure_callback``, for a function with effects:
    every call runs, in program order (``ordered`` is accepted: calls are always in order).
    Under ``vmap`` it is called once per example."""
    del sharding, ordered
    source = errors.user_location(2)
    avals, out_tree = _result_avals(result_shape_dtypes, "io_callback", source)
    leaves, tree = tree_util.tree_flatten((args, kwargs))
    outs = bind(_calling(callback, tree, out_tree, source), leaves, avals, "sequential", source)
    return tree_util.tree_unflatten(out_tree, outs)
