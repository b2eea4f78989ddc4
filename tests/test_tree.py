"""Pytrees beyond flatten and map (fusionjit.tree_util, fusionjit.tree): key paths, prefix
trees, reductions, transposition, dataclasses, static types and Partial, compared with JAX's
own answers where JAX is installed."""

import collections
import dataclasses

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
from fusionjit import tree, tree_util as tu
from conftest import requires_jax

NT = collections.namedtuple("NT", "a b")


class Box:
    """A custom node registered without keys."""

    def __init__(self, a, b, tag="t"):
        self.a, self.b, self.tag = a, b, tag


tu.register_pytree_node(Box, lambda x: ((x.a, x.b), x.tag), lambda tag, ch: Box(*ch, tag))


@dataclasses.dataclass
class EnvState:
    """An environment's state, as RL code registers it: arrays are data, the step limit is
    static."""
    x: object
    v: object
    limit: int = dataclasses.field(default=500, metadata=dict(static=True))


tu.register_dataclass(EnvState)


def sample():
    return {"z": [1, (2, None)], "a": NT(3, 4), "c": Box(8, 9), "d": EnvState(5, 6, 7)}


def test_paths_follow_the_flatten_order():
    pairs, treedef = tu.tree_flatten_with_path(sample())
    assert [leaf for _, leaf in pairs] == tu.tree_leaves(sample())
    assert treedef == tu.tree_structure(sample())
    got = {tu.keystr(p): leaf for p, leaf in pairs}
    assert got == {"['a'].a": 3, "['a'].b": 4, "['c'][<flat index 0>]": 8,
                   "['c'][<flat index 1>]": 9, "['d'].x": 5, "['d'].v": 6, "['z'][0]": 1,
                   "['z'][1][0]": 2}
    assert tu.keystr(pairs[-1][0], simple=True, separator="/") == "z/1/0"
    assert pairs[0][0] == (tu.DictKey("a"), tu.GetAttrKey("a"))
    assert tu.tree_map_with_path(lambda p, x: (tu.keystr(p), x), {"k": [1]}) == \
        {"k": [("['k'][0]", 1)]}


@requires_jax
def test_paths_and_strings_match_jax():
    import jax.tree_util as jtu
    jtu.register_pytree_node(Box, lambda x: ((x.a, x.b), x.tag), lambda tag, ch: Box(*ch, tag))
    jtu.register_dataclass(EnvState)
    ours = [(tu.keystr(p), tu.keystr(p, simple=True, separator="."), leaf, [repr(k) for k in p])
            for p, leaf in tu.tree_leaves_with_path(sample())]
    theirs = [(jtu.keystr(p), jtu.keystr(p, simple=True, separator="."), leaf,
               [repr(k) for k in p]) for p, leaf in jtu.tree_leaves_with_path(sample())]
    assert ours == theirs


def test_map_takes_trees_that_have_the_first_as_a_prefix():
    assert tu.tree_map(lambda x, y: (x, y), [1, 2], [[3, 4], {"a": 5}]) == \
        [(1, [3, 4]), (2, {"a": 5})]
    assert tree.map(lambda x, y: x + y, {"a": 1}, {"a": 2}) == {"a": 3}
    with pytest.raises(ValueError, match="different lengths of list at key path"):
        tu.tree_map(lambda x, y: x, [1, 2], [3, 4, 5])
    with pytest.raises(ValueError, match=r"different types at key path \[0\]"):
        tu.tree_map(lambda x, y: x, [(1, 2)], [[3, 4]])
    with pytest.raises(ValueError, match="different dict keys"):
        tu.tree_map(lambda x, y: x, {"a": 1}, {"b": 1})
    with pytest.raises(ValueError, match="auxiliary data"):
        tu.tree_map(lambda x, y: x, Box(1, 2, "p"), Box(1, 2, "q"))
    with pytest.raises(ValueError, match="different types"):
        tu.tree_map(lambda x, y: x, [None], [1])
    assert tu.tree_map(lambda x, y: (x, y), [1], [None]) == [(1, None)]


