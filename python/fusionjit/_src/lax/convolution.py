"""Convolutions and windowed reductions, as ``jax.lax``: ``conv_general_dilated`` (and
``conv``, ``conv_with_general_padding``), ``reduce_window`` and its max/min/sum forms.

Both are written with existing primitives rather than new IR ops. A convolution is checked
and normalised here (dimension numbers, padding) and computed channels-last by im2col.py:
patches (im2col) gathered from the input, contracted with the kernel by one ``dot_general``
per feature group, its gradient as convolutions. A windowed reduction pads its input and
combines its taps' strided slices elementwise (lax.add, max, min, mul), or folds any other
computation over them, batched along the outputs; the slices fuse into the kernels that
read them. XLA's semantics: dimension numbers as in JAX, ``"SAME"``/``"SAME_LOWER"``/
``"VALID"`` or explicit (possibly negative) padding, ``lhs_dilation`` (transposed
convolutions), ``rhs_dilation`` (atrous), ``feature_group_count`` (grouped and depthwise).
Sums over the taps go in the patches' order, so float results may differ from XLA's in the
last bits.
"""

from __future__ import annotations

import functools
import operator
from typing import NamedTuple, Sequence

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.lax import elementwise as ew
from fusionjit._src.lax import im2col
from fusionjit._src.lax import shapes as sh
from fusionjit._src.lax.common import asarray_operand
from fusionjit._src.numpy.util import fail
from fusionjit._src.tree_util import tree_unflatten


class ConvDimensionNumbers(NamedTuple):
    """Where each operand keeps its batch (or output feature), feature (or input feature)
    and spatial dimensions: ``lhs_spec``, ``rhs_spec``, ``out_spec`` are tuples of
    dimension indices in that order."""
    lhs_spec: tuple
    rhs_spec: tuple
    out_spec: tuple


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
    """JAX's normal form of ``dimension_numbers``: None (NCHW, OIHW, NCHW order), three
    strings such as ("NHWC", "HWIO", "NHWC"), or a ConvDimensionNumbers."""
    ndim = len(lhs_shape)
    if len(rhs_shape) != ndim:
        fail(f"conv: the lhs and rhs must have the same rank, got shapes {tuple(lhs_shape)} "
             f"and {tuple(rhs_shape)}", ValueError)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if dimension_numbers is None:
        spec = tuple(range(ndim))
        return ConvDimensionNumbers(spec, spec, spec)
    if len(dimension_numbers) != 3 or not all(isinstance(s, str) for s in dimension_numbers):
        fail("conv: dimension_numbers must be None, a ConvDimensionNumbers or three strings "
             f"such as ('NHWC', 'HWIO', 'NHWC'), got {dimension_numbers!r}", TypeError)
    lhs, rhs, out = dimension_numbers
    for s, pair, name in ((lhs, "NC", "lhs"), (rhs, "OI", "rhs"), (out, "NC", "out")):
        if len(s) != ndim or len(set(s)) != ndim or any(s.count(c) != 1 for c in pair):
            fail(f"conv: the {name} spec {s!r} must name {ndim} distinct dimensions with one "
                 f"'{pair[0]}' and one '{pair[1]}'", ValueError)
    spatial = [c for c in rhs if c not in "OI"]
    for s, pair in ((lhs, "NC"), (out, "NC")):
        if sorted(c for c in s if c not in pair) != sorted(spatial):
            fail(f"conv: spatial dimensions {s!r} and {rhs!r} do not match", ValueError)

    def perm(s, pair):
        rest = sorted((i for i, c in enumerate(s) if c not in pair),
                      key=lambda i: spatial.index(s[i]))
        return (s.index(pair[0]), s.index(pair[1])) + tuple(rest)
    return ConvDimensionNumbers(perm(lhs, "NC"), perm(rhs, "OI"), perm(out, "NC"))


