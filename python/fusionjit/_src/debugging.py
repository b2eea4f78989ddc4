"""``fusionjit.debug``: ``print`` and ``callback``, as ``jax.debug``. Outside a trace they
call at once with the values. Inside one (``jit``, a loop, ``vmap``, ``grad``) they record a
``debug_callback`` equation; compiled, it is a host callback (a custom call the passes keep,
in program order: runtime/host_callback.h) that calls back into Python with the values each
time the program runs, on the CPU backend. Under ``vmap`` the function is called once per
example, in order, as JAX's; under ``grad`` it sees the forward pass's values."""

from __future__ import annotations

import builtins
from typing import Callable

import numpy as np

from fusionjit._src import batching, core, errors, lowering, tree_util


def _concrete(leaf):
    """A leaf as NumPy (a 0-d array as a NumPy scalar, so that format specs apply)."""
    if hasattr(leaf, "__array__") and not isinstance(leaf, np.ndarray):
        leaf = np.asarray(leaf)
    return leaf[()] if isinstance(leaf, np.ndarray) and leaf.ndim == 0 else leaf


class _HostFunction:
    """What a ``debug_callback`` equation calls with its operands' values (a list): hashable
    by identity, as an equation parameter is."""

    def __init__(self, call: Callable):
        self.call = call

    def __call__(self, leaves) -> None:
        self.call(leaves)


class _CallbackPrimitive(core.Primitive):
    """Outside any trace (a batched or differentiated program run eagerly) the callback is
    called at once."""

    def bind(self, *args, **params):
        if core.find_trace(args) is None:
            params["callback"](list(args))
            return []
        return super().bind(*args, **params)


debug_callback_p = _CallbackPrimitive("debug_callback", multiple_results=True)
debug_callback_p.def_abstract_eval(lambda *avals, callback: [])
lowering.EFFECTFUL.add(debug_callback_p)


@lowering.register(debug_callback_p)
def _lower(ctx, avals, out_avals, *operands, callback):
    return ctx.host_callback(callback, operands, avals, [])


@batching.defbatch(debug_callback_p)
def _batch(size, values, batched, *, callback):
    def each(leaves):
        for i in range(size):
            callback([x[i] if b else x for x, b in zip(leaves, batched)])
    return debug_callback_p.bind(*values, callback=_HostFunction(each)), []


def callback(fn: Callable, *args, ordered: bool = False, **kwargs) -> None:
    """Calls ``fn(*args, **kwargs)`` with the arrays as NumPy values (0-d ones as NumPy
    scalars): at once outside a trace; inside ``jit`` each time the program runs, in
    program order (``ordered`` is accepted for JAX's API: calls are always in order)."""
    del ordered
    leaves, tree = tree_util.tree_flatten((args, kwargs))

    def call(values) -> None:
        a, k = tree_util.tree_unflatten(tree, [_concrete(x) for x in values])
        fn(*a, **k)

    if core.find_trace(leaves) is None:
        call(leaves)
        return
    for leaf in leaves:
        try:
            core.get_aval(leaf)
        except TypeError:
            raise TypeError(errors.located(
                f"fusionjit.debug.callback/print inside a traced function takes arrays, "
                f"numbers or pytrees of them, not {type(leaf).__name__}",
                errors.user_location(3))) from None
    debug_callback_p.bind(*leaves, callback=_HostFunction(call))


def print(fmt: str, *args, ordered: bool = False, **kwargs) -> None:  # noqa: A001
    """Prints ``fmt.format(*args, **kwargs)`` with the arrays' values."""
    callback(lambda *a, **k: builtins.print(fmt.format(*a, **k)), *args, ordered=ordered,
             **kwargs)
