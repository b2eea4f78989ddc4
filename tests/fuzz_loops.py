"""Loops tier of the random-program fuzzer (``fuzz_programs.py --tier loops``).

A seed gives a program of one or two loops over random inputs: lane arrays of shape [N] or
[k, N] (N in 1..70, or 2048..5000 in 15% of programs, past the thread pool's threshold;
k in 2..4; float32, int32, bool), small "uniform" arrays (scalars, [2], [3]), an int32
scalar and, in a third of the programs, a uint32[2] PRNG key. Each loop is one of

- ``L.scan(f, init, xs, length=T, reverse=..., unroll=...)`` (T in 0..40; xs a tuple of
  [T, N], [T, k, N] or [T] inputs, or None),
- ``L.fori_loop(lo, lo + T, f, init, unroll=...)``,
- ``L.while_loop(cond, f, init)`` whose condition is a counter below a bound, sometimes
  and-ed with a data-dependent test (so it always stops),
- ``L.cond(pred, f_0, f_1, init)`` / ``L.switch(index, [f_0, f_1, f_2], init)`` with a
  traced predicate or index,

whose carry is a tuple or a dict mixing 1-3 lane leaves, 0-2 uniform float leaves, a
counter and the key. The second loop may start from the first one's initial tuple, or read
its results; a result may be read by rows afterwards, or be dead. A step's body is
straight-line code from tests/fuzz_programs.py's Generator (elementwise ops, where on a
shared mask, sin and cos of one value, stack of rows sliced back, reductions, reshapes) over
the carry, the x slices and a few closed-over values, plus ``R.split`` / ``R.uniform`` /
``R.bernoulli`` on the key, and in a fifth of the steps a nested loop (a scan, possibly over
the rows of a step value, a fori_loop, or a cond). Each new carry leaf is tamed so nothing
explodes over T steps (tanh, clip, a leaky mix with the old value, sin(old + tanh(new)),
which remembers every step where the others contract, a reset where a mask holds, or the old
value unchanged); most carries have an int32 counter, which shows the trip count exactly; a
step returns zero to three ys of different shapes (lane-shaped, [k, N], small, or
``sum(mask)``/max/min/mean reductions). The generator is tests/fuzz_loops_gen.py.

The program is one Python function over ``xp``, ``L`` and ``R`` (``Program.source()`` prints
it): with fusionjit.numpy, fusionjit.lax and fusionjit.random under jit, with NumPy,
``NumpyLoops`` (scan, fori_loop, while_loop, cond and switch as plain Python loops) and
``NumpyRandom`` (jax.random on NumPy arrays: fusionjit's random streams must be JAX's bit
for bit; without JAX, programs drawing random numbers are fragile, see below), and, to
settle doubts, with jax.numpy, jax.lax and jax.random.

Tolerances. The reference is the NumPy evaluation in float64; ``dev_i``, the largest
difference of the float32 NumPy evaluation from it, measures how the T steps amplify
rounding. A float result passes if ``|got - ref| <= 2e-4 * (1 + |ref|) + 4 * dev_i``
elementwise (profiles are compared with profile none by the same formula); int, uint32 and
bool results are exact. A program is fragile (dtypes and shapes checked, not values; its
inputs redrawn four times first) when a float result is not finite, an int or bool result
differs between float32 and float64, ``dev_i`` exceeds 1e-3 * (1 + max |ref|), or a float
comparison, floor or float->int/bool conversion in any step comes within 1e-4 (relative)
of its jump (``MarginNumpy`` records them; bodies write them as xp.less, xp.astype, ...).

Shrinking (fuzz_programs.shrink, through ``LoopProgram.smaller``): outputs dropped, a loop
bypassed (its carry results read its initial values), carry leaves nothing reads dropped,
loops shortened, not unrolled, not reversed, nodes bypassed, then simpler inputs.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

import fuzz_programs as fp
from fuzz_programs import BOOL, F32, Program, _Reject

RTOL = ATOL = 2e-4
K_DEV = 4.0
ILL = 1e-3          # dev above this fraction of (1 + max |ref|): fragile
MARGIN = 1e-4       # a jump closer than this (relative): fragile
FBOUND = 2.0        # |float carry| after taming
IBOUND = 9          # |int carry| after taming
MAX_DEPTH = 2       # loops nested in loops
_CMP = {"<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal"}


# --- NumPy stand-ins -------------------------------------------------------------------

class NumpyLoops:
    """fusionjit.lax's loops and branches as plain Python (the NumPy programs' ``L``)."""

    @staticmethod
    def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
        if xs is not None:
            length = len(xs[0])
        carry, ys = init, []
        order = range(length - 1, -1, -1) if reverse else range(length)
        for i in order:
            carry, y = f(carry, None if xs is None else tuple(a[i] for a in xs))
            ys.append(y)
        if reverse:
            ys.reverse()
        if length == 0:     # the ys' shapes: one step's (JAX traces the step instead)
            x = None if xs is None else tuple(np.zeros_like(a, shape=a.shape[1:]) for a in xs)
            _, y = f(init, x)
            return carry, None if y is None else tuple(
                np.zeros((0,) + np.shape(v), np.asarray(v).dtype) for v in y)
        if ys[0] is None:
            return carry, None
        return carry, tuple(np.stack([y[j] for y in ys]) for j in range(len(ys[0])))

    @staticmethod
    def fori_loop(lo, hi, f, init, unroll=None):
        for i in range(lo, hi):
            init = f(np.int32(i), init)
        return init

    @staticmethod
    def while_loop(cond, f, init):
        while bool(cond(init)):
            init = f(init)
        return init

    @staticmethod
    def cond(pred, f_true, f_false, *operands):
        return (f_true if bool(pred) else f_false)(*operands)

    @staticmethod
    def switch(index, branches, *operands):
        return branches[int(np.clip(index, 0, len(branches) - 1))](*operands)


class NumpyRandom:
    """jax.random's split, uniform and bernoulli on NumPy arrays (the NumPy programs'
    ``R``): fusionjit.random must give JAX's bits."""

    def __init__(self):
        import jax
        self.jax = jax

    def split(self, key):
        return np.asarray(self.jax.random.split(np.asarray(key, np.uint32)))

    def uniform(self, key, shape):
        return np.asarray(self.jax.random.uniform(np.asarray(key, np.uint32), shape))

    def bernoulli(self, key, p, shape):
        return np.asarray(self.jax.random.bernoulli(np.asarray(key, np.uint32), p, shape))


