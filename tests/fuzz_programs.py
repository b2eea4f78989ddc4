"""Random-program fuzzer for fusion.

A seed (``numpy.random.Generator``) gives a random program: a DAG of 8-30 nodes over 1-4
random input arrays (rank 0-3, dims 1-9; float32 mostly, also int32 and bool) made of
elementwise ops, NumPy broadcasting, broadcast_to/expand_dims, reductions, concatenate/stack,
slices (negative steps too), reshape, transpose, astype, take (a gather at traced
indices), x.at[idx].add (a scatter), cumsum and sort along an axis, returning 1-3 of its
nodes.
That is the small tier (the default): every node has at most 2048 elements. The loops tier
(``--tier loops``, tests/fuzz_loops.py) puts such straight-line code in the steps of
lax.scan, fori_loop and while_loop and the branches of cond and switch (nested too, with
random keys split in the steps). The large tier (``--tier large``, tests/fuzz_large.py,
whose docstring says what it generates and how its tolerances scale with the reduction
lengths) reaches what users run on large arrays:
nodes of up to 2M elements past the thread-pool and tree-reduction thresholds (65536),
softmax / layer-norm shaped row kernels with 16-70001-element rows, float64 (x64 on),
uint32, dot/matmul, lax.pad and dynamic slices at traced start indices.

A program is a list of node specs. Each node is one Python expression over earlier nodes
(``v0``, ``v1``, ...) written against a module ``xp`` and the dtypes ``F`` (float), ``I``
(int32), ``B`` (bool) and ``U`` (uint32; large tier) and ``L`` (fusionjit.lax, or
fuzz_large.NumpyLax for NumPy; large tier), so the same specs are interpreted with
``fusionjit.numpy`` under ``fusionjit.jit`` and with plain NumPy; ``Program.source()`` prints
them as a runnable function. Values are kept tame (inputs in [-2, 2] or [-4, 4], clip before
exp, log and sqrt of abs, bounded products and sums, divisors kept away from 0), and a
program whose NumPy float32 results are ill-conditioned (they differ from a float64
evaluation, or a floor, comparison or float->int/bool conversion lies within rounding
distance of its jump) gets new input values; if it stays ill-conditioned it is marked
``fragile`` and only the fusion profiles are compared with each other, not with NumPy.

``check_program`` runs a program under the fusion profiles none, xla, xla+concat and
fusionjit, twice each (a second call of the cached executable must give bitwise the same
results: the thread pool's split must not change them), compares every result with NumPy
(small tier: rtol = atol = 1e-4 for floats, exact for int and bool; large tier: see
tests/fuzz_large.py) and with profile none, checks that explain gives a reason for every
kernel boundary, and checks the kernel counts: fusionjit <= xla <= none (fusionjit may make
more kernels only where it kept its own plan as estimated faster than XLA's rules').

A failing program is shrunk (``shrink``) to the fewest ops that still fail the same way:
outputs dropped, nodes bypassed, the graph cut (a node's value becomes an input), inputs
simplified. Crashes and hangs are caught by checking in child processes.

Command line (runs the same checks in a loop, each batch of seeds in a child process so that
a segfault or a hang is reported like any other failure; prints progress and stops at the
first failure with its reproducer)::

    python3 tests/fuzz_programs.py --start 0 --count 1000000 [--jobs 2]
        [--tier small|large|loops] [--threads 2,3,4]
        [--profiles none,xla,xla+concat,fusionjit] [--keep-going] [--time-limit SECONDS]
        [--shrink] [--none-opt-level 0]
    python3 tests/fuzz_programs.py --show SEED                      # print a program
    python3 tests/fuzz_programs.py --start SEED --count 1 --shrink  # minimise a failure
    python3 tests/fuzz_programs.py --tier large --stats --count 200  # what programs reach

``--threads`` gives the worker processes FUSIONJIT_NUM_THREADS, one value per batch in turn
(default: inherited; 2,3,4 with --tier large); a failure report names the value. Hours of
the large tier (about 4 programs/s per core on a 2-core Zen 3)::

    python3 tests/fuzz_programs.py --tier large --start 0 --count 1000000 --jobs 2 \\
        --keep-going --time-limit 14400 --shrink

The loops tier runs about 1.3 programs/s on one core (a hang costs --timeout seconds)::

    python3 tests/fuzz_programs.py --tier loops --start 0 --count 3000 --keep-going
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field

import numpy as np

if __name__ == "__main__":
    # tests/fuzz_large.py imports this module by name: let it find this copy.
    sys.modules.setdefault("fuzz_programs", sys.modules[__name__])

PROFILES = ("none", "xla", "xla+concat", "fusionjit")
TIERS = ("small", "large", "loops")
# LLVM optimisation level for the reference profile "none" (one kernel per op): at the
# default level 2 it costs half of all compile time; at 0 it is 4x cheaper, and comparing
# unoptimised reference code with optimised fused code is the stronger differential test.
# FJ_FUZZ_NONE_OPT_LEVEL=2 (or --none-opt-level 2) compiles it like the others.
NONE_OPT_LEVEL = os.environ.get("FJ_FUZZ_NONE_OPT_LEVEL", "0")
# IR verification after every pass (FJ_CHECKS=0 turns it off).
FUZZ_CHECKS = os.environ.get("FJ_CHECKS", "1") not in ("0", "", "false", "no", "off")
RTOL = ATOL = 1e-4
# A program is ill-conditioned when NumPy float32 and float64 differ by more than this.
COND_TOL = 2.5e-5
# A floor / comparison / conversion closer than this (relative) to its jump is fragile.
MARGIN = 1e-4

FMAX = 100.0        # bound on |float values|
IMAX = 1 << 20      # bound on |int values|
MAX_SIZE = 2048     # elements per node
MAX_RANK = 4

F32, I32, BOOL = np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.bool_)
U32 = np.dtype(np.uint32)     # the large tier's
_DT_NAME = {F32: "F", I32: "I", BOOL: "B", U32: "U"}
_DT_SHORT = {F32: "f32", I32: "i32", BOOL: "bool", U32: "u32"}


# --- programs ----------------------------------------------------------------------------

@dataclass
class Node:
    op: str                 # kind, e.g. "sin", "add", "sum", "input"
    args: list              # ids of earlier nodes
    expr: str               # the expression, with {0}, {1}, ... for the args
    shape: tuple
    dtype: np.dtype
    bound: float            # |value| <= bound for every input in range
    disc: str = ""          # discontinuity: "floor", "trunc", "nonzero", "cmp" (args 0 and 1)

    def render(self, names) -> str:
        return self.expr.format(*[names[a] for a in self.args])


@dataclass
class Program:
    seed: object
    nodes: list             # Node; the inputs are the nodes with op "input" (in order)
    outputs: list           # node ids
    data: list              # one NumPy array per input
    fragile: bool = False
    note: str = ""          # "shrunk" once shrink() has changed it
    _codes: list = field(default=None, repr=False)

    # The tier's hooks (tests/fuzz_large.py's LargeProgram overrides them).
    tier = "small"
    float_dtype = np.float32    # what the specs' F stands for under fusionjit
    numpy_lax = None            # the NumPy stand-in for fusionjit.lax (the specs' L)

    @property
    def input_ids(self):
        return [i for i, n in enumerate(self.nodes) if n.op == "input"]

    def derive(self, **changes) -> "Program":
        """A copy with some fields changed (nodes, outputs, data, fragile, note); what was
        computed from the old ones is dropped."""
        return dataclasses.replace(self, _codes=None, **changes)

    def codes(self):
        if self._codes is None:
            self._codes = [None if n.op == "input" else
                           compile(n.render([f"v{a}" for a in range(len(self.nodes))]),
                                   f"<node v{i}>", "eval")
                           for i, n in enumerate(self.nodes)]
        return self._codes

    # -- interpretation ---------------------------------------------------------------
    def interpret(self, xp, args, float_dtype=np.float32, record=None, lax=None):
        """Evaluates the program with module ``xp`` (numpy or fusionjit.numpy) and ``lax``
        (fusionjit.lax or ``numpy_lax``) on ``args``; ``record``, a list, receives every
        node's value."""
        env = {"xp": xp, "F": float_dtype, "I": np.int32, "B": np.bool_, "U": np.uint32,
               "L": lax, "ADD_AT": _add_at}
        codes = self.codes()
        ins = iter(args)
        vals = []
        for i, n in enumerate(self.nodes):
            if n.op == "input":
                v = next(ins)
            else:
                v = eval(codes[i], env)
            env[f"v{i}"] = v
            vals.append(v)
        if record is not None:
            record.extend(vals)
        return tuple(vals[o] for o in self.outputs)

    def numpy(self, float_dtype=np.float32, record=None, xp=np):
        args = [a.astype(float_dtype) if a.dtype == F32 else a for a in self.data]
        with np.errstate(all="ignore"):
            out = self.interpret(xp, args, float_dtype, record, self.numpy_lax)
        return tuple(np.asarray(o) for o in out)

    def function(self):
        """A Python function of the inputs computing the program with fusionjit.numpy."""
        import fusionjit.lax as flax
        import fusionjit.numpy as fnp

        def program(*args):
            return self.interpret(fnp, args, self.float_dtype, lax=flax)
        program.__name__ = f"program_{self.seed}".replace("-", "_").replace(".", "_")
        program.__qualname__ = program.__name__
        return program

    def jit_args(self):
        """The inputs as fusionjit arrays (under ``config()``)."""
        import fusionjit.numpy as fnp
        return [fnp.asarray(a.astype(self.float_dtype) if a.dtype == F32 else a)
                for a in self.data]

    def config(self):
        """A context manager setting the fusionjit options the program runs under."""
        import contextlib
        return contextlib.nullcontext()

    # -- checking hooks ---------------------------------------------------------------
    def condition(self) -> bool:
        """Whether the program is fragile (see ``conditioning``) for its current inputs."""
        return conditioning(self)[0]

    def reference(self):
        """Per output, what ``compare`` takes as NumPy's result."""
        return self.numpy(np.float32)

    def compare(self, i, got, want, what, against="numpy"):
        """None, or how output ``i`` of a profile (``got``) differs from ``want``: an item of
        ``reference()`` (``against`` "numpy") or profile none's output ("none")."""
        return _compare(got, want, what)

    def simpler(self, k):
        """Simpler values for input ``k``, simplest first (for the shrinker)."""
        return _simpler(self.data[k])

    def meta(self) -> dict:
        """What save_program stores besides the nodes and the data."""
        return {}

    # -- shrinking hooks --------------------------------------------------------------
    def size(self) -> tuple:
        """What shrinking makes smaller (compared as tuples): the ops, then the outputs."""
        return (sum(n.op != "input" for n in self.nodes), len(self.outputs))

    def pruned(self) -> "Program":
        """The program without what its outputs do not use."""
        return _dce(self)

    def smaller(self):
        """Candidate simplifications, most promising first (``shrink`` keeps the first that
        is smaller by ``size()`` and still fails): outputs dropped, a node bypassed (an
        operand, or another earlier node of its shape and dtype, takes its place) or cut
        (its NumPy value becomes an input)."""
        outs = self.outputs
        if len(outs) > 1:
            options = [[o] for o in dict.fromkeys(outs)]
            options += [outs[:k] + outs[k + 1:] for k in range(len(outs))] if len(outs) > 2 else []
            for kept in options:
                yield _dce(self.derive(outputs=kept))
        for i in range(len(self.nodes) - 1, -1, -1):
            n = self.nodes[i]
            if n.op == "input":
                continue
            same = [a for a in range(i) if self.nodes[a].shape == n.shape
                    and self.nodes[a].dtype == n.dtype]
            for a in sorted(same, key=lambda a: (a not in n.args, -a)):
                yield _replace(self, i, a)
            yield _cut(self, i)

    # -- printing ---------------------------------------------------------------------
    def dt_short(self, dtype) -> str:
        return _DT_SHORT[dtype]

    def data_source(self, k: int, a, with_data: bool) -> str:
        """The expression that makes input ``k`` in a printed reproducer."""
        if with_data:
            return f"np.array({a.tolist()!r}, dtype={_DT_NAME[a.dtype]})"
        return (f"fuzz_programs.generate({self.seed!r}).data[{k}]"
                f"  # {_DT_SHORT[a.dtype]}{list(a.shape)}")

    def source_head(self) -> list:
        """The reproducer's lines before the inputs."""
        return ["import numpy as np", "import fusionjit", "import fusionjit.numpy as fnp",
                "F, I, B = np.float32, np.int32, np.bool_", ""]

    def source(self, with_data: bool | None = None) -> str:
        """The program as runnable Python (with its inputs when they are small)."""
        ins = self.input_ids
        names = [f"v{i}" for i in range(len(self.nodes))]
        lax = self.numpy_lax is not None or any("L." in n.expr for n in self.nodes)
        lines = [f"def program({', '.join(names[i] for i in ins)}, xp=fnp"
                 f"{', L=lax' if lax else ''}):"]
        for i, n in enumerate(self.nodes):
            if n.op == "input":
                continue
            expr = n.render(names)
            lines.append(f"    {names[i]} = {expr}".ljust(60)
                         + f"  # {self.dt_short(n.dtype)}{list(n.shape)}")
        lines.append(f"    return ({''.join(names[o] + ', ' for o in self.outputs)})")
        head = self.source_head()
        if any("ADD_AT(" in n.expr for n in self.nodes):
            head += ["def ADD_AT(x, idx, updates):  # x.at[idx].add(updates), for NumPy too",
                     "    if isinstance(x, np.ndarray):",
                     "        out = x.copy()",
                     "        np.add.at(out, idx, updates)",
                     "        return out",
                     "    return x.at[idx].add(updates)", ""]
        total = sum(a.size for a in self.data)
        if with_data is None:       # a shrunk program's inputs are not the seed's
            with_data = total <= 64 or self.note == "shrunk"
        args = []
        for k, a in enumerate(self.data):
            name = f"a{k}"
            args.append(name)
            head.append(f"{name} = {self.data_source(k, a, with_data)}")
        mods = sorted({line.split(".generate(")[0].split()[-1] for line in head
                       if ".generate(" in line})
        head[:0] = [f"import {m}  # tests/{m}.py" for m in mods]
        tail = ["", f"args = ({''.join(a + ', ' for a in args)})"] + self.source_tail(lax)
        return "\n".join(head + [""] + lines + tail)

    def source_tail(self, lax: bool) -> list:
        """The reproducer's lines after ``args = (...)``."""
        return ["expected = [np.asarray(r) for r in program(*args, xp=np"
                f"{', L=NumpyLax' if lax else ''})]",
                "for p in ('none', 'xla', 'xla+concat', 'fusionjit'):",
                "    got = fusionjit.jit(program, fusion=p)(*args)",
                "    print(p, fusionjit.testing.count_kernels(program, fusion=p)(*args), "
                "[np.asarray(g).tolist() for g in got])",
                "print('numpy', [e.tolist() for e in expected])"]

    def __str__(self) -> str:
        return self.source()


