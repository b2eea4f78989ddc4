"""The batching rules of ``vmap`` (see batching.py), one per primitive. A batched operand has
its batch axis first, and so has every batched result. Elementwise primitives broadcast
their unbatched operands; shape primitives shift their dimensions by one; a dot takes the
batch as a batch dimension (or a free one, when only one side is batched); gathers and
scatters at batched indices become gathers and scatters with the example's number as one
more index; a loop whose predicate differs between examples runs until every example is
done, each keeping its state once its own predicate is false (as ``jax.vmap`` does), and a
``cond`` on a batched predicate computes every branch and selects."""

from __future__ import annotations

import numpy as np

from fusionjit._src import core, tracing, tree_util
from fusionjit._src import dtypes as dt
from fusionjit._src.autodiff import (checkpoint_p, closed_program, custom_vjp,
                                     custom_vjp_call_p)
from fusionjit._src.batching import (batch_function, batch_program, batched_outputs,
                                     broadcast_batch, current_axis, defbatch, move_axis, vmap)
from fusionjit._src.lax import control_flow as cf
from fusionjit._src.lax import elementwise as ew
from fusionjit._src.lax import reductions as red
from fusionjit._src.lax import shapes as sh
from fusionjit._src.lax import slicing as sl
from fusionjit._src.lax.sorting import top_k_p
from fusionjit._src.random import sort_key_val_p, threefry2x32_p


def _shape(x) -> tuple:
    return tuple(core.get_aval(x).shape)


def _all_batched(size, vals, bats) -> list:
    return [v if b else broadcast_batch(v, size) for v, b in zip(vals, bats)]


def _shift(dims) -> tuple:
    return tuple(int(d) + 1 for d in dims)


# --- elementwise ----------------------------------------------------------------------

def _elementwise(prim):
    def rule(size, vals, bats, **params):
        # Operands have one shape, but for a rank-0 operand some primitives broadcast
        # (clamp's bounds): it stays as it is unless it is itself batched.
        ranks = [len(_shape(v)) - int(b) for v, b in zip(vals, bats)]
        rank = max(ranks)
        full = next(_shape(v)[int(b):] for v, b, r in zip(vals, bats, ranks) if r == rank)
        args = []
        for v, b, r in zip(vals, bats, ranks):
            if r == rank:
                args.append(v if b else broadcast_batch(v, size))
            elif b:
                args.append(sh.broadcast_in_dim(v, (size,) + full, (0,)))
            else:
                args.append(v)
        out = prim.bind(*args, **params)
        return (out, [True] * len(out)) if prim.multiple_results else (out, True)
    return rule


_ELEMENTWISE = [p for p in vars(ew).values() if isinstance(p, core.Primitive)] + [
    red.integer_pow_p, threefry2x32_p]
for _p in _ELEMENTWISE:
    defbatch(_p)(_elementwise(_p))


# --- reductions and contractions ------------------------------------------------------

def _reduce(prim):
    def rule(size, vals, bats, *, axes):
        return prim.bind(vals[0], axes=_shift(axes)), True
    return rule


for _p in (red.reduce_sum_p, red.reduce_prod_p, red.reduce_max_p, red.reduce_min_p,
           red.reduce_and_p, red.reduce_or_p):
    defbatch(_p)(_reduce(_p))


def _arg_reduce(prim):
    def rule(size, vals, bats, *, axis, index_dtype):
        return prim.bind(vals[0], axis=axis + 1, index_dtype=index_dtype), True
    return rule


for _p in (red.argmax_p, red.argmin_p):
    defbatch(_p)(_arg_reduce(_p))


