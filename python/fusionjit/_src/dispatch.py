"""Compiling programs and running executables: the compile step behind jit, eager
primitive dispatch, and the counters tests use to check that cached calls neither retrace
nor recompile."""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fusionjit import _core
from fusionjit._src import array as array_mod
from fusionjit._src import core
from fusionjit._src import errors
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


def compile_options(fusion: str | None = None, backend: str | None = None,
                    gpu_arch: str | None = None) -> dict:
    return dict(opt_level=int(config.fusionjit_opt_level),
                vector_width=int(config.fusionjit_vector_width),
                fusion=fusion or str(config.fusionjit_fusion_profile),
                backend=backend or str(config.fusionjit_default_backend),
                gpu_arch=gpu_arch or str(config.fusionjit_gpu_arch))


def compile_module(module, name: str, keep_llvm_ir: bool = False, fusion: str | None = None,
                   backend: str | None = None, keep_ptx: bool = False,
                   gpu_arch: str | None = None, profile: bool = False):
    """Compiles a lowered module with the current configuration (fusion profile, backend);
    ``profile``: the CPU program times every kernel launch (``fusionjit.profile``)."""
    start = time.perf_counter()
    options = compile_options(fusion, backend, gpu_arch)
    compilation = module.compile(keep_llvm_ir=keep_llvm_ir, keep_ptx=keep_ptx, profile=profile,
                                 **options)
    stats.compiles += 1
    if options["backend"] != "cpu" and os.environ.get("FJ_CHECK_PTX"):
        check_ptx(module, options, os.environ["FJ_CHECK_PTX"])
    if config.fusionjit_log_compiles:
        print(f"fusionjit: compiled {name} in {(time.perf_counter() - start) * 1e3:.1f} ms "
              f"(passes {compilation.seconds_passes * 1e3:.1f} ms, LLVM "
              f"{compilation.seconds_codegen * 1e3:.1f} ms"
              f"{' (machine code reused)' if compilation.code_cache_hit else ''}, "
              f"{compilation.executable.num_kernels} kernels)", file=sys.stderr)
    return compilation


def check_ptx(module, options: dict, archs: str) -> None:
    """FJ_CHECK_PTX=sm_80,sm_90: every GPU compilation is also compiled to PTX for each
    of these targets and assembled with ptxas; a rejection raises with the PTX's path and
    the command that reproduces it."""
    from fusionjit._src import gpu_tools
    for arch in archs.split(","):
        ptx_options = dict(options, backend="gpu", gpu_arch=arch.strip())
        gpu_tools.ptxas(module.compile(keep_ptx=True, **ptx_options).ptx, arch.strip())


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
    """Runs on a call's argument leaves; outputs take over donated Arrays' buffers (those
    Arrays are then deleted)."""
    args = [to_argument(x, a) for x, a in zip(leaves, avals)]
    try:
        return executable(args, out_weak, donate=True)
    except _core.DeviceError as e:
        # A missing GPU or a failing one: say so at the user's call.
        raise _core.DeviceError(errors.located(str(e))) from None
    except RuntimeError as e:
        if "has been deleted" not in str(e):
            raise
        raise RuntimeError(errors.located(str(e))) from None


# --- eager primitives -----------------------------------------------------------------

# Python locks held around fork: a child forked while another thread held one (looking
# a compilation up, say) would otherwise wait for it forever. The module locks registered
# here are taken first, then every LruCache's (each is held only briefly and never while
# waiting for another).
_FORK_LOCKS: list = []
_CACHES: "weakref.WeakSet[LruCache]" = weakref.WeakSet()
_HELD_AT_FORK: list = []


def hold_around_fork(lock) -> None:
    """Registers a module-level lock to be held across fork (taken before the caches')."""
    _FORK_LOCKS.append(lock)


def _before_fork() -> None:
    held = list(_FORK_LOCKS) + [c._lock for c in list(_CACHES)]
    for lock in held:
        lock.acquire()
    _HELD_AT_FORK[:] = held


def _after_fork() -> None:
    for lock in reversed(_HELD_AT_FORK):
        lock.release()
    _HELD_AT_FORK.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork,
                        after_in_child=_after_fork)


class LruCache:
    """A dict that keeps the ``fusionjit_cache_size`` most recently used entries, safe to
    use from several threads. (The lock is needed: keys compare with Python ``__eq__``,
    which may switch threads in the middle of an OrderedDict operation, and CPython's
    OrderedDict crashes if another thread changes it then.)"""

    def __init__(self):
        self._d: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()
        _CACHES.add(self)

    def get(self, key):
        with self._lock:
            value = self._d.get(key)
            if value is not None:
                self._d.move_to_end(key)
            self._trim()  # a smaller fusionjit_cache_size holds from the next lookup on
            return value

    def put(self, key, value) -> None:
        with self._lock:
            self._d[key] = value
            self._d.move_to_end(key)
            self._trim()

    def _trim(self) -> None:
        while len(self._d) > config.fusionjit_cache_size:
            self._d.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._d.clear()

    def __len__(self) -> int:
        return len(self._d)


_PRIMITIVE_JITS = LruCache()


def clear_caches() -> None:
    """Drops the eager primitives' compilations and the process's cache of generated code
    (compiler/code_cache.h); api.clear_caches also clears every jitted function's cache."""
    _PRIMITIVE_JITS.clear()
    _core.clear_code_cache()


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
