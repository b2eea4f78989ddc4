"""Pytrees, as ``jax.tree_util``: nested tuples, lists, dicts (sorted by key), None,
namedtuples and registered node types. Flattening is implemented in C++."""

from fusionjit._src.tree_util import (  # noqa: F401
    PyTreeDef, register_pytree_node, register_pytree_node_class, tree_flatten, tree_leaves,
    tree_map, tree_structure, tree_unflatten)
