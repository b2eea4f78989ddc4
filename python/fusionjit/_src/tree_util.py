"""Pytrees, as ``jax.tree_util``: nested tuples, lists, dicts (sorted by key), None,
namedtuples and registered node types (custom nodes, dataclasses, static types).

Flattening and unflattening are implemented in C++ (bindings/pytree.cc), which the jit fast
path shares. Key paths, prefix trees (``tree_map``'s extra trees, ``tree_transpose``,
``tree_broadcast``) and one-level flattening walk the tree here by the same rules, in the
same order: ``_node`` is the one place those rules are written in Python.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from typing import Any, Callable, NamedTuple

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


# --- keys -----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """The key of a tuple's or a list's child."""
    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"

    def __repr__(self) -> str:
        return f"SequenceKey(idx={self.idx!r})"


@dataclasses.dataclass(frozen=True)
class DictKey:
    """The key of a dict's child."""
    key: Any

    def __str__(self) -> str:
        return f"[{self.key!r}]"

    def __repr__(self) -> str:
        return f"DictKey(key={self.key!r})"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """The key of a namedtuple's or a dataclass's field."""
    name: str

    def __str__(self) -> str:
        return f".{self.name}"

    def __repr__(self) -> str:
        return f"GetAttrKey(name={self.name!r})"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    """The key of a custom node's child registered without keys: its position."""
    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"

    def __repr__(self) -> str:
        return f"FlattenedIndexKey(key={self.key!r})"


def _simple(key) -> str:
    if isinstance(key, SequenceKey):
        return str(key.idx)
    if isinstance(key, DictKey):
        return str(key.key)
    if isinstance(key, GetAttrKey):
        return key.name
    if isinstance(key, FlattenedIndexKey):
        return str(key.key)
    return str(key)


def keystr(keys, *, simple: bool = False, separator: str = "") -> str:
    """A key path as text: ``['a'][0].x``, or with ``simple=True`` ``a/0/x`` (with
    ``separator='/'``)."""
    return separator.join(_simple(k) if simple else str(k) for k in keys)


# --- the node rules -------------------------------------------------------------------------

class _Custom(NamedTuple):
    flatten: Callable
    unflatten: Callable
    flatten_with_keys: Callable | None


_registry: dict[type, _Custom] = {}


class _Node(NamedTuple):
    children: tuple
    keys: tuple
    data: Any  # dict: the sorted keys; namedtuple: its type; custom node: its auxiliary data


def _node(x, is_leaf=None) -> _Node | None:
    """x's children, their keys and the node's data, or None where x is a leaf: the rules
    of the C++ flatten (bindings/pytree.cc), in its order of precedence."""
    if is_leaf is not None and is_leaf(x):
        return None
    if x is None:
        return _Node((), (), None)
    t = type(x)
    if t is tuple or t is list:
        return _Node(tuple(x), tuple(SequenceKey(i) for i in range(len(x))), None)
    if t is dict:
        keys = sorted(x)
        return _Node(tuple(x[k] for k in keys), tuple(DictKey(k) for k in keys), tuple(keys))
    custom = _registry.get(t)
    if custom is not None:
        if custom.flatten_with_keys is not None:
            pairs, aux = custom.flatten_with_keys(x)
            pairs = list(pairs)
            return _Node(tuple(c for _, c in pairs), tuple(k for k, _ in pairs), aux)
        children, aux = custom.flatten(x)
        children = tuple(children)
        return _Node(children, tuple(FlattenedIndexKey(i) for i in range(len(children))), aux)
    if isinstance(x, tuple) and hasattr(t, "_fields"):
        return _Node(tuple(x), tuple(GetAttrKey(f) for f in t._fields), t)
    return None


def _leaves_with_path(x, path: tuple, is_leaf, out: list) -> list:
    node = _node(x, is_leaf)
    if node is None:
        out.append((path, x))
    else:
        for k, c in zip(node.keys, node.children):
            _leaves_with_path(c, path + (k,), is_leaf, out)
    return out