# --- generation --------------------------------------------------------------------------

def _add_at(x, idx, updates):
    """``x.at[idx].add(updates)``, functionally: np.add.at on a copy for NumPy arrays (it adds
    repeated indices in order, as fusionjit's scatter does), ``.at[]`` for fusionjit's."""
    if isinstance(x, np.ndarray):
        out = x.copy()
        np.add.at(out, idx, updates)
        return out
    return x.at[idx].add(updates)


def _bshape(a, b):
    """NumPy's broadcast of two shapes, or None."""
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            return None
        out.append(max(x, y))
    return tuple(out)


def _size(shape):
    return int(np.prod(shape, dtype=np.int64))


def _lit(x) -> str:
    return repr(tuple(x)) if isinstance(x, (tuple, list)) else repr(x)


class _Reject(Exception):
    pass


class Generator:
    """Builds one random program from a numpy.random.Generator."""

    UNARY_F = ["neg", "abs", "exp", "log", "sin", "cos", "tanh", "sqrt", "floor", "square"]
    UNARY_I = ["neg", "abs", "square"]
    KINDS = {"unary": 20, "binary": 20, "where": 6, "compare": 3, "broadcast_to": 3,
             "expand_dims": 3, "reduce": 11, "concatenate": 4, "stack": 2, "slice": 6,
             "reshape": 5, "transpose": 4, "astype": 3, "clip": 2, "take": 2, "along": 2,
             "scatter": 1}
    max_size, max_rank = MAX_SIZE, MAX_RANK

    def __init__(self, rng: np.random.Generator, seed=None):
        self.rng = rng
        self.seed = seed
        self.nodes: list[Node] = []
        self.vals: list = []      # NumPy float32 values of the nodes (for shapes)
        self.used: list = []      # whether a node has a user yet
        self.data: list = []

    # -- helpers ----------------------------------------------------------------------
    def r(self, n):
        return int(self.rng.integers(n))

    def chance(self, p):
        return self.rng.random() < p

    def choice(self, seq):
        return seq[self.r(len(seq))]

    def add(self, op, args, expr, bound, disc=""):
        node = Node(op, list(args), expr, (), F32, float(bound), disc)
        env = {"xp": np, "F": np.float32, "I": np.int32, "B": np.bool_,
               "ADD_AT": _add_at}
        for a in args:
            env[f"v{a}"] = self.vals[a]
        with np.errstate(all="ignore"):
            v = np.asarray(eval(node.render({a: f"v{a}" for a in args}), env))
        if v.size > self.max_size or v.ndim > self.max_rank or v.size == 0:
            raise _Reject
        if v.dtype not in (F32, I32, BOOL):
            raise AssertionError(f"generator made dtype {v.dtype}: {node.expr}")
        if v.dtype == F32 and bound > FMAX or v.dtype == I32 and bound > IMAX:
            raise _Reject
        node.shape, node.dtype = tuple(v.shape), v.dtype
        if v.dtype == BOOL:
            node.bound = 1.0
        self.nodes.append(node)
        self.vals.append(v)
        self.used.append(False)
        for a in args:
            self.used[a] = True
        return len(self.nodes) - 1

    def _users(self):
        used = [False] * len(self.nodes)
        for n in self.nodes:
            for a in n.args:
                used[a] = True
        return used

    def shape(self, i):
        return self.nodes[i].shape

    def dtype(self, i):
        return self.nodes[i].dtype

    def bound(self, i):
        return self.nodes[i].bound

    def pick(self, pred=None):
        """A node, biased towards the most recent ones (deep chains) but any can be used
        again (several users)."""
        ids = [i for i in range(len(self.nodes)) if pred is None or pred(i)]
        if not ids:
            raise _Reject
        u = self.rng.random()
        if u < 0.45:
            return ids[-1 - self.r(min(3, len(ids)))]
        if u < 0.75:
            unused = [i for i in ids if not self.used[i]]
            if unused:
                return self.choice(unused)
        return self.choice(ids)

    def partner(self, x, dtype=None, convert=True):
        """A node that broadcasts with node ``x`` (or with the shape ``x``, a tuple): an
        operand of a binary op, converted to ``dtype`` with an astype node when needed."""
        sx = x if isinstance(x, tuple) else self.shape(x)

        def ok(i):
            s = _bshape(sx, self.shape(i))
            return s is not None and _size(s) <= self.max_size and len(s) <= self.max_rank

        cands = [i for i in range(len(self.nodes)) if ok(i)]
        if not cands:
            raise _Reject
        if not isinstance(x, tuple) and len(cands) > 1 and self.chance(0.8):
            cands.remove(x)
        if dtype is not None:
            same = [i for i in cands if self.dtype(i) == dtype]
            if same and (not convert or self.chance(0.93)):
                cands = same
            elif convert:
                y = self.choice(cands)
                return y if self.dtype(y) == dtype else self.astype(y, dtype)
            else:
                cands = same
        if not cands:
            raise _Reject
        u = self.rng.random()
        if u < 0.4:
            near = [i for i in cands if i >= len(self.nodes) - 4]
            if near:
                return self.choice(near)
        elif u < 0.7:
            unused = [i for i in cands if not self.used[i]]
            if unused:
                return self.choice(unused)
        return self.choice(cands)

    def astype(self, x, dtype):
        src = self.dtype(x)
        b = self.bound(x)
        disc = ""
        if src == F32 and dtype == I32:
            disc = "trunc"
        elif src == F32 and dtype == BOOL:
            disc = "nonzero"
        if dtype == F32 and b > FMAX:
            raise _Reject
        return self.add("astype", [x], "{0}.astype(%s)" % _DT_NAME[dtype],
                        1.0 if dtype == BOOL else b, disc)

    # -- node kinds -------------------------------------------------------------------
    def gen_unary(self):
        x = self.pick(lambda i: self.dtype(i) != BOOL or self.chance(0.3))
        d, b = self.dtype(x), self.bound(x)
        if d == BOOL:
            return self.add("logical_not", [x], "xp.logical_not({0})", 1)
        if d == I32:
            op = self.choice(self.UNARY_I)
        else:
            op = self.choice(self.UNARY_F)
        if op == "neg":
            return self.add(op, [x], "xp.negative({0})", b)
        if op == "abs":
            return self.add(op, [x], "xp.abs({0})", b)
        if op == "square":
            return self.add(op, [x], "xp.square({0})", b * b)
        if op == "exp":
            return self.add(op, [x], "xp.exp(xp.clip({0}, F(-3.0), F(3.0)))", math.exp(3))
        if op == "log":
            return self.add(op, [x], "xp.log(xp.abs({0}) + F(1.0))", math.log1p(b))
        if op == "sqrt":
            return self.add(op, [x], "xp.sqrt(xp.abs({0}))", math.sqrt(b))
        if op == "floor":
            return self.add(op, [x], "xp.floor({0})", b + 1, "floor")
        return self.add(op, [x], "xp.%s({0})" % op, 1)

    def gen_clip(self):
        x = self.pick(lambda i: self.dtype(i) != BOOL)
        if self.dtype(x) == F32:
            lo = round(float(self.rng.uniform(-3, 0)), 2)
            hi = round(float(self.rng.uniform(0, 3)), 2)
            return self.add("clip", [x], f"xp.clip({{0}}, F({lo!r}), F({hi!r}))",
                            max(-lo, hi))
        lo, hi = -self.r(5), self.r(5)
        return self.add("clip", [x], f"xp.clip({{0}}, I({lo}), I({hi}))", max(-lo, hi))

    def gen_binary(self):
        x = self.pick()
        d = self.dtype(x)
        y = self.partner(x, d)
        if self.chance(0.5):
            x, y = y, x
        bx, by = self.bound(x), self.bound(y)
        if d == BOOL:
            op = self.choice(["add", "mul", "maximum", "minimum"])
        elif d == I32:
            op = self.choice(["add", "sub", "mul", "maximum", "minimum"])
        else:
            op = self.choice(["add", "sub", "mul", "div", "maximum", "minimum"])
        if op == "add":
            return self.add(op, [x, y], "{0} + {1}", bx + by)
        if op == "sub":
            return self.add(op, [x, y], "{0} - {1}", bx + by)
        if op == "mul":
            return self.add(op, [x, y], "{0} * {1}", bx * by)
        if op == "div":
            c = self.choice([0.5, 1.0, 2.0])
            return self.add(op, [x, y], "{0} / (xp.abs({1}) + F(%r))" % c, bx / c)
        return self.add(op, [x, y], "xp.%s({0}, {1})" % op, max(bx, by))

    def _cmp(self, x):
        """Comparison operands: x and a partner of x's dtype."""
        y = self.partner(x, self.dtype(x))
        if self.dtype(x) == F32:
            op = self.choice(["<", "<=", ">", ">="])
        else:
            op = self.choice(["<", "<=", ">", ">=", "==", "!="])
        return y, op

    def gen_compare(self):
        x = self.pick(lambda i: self.dtype(i) != BOOL)
        y, op = self._cmp(x)
        return self.add("compare", [x, y], "{0} %s {1}" % op, 1,
                        "cmp" if self.dtype(x) == F32 else "")

    def gen_where(self):
        c = self.pick()
        d = self.dtype(c)
        e = self.partner(c, d)
        s = _bshape(self.shape(c), self.shape(e))
        if self.chance(0.3):
            cond = self.partner(s, BOOL, convert=False)
            return self.add("where", [cond, c, e], "xp.where({0}, {1}, {2})",
                            max(self.bound(c), self.bound(e)))
        a = self.partner(s)
        if self.dtype(a) == BOOL:
            a = self.astype(a, I32 if self.chance(0.5) else F32)
        s = _bshape(s, self.shape(a))
        b = self.partner(s, self.dtype(a))
        op = self.choice(["<", "<=", ">", ">="] if self.dtype(a) == F32 else
                         ["<", "<=", ">", ">=", "==", "!="])
        return self.add("where", [a, b, c, e], "xp.where({0} %s {1}, {2}, {3})" % op,
                        max(self.bound(c), self.bound(e)),
                        "cmp" if self.dtype(a) == F32 else "")

    def gen_broadcast_to(self):
        x = self.pick()
        s = list(self.shape(x))
        if s and self.chance(0.6):
            for i, dim in enumerate(s):
                if dim == 1 and self.chance(0.6):
                    s[i] = 1 + self.r(9)
        while len(s) < self.max_rank and (self.chance(0.5) or tuple(s) == self.shape(x)):
            s.insert(0, 1 + self.r(6))
        return self.add("broadcast_to", [x], f"xp.broadcast_to({{0}}, {_lit(s)})",
                        self.bound(x))

    def gen_expand_dims(self):
        x = self.pick(lambda i: len(self.shape(i)) < self.max_rank)
        r = len(self.shape(x))
        ax = self.r(2 * r + 2) - (r + 1)
        return self.add("expand_dims", [x], f"xp.expand_dims({{0}}, {ax})", self.bound(x))

    def _axes(self, r):
        """Random reduction axes: None, an int, or a tuple (possibly negative, possibly ())."""
        if r == 0 or self.chance(0.15):
            return None, tuple(range(r))
        if self.chance(0.4):
            a = self.r(r)
            return (a - r if self.chance(0.3) else a), (a,)
        k = self.r(r + 1)
        if k == 0 and self.chance(0.7):
            k = 1
        axes = sorted(self.rng.choice(r, size=k, replace=False).tolist())
        shown = [a - r if self.chance(0.2) else a for a in axes]
        self.rng.shuffle(shown)
        return tuple(shown), tuple(axes)

    def gen_reduce(self):
        x = self.pick()
        d, s = self.dtype(x), self.shape(x)
        axes_arg, axes = self._axes(len(s))
        count = _size([s[a] for a in axes])
        kd = self.chance(0.5)
        op = self.choice(["sum", "max", "min", "mean"] if d == F32 else ["sum", "max", "min"])
        b = self.bound(x)
        if op == "sum" and d == F32 and b * count > FMAX:
            op = "mean"
        if op == "sum":
            out = I32 if d == BOOL else d
            return self.add(op, [x], f"xp.sum({{0}}, axis={axes_arg!r}, keepdims={kd}, "
                            f"dtype={_DT_NAME[out]})", b * count)
        return self.add(op, [x], f"xp.{op}({{0}}, axis={axes_arg!r}, keepdims={kd})", b)

    def gen_concatenate(self):
        x = self.pick(lambda i: len(self.shape(i)) >= 1)
        s, d = self.shape(x), self.dtype(x)
        r = len(s)
        ax = self.r(r)
        parts = [x]
        for _ in range(1 + (self.r(3) == 0)):
            cands = [i for i in range(len(self.nodes))
                     if self.dtype(i) == d and len(self.shape(i)) == r
                     and all(self.shape(i)[k] == s[k] for k in range(r) if k != ax)]
            parts.append(self.choice(cands))
        self.rng.shuffle(parts)
        shown = ax - r if self.chance(0.3) else ax
        names = ", ".join("{%d}" % k for k in range(len(parts)))
        return self.add("concatenate", parts, f"xp.concatenate([{names}], axis={shown})",
                        max(self.bound(p) for p in parts))

    def gen_stack(self):
        x = self.pick(lambda i: len(self.shape(i)) < self.max_rank)
        s, d = self.shape(x), self.dtype(x)
        cands = [i for i in range(len(self.nodes)) if self.dtype(i) == d and self.shape(i) == s]
        parts = [x] + [self.choice(cands) for _ in range(1 + (self.r(3) == 0))]
        self.rng.shuffle(parts)
        r = len(s) + 1
        ax = self.r(2 * r) - r
        names = ", ".join("{%d}" % k for k in range(len(parts)))
        return self.add("stack", parts, f"xp.stack([{names}], axis={ax})",
                        max(self.bound(p) for p in parts))

    def _slice(self, n):
        for _ in range(20):
            step = self.choice([1, 1, 1, 2, 3, -1, -1, -2, None])
            start = self.choice([None, None] + list(range(-n - 1, n + 2)))
            stop = self.choice([None, None] + list(range(-n - 1, n + 2)))
            if len(range(*slice(start, stop, step).indices(n))) > 0:
                return slice(start, stop, step)
        return slice(None, None, self.choice([None, -1]))

    @staticmethod
    def _slice_text(sl):
        def f(v):
            return "" if v is None else str(v)
        text = f"{f(sl.start)}:{f(sl.stop)}"
        if sl.step is not None:
            text += f":{sl.step}"
        return text

    def gen_slice(self):
        x = self.pick(lambda i: len(self.shape(i)) >= 1)
        s = self.shape(x)
        parts = [self._slice(n) for n in s]
        # Trailing full slices may be left out.
        while len(parts) > 1 and parts[-1] == slice(None) and self.chance(0.5):
            parts.pop()
        text = ", ".join(self._slice_text(p) for p in parts)
        if len(parts) == 1:
            text += ","
        return self.add("slice", [x], f"{{0}}[{text}]", self.bound(x))

    def gen_take(self):
        """x indexed along an axis by the values of an integer node (a gather under jit),
        clamped into range as NumPy's mode='clip' does."""
        x = self.pick(lambda i: len(self.shape(i)) >= 1)
        ints = [i for i in range(len(self.nodes)) if self.dtype(i) == I32 and i != x]
        if not ints:
            raise _Reject
        idx = self.choice(ints)
        axis = self.r(len(self.shape(x)))
        return self.add("take", [x, idx],
                        f"xp.take({{0}}, xp.ravel({{1}}), axis={axis}, mode='clip')", self.bound(x))

    def gen_scatter(self):
        """x.at[idx].add(x[0]) with idx an integer node clamped into range (a scatter under
        fusionjit, np.add.at for NumPy)."""
        x = self.pick(lambda i: len(self.shape(i)) >= 1 and self.dtype(i) != BOOL)
        ints = [i for i in range(len(self.nodes)) if self.dtype(i) == I32 and i != x]
        if not ints:
            raise _Reject
        idx = self.choice(ints)
        n, m = self.shape(x)[0], _size(self.shape(idx))
        return self.add("scatter", [x, idx],
                        f"ADD_AT({{0}}, xp.clip(xp.ravel({{1}}), 0, {n - 1}), {{0}}[0])",
                        self.bound(x) * (1 + m))

    def gen_along(self):
        """A running sum (a scan along the axis under fusionjit) or a sort (a sorting network)
        along one axis."""
        x = self.pick(lambda i: len(self.shape(i)) >= 1)
        d, s = self.dtype(x), self.shape(x)
        axis = self.r(len(s))
        if self.chance(0.5):
            out = I32 if d == BOOL else d
            return self.add("cumsum", [x], f"xp.cumsum({{0}}, axis={axis}, dtype={_DT_NAME[out]})",
                            self.bound(x) * s[axis])
        return self.add("sort", [x], f"xp.sort({{0}}, axis={axis})", self.bound(x))

    def gen_reshape(self):
        x = self.pick()
        n = _size(self.shape(x))
        factors = []
        m, p = n, 2
        while m > 1:
            while m % p == 0:
                factors.append(p)
                m //= p
            p += 1
        rank = self.r(self.max_rank) + 1 if n > 1 else self.r(3)
        rank = max(rank, 0 if n == 1 else 1)
        dims = [1] * rank
        for f in factors:
            dims[self.r(rank)] *= f
        if dims and self.chance(0.3):
            dims[self.r(rank)] = -1
        return self.add("reshape", [x], f"xp.reshape({{0}}, {_lit(dims)})", self.bound(x))

    def gen_transpose(self):
        x = self.pick(lambda i: len(self.shape(i)) >= 2 or self.chance(0.1))
        r = len(self.shape(x))
        if self.chance(0.15):
            return self.add("transpose", [x], "xp.transpose({0})", self.bound(x))
        perm = self.rng.permutation(r).tolist()
        return self.add("transpose", [x], f"xp.transpose({{0}}, {_lit(perm)})", self.bound(x))

    def gen_astype(self):
        x = self.pick()
        d = self.dtype(x)
        return self.astype(x, self.choice([t for t in (F32, I32, BOOL) if t != d]))

    # -- whole programs ---------------------------------------------------------------
    def input_data(self, shape, dtype):
        if dtype == F32:
            return self.rng.uniform(-2, 2, size=shape).astype(np.float32)
        if dtype == I32:
            return self.rng.integers(-4, 5, size=shape).astype(np.int32)
        return self.rng.random(size=shape) < 0.5

    def make_inputs(self):
        rank = self.r(4)
        base = [1 + self.r(9) for _ in range(rank)]
        n_in = 1 + self.r(4)
        for _ in range(n_in):
            s = list(base)
            if s and self.chance(0.3):
                s = s[self.r(len(s) + 1):]
            s = [1 if self.chance(0.2) else dim for dim in s]
            u = self.rng.random()
            dtype = F32 if u < 0.72 else I32 if u < 0.9 else BOOL
            self.data.append(self.input_data(tuple(s), dtype))
            b = 2.0 if dtype == F32 else 4.0 if dtype == I32 else 1.0
            node = Node("input", [], "", tuple(s), dtype, b)
            self.nodes.append(node)
            self.vals.append(self.data[-1])
            self.used.append(False)

    def resample(self, data) -> list:
        """New values for the inputs (of an ill-conditioned program)."""
        return [self.input_data(a.shape, a.dtype) for a in data]

    def n_ops(self) -> int:
        return 8 + self.r(23)

    def finish(self, outputs) -> Program:
        prog = Program(self.seed, self.nodes, outputs, self.data)
        _condition(prog, self)
        return prog

    def build(self) -> Program:
        self.make_inputs()
        n_in = len(self.nodes)
        target = self.n_ops()
        kinds = list(self.KINDS)
        weights = np.array([self.KINDS[k] for k in kinds], float)
        weights /= weights.sum()
        tries = 0
        while len(self.nodes) - n_in < target and tries < 2000:
            tries += 1
            kind = kinds[int(self.rng.choice(len(kinds), p=weights))]
            n_before, data_before = len(self.nodes), len(self.data)
            try:
                getattr(self, "gen_" + kind)()
            except _Reject:
                # Keep what a failed kind added (astype nodes) only if it is used later.
                del self.nodes[n_before:]
                del self.vals[n_before:]
                del self.data[data_before:]
                self.used = self._users()
        n = len(self.nodes)
        users = [0] * n
        for node in self.nodes:
            for a in node.args:
                users[a] += 1
        outputs = [n - 1]
        k = 1 + self.r(3)
        sinks = [i for i in range(n_in, n - 1) if users[i] == 0]

        def ancestors(i):
            seen, todo = set(), [i]
            while todo:
                j = todo.pop()
                if j not in seen:
                    seen.add(j)
                    todo.extend(self.nodes[j].args)
            return seen

        live = ancestors(n - 1)
        while len(outputs) < k:
            if sinks and self.chance(0.7):
                # The sink that keeps the most nodes alive.
                gain = [len(ancestors(i) - live) for i in sinks]
                o = sinks.pop(int(np.argmax(gain)))
                live |= ancestors(o)
            elif self.chance(0.03):
                o = self.r(n)          # any node, even an input or one already returned
            else:
                o = n_in + self.r(n - n_in)
                if o in outputs:
                    continue
            outputs.append(o)
        self.rng.shuffle(outputs)
        return self.finish(outputs)


