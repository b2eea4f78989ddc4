"""Vectorising map: ``vmap`` with JAX's API. The function is traced once for one example (the
mapped axes removed); the program is then evaluated on the whole batch by a rule per
primitive that rewrites it to carry the batch along a leading axis (a batched value always
has its batch axis first; an unbatched one is used as it is, or broadcast where a rule needs
every operand batched). The rules bind ``lax`` primitives, so a batched program runs eagerly
or records into an enclosing ``jit`` trace, where it fuses like any other code; ``grad`` and
``vmap`` compose either way round."""

from __future__ import annotations

import contextlib
import functools
import operator
import threading
from typing import Any, Callable, Sequence

import numpy as np

from fusionjit._src import core, errors, tracing, tree_util
from fusionjit._src.lax import elementwise as ew
from fusionjit._src.lax import shapes as sh

# rule(size, values, batched, **params) -> (outputs, batched): the values as the primitive
# takes them, each batched one with its batch axis first; the outputs (a list for primitives
# with several results) and which of them carry the batch.
Rule = Callable[..., Any]
_BATCH: dict[core.Primitive, Rule] = {}


def defbatch(*prims: core.Primitive):
    """Registers a batching rule (see ``Rule``) for the primitives."""
    def register(rule: Rule) -> Rule:
        for p in prims:
            _BATCH[p] = rule
        return rule
    return register


def _fail(message: str, exc_type=ValueError):
    raise exc_type(errors.located(message, errors.user_location()))


# --- named axes -----------------------------------------------------------------------
# A vmap with ``axis_name`` binds that name (with its size) while its function is traced and
# its program batched; collectives (collectives.py) name the axes they reduce over. While a
# program is batched, the name of the axis being batched is "current": an equation naming it
# goes to its rule even when no operand is batched (axis_index has none, psum of a constant
# multiplies it by the size); one naming only other (enclosing) axes is bound again.

class _Axes(threading.local):
    def __init__(self):
        self.bound: list = []  # (name, size) of the enclosing named vmaps, outermost first
        self.current: list = []  # the name of the axis each running batch_program batches


_AXES = _Axes()
# primitive -> params -> the axis names the equation uses (collectives.py registers them);
# INTRODUCE: those whose result differs between examples with no operand batched.
NAMED: dict[core.Primitive, Callable[[dict], tuple]] = {}
INTRODUCE: set = set()


def bound_axes() -> list:
    """(name, size) of the named axes bound here, outermost first."""
    return list(_AXES.bound)


def current_axis():
    """The name of the axis being batched now (None outside batching, or for an unnamed
    vmap)."""
    return _AXES.current[-1] if _AXES.current else None


@contextlib.contextmanager
def _named_axis(name, size: int):
    if name is not None:
        _AXES.bound.append((name, size))
    try:
        yield
    finally:
        if name is not None:
            _AXES.bound.pop()


@contextlib.contextmanager
def _batching_axis(name):
    _AXES.current.append(name)
    try:
        yield
    finally:
        _AXES.current.pop()


def _sub_programs(eqn: core.Eqn):
    for value in eqn.params.values():
        for p in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(p, core.Program):
                yield p


def _names(eqn: core.Eqn, name, prims) -> bool:
    """Whether ``eqn`` (or an equation of a program in its params: a loop's body) is one of
    ``prims`` using the axis ``name``."""
    if eqn.prim in prims and name in NAMED[eqn.prim](eqn.params):
        return True
    return any(_names(e, name, prims) for p in _sub_programs(eqn) for e in p.eqns)


# --- the transformation ---------------------------------------------------------------

def broadcast_batch(x, size: int):
    """``x`` (one example) repeated ``size`` times along a new leading axis."""
    shape = tuple(core.get_aval(x).shape)
    return sh.broadcast_in_dim(x, (size,) + shape, tuple(range(1, len(shape) + 1)))


def _read(env, v):
    if isinstance(v, core.Literal):
        return np.asarray(v.value, v.aval.dtype), False
    return env[id(v)]


