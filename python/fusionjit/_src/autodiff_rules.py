"""The backward rules of reverse-mode differentiation (see autodiff.py), one per primitive,
with JAX's conventions where the derivative is not unique: a maximum or minimum splits its
cotangent evenly between tied operands, a clamp passes it only strictly inside its bounds,
floor, ceil, round and sign have zero derivative. Primitives with integer or boolean
results (comparisons, bitwise ops, argmax, iota, random bits) need no rule: no cotangent
reaches them."""

from __future__ import annotations

import functools

import numpy as np

from fusionjit._src import core, tracing
from fusionjit._src import dtypes as dt
from fusionjit._src.autodiff import (active_vars, defvjp, defvjp_active, defvjp_forward,
                                     eval_program, reached_in_loop, transform_name, vjp)
from fusionjit._src.lax import control_flow as cf
from fusionjit._src.lax import elementwise as ew
from fusionjit._src.lax import reductions as red
from fusionjit._src.lax import shapes as sh
from fusionjit._src.lax import slicing as sl


def _aval(x):
    return core.get_aval(x)


def _const(value, like):
    """A scalar of ``like``'s dtype broadcast to its shape."""
    a = _aval(like)
    return red.full(a.shape, value, a.dtype)


def _where(pred, x, y):
    return ew.select(pred, x, y)


def _zero_like(x):
    return _const(0, x)


def _unbroadcast_scalar(ct, operand):
    """The cotangent of a rank-0 operand applied to every element (a clamp's bounds)."""
    if _aval(operand).shape == () and _aval(ct).shape != ():
        return red.reduce_sum(ct, tuple(range(_aval(ct).ndim)))
    return ct


# --- elementwise ----------------------------------------------------------------------

@defvjp(ew.stop_gradient_p)
def _stop_gradient(g, invals, out):
    return [None]


@defvjp(ew.neg_p)
def _neg(g, invals, out):
    return [ew.neg(g)]


@defvjp(ew.abs_p)
def _abs(g, invals, out):
    (x,) = invals
    if not dt.is_float(_aval(x).dtype):
        return [None]
    return [_where(ew.ge(x, _zero_like(x)), g, ew.neg(g))]  # +g at 0, as JAX


@defvjp(ew.sign_p, ew.floor_p, ew.ceil_p, ew.round_p)
def _zero(g, invals, out, **params):
    return [None] * len(invals)


@defvjp(ew.exp_p)
def _exp(g, invals, out):
    return [ew.mul(g, out)]


@defvjp(ew.expm1_p)
def _expm1(g, invals, out):
    return [ew.mul(g, ew.add(out, _const(1, out)))]


@defvjp(ew.log_p)
def _log(g, invals, out):
    return [ew.div(g, invals[0])]


@defvjp(ew.log1p_p)
def _log1p(g, invals, out):
    (x,) = invals
    return [ew.div(g, ew.add(x, _const(1, x)))]


@defvjp(ew.sqrt_p)
def _sqrt(g, invals, out):
    return [ew.div(g, ew.mul(_const(2, out), out))]


@defvjp(ew.rsqrt_p)
def _rsqrt(g, invals, out):
    (x,) = invals
    return [ew.mul(g, ew.mul(_const(-0.5, x), ew.div(out, x)))]


@defvjp(ew.sin_p)
def _sin(g, invals, out):
    return [ew.mul(g, ew.cos(invals[0]))]


@defvjp(ew.cos_p)
def _cos(g, invals, out):
    return [ew.neg(ew.mul(g, ew.sin(invals[0])))]


@defvjp(ew.tan_p)
def _tan(g, invals, out):
    return [ew.mul(g, ew.add(_const(1, out), ew.mul(out, out)))]


@defvjp(ew.tanh_p)
def _tanh(g, invals, out):
    return [ew.mul(g, ew.sub(_const(1, out), ew.mul(out, out)))]


@defvjp(ew.add_p)
def _add(g, invals, out):
    return [g, g]


@defvjp(ew.sub_p)
def _sub(g, invals, out):
    return [g, ew.neg(g)]