def _margins(prog: Program, vals) -> float:
    """The smallest relative distance of a floor / float comparison / float->int or ->bool
    conversion from its jump (float64 values); inf when there is none."""
    best = math.inf
    for n in prog.nodes:
        if not n.disc:
            continue
        if n.disc == "cmp":
            a, b = np.broadcast_arrays(np.asarray(vals[n.args[0]], np.float64),
                                       np.asarray(vals[n.args[1]], np.float64))
            d = np.abs(a - b)
            scale = np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)))
        else:
            x = np.asarray(vals[n.args[0]], np.float64)
            d = np.abs(x) if n.disc == "nonzero" else np.abs(x - np.round(x))
            scale = np.maximum(1.0, np.abs(x))
        rel = d / scale
        rel = rel[rel > 0]          # exact hits (x == 3.0, a == b) are computed exactly
        if rel.size:
            best = min(best, float(rel.min()))
    return best


def conditioning(prog: Program):
    """(fragile, NumPy float32 results): fragile when float32 and float64 NumPy disagree or
    a jump is within rounding distance."""
    out32 = prog.numpy(np.float32)
    vals64 = []
    out64 = prog.numpy(np.float64, record=vals64)
    for a, b in zip(out32, out64):
        if a.dtype == F32:
            if not np.allclose(a, b, rtol=COND_TOL, atol=COND_TOL) or not np.all(np.isfinite(a)):
                return True, out32
        elif not np.array_equal(a, b):
            return True, out32
    return _margins(prog, vals64) < MARGIN, out32


