"""``lax.custom_linear_solve`` and ``lax.custom_root``: a solver run as written, whose
derivative is implicit differentiation, as JAX defines it, never the solver's own
iterations differentiated.

The linear map (``matvec``) or the function (``f``) is traced once; the values it closes
over become operands of a ``custom_vjp`` (closure conversion), so that derivatives reach
them. For ``A(c) x = b`` the backward pass solves the transposed system with
``transpose_solve`` (``lam = A^-T g``) and gives ``b`` the cotangent ``lam`` and ``c``
``-(d/dc A(c) x)^T lam``; for ``f(c, x*) = 0`` it solves ``(df/dx)^T lam = g`` with
``tangent_solve`` and gives ``c`` ``-(df/dc)^T lam``. Forward mode is the transpose of that
backward pass, as for any custom_vjp.
"""

from __future__ import annotations

from typing import Callable

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.lax import elementwise as ew
from fusionjit._src.lax.common import _fail, asarray_operand
from fusionjit._src.tree_util import tree_flatten, tree_leaves, tree_unflatten


class _Closed:
    """A function traced once on abstract arguments, its closed-over values set apart
    (``consts``): ``call(consts, *args)`` computes it from them and pytree arguments of the
    traced structure. A ``custom_vjp``'s passes run again later (the backward pass re-runs
    the forward one), so every traced value they use must come in as an operand, never
    through a Python closure."""

    def __init__(self, fun: Callable, args: tuple, name: str):
        from fusionjit._src.lax.control_flow import _trace
        leaves, tree = tree_flatten(args)
        avals = [v if isinstance(v, core.ShapedArray) else core.get_aval(v) for v in leaves]
        self.program, self.consts, self.out_tree = _trace(fun, tree, avals, name)

    def call(self, consts, *args):
        from fusionjit._src.autodiff import eval_program
        leaves = [asarray_operand(v) for v in tree_leaves(args)]
        return tree_unflatten(self.out_tree, eval_program(self.program, list(consts) + leaves))


def _avals_like(tree):
    return tree_unflatten(tree_flatten(tree)[1],
                          [core.get_aval(asarray_operand(v)) for v in tree_leaves(tree)])


def _check_structure(name: str, what: str, got, want, got_avals, want_avals):
    if got != want:
        _fail(f"{name}: {what} output pytree structure must match its input's, got {got} and "
              f"{want}", TypeError)
    for a, o in zip(want_avals, got_avals):
        if a.shape != o.shape:
            _fail(f"{name}: {what} maps {a.str_short()} to {o.str_short()}; it must keep the "
                  f"shape", ValueError)


def _is_float(v) -> bool:
    return dt.is_float(core.get_aval(v).dtype)


def _vjp_consts(fun: Callable, consts: tuple, lam):
    """The cotangents of ``fun(consts)``'s floating-point ``consts`` for the output
    cotangent ``lam`` (None for the others)."""
    from fusionjit._src.autodiff import vjp
    floats = [i for i, c in enumerate(consts) if _is_float(c)]

    def of_floats(*fs):
        full = list(consts)
        for i, f in zip(floats, fs):
            full[i] = f
        return fun(tuple(full))

    _, pull = vjp(of_floats, *(consts[i] for i in floats))
    cts = [None] * len(consts)
    for i, ct in zip(floats, pull(lam)):
        cts[i] = ew.neg(ct)
    return tuple(cts)


def _transposed(linear: Callable, at):
    """The transpose of the linear function ``linear``: its reverse pass (at ``at``)."""
    from fusionjit._src.autodiff import vjp
    _, pull = vjp(linear, at)
    return lambda y: pull(y)[0]


def _first(out, has_aux: bool):
    return out[0] if has_aux else out


