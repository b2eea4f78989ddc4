"""Functions called outside any trace run as one jitted program each, as JAX's are (its
jnp functions, samplers and activations are ``jit``-wrapped). Run eagerly, every primitive
of a function is dispatched on its own: a random draw is tens to hundreds of primitives
(threefry's rounds, the bit tricks, ``erf_inv``'s polynomial), and ``normal(key, (16,))``
took 1.8 ms and ``split(key)`` 0.3 ms against JAX's 0.07 and 0.06 (a training loop that
splits its key between jitted steps spent most of its time there); an eager ``cumsum`` of
64x64 took 2.8 ms, ``nn.sigmoid`` 0.26 ms.

``eager_jit`` decorates such a function. Its structural arguments (shapes, dtypes, axes,
orders, modes) are static: one compilation per value, as JAX's ``static_argnames``; arrays
and Python floats are traced, so a value that changes from call to call (an exploration
rate, a clip bound) does not compile again. Inside a trace (``jit``, ``vmap``, ``grad``),
under ``disable_jit`` or ``ensure_compile_time_eval``, the function runs as it is. Where the
jitted call raises (a misuse: a batch of keys, an integer for a key, a traced value where a
concrete one is needed), the function runs as it is, so the error is the one it raises
eagerly. (The ufuncs and the numpy functions of array arguments alone use numpy/util.py's
``as_one_program`` and ``one_program``, on the same condition.)"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from fusionjit._src import core
from fusionjit._src.config import config

_UNSET = object()


def _hashable(v):
    """``v`` with lists made tuples (a shape given as a list), or _UNSET if unhashable."""
    if isinstance(v, list):
        v = tuple(v)
    if isinstance(v, tuple):
        v = tuple(_hashable(x) for x in v)
        return _UNSET if any(x is _UNSET for x in v) else v
    try:
        hash(v)
    except TypeError:
        return _UNSET
    return v


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _structural(v, inside: bool = False) -> bool:
    """A Python int, bool, string or None, or a tuple or list of Python scalars (a count, a
    mode, a shape, a histogram's range): what a function may branch on, static under
    ``static_ints``. A float alone is a value (traced)."""
    if isinstance(v, (tuple, list)):
        return all(_structural(x, True) for x in v)
    return v is None or isinstance(v, (bool, int, str)) or (inside and isinstance(v, float))


def outside_traces() -> bool:
    """Whether a call now runs eagerly: no trace, no ``ensure_compile_time_eval``, and jit
    not disabled (the condition for running a function as one jitted program)."""
    return not (core.current_trace() is not None or core.in_compile_time_eval()
                or config.fusionjit_disable_jit)


@functools.lru_cache(maxsize=None)
def jitted(fn, static_names: tuple):
    """``jit(fn, static_argnames=static_names)``, made once."""
    from fusionjit._src.api import jit
    return jit(fn, static_argnames=static_names)


def eager_jit(*static: str, static_if_int: tuple = (), uint32: tuple = (),
              static_ints: bool = False):
    """Decorates a function (a sampler, a numpy function with static options: ``mean``,
    ``cumsum``, ``nn.softmax``): called outside any trace it runs jitted, with the
    arguments named in ``static`` static, those in ``static_if_int`` static where they are
    Python integers (``permutation(key, 10)``, ``choice(key, 5)``) and traced where they are
    arrays, and those in ``uint32`` (``fold_in``'s data) passed as uint32 where they are
    integers in its range. With ``static_ints``, every argument that is a Python integer,
    bool, string or None, or a tuple or list of Python scalars, is static as well: the
    function sees what it sees eagerly, arrays and lone floats aside."""
    def deco(fn):
        signature = inspect.signature(fn)
        kinds = {p.name: p.kind for p in signature.parameters.values()}
        if inspect.Parameter.VAR_POSITIONAL in kinds.values():
            raise TypeError(f"eager_jit: {fn.__name__} takes *args")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if not outside_traces():
                return fn(*args, **kwargs)
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return fn(*args, **kwargs)
            arguments = dict(bound.arguments)
            for n, k in kinds.items():  # **kwargs' entries by their own names
                if k == inspect.Parameter.VAR_KEYWORD:
                    arguments.update(arguments.pop(n, {}))
            names = list(static)
            if static_ints:
                names += [n for n, v in arguments.items() if n not in static and _structural(v)]
            for name in static_if_int:
                if _is_int(arguments.get(name)):
                    names.append(name)
                    arguments[name] = int(arguments[name])
            for name in uint32:
                v = arguments.get(name)
                if _is_int(v):
                    if not 0 <= int(v) < 2 ** 32:
                        return fn(*args, **kwargs)  # its own error
                    arguments[name] = np.uint32(v)
            for name in names:
                if name in arguments:
                    v = _hashable(arguments[name])
                    if v is _UNSET:
                        return fn(*args, **kwargs)
                    arguments[name] = v
            positional = [arguments.pop(n) for n, k in kinds.items()
                          if k == inspect.Parameter.POSITIONAL_ONLY and n in arguments]
            try:
                return jitted(fn, tuple(names))(*positional, **arguments)
            except Exception:
                return fn(*args, **kwargs)
        wrapper.eager_jit = True
        return wrapper
    return deco


def eager_namespace(namespace: dict, names=None) -> None:
    """Makes the functions ``names`` of a public module's ``namespace`` (None: its public
    names) run as one program each when called eagerly (eager_jit with ``static_ints``), as
    JAX's jit-wrapped ``jax.scipy.special`` and ``jnp.linalg`` functions: an eager ``erf``
    of 8x8 took 1.3 ms and ``linalg.inv`` 37 ms, their primitives dispatched one by one.
    Functions that are so already (or classes) are left as they are."""
    if names is None:
        names = [n for n in namespace if not n.startswith("_")]
    for name in names:
        fn = namespace[name]
        if (inspect.isfunction(fn) and not getattr(fn, "eager_jit", False) and all(
                p.kind != p.VAR_POSITIONAL for p in inspect.signature(fn).parameters.values())):
            namespace[name] = eager_jit(static_ints=True)(fn)