def batch_program(program: core.Program, args: Sequence, batched: Sequence[bool], size: int):
    """``program`` (traced for one example) applied to a batch of ``size``: ``args`` are its
    inputs, those marked ``batched`` with the batch axis first. Returns (outputs, batched)."""
    env: dict = {}
    name = current_axis()
    for var, val in zip(program.constvars, program.consts):
        env[id(var)] = (val, False)
    for var, val, b in zip(program.invars, args, batched):
        env[id(var)] = (val, bool(b))
    for eqn in program.eqns:
        ins = [_read(env, v) for v in eqn.invars]
        vals, bats = [x for x, _ in ins], [b for _, b in ins]
        if not any(bats) and (name is None or not _names(eqn, name, NAMED)):
            outs = eqn.prim.bind(*vals, **eqn.params)
            outs = outs if eqn.prim.multiple_results else [outs]
            out_bats = [False] * len(outs)
        else:
            rule = _BATCH.get(eqn.prim)
            if rule is None:
                raise NotImplementedError(
                    f"{eqn.source}: fusionjit.vmap has no rule for '{eqn.prim.name}' yet")
            outs, out_bats = rule(size, vals, bats, **eqn.params)
            if not eqn.prim.multiple_results:
                outs, out_bats = [outs], [out_bats]
        for var, val, b in zip(eqn.outvars, outs, out_bats):
            env[id(var)] = (val, b)
    results = [_read(env, v) for v in program.outvars]
    return [x for x, _ in results], [b for _, b in results]


def batched_outputs(program: core.Program, batched: Sequence[bool]) -> list[bool]:
    """Which outputs of ``program`` depend on its ``batched`` inputs (an upper bound of what
    ``batch_program`` batches: every rule batches only what depends on a batched operand)."""
    deps = {id(v): bool(b) for v, b in zip(program.invars, batched)}
    name = current_axis()
    for eqn in program.eqns:
        b = any(deps.get(id(v), False) for v in eqn.invars if isinstance(v, core.Var))
        b = b or (name is not None and _names(eqn, name, INTRODUCE))
        for v in eqn.outvars:
            deps[id(v)] = b
    return [isinstance(v, core.Var) and deps.get(id(v), False) for v in program.outvars]


def batch_function(program: core.Program, batched: Sequence[bool], size: int,
                   out_batched: Sequence[bool] | None = None) -> Callable:
    """A function of flat values computing ``program`` over the batch, with its outputs
    batched exactly where ``out_batched`` says (broadcast where they came out unbatched)."""
    def run(*args):
        outs, bats = batch_program(program, args, batched, size)
        if out_batched is None:
            return outs
        fixed = []
        for x, b, want in zip(outs, bats, out_batched):
            if b and not want:
                raise AssertionError("fusionjit.vmap: an output batched where its analysis "
                                     "said it would not be (a bug in a batching rule)")
            fixed.append(broadcast_batch(x, size) if want and not b else x)
        return fixed
    return run


# --- vmap -----------------------------------------------------------------------------

def _is_none(x) -> bool:
    return x is None


def _axes_for(axes, tree, what: str) -> list:
    """One axis (or None) per leaf of ``tree``, from ``axes``, a prefix of its structure."""
    if isinstance(axes, (int, np.integer)) or axes is None:
        return [axes] * len(tree_util.tree_leaves(tree))
    treedef = tree_util.tree_structure(axes, is_leaf=_is_none)
    try:
        subtrees = tree_util.flatten_up_to(treedef, tree, what)
    except ValueError as e:
        _fail(f"vmap {what} must be an int, None, or a tree prefix of the "
              f"{'arguments' if 'in_axes' in what else 'outputs'}: {e}")
    out: list = []
    for axis, sub in zip(tree_util.tree_leaves(axes, is_leaf=_is_none), subtrees):
        if axis is not None and not isinstance(axis, (int, np.integer)):
            _fail(f"vmap {what} must hold ints or None, got {axis!r}", TypeError)
        out += [axis] * len(tree_util.tree_leaves(sub))
    return out


def move_axis(x, src: int, dst: int):
    """``x`` with its axis ``src`` moved to position ``dst`` (a transpose)."""
    ndim = len(core.get_aval(x).shape)
    if src == dst:
        return x
    perm = [d for d in range(ndim) if d != src]
    perm.insert(dst, src)
    return sh.transpose(x, tuple(perm))


def _describe(leaf_axes, leaves) -> str:
    parts = []
    for axis, x in zip(leaf_axes, leaves):
        if axis is not None:
            parts.append(f"axis {axis} of {core.get_aval(x).str_short()} (size "
                         f"{core.get_aval(x).shape[axis]})")
    return "; ".join(parts)


