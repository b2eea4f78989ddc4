"""The core: abstract values, primitives, the traced program, tracers and traces.

A primitive's rules are registered right below it (in ``_src/lax``): ``abstract_eval``
(shape and dtype rule) and a lowering rule (``_src/lowering.py``'s registry). Outside a
trace ``Primitive.bind`` runs the primitive eagerly (compiled, cached per signature);
inside a trace it records an equation.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Callable, Sequence

import numpy as np

from fusionjit._src import dtypes as dt
from fusionjit._src import errors


class ShapedArray:
    """The abstract value of an array: shape, dtype and JAX's weak-type flag."""

    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape: Sequence[int], dtype, weak_type: bool = False):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.weak_type = bool(weak_type)
        if len(self.shape) > 1 or (self.shape and self.shape[0] > 2**40):
            _check_size(self.shape, self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def update(self, shape=None, dtype=None, weak_type=None) -> "ShapedArray":
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type)

    def __eq__(self, other) -> bool:
        return (isinstance(other, ShapedArray) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype, self.weak_type))

    def str_short(self) -> str:
        return f"{dt.short_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    def __repr__(self) -> str:
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.str_short()}{weak})"


def _check_size(shape, dtype) -> None:
    size = dtype.itemsize
    for d in shape:
        if d < 0:
            raise ValueError(errors.located(f"negative dimension in shape {shape}"))
        size *= d
    if size > 2**62:
        raise ValueError(errors.located(
            f"an array of shape {shape} and dtype {dtype} is too large ({size} bytes)"))


def _array_aval(x) -> ShapedArray:
    """The abstract value of a fusionjit.Array, whose fields hold valid values already (the
    eager path asks for it several times per operation)."""
    a = ShapedArray.__new__(ShapedArray)
    a.shape, a.dtype, a.weak_type = x.shape, x.dtype, x.weak_type
    return a


def get_aval(x) -> ShapedArray:
    """The abstract value of a concrete value or a tracer (raises TypeError otherwise)."""
    if type(x) is _ARRAY_TYPE[0]:
        return _array_aval(x)
    if isinstance(x, Tracer):
        return x.aval
    aval = getattr(x, "aval", None)  # fusionjit.Array has no aval attribute: use its fields
    if aval is not None and isinstance(aval, ShapedArray):
        return aval
    if _is_array_object(x):
        return ShapedArray(x.shape, x.dtype, x.weak_type)
    info = dt.scalar_info(x)
    if info is not None:
        d, weak = info
        if isinstance(x, int) and not isinstance(x, bool):
            dt.check_int_range(x, d, errors.user_location(2))
        return ShapedArray((), d, weak)
    if isinstance(x, np.ndarray):
        return ShapedArray(x.shape, dt.canonicalize(x.dtype), False)
    raise TypeError(errors.located(
        f"value of type {type(x).__name__} is not a valid fusionjit type; pass arrays, "
        f"numbers, or pytrees (tuples, lists, dicts) of them, or mark the argument static",
        errors.user_location(2)))


_ARRAY_TYPE: list = [None]  # fusionjit.Array, set by _src/array.py


def _is_array_object(x) -> bool:
    return _ARRAY_TYPE[0] is not None and type(x) is _ARRAY_TYPE[0]


def is_concrete_array(x) -> bool:
    return _is_array_object(x)


# --- primitives -----------------------------------------------------------------------

class Primitive:
    """A primitive operation. ``abstract_eval(*avals, **params)`` returns the output aval
    (or a list of them when ``multiple_results``)."""

    def __init__(self, name: str, multiple_results: bool = False):
        self.name = name
        self.multiple_results = multiple_results
        self.abstract_eval: Callable[..., Any] | None = None

    def def_abstract_eval(self, fn):
        self.abstract_eval = fn
        return fn

    def bind(self, *args, **params):
        trace = find_trace(args)
        if trace is None:
            return eager_apply(self, args, params)
        return trace.process_primitive(self, args, params)

    def __repr__(self) -> str:
        return self.name


def eager_apply(prim: Primitive, args, params):
    """Runs a primitive outside any trace (installed by _src/dispatch.py)."""
    return _EAGER[0](prim, args, params)


_EAGER: list = [None]


# --- the traced program ---------------------------------------------------------------

class Var:
    __slots__ = ("aval", "count")
    _counter = itertools.count()

    def __init__(self, aval: ShapedArray):
        self.aval = aval
        self.count = next(Var._counter)


class Literal:
    """A scalar constant written inline in a program."""

    __slots__ = ("value", "aval")

    def __init__(self, value, aval: ShapedArray):
        self.value = value
        self.aval = aval


class Eqn:
    __slots__ = ("prim", "invars", "outvars", "params", "source")

    def __init__(self, prim: Primitive, invars, outvars, params: dict, source: str):
        self.prim, self.invars, self.outvars = prim, invars, outvars
        self.params, self.source = params, source