@defvjp(ew.mul_p)
def _mul(g, invals, out):
    x, y = invals
    return [ew.mul(g, y), ew.mul(x, g)]


@defvjp(ew.div_p)
def _div(g, invals, out):
    x, y = invals
    if not dt.is_float(_aval(x).dtype):
        return [None, None]
    gx = ew.div(g, y)
    return [gx, ew.neg(ew.mul(gx, out))]


@defvjp(ew.rem_p)
def _rem(g, invals, out):
    x, y = invals
    if not dt.is_float(_aval(x).dtype):
        return [None, None]
    q = ew.div(ew.sub(x, out), y)  # x / y truncated toward zero, exactly
    return [g, ew.neg(ew.mul(g, ew.round(q)))]


def _minmax(g, invals, out):
    x, y = invals
    half = ew.mul(g, _const(0.5, g))
    gx = _where(ew.eq(x, out), _where(ew.eq(y, out), half, g), _zero_like(g))
    gy = _where(ew.eq(y, out), _where(ew.eq(x, out), half, g), _zero_like(g))
    return [gx, gy]


defvjp(ew.max_p, ew.min_p)(_minmax)


@defvjp(ew.pow_p)
def _pow(g, invals, out):
    x, y = invals
    one, zero = _const(1, x), _zero_like(x)
    # d/dx = y x^(y-1) (0 where y == 0); d/dy = log(x) x^y (0 where x == 0, as JAX).
    dx = _where(ew.eq(y, zero), zero, ew.mul(y, ew.pow(x, ew.sub(y, one))))
    dy = ew.mul(ew.log(_where(ew.eq(x, zero), one, x)), out)
    return [ew.mul(g, dx), ew.mul(g, dy)]


@defvjp(ew.atan2_p)
def _atan2(g, invals, out):
    x, y = invals
    r = ew.add(ew.mul(x, x), ew.mul(y, y))
    return [ew.mul(g, ew.div(y, r)), ew.neg(ew.mul(g, ew.div(x, r)))]


@defvjp(red.integer_pow_p)
def _integer_pow(g, invals, out, *, y):
    (x,) = invals
    if y == 0:
        return [None]
    return [ew.mul(g, ew.mul(_const(y, x), red.integer_pow(x, y - 1)))]


@defvjp(ew.select_p)
def _select(g, invals, out):
    pred, _, _ = invals
    zero = _zero_like(g)
    return [None, _where(pred, g, zero), _where(pred, zero, g)]


@defvjp(ew.clamp_p)
def _clamp(g, invals, out):
    lo, x, hi = invals
    lo_b = sh.broadcast_in_dim(lo, _aval(x).shape, ()) if _aval(lo).shape != _aval(x).shape else lo
    hi_b = sh.broadcast_in_dim(hi, _aval(x).shape, ()) if _aval(hi).shape != _aval(x).shape else hi
    zero = _zero_like(g)
    inside = ew.bitwise_and(ew.gt(x, lo_b), ew.lt(x, hi_b))
    return [_unbroadcast_scalar(_where(ew.lt(x, lo_b), g, zero), lo),
            _where(inside, g, zero),
            _unbroadcast_scalar(_where(ew.gt(x, hi_b), g, zero), hi)]


@defvjp(ew.fma_p)
def _fma(g, invals, out):
    a, b, _ = invals
    return [ew.mul(g, b), ew.mul(a, g), g]


@defvjp(ew.convert_element_type_p)
def _convert(g, invals, out, *, new_dtype, weak_type):
    (x,) = invals
    d = _aval(x).dtype
    if not dt.is_float(d):
        return [None]
    return [ew.convert_element_type(g, d)]


# --- reductions and products ----------------------------------------------------------

def _kept(x, axes):
    return tuple(d for d in range(_aval(x).ndim) if d not in axes)


@defvjp(red.reduce_sum_p)
def _reduce_sum(g, invals, out, *, axes):
    (x,) = invals
    return [sh.broadcast_in_dim(g, _aval(x).shape, _kept(x, axes))]