def _condition(prog: Program, gen: Generator, tries: int = 5):
    for attempt in range(tries):
        fragile = prog.condition()
        if not fragile:
            prog.fragile = False
            return
        if attempt + 1 < tries:
            prog.data = gen.resample(prog.data)
    prog.fragile = True


def generate(seed, tier: str = "small") -> Program:
    """The program of ``seed`` (an int, or a tuple of ints) in ``tier`` ("small", "large":
    tests/fuzz_large.py, or "loops": tests/fuzz_loops.py)."""
    if tier == "large":
        import fuzz_large
        return fuzz_large.generate(seed)
    if tier == "loops":
        import fuzz_loops
        return fuzz_loops.generate(seed)
    if tier != "small":
        raise ValueError(f"unknown tier {tier!r}; tiers: {', '.join(TIERS)}")
    rng = np.random.default_rng(seed if isinstance(seed, int) else list(seed))
    return Generator(rng, seed).build()


# --- checking ----------------------------------------------------------------------------

@dataclass
class Failure:
    kind: str        # "mismatch", "exception", "nondeterministic", "donation", "kernels",
    #                  "unexplained"
    profile: str
    detail: str
    prog: Program = None
    explains: dict = field(default_factory=dict)

    @property
    def key(self):
        return (self.kind, self.profile,
                self.detail.split(":")[0] if self.kind == "exception" else "")

    def report(self) -> str:
        p = self.prog
        lines = [f"FUZZ FAILURE seed={p.seed!r}: {self.kind} in profile '{self.profile}'",
                 self.detail, "",
                 f"program (seed {p.seed!r}{'' if p.tier == 'small' else ', ' + p.tier + ' tier'}"
                 f"; inputs {[(p.dt_short(a.dtype), a.shape) for a in p.data]}; outputs "
                 f"{p.outputs}{'; fragile' if p.fragile else ''}):", "",
                 p.source(), ""]
        for prof, text in self.explains.items():
            lines += [f"fusionjit.explain(program, fusion={prof!r})(*args):", text, ""]
        tier = "" if p.tier == "small" else f"--tier {p.tier} "
        lines.append(f"reproduce: cd tests && python3 fuzz_programs.py {tier}--start {p.seed!r} "
                     f"--count 1" if isinstance(p.seed, int) else "")
        return "\n".join(lines)