def test_reduce_all_and_associative_reduce():
    assert tree.reduce(lambda a, b: a + b, sample()) == sum(range(1, 10)) - 7 + 0
    assert tu.tree_reduce(lambda a, b: a + b, [], 10) == 10
    with pytest.raises(TypeError):
        tu.tree_reduce(lambda a, b: a + b, [])
    order = []
    assert tree.reduce_associative(lambda a, b: order.append((a, b)) or a + b,
                                   [1, 2, 3, 4, 5]) == 15
    assert order[:2] == [(1, 2), (3, 4)]
    assert tu.tree_reduce_associative(lambda a, b: a + b, [], identity=0) == 0
    with pytest.raises(ValueError, match="identity"):
        tu.tree_reduce_associative(lambda a, b: a + b, [])
    assert tree.all([True, 1, (2,)]) and not tu.tree_all([1, [0]]) and tu.tree_all([])


def test_transpose_broadcast_and_treedef_helpers():
    outer, inner = tu.tree_structure([0, 0]), tu.tree_structure((0, 0))
    assert tree.transpose(outer, inner, [(1, 2), (3, 4)]) == ([1, 3], [2, 4])
    assert tree.transpose(outer, None, [{"a": 1}, {"a": 2}]) == {"a": [1, 2]}
    with pytest.raises(ValueError):
        tree.transpose(outer, inner, [(1, 2), (3, 4, 5)])
    assert tree.broadcast(1, [1, 2]) == [1, 1]
    assert tree.broadcast([1, 2], [[3, 4], 5]) == [[1, 1], 2]
    assert tu.treedef_tuple([tu.tree_structure([1]), tu.tree_structure(None)]) == \
        tu.tree_structure(([0], None))
    assert tu.treedef_is_leaf(tu.tree_structure(1)) and tu.treedef_is_leaf(tu.tree_structure(None))
    assert not tu.treedef_is_leaf(tu.tree_structure([1]))
    assert tu.treedef_children(tu.tree_structure((1, [2, 3]))) == \
        [tu.tree_structure(1), tu.tree_structure([2, 3])]
    assert tu.all_leaves([1, np.ones(3)]) and not tu.all_leaves([[1]]) and \
        not tu.all_leaves([None])
    assert tu.all_leaves([(1, 2)], is_leaf=lambda t: isinstance(t, tuple))
    assert tu.is_tree_node([1]) and tu.is_tree_node(None) and not tu.is_tree_node(1.0)
    assert tu.flatten_one_level({"b": 1, "a": 2}) == ([2, 1], ("a", "b"))
    assert tu.flatten_one_level(NT(1, 2)) == ([1, 2], NT)
    assert tu.flatten_one_level_with_keys([5]) == ([(tu.SequenceKey(0), 5)], None)
    with pytest.raises(ValueError, match="can't tree-flatten"):
        tu.flatten_one_level(1)


def test_dataclass_state_goes_through_jit_with_static_fields_in_the_key():
    traces = []

    @fusionjit.jit
    def step(s):
        traces.append(s.limit)
        return EnvState(s.x + s.v, s.v, s.limit)

    s = step(EnvState(fnp.ones(3), 2 * fnp.ones(3), limit=10))
    assert isinstance(s, EnvState) and s.limit == 10
    np.testing.assert_array_equal(np.asarray(s.x), [3, 3, 3])
    step(EnvState(fnp.ones(3), fnp.ones(3), limit=10))
    step(EnvState(fnp.ones(3), fnp.ones(3), limit=20))
    assert traces == [10, 20]  # a new static value traces again; new data does not


def test_register_dataclass_checks_its_fields():
    @dataclasses.dataclass
    class P:
        a: object
        b: object

    with pytest.raises(ValueError, match="neither data, meta nor dropped"):
        tu.register_dataclass(P, data_fields=["a"], meta_fields=[])
    with pytest.raises(TypeError, match="not a dataclass"):
        tu.register_dataclass(Box)
    with pytest.raises(TypeError, match="both"):
        tu.register_dataclass(P, data_fields=["a", "b"])
    tu.register_dataclass(P, data_fields=["a"], meta_fields=["b"])
    assert tu.tree_leaves(P(1, 2)) == [1]
    with pytest.raises(ValueError, match="Duplicate"):
        tu.register_dataclass(P, data_fields=["a"], meta_fields=["b"])


