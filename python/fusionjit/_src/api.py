"""The public transformations: jit (with ahead-of-time lower/compile) and make_ir."""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import time
import warnings
import weakref

import numpy as np
from typing import Any, Callable, Sequence

from fusionjit import _core
from fusionjit._src import core
from fusionjit._src import dispatch
from fusionjit._src import errors
from fusionjit._src import lowering
from fusionjit._src import tracing, tree_util
from fusionjit._src import dtypes as dt
from fusionjit._src.config import config


def _check_taken(fun: Callable, params, what: str, nums, names):
    """JAX's check that ``jit``'s ``{what}_argnums`` and ``{what}_argnames`` name
    arguments ``fun`` takes (any, under ``*args`` or ``**kwargs``)."""
    name = getattr(fun, "__name__", "fun")
    kinds = {p.kind for p in params}
    n = sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    if inspect.Parameter.VAR_POSITIONAL not in kinds and any(not -n <= i < n for i in nums):
        raise ValueError(errors.located(
            f"jit({name}) has {what}_argnums={tuple(nums)}, but {name} takes {n} positional "
            f"argument{'' if n == 1 else 's'}"))
    unknown = sorted(set(names) - {p.name for p in params if p.kind != p.POSITIONAL_ONLY})
    if inspect.Parameter.VAR_KEYWORD not in kinds and unknown:
        raise ValueError(errors.located(
            f"jit({name}) has {what}_argnames {unknown}, which {name} does not take"))


def _normalize_static(fun: Callable, static_argnums, static_argnames):
    """JAX's rule: static arguments may be named by position or by name; each is mapped to
    the other through the function's signature where possible."""
    if static_argnums is None:
        static_argnums = ()
    elif isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    if static_argnames is None:
        static_argnames = ()
    elif isinstance(static_argnames, str):
        static_argnames = (static_argnames,)
    static_argnums = tuple(int(i) for i in static_argnums)
    static_argnames = tuple(static_argnames)
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return static_argnums, static_argnames
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    _check_taken(fun, params, "static", static_argnums, static_argnames)
    names = list(static_argnames)
    nums = list(static_argnums)
    for i in static_argnums:
        if -len(positional) <= i < len(positional):
            p = positional[i]
            if p.kind == p.POSITIONAL_OR_KEYWORD and p.name not in names:
                names.append(p.name)
    for name in static_argnames:
        for i, p in enumerate(positional):
            if p.name == name and i not in nums:
                nums.append(i)
    return tuple(nums), tuple(names)


def _normalize_donate(fun: Callable, donate_argnums, donate_argnames, static_nums,
                      static_names) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """JAX's checks for donated arguments, named by position or by name and each mapped to
    the other through the signature, as static arguments are; none may be static."""
    name = getattr(fun, "__name__", "fun")
    nums = () if donate_argnums is None else (
        (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums))
    names = () if donate_argnames is None else (
        (donate_argnames,) if isinstance(donate_argnames, str) else tuple(donate_argnames))
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in nums):
        raise TypeError(errors.located(f"donate_argnums must be integers, got {nums!r}"))
    if not all(isinstance(n, str) for n in names):
        raise TypeError(errors.located(f"donate_argnames must be strings, got {names!r}"))
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        params = None
    if params is not None:
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        n = len(positional)
        _check_taken(fun, params, "donate", nums, names)
        # Each positional argument named both ways, negative positions made non-negative.
        # (Beyond the named ones, under *args, positions stay as given.)
        nums = tuple(sorted({i % n if -n <= i < n else i for i in nums}
                            | {i for i, p in enumerate(positional) if p.name in names}))
        names = tuple(dict.fromkeys(names + tuple(
            positional[i].name for i in nums
            if 0 <= i < n and positional[i].kind == positional[i].POSITIONAL_OR_KEYWORD)))
        static_nums = {i % n for i in static_nums if -n <= i < n}
    both = sorted(set(names) & set(static_names)) or sorted(set(nums) & set(static_nums))
    if both:
        raise ValueError(errors.located(
            f"jit({name}): arguments {both} are both static and donated; a static argument is "
            f"a Python value, not a buffer that can be donated"))
    return nums, names