class Program:
    """A traced function: ``{ lambda consts ; inputs . let eqns in outputs }``."""

    def __init__(self, invars, constvars, consts, eqns, outvars, name: str = "f"):
        self.invars, self.constvars, self.consts = list(invars), list(constvars), list(consts)
        self.eqns, self.outvars, self.name = list(eqns), list(outvars), name

    @property
    def in_avals(self):
        return [v.aval for v in self.invars]

    @property
    def out_avals(self):
        return [v.aval for v in self.outvars]

    def pretty(self) -> str:
        names: dict[int, str] = {}

        def name(v) -> str:
            if isinstance(v, Literal):
                return _format_literal(v)
            if id(v) not in names:
                names[id(v)] = _var_name(len(names))
            return names[id(v)]

        def decl(v) -> str:
            return f"{name(v)}:{v.aval.str_short()}"

        consts = " ".join(decl(v) for v in self.constvars)
        inputs = " ".join(decl(v) for v in self.invars)
        lines = [f"{{ lambda {consts}; {inputs}. let"]
        for e in self.eqns:
            outs = " ".join(decl(v) for v in e.outvars)
            params = ""
            if e.params:
                params = "[" + " ".join(f"{k}={_format_param(v)}"
                                        for k, v in e.params.items()) + "]"
            args = " ".join(name(v) for v in e.invars)
            lines.append(f"    {outs} = {e.prim.name}{params} {args}")
        outs = ", ".join(name(v) for v in self.outvars)
        lines.append(f"  in ({outs}{',' if len(self.outvars) == 1 else ''}) }}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.pretty()

    __repr__ = __str__


def _var_name(i: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    s = ""
    i += 1
    while i > 0:
        i, r = divmod(i - 1, 26)
        s = letters[r] + s
    return s


def _format_literal(lit: Literal) -> str:
    v = lit.value
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if dt.is_float(lit.aval.dtype):
        return repr(float(v))
    return str(int(v))


def _format_param(v) -> str:
    if isinstance(v, np.dtype):
        return dt.short_name(v)
    if isinstance(v, tuple):
        return "(" + ",".join(_format_param(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return str(v)


# --- tracers and traces ---------------------------------------------------------------

class Trace:
    """Records primitives applied to its tracers into a Program."""

    _levels = itertools.count()

    def __init__(self, name: str):
        self.name = name
        self.level = next(Trace._levels)
        self.eqns: list[Eqn] = []
        self.active = True
        self.const_vars: dict[int, Var] = {}
        self.consts: list[Any] = []
        self.const_var_list: list[Var] = []
        self.location = errors.user_location(3)

    def new_arg(self, aval: ShapedArray) -> "Tracer":
        return Tracer(self, aval, Var(aval))

    def to_var_or_literal(self, x):
        """The variable (or inline literal) standing for ``x`` in this trace's program.
        Concrete arrays and tracers of enclosing traces (values a loop body or branch
        closes over) become constants of the program: its ``consts`` then hold the outer
        tracers, which the enclosing primitive passes in as operands (closure conversion)."""
        if isinstance(x, Tracer):
            if x._trace is self:
                return x._var
            _check_usable(x, 4)
            if x._trace.level > self.level:
                raise errors.UnexpectedTracerError(
                    f"{errors.user_location(3)}: a value traced inside {x._trace.name} is used "
                    f"in the enclosing {self.name}; return it from the inner function instead")
        else:
            aval = get_aval(x)
            if aval.shape == ():
                return Literal(np.asarray(x, aval.dtype).item(), aval)
        key = id(x)
        var = self.const_vars.get(key)
        if var is None:
            var = Var(get_aval(x))
            self.const_vars[key] = var
            self.consts.append(x)  # keeps x alive, so its id stays unique
            self.const_var_list.append(var)
        return var

    def process_primitive(self, prim: Primitive, args, params):
        avals = [get_aval(a) for a in args]
        out = prim.abstract_eval(*avals, **params)
        outs = list(out) if prim.multiple_results else [out]
        invars = [self.to_var_or_literal(a) for a in args]
        tracers = [Tracer(self, aval, Var(aval)) for aval in outs]
        self.eqns.append(Eqn(prim, invars, [t._var for t in tracers], params,
                             errors.user_location(3)))
        return tracers if prim.multiple_results else tracers[0]

    def to_program(self, in_tracers, out_values, name: str) -> Program:
        for x in out_values:
            if isinstance(x, Tracer) and x._trace is not self and x._trace.level > self.level:
                raise errors.UnexpectedTracerError(
                    f"{errors.user_location(2)}: the output of {name} is a tracer of another "
                    f"trace")
        outvars = [self.to_var_or_literal(x) for x in out_values]
        return Program([t._var for t in in_tracers], self.const_var_list, self.consts,
                       self.eqns, outvars, name)


class _ThreadState(threading.local):
    """Each thread traces on its own: a trace on one thread never records another thread's
    operations."""

    def __init__(self):
        self.trace_stack: list[Trace] = []
        # Traces below this depth of the stack do not record operations on constants
        # (ensure_compile_time_eval: they run eagerly); those started inside the block do.
        self.eager_below = 0


_STATE = _ThreadState()


def current_trace() -> Trace | None:
    """The innermost trace active on this thread, or None outside any trace (or where
    ``compile_time_eval`` runs operations eagerly)."""
    stack = _STATE.trace_stack
    return stack[-1] if len(stack) > _STATE.eager_below else None


def find_trace(args) -> Trace | None:
    """The trace that records an operation on ``args``: the innermost trace among the
    tracers, else the innermost active trace of this thread (constants met while tracing
    are recorded too) unless in ``compile_time_eval``, else None (eager)."""
    stack = _STATE.trace_stack
    trace = stack[-1] if len(stack) > _STATE.eager_below else None
    for a in args:
        if isinstance(a, Tracer):
            t = a._trace
            _check_usable(a, 4)
            if trace is None or t.level > trace.level:
                trace = t
    return trace


def _check_usable(tracer: "Tracer", skip: int) -> None:
    """Raises UnexpectedTracerError unless ``tracer``'s trace is active on this thread."""
    t = tracer._trace
    if not t.active:
        raise errors.UnexpectedTracerError(
            f"{errors.user_location(skip)}: encountered a tracer that escaped its trace: "
            f"a value of type {tracer.aval.str_short()} was created while tracing "
            f"{t.name} (called at {t.location}) and used after that trace ended. "
            f"Return it from the jitted function instead of storing it in a global "
            f"or a closure.")
    if t not in _STATE.trace_stack:
        raise errors.UnexpectedTracerError(
            f"{errors.user_location(skip)}: a value of type {tracer.aval.str_short()} is "
            f"being traced by {t.name} (called at {t.location}) on another thread; traced "
            f"values cannot cross threads. Pass concrete arrays between threads.")


class Tracer:
    """A value standing for an array while a function is traced."""

    __slots__ = ("_trace", "aval", "_var", "__weakref__")
    __array_priority__ = 1000

    def __init__(self, trace: Trace, aval: ShapedArray, var: Var):
        self._trace = trace
        self.aval = aval
        self._var = var

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)
    itemsize = property(lambda self: self.aval.dtype.itemsize)
    nbytes = property(lambda self: self.aval.size * self.aval.dtype.itemsize)

    def item(self, *args):
        self._concrete_error(".item()")

    def tolist(self):
        self._concrete_error(".tolist()")

    def tobytes(self, order="C"):
        self._concrete_error(".tobytes()")

    def __repr__(self) -> str:
        return f"Traced<{self.aval.str_short()}>with<{self._trace.name}>"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError(errors.located("len() of a 0-d traced array", errors.user_location(2)))
        return self.shape[0]

    def __bool__(self):
        raise errors.TracerBoolConversionError(errors.located(
            f"the truth value of a traced array ({self.aval.str_short()}) is not known while "
            f"tracing {self._trace.name}: Python control flow (if, while, and, or, not, "
            f"bool()) cannot depend on traced values. Use fusionjit.numpy.where or "
            f"fusionjit.lax.cond/select instead, or mark the argument static with "
            f"static_argnums/static_argnames", errors.user_location(2)))

    def _concrete_error(self, what: str, exc_type=errors.ConcretizationTypeError):
        raise exc_type(errors.located(
            f"{what} needs a concrete value, but this is a traced array "
            f"({self.aval.str_short()}) inside {self._trace.name}. Mark the argument static "
            f"(static_argnums/static_argnames) if its value must be known at trace time",
            errors.user_location(3)))

    def __int__(self):
        self._concrete_error("int()", errors.TracerIntegerConversionError)

    def __float__(self):
        self._concrete_error("float()")

    def __index__(self):
        self._concrete_error("using a traced value as an index or size",
                             errors.TracerIntegerConversionError)

    def __array__(self, *args, **kwargs):
        raise errors.TracerArrayConversionError(errors.located(
            f"a traced array ({self.aval.str_short()}) cannot be converted to a NumPy array "
            f"inside {self._trace.name}; use fusionjit.numpy functions on it instead of numpy",
            errors.user_location(2)))

    def __iter__(self):
        if not self.shape:
            raise TypeError(errors.located("iteration over a 0-d traced array",
                                           errors.user_location(2)))
        return (self[i] for i in range(self.shape[0]))

    def __hash__(self):
        raise TypeError(errors.located(
            "traced arrays are not hashable; a static argument must be a concrete value",
            errors.user_location(2)))


def in_compile_time_eval() -> bool:
    """Whether a ``compile_time_eval`` block hides traces begun before it."""
    return _STATE.eager_below > 0


class compile_time_eval:
    """Within it, operations on concrete values run eagerly even while a function is
    traced (``fusionjit.ensure_compile_time_eval``); those on tracers are still traced."""

    def __enter__(self):
        self._saved = _STATE.eager_below
        _STATE.eager_below = len(_STATE.trace_stack)

    def __exit__(self, *exc):
        _STATE.eager_below = self._saved


def new_trace(name: str) -> Trace:
    t = Trace(name)
    _STATE.trace_stack.append(t)
    return t


def end_trace(trace: Trace) -> None:
    trace.active = False
    stack = _STATE.trace_stack
    assert stack and stack[-1] is trace
    stack.pop()
