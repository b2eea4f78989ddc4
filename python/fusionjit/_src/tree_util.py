"""Pytrees, as ``jax.tree_util``: nested tuples, lists, dicts (sorted by key), None,
namedtuples and registered node types. Flattening is implemented in C++."""

from __future__ import annotations

from typing import Any, Callable

from fusionjit import _core

PyTreeDef = _core.PyTreeDef


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None):
    """Returns (leaves, treedef)."""
    return _core.tree_flatten(tree, is_leaf)


def tree_unflatten(treedef: PyTreeDef, leaves) -> Any:
    return treedef.unflatten(leaves)


def tree_leaves(tree: Any, is_leaf=None) -> list:
    return _core.tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf=None) -> PyTreeDef:
    return _core.tree_flatten(tree, is_leaf)[1]


def tree_map(f: Callable, tree: Any, *rest: Any, is_leaf=None) -> Any:
    """Applies ``f`` leaf by leaf; ``rest`` must have the structure of ``tree``."""
    leaves, treedef = _core.tree_flatten(tree, is_leaf)
    others = []
    for r in rest:
        r_leaves, r_def = _core.tree_flatten(r, is_leaf)
        if r_def != treedef:
            raise ValueError(f"tree_map: structures differ: {treedef} and {r_def}")
        others.append(r_leaves)
    return treedef.unflatten([f(*xs) for xs in zip(leaves, *others)])


def register_pytree_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable):
    """``flatten_func(x) -> (children, aux_data)``; ``unflatten_func(aux_data, children)``."""
    _core.register_pytree_node(nodetype, flatten_func, unflatten_func)


def register_pytree_node_class(cls):
    """Class decorator: uses ``cls.tree_flatten`` and ``cls.tree_unflatten``."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls
