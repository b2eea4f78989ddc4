"""``ravel_pytree``, as ``jax.flatten_util.ravel_pytree``: a pytree of arrays as one flat
vector (of the leaves' promoted dtype), and the function that rebuilds the tree from such
a vector."""

from __future__ import annotations

import numpy as np

from fusionjit._src import core, tree_util
from fusionjit._src import dtypes as dt


def ravel_pytree(pytree):
    """``(flat, unravel)``: the leaves of ``pytree`` raveled and concatenated in tree order,
    and ``unravel(flat)`` giving back a tree of the same structure, shapes and dtypes."""
    import fusionjit.numpy as fnp
    leaves, treedef = tree_util.tree_flatten(pytree)
    if not leaves:
        return fnp.zeros((0,), np.float32), lambda flat: tree_util.tree_unflatten(treedef, [])
    avals = [core.get_aval(fnp.asarray(leaf)) for leaf in leaves]
    to = dt.promote_dtypes(*(a.dtype for a in avals))
    flat = fnp.concatenate([fnp.ravel(fnp.asarray(leaf)).astype(to) for leaf in leaves])
    ends = np.cumsum([a.size for a in avals])

    def unravel(flat):
        flat = fnp.asarray(flat)
        if tuple(flat.shape) != (int(ends[-1]),):
            raise TypeError(f"unravel: a vector of shape ({int(ends[-1])},) was expected, "
                            f"got {tuple(flat.shape)}")
        parts = fnp.split(flat, ends[:-1])
        return tree_util.tree_unflatten(treedef, [p.reshape(a.shape).astype(a.dtype)
                                                  for p, a in zip(parts, avals)])
    return flat, unravel
