"""The channels-last convolutions behind ``conv_general_dilated`` (lax/convolution.py): im2col
patches gathered straight from the unpadded input and one GEMM; transposed (lhs-dilated)
convolutions split by output phase into such convolutions; and the gradient of each as
convolutions and a GEMM, as XLA computes it, rather than as the patch gather's scatter-add.

Layouts here: input [N, spatial..., C], kernel [spatial..., I, O] with C = groups * I, output
[N, out..., O]; padding as explicit (low, high) pairs, possibly negative.
"""

from __future__ import annotations

import math

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.lax import elementwise as ew
from fusionjit._src.lax import reductions as red
from fusionjit._src.lax import shapes as sh
from fusionjit._src.lax import slicing as sl
from fusionjit._src.lax.common import asarray_operand
from fusionjit._src.numpy.util import fail

_I32 = np.dtype(np.int32)


def out_sizes(sizes, window, strides, dilation) -> tuple:
    """Output sizes of a window sliding over padded ``sizes``: 0 where it does not fit."""
    return tuple(max(0, (n - (w - 1) * r - 1) // s + 1)
                 for n, w, s, r in zip(sizes, window, strides, dilation))


def conv(x, w, strides, pads, lhs_dil, rhs_dil, groups):
    """The convolution of channels-last ``x`` with ``w`` (layouts as the module says),
    ``lhs_dil`` as interior padding of ``x``."""
    xa, wa = core.get_aval(x), core.get_aval(w)
    nsp = xa.ndim - 2
    k_sp, o = wa.shape[:nsp], wa.shape[-1]
    padded = [(s - 1) * d + 1 + lo + hi if s else lo + hi
              for s, d, (lo, hi) in zip(xa.shape[1:-1], lhs_dil, pads)]
    out_sp = out_sizes(padded, k_sp, strides, rhs_dil)
    shape = (xa.shape[0],) + out_sp + (o,)
    if 0 in shape or 0 in xa.shape or 0 in k_sp:
        return red.full(shape, 0, xa.dtype)
    if any(d != 1 for d in lhs_dil):
        return _by_phase(x, w, strides, pads, lhs_dil, rhs_dil, groups, out_sp)
    return _dense(x, w, tuple(strides), tuple(tuple(p) for p in pads), tuple(rhs_dil),
                  int(groups))


# --- without lhs dilation: im2col and a GEMM ------------------------------------------------

def _dense(x, w, strides, pads, rhs_dil, groups):
    """``conv`` without lhs dilation and with a non-empty output, differentiated as XLA
    does: the input's cotangent a convolution of the output's with the flipped kernel, the
    kernel's the patches contracted with it (the patch gather's own derivative, a
    scatter-add of a K-times larger patch cotangent, was 2x slower than JAX's)."""
    if not dt.is_float(core.get_aval(x).dtype):
        return _forward(x, w, strides, pads, rhs_dil, groups)
    from fusionjit._src.autodiff import custom_vjp
    f = custom_vjp(lambda x, w: _forward(x, w, strides, pads, rhs_dil, groups))

    def fwd(x, w):
        # The output goes unused (the call's own program computes it).
        return None, (x, w)

    def bwd(residuals, ct):
        x, w = residuals
        return (_input_cotangent(ct, w, core.get_aval(x).shape, strides, pads, rhs_dil, groups),
                _kernel_cotangent(x, ct, core.get_aval(w).shape, strides, pads, rhs_dil, groups))
    f.defvjp(fwd, bwd)
    return f(x, w)


def _forward(x, w, strides, pads, rhs_dil, groups):
    """``_dense``'s value: the patches times the kernel (per group, a sum of products)."""
    xa, wa = core.get_aval(x), core.get_aval(w)
    nsp = xa.ndim - 2
    n, c = xa.shape[0], xa.shape[-1]
    k_sp, i, o = wa.shape[:nsp], wa.shape[-2], wa.shape[-1]
    padded = [s + lo + hi for s, (lo, hi) in zip(xa.shape[1:-1], pads)]
    out_sp = out_sizes(padded, k_sp, strides, rhs_dil)
    k = math.prod(k_sp)
    rows = n * math.prod(out_sp)
    by_column = _lanes_along_outputs(x, k_sp, groups)
    patches = _patches(x, out_sp, k_sp, strides, rhs_dil, pads, by_column)
    kernel = sh.reshape(w, (k, i, o))
    g = groups
    if g == 1:
        out = red.dot_general(patches, sh.reshape(kernel, (k * i, o)),
                              (((int(not by_column),), (0,)), ((), ())))
    else:  # each group: its features of every tap against its kernel, as a reduction
        p = sh.reshape(patches, (rows, k, g, c // g, 1))
        wg = sh.transpose(sh.reshape(kernel, (k, i, g, o // g)), (0, 2, 1, 3))
        wg = sh.broadcast_in_dim(wg, (rows, k, g, i, o // g), (1, 2, 3, 4))
        prod = ew.mul(sh.broadcast_in_dim(p, (rows, k, g, i, o // g), (0, 1, 2, 3, 4)), wg)
        out = red.reduce_sum(prod, (1, 3))
    return sh.reshape(out, (n,) + out_sp + (o,))


def _lanes_along_outputs(x, k_sp, groups) -> bool:
    """Whether the patches go in columns (``_patches(..., by_column=True)``): where a
    window's rows (kernel width x channels elements, consecutive in x) are shorter than a
    vector, a vector of one patch row crosses window rows and is gathered a lane at a time;
    one patch column's consecutive elements are neighbouring outputs, a run of x where the
    channels are one (a 5x5 convolution of one channel: 2.4x faster so, a 3x3 one of four
    channels 1.35x; with 32 channels 2x slower)."""
    xa = core.get_aval(x)
    return groups == 1 and xa.shape[-1] * k_sp[-1] * xa.dtype.itemsize < 64


def _patches(x, out_sp, k_sp, strides, dilation, pads, by_column=False):
    """[N * out..., K * C] windows of the channels-last ``x`` [N, spatial..., C] padded by
    ``pads``: row (n, o...), column (tap..., c) holds x[n, o * stride + tap * dilation - low
    ..., c], or 0 where that is outside ``x`` (in the padding). Transposed with
    ``by_column``: [K * C, N * out...]."""
    shape = core.get_aval(x).shape
    n, sp, c = shape[0], shape[1:-1], shape[-1]
    nsp = len(sp)
    rows, cols = n * math.prod(out_sp), math.prod(k_sp) * c
    if math.prod(shape) >= 2**31:
        fail(f"conv_general_dilated: inputs of 2**31 elements or more are not supported "
             f"(input shape {shape})", NotImplementedError)
    # One gather from the unpadded input at a flat index that is a sum of a part per
    # output position and a part per column, and zeros where the window is in the
    # padding (a mask from the same parts): no division. Reading a padded copy instead
    # fused the pad (and the transposes around it) into the gather, which split each
    # flat index into coordinates twice (3x JAX's time for a SAME 3x3 convolution). The
    # per-column parts are tables indexed by the column (a vector load for a vector of
    # columns), as splitting each column into its tap and feature cost vector divisions
    # (2-5x the time).
    window = (n,) + tuple(out_sp) + (cols,)
    perm = (nsp + 1,) + tuple(range(nsp + 1)) if by_column else tuple(range(nsp + 2))
    full = tuple(window[d] for d in perm)
    taps = np.indices(tuple(k_sp) + (c,)).reshape(nsp + 1, cols)  # column -> tap..., feature

    def column(table):
        return sh.broadcast_in_dim(asarray_operand(table.astype(np.int32)), full,
                                   (perm.index(nsp + 1),))

    def const(v):
        return asarray_operand(int(v), _I32)

    def iota(dim, scale):  # along window dimension `dim`
        i = sh.broadcasted_iota(_I32, full, perm.index(dim))
        return i if scale == 1 else ew.mul(i, const(scale))
    strides_of = [math.prod(shape[d + 1:]) for d in range(len(shape))]  # of x, row-major
    at_column = taps[nsp] + sum(taps[d] * dilation[d] * strides_of[1 + d] for d in range(nsp))
    at_column -= sum(lo * strides_of[1 + d] for d, (lo, _) in enumerate(pads))
    flat = ew.add(iota(0, strides_of[0]), column(at_column))
    inside = None
    for d in range(nsp):
        (lo, _), s, r, size = pads[d], strides[d], dilation[d], sp[d]
        flat = ew.add(flat, iota(1 + d, s * strides_of[1 + d]))
        # Only the sides a window can cross are tested (none for VALID).
        last = (out_sp[d] - 1) * s + (k_sp[d] - 1) * r
        if lo > 0 or last >= lo + size:
            at = ew.add(iota(1 + d, s), column(taps[d] * r))  # the coordinate + lo
            tests = ([ew.ge(at, const(lo))] if lo > 0 else []) + \
                ([ew.lt(at, const(lo + size))] if last >= lo + size else [])
            for t in tests:
                inside = t if inside is None else ew.bitwise_and(inside, t)
    # Indices of padded cells may fall outside x: the gather clamps them, the mask zeroes
    # what they read.
    dn = sl.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,),
                                   start_index_map=(0,))
    source = sh.reshape(x, (math.prod(shape),))
    out = sl.gather(source, sh.reshape(flat, full + (1,)), dn, (1,), mode="promise_in_bounds")
    if inside is not None:
        out = ew.select(inside, out, red.full(full, 0, core.get_aval(x).dtype))
    return sh.reshape(out, (cols, rows) if by_column else (rows, cols))


def _input_cotangent(ct, w, x_shape, strides, pads, rhs_dil, groups):
    """The cotangent of the input: ``ct`` (dilated by the strides) convolved with the
    kernel flipped in space and with its input and output features swapped, per group."""
    nsp = len(x_shape) - 2
    k_sp = core.get_aval(w).shape[:nsp]
    i, o = core.get_aval(w).shape[nsp:]
    out_sp = core.get_aval(ct).shape[1:1 + nsp]
    g = groups
    wt = sh.rev(w, tuple(range(nsp)))
    wt = sh.reshape(wt, tuple(k_sp) + (i, g, o // g))
    wt = sh.transpose(wt, tuple(range(nsp)) + (nsp + 2, nsp + 1, nsp))
    wt = sh.reshape(wt, tuple(k_sp) + (o // g, g * i))
    # Input position p gets output o through tap t where o * s + t * r - lo = p: with the
    # taps reversed, a window over ct dilated by s and padded by (k - 1) * r - lo below.
    new_pads = [((k - 1) * r - lo, size + lo - (n - 1) * s - 1)
                for k, r, (lo, _), size, n, s in zip(k_sp, rhs_dil, pads, x_shape[1:-1], out_sp,
                                                     strides)]
    return conv(ct, wt, (1,) * nsp, new_pads, strides, rhs_dil, g)


def _kernel_cotangent(x, ct, w_shape, strides, pads, rhs_dil, groups):
    """The cotangent of the kernel: the patches contracted with ``ct`` over the rows (the
    batch and the output positions), per group."""
    nsp = len(w_shape) - 2
    k_sp, (i, o) = w_shape[:nsp], w_shape[nsp:]
    out_sp = core.get_aval(ct).shape[1:1 + nsp]
    rows, k, g = math.prod(core.get_aval(ct).shape[:-1]), math.prod(k_sp), groups
    dy = sh.reshape(ct, (rows, o))
    if g == 1:
        by_column = _lanes_along_outputs(x, k_sp, groups)
        patches = _patches(x, out_sp, k_sp, strides, rhs_dil, pads, by_column)
        dw = red.dot_general(patches, dy, (((int(by_column),), (0,)), ((), ())))
        return sh.reshape(dw, w_shape)
    # Per group, as the forward pass: products summed over the rows (a dot batched over
    # the groups took 13x as long as the forward pass, depthwise).
    patches = _patches(x, out_sp, k_sp, strides, rhs_dil, pads)
    full = (rows, k, g, i, o // g)
    p = sh.broadcast_in_dim(sh.reshape(patches, (rows, k, g, i)), full, (0, 1, 2, 3))
    d = sh.broadcast_in_dim(sh.reshape(dy, (rows, g, o // g)), full, (0, 2, 4))
    dw = red.reduce_sum(ew.mul(p, d), (0,))  # [k, g, i, o/g]
    return sh.reshape(sh.transpose(dw, (0, 2, 1, 3)), w_shape)


# --- lhs dilation by output phase -----------------------------------------------------------

def _by_phase(x, w, strides, pads, lhs_dil, rhs_dil, groups, out_sp):
    """``conv`` with lhs dilation (a transposed convolution, an input gradient of a strided
    one): the dilated input is mostly zeros (3/4 of a 2x2 dilation's), so im2col of it
    would gather, store and multiply them. Outputs whose positions agree modulo a period
    meet the real input elements through the same taps; each such phase is a convolution
    of the undilated input with just those taps, and the phases are interleaved."""
    nsp = len(out_sp)
    k_sp = core.get_aval(w).shape[:nsp]
    in_sp = core.get_aval(x).shape[1:-1]
    plans = []  # per dimension: the period and each phase's (taps, conv parameters)
    for d in range(nsp):
        ld, s, r, k, (lo, _) = lhs_dil[d], strides[d], rhs_dil[d], k_sp[d], pads[d]
        period = ld // math.gcd(s, ld)
        new_s = s // math.gcd(s, ld)
        phases = []
        for phi in range(period):
            count = max(0, -(-(out_sp[d] - phi) // period))
            # Output q * period + phi reads dilated position (q * period + phi) * s + t * r
            # - lo, a real element where that is a multiple of ld: the same taps t for every
            # q, every ld / gcd(r, ld)-th one from the first.
            taps = [t for t in range(k) if (phi * s + t * r - lo) % ld == 0]
            if not taps or not count:
                phases.append((None, count, None))
                continue
            step = ld // math.gcd(r, ld)
            new_r = step * r // ld
            base = (phi * s + taps[0] * r - lo) // ld  # the input element of q = 0, tap 0
            # Padding so that exactly `count` outputs start at element `base` (negative
            # padding drops elements).
            span = (count - 1) * new_s + (len(taps) - 1) * new_r + 1
            phases.append((slice(taps[0], taps[-1] + 1, step), count,
                           (new_s, new_r, (-base, base + span - in_sp[d]))))
        plans.append((period, phases))
    per = [-(-n // p) for n, (p, _) in zip(out_sp, plans)]  # outputs per phase, at most
    n, o = core.get_aval(x).shape[0], core.get_aval(w).shape[-1]
    dtype = core.get_aval(x).dtype
    blocks = []
    for combo in np.ndindex(*[p for p, _ in plans]):
        chosen = [plans[d][1][phi] for d, phi in enumerate(combo)]
        counts = [c for _, c, _ in chosen]
        if any(t is None for t, _, _ in chosen):
            block = red.full((n,) + tuple(counts) + (o,), 0, dtype)
        else:
            sub = _taps_of(w, [t for t, _, _ in chosen])
            block = conv(x, sub, [p[0] for _, _, p in chosen], [p[2] for _, _, p in chosen],
                         (1,) * nsp, [p[1] for _, _, p in chosen], groups)
        # Phases with fewer outputs are padded to the most, then all are interleaved.
        if counts != per:
            block = sh.pad(block, asarray_operand(0, dtype),
                           [(0, 0, 0)] + [(0, m - c, 0) for c, m in zip(counts, per)] +
                           [(0, 0, 0)])
        blocks.append(sh.reshape(block, (1,) + core.get_aval(block).shape))
    periods = [p for p, _ in plans]
    stacked = sh.reshape(sh.concatenate(blocks, 0) if len(blocks) > 1 else blocks[0],
                         tuple(periods) + (n,) + tuple(per) + (o,))
    # [periods..., N, per..., O] -> [N, per_0, period_0, per_1, period_1, ..., O]
    perm = [nsp] + [a for d in range(nsp) for a in (nsp + 1 + d, d)] + [2 * nsp + 1]
    out = sh.reshape(sh.transpose(stacked, tuple(perm)),
                     (n,) + tuple(m * p for m, p in zip(per, periods)) + (o,))
    if tuple(m * p for m, p in zip(per, periods)) != tuple(out_sp):
        out = sh.slice(out, (0,) * (nsp + 2), (n,) + tuple(out_sp) + (o,))
    return out


def _taps_of(w, slices):
    """The kernel ``w`` [spatial..., I, O] at the taps ``slices`` select per dimension."""
    shape = core.get_aval(w).shape
    nsp = len(slices)
    if all(s.start == 0 and s.stop == k and s.step == 1 for s, k in zip(slices, shape)):
        return w
    return sh.slice(w, [s.start for s in slices] + [0, 0],
                    [s.stop for s in slices] + list(shape[nsp:]),
                    [s.step for s in slices] + [1, 1])