class _Hole:
    """A placeholder leaf: where a prefix tree has a leaf."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "*"


_HOLE = _Hole()


def _kind(x) -> str:
    t = type(x)
    return "None" if x is None else f"{t.__name__}"


def _up_to(prefix, full, path: tuple, what: str, out: list) -> None:
    if prefix is _HOLE:
        out.append(full)
        return
    p, f = _node(prefix), _node(full)
    where = keystr(path) or "()"
    if f is None or type(prefix) is not type(full):
        raise ValueError(f"pytree structure error: different types at key path {where} of "
                         f"{what}: the prefix tree has {_kind(prefix)}, the full tree has "
                         f"{_kind(full) if f is not None else f'a leaf {full!r:.60}'}")
    if len(p.children) != len(f.children):
        raise ValueError(f"pytree structure error: different lengths of {_kind(prefix)} at key "
                         f"path {where} of {what}: {len(p.children)} in the prefix tree, "
                         f"{len(f.children)} in the full tree")
    if type(prefix) is dict and p.data != f.data:
        raise ValueError(f"pytree structure error: different dict keys at key path {where} of "
                         f"{what}: {list(p.data)} in the prefix tree, {list(f.data)} in the "
                         f"full tree")
    if type(prefix) in _registry and p.data != f.data:
        raise ValueError(f"pytree structure error: different auxiliary data of "
                         f"{_kind(prefix)} at key path {where} of {what}: {p.data!r} in the "
                         f"prefix tree, {f.data!r} in the full tree")
    for k, pc, fc in zip(p.keys, p.children, f.children):
        _up_to(pc, fc, path + (k,), what, out)


def flatten_up_to(treedef: PyTreeDef, tree: Any, what: str = "the tree") -> list:
    """The subtrees of ``tree`` at the leaves of ``treedef`` (a prefix of its structure), in
    order; a ValueError naming the key path where ``tree`` does not have that prefix."""
    out: list = []
    _up_to(treedef.unflatten([_HOLE] * treedef.num_leaves), tree, (), what, out)
    return out


# --- jax.tree_util --------------------------------------------------------------------------

def tree_map(f: Callable, tree: Any, *rest: Any, is_leaf=None) -> Any:
    """Applies ``f`` leaf by leaf. Each tree of ``rest`` has the structure of ``tree`` or
    has it as a prefix (``f`` then gets the subtree at each of ``tree``'s leaves), as JAX."""
    leaves, treedef = _core.tree_flatten(tree, is_leaf)
    others = []
    for r in rest:
        r_leaves, r_def = _core.tree_flatten(r, is_leaf)
        others.append(r_leaves if r_def == treedef else flatten_up_to(treedef, r, "tree_map"))
    return treedef.unflatten([f(*xs) for xs in zip(leaves, *others)])


def tree_flatten_with_path(tree: Any, is_leaf=None):
    """Returns ([(key path, leaf), ...], treedef)."""
    return _leaves_with_path(tree, (), is_leaf, []), tree_structure(tree, is_leaf)


def tree_leaves_with_path(tree: Any, is_leaf=None) -> list:
    return _leaves_with_path(tree, (), is_leaf, [])


def tree_map_with_path(f: Callable, tree: Any, *rest: Any, is_leaf=None) -> Any:
    """``tree_map`` with ``f(key_path, leaf, *others)``."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf)
    others = [flatten_up_to(treedef, r, "tree_map_with_path") for r in rest]
    return treedef.unflatten([f(p, x, *xs) for (p, x), *xs in zip(pairs, *others)])


class _Missing:
    pass


_MISSING = _Missing()


def tree_reduce(function: Callable, tree: Any, initializer: Any = _MISSING, is_leaf=None):
    """``functools.reduce`` over the leaves."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _MISSING:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_reduce_associative(operation: Callable, tree: Any, *, identity: Any = _MISSING,
                            is_leaf=None):
    """Reduces the leaves pairwise, as a balanced tree (``operation`` must be
    associative)."""
    values = tree_leaves(tree, is_leaf)
    if not values:
        if identity is _MISSING:
            raise ValueError("Must specify identity for parallel reduction of empty sequence.")
        return identity
    while len(values) > 1:
        paired = [operation(values[i], values[i + 1]) for i in range(0, len(values) - 1, 2)]
        values = paired + values[len(values) - len(values) % 2:]
    return values[0]