def padtype_to_pads(in_shape, window_shape, window_strides, padding) -> list:
    """Explicit (low, high) pads for "SAME", "SAME_LOWER" or "VALID", as XLA computes them."""
    padding = padding.upper()
    if padding == "VALID":
        return [(0, 0)] * len(in_shape)
    if padding not in ("SAME", "SAME_LOWER"):
        fail(f"Unknown padding type: {padding!r} (expected 'SAME', 'SAME_LOWER' or 'VALID')",
             ValueError)
    pads = []
    for n, w, s in zip(in_shape, window_shape, window_strides):
        out = -(-n // s)
        total = max(0, (out - 1) * s + w - n)
        lo = total // 2 if padding == "SAME" else total - total // 2
        pads.append((lo, total - lo))
    return pads


def _pads(name, padding, in_shape, window, strides) -> list:
    if isinstance(padding, str):
        return padtype_to_pads(in_shape, window, strides, padding)
    pads = [tuple(int(v) for v in p) for p in padding]
    if len(pads) != len(in_shape) or any(len(p) != 2 for p in pads):
        fail(f"{name}: padding must be a string or {len(in_shape)} (low, high) pairs, got "
             f"{padding!r}", ValueError)
    return pads


def _ints(name, what, values, n, default=1) -> tuple:
    values = (default,) * n if values is None else tuple(int(v) for v in values)
    if len(values) != n or any(v < 1 for v in values):
        fail(f"{name}: {what} must be {n} positive integers, got {values}", ValueError)
    return values


def _taps(x, window, strides, dilation, dims):
    """For every offset of a window over dimensions ``dims`` of ``x`` (already padded): the
    strided slice of ``x`` that offset reads, all of the output's shape."""
    shape = core.get_aval(x).shape
    out = im2col.out_sizes([shape[d] for d in dims], window, strides, dilation)
    taps = []
    for offset in np.ndindex(*window):
        starts, limits, steps = [0] * len(shape), list(shape), [1] * len(shape)
        for d, k, r, o, s in zip(dims, offset, dilation, out, strides):
            start = min(k * r, shape[d])
            starts[d], limits[d], steps[d] = start, start + (o - 1) * s + 1 if o else start, s
        taps.append(sh.slice(x, starts, limits, steps))
    return taps, tuple(out)


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None):
    """The general convolution of XLA and ``jax.lax.conv_general_dilated``."""
    lhs, rhs = asarray_operand(lhs), asarray_operand(rhs)
    la, ra = core.get_aval(lhs), core.get_aval(rhs)
    if la.dtype != ra.dtype:
        fail(f"conv_general_dilated: lhs and rhs must have the same dtype, got {la.dtype} "
             f"and {ra.dtype}")
    if preferred_element_type is not None:
        # Products and sums in the preferred type (int8 convolutions accumulate in int32).
        d = dt.canonicalize(preferred_element_type)
        lhs, rhs = ew.convert_element_type(lhs, d), ew.convert_element_type(rhs, d)
        la, ra = core.get_aval(lhs), core.get_aval(rhs)
    if batch_group_count != 1:
        fail("conv_general_dilated: batch_group_count > 1 is not supported", NotImplementedError)
    dn = conv_dimension_numbers(la.shape, ra.shape, dimension_numbers)
    nsp = la.ndim - 2
    lhs = sh.transpose(lhs, dn.lhs_spec)  # N, C, spatial...
    rhs = sh.transpose(rhs, dn.rhs_spec)  # O, I, spatial...
    n, c, *in_sp = core.get_aval(lhs).shape
    o, i, *k_sp = core.get_aval(rhs).shape
    g = int(feature_group_count)
    if g < 1 or c % g or o % g or c // g != i:
        fail(f"conv_general_dilated: {c} input features in {g} groups need a kernel of "
             f"{c // max(g, 1)} input features and output features divisible by {g}; the "
             f"kernel has {i} and {o}", ValueError)
    name = "conv_general_dilated"
    strides = _ints(name, "window_strides", window_strides, nsp)
    lhs_dil = _ints(name, "lhs_dilation", lhs_dilation, nsp)
    rhs_dil = _ints(name, "rhs_dilation", rhs_dilation, nsp)
    dilated_k = [(k - 1) * r + 1 for k, r in zip(k_sp, rhs_dil)]
    if isinstance(padding, str) and any(d != 1 for d in lhs_dil):
        fail("String padding is not implemented for transposed convolution using this op. "
             "Please either exactly specify the required padding or use conv_transpose.",
             ValueError)
    pads = _pads(name, padding, in_sp, dilated_k, strides)
    if 0 in k_sp:
        fail(f"{name}: the kernel's spatial dimensions must be positive, got "
             f"{tuple(k_sp)}", ValueError)
    if any((n_ - 1) * d + 1 + lo + hi < 0 for n_, d, (lo, hi) in zip(in_sp, lhs_dil, pads)
           if n_ > 0):
        fail(f"{name}: negative padding is larger than the size of the corresponding "
             f"dimension: got padding={tuple(pads)} for spatial dimensions {tuple(in_sp)}",
             ValueError)
    # Channels last: the patches' features are then the inner part of each tap's run.
    lhs = sh.transpose(lhs, (0,) + tuple(range(2, 2 + nsp)) + (1,))
    rhs = sh.transpose(rhs, tuple(range(2, 2 + nsp)) + (1, 0))
    out = im2col.conv(lhs, rhs, strides, pads, lhs_dil, rhs_dil, g)
    # [N, out..., O] to the output's layout (out_spec lists N, O, spatial... positions).
    canonical_of = [0, 1 + nsp] + list(range(1, 1 + nsp))
    perm = [0] * (nsp + 2)
    for k_, dim in enumerate(dn.out_spec):
        perm[dim] = canonical_of[k_]
    return sh.transpose(out, tuple(perm))


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """conv_general_dilated without dilation, in NCHW / OIHW layout."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    """conv_general_dilated in NCHW / OIHW layout."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                precision=precision, preferred_element_type=preferred_element_type)