def _reduce_chosen(g, invals, out, *, axes):
    # The cotangent split evenly between the elements equal to the maximum (minimum).
    (x,) = invals
    shape, kept = _aval(x).shape, _kept(x, axes)
    hit = ew.eq(x, sh.broadcast_in_dim(out, shape, kept))
    ones = ew.convert_element_type(hit, _aval(x).dtype)
    count = red.reduce_sum(ones, axes)
    share = sh.broadcast_in_dim(ew.div(g, count), shape, kept)
    return [ew.mul(share, ones)]


defvjp(red.reduce_max_p, red.reduce_min_p)(_reduce_chosen)


@defvjp(red.reduce_prod_p)
def _reduce_prod(g, invals, out, *, axes):
    # Each element's cotangent is g times the product of the others: out / x where x is
    # not 0; where one element is 0, the product of the nonzero others for it and 0 for the
    # rest; where two or more are 0, 0 for all.
    (x,) = invals
    shape, kept, d = _aval(x).shape, _kept(x, axes), _aval(x).dtype
    zero = ew.eq(x, _zero_like(x))
    nonzero = red.reduce_prod(_where(zero, _const(1, x), x), axes)
    zeros = red.reduce_sum(ew.convert_element_type(zero, d), axes)
    b = lambda v: sh.broadcast_in_dim(v, shape, kept)  # noqa: E731
    zeros_b, nonzero_b = b(zeros), b(nonzero)
    safe_x = _where(zero, _const(1, x), x)
    others = _where(zero, _where(ew.eq(zeros_b, _const(1, x)), nonzero_b, _zero_like(x)),
                    _where(ew.eq(zeros_b, _zero_like(x)), ew.div(nonzero_b, safe_x),
                           _zero_like(x)))
    return [ew.mul(b(g), others)]


@defvjp(red.dot_general_p)
def _dot_general(g, invals, out, *, dimension_numbers):
    # The output is [batch, lhs free, rhs free]; each operand's cotangent contracts g with
    # the other operand over the other's free dimensions, then is put back in the operand's
    # dimension order.
    lhs, rhs = invals
    (lc, rc), (lb, rb) = dimension_numbers
    ln, rn = _aval(lhs).ndim, _aval(rhs).ndim
    lf = [d for d in range(ln) if d not in lc and d not in lb]
    rf = [d for d in range(rn) if d not in rc and d not in rb]
    nb = len(lb)
    g_lf = list(range(nb, nb + len(lf)))
    g_rf = list(range(nb + len(lf), nb + len(lf) + len(rf)))
    batch = list(range(nb))
    # d lhs: g [b, lf, rf] . rhs [rb, rc, rf] over rf -> [b, lf, rc]
    dl = red.dot_general(g, rhs, ((tuple(g_rf), tuple(rf)), (tuple(batch), tuple(rb))))
    # Its dimensions are batch, lhs free, then rhs's contracting ones in rhs order.
    rc_sorted = sorted(rc)
    dl_dims = list(lb) + lf + [lc[rc.index(d)] for d in rc_sorted]
    dl = sh.transpose(dl, tuple(int(np.argsort(dl_dims)[i]) for i in range(ln)))
    # d rhs: g [b, lf, rf] . lhs [lb, lc, lf] over lf -> [b, rf, lc]
    dr = red.dot_general(g, lhs, ((tuple(g_lf), tuple(lf)), (tuple(batch), tuple(lb))))
    lc_sorted = sorted(lc)
    dr_dims = list(rb) + rf + [rc[lc.index(d)] for d in lc_sorted]
    dr = sh.transpose(dr, tuple(int(np.argsort(dr_dims)[i]) for i in range(rn)))
    return [dl, dr]


# --- shapes, slices and indexing ------------------------------------------------------

@defvjp(sh.broadcast_in_dim_p)
def _broadcast_in_dim(g, invals, out, *, shape, broadcast_dimensions):
    (x,) = invals
    xs = _aval(x).shape
    summed = tuple(d for d in range(len(shape)) if d not in broadcast_dimensions)
    stretched = tuple(broadcast_dimensions[i] for i, n in enumerate(xs)
                      if n == 1 and shape[broadcast_dimensions[i]] != 1)
    axes = tuple(sorted(summed + stretched))
    ct = red.reduce_sum(g, axes) if axes else g
    return [sh.reshape(ct, xs)]