def exact_mismatch(got, want, what):
    """None if the int/bool arrays ``got`` and ``want`` are equal, else where they differ."""
    if np.array_equal(got, want):
        return None
    bad = np.argwhere(got != want)
    k = tuple(bad[0])
    return (f"{what}: {len(bad)} of {got.size} elements differ (exact compare); "
            f"first at {k}: got {got[k]!r}, expected {want[k]!r}")


def _compare(got, want, what):
    """None, or a description of how ``got`` differs from ``want``."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype:
        return f"{what}: dtype {got.dtype}, expected {want.dtype}"
    if got.shape != want.shape:
        return f"{what}: shape {got.shape}, expected {want.shape}"
    try:
        if want.dtype.kind in "biu":
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    except AssertionError as e:
        with np.printoptions(threshold=60, precision=6):
            return (f"{what}: values differ\n{str(e).strip()}\n  got:      {got!r}\n"
                    f"  expected: {want!r}")
    return None


def _explain(fn, profile, args, prog=None) -> str:
    import contextlib

    import fusionjit
    try:
        with prog.config() if prog is not None else contextlib.nullcontext():
            return str(fusionjit.explain(fn, fusion=profile)(*args))
    except Exception as e:  # noqa: BLE001
        return f"(explain failed: {type(e).__name__}: {e})"


def run_profiles(prog: Program, profiles=PROFILES):
    """{profile: (outputs as NumPy arrays, kernel count, the plan-selection decision or
    None, the kernel boundaries explain has no reason for, the outputs of a second call)
    or the exception}."""
    import fusionjit
    fn = prog.function()
    res = {}
    checks = fusionjit.config.fusionjit_checks
    with prog.config():
        args = prog.jit_args()
        for p in profiles:
            level = fusionjit.config.fusionjit_opt_level
            try:
                # The IR verifier after every pass that changes the module: a pass that
                # leaves a wrong shape behind fails here, not later as wrong values.
                fusionjit.config.update("fusionjit_checks", FUZZ_CHECKS)
                if p == "none" and NONE_OPT_LEVEL not in ("", None):
                    fusionjit.config.update("fusionjit_opt_level", int(NONE_OPT_LEVEL))
                jf = fusionjit.jit(fn, fusion=p)
                out = jf(*args)
                out = tuple(np.asarray(o) for o in out)
                again = tuple(np.asarray(o) for o in jf(*args))     # the cached executable
                ex = fusionjit.explain(jf)(*args)  # the compilation above, from jf's cache
                plan = next((d for d in ex.decisions if d["rule"] == "plan-selection"), None)
                unexplained = [str(b) for b in ex.boundaries if b.rule == "no-decision"]
                donated = None
                if p == "fusionjit" and args:
                    # Every argument donated (fresh copies, twice: traced, then cached):
                    # outputs that take their buffers over give the same results.
                    jd = fusionjit.jit(fn, fusion=p, donate_argnums=tuple(range(len(args))))
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # (unusable donations warn)
                        for _ in range(2):
                            donated = tuple(np.asarray(o) for o in jd(*prog.jit_args()))
                res[p] = (out, ex.num_kernels, plan, unexplained, again, donated)
            except Exception as e:  # noqa: BLE001
                res[p] = e
            finally:
                if fusionjit.config.fusionjit_opt_level != level:
                    fusionjit.config.update("fusionjit_opt_level", level)
                fusionjit.config.update("fusionjit_checks", checks)
    return fn, args, res


def _estimated_faster_than_xla(plan) -> bool:
    """More kernels than XLA's rules are by design when fusionjit kept its own plan because
    the cost model estimates it faster than every plan of XLA's rules (e.g. XLA's plan
    emits an op 24 times in one kernel): its figures are the XLA rules' best estimate and
    the kept plan's."""
    return (plan is not None and plan["reason"].startswith("kept the cost model's plan")
            and plan["cost_fused_us"] < plan["cost_unfused_us"] * (1 - 1e-3))