def vmap(fun: Callable, in_axes: Any = 0, out_axes: Any = 0, axis_name=None,
         axis_size: int | None = None, spmd_axis_name=None) -> Callable:
    """Vectorises ``fun`` over an axis of its arguments, as ``jax.vmap``: ``in_axes`` (an
    int, None, or a tree prefix of the positional arguments) names each argument's mapped
    axis (None: not mapped, the same for every example); keyword arguments are mapped over
    their leading axis. ``out_axes`` places the batch axis in the outputs (None: an output
    that does not depend on the mapped arguments, returned once). ``axis_size`` gives the
    batch size when no argument is mapped. ``axis_name`` names the mapped axis for the
    collectives of ``fusionjit.lax`` (psum, pmean, pmax, pmin, all_gather, axis_index)
    called in ``fun``; ``spmd_axis_name`` is not supported."""
    if not callable(fun):
        raise TypeError(f"vmap: fun must be callable, got {type(fun).__name__}")
    if spmd_axis_name is not None:
        raise NotImplementedError("vmap: spmd_axis_name (sharding) is not supported")
    if axis_name is not None:
        try:
            hash(axis_name)
        except TypeError:
            _fail(f"vmap: axis_name must be hashable, got {axis_name!r}", TypeError)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if axis_size is not None:
        axis_size = operator.index(axis_size)

    @functools.wraps(fun)
    def batched(*args, **kwargs):
        pos_axes = in_axes
        if isinstance(pos_axes, tuple) and len(pos_axes) != len(args):
            _fail(f"vmap in_axes has {len(pos_axes)} entries for {len(args)} positional "
                  f"arguments; give one per argument (or a single int or None)")
        leaves, in_tree = tree_util.tree_flatten((args, kwargs))
        leaf_axes = _axes_for(pos_axes, args, "in_axes") + [0] * len(
            tree_util.tree_leaves(kwargs))
        # Mapped leaves are traced; the others are passed to ``fun`` as they are (as JAX
        # does: Python values stay concrete, for static arguments and Python control flow).
        sizes = set()
        mapped: dict[int, Any] = {}
        for i, (x, axis) in enumerate(zip(leaves, leaf_axes)):
            if axis is None:
                continue
            x = ew.asarray_operand(x)
            ndim = len(core.get_aval(x).shape)
            if not -ndim <= axis < ndim:
                _fail(f"vmap was asked to map axis {axis} of an argument of shape "
                      f"{core.get_aval(x).str_short()}, which has no such axis")
            axis %= ndim
            sizes.add(core.get_aval(x).shape[axis])
            mapped[i] = move_axis(x, axis, 0)
        if len(sizes) > 1:
            _fail(f"vmap got inconsistent sizes for the mapped axes: "
                  f"{_describe(leaf_axes, leaves)}")
        if sizes:
            size = sizes.pop()
            if axis_size is not None and axis_size != size:
                _fail(f"vmap: axis_size={axis_size} but the mapped axes have size {size}")
        elif axis_size is None:
            _fail("vmap needs axis_size when no argument is mapped (every in_axes is None)")
        else:
            size = axis_size
        avals = []
        for x in mapped.values():
            a = core.get_aval(x)
            avals.append(core.ShapedArray(a.shape[1:], a.dtype, a.weak_type))
        out_tree: list = []

        def flat(*xs):
            full = list(leaves)
            for i, x in zip(mapped, xs):
                full[i] = x
            a, k = tree_util.tree_unflatten(in_tree, full)
            out_leaves, tree = tree_util.tree_flatten(fun(*a, **k))
            out_tree.append(tree)
            return out_leaves

        name = f"vmap({getattr(fun, '__name__', 'fun')})"
        with _named_axis(axis_name, size):
            program = tracing.trace_to_program(flat, avals, name)
            with _batching_axis(axis_name):
                outs, out_bats = batch_program(program, list(mapped.values()),
                                               [True] * len(mapped), size)
        out = tree_util.tree_unflatten(out_tree[0], outs)
        axes = _axes_for(out_axes, out, "out_axes")
        placed = []
        for x, b, axis in zip(outs, out_bats, axes):
            if axis is None:
                if b:
                    _fail(f"vmap out_axes=None for an output that depends on the mapped "
                          f"arguments ({core.get_aval(x).str_short()} per batch); map it "
                          f"(out_axes=0) or return something the same for every example")
                placed.append(x)
                continue
            x = x if b else broadcast_batch(x, size)
            ndim = len(core.get_aval(x).shape)
            if not -ndim <= axis < ndim:
                _fail(f"vmap out_axes={axis} for an output of {ndim - 1} dimensions per "
                      f"example")
            placed.append(move_axis(x, 0, axis % ndim))
        return tree_util.tree_unflatten(out_tree[0], placed)

    return batched


from fusionjit._src import batching_rules  # noqa: E402,F401 (registers the rules)