def _foreign_as_numpy(x):
    """A JAX array as a NumPy array (the peer a fusionjit user most often holds arrays of);
    other libraries' arrays go through fusionjit.dlpack.from_dlpack, as in JAX, where a
    PyTorch tensor is not a valid argument either."""
    module = getattr(type(x), "__module__", "") or ""
    if module.split(".")[0] in ("jax", "jaxlib") and hasattr(x, "__array__") \
            and hasattr(x, "shape") and hasattr(x, "dtype"):
        return np.asarray(x)
    return x


class _CacheEntry:
    __slots__ = ("program", "module", "compilation", "out_tree", "out_weak", "avals", "ptx")

    def __init__(self, program, module, compilation, out_tree, out_weak, avals):
        self.program, self.module, self.compilation = program, module, compilation
        self.out_tree, self.out_weak, self.avals = out_tree, out_weak, avals
        self.ptx = None  # the GPU form's PTX, when asked for (Lowered.as_text("ptx"))


# Every jitted function alive, for clear_caches.
_LIVE: "weakref.WeakSet[Jitted]" = weakref.WeakSet()


def clear_caches() -> None:
    """Clears every compilation cache, as ``jax.clear_caches()``: each jitted function's
    (``f.clear_cache()``), the eager primitives', and the machine code the process keeps
    for programs compiled again (a function jitted anew, or another fusion profile that
    forms the same kernels, reuses it). The next call of any function compiles afresh."""
    for f in list(_LIVE):
        f.clear_cache()
    with _BY_FUNCTION_LOCK:
        shared = [e for per_options in _BY_FUNCTION.values() for e in per_options.values()]
    for entries in shared:  # those of functions whose jit objects are gone
        entries.clear()
    dispatch.clear_caches()


# Compilations by function and jit options, shared by every jit object of one function: a
# program that writes jit(f)(x) in a loop, or jits f afresh in each call of a helper,
# traces and compiles once, as JAX's caches keyed by the function do. (As in JAX, a
# function is not traced again when the globals it reads change.)
_BY_FUNCTION: "weakref.WeakKeyDictionary[Callable, dict]" = weakref.WeakKeyDictionary()
_BY_FUNCTION_LOCK = threading.Lock()
dispatch.hold_around_fork(_BY_FUNCTION_LOCK)


def _entries_for(fun: Callable, options: tuple) -> dispatch.LruCache:
    """The compilation cache every jit of ``fun`` with these ``options`` shares; a cache of
    its own for a callable that cannot be weakly referenced or hashed."""
    try:
        with _BY_FUNCTION_LOCK:
            per_options = _BY_FUNCTION.get(fun)
            if per_options is None:
                per_options = _BY_FUNCTION[fun] = {}
            entries = per_options.get(options)
            if entries is None:
                entries = per_options[options] = dispatch.LruCache()
            return entries
    except TypeError:
        return dispatch.LruCache()


