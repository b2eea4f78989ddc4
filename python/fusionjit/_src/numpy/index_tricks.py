"""NumPy's index tricks with JAX's semantics: the objects ``r_``, ``c_``, ``mgrid`` and
``ogrid`` that build arrays from slices in ``[]``, NumPy's own ``s_`` and ``index_exp``,
and ``block`` and ``mask_indices``. Slices must be concrete (they fix shapes); array items
may be traced."""

from __future__ import annotations

import builtins
import operator

import numpy as np

from fusionjit._src import core
from fusionjit._src import errors
from fusionjit._src.numpy import manipulation, shapes, sorting
from fusionjit._src.numpy.util import aval, fail, promote_dtypes

# Tuples of index expressions, as ``jnp.s_`` and ``jnp.index_exp`` (NumPy's objects).
s_ = np.s_
index_exp = np.index_exp


def _concrete_number(x, what: str):
    if x is None:
        return None
    if isinstance(x, core.Tracer):
        fail(f"{what} must be concrete: the grid's shape depends on it",
             errors.ConcretizationTypeError)
    if core.is_concrete_array(x):
        return np.asarray(x).item()
    return x


def _grid_from_slice(s: slice, op_name: str):
    """``arange(start, stop, step)``, or ``linspace`` for an imaginary step ``Nj`` (N points,
    both ends included), as NumPy's ``mgrid``."""
    start = _concrete_number(s.start, f"the slice start of {op_name}") or 0
    stop = _concrete_number(s.stop, f"the slice stop of {op_name}")
    step = _concrete_number(s.step, f"the slice step of {op_name}") or 1
    if stop is None:
        fail(f"{op_name}: a slice needs a stop, got {s}", ValueError)
    if isinstance(step, complex):
        return shapes.linspace(start, stop, int(abs(step)))
    return shapes.arange(start, stop, step)


def _as_tuple(key):
    return key if isinstance(key, tuple) else (key,)


class _MGrid:
    """``mgrid[a:b:s, ...]``: a dense mesh (one stacked array, 'ij' indexing) of the
    ranges given by the slices; an imaginary step ``Nj`` asks for N points."""

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _grid_from_slice(key, "mgrid")
        parts = [_grid_from_slice(k, "mgrid") for k in _as_tuple(key)]
        if not parts:
            return shapes.arange(0)
        grids = manipulation.meshgrid(*promote_dtypes(*parts), indexing="ij")
        return shapes.stack(grids, 0)

    def __repr__(self):
        return "fusionjit.numpy.mgrid"


class _OGrid:
    """``ogrid[a:b:s, ...]``: an open mesh (a list of arrays that broadcast together) of the
    ranges given by the slices; an imaginary step ``Nj`` asks for N points."""

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _grid_from_slice(key, "ogrid")
        parts = [_grid_from_slice(k, "ogrid") for k in _as_tuple(key)]
        return manipulation.meshgrid(*promote_dtypes(*parts), indexing="ij", sparse=True)

    def __repr__(self):
        return "fusionjit.numpy.ogrid"


mgrid = _MGrid()
ogrid = _OGrid()


class _AxisConcat:
    """Concatenates the items in ``[]`` along ``axis`` after making each at least
    ``ndmin``-dimensional. Slices become ``arange`` (or ``linspace``); a leading string
    ``"axis,ndmin,trans1d"`` (or ``"r"``/``"c"`` for a row or column matrix) changes the
    defaults, as in NumPy."""

    axis = 0
    ndmin = 1
    trans1d = -1
    op_name = ""

    def __getitem__(self, key):
        items = _as_tuple(key)
        params = [self.axis, self.ndmin, self.trans1d, -1]
        if items and isinstance(items[0], str):
            directive, items = items[0], items[1:]
            if directive == "r":
                params[3] = 0
            elif directive == "c":
                params[3] = 1
            else:
                vec = directive.split(",")
                vec = vec + [str(p) for p in params[len(vec):]] if len(vec) < 4 else \
                    vec[:3] + [str(params[3])]
                try:
                    params = [int(v) for v in vec]
                except ValueError:
                    fail(f"{self.op_name}: could not understand directive {directive!r}",
                         ValueError)
        axis, ndmin, trans1d, matrix = params
        out = []
        for item in items:
            if isinstance(item, slice):
                arr, item_ndim = _grid_from_slice(item, self.op_name), 0
            elif isinstance(item, str):
                fail(f"{self.op_name}: a string directive must come first", ValueError)
            else:
                arr = shapes.array(item)
                item_ndim = aval(arr).ndim
            arr = shapes.array(arr, ndmin=ndmin)
            if trans1d != -1 and ndmin - item_ndim > 0:
                order = tuple(range(ndmin))
                shift = ndmin - builtins.abs(ndmin + trans1d + 1) % ndmin
                arr = shapes.transpose(arr, order[shift:] + order[:shift])
            out.append(arr)
        if not out:
            fail(f"{self.op_name}[] needs at least one item", ValueError)
        res = shapes.concatenate(out, axis=axis)
        if matrix != -1 and aval(res).ndim == 1:
            res = shapes.expand_dims(res, matrix)
        return res

    def __len__(self) -> int:
        return 0

    def __repr__(self):
        return f"fusionjit.numpy.{self.op_name}"


class RClass(_AxisConcat):
    """``r_[...]``: the items concatenated along the first axis (rows)."""
    axis, ndmin, trans1d, op_name = 0, 1, -1, "r_"


class CClass(_AxisConcat):
    """``c_[...]``: the items as columns, concatenated along the last axis."""
    axis, ndmin, trans1d, op_name = -1, 2, 0, "c_"


r_ = RClass()
c_ = CClass()


def _block(xs):
    """(the assembled array, the list depth) of a nested list of arrays."""
    if isinstance(xs, tuple):
        fail(f"block does not allow tuples, got {xs!r}; use lists", TypeError)
    if isinstance(xs, list):
        if not xs:
            fail("block does not allow empty lists", ValueError)
        parts, depths = zip(*(_block(x) for x in xs))
        if any(d != depths[0] for d in depths[1:]):
            fail(f"block: mismatched list depths {list(depths)}", ValueError)
        rank = builtins.max(depths[0], builtins.max(aval(p).ndim for p in parts))
        parts = [shapes.array(p, ndmin=rank) for p in parts]
        return shapes.concatenate(parts, axis=-depths[0]), depths[0] + 1
    return shapes.array(xs), 1


def block(arrays):
    """An array assembled from nested lists of blocks: the innermost lists are joined along
    the last axis, the next ones along the axis before it, and so on (``numpy.block``)."""
    return _block(arrays)[0]


def mask_indices(n: int, mask_func, k: int = 0, *, size=None):
    """The (row, column) indices where ``mask_func(ones((n, n)), k)`` is non-zero, e.g.
    ``mask_indices(3, triu)``; under jit pass ``size`` as for ``nonzero``."""
    n = operator.index(n)
    mask = mask_func(shapes.ones((n, n)), k)
    return sorting.nonzero(mask, size=size)