@defvjp(sh.reshape_p)
def _reshape(g, invals, out, *, new_sizes):
    return [sh.reshape(g, _aval(invals[0]).shape)]


@defvjp(sh.transpose_p)
def _transpose(g, invals, out, *, permutation):
    return [sh.transpose(g, tuple(int(i) for i in np.argsort(permutation)))]


@defvjp(sh.rev_p)
def _rev(g, invals, out, *, dimensions):
    return [sh.rev(g, dimensions)]


@defvjp(sh.slice_p)
def _slice(g, invals, out, *, start_indices, limit_indices, strides):
    (x,) = invals
    config = []
    for s, n, st, d in zip(start_indices, _aval(g).shape, strides, _aval(x).shape):
        hi = d - s - (n - 1) * st - 1 if n else d - s
        config.append((s, hi, st - 1) if n else (s, hi, 0))
    return [sh.pad(g, np.zeros((), _aval(x).dtype), config)]


@defvjp(sh.concatenate_p)
def _concatenate(g, invals, out, *, dimension):
    cts, at = [], 0
    shape = _aval(g).shape
    for x in invals:
        n = _aval(x).shape[dimension]
        start = [0] * len(shape)
        limit = list(shape)
        start[dimension], limit[dimension] = at, at + n
        cts.append(sh.slice(g, tuple(start), tuple(limit)))
        at += n
    return cts


@defvjp(sh.pad_p)
def _pad(g, invals, out, *, padding_config):
    x, value = invals
    # Negative padding cropped the operand: pad the cotangent back with zeros first.
    undo = [(max(-lo, 0), max(-hi, 0), 0) for lo, hi, _ in padding_config]
    full = sh.pad(g, np.zeros((), _aval(x).dtype), undo) if any(map(any, undo)) else g
    start = tuple(max(lo, 0) for lo, _, _ in padding_config)
    strides = tuple(i + 1 for _, _, i in padding_config)
    limit = tuple(s + (n - 1) * st + 1 if n else s
                  for s, n, st in zip(start, _aval(x).shape, strides))
    ct_x = sh.slice(full, start, limit, strides)
    everything = tuple(range(_aval(g).ndim))
    ct_value = ew.sub(red.reduce_sum(g, everything), red.reduce_sum(ct_x, everything))
    return [ct_x, ct_value]


@defvjp(sh.dynamic_slice_p)
def _dynamic_slice(g, invals, out, *, slice_sizes):
    x, *starts = invals
    return [sh.dynamic_update_slice_p.bind(_zero_like(x), g, *starts)] + [None] * len(starts)


@defvjp(sh.dynamic_update_slice_p)
def _dynamic_update_slice(g, invals, out):
    x, update, *starts = invals
    ct_x = sh.dynamic_update_slice_p.bind(g, _zero_like(update), *starts)
    ct_update = sh.dynamic_slice_p.bind(g, *starts, slice_sizes=_aval(update).shape)
    return [ct_x, ct_update] + [None] * len(starts)


@defvjp(sl.gather_p)
def _gather(g, invals, out, *, offset_dims, collapsed_slice_dims, start_index_map,
            slice_sizes):
    # The gathered windows added back where they came from; the gather clamps each window
    # into the operand, so the scatter does the same (mode "clip").
    x, idx = invals
    dn = sl.ScatterDimensionNumbers(update_window_dims=offset_dims,
                                    inserted_window_dims=collapsed_slice_dims,
                                    scatter_dims_to_operand_dims=start_index_map)
    return [sl.scatter_add(_zero_like(x), idx, g, dn, mode="clip"), None]