class Jitted(_core.JitFunction):
    """A jit-compiled function. Calling it flattens the arguments, finds the compiled
    executable for their signature (in C++) and runs it; the first call with a new
    signature traces and compiles."""

    def __init__(self, fun: Callable, static_argnums=None, static_argnames=None,
                 fusion: str | None = None, _primitive: bool = False, backend: str | None = None,
                 donate_argnums=None, donate_argnames=None):
        nums, names = _normalize_static(fun, static_argnums, static_argnames)
        self._donate_argnums, self._donate_argnames = _normalize_donate(
            fun, donate_argnums, donate_argnames, nums, names)
        from fusionjit._src.config import _check_backend, _check_profile
        try:
            if fusion is not None:
                _check_profile(fusion)
            if backend is not None:
                _check_backend(backend)
        except ValueError as e:
            raise ValueError(errors.located(str(e))) from None
        self._fusion = fusion
        # None: the configuration's fusionjit_default_backend (part of the cache key).
        self._backend = backend
        # Primitives always compile: with fusionjit_disable_jit they are what runs eagerly.
        self._primitive = _primitive
        super().__init__(fun, list(nums), list(names), _primitive)
        self._fun = fun
        self._static_argnums = nums
        self._static_argnames = names
        # (Donation is part of the key: the executables of one function donating and not
        # donating differ, and a shared one would delete arrays a caller never gave up.)
        self._entries = _entries_for(fun, (nums, names, fusion, backend, _primitive,
                                           self._donate_argnums, self._donate_argnames))
        _LIVE.add(self)
        try:
            self._signature = inspect.signature(fun)
        except (TypeError, ValueError):
            self._signature = None
        functools.update_wrapper(self, fun, updated=())

    @property
    def _name(self) -> str:
        return getattr(self._fun, "__name__", "fun")

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __repr__(self) -> str:
        return f"<fusionjit.jit of {self._name}>"

    # --- splitting static and dynamic arguments (the same rule as the C++ fast path) ---
    def _split(self, args, kwargs):
        n = len(args)
        statics, dyn_args = [], []
        for i, a in enumerate(args):
            if any(s == i or (s < 0 and s + n == i) for s in self._static_argnums):
                statics.append((i, a))
            else:
                dyn_args.append(a)
        dyn_kwargs, static_kwargs = {}, {}
        for k, v in kwargs.items():
            if k in self._static_argnames:
                static_kwargs[k] = v
            else:
                dyn_kwargs[k] = v
        return dyn_args, dyn_kwargs, statics, static_kwargs

    def _check_call(self, args, kwargs):
        if self._signature is None:
            return
        try:
            self._signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(errors.located(f"{self._name}() {e}")) from None

    def _static_key(self, statics, static_kwargs):
        # Types are part of the key: 2 == 2.0, but they trace to int32 and float32.
        key = (tuple((i, type(v), v) for i, v in statics)
               + tuple((k, type(v), v) for k, v in sorted(static_kwargs.items())))
        try:
            hash(key)
        except TypeError:
            bad = [v for _, v in statics] + list(static_kwargs.values())
            bad = next(v for v in bad if not _hashable(v))
            raise TypeError(errors.located(
                f"a static argument of jit({self._name}) has type {type(bad).__name__}, which is "
                f"not hashable. Static arguments are part of the compilation cache key, so they "
                f"must be hashable: pass a tuple instead of a list, or make the argument "
                f"dynamic")) from None
        return key

    def _call_key(self, args, kwargs) -> tuple:
        """Checks and splits a call: (cache key, flat argument leaves, their avals, and what
        tracing needs: the input tree, the static arguments)."""
        self._check_call(args, kwargs)
        dyn_args, dyn_kwargs, statics, static_kwargs = self._split(args, kwargs)
        static_key = self._static_key(statics, static_kwargs)
        leaves, in_tree = _core.tree_flatten((tuple(dyn_args), dyn_kwargs))
        avals = tuple(core.get_aval(x) for x in leaves)
        key = (in_tree, static_key, avals, config.epoch)
        return key, leaves, avals, (in_tree, avals, statics, static_kwargs)

    def _lower(self, traced) -> tuple:
        """Traces and lowers for a signature's `traced` part: (program, module, out_tree)."""
        program, out_tree = self._trace(*traced)
        return program, lowering.lower_program(program, _module_name(self._name)), out_tree

    def _entry(self, args, kwargs, keep_llvm_ir=False, keep_ptx=False) -> tuple[_CacheEntry, list]:
        """Traces and compiles for this call's signature (cached); returns the entry and the
        flat argument leaves."""
        key, leaves, avals, traced = self._call_key(args, kwargs)
        entry = self._entries.get(key)
        if (entry is None or (keep_llvm_ir and not entry.compilation.llvm_ir)
                or (keep_ptx and not entry.compilation.ptx)):
            program, module, out_tree = self._lower(traced)
            donated = self._donated_leaves(args, kwargs)
            module.donated_parameters = [i for i, d in enumerate(donated) if d]
            compilation = dispatch.compile_module(module, self._name, keep_llvm_ir, self._fusion,
                                                  self._backend, keep_ptx)
            out_weak = [a.weak_type for a in program.out_avals]
            entry = _CacheEntry(program, module, compilation, out_tree, out_weak, avals)
            self._entries.put(key, entry)
            self._warn_donated_unused(compilation.executable, donated, avals)
        return entry, leaves

    def _donated_leaves(self, args, kwargs) -> list[bool]:
        """Per flat argument leaf (in _call_key's order): whether its argument is donated."""
        if not (self._donate_argnums or self._donate_argnames):
            return []
        n = len(args)
        dyn_args, dyn_kwargs, _, _ = self._split(args, kwargs)
        flags = [any(d == i or (d < 0 and d + n == i) for d in self._donate_argnums)
                 for i in range(n)
                 if not any(s == i or (s < 0 and s + n == i) for s in self._static_argnums)]
        marks = (tuple(tree_util.tree_map(lambda _, f=f: f, a) for a, f in zip(dyn_args, flags)),
                 {k: tree_util.tree_map(lambda _, f=k in self._donate_argnames: f, v)
                  for k, v in dyn_kwargs.items()})
        return list(_core.tree_flatten(marks)[0])

    def _warn_donated_unused(self, executable, donated: list[bool], avals) -> None:
        """As JAX, once per compilation: a warning naming the donated arrays whose buffers
        no output can take over (no output of their shape and dtype, or none the program
        can write there; and on the GPU none). They stay valid."""
        used = {a[0] for a in executable.output_aliases if a is not None}
        unused = [f"{a.dtype}{list(a.shape)}".replace(" ", "")
                  for i, (d, a) in enumerate(zip(donated, avals)) if d and i not in used]
        if unused:
            where = "" if executable.backend == "cpu" else \
                " (fusionjit takes donated buffers over on the CPU only)"
            warnings.warn(f"Some donated buffers were not usable: {', '.join(unused)}{where}.",
                          UserWarning, stacklevel=4)

    def _trace(self, in_tree, avals, statics, static_kwargs):
        out_tree_box = []

        def flat_fun(*tracers):
            dyn, kw = in_tree.unflatten(tracers)
            full = list(dyn)
            for i, v in sorted(statics, key=lambda p: p[0] % (len(dyn) + len(statics))):
                full.insert(i % (len(dyn) + len(statics)), v)
            out = self._fun(*full, **kw, **static_kwargs)
            out_leaves, out_tree = _core.tree_flatten(_float0_outputs_static(out))
            for k, leaf in enumerate(out_leaves):
                try:
                    core.get_aval(leaf)
                except TypeError:
                    code = getattr(self._fun, "__code__", None)
                    where = f" ({code.co_filename}:{code.co_firstlineno})" if code else ""
                    raise TypeError(errors.located(
                        f"jit({self._name}): the function{where} returned a value of type "
                        f"{type(leaf).__name__} as output leaf {k} of {out_tree}; a jitted "
                        f"function returns arrays, numbers or pytrees of them (keep other "
                        f"values outside jit, or return them from a function that calls it)")
                    ) from None
            out_tree_box.append(out_tree)
            return out_leaves

        start = time.perf_counter()
        program = tracing.trace_to_program(flat_fun, avals, f"jit({self._name})")
        program.name = self._name
        dispatch.note_trace(self._name, time.perf_counter() - start)
        return program, out_tree_box[0]

    def _cache_miss(self, args, kwargs):
        """Called by the C++ fast path when it has no executable for this call."""
        if config.fusionjit_disable_jit and not self._primitive:
            return ("result", None, self._fun(*args, **kwargs))
        if core.current_trace() is not None or (core.in_compile_time_eval() and any(
                isinstance(x, core.Tracer) for x in tree_util.tree_leaves((args, kwargs)))):
            # Called inside another trace (with tracers or closing over them): inline the
            # function into it.
            return ("result", None, self._fun(*args, **kwargs))
        args, kwargs = self._foreign_arrays_as_numpy(args, kwargs)
        entry, leaves = self._entry(args, kwargs)
        exe = entry.compilation.executable
        outs = dispatch.run(exe, leaves, entry.avals, entry.out_weak)
        result = entry.out_tree.unflatten(outs)
        return ("entry", (exe, entry.out_tree, entry.out_weak), result)

    def _foreign_arrays_as_numpy(self, args, kwargs):
        """JAX arrays among the dynamic arguments as NumPy arrays, so that a program can be
        fed its peer's arrays, as JAX takes NumPy's. (The C++ fast path knows them not, so
        such calls come here each time.)"""
        n = len(args)
        args = tuple(a if any(s == i or (s < 0 and s + n == i) for s in self._static_argnums)
                     else tree_util.tree_map(_foreign_as_numpy, a) for i, a in enumerate(args))
        kwargs = {k: v if k in self._static_argnames else tree_util.tree_map(_foreign_as_numpy, v)
                  for k, v in kwargs.items()}
        return args, kwargs

    # --- ahead of time ---------------------------------------------------------------
    def lower(self, *args, **kwargs) -> "Lowered":
        """Traces and lowers for these arguments (arrays, or ShapeDtypeStructs)."""
        entry, _ = self._entry(args, kwargs)
        return Lowered(self, entry, args, kwargs)

    def trace(self, *args, **kwargs) -> core.Program:
        """The traced program for these arguments."""
        return self.lower(*args, **kwargs).program

    def clear_cache(self) -> None:
        self._entries.clear()
        self._clear_cache()