def numpy_random():
    """A NumpyRandom, or None where JAX is not importable."""
    try:
        return NumpyRandom()
    except ImportError:
        return None


class MarginNumpy:
    """NumPy, recording the smallest relative distance of a float comparison, floor or
    float->int/bool conversion from its jump (``margin``; exact hits do not count)."""

    def __init__(self):
        self.margin = math.inf

    def __getattr__(self, name):
        return getattr(np, name)

    def _note(self, d, scale):
        rel = np.asarray(d / scale, np.float64)
        rel = rel[rel > 0]
        if rel.size:
            self.margin = min(self.margin, float(rel.min()))

    def _cmp(self, a, b, op):
        a64, b64 = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
        if np.asarray(a).dtype.kind == "f" or np.asarray(b).dtype.kind == "f":
            self._note(np.abs(a64 - b64), np.maximum(1.0, np.maximum(abs(a64), abs(b64))))
        return op(a, b)

    def less(self, a, b):
        return self._cmp(a, b, np.less)

    def less_equal(self, a, b):
        return self._cmp(a, b, np.less_equal)

    def greater(self, a, b):
        return self._cmp(a, b, np.greater)

    def greater_equal(self, a, b):
        return self._cmp(a, b, np.greater_equal)

    def floor(self, x):
        x64 = np.asarray(x, np.float64)
        self._note(np.abs(x64 - np.round(x64)), np.maximum(1.0, np.abs(x64)))
        return np.floor(x)

    def astype(self, x, dtype):
        if np.asarray(x).dtype.kind == "f" and np.dtype(dtype).kind in "biu":
            x64 = np.asarray(x, np.float64)
            d = np.abs(x64) if np.dtype(dtype) == BOOL else np.abs(x64 - np.round(x64))
            self._note(d, np.maximum(1.0, np.abs(x64)))
        return np.astype(x, dtype)


