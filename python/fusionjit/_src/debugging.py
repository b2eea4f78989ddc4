"""``fusionjit.debug``: ``print`` and ``callback``, as ``jax.debug``: host callbacks
(callbacks.py) without results. Outside a trace they call at once with the values; inside
one (``jit``, a loop, ``vmap``, ``grad``) the compiled program calls back each time it runs,
in program order. Under ``vmap`` the function is called once per example, in order, as
JAX's; under ``grad`` it sees the forward pass's values."""

from __future__ import annotations

import builtins
from typing import Callable

import numpy as np

from fusionjit._src import callbacks, errors, tree_util


def _concrete(leaf):
    """A leaf as NumPy (a 0-d array as a NumPy scalar, so that format specs apply)."""
    if hasattr(leaf, "__array__") and not isinstance(leaf, np.ndarray):
        leaf = np.asarray(leaf)
    return leaf[()] if isinstance(leaf, np.ndarray) and leaf.ndim == 0 else leaf


def callback(fn: Callable, *args, ordered: bool = False, **kwargs) -> None:
    """Calls ``fn(*args, **kwargs)`` with the arrays as NumPy values (0-d ones as NumPy
    scalars): at once outside a trace; inside ``jit`` each time the program runs, in
    program order (``ordered`` is accepted for JAX's API: calls are always in order)."""
    del ordered
    leaves, tree = tree_util.tree_flatten((args, kwargs))

    def call(values) -> None:
        a, k = tree_util.tree_unflatten(tree, [_concrete(x) for x in values])
        fn(*a, **k)

    callbacks.bind(call, leaves, (), "sequential", errors.user_location(2))


def print(fmt: str, *args, ordered: bool = False, **kwargs) -> None:  # noqa: A001
    """Prints ``fmt.format(*args, **kwargs)`` with the arrays' values."""
    callback(lambda *a, **k: builtins.print(fmt.format(*a, **k)), *args, ordered=ordered,
             **kwargs)