def _module_name(name: str) -> str:
    return "jit_" + "".join(c if c.isalnum() or c in "_.-" else "_" for c in name)


def _hashable(v) -> bool:
    try:
        hash(v)
        return True
    except TypeError:
        return False


class ShapeDtypeStruct:
    """A shape and dtype standing in for an argument, for ``jit(f).lower(...)``."""

    def __init__(self, shape: Sequence[int], dtype, weak_type: bool = False):
        from fusionjit._src import dtypes as dt
        self.shape = tuple(shape)
        self.dtype = dt.canonicalize(dtype)
        self.weak_type = weak_type

    @property
    def aval(self) -> core.ShapedArray:
        return core.ShapedArray(self.shape, self.dtype, self.weak_type)

    def __repr__(self) -> str:
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype})"


_STAGES = ("program", "traced", "optimized", "llvm", "asm", "ptx", "dot", "buffers",
           "before_fusion")


class Lowered:
    """A traced and lowered function: ``as_text(stage)`` shows each compilation stage."""

    def __init__(self, jitted: Jitted, entry: _CacheEntry, args, kwargs):
        self._jitted, self._entry, self._args, self._kwargs = jitted, entry, args, kwargs

    @property
    def program(self) -> core.Program:
        return self._entry.program

    def as_text(self, stage: str = "traced") -> str:
        """``stage``: "program" (the traced Python program), "traced" (the C++ IR as
        lowered), "optimized" (after the C++ passes and kernel formation), "llvm" (the
        optimised LLVM IR), "asm" (native assembly), "ptx" (the GPU's kernels as PTX: for a
        function compiled for the CPU, those it would run on the GPU; no GPU needed), "dot"
        (Graphviz of the optimized module), "buffers" (the buffer assignment)."""
        if stage == "program":
            return self._entry.program.pretty()
        if stage == "traced":
            return self._entry.module.to_text()
        if stage == "optimized":
            return self._entry.compilation.optimized_text
        if stage == "dot":
            return self._entry.compilation.optimized_dot
        if stage == "before_fusion":
            return self._entry.compilation.before_fusion_text
        if stage == "buffers":
            return self._entry.compilation.buffer_assignment
        if stage == "ptx":
            compilation = self._entry.compilation
            if not compilation.ptx:
                backend = compilation.executable.backend
                if backend == "gpu_emulated":
                    self._entry, _ = self._jitted._entry(self._args, self._kwargs, keep_ptx=True)
                    return self._entry.compilation.ptx
                # The same program compiled for the GPU (kept with the entry).
                if getattr(self._entry, "ptx", None) is None:
                    gpu = dispatch.compile_module(self._entry.module, self._jitted._name,
                                                  fusion=self._jitted._fusion, backend="gpu")
                    self._entry.ptx = gpu.ptx
                return self._entry.ptx
            return compilation.ptx
        if stage in ("llvm", "asm"):
            if not self._entry.compilation.llvm_ir:
                self._entry, _ = self._jitted._entry(self._args, self._kwargs, keep_llvm_ir=True)
            if stage == "asm":
                return self._entry.compilation.assembly
            return self._entry.compilation.llvm_ir
        raise ValueError(f"unknown stage {stage!r}; stages: {', '.join(_STAGES)}")

    def compile(self) -> "Compiled":
        return Compiled(self._jitted, self._entry, self._args, self._kwargs)