def check_program(prog: Program, profiles=PROFILES, explain: bool = True):
    """None if every profile agrees with NumPy and with profile none and the kernel counts
    are ordered (fusionjit <= xla <= none); else a Failure."""
    fn, args, res = run_profiles(prog, profiles)
    fail = None
    for p in profiles:
        if isinstance(res[p], Exception):
            e = res[p]
            tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])
            fail = Failure("exception", p, f"{type(e).__name__}: {e}\n{tb}")
            break
    if fail is None:
        for p in profiles:
            for i, (a, b) in enumerate(zip(res[p][0], res[p][4])):
                if a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
                    fail = Failure("nondeterministic", p, f"result {i} (v{prog.outputs[i]}) "
                                   f"differs between two calls with the same arguments")
                    break
            for i, (a, b) in enumerate(zip(res[p][0], res[p][5] or ())):
                if a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
                    fail = Failure("donation", p, f"result {i} (v{prog.outputs[i]}) differs "
                                   f"with the arguments donated")
                    break
            if fail:
                break
    if fail is None:
        want = None if prog.fragile else prog.reference()
        ref = "none" if "none" in profiles else None
        for p in profiles:
            out = res[p][0]
            if len(out) != len(prog.outputs):
                fail = Failure("mismatch", p, f"{len(out)} results, expected "
                               f"{len(prog.outputs)}")
                break
            for i, o in enumerate(out):
                msg = None
                if want is not None:
                    msg = prog.compare(i, o, want[i], f"result {i} (v{prog.outputs[i]}) vs NumPy")
                if msg is None and ref is not None and p != ref:
                    msg = prog.compare(i, o, res[ref][0][i],
                                       f"result {i} (v{prog.outputs[i]}) vs profile 'none'",
                                       "none")
                if msg is not None:
                    fail = Failure("mismatch", p, msg)
                    break
            if fail:
                break
    if fail is None:
        for p in profiles:
            if res[p][3]:
                fail = Failure("unexplained", p,
                               "explain has no reason for: " + "; ".join(res[p][3]))
                break
    if fail is None:
        k = {p: res[p][1] for p in profiles}
        if ("fusionjit" in k and "xla" in k and k["fusionjit"] > k["xla"]
                and not _estimated_faster_than_xla(res["fusionjit"][2])):
            fail = Failure("kernels", "fusionjit", f"count_kernels: fusionjit {k['fusionjit']} "
                           f"> xla {k['xla']} (all: {k})")
            fail.explains["xla"] = ""
        elif "xla" in k and "none" in k and k["xla"] > k["none"]:
            fail = Failure("kernels", "xla", f"count_kernels: xla {k['xla']} > none "
                           f"{k['none']} (all: {k})")
            fail.explains["none"] = ""
    if fail is None:
        return None
    fail.prog = prog
    if explain:
        for p in [fail.profile] + list(fail.explains):
            fail.explains[p] = _explain(fn, p, args, prog)
    return fail


# --- shrinking ---------------------------------------------------------------------------

def _dce(prog: Program) -> Program:
    """Drops nodes the outputs don't use (inputs too) and renumbers."""
    live = set(prog.outputs)
    for i in range(len(prog.nodes) - 1, -1, -1):
        if i in live:
            live.update(prog.nodes[i].args)
    keep = sorted(live)
    new_id = {old: new for new, old in enumerate(keep)}
    in_ids = prog.input_ids
    data = [d for i, d in zip(in_ids, prog.data) if i in live]
    nodes = []
    for old in keep:
        n = prog.nodes[old]
        nodes.append(Node(n.op, [new_id[a] for a in n.args], n.expr, n.shape, n.dtype, n.bound,
                          n.disc))
    return prog.derive(nodes=nodes, outputs=[new_id[o] for o in prog.outputs], data=data)


def _replace(prog: Program, old: int, new: int) -> Program:
    """Uses of node ``old`` read node ``new`` (an earlier node) instead."""
    nodes = [Node(n.op, [new if a == old else a for a in n.args], n.expr, n.shape, n.dtype,
                  n.bound, n.disc) for n in prog.nodes]
    outputs = [new if o == old else o for o in prog.outputs]
    return _dce(prog.derive(nodes=nodes, outputs=outputs, data=list(prog.data), note=""))


def _cut(prog: Program, i: int) -> Program:
    """Node ``i`` becomes an input holding its NumPy value."""
    vals = []
    prog.numpy(np.float32, record=vals)
    n = prog.nodes[i]
    nodes = list(prog.nodes)
    nodes[i] = Node("input", [], "", n.shape, n.dtype, n.bound)
    # Inputs are interpreted in node order: rebuild the data list in that order.
    old_inputs = dict(zip(prog.input_ids, prog.data))
    data = []
    for k, node in enumerate(nodes):
        if node.op == "input":
            data.append(old_inputs[k] if k in old_inputs else
                        np.asarray(vals[i], dtype=n.dtype).copy())
    return _dce(prog.derive(nodes=nodes, outputs=list(prog.outputs), data=data, note=""))


def _refresh(prog: Program) -> Program:
    prog._codes = None
    prog.fragile = prog.condition()
    return prog


def shrink(prog: Program, fails, log=None) -> Program:
    """The smallest program found (by ``Program.size``) for which ``fails(program)`` holds
    (``prog`` fails): tries the program's ``smaller()`` candidates (the straight-line
    tiers: outputs dropped, nodes bypassed, the graph cut) until none fails, then simpler
    input values."""
    def ok(p):
        _refresh(p)
        try:
            return bool(fails(p))
        except Exception:  # noqa: BLE001 - a candidate the checker cannot handle
            return False

    best = prog.pruned()
    if not ok(best):
        best = prog
    changed = True
    while changed:
        changed = False
        for cand in best.smaller():
            if cand.size() < best.size() and ok(cand):
                best, changed = cand, True
                if log:
                    log(f"  shrunk to size {best.size()}, {len(best.data)} inputs")
                break
    # Simpler input values (once, simplest first).
    for k in range(len(best.data)):
        for simple in best.simpler(k):
            if np.array_equal(simple, best.data[k]):
                break
            data = list(best.data)
            data[k] = simple
            cand = best.derive(data=data)
            if ok(cand):
                best = cand
                break
    best.note = "shrunk"
    return _refresh(best)