# --- windowed reductions ----------------------------------------------------------------------

# The computations combined as elementwise ops on whole taps (JAX's fast path takes lax.add,
# max and min): associative and commutative, so the taps combine in any order and the init
# value joins each window once, at the end. Any other computation is folded over the taps
# (_fold_windows). (Computations used to be recognised by their results on two probes, which
# took ``lambda a, b: where(b > 10, a, a + b)`` for lax.add.)
_MONOIDS = {ew.add: ew.add, ew.max: ew.max, ew.min: ew.min, ew.mul: ew.mul,
            operator.add: ew.add, operator.mul: ew.mul}


class _Windows(NamedTuple):
    """Where each window of a reduce_window reads, per dimension of the operand."""
    dims: tuple      # window_dimensions
    strides: tuple
    pads: list       # (low, high) around the base-dilated operand
    base: tuple      # base_dilation
    dilation: tuple  # window_dilation

    def taps(self, x, fill) -> tuple[list, tuple]:
        """The strided slice of ``x`` (base-dilated and padded, holes and padding reading
        ``fill``) that each window offset reads, in row-major order, and the output shape."""
        x = sh.pad(x, fill, [(lo, hi, b - 1) for (lo, hi), b in zip(self.pads, self.base)])
        return _taps(x, self.dims, self.strides, self.dilation, range(len(self.dims)))

    def reads_operand(self, shape, offset, out):
        """Which outputs' windows read a cell of the operand (not padding, nor a hole of the
        base dilation) at window ``offset``: True or False where all or none do, else the
        boolean array of the output's shape."""
        vectors, partial = [], []
        for d, (n, k, s, r, (lo, _), b, o) in enumerate(zip(
                shape, offset, self.strides, self.dilation, self.pads, self.base, out)):
            q = np.arange(o) * s + k * r - lo  # the cells' positions in the dilated operand
            ok = (q >= 0) & (q <= (n - 1) * b) & (q % b == 0)
            if not ok.any():
                return False
            if not ok.all():
                vectors.append(ok)
                partial.append(d)
        if not partial:
            return True
        grid = functools.reduce(np.logical_and, [  # their outer product
            v.reshape([-1 if j == i else 1 for j in range(len(vectors))])
            for i, v in enumerate(vectors)])
        return sh.broadcast_in_dim(asarray_operand(grid), out, tuple(partial))