class Compiled:
    """A compiled function for one argument signature."""

    def __init__(self, jitted: Jitted, entry: _CacheEntry, args, kwargs):
        # The arguments it was lowered with: the "llvm" and "asm" stages compile again.
        self._jitted, self._entry, self._args, self._kwargs = jitted, entry, args, kwargs

    def __call__(self, *args, **kwargs):
        dyn_args, dyn_kwargs, _, _ = self._jitted._split(args, kwargs)
        leaves, _ = _core.tree_flatten((tuple(dyn_args), dyn_kwargs))
        avals = tuple(core.get_aval(x) for x in leaves)
        if avals != self._entry.avals:
            raise TypeError(errors.located(
                f"compiled {self._jitted._name} was lowered for argument types "
                f"{[a.str_short() for a in self._entry.avals]} but got "
                f"{[a.str_short() for a in avals]}"))
        exe = self._entry.compilation.executable
        outs = dispatch.run(exe, leaves, avals, self._entry.out_weak)
        return self._entry.out_tree.unflatten(outs)

    def as_text(self, stage: str = "optimized") -> str:
        return Lowered(self._jitted, self._entry, self._args, self._kwargs).as_text(stage)

    @property
    def kernels(self) -> list[dict]:
        """One dict per kernel launch: name, fusion, kind, bytes_read and bytes_written,
        units (the elements or rows it iterates over), width (lanes per vector step),
        parallel (whether the thread pool shares it) and grain (units are handed to threads
        in multiples of it)."""
        return self._entry.compilation.executable.kernels

    @property
    def num_kernels(self) -> int:
        return self._entry.compilation.executable.num_kernels

    def cost_analysis(self) -> dict:
        kernels = self.kernels
        return {
            "kernels": float(len(kernels)),
            "bytes accessed": float(sum(k["bytes_read"] + k["bytes_written"] for k in kernels)),
        }