# --- programs --------------------------------------------------------------------------

@dataclass
class Loop:
    """One loop or branch statement. Values are the program's nodes, named v<id> in every
    scope; a body binds ``params`` (new "param" nodes) and a loop's results are new "out"
    nodes (``outs``: final carry leaves, then the stacked ys)."""
    kind: str               # "scan", "fori", "while", "cond", "switch"
    name: str               # its functions: f3 (the step), f3_cond, f3_0, f3_1, ...
    init: list              # ids of the initial carry leaves (the branches' operands)
    keys: list | None       # the carry's dict keys, or None for a tuple
    params: list            # per body: ids it binds (carry leaves, x leaves / the index)
    bodies: list            # per body: statements (node ids and Loops)
    results: list           # per body: ids it returns (new carry leaves, then ys)
    outs: list
    xs: list = field(default_factory=list)  # scan: ids of the xs leaves ([] for None)
    length: int = 0         # scan: T; fori: hi - lo
    lo: int = 0             # fori
    reverse: bool = False
    unroll: int = 1
    pred: int = -1          # cond, switch: the predicate's or index's id


def _loop_from(d) -> Loop:
    d = dict(d)
    d["bodies"] = [[s if isinstance(s, int) else _loop_from(s) for s in b] for b in d["bodies"]]
    return Loop(**d)


def _loops(stmts):
    for s in stmts:
        if isinstance(s, Loop):
            yield s
            for b in s.bodies:
                yield from _loops(b)


class _Names:
    def __getitem__(self, i):
        return f"v{i}"