def reduce_window(operand, init_value, computation, window_dimensions: Sequence[int],
                  window_strides: Sequence[int] | None = None, padding="VALID",
                  base_dilation=None, window_dilation=None):
    """``jax.lax.reduce_window``: reduces each window of ``operand`` (an array, or a pytree
    of arrays of one shape, reduced together) with ``computation``, a function of two
    pytrees of scalars shaped like ``operand`` returning one, starting from ``init_value``
    (scalars, a pytree of ``operand``'s structure). Padding and the holes of base dilation
    are skipped, not combined, as XLA does. String padding is computed from the operand's
    shape (not base-dilated) and the dilated window, as JAX does."""
    name = "reduce_window"
    from fusionjit._src.lax.reduce_ops import flat_reduction_args
    flat_ops, flat_inits, op_tree = flat_reduction_args(name, operand, init_value, computation,
                                                        ("operand", "init_value"))
    xs = [asarray_operand(x) for x in flat_ops]
    avals = [core.get_aval(x) for x in xs]
    if any(a.shape != avals[0].shape for a in avals):
        fail(f"{name}: all operands must have the same shape, got "
             f"{', '.join(a.str_short() for a in avals)}", ValueError)
    inits = [asarray_operand(v, a.dtype) for v, a in zip(flat_inits, avals)]
    init_avals = [core.get_aval(v) for v in inits]
    if any(i.shape != () for i in init_avals):
        fail(f"{name}: init values must be scalars, got "
             f"{', '.join(i.str_short() for i in init_avals)}")
    if any(i.dtype != a.dtype for i, a in zip(init_avals, avals)):
        fail(f"{name}: the init values' dtypes must match the operands': got operand dtypes "
             f"{[str(a.dtype) for a in avals]} and init value dtypes "
             f"{[str(i.dtype) for i in init_avals]}")
    shape = avals[0].shape
    window = _ints(name, "window_dimensions", window_dimensions, len(shape))
    strides = _ints(name, "window_strides", window_strides, len(shape))
    base = _ints(name, "base_dilation", base_dilation, len(shape))
    wdil = _ints(name, "window_dilation", window_dilation, len(shape))
    dilated_w = [(w - 1) * r + 1 for w, r in zip(window, wdil)]
    windows = _Windows(window, strides, _pads(name, padding, shape, dilated_w, strides), base,
                       wdil)
    if len(xs) == 1 and computation in _MONOIDS:
        return tree_unflatten(op_tree, [_monoid_windows(xs[0], inits[0],
                                                        _MONOIDS[computation], windows)])
    return tree_unflatten(op_tree, _fold_windows(xs, inits, computation, op_tree, windows))