class Jaxpr:
    """What ``make_jaxpr`` returns: the traced program, printed as ``str``; ``.program``
    is fusionjit's Program, ``.out_avals`` its outputs' shapes and dtypes."""

    def __init__(self, program):
        self.program = program
        self.out_avals = list(program.out_avals)

    def __str__(self) -> str:
        return self.program.pretty()

    __repr__ = __str__


def make_jaxpr(fun: Callable, static_argnums: int | Sequence[int] = (),
               return_shape: bool = False, **unused) -> Callable:
    """``jax.make_jaxpr``: ``make_jaxpr(f)(*args)`` traces ``f`` for these arguments and
    returns its program (fusionjit's own, printed as ``lower(...).as_text("program")``
    shows it, not JAX's jaxpr syntax); with ``return_shape`` also the outputs'
    ShapeDtypeStructs."""
    def traced(*args, **kwargs):
        jitted = Jitted(fun, static_argnums=static_argnums)
        lowered = jitted.lower(*args, **kwargs)
        out = Jaxpr(lowered.program)
        if not return_shape:
            return out
        shapes = [ShapeDtypeStruct(a.shape, a.dtype) for a in out.out_avals]
        return out, tree_util.tree_unflatten(lowered._entry.out_tree, shapes)
    return traced


def jit(fun: Callable | None = None, *, static_argnums: int | Sequence[int] | None = None,
        static_argnames: str | Sequence[str] | None = None,
        donate_argnums: int | Sequence[int] | None = None,
        donate_argnames: str | Sequence[str] | None = None, fusion: str | None = None,
        backend: str | None = None, keep_unused: bool = False, inline: bool = False) -> Any:
    """Compiles ``fun`` with fusionjit. Usable as ``@jit`` or ``@jit(static_argnums=...)``.

    The function is traced once per signature (tree structure, shapes, dtypes, weak types
    and static argument values) and compiled to native code; later calls with the same
    signature go straight to the compiled code. ``fusion`` picks the fusion rule profile
    for this function ("fusionjit", "xla", "xla+concat", "none"); by default the global
    ``fusionjit_fusion_profile``. ``backend`` picks where it runs ("cpu", "gpu",
    "gpu_emulated"); by default ``fusionjit_default_backend``. On the GPU, results stay in
    GPU memory until NumPy reads them (``np.asarray``) or ``block_until_ready``.

    ``donate_argnums``/``donate_argnames``, as in JAX: on the CPU an output of a donated
    array's shape and dtype takes its buffer over where the program allows it (an update
    of it, a loop carrying it, a kernel writing after its last read) and the array is
    deleted; a donation no output can use warns once per compilation and leaves the array
    valid. ``keep_unused`` and ``inline`` are accepted
    for JAX compatibility and change nothing: unused arguments cost nothing at a call, and
    a jitted function called while tracing is always inlined into the caller's program.
    """
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, donate_argnums=donate_argnums,
                                 donate_argnames=donate_argnames, fusion=fusion, backend=backend,
                                 keep_unused=keep_unused, inline=inline)
    if not callable(fun):
        raise TypeError(errors.located(f"jit expects a callable, got {type(fun).__name__}"))
    return Jitted(fun, static_argnums, static_argnames, fusion, backend=backend,
                  donate_argnums=donate_argnums, donate_argnames=donate_argnames)


