"""Compiling programs and running executables: the compile step behind jit, eager
primitive dispatch, and the counters tests use to check that cached calls neither retrace
nor recompile."""

from __future__ import annotations

import collections
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fusionjit._src import array as array_mod
from fusionjit._src import core
from fusionjit._src.config import config


@dataclass
class Stats:
    """How often fusionjit traced and compiled (since the last reset)."""

    traces: int = 0
    compiles: int = 0
    by_function: dict = field(default_factory=dict)

    def reset(self) -> None:
        self.traces = self.compiles = 0
        self.by_function.clear()


stats = Stats()


def compile_options(fusion: str | None = None) -> dict:
    return dict(opt_level=int(config.fusionjit_opt_level),
                vector_width=int(config.fusionjit_vector_width),
                fusion=fusion or str(config.fusionjit_fusion_profile))


def compile_module(module, name: str, keep_llvm_ir: bool = False, fusion: str | None = None):
    """Compiles a lowered module with the current configuration (and fusion profile)."""
    start = time.perf_counter()
    compilation = module.compile(keep_llvm_ir=keep_llvm_ir, **compile_options(fusion))
    stats.compiles += 1
    if config.fusionjit_log_compiles:
        print(f"fusionjit: compiled {name} in {(time.perf_counter() - start) * 1e3:.1f} ms "
              f"(passes {compilation.seconds_passes * 1e3:.1f} ms, LLVM "
              f"{compilation.seconds_codegen * 1e3:.1f} ms, "
              f"{compilation.executable.num_kernels} kernels)", file=sys.stderr)
    return compilation


def note_trace(name: str, seconds: float) -> None:
    stats.traces += 1
    stats.by_function[name] = stats.by_function.get(name, 0) + 1
    if config.fusionjit_log_compiles:
        print(f"fusionjit: traced {name} in {seconds * 1e3:.1f} ms", file=sys.stderr)


def to_argument(x, aval: core.ShapedArray) -> Any:
    """The value passed to an executable for an argument leaf of abstract value ``aval``."""
    if core.is_concrete_array(x):
        return x
    if isinstance(x, np.ndarray):
        return array_mod.from_numpy(x, aval.dtype)
    return array_mod.scalar(x, aval.dtype, aval.weak_type)


def run(executable, leaves, avals, out_weak) -> list:
    return executable([to_argument(x, a) for x, a in zip(leaves, avals)], out_weak)


# --- eager primitives -----------------------------------------------------------------

class LruCache:
    """A dict that keeps the ``fusionjit_cache_size`` most recently used entries, safe to
    use from several threads. (The lock is needed: keys compare with Python ``__eq__``,
    which may switch threads in the middle of an OrderedDict operation, and CPython's
    OrderedDict crashes if another thread changes it then.)"""

    def __init__(self):
        self._d: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            value = self._d.get(key)
            if value is not None:
                self._d.move_to_end(key)
            return value

    def put(self, key, value) -> None:
        with self._lock:
            self._d[key] = value
            self._d.move_to_end(key)
            while len(self._d) > config.fusionjit_cache_size:
                self._d.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._d.clear()

    def __len__(self) -> int:
        return len(self._d)


_PRIMITIVE_JITS = LruCache()


def apply_primitive(prim: core.Primitive, args, params):
    """Runs one primitive outside jit: compiled once per (primitive, parameters) and then
    per argument signature, like JAX."""
    key = (prim, tuple(sorted(params.items())))
    fn = _PRIMITIVE_JITS.get(key)
    if fn is None:
        from fusionjit._src.api import Jitted

        def prim_fun(*xs):
            return prim.bind(*xs, **params)

        prim_fun.__name__ = prim.name
        prim_fun.__qualname__ = prim.name
        fn = Jitted(prim_fun, _primitive=True)
        _PRIMITIVE_JITS.put(key, fn)
    return fn(*args)


core._EAGER[0] = apply_primitive