def test_register_static_and_keys_class():
    @tu.register_static
    class Mode(str):
        pass

    assert tu.tree_leaves([Mode("add"), 1]) == [1]

    @fusionjit.jit
    def f(x, mode):
        return x + 1 if mode == "add" else x - 1

    np.testing.assert_array_equal(np.asarray(f(fnp.zeros(2), Mode("add"))), [1, 1])
    np.testing.assert_array_equal(np.asarray(f(fnp.zeros(2), Mode("sub"))), [-1, -1])

    @tu.register_pytree_with_keys_class
    class Named:
        def __init__(self, w, b):
            self.w, self.b = w, b

        def tree_flatten_with_keys(self):
            return [(tu.GetAttrKey("w"), self.w), (tu.GetAttrKey("b"), self.b)], None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(Named(1, 2))] == [".w", ".b"]
    assert tu.tree_map(lambda v: v * 10, Named(1, 2)).b == 20


def test_partial_passes_through_jit():
    def affine(w, x, b):
        return x * w + b

    p = tu.Partial(affine, fnp.full(2, 3.0), b=fnp.ones(2))
    assert len(tu.tree_leaves(p)) == 2

    @fusionjit.jit
    def apply(fn, x):
        return fn(x)

    np.testing.assert_array_equal(np.asarray(apply(p, fnp.ones(2))), [4, 4])
    out = fusionjit.jit(lambda fn: fn)(p)
    assert isinstance(out, tu.Partial) and out.func is affine
    np.testing.assert_array_equal(np.asarray(out(fnp.ones(2))), [4, 4])


def test_partial_of_a_partial_keeps_its_arguments_static():
    import functools

    def f(x, y, mode):
        return x * y if mode == "mul" else x + y

    p = tu.Partial(functools.partial(f, mode="mul"), np.float32(3.0))
    assert float(fusionjit.jit(lambda p, x: p(x))(p, np.float32(2.0))) == 6.0
    assert tu.tree_leaves(tu.Partial(tu.Partial(lambda a, b: a + b, 1.0), 2.0)) == [2.0]


def test_ordered_and_default_dicts_are_nodes():
    od = collections.OrderedDict(b=1, a=2)
    assert tu.tree_leaves(od) == [1, 2]  # insertion order
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(od)] == ["['b']", "['a']"]
    assert tu.tree_structure(collections.OrderedDict(a=1, b=2)) != tu.tree_structure(od)
    out = fusionjit.jit(lambda d: collections.OrderedDict((k, v + 1) for k, v in d.items()))(
        collections.OrderedDict(w=np.ones(2, np.float32), b=np.zeros(1, np.float32)))
    assert isinstance(out, collections.OrderedDict) and list(out) == ["w", "b"]
    dd = collections.defaultdict(list, {"b": 1, "a": 2})
    assert tu.tree_leaves(dd) == [2, 1]  # sorted, as a dict
    mapped = tu.tree_map(lambda v: v * 10, dd)
    assert isinstance(mapped, collections.defaultdict) and mapped.default_factory is list
    assert dict(mapped) == {"a": 20, "b": 10}


def test_ravel_pytree_round_trips_shapes_and_dtypes():
    from fusionjit.flatten_util import ravel_pytree
    tree = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.float32(7),
            "n": np.array([1, 2], np.int32)}
    flat, unravel = ravel_pytree(tree)
    assert flat.dtype == np.float32 and flat.shape == (9,)
    np.testing.assert_array_equal(np.asarray(flat), [7, 1, 2, 0, 1, 2, 3, 4, 5])  # b, n, w
    back = unravel(flat * 2)
    assert back["n"].dtype == np.int32 and back["w"].shape == (2, 3)
    np.testing.assert_array_equal(np.asarray(back["w"]), 2 * tree["w"])
    flat_jit = fusionjit.jit(lambda t: ravel_pytree(t)[0])(tree)
    np.testing.assert_array_equal(np.asarray(flat_jit), np.asarray(flat))
    with pytest.raises(TypeError, match="a vector of shape"):
        unravel(np.zeros(8, np.float32))
    empty, unravel_empty = ravel_pytree({})
    assert empty.shape == (0,) and unravel_empty(empty) == {}