@defvjp(sl.scatter_p)
def _scatter(g, invals, out, *, update_window_dims, inserted_window_dims,
             scatter_dims_to_operand_dims, combiner, indices_are_sorted=False,
             unique_indices=False):
    x, idx, updates = invals
    dn = sl.GatherDimensionNumbers(offset_dims=update_window_dims,
                                   collapsed_slice_dims=inserted_window_dims,
                                   start_index_map=scatter_dims_to_operand_dims)
    u_shape = _aval(updates).shape
    window = iter(u_shape[d] for d in update_window_dims)
    sizes = tuple(1 if d in inserted_window_dims else next(window)
                  for d in range(_aval(x).ndim))

    def gathered(v):
        # Updates the scatter dropped (out of bounds) get no cotangent: filled with 0.
        return sl.gather(v, idx, dn, sizes, mode="fill", fill_value=0)

    if combiner == "add":
        return [g, None, gathered(g)]

    def scattered(v, to):  # v's updates combined by `to` into zeros (mode drop, as `out`)
        return sl.scatter_p.bind(_zero_like(g) if to == "add" else red.full(
            _aval(x).shape, 1, _aval(g).dtype), idx, v,
            update_window_dims=update_window_dims, inserted_window_dims=inserted_window_dims,
            scatter_dims_to_operand_dims=scatter_dims_to_operand_dims, combiner=to,
            indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)

    if combiner in ("maximum", "minimum"):
        # As JAX: a position's cotangent goes to each value equal to its result (the
        # operand's, every update's), split evenly among them. Dropped updates get none.
        ones = red.full(_aval(x).shape, 1, _aval(g).dtype)
        kept = ew.ne(gathered(ones), _zero_like(updates))
        won = ew.bitwise_and(ew.eq(updates, gathered(out)), kept)
        stays = ew.eq(x, out)
        count = ew.add(ew.convert_element_type(stays, _aval(g).dtype),
                       scattered(ew.convert_element_type(won, _aval(g).dtype), "add"))
        share = ew.div(g, ew.max(count, ones))
        return [_where(stays, share, _zero_like(g)), None,
                _where(won, gathered(share), _zero_like(updates))]
    if combiner == "multiply":
        if not unique_indices:
            raise NotImplementedError(
                f"{transform_name()} of a scatter that multiplies needs unique_indices=True "
                f"(as JAX): with repeated indices each update's cotangent is the product of "
                f"the others")
        # out = x * (the update landing there, or 1): each factor's cotangent is g times
        # the other.
        return [ew.mul(g, scattered(updates, "multiply")), None, gathered(ew.mul(g, x))]
    if combiner != "set":
        raise NotImplementedError(
            f"{transform_name()} has no rule for a scatter that combines with '{combiner}' "
            f"yet")
    # Which update landed where (the last of repeated indices wins, as the scatter does):
    # scatter each update's own number, read the numbers back, and compare.
    ids = ew.add(sh.reshape(sh.iota(np.int32, int(np.prod(u_shape))), u_shape),
                 red.full(u_shape, 1, np.int32))
    landed = sl.scatter_p.bind(red.full(_aval(x).shape, 0, np.int32), idx, ids,
                               update_window_dims=update_window_dims,
                               inserted_window_dims=inserted_window_dims,
                               scatter_dims_to_operand_dims=scatter_dims_to_operand_dims,
                               combiner="set", indices_are_sorted=indices_are_sorted,
                               unique_indices=unique_indices)
    won = ew.eq(gathered(landed), ids)
    ct_x = _where(ew.eq(landed, red.full(_aval(x).shape, 0, np.int32)), g, _zero_like(g))
    return [ct_x, None, _where(won, gathered(g), _zero_like(updates))]


# --- control flow ---------------------------------------------------------------------

def _zeros_of(values):
    return [_zero_like(v) for v in values]


def _plus(a, b):
    return [ew.add(x, y) if dt.is_float(_aval(x).dtype) else x for x, y in zip(a, b)]


def _split_scan_operands(invals, num_consts, num_carry):
    return (list(invals[:num_consts]), list(invals[num_consts:num_consts + num_carry]),
            list(invals[num_consts + num_carry:]))


def _ids(vars_) -> list:
    return [id(v) for v in vars_ if isinstance(v, core.Var)]