@dataclass
class LoopProgram(Program):
    top: list = field(default_factory=list)     # the program's statements
    _cond: object = field(default=None, init=False, repr=False)
    data_file: str = field(default="", init=False)

    tier = "loops"
    numpy_lax = NumpyLoops

    def __post_init__(self):
        self.top = [s if isinstance(s, (int, Loop)) else _loop_from(s) for s in self.top]

    def meta(self) -> dict:
        return {"top": [s if isinstance(s, int) else dataclasses.asdict(s) for s in self.top]}

    # -- the program as Python ----------------------------------------------------------
    def text(self) -> str:
        """The function ``program(inputs..., xp, L, R)``."""
        lines = [f"def program({''.join(f'v{i}, ' for i in self.input_ids)}"
                 "xp=fnp, L=lax, R=random):"]
        self._block(self.top, 1, lines)
        lines.append(f"    return ({''.join(f'v{o}, ' for o in self.outputs)})")
        return "\n".join(lines)

    def _tree(self, lp, ids):
        if lp.keys:
            return "{" + ", ".join(f"{k!r}: v{i}" for k, i in zip(lp.keys, ids)) + "}"
        return _tuple(ids)

    def _unpack(self, lp, ids, src, ind, lines):
        lhs = ", ".join(f"v{i}" for i in ids)
        if lp.keys:
            lines.append(f"{ind}{lhs} = " + ", ".join(f"{src}[{k!r}]" for k in lp.keys))
        else:
            lines.append(f"{ind}{lhs}{',' if len(ids) == 1 else ''} = {src}")

    def _block(self, stmts, depth, lines):
        ind = "    " * depth
        for s in stmts:
            if isinstance(s, Loop):
                self._loop(s, depth, lines)
                continue
            n = self.nodes[s]
            lines.append(f"{ind}v{s} = {n.render(_Names())}".ljust(60)
                         + f"  # {self.dt_short(n.dtype)}{list(n.shape)}")

    def _loop(self, lp, depth, lines):
        ind, ind1, nc = "    " * depth, "    " * (depth + 1), len(lp.init)
        init, res = self._tree(lp, lp.init), lp.results
        if lp.kind == "scan":
            lines.append(f"{ind}def {lp.name}(c, x):")
            self._unpack(lp, lp.params[0][:nc], "c", ind1, lines)
            if lp.xs:
                lines.append(f"{ind1}{_tuple(lp.params[0][nc:])[1:-1]} = x")
            self._block(lp.bodies[0], depth + 1, lines)
            ys = _tuple(res[0][nc:]) if len(res[0]) > nc else "None"
            lines.append(f"{ind1}return {self._tree(lp, res[0][:nc])}, {ys}")
            opts = f"length={lp.length}" + (", reverse=True" if lp.reverse else "") + (
                f", unroll={lp.unroll}" if lp.unroll != 1 else "")
            xs = _tuple(lp.xs) if lp.xs else "None"
            lines.append(f"{ind}r_{lp.name}, ys_{lp.name} = L.scan({lp.name}, {init}, {xs}, "
                         f"{opts})")
            self._unpack(lp, lp.outs[:nc], f"r_{lp.name}", ind, lines)
            if len(lp.outs) > nc:
                lines.append(f"{ind}{_tuple(lp.outs[nc:])[1:-1]} = ys_{lp.name}")
            return
        if lp.kind == "while":
            lines.append(f"{ind}def {lp.name}_cond(c):")
            self._unpack(lp, lp.params[1], "c", ind1, lines)
            self._block(lp.bodies[1], depth + 1, lines)
            lines.append(f"{ind1}return v{res[1][0]}")
        fns = []
        for b in range(1 if lp.kind in ("fori", "while") else len(lp.bodies)):
            fn = lp.name if lp.kind in ("fori", "while") else f"{lp.name}_{b}"
            fns.append(fn)
            lines.append(f"{ind}def {fn}({'i, ' if lp.kind == 'fori' else ''}c):")
            self._unpack(lp, lp.params[b][:nc], "c", ind1, lines)
            if lp.kind == "fori":
                lines.append(f"{ind1}v{lp.params[0][nc]} = i")
            self._block(lp.bodies[b], depth + 1, lines)
            lines.append(f"{ind1}return {self._tree(lp, res[b][:nc])}")
        if lp.kind == "fori":
            call = (f"L.fori_loop({lp.lo}, {lp.lo + lp.length}, {lp.name}, {init}"
                    f"{f', unroll={lp.unroll}' if lp.unroll != 1 else ''})")
        elif lp.kind == "while":
            call = f"L.while_loop({lp.name}_cond, {lp.name}, {init})"
        elif lp.kind == "cond":
            call = f"L.cond(v{lp.pred}, {fns[0]}, {fns[1]}, {init})"
        else:
            call = f"L.switch(v{lp.pred}, [{', '.join(fns)}], {init})"
        lines.append(f"{ind}r_{lp.name} = {call}")
        self._unpack(lp, lp.outs, f"r_{lp.name}", ind, lines)

    def codes(self):
        if self._codes is None:
            self._codes = compile(self.text(), f"<loops program {self.seed!r}>", "exec")
        return self._codes

    def interpret(self, xp, args, float_dtype=np.float32, record=None, lax=None, rand=None):
        """Runs the program with ``xp`` and ``lax`` (fusionjit's or NumPy's: then ``R`` is
        NumpyRandom unless ``rand`` is given)."""
        if rand is None and lax is NumpyLoops:
            rand = numpy_random()
        ns = {"np": np, "F": float_dtype, "I": np.int32, "B": np.bool_, "U": np.uint32,
              "fnp": None, "lax": None, "random": None}
        exec(self.codes(), ns)  # noqa: S102 - our own generated code
        return ns["program"](*args, xp=xp, L=lax, R=rand)

    def function(self):
        import fusionjit.lax as flax
        import fusionjit.numpy as fnp
        import fusionjit.random as frandom

        def program(*args):
            return self.interpret(fnp, args, np.float32, lax=flax, rand=frandom)
        program.__name__ = program.__qualname__ = f"program_{self.seed}"
        return program

    def uses_random(self) -> bool:
        return any("R." in self.nodes[i].expr for i in range(len(self.nodes)))

    # -- conditioning and tolerances ----------------------------------------------------
    def condition(self) -> bool:
        self._cond = _conditioning(self)
        return bool(self._cond["why"])

    def cond(self) -> dict:
        if self._cond is None:
            self.condition()
        return self._cond

    def reference(self):
        return self.cond()["ref"]

    def compare(self, i, got, want, what, against="numpy"):
        c = self.cond()
        got, want = np.asarray(got), np.asarray(want)
        if got.dtype != c["dtypes"][i]:
            return f"{what}: dtype {got.dtype}, expected {c['dtypes'][i]}"
        if got.shape != want.shape:
            return f"{what}: shape {got.shape}, expected {want.shape}"
        if self.fragile:
            return None
        if got.dtype.kind in "biu":
            return fp.exact_mismatch(got, want, what)
        g, w = got.astype(np.float64), want.astype(np.float64)
        err = np.abs(g - w)
        tol = ATOL + RTOL * np.abs(w) + K_DEV * c["dev"][i]
        bad = ~(err <= tol)
        if not bad.any():
            return None
        k = np.unravel_index(int(np.argmax(np.where(bad, err - tol, -np.inf))), got.shape)
        with np.printoptions(threshold=40, precision=6):
            return (f"{what}: {int(bad.sum())} of {got.size} elements differ; worst at "
                    f"{tuple(int(j) for j in k)}: got {g[k]!r}, expected {w[k]!r}, |diff| "
                    f"{err[k]:.3g} > tol {tol[k]:.3g} (dev {c['dev'][i]:.3g})\n  got:      "
                    f"{got!r}\n  expected: {want.astype(got.dtype)!r}")

    # -- shrinking ------------------------------------------------------------------------
    def size(self) -> tuple:
        stmts = sum(len(b) for lp in _loops(self.top) for b in lp.bodies)
        loops = list(_loops(self.top))
        return (len(self.top) + stmts + 3 * len(loops), sum(lp.length for lp in loops),
                len(self.outputs), sum((lp.unroll != 1) + lp.reverse for lp in loops),
                sum(len(lp.init) for lp in loops))

    def pruned(self) -> "LoopProgram":
        top = copy.deepcopy(self.top)
        need = set(self.outputs)
        top = _prune(self.nodes, top, need)
        nodes, data = list(self.nodes), []
        for i, d in zip(self.input_ids, self.data):
            if i in need:
                data.append(d)
            else:
                nodes[i] = dataclasses.replace(nodes[i], op="unused")
        return self.derive(nodes=nodes, data=data, top=top)

    def _defs(self):
        """(id, the ids visible before it) for every node statement."""
        def walk(stmts, vis):
            vis = list(vis)
            for s in stmts:
                if isinstance(s, int):
                    yield s, list(vis)
                    vis.append(s)
                else:
                    for params, body in zip(s.params, s.bodies):
                        yield from walk(body, vis + params)
                    vis += s.outs
        yield from walk(self.top, self.input_ids)

    def substitute(self, old_new: dict) -> "LoopProgram":
        """Reads of the ids in ``old_new`` read their values instead; pruned."""
        def m(i):
            return old_new.get(i, i)
        nodes = [dataclasses.replace(n, args=[m(a) for a in n.args]) for n in self.nodes]
        top = copy.deepcopy(self.top)
        for lp in _loops(top):
            lp.init, lp.xs = [m(i) for i in lp.init], [m(i) for i in lp.xs]
            lp.results = [[m(i) for i in r] for r in lp.results]
            lp.pred = m(lp.pred)
        return self.derive(nodes=nodes, top=top, outputs=[m(o) for o in self.outputs],
                           note="").pruned()

    def smaller(self):
        """Outputs dropped; a loop bypassed (its carry results read its initial values);
        loops made shorter, not unrolled, not reversed; nodes bypassed (an earlier value of
        their shape and dtype read instead)."""
        outs = self.outputs
        for k in range(len(outs)) if len(outs) > 1 else ():
            yield self.derive(outputs=outs[:k] + outs[k + 1:]).pruned()
        for lp in _loops(self.top):
            nc = len(lp.init)
            yield self.substitute(dict(zip(lp.outs[:nc], lp.init)))
        refs = self._refs()
        for j, lp in enumerate(_loops(self.top)):
            for k in range(len(lp.init) if len(lp.init) > 1 else 0):
                if lp.outs[k] not in refs and all(
                        refs.get(p[k], 0) <= (self._carries(lp, b)[k:k + 1] == [p[k]])
                        for b, p in enumerate(lp.params)):
                    yield self._drop_carry(j, k)
            for change in _loop_changes(lp):
                top = copy.deepcopy(self.top)
                vars(list(_loops(top))[j]).update(change)
                yield self.derive(top=top)
        for i, visible in reversed(list(self._defs())):
            n = self.nodes[i]
            same = [a for a in visible if self.nodes[a].shape == n.shape
                    and self.nodes[a].dtype == n.dtype and self.nodes[a].op != "unused"]
            for a in sorted(same, key=lambda a: (a not in n.args, -a))[:6]:
                yield self.substitute({i: a})

    def _refs(self) -> dict:
        """How many reads each id has."""
        refs: dict = {}
        ids = list(self.outputs)
        for b in [self.top] + [b for lp in _loops(self.top) for b in lp.bodies]:
            ids += [a for s in b if isinstance(s, int) for a in self.nodes[s].args]
        for lp in _loops(self.top):
            ids += lp.init + lp.xs + [lp.pred] + [i for r in lp.results for i in r]
        for i in ids:
            refs[i] = refs.get(i, 0) + 1
        return refs

    def _drop_carry(self, j, k) -> "LoopProgram":
        """Loop ``j`` without carry leaf ``k`` (which nothing reads)."""
        top = copy.deepcopy(self.top)
        lp = list(_loops(top))[j]
        for lst in [lp.init, lp.outs, lp.keys or []] + lp.params + [
                self._carries(lp, b) for b in range(len(lp.bodies))]:
            if lst:
                del lst[k]
        return self.derive(top=top).pruned()

    @staticmethod
    def _carries(lp, b) -> list:
        """Body ``b``'s results that are carry leaves (a while loop's condition: none)."""
        return [] if lp.kind == "while" and b == 1 else lp.results[b]

    # -- printing -------------------------------------------------------------------------
    def data_source(self, k, a, with_data):
        desc = f"  # {fp._DT_SHORT[a.dtype]}{list(a.shape)}"
        if with_data or a.size <= 64:
            return f"np.array({a.tolist()!r}, dtype={fp._DT_NAME[a.dtype]})"
        if self.note == "shrunk" and self.data_file:
            return f"fuzz_programs.load_program({self.data_file!r}).data[{k}]{desc}"
        return f"fuzz_loops.generate({self.seed!r}).data[{k}]{desc}"

    def source(self, with_data=None) -> str:
        head = ["import numpy as np", "import fusionjit", "import fusionjit.numpy as fnp",
                "import fusionjit.lax as lax", "import fusionjit.random as random",
                "from fuzz_loops import NumpyLoops, numpy_random  # tests/fuzz_loops.py", "",
                "F, I, B, U = np.float32, np.int32, np.bool_, np.uint32", ""]
        args = []
        for k, a in enumerate(self.data):
            head.append(f"a{k} = {self.data_source(k, a, bool(with_data))}")
            args.append(f"a{k}")
        text = "\n".join(head + ["", self.text(), "", f"args = ({''.join(a + ', ' for a in args)})",
                                 *self.source_tail(True)])
        for mod in ("fuzz_loops", "fuzz_programs"):
            if f"{mod}.generate(" in text or f"{mod}.load_program(" in text:
                text = f"import {mod}  # tests/{mod}.py\n" + text
        return text

    def source_tail(self, lax: bool) -> list:
        return ["expected = program(*args, xp=np, L=NumpyLoops, R=numpy_random())",
                "for p in ('none', 'xla', 'xla+concat', 'fusionjit'):",
                "    got = fusionjit.jit(program, fusion=p)(*args)",
                "    print(p, 'max |got - numpy| per result:',",
                "          [float(np.max(np.abs(np.asarray(g, np.float64) - e), initial=0)) "
                "for g, e in zip(got, expected)])",
                "# JAX: import jax; program(*args, xp=jax.numpy, L=jax.lax, R=jax.random)"]