def _implicit(name: str, fun: _Closed, x0, solve: Callable, t_solve, has_aux: bool,
              linear: bool):
    """``solve(fun, x0)`` as a custom_vjp of ``fun``'s constants, ``x0`` and the solvers'
    constants, whose backward pass is implicit differentiation with ``t_solve`` (None:
    reverse mode raises)."""
    from fusionjit._src.autodiff import custom_vjp
    x_avals = _avals_like(x0)
    c_avals = tuple(core.get_aval(c) for c in fun.consts)
    solver = _Closed(lambda c, x: solve(lambda v: fun.call(c, v), x), (c_avals, x_avals),
                     f"{name} solve")
    out_tree = solver.out_tree
    if has_aux:
        if out_tree.num_leaves < 1 or len(out_tree.children()) != 2:
            _fail(f"{name}(has_aux=True): solve must return a pair (solution, aux)", TypeError)
        out_tree = out_tree.children()[0]
    want = tree_flatten(x0)[1]
    n = want.num_leaves
    _check_structure(name, "solve()", out_tree, want, solver.program.out_avals[:n],
                     tree_leaves(x_avals))
    transposer = None
    if t_solve is not None:
        def transposed_solve(c, x, g):
            t = t_solve(_transposed(lambda v: fun.call(c, v), x), g)
            return _first(t, has_aux)
        transposer = _Closed(transposed_solve, (c_avals, x_avals, x_avals),
                             f"{name} transpose solve")

    def run(c, s, t, x):
        return solver.call(s, c, x)

    def fwd(c, s, t, x):
        out = run(c, s, t, x)
        return out, (c, t, _first(out, has_aux))

    def bwd(residuals, g):
        c, t, x = residuals
        g = _first(g, has_aux)
        if transposer is None:
            _fail("custom_linear_solve: transpose_solve required for backwards mode automatic "
                  "differentiation of custom_linear_solve (or symmetric=True)", TypeError)
        lam = transposer.call(t, c, x, g)
        ct_c = _vjp_consts(lambda cc: fun.call(cc, x), c, lam)
        ct_x0 = lam if linear else None  # (a root has no derivative by its first guess)
        return ct_c, None, None, ct_x0

    f = custom_vjp(run)
    f.defvjp(fwd, bwd)
    return f(tuple(fun.consts), tuple(solver.consts),
             tuple(transposer.consts) if transposer else (), x0)


def _map_of(name: str, what: str, fun: Callable, x):
    """``fun`` (a map from ``x``'s structure to itself) traced on ``x``."""
    closed = _Closed(fun, (_avals_like(x),), name)
    _check_structure(name, f"{what}()", closed.out_tree, tree_flatten(x)[1],
                     closed.program.out_avals, tree_leaves(_avals_like(x)))
    return closed


def _callables(name: str, **fns):
    for what, f in fns.items():
        if f is not None and not callable(f):
            _fail(f"{name}: {what} must be callable, got {type(f).__name__}")


def custom_linear_solve(matvec: Callable, b, solve: Callable, transpose_solve=None,
                        symmetric: bool = False, has_aux: bool = False):
    """``jax.lax.custom_linear_solve``: ``solve(matvec, b)``, the ``x`` with
    ``matvec(x) == b`` (``matvec`` linear, ``b`` a pytree), differentiated implicitly: the
    solver's steps are never differentiated; reverse mode solves the transposed system with
    ``transpose_solve(vecmat, g)`` (``solve`` itself if ``symmetric``). With ``has_aux``,
    ``solve`` (and ``transpose_solve``) return ``(x, aux)``, and so does this."""
    name = "custom_linear_solve"
    _callables(name, matvec=matvec, solve=solve, transpose_solve=transpose_solve)
    if matvec is None or solve is None:
        _fail(f"{name}: matvec and solve must be callable")
    b = tree_unflatten(tree_flatten(b)[1], [asarray_operand(v) for v in tree_leaves(b)])
    mv = _map_of(name, "matvec", matvec, b)
    t_solve = solve if symmetric else transpose_solve
    return _implicit(name, mv, b, solve, t_solve, has_aux, linear=True)


def custom_root(f: Callable, initial_guess, solve: Callable, tangent_solve: Callable,
                has_aux: bool = False):
    """``jax.lax.custom_root``: ``solve(f, initial_guess)``, a root of ``f`` (a pytree to
    one of the same structure), differentiated implicitly by the values ``f`` closes over
    (``dx* = -(df/dx)^-1 df/dc dc``, the linear systems solved by
    ``tangent_solve(g, y)``, which finds ``x`` with ``g(x) == y`` for a linear ``g``); the
    solver's steps are never differentiated, and ``initial_guess`` gets no derivative.
    With ``has_aux``, ``solve`` returns ``(root, aux)`` and so does this."""
    name = "custom_root"
    _callables(name, f=f, solve=solve, tangent_solve=tangent_solve)
    guess = tree_unflatten(tree_flatten(initial_guess)[1],
                           [asarray_operand(v) for v in tree_leaves(initial_guess)])
    fn = _map_of(name, "f", f, guess)

    def t_solve(vecmat, g):
        out = tangent_solve(vecmat, g)
        return (out, None) if has_aux else out
    return _implicit(name, fn, guess, solve, t_solve, has_aux, linear=False)
