"""Pytrees, as ``jax.tree_util``: nested tuples, lists, dicts (sorted by key), None,
namedtuples and registered node types. Flattening is implemented in C++."""

from fusionjit._src.tree_util import (  # noqa: F401
    DictKey, FlattenedIndexKey, GetAttrKey, Partial, PyTreeDef, SequenceKey, all_leaves,
    flatten_one_level, flatten_one_level_with_keys, is_tree_node, keystr, register_dataclass,
    register_pytree_node, register_pytree_node_class, register_pytree_with_keys,
    register_pytree_with_keys_class, register_static, tree_all, tree_broadcast, tree_flatten,
    tree_flatten_with_path, tree_leaves, tree_leaves_with_path, tree_map, tree_map_with_path,
    tree_reduce, tree_reduce_associative, tree_structure, tree_transpose, tree_unflatten,
    treedef_children, treedef_is_leaf, treedef_tuple)