def tree_all(tree: Any, *, is_leaf=None) -> bool:
    """Whether every leaf is true."""
    return all(tree_leaves(tree, is_leaf))


def all_leaves(iterable, is_leaf=None) -> bool:
    """Whether every element of ``iterable`` is a leaf."""
    return all(_node(x, is_leaf) is None for x in iterable)


def is_tree_node(tree: Any, is_leaf=None) -> bool:
    """Whether ``tree`` is a node (None, a container or a registered type), not a leaf."""
    return _node(tree, is_leaf) is not None


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None,
                   pytree_to_transpose: Any) -> Any:
    """An outer tree of inner trees turned into an inner tree of outer trees."""
    inners = flatten_up_to(outer_treedef, pytree_to_transpose, "tree_transpose")
    if inner_treedef is None:
        inner_treedef = tree_structure(inners[0]) if inners else tree_structure(None)
    columns = [flatten_up_to(inner_treedef, t, "tree_transpose") for t in inners]
    outers = [outer_treedef.unflatten(list(col)) for col in zip(*columns)]
    if not columns:
        outers = [outer_treedef.unflatten([])] * inner_treedef.num_leaves
    return inner_treedef.unflatten(outers)


def tree_broadcast(prefix_tree: Any, full_tree: Any, is_leaf=None) -> Any:
    """``prefix_tree``'s leaves repeated over the matching subtrees of ``full_tree``."""
    treedef = tree_structure(prefix_tree, is_leaf)
    full_def = tree_structure(full_tree, is_leaf)
    subtrees = flatten_up_to(treedef, full_tree, "tree_broadcast")
    leaves = tree_leaves(prefix_tree, is_leaf)
    out = []
    for leaf, sub in zip(leaves, subtrees):
        out += [leaf] * len(tree_leaves(sub, is_leaf))
    return full_def.unflatten(out)


def flatten_one_level(tree: Any):
    """(children, node data) of a node; ValueError for a leaf."""
    node = _node(tree)
    if node is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    return list(node.children), node.data


def flatten_one_level_with_keys(tree: Any):
    """([(key, child), ...], node data) of a node; ValueError for a leaf."""
    node = _node(tree)
    if node is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    return list(zip(node.keys, node.children)), node.data


def treedef_children(treedef: PyTreeDef) -> list:
    return treedef.children()


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    return treedef.num_nodes == 1


def treedef_tuple(treedefs) -> PyTreeDef:
    """The structure of a tuple of trees of these structures."""
    return tree_structure(tuple(d.unflatten([_HOLE] * d.num_leaves) for d in treedefs))


# --- registration ---------------------------------------------------------------------------

def register_pytree_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable,
                         flatten_with_keys_func: Callable | None = None):
    """``flatten_func(x) -> (children, aux_data)``; ``unflatten_func(aux_data, children)``;
    optionally ``flatten_with_keys_func(x) -> ([(key, child), ...], aux_data)``."""
    if nodetype in _registry:
        raise ValueError(f"Duplicate custom PyTreeDef type registration for {nodetype}.")
    _core.register_pytree_node(nodetype, flatten_func, unflatten_func)
    _registry[nodetype] = _Custom(flatten_func, unflatten_func, flatten_with_keys_func)


