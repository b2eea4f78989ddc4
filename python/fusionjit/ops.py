"""``fusionjit.ops``, as ``jax.ops``: segment reductions. ``segment_sum(data, segment_ids,
num_segments)`` combines the rows of ``data`` (along its first axis) that share a segment id:
row scatters (``.at[segment_ids].add``), so the CPU adds whole rows at a time. Ids outside
``[0, num_segments)`` are dropped, as JAX does; an empty segment gets the combiner's identity
(0 for sums, 1 for products, the lowest value for maxima, the highest for minima)."""

from __future__ import annotations

import operator

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src import errors
from fusionjit._src.numpy.util import aval, to_array


def _segment(name: str, method: str, identity):
    def fn(data, segment_ids, num_segments: int | None = None, indices_are_sorted: bool = False,
           unique_indices: bool = False, bucket_size: int | None = None, mode=None):
        import fusionjit.numpy as fnp
        data, segment_ids = to_array(data), to_array(segment_ids)
        if not dt.is_int(aval(segment_ids).dtype):
            raise TypeError(errors.located(
                f"{name}: segment_ids must be integers, got {aval(segment_ids).dtype}"))
        if num_segments is None:
            if not core.is_concrete_array(segment_ids):
                raise errors.ConcretizationTypeError(errors.located(
                    f"{name}: num_segments must be given inside jit (it is the output's "
                    f"length, which the traced segment_ids cannot fix)"))
            ids = np.asarray(segment_ids)
            num_segments = int(ids.max()) + 1 if ids.size else 0
        try:
            num_segments = operator.index(num_segments)
        except TypeError:
            raise TypeError(errors.located(f"{name}: num_segments must be a Python int, got "
                                           f"{type(num_segments).__name__}")) from None
        shape = (num_segments,) + tuple(aval(data).shape[aval(segment_ids).ndim:])
        dtype = aval(data).dtype
        out = fnp.full(shape, identity(dtype), dtype)
        # A negative id is outside the segments too (not counted from the end).
        ids = fnp.where(segment_ids < 0, num_segments, segment_ids)
        ref = out.at[ids]
        return getattr(ref, method)(data, indices_are_sorted=indices_are_sorted,
                                    unique_indices=unique_indices,
                                    mode="drop" if mode is None else mode)
    fn.__name__ = name
    fn.__qualname__ = name
    fn.__doc__ = (f"``jax.ops.{name}``: rows of ``data`` sharing an id in ``segment_ids`` "
                  f"combined ({method}) into row ``id`` of a ``num_segments``-row result.")
    return fn


segment_sum = _segment("segment_sum", "add", lambda d: 0)
segment_prod = _segment("segment_prod", "multiply", lambda d: 1)
segment_max = _segment("segment_max", "max", dt.lowest)
segment_min = _segment("segment_min", "min", dt.highest)

__all__ = ["segment_max", "segment_min", "segment_prod", "segment_sum"]