@defbatch(red.dot_general_p)
def _dot_general(size, vals, bats, *, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = vals
    if bats[0] and bats[1]:
        dn = ((_shift(lc), _shift(rc)), ((0,) + _shift(lb), (0,) + _shift(rb)))
        return red.dot_general_p.bind(lhs, rhs, dimension_numbers=dn), True
    if bats[0]:
        # The batch is lhs's first free dimension: after the dot's batch dimensions.
        dn = ((_shift(lc), tuple(rc)), (_shift(lb), tuple(rb)))
        out = red.dot_general_p.bind(lhs, rhs, dimension_numbers=dn)
        where = len(lb)
    else:
        # The batch is rhs's first free dimension: after the batch and lhs's free ones.
        dn = ((tuple(lc), _shift(rc)), (tuple(lb), _shift(rb)))
        out = red.dot_general_p.bind(lhs, rhs, dimension_numbers=dn)
        where = len(_shape(lhs)) - len(lc)
    return move_axis(out, where, 0), True


# --- shapes ---------------------------------------------------------------------------

@defbatch(sh.broadcast_in_dim_p)
def _broadcast_in_dim(size, vals, bats, *, shape, broadcast_dimensions):
    return sh.broadcast_in_dim(vals[0], (size,) + tuple(shape),
                               (0,) + _shift(broadcast_dimensions)), True


@defbatch(sh.reshape_p)
def _reshape(size, vals, bats, *, new_sizes):
    return sh.reshape_p.bind(vals[0], new_sizes=(size,) + tuple(new_sizes)), True


@defbatch(sh.transpose_p)
def _transpose(size, vals, bats, *, permutation):
    return sh.transpose_p.bind(vals[0], permutation=(0,) + _shift(permutation)), True


@defbatch(sh.slice_p)
def _slice(size, vals, bats, *, start_indices, limit_indices, strides):
    strides = None if strides is None else (1,) + tuple(strides)
    return sh.slice_p.bind(vals[0], start_indices=(0,) + tuple(start_indices),
                           limit_indices=(size,) + tuple(limit_indices), strides=strides), True


@defbatch(sh.rev_p)
def _rev(size, vals, bats, *, dimensions):
    return sh.rev_p.bind(vals[0], dimensions=_shift(dimensions)), True


@defbatch(sh.concatenate_p)
def _concatenate(size, vals, bats, *, dimension):
    return sh.concatenate_p.bind(*_all_batched(size, vals, bats), dimension=dimension + 1), True


@defbatch(sh.pad_p)
def _pad(size, vals, bats, *, padding_config):
    x, value = vals
    x = x if bats[0] else broadcast_batch(x, size)
    config = ((0, 0, 0),) + tuple(padding_config)
    if not bats[1]:
        return sh.pad_p.bind(x, value, padding_config=config), True
    # A padding value per example: pad with anything, then select where the padding went.
    out = sh.pad_p.bind(x, red.full((), 0, core.get_aval(x).dtype), padding_config=config)
    inside = sh.pad_p.bind(red.full(_shape(x)[1:], True, dt.bool_), np.asarray(False),
                           padding_config=tuple(padding_config))
    shape = _shape(out)
    inside = sh.broadcast_in_dim(inside, shape, tuple(range(1, len(shape))))
    return ew.select(inside, out, sh.broadcast_in_dim(value, shape, (0,))), True


def _with_example_index(size, idx):
    """Indices [size, ..., k] with each example's number put before its k starts."""
    shape = _shape(idx)
    column = sh.broadcast_in_dim(sh.iota(core.get_aval(idx).dtype, size), shape[:-1] + (1,),
                                 (0,))
    return sh.concatenate([column, idx], len(shape) - 1)


def _starts_matrix(size, starts, bats):
    """[size, n] int32 of per-example start indices."""
    cols = []
    for s, b in zip(starts, bats):
        s = ew.convert_element_type(s, np.int32) if core.get_aval(s).dtype != np.int32 else s
        cols.append(sh.reshape(s if b else broadcast_batch(s, size), (size, 1)))
    return sh.concatenate(cols, 1)


def _clamped(starts, dims, sizes):
    hi = np.asarray([d - s for d, s in zip(dims, sizes)], np.int32)
    shape = _shape(starts)
    return ew.max(ew.min(starts, sh.broadcast_in_dim(hi, shape, (1,))),
                  red.full(shape, 0, np.int32))


@defbatch(sh.dynamic_slice_p)
def _dynamic_slice(size, vals, bats, *, slice_sizes):
    x, starts = vals[0], vals[1:]
    if not any(bats[1:]):
        zero = np.asarray(0, core.get_aval(starts[0]).dtype) if starts else np.int32(0)
        return sh.dynamic_slice_p.bind(x, zero, *starts,
                                       slice_sizes=(size,) + tuple(slice_sizes)), True
    # Starts that differ per example: a gather, clamped into bounds as dynamic_slice is.
    dims = _shape(x)[int(bats[0]):]
    idx = _clamped(_starts_matrix(size, starts, bats[1:]), dims, slice_sizes)
    rank = len(dims)
    if not bats[0]:
        dn = sl.GatherDimensionNumbers(offset_dims=tuple(range(1, rank + 1)),
                                       collapsed_slice_dims=(),
                                       start_index_map=tuple(range(rank)))
        return sl.gather(x, idx, dn, tuple(slice_sizes), mode="promise_in_bounds"), True
    idx = _with_example_index(size, idx)
    dn = sl.GatherDimensionNumbers(offset_dims=tuple(range(1, rank + 1)),
                                   collapsed_slice_dims=(0,),
                                   start_index_map=tuple(range(rank + 1)))
    return sl.gather(x, idx, dn, (1,) + tuple(slice_sizes), mode="promise_in_bounds"), True


@defbatch(sh.dynamic_update_slice_p)
def _dynamic_update_slice(size, vals, bats):
    x, update, starts = vals[0], vals[1], vals[2:]
    x, update = _all_batched(size, [x, update], bats[:2])
    if not any(bats[2:]):
        zero = np.asarray(0, core.get_aval(starts[0]).dtype) if starts else np.int32(0)
        return sh.dynamic_update_slice_p.bind(x, update, zero, *starts), True
    dims, sizes = _shape(x)[1:], _shape(update)[1:]
    idx = _clamped(_starts_matrix(size, starts, bats[2:]), dims, sizes)
    idx = _with_example_index(size, idx)
    rank = len(dims)
    dn = sl.ScatterDimensionNumbers(update_window_dims=tuple(range(1, rank + 1)),
                                    inserted_window_dims=(0,),
                                    scatter_dims_to_operand_dims=tuple(range(rank + 1)))
    return sl.scatter(x, idx, update, dn, unique_indices=True,
                      mode="promise_in_bounds"), True


# --- gather and scatter ---------------------------------------------------------------

@defbatch(sl.gather_p)
def _gather(size, vals, bats, *, offset_dims, collapsed_slice_dims, start_index_map,
            slice_sizes):
    x, idx = vals
    if bats[0] and not bats[1]:
        # The batch is one more window dimension, taken whole, first in the output.
        params = dict(offset_dims=(0,) + _shift(offset_dims),
                      collapsed_slice_dims=_shift(collapsed_slice_dims),
                      start_index_map=_shift(start_index_map),
                      slice_sizes=(size,) + tuple(slice_sizes))
        return sl.gather_p.bind(x, idx, **params), True
    if bats[0]:
        idx = _with_example_index(size, idx)
        params = dict(offset_dims=_shift(offset_dims),
                      collapsed_slice_dims=(0,) + _shift(collapsed_slice_dims),
                      start_index_map=(0,) + _shift(start_index_map),
                      slice_sizes=(1,) + tuple(slice_sizes))
        return sl.gather_p.bind(x, idx, **params), True
    # Batched indices only: the batch is their first batch dimension, first in the output
    # once every window dimension moves one place on.
    params = dict(offset_dims=_shift(offset_dims), collapsed_slice_dims=collapsed_slice_dims,
                  start_index_map=start_index_map, slice_sizes=slice_sizes)
    return sl.gather_p.bind(x, idx, **params), True


@defbatch(sl.scatter_p)
def _scatter(size, vals, bats, *, update_window_dims, inserted_window_dims,
             scatter_dims_to_operand_dims, combiner, indices_are_sorted=False,
             unique_indices=False):
    x, idx, updates = _all_batched(size, vals, bats)
    out = sl.scatter_p.bind(x, _with_example_index(size, idx), updates,
                            update_window_dims=_shift(update_window_dims),
                            inserted_window_dims=(0,) + _shift(inserted_window_dims),
                            scatter_dims_to_operand_dims=(0,) + _shift(
                                scatter_dims_to_operand_dims),
                            combiner=combiner, indices_are_sorted=False,
                            unique_indices=unique_indices)
    return out, True


@defbatch(sort_key_val_p)
def _sort_key_val(size, vals, bats):
    keys, values = _all_batched(size, vals, bats)
    shape = _shape(keys)
    flat = (size * shape[1], shape[2])
    outs = sort_key_val_p.bind(sh.reshape(keys, flat), sh.reshape(values, flat))
    return [sh.reshape(o, shape) for o in outs], [True, True]


@defbatch(top_k_p)
def _top_k(size, vals, bats, *, k):
    # Along the last axis of any rank: the batch axis is one more leading axis.
    return top_k_p.bind(vals[0], k=k), True


# --- control flow ---------------------------------------------------------------------

def _fixed_point(program, fixed: list[bool], carries: list[bool], rest: list[bool],
                 carry_outs: slice) -> list[bool]:
    """Which carries of a loop are batched: those batched on entry, and those a step makes
    depend on a batched value, until no more change."""
    while True:
        outs = batched_outputs(program, fixed + carries + rest)[carry_outs]
        grown = [a or b for a, b in zip(carries, outs)]
        if grown == carries:
            return carries
        carries = grown


@defbatch(cf.scan_p)
def _scan(size, vals, bats, *, program, num_consts, num_carry, length, reverse, unroll):
    consts, init = vals[:num_consts], vals[num_consts:num_consts + num_carry]
    xs = vals[num_consts + num_carry:]
    kb, cb = bats[:num_consts], bats[num_consts:num_consts + num_carry]
    xb = bats[num_consts + num_carry:]
    cb = _fixed_point(program, list(kb), list(cb), list(xb), slice(0, num_carry))
    ys_b = batched_outputs(program, list(kb) + cb + list(xb))[num_carry:]
    init = [v if b or not want else broadcast_batch(v, size)
            for v, b, want in zip(init, bats[num_consts:num_consts + num_carry], cb)]
    # A batched xs is [size, length, ...]: the scan walks its second axis.
    xs = [sh.transpose(x, (1, 0) + tuple(range(2, len(_shape(x))))) if b else x
          for x, b in zip(xs, xb)]
    step = batch_function(program, list(kb) + cb + list(xb), size, cb + ys_b)

    def body(carry, x):
        outs = step(*consts, *carry, *x)
        return list(outs[:num_carry]), list(outs[num_carry:])

    carry, ys = cf.scan(body, list(init), list(xs), length=length, reverse=reverse,
                        unroll=unroll)
    ys = [sh.transpose(y, (1, 0) + tuple(range(2, len(_shape(y))))) if b else y
          for y, b in zip(ys, ys_b)]
    return list(carry) + list(ys), cb + ys_b


@defbatch(cf.while_p)
def _while(size, vals, bats, *, cond_program, body_program, cond_nconsts, body_nconsts):
    cc, bc = vals[:cond_nconsts], vals[cond_nconsts:cond_nconsts + body_nconsts]
    init = vals[cond_nconsts + body_nconsts:]
    ccb = list(bats[:cond_nconsts])
    bcb = list(bats[cond_nconsts:cond_nconsts + body_nconsts])
    vb = _fixed_point(body_program, bcb, list(bats[cond_nconsts + body_nconsts:]), [],
                      slice(None))
    pred_b = batched_outputs(cond_program, ccb + vb)[0]
    if pred_b:
        # Every example runs until all are done; one whose predicate is false keeps its
        # state. The state is then batched throughout.
        vb = [True] * len(vb)
    init = [v if b else broadcast_batch(v, size) if want else v
            for v, b, want in zip(init, bats[cond_nconsts + body_nconsts:], vb)]
    cond = batch_function(cond_program, ccb + vb, size, [pred_b])
    body = batch_function(body_program, bcb + vb, size, vb)
    if not pred_b:
        return cf.while_loop(lambda v: cond(*cc, *v)[0], lambda v: body(*bc, *v),
                             list(init)), vb

    def any_running(v):
        return red.reduce_or(cond(*cc, *v)[0], (0,))

    def step(v):
        running = cond(*cc, *v)[0]
        new = body(*bc, *v)
        return [ew.select(sh.broadcast_in_dim(running, _shape(n), (0,)), n, old)
                for n, old in zip(new, v)]

    return cf.while_loop(any_running, step, list(init)), vb


@defbatch(cf.cond_p)
def _cond(size, vals, bats, *, branches, nconsts):
    index, rest = vals[0], vals[1:]
    total = sum(nconsts)
    consts, operands = rest[:total], rest[total:]
    kb, ob = bats[1:1 + total], bats[1 + total:]
    starts = [sum(nconsts[:k]) for k in range(len(branches))]
    mine = [slice(s, s + n) for s, n in zip(starts, nconsts)]
    if not bats[0]:
        outs_b = [False] * len(branches[0].outvars)
        for k, prog in enumerate(branches):
            got = batched_outputs(prog, list(kb[mine[k]]) + list(ob))
            outs_b = [a or b for a, b in zip(outs_b, got)]
        runs = [batch_function(prog, list(kb[mine[k]]) + list(ob), size, outs_b)
                for k, prog in enumerate(branches)]
        fns = [lambda c, o, k=k: runs[k](*c[mine[k]], *o) for k in range(len(branches))]
        return cf.switch(index, fns, list(consts), list(operands)), outs_b
    # An index per example: every branch runs, and each example takes its own branch's
    # results (the index clamped into range, as switch does).
    n = len(branches)
    index = ew.max(ew.min(index, red.full((size,), n - 1, core.get_aval(index).dtype)),
                   red.full((size,), 0, core.get_aval(index).dtype))
    outs_b = [True] * len(branches[0].outvars)
    results = []
    for k, prog in enumerate(branches):
        ins = [_guarded(x, b, index, k, size) for x, b in
               zip(list(consts[mine[k]]) + list(operands), list(kb[mine[k]]) + list(ob))]
        run = batch_function(prog, [b for _, b in ins], size, outs_b)
        results.append(run(*[x for x, _ in ins]))
    outs = []
    for j in range(len(outs_b)):
        picked = results[n - 1][j]
        shape = _shape(picked)
        for k in range(n - 2, -1, -1):
            is_k = ew.eq(index, red.full((size,), k, core.get_aval(index).dtype))
            picked = ew.select(sh.broadcast_in_dim(is_k, shape, (0,)), results[k][j], picked)
        outs.append(picked)
    return outs, outs_b


def _guarded(x, batched: bool, index, k: int, size: int):
    """Operand ``x`` of branch ``k`` of a cond whose index is batched, and whether it is
    batched: for the examples that take another branch, with no derivative (as JAX's rule
    does), so that what branch k computes for them, which the select drops (a sqrt of a
    negative number: NaN), sends no NaN back through the select's zero cotangent."""
    if not dt.is_float(core.get_aval(x).dtype):
        return x, batched
    if not batched:
        x = broadcast_batch(x, size)
    shape = _shape(x)
    is_k = sh.broadcast_in_dim(ew.eq(index, red.full((size,), k, core.get_aval(index).dtype)),
                               shape, (0,))
    return ew.select(is_k, x, ew.stop_gradient_p.bind(x)), True


# --- custom gradients -----------------------------------------------------------------

@defbatch(checkpoint_p)
def _checkpoint(size, vals, bats, *, program):
    # The batched program, still recomputed by its backward pass.
    out_bats: list = []

    def batched(*v):
        outs, b = batch_program(program, v, bats, size)
        out_bats.extend(b)
        return outs

    traced = tracing.trace_to_program(batched, [core.get_aval(v) for v in vals],
                                      program.name)
    return checkpoint_p.bind(*traced.consts, *vals, program=closed_program(traced)), out_bats


@defbatch(custom_vjp_call_p)
def _custom_vjp_call(size, vals, bats, *, program, custom, nconsts):
    if any(bats[:nconsts]):
        # The function closes over a batched value: batch what it computes (its backward
        # pass, written for the unbatched value, cannot follow).
        return batch_program(program, vals, bats, size)
    # A custom_vjp of the batched function, whose forward and backward passes are the
    # user's, batched (over the same named axis, for their collectives); an unmapped
    # argument's cotangent is summed over the batch.
    f, name = custom.f, current_axis()
    axes = tuple(0 if b else None for b in bats[nconsts:])
    diff = tree_util.tree_unflatten(custom.in_tree, list(range(len(axes))))
    counts = [len(tree_util.tree_leaves(a)) for a in diff]
    everything = custom.with_static([None] * len(diff))
    skip = {j % len(everything) for j in f.nondiff_argnums}
    static = [a for i, a in enumerate(everything) if i in skip]

    def mapped(fn):
        def run(*leaves):
            return fn(*custom.with_static(list(tree_util.tree_unflatten(custom.in_tree,
                                                                        list(leaves)))))
        return vmap(run, in_axes=axes, axis_name=name)

    def bwd_leaves(residuals, g):
        cts = f.bwd(*static, residuals, g)
        if not isinstance(cts, (tuple, list)) or len(cts) != len(diff):
            raise TypeError(f"the custom_vjp backward pass of "
                            f"{getattr(f.fun, '__name__', 'fun')} must return a tuple of "
                            f"{len(diff)} cotangents, got {type(cts).__name__}")
        out: list = []
        for c, n in zip(cts, counts):
            out += [None] * n if c is None else tree_util.tree_leaves(c)
        return out

    def bwd(residuals, g):
        cts = vmap(bwd_leaves, axis_name=name)(residuals, g)
        return tuple(c if c is None or a is not None else red.reduce_sum(c, (0,))
                     for c, a in zip(cts, axes))

    batched = custom_vjp(mapped(f.fun))
    batched.defvjp(mapped(f.fwd), bwd)
    outs = tree_util.tree_leaves(batched(*vals[nconsts:]))
    return outs, [True] * len(outs)