def _needed(eqns, known, wanted) -> tuple[list, set]:
    """Those of ``eqns`` that compute ``wanted`` (variables) from the variables whose ids
    are ``known``, in order, and the known ids they read."""
    need = {i for i in _ids(wanted) if i not in known}
    reached = {i for i in _ids(wanted) if i in known}
    chosen = []
    for e in reversed(eqns):
        if any(id(v) in need for v in e.outvars):
            chosen.append(e)
            for i in _ids(e.invars):
                (reached if i in known else need).add(i)
    return chosen[::-1], reached


def _values(env: dict, vars_) -> list:
    return [np.asarray(v.value, v.aval.dtype) if isinstance(v, core.Literal) else env[id(v)]
            for v in vars_]


def _eval_needed(eqns, env: dict, wanted) -> None:
    """Binds those of ``eqns`` that ``wanted`` needs and ``env`` does not hold yet, adding
    their results to ``env``."""
    for e in _needed(eqns, env, wanted)[0]:
        outs = e.prim.bind(*_values(env, e.invars), **e.params)
        for v, val in zip(e.outvars, outs if e.prim.multiple_results else [outs]):
            env[id(v)] = val


# The results a scan's forward loop keeps for its backward loop, where the backward pass
# reads them: those of operations that cost more to compute again than to store and load
# (products, reductions, loops, branches, sorts, random bits). What elementwise and shape
# operations compute from them (and from the carry) is computed again, fused into the
# backward loop's kernels, as XLA fuses it into its consumers.
_KEPT = frozenset({
    "dot_general", "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and",
    "reduce_or", "argmax", "argmin", "scan", "while", "cond", "sort_key_val", "top_k",
    "threefry2x32", "custom_vjp_call"})