@contextlib.contextmanager
def disable_jit(disable: bool = True):
    """Within the block, jitted functions run eagerly, op by op (for debugging), as
    ``jax.disable_jit``; signatures compiled before are not used either."""
    saved = config.fusionjit_disable_jit
    config.update("fusionjit_disable_jit", disable)
    try:
        yield
    finally:
        config.update("fusionjit_disable_jit", saved)


def make_ir(fun: Callable, *, static_argnums=None, static_argnames=None) -> Callable:
    """``make_ir(f)(*args)`` returns the traced program of ``f`` for those arguments (like
    ``jax.make_jaxpr``)."""

    @functools.wraps(fun)
    def traced(*args, **kwargs):
        jitted = Jitted(fun, static_argnums, static_argnames)
        jitted._check_call(args, kwargs)
        dyn_args, dyn_kwargs, statics, static_kwargs = jitted._split(args, kwargs)
        jitted._static_key(statics, static_kwargs)
        leaves, in_tree = _core.tree_flatten((tuple(dyn_args), dyn_kwargs))
        avals = tuple(core.get_aval(x) for x in leaves)
        return jitted._trace(in_tree, avals, statics, static_kwargs)[0]

    return traced


class _Float0:
    """A float0 output (the gradient of an integer input): no data, part of the output
    tree's structure, rebuilt as NumPy float0 zeros of its shape by every call."""

    def __init__(self, shape):
        self.shape = tuple(shape)


tree_util.register_pytree_node(_Float0, lambda x: ((), x.shape),
                               lambda shape, _: np.zeros(shape, dt.float0))


def _is_float0(leaf) -> bool:
    return isinstance(leaf, np.ndarray) and leaf.dtype == dt.float0


def _float0_outputs_static(out):
    if not any(_is_float0(leaf) for leaf in tree_util.tree_leaves(out)):
        return out
    return tree_util.tree_map(lambda leaf: _Float0(leaf.shape) if _is_float0(leaf) else leaf, out)
