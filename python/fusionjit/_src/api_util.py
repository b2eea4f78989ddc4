"""Small parts of JAX's top-level API that JAX code calls around ``jit``: ``eval_shape``,
``named_scope``, and the device and process counts of a single-process, single-host runtime."""

from __future__ import annotations

import contextlib
from typing import Callable

from fusionjit._src import core, tracing, tree_util
from fusionjit._src.api import ShapeDtypeStruct
from fusionjit._src.config import config


def eval_shape(fun: Callable, *args, **kwargs):
    """The shapes and dtypes ``fun(*args, **kwargs)`` returns, as a pytree of
    ShapeDtypeStruct, found by tracing alone: nothing is compiled or computed. Arguments
    may be arrays or ShapeDtypeStructs."""
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    avals = tuple(x.aval if isinstance(x, ShapeDtypeStruct) else core.get_aval(x)
                  for x in leaves)
    out_trees = []

    def flat_fun(*tracers):
        a, kw = in_tree.unflatten(tracers)
        out_leaves, out_tree = tree_util.tree_flatten(fun(*a, **kw))
        out_trees.append(out_tree)
        return out_leaves

    program = tracing.trace_to_program(flat_fun, avals, "eval_shape")
    return out_trees[0].unflatten([ShapeDtypeStruct(a.shape, a.dtype, a.weak_type)
                                   for a in program.out_avals])


def named_scope(name: str):
    """A context manager naming the ops traced inside it (accepted for JAX code; fusionjit
    names ops by their source line instead)."""
    if not isinstance(name, str):
        raise TypeError(f"named_scope needs a string name, got {type(name).__name__}")
    return contextlib.nullcontext()


def default_backend() -> str:
    """The backend ``jit`` uses without ``backend=``: "cpu", "gpu" or "gpu_emulated"."""
    return config.fusionjit_default_backend


def device_count(backend: str | None = None) -> int:
    from fusionjit import devices
    return len(devices(backend or default_backend()))


local_device_count = device_count


def process_index() -> int:
    """0: fusionjit runs in one process."""
    return 0


def process_count() -> int:
    return 1
