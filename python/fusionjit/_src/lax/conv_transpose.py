"""``jax.lax.conv_transpose``: the transposed ("fractionally strided", or "deconvolution")
convolution, as one ``conv_general_dilated`` whose input is dilated by the strides.

Padding "SAME" gives outputs of ``input * stride`` and "VALID" of ``input * stride +
max(k - stride, 0)`` per spatial dimension (k the kernel's size after ``rhs_dilation``),
with the same split between the low and the high side as JAX; explicit (low, high) pairs
pad the dilated input as given. ``transpose_kernel=True`` flips the kernel's spatial axes
and swaps its two feature axes, which makes the result the gradient of the forward
convolution with that kernel (what JAX's ``conv_transpose`` computes then)."""

from __future__ import annotations

import operator

from fusionjit._src import core
from fusionjit._src.lax import shapes as sh
from fusionjit._src.lax.common import asarray_operand
from fusionjit._src.lax.convolution import (ConvDimensionNumbers, conv_dimension_numbers,
                                            conv_general_dilated)
from fusionjit._src.numpy.util import fail


def _default_dimension_numbers(ndim: int) -> ConvDimensionNumbers:
    """Channels last, as JAX's default for conv_transpose: ("NHWC", "HWIO", "NHWC") in 2-D,
    the same pattern for any number of spatial dimensions."""
    if ndim < 2:
        fail(f"conv_transpose needs operands of rank >= 2 (batch and features), got rank "
             f"{ndim}", ValueError)
    spatial = tuple(range(1, ndim - 1))
    lhs = (0, ndim - 1) + spatial
    rhs = (ndim - 1, ndim - 2) + tuple(range(ndim - 2))
    return ConvDimensionNumbers(lhs, rhs, lhs)


def _string_pads(kind: str, k: int, s: int) -> tuple:
    """(low, high) padding of the stride-dilated input for a kernel of (dilated) size k."""
    if kind == "SAME":  # out = in * s: the padded length is (in - 1) * s + 1 + total
        total = k + s - 2
        low = k - 1 if s > k - 1 else -(-total // 2)
    else:  # VALID: every position where the kernel overlaps the input at all
        total = k + s - 2 + max(k - s, 0)
        low = k - 1
    return low, total - low


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel: bool = False, precision=None,
                   preferred_element_type=None):
    """``jax.lax.conv_transpose``: ``lhs`` dilated by ``strides`` and convolved with ``rhs``
    (stride 1). ``padding`` is "SAME", "VALID" or one (low, high) pair per spatial
    dimension; ``dimension_numbers`` defaults to channels last (("NHWC", "HWIO", "NHWC")
    in 2-D)."""
    lhs, rhs = asarray_operand(lhs), asarray_operand(rhs)
    la, ra = core.get_aval(lhs), core.get_aval(rhs)
    if dimension_numbers is None:
        if la.ndim != ra.ndim:
            fail(f"conv_transpose: the lhs and rhs must have the same rank, got shapes "
                 f"{la.shape} and {ra.shape}", ValueError)
        dn = _default_dimension_numbers(la.ndim)
    else:
        dn = conv_dimension_numbers(la.shape, ra.shape, dimension_numbers)
    nsp = la.ndim - 2
    try:
        strides = tuple(operator.index(s) for s in strides)
    except TypeError:
        fail(f"conv_transpose: strides must be a sequence of {nsp} ints, got {strides!r}",
             TypeError)
    if len(strides) != nsp or any(s < 1 for s in strides):
        fail(f"conv_transpose: strides must be {nsp} positive ints (one per spatial "
             f"dimension), got {strides}", ValueError)
    rhs_dilation = (1,) * nsp if rhs_dilation is None else tuple(rhs_dilation)
    if len(rhs_dilation) != nsp:
        fail(f"conv_transpose: rhs_dilation must be {nsp} positive ints, got {rhs_dilation}",
             ValueError)
    if isinstance(padding, str):
        kind = padding  # (capitals only, as JAX's)
        if kind not in ("SAME", "VALID"):
            fail(f"conv_transpose: padding must be 'SAME', 'VALID' or {nsp} (low, high) "
                 f"pairs, got {padding!r}", ValueError)
        k_sp = [ra.shape[d] for d in dn.rhs_spec[2:]]
        dilated = [(k - 1) * int(r) + 1 for k, r in zip(k_sp, rhs_dilation)]
        pads = [_string_pads(kind, k, s) for k, s in zip(dilated, strides)]
    else:
        try:
            pads = [(operator.index(lo), operator.index(hi)) for lo, hi in padding]
        except (TypeError, ValueError):
            pads = None
        if pads is None or len(pads) != nsp:
            fail(f"conv_transpose: padding must be 'SAME', 'VALID' or {nsp} (low, high) "
                 f"pairs of ints, got {padding!r}", ValueError)
    if transpose_kernel:
        o_dim, i_dim = dn.rhs_spec[0], dn.rhs_spec[1]
        rhs = sh.rev(rhs, tuple(dn.rhs_spec[2:]))
        perm = list(range(ra.ndim))
        perm[o_dim], perm[i_dim] = i_dim, o_dim
        rhs = sh.transpose(rhs, tuple(perm))
    return conv_general_dilated(lhs, rhs, (1,) * nsp, pads, lhs_dilation=strides,
                                rhs_dilation=rhs_dilation, dimension_numbers=dn,
                                precision=precision,
                                preferred_element_type=preferred_element_type)
