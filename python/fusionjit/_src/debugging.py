"""``fusionjit.debug``: ``print`` and ``callback``, as ``jax.debug``, for values that are
known: eagerly (outside ``jit``, or under ``disable_jit``). Inside a traced function a
callback would have to run from compiled code (a host callback with an effect the compiler
keeps and orders: not built yet), so there it raises, naming the line."""

from __future__ import annotations

import builtins
from typing import Callable

import numpy as np

from fusionjit._src import core, errors, tree_util


def _concrete(leaf):
    """A leaf as NumPy (a 0-d array as a NumPy scalar, so that format specs apply)."""
    if hasattr(leaf, "__array__") and not isinstance(leaf, np.ndarray):
        leaf = np.asarray(leaf)
    return leaf[()] if isinstance(leaf, np.ndarray) and leaf.ndim == 0 else leaf


def callback(fn: Callable, *args, ordered: bool = False, **kwargs) -> None:
    """Calls ``fn(*args, **kwargs)`` with the arrays as NumPy values."""
    del ordered   # eager calls run in program order
    leaves = tree_util.tree_leaves((args, kwargs))
    if core.current_trace() is not None or any(isinstance(x, core.Tracer) for x in leaves):
        # (Even with no traced argument: traced once, it would print once, not every call.)
        raise NotImplementedError(errors.located(
            "fusionjit.debug.print/callback inside a traced function (jit, grad, vmap, a "
            "loop) is not supported yet: a callback from compiled code is not built. Return "
            "the value from the function, or run it under fusionjit.disable_jit(), to look "
            "at it", errors.user_location(3)))
    args, kwargs = tree_util.tree_map(_concrete, (args, kwargs))
    fn(*args, **kwargs)


def print(fmt: str, *args, ordered: bool = False, **kwargs) -> None:  # noqa: A001
    """Prints ``fmt.format(*args, **kwargs)`` with the arrays' values."""
    callback(lambda *a, **k: builtins.print(fmt.format(*a, **k)), *args, ordered=ordered,
             **kwargs)