def register_pytree_with_keys(nodetype: type, flatten_with_keys: Callable,
                              unflatten_func: Callable, flatten_func: Callable | None = None):
    """A node type whose children have keys: ``flatten_with_keys(x) -> ([(key, child), ...],
    aux_data)``."""
    if flatten_func is None:
        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux
    register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_node_class(cls):
    """Class decorator: uses ``cls.tree_flatten`` and ``cls.tree_unflatten``."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_pytree_with_keys_class(cls):
    """Class decorator: uses ``cls.tree_flatten_with_keys`` and ``cls.tree_unflatten``."""
    flatten = getattr(cls, "tree_flatten", None)
    register_pytree_with_keys(cls, lambda x: x.tree_flatten_with_keys(), cls.tree_unflatten,
                              None if flatten is None else (lambda x: x.tree_flatten()))
    return cls


def register_static(cls):
    """Registers ``cls`` as a node without leaves whose instances (hashable) are part of the
    structure: static under ``jit`` without ``static_argnums``."""
    register_pytree_with_keys(cls, lambda x: ((), x), lambda x, _: x)
    return cls


def register_dataclass(nodetype: type, data_fields=None, meta_fields=None, drop_fields=()):
    """Registers a dataclass: ``data_fields`` are children, ``meta_fields`` (hashable) are
    part of the structure. Without them, a dataclass's fields are data unless their metadata
    has ``static=True``. Usable as a decorator."""
    if data_fields is None or meta_fields is None:
        if (data_fields is None) != (meta_fields is None):
            raise TypeError("register_dataclass: pass both data_fields and meta_fields, or "
                            "neither (to infer them from the dataclass's fields)")
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(f"register_dataclass: {nodetype.__name__} is not a dataclass; "
                            "pass data_fields and meta_fields")
        fields = [f for f in dataclasses.fields(nodetype) if f.name not in drop_fields]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    if dataclasses.is_dataclass(nodetype):
        init = {f.name for f in dataclasses.fields(nodetype) if f.init}
        given = set(data_fields) | set(meta_fields) | set(drop_fields)
        if init - given:
            raise ValueError(f"register_dataclass: fields {sorted(init - given)} of "
                             f"{nodetype.__name__} are neither data, meta nor dropped")

    def flatten_with_keys(x):
        return ([(GetAttrKey(n), getattr(x, n)) for n in data_fields],
                tuple(getattr(x, n) for n in meta_fields))

    def unflatten(meta, data):
        return nodetype(**dict(zip(meta_fields, meta)), **dict(zip(data_fields, data)))

    register_pytree_with_keys(nodetype, flatten_with_keys, unflatten,
                              lambda x: ([getattr(x, n) for n in data_fields],
                                         tuple(getattr(x, n) for n in meta_fields)))
    return nodetype


class _HashableCallableShim:
    """A ``functools.partial`` held as Partial's function: part of the structure (its own
    arguments static), hashed and compared by the partial it wraps."""

    def __init__(self, fun):
        self.fun = fun

    def __call__(self, *args, **kwargs):
        return self.fun(*args, **kwargs)

    def __hash__(self):
        return hash(self.fun)

    def __eq__(self, other):
        if isinstance(other, _HashableCallableShim):
            return self.fun == other.fun
        return self.fun == other


class Partial(functools.partial):
    """``functools.partial`` as a pytree: its arguments are children, the function is part
    of the structure, so it can be passed to and returned from jitted functions. A wrapped
    ``functools.partial`` (or Partial) keeps its own arguments in the structure, as JAX."""

    def __new__(cls, func, *args, **kwargs):
        if isinstance(func, functools.partial):
            original = func
            func = _HashableCallableShim(original)
            out = super().__new__(cls, func, *args, **kwargs)
            func.func, func.args, func.keywords = original.func, original.args, original.keywords
            return out
        return super().__new__(cls, func, *args, **kwargs)


register_pytree_node(Partial, lambda p: ((p.args, p.keywords), p.func),
                     lambda func, xs: Partial(func, *xs[0], **xs[1]))


# OrderedDict and defaultdict are nodes, as in JAX: an OrderedDict keeps its keys' order,
# a defaultdict sorts them as a dict does and keeps its default factory in the structure.
def _ordered_dict_flatten_with_keys(x):
    return [(DictKey(k), v) for k, v in x.items()], tuple(x.keys())


def _default_dict_flatten_with_keys(x):
    keys = sorted(x)
    return [(DictKey(k), x[k]) for k in keys], (x.default_factory, tuple(keys))


register_pytree_with_keys(
    collections.OrderedDict, _ordered_dict_flatten_with_keys,
    lambda keys, values: collections.OrderedDict(zip(keys, values)))
register_pytree_with_keys(
    collections.defaultdict, _default_dict_flatten_with_keys,
    lambda aux, values: collections.defaultdict(aux[0], zip(aux[1], values)))