class _StepVjp:
    """A scan step's forward and backward passes, traced once as one program
    ``(consts, carry, x, carry cotangent, y cotangent) -> (carry, y, carry cotangent,
    consts' cotangents, x cotangent)``. The forward loop keeps, stacked, the residuals of
    each step: the values the backward pass reads that change from step to step and cost
    more to compute again than to store (see ``_KEPT``), and the carry the step started
    from where the backward pass computes something again from it. The backward loop reads
    them, and the step's x and outputs y, and computes the rest again. A step wrapped in
    ``checkpoint`` keeps its carry only: its values are computed again by its backward
    pass (memory of T carries, not of T steps' products)."""

    def __init__(self, program, consts, init, xs, num_carry):
        self.num_consts, self.num_carry = len(consts), num_carry
        avals = [_aval(v) for v in [*consts, *init]]
        avals += [core.ShapedArray(_aval(x).shape[1:], _aval(x).dtype, _aval(x).weak_type)
                  for x in xs]
        n_y = len(program.out_avals) - num_carry
        avals += [_aval(v) for v in init] + list(program.out_avals[num_carry:])
        k, n, m = len(consts), len(consts) + num_carry, len(avals) - num_carry - n_y
        cut: list[int] = []

        def joint(*v):
            step = functools.partial(self._step, program)
            (new_c, ys), pull = vjp(step, list(v[:k]), list(v[k:n]), list(v[n:m]))
            cut.append(len(core.current_trace().eqns))
            gk, gc, gx = pull((list(v[m:m + num_carry]), list(v[m + num_carry:])))
            return [*new_c, *ys, *gc, *gk, *gx]

        self.joint = p = tracing.trace_to_program(joint, avals, "scan step's backward pass")
        self.forward_eqns = forward_eqns = p.eqns[:cut[0]]
        self.k_vars, self.c_vars = p.invars[:k], p.invars[k:n]
        self.x_vars, self.g_vars = p.invars[n:m], p.invars[m:]
        self.step_outs, self.grad_outs = p.outvars[:num_carry + n_y], p.outvars[num_carry + n_y:]
        # Values that change from step to step: those computed from the carry or x; of
        # them, the results kept (if read) and the step's outputs y (read from the loop's).
        varying = set(_ids(self.c_vars)) | set(_ids(self.x_vars))
        keepable = {id(v): v for v in self.c_vars}
        for e in forward_eqns:
            if any(i in varying for i in _ids(e.invars)):
                varying.update(_ids(e.outvars))
                if e.prim.name in _KEPT:
                    keepable.update((id(v), v) for v in e.outvars)
        ys = self.step_outs[num_carry:]
        self.ys_read = [j for j, v in enumerate(ys) if id(v) in varying]
        known = set(_ids([*self.k_vars, *self.x_vars, *self.g_vars])) | set(keepable)
        known |= {id(ys[j]) for j in self.ys_read}
        _, reached = _needed(p.eqns, known, self.grad_outs)
        self.residuals = [v for i, v in keepable.items()
                          if i in reached and i not in {id(ys[j]) for j in self.ys_read}]
        self.ys_read = [j for j in self.ys_read if id(ys[j]) in reached]

    @staticmethod
    def _step(program, k, c, x):
        outs = eval_program(program, [*k, *c, *x])
        return list(outs[:len(c)]), list(outs[len(c):])

    def _env(self, consts) -> dict:
        p = self.joint
        env = {id(v): val for v, val in zip(p.constvars, p.consts)}
        env.update((id(v), val) for v, val in zip(self.k_vars, consts))
        return env

    def forward(self, consts):
        """The forward step ``(carry, x) -> (carry, (ys, residuals))``."""
        def step(c, x):
            env = self._env(consts)
            env.update((id(v), val) for v, val in zip(self.c_vars, c))
            env.update((id(v), val) for v, val in zip(self.x_vars, x))
            _eval_needed(self.forward_eqns, env, [*self.step_outs, *self.residuals])
            outs = _values(env, self.step_outs)
            return outs[:self.num_carry], (outs[self.num_carry:],
                                           _values(env, self.residuals))
        return step

    def backward(self, consts):
        """The backward step ``((carry cotangent, consts' cotangents), (residuals, x,
        y cotangent)) -> (..., x cotangent)``."""
        def step(acc, inputs):
            (g_carry, g_consts), (res, x, g_y, ys) = acc, inputs
            env = self._env(consts)
            env.update((id(v), val) for v, val in zip(self.residuals, res))
            env.update((id(self.step_outs[self.num_carry + j]), val)
                       for j, val in zip(self.ys_read, ys))
            env.update((id(v), val) for v, val in zip(self.x_vars, x))
            env.update((id(v), val) for v, val in zip(self.g_vars, [*g_carry, *g_y]))
            _eval_needed(self.joint.eqns, env, self.grad_outs)
            g = _values(env, self.grad_outs)
            gc, gk = g[:self.num_carry], g[self.num_carry:self.num_carry + self.num_consts]
            return (gc, _plus(g_consts, gk)), g[self.num_carry + self.num_consts:]
        return step


@defvjp_forward(cf.scan_p)
def _scan_forward(invals, *, program, num_consts, num_carry, length, reverse, unroll):
    # One loop computes the outputs and keeps the backward pass's residuals.
    consts, init, xs = _split_scan_operands(invals, num_consts, num_carry)
    split = _StepVjp(program, consts, init, xs, num_carry)
    final, (ys, res) = cf.scan(split.forward(consts), init, xs, length=length,
                               reverse=reverse, unroll=unroll)
    return [*final, *ys], (split, res)


@defvjp(cf.scan_p)
def _scan(ct, invals, out, *, program, num_consts, num_carry, length, reverse, unroll,
          residuals=None):
    # The residuals (kept by the forward pass, or by a loop of the forward steps run for
    # them); then a loop the other way applying each step's backward pass to the carry's
    # cotangent, summing the constants' cotangents and stacking the inputs'.
    consts, init, xs = _split_scan_operands(invals, num_consts, num_carry)
    if residuals is None:
        split = _StepVjp(program, consts, init, xs, num_carry)
        _, (_, res) = cf.scan(split.forward(consts), init, xs, length=length,
                              reverse=reverse, unroll=unroll)
    else:
        split, res = residuals
    ct_carry, ct_ys = list(ct[:num_carry]), list(ct[num_carry:])
    (ct_init, ct_consts), ct_xs = cf.scan(
        split.backward(consts), (ct_carry, _zeros_of(consts)),
        (res, xs, ct_ys, [out[num_carry + j] for j in split.ys_read]),
        length=length, reverse=not reverse, unroll=unroll)
    cts = [*ct_consts, *ct_init, *ct_xs]
    if length == 0:
        return cts
    # An operand no output is computed from gets no cotangent (JAX's symbolic zero): a
    # carry the step overwrites, a while loop's result passed in as one.
    carries = program.invars[num_consts:num_consts + num_carry]
    outs = set(_ids(program.outvars))
    return [g if outs & reached_in_loop(program, carries, {id(v)}) else None
            for g, v in zip(cts, program.invars)]


@defvjp_active(cf.while_p)
def _while(ct, active, *, source, cond_program, body_program, cond_nconsts, body_nconsts):
    # Reverse mode needs a loop's trip count ahead (JAX alike): only the carries the body
    # passes on unchanged are differentiable (their cotangent passes through); carries no
    # derivative reaches (computed from constants, or from integers) and carries no
    # cotangent reaches (their results unused) need none.
    body = body_program
    carries = body.invars[body_nconsts:]
    reached = reached_in_loop(body, carries, {id(v) for v, a in zip(body.invars,
                                                                   active[cond_nconsts:]) if a})
    # The carries a cotangent reaches: those of the outputs that have one, and those their
    # steps read.
    reads = [active_vars(body, {id(c)}) for c in carries]
    needed = {k for k, g in enumerate(ct) if g is not None}
    while True:
        more = {i for i in range(len(carries)) if i not in needed
                and any(id(body.outvars[j]) in reads[i] for j in needed)}
        if not more:
            break
        needed |= more
    result = [None] * (cond_nconsts + body_nconsts)
    for k, (c, out) in enumerate(zip(carries, body.outvars)):
        if id(c) in reached and k in needed and out is not c:
            raise NotImplementedError(
                f"{source}: {transform_name()} cannot differentiate through a "
                f"while_loop whose carry {k} ({c.aval.str_short()}) changes with the "
                f"differentiated inputs: reverse mode needs the number of steps ahead, as in "
                f"JAX; use lax.scan, or lax.fori_loop with static bounds, or wrap what needs "
                f"no gradient in lax.stop_gradient")
        result.append(ct[k] if id(c) in reached and k in needed else None)
    return result


@defvjp(cf.cond_p)
def _cond(ct, invals, out, *, branches, nconsts):
    # The taken branch's backward pass, chosen by the same index: each branch gives the
    # cotangents of every branch's constants (zero for the others') and of the operands.
    index, rest = invals[0], list(invals[1:])
    total = sum(nconsts)
    consts, operands = rest[:total], rest[total:]
    starts = [sum(nconsts[:k]) for k in range(len(branches))]

    def backward(k):
        def run(consts, operands, g):
            mine = consts[starts[k]:starts[k] + nconsts[k]]
            _, pull = vjp(lambda c, o: eval_program(branches[k], [*c, *o]), mine, operands)
            gc, go = pull(list(g))
            every = _zeros_of(consts)
            every[starts[k]:starts[k] + nconsts[k]] = gc
            return every, list(go)
        return run

    g_consts, g_operands = cf.switch(index, [backward(k) for k in range(len(branches))],
                                     consts, operands, list(ct))
    # What no branch's outputs are computed from gets no cotangent (JAX's symbolic zero):
    # a while loop's carry passed to branches that ignore it needs no derivative.
    read = [False] * (total + len(operands))
    for k, branch in enumerate(branches):
        outs = set(_ids(branch.outvars))
        for j, v in enumerate(branch.invars):
            if outs & active_vars(branch, {id(v)}):
                read[starts[k] + j if j < nconsts[k] else total + j - nconsts[k]] = True
    return [None] + [g if r else None for g, r in zip([*g_consts, *g_operands], read)]