def _fold_windows(xs, inits, computation, tree, windows: _Windows) -> list:
    """reduce_window with any computation, as XLA's loop: each output starts at the init
    values and takes in the cells of its window one by one, row-major, ``acc = f(acc,
    cell)``, skipping padding and holes. (XLA leaves the order open, and its CPU loop
    changes it where the last dimension is padded; only an associative and commutative
    computation has one answer.) The computation is traced on scalars once and applied to
    all outputs at a time, batched along them, as ``lax.reduce`` does."""
    from fusionjit._src.lax.reduce_ops import _elementwise, _trace_computation
    avals = [core.get_aval(x) for x in xs]
    scalars = [core.ShapedArray((), a.dtype, a.weak_type) for a in avals]
    combine = _elementwise(*_trace_computation(computation, tree, scalars, "reduce_window"))
    # Weakly typed results only where the operands are (a Python number as init value
    # does not make them so), as JAX's.
    inits = [ew.convert_element_type(v, a.dtype, weak_type=a.weak_type)
             if core.get_aval(v).weak_type != a.weak_type else v for v, a in zip(inits, avals)]
    taps = [windows.taps(x, asarray_operand(np.zeros((), a.dtype)))[0]
            for x, a in zip(xs, avals)]
    out = core.get_aval(taps[0][0]).shape
    size = int(np.prod(out, dtype=np.int64))
    if size == 0:
        return [sh.broadcast_in_dim(v, out, ()) for v in inits]
    acc = [sh.broadcast_in_dim(v, (size,), ()) for v in inits]
    for k, offset in enumerate(np.ndindex(*windows.dims)):
        reads = windows.reads_operand(avals[0].shape, offset, out)
        if reads is False:
            continue
        new = combine(acc, [sh.reshape(t[k], (size,)) for t in taps])
        if reads is True:
            acc = new
        else:
            keep = sh.reshape(reads, (size,))
            acc = [ew.select(keep, n, a) for n, a in zip(new, acc)]
    return [sh.reshape(a, out) for a in acc]


def _monoid_windows(x, init, combine, windows: _Windows):
    """reduce_window with lax.add, mul, max or min: the taps combined elementwise, padding
    and holes reading the op's identity, the init value joined once."""
    a = core.get_aval(x)
    identity = asarray_operand({ew.add: 0, ew.mul: 1, ew.max: dt.lowest(a.dtype),
                                ew.min: dt.highest(a.dtype)}[combine], a.dtype)

    def reduced(v):
        taps = windows.taps(v, identity)[0]
        # Pairwise, as a balanced tree; the init value joins once (XLA's identity for its
        # ops).
        while len(taps) > 1:
            taps = [combine(taps[j], taps[j + 1]) for j in range(0, len(taps) - 1, 2)] + \
                taps[len(taps) - len(taps) % 2:]
        return combine(taps[0], sh.broadcast_in_dim(init, core.get_aval(taps[0]).shape, ()))

    if combine not in (ew.max, ew.min) or not dt.is_float(a.dtype):
        return reduced(x)
    # A max (min) pool's derivative, as JAX's: each window's slope goes to its first element
    # (in row-major order) that equals the result, not split between ties (common after a
    # ReLU), which differentiating the elementwise maxima would do.
    from fusionjit._src.autodiff import custom_jvp
    pool = custom_jvp(reduced)

    @pool.defjvp
    def _pool_jvp(primals, tangents):
        (v,), (t,) = primals, tangents
        out = pool(v)
        zero = asarray_operand(0, a.dtype)
        found, slope = None, None
        for tap, dtap in zip(windows.taps(v, identity)[0], windows.taps(t, zero)[0]):
            hit = ew.eq(tap, out)
            first = hit if found is None else ew.bitwise_and(hit, ew.bitwise_not(found))
            found = hit if found is None else ew.bitwise_or(found, hit)
            term = ew.select(first, dtap, sh.broadcast_in_dim(zero, core.get_aval(dtap).shape,
                                                              ()))
            slope = term if slope is None else ew.add(slope, term)
        return out, slope
    return pool(x)


def _window_op(fn, init_of):
    def op(operand, window_dimensions, window_strides, padding, base_dilation=None,
           window_dilation=None):
        d = core.get_aval(asarray_operand(operand)).dtype
        return reduce_window(operand, init_of(d), fn, window_dimensions, window_strides,
                             padding, base_dilation, window_dilation)
    return op


reduce_window_max = _window_op(ew.max, dt.lowest)
reduce_window_min = _window_op(ew.min, dt.highest)
reduce_window_sum = _window_op(ew.add, lambda d: 0)