def shrink_failure(prog: Program, failure: Failure, log=None) -> Failure:
    """Shrinks an in-process failure (mismatch, exception, kernel counts), checking only the
    profiles involved; returns the minimal program's Failure (with explain output)."""
    profiles = [failure.profile]
    if failure.kind == "kernels":
        profiles.append("xla" if failure.profile == "fusionjit" else "none")
    elif failure.kind == "mismatch" and "profile 'none'" in failure.detail:
        profiles.insert(0, "none")
    profiles = tuple(p for p in PROFILES if p in profiles)
    key = failure.key

    def fails(p):
        f = check_program(p, profiles, explain=False)
        return f is not None and f.key == key

    best = shrink(prog, fails, log)
    f = check_program(best, PROFILES)
    if f is None or f.key != key:     # the full check disagrees: report the profiles'
        f = check_program(best, profiles)
    return f


# --- checks in a child process (crashes, hangs) ---------------------------------------

def save_program(prog: Program, path: str):
    import json
    meta = {"seed": prog.seed, "outputs": prog.outputs, "fragile": bool(prog.fragile),
            "tier": prog.tier, "note": prog.note, "extra": prog.meta(),
            "nodes": [[n.op, n.args, n.expr, list(n.shape), n.dtype.name, n.bound, n.disc]
                      for n in prog.nodes]}
    np.savez(path, meta=np.array(json.dumps(meta)),
             **{f"data{k}": a for k, a in enumerate(prog.data)})


def load_program(path: str) -> Program:
    import json
    with np.load(path) as z:
        meta = json.loads(str(z["meta"]))
        data = [z[f"data{k}"] for k in range(len(z.files) - 1)]
    nodes = [Node(op, args, expr, tuple(shape), np.dtype(d), bound, disc)
             for op, args, expr, shape, d, bound, disc in meta["nodes"]]
    seed = meta["seed"]
    cls = Program
    if meta.get("tier", "small") == "large":
        import fuzz_large
        cls = fuzz_large.LargeProgram
    elif meta.get("tier", "small") == "loops":
        import fuzz_loops
        cls = fuzz_loops.LoopProgram
    return cls(tuple(seed) if isinstance(seed, list) else seed, nodes, meta["outputs"],
               data, meta["fragile"], meta.get("note", ""), **meta.get("extra", {}))


def check_in_child(prog: Program, profiles, timeout: float = 120) -> str:
    """Checks ``prog`` in a fresh process: "ok", "fail <kind> <profile>", "crash <status>"
    (a signal or an exit status) or "hang"."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "program.npz")
        save_program(prog, path)
        cmd = [sys.executable, os.path.abspath(__file__), "--check-file", path,
               "--profiles", ",".join(profiles)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "hang"
    for line in r.stdout.splitlines():
        if line.startswith("@@result "):
            return line[len("@@result "):]
    return f"crash {r.returncode}"


def crash_profile(prog: Program, profiles=PROFILES, timeout: float = 120):
    """(profile, outcome) of the first profile that crashes or hangs on its own, or None."""
    for p in profiles:
        out = check_in_child(prog, (p,), timeout)
        if out.startswith(("crash", "hang")):
            return p, out
    return None


def shrink_crash(prog: Program, profile: str, outcome: str, timeout: float = 120, log=None):
    """Shrinks a program that crashes (or hangs) under ``profile``; returns the program."""
    want = outcome.split()[0]
    return shrink(prog, lambda p: check_in_child(p, (profile,), timeout).startswith(want), log)


def _simpler(a):
    if a.dtype == F32:
        yield np.round(a, 1).astype(F32)
        yield np.ones_like(a)
        yield np.arange(a.size, dtype=F32).reshape(a.shape) / max(a.size, 1)
    elif a.dtype == I32:
        yield np.ones_like(a)
        yield np.arange(a.size, dtype=I32).reshape(a.shape) % 5 - 2
    else:
        yield np.ones_like(a)
        yield np.zeros_like(a)


# --- command line ------------------------------------------------------------------------

def _seed_arg(text):
    return int(text)


def _worker(seeds, profiles, keep_going, tier="small"):
    """--worker: checks seeds, one JSON line each on stdout (the parent survives crashes)."""
    import json
    for seed in seeds:
        prog = generate(seed, tier)
        print(f"@@start {seed}", flush=True)
        f = check_program(prog, profiles)
        rec = {"seed": seed, "fragile": bool(prog.fragile), "fail": None}
        if f is not None:
            report = f.report()
            if os.environ.get("FUSIONJIT_NUM_THREADS"):
                report += f"\n(FUSIONJIT_NUM_THREADS={os.environ['FUSIONJIT_NUM_THREADS']})"
            rec["fail"] = {"key": list(f.key), "report": report}
        print("@@" + json.dumps(rec), flush=True)
        if f is not None and not keep_going:
            break


def _cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system, all threads) process ``pid`` has used, or None where
    /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


# A worker stuck on one program: past --timeout seconds of its own CPU time (a loop, a
# compile that never ends), or past this many times --timeout on the clock (a deadlock uses
# no CPU). CPU time, not the clock, so that fuzzing at low priority beside builds and CI
# does not report starved programs as hangs.
HANG_WALL_FACTOR = 10


def _hung(proc, started: float, cpu_at_start: float | None, timeout: float) -> bool:
    wall = time.time() - started
    cpu = _cpu_seconds(proc.pid)
    if cpu is None or cpu_at_start is None:
        return wall > timeout
    return cpu - cpu_at_start > timeout or wall > HANG_WALL_FACTOR * timeout


def _crash_report(seed, profiles, what, tier="small", threads=None) -> str:
    prog = generate(seed, tier)
    opts = "" if tier == "small" else f"--tier {tier} "
    if threads:
        opts += f"--threads {threads} "
    return "\n".join([
        f"FUZZ FAILURE seed={seed!r}: {what} (the process died; run the reproducer below in a "
        f"fresh process, profile by profile, to see which one)", "",
        f"program (seed {seed}; inputs {[(prog.dt_short(a.dtype), a.shape) for a in prog.data]}"
        f"; outputs {prog.outputs}):", "", prog.source(), "",
        f"reproduce: cd tests && python3 fuzz_programs.py {opts}--start {seed} --count 1 "
        f"--profiles {','.join(profiles)}"])


def shrink_seed(seed, profiles=PROFILES, timeout: float = 120, log=print, tier="small") -> str:
    """The report of the smallest program found that fails like ``seed``'s."""
    prog = generate(seed, tier)
    crash = crash_profile(prog, profiles, timeout)
    if crash is not None:
        p, outcome = crash
        small = shrink_crash(prog, p, outcome, timeout, log)
        _keep_data(small, seed)
        return "\n".join([
            f"FUZZ FAILURE seed={seed!r} (shrunk): {outcome} under fusion={p!r} "
            f"(in a fresh process; the other profiles: "
            f"{ {q: check_in_child(small, (q,), timeout) for q in PROFILES if q != p} })", "",
            small.source(), ""])
    f = check_program(prog, profiles)
    if f is None:
        return f"seed {seed}: no failure"
    f = shrink_failure(prog, f, log)
    _keep_data(f.prog, seed)
    return f.report()