def _tuple(ids) -> str:
    return "(" + "".join(f"v{i}, " for i in ids).rstrip() + ")"


def _loop_changes(lp: Loop):
    if lp.kind in ("scan", "fori") and lp.length > 0:
        for t in sorted({0, 1, lp.length // 2} - {lp.length}):
            if lp.kind == "fori" or not lp.xs:
                yield {"length": t}
    if lp.unroll != 1:
        yield {"unroll": 1}
    if lp.reverse:
        yield {"reverse": False}


def _prune(nodes, stmts, need) -> list:
    """The statements (backwards) that ``need`` (ids, updated) uses; drops unused ys."""
    kept = []
    for s in reversed(stmts):
        if isinstance(s, int):
            if s in need:
                kept.append(s)
                need.update(nodes[s].args)
            continue
        if not need.intersection(s.outs):
            continue
        nc = len(s.init)
        if s.kind == "scan":
            ys = [j for j in range(nc, len(s.outs)) if s.outs[j] in need]
            s.outs = s.outs[:nc] + [s.outs[j] for j in ys]
            s.results[0] = s.results[0][:nc] + [s.results[0][j] for j in ys]
        for b, res in enumerate(s.results):
            need.update(res)
            s.bodies[b] = _prune(nodes, s.bodies[b], need)
        need.update(s.init + s.xs + ([s.pred] if s.pred >= 0 else []))
        kept.append(s)
    return kept[::-1]


def _conditioning(prog: LoopProgram) -> dict:
    rand = numpy_random()
    c = {"why": "", "ref": [], "dtypes": [], "dev": []}
    if rand is None and prog.uses_random():
        c["why"] = "random numbers without JAX"
    rec = MarginNumpy()
    args32 = list(prog.data)
    with np.errstate(all="ignore"):
        out32 = [np.asarray(o) for o in prog.interpret(np, args32, np.float32, lax=NumpyLoops,
                                                       rand=rand)]
        args64 = [a.astype(np.float64) if a.dtype == F32 else a for a in prog.data]
        out64 = [np.asarray(o) for o in prog.interpret(rec, args64, np.float64,
                                                       lax=NumpyLoops, rand=rand)]
    for a, b in zip(out32, out64):
        c["dtypes"].append(a.dtype)
        if a.dtype.kind != "f":
            c["ref"].append(a)
            c["dev"].append(0.0)
            if not np.array_equal(a, b):
                c["why"] = c["why"] or "an int or bool result differs in float64"
            continue
        c["ref"].append(b)
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
            c["why"] = c["why"] or "not finite"
            c["dev"].append(0.0)
            continue
        dev = float(np.max(np.abs(a - b), initial=0.0))
        c["dev"].append(dev)
        if dev > ILL * (1 + float(np.max(np.abs(b), initial=0.0))):
            c["why"] = c["why"] or f"float32 deviates by {dev:.3g}"
    if rec.margin < MARGIN:
        c["why"] = c["why"] or f"a jump within {rec.margin:.2g}"
    return c


def generate(seed) -> LoopProgram:
    """The loops-tier program of ``seed`` (an int, or a tuple of ints)."""
    from fuzz_loops_gen import LoopGenerator
    rng = np.random.default_rng([0x100B5] + ([seed] if isinstance(seed, int) else list(seed)))
    while True:
        try:
            return LoopGenerator(rng, seed).build()
        except _Reject:     # no room for a loop (rare): draw again from the same stream
            continue