def _keep_data(prog: Program, seed):
    """Inputs too large to print go to an .npz file (in the working directory) that the
    reproducer loads."""
    if hasattr(prog, "data_file") and sum(a.size for a in prog.data) > 64:
        path = os.path.abspath(f"fuzz_{prog.tier}_shrunk_{seed}.npz")
        save_program(prog, path)
        prog.data_file = path
        if ".load_program(" not in prog.source():     # every input printable after all
            os.remove(path)
            prog.data_file = ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--start", type=_seed_arg, default=0, help="first seed")
    ap.add_argument("--count", type=int, default=1000, help="number of programs")
    ap.add_argument("--profiles", default=",".join(PROFILES),
                    help="comma-separated fusion profiles (default: all four)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--chunk", type=int, default=None,
                    help="seeds per work item (default: 50, 20 for --tier large or loops)")
    ap.add_argument("--tier", choices=TIERS, default="small",
                    help="small (the default): nodes of at most 2048 elements; large: "
                         "tests/fuzz_large.py (thread pool, tree reductions, row kernels, "
                         "float64, uint32, dot, pad, dynamic slices); loops: "
                         "tests/fuzz_loops.py (scan, fori_loop, while_loop, cond, switch, "
                         "random keys in loop steps)")
    ap.add_argument("--threads", default=None,
                    help="comma-separated FUSIONJIT_NUM_THREADS values for the worker "
                         "processes, one per work item in turn (default: inherited; "
                         "2,3,4 for --tier large)")
    ap.add_argument("--stats", action="store_true",
                    help="compile the programs (in this process, fusion='fusionjit') and "
                         "print what they reach: parallel kernels, tree reductions, row "
                         "kernels, vector widths, dtypes, ops")
    ap.add_argument("--keep-going", action="store_true",
                    help="don't stop at the first failure; report all at the end")
    ap.add_argument("--shrink", action="store_true", help="minimise failing programs")
    ap.add_argument("--show", type=_seed_arg, help="print the program of this seed and exit")
    ap.add_argument("--skip", default="", help="comma-separated seeds to skip (known bugs)")
    ap.add_argument("--timeout", type=float, default=120,
                    help="CPU seconds one program may take before it counts as a hang "
                         "(or ten times as long on the clock)")
    ap.add_argument("--none-opt-level", default=None,
                    help="LLVM opt level for profile none (default: $FJ_FUZZ_NONE_OPT_LEVEL "
                         "or 0; the other profiles use fusionjit's default)")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="stop starting new programs after this many seconds")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--check-file", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.none_opt_level is not None:
        global NONE_OPT_LEVEL
        NONE_OPT_LEVEL = os.environ["FJ_FUZZ_NONE_OPT_LEVEL"] = args.none_opt_level
    profiles = tuple(p for p in args.profiles.split(",") if p)
    for p in profiles:
        if p not in PROFILES:
            ap.error(f"unknown profile {p!r}; profiles: {', '.join(PROFILES)}")

    if args.chunk is None:
        args.chunk = 50 if args.tier == "small" else 20
    if args.threads is None and args.tier == "large" and not args.worker:
        args.threads = "2,3,4"
    threads = [t for t in (args.threads or "").split(",") if t]

    if args.show is not None:
        prog = generate(args.show, args.tier)
        print(f"# seed {args.show}: {sum(n.op != 'input' for n in prog.nodes)} ops"
              f"{', fragile (not compared with NumPy)' if prog.fragile else ''}")
        print(prog.source(with_data=True))
        return 0

    if args.check_file:
        prog = load_program(args.check_file)
        f = check_program(prog, profiles, explain=False)
        print("@@result " + ("ok" if f is None else f"fail {f.kind} {f.profile}"), flush=True)
        return 0

    if args.worker:
        _worker(range(args.start, args.start + args.count), profiles, args.keep_going,
                args.tier)
        return 0

    if args.stats:
        import fuzz_large
        fuzz_large.print_stats(range(args.start, args.start + args.count), args.tier)
        return 0

    skip = {int(s) for s in args.skip.split(",") if s}
    t0 = time.time()
    done = fragile = 0
    found = []          # (seed, key, report)
    seeds = [s for s in range(args.start, args.start + args.count) if s not in skip]
    # Work items: runs of consecutive seeds, each checked by a child process so that a
    # crash (segfault, abort) or a hang is caught and reported like any other failure.
    todo = []
    for s in seeds:
        if todo and todo[-1][-1] == s - 1 and len(todo[-1]) < args.chunk:
            todo[-1].append(s)
        else:
            todo.append([s])
    todo.reverse()
    running = []        # [Popen, seeds, done seeds, current seed, started, buf, threads, cpu then]
    launched = 0

    def report_progress():
        rate = done / max(time.time() - t0, 1e-9)
        print(f"[fuzz] {done}/{len(seeds)} programs ({fragile} fragile), {len(found)} "
              f"failing, {rate:.1f}/s, {time.time() - t0:.0f}s", flush=True)

    def launch(part):
        nonlocal launched
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--start", str(part[0]),
               "--count", str(len(part)), "--profiles", ",".join(profiles),
               "--tier", args.tier]
        if args.keep_going:
            cmd.append("--keep-going")
        env = dict(os.environ)
        n = threads[launched % len(threads)] if threads else None
        launched += 1
        if n:
            env["FUSIONJIT_NUM_THREADS"] = n
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env)
        os.set_blocking(proc.stdout.fileno(), False)
        running.append([proc, part, set(), None, time.time(), "", n, None])

    import json
    import selectors
    import subprocess
    last = time.time()
    stop = False
    try:
        while (todo or running) and not stop:
            if args.time_limit is not None and time.time() - t0 > args.time_limit:
                print(f"[fuzz] time limit of {args.time_limit:.0f} s reached", flush=True)
                break       # the programs still running are dropped (not counted)
            while todo and len(running) < max(1, args.jobs):
                launch(todo.pop())
            sel = selectors.DefaultSelector()
            for r in running:
                sel.register(r[0].stdout, selectors.EVENT_READ, r)
            sel.select(timeout=1.0)
            sel.close()
            for r in list(running):
                proc, part, got, cur, started, buf, _, _ = r
                while True:
                    try:
                        chunk = os.read(proc.stdout.fileno(), 1 << 16)
                    except BlockingIOError:
                        break
                    if not chunk:
                        break
                    buf += chunk.decode()
                lines = buf.split("\n")
                r[5] = lines.pop()
                for line in lines:
                    if line.startswith("@@start "):
                        r[3], r[4], r[7] = int(line.split()[1]), time.time(), _cpu_seconds(proc.pid)
                    elif line.startswith("@@"):
                        rec = json.loads(line[2:])
                        got.add(rec["seed"])
                        r[3] = None
                        done += 1
                        fragile += rec["fragile"]
                        if rec["fail"]:
                            found.append((rec["seed"], tuple(rec["fail"]["key"]),
                                          rec["fail"]["report"]))
                            print(rec["fail"]["report"], flush=True)
                            if not args.keep_going:
                                stop = True
                    elif line.strip():
                        print(line, flush=True)
                hung = r[3] is not None and _hung(proc, r[4], r[7], args.timeout)
                if hung:
                    proc.kill()
                if proc.poll() is None:
                    continue
                if r[5].strip() and not hung:    # a last line without its newline
                    r[5] += "\n"
                    continue
                running.remove(r)
                proc.stdout.close()
                rest = [s for s in part if s not in got]
                if proc.returncode != 0 or hung:
                    bad = r[3] if r[3] is not None else (rest[0] if rest else None)
                    if bad is not None:
                        what = (f"hang (no result after {args.timeout:.0f} s of CPU time or "
                                f"{HANG_WALL_FACTOR * args.timeout:.0f} s)" if hung else
                                f"crash (exit status {proc.returncode})")
                        rep = _crash_report(bad, profiles, what, args.tier, r[6])
                        found.append((bad, ("crash" if not hung else "hang", "", ""), rep))
                        done += 1
                        print(rep, flush=True)
                        if not args.keep_going:
                            stop = True
                        rest = [s for s in rest if s != bad]
                    if rest and not stop:
                        todo.append(rest)
                elif rest and not stop and not (found and not args.keep_going):
                    todo.append(rest)
            if time.time() - last > 10:
                report_progress()
                last = time.time()
    finally:
        for r in running:
            r[0].kill()
            r[0].wait()
    report_progress()
    if found:
        keys = {}
        for seed, key, _ in found:
            keys.setdefault(key, []).append(seed)
        print("[fuzz] failures by kind:")
        for key, seeds_ in keys.items():
            print(f"  {key}: {len(seeds_)} seeds {sorted(seeds_)[:30]}"
                  f"{' ...' if len(seeds_) > 30 else ''}")
        if args.shrink:
            for key, seeds_ in keys.items():
                seed = min(seeds_)
                print(f"[fuzz] shrinking seed {seed} ({key}) ...", flush=True)
                report = shrink_seed(seed, profiles, args.timeout, tier=args.tier)
                print("[fuzz] MINIMAL REPRODUCER")
                print(report, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
