"""The loops tier's generator (tests/fuzz_loops.py says what it generates): a Scope is the
straight-line Generator of tests/fuzz_programs.py over one block of a program, and
LoopGenerator puts loops, their carries and their bodies together."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

import fuzz_programs as fp
from fuzz_loops import (_CMP, FBOUND, IBOUND, MAX_DEPTH, Loop, LoopProgram, _loops)
from fuzz_programs import BOOL, F32, I32, U32, Node, _bshape, _lit, _Reject


# --- generation --------------------------------------------------------------------------

class Scope(fp.Generator):
    """The straight-line Generator over one block: its first nodes stand for the values
    visible there (op "input": parameters, closed-over values, results of earlier loops);
    the nodes it adds become the block's statements (``flush``)."""

    KINDS = {"unary": 18, "binary": 22, "where": 7, "compare": 3, "reduce": 5, "clip": 3,
             "astype": 3, "slice": 2, "concatenate": 2, "stack": 2, "broadcast_to": 1,
             "expand_dims": 1, "reshape": 1, "transpose": 1, "rows": 3, "sincos": 3,
             "mask": 4}

    def __init__(self, g, visible):
        super().__init__(g.rng, g.seed)
        self.g, self.max_size = g, g.max_size
        self.gid, self.block, self.emitted, self.keys = [], [], 0, []
        for i in visible:
            self.take(i)
        self.n_closed = len(self.nodes)

    def take(self, i):
        """Makes the program's value ``i`` visible here; returns its local id, or for a key
        (uint32, which the straight-line Generator does not handle) ("g", i)."""
        n = self.g.nodes[i]
        if n.dtype == U32:
            self.keys.append(i)
            return ("g", i)
        self.nodes.append(Node("input", [], "", n.shape, n.dtype, n.bound))
        self.vals.append(self.g.vals[i])
        self.used.append(False)
        self.gid.append(i)
        return len(self.nodes) - 1

    def pick(self, pred=None):
        # Results of loops (ys of T steps) may be larger than the nodes made here.
        return super().pick(lambda i: self.vals[i].size <= self.max_size
                            and (pred is None or pred(i)))

    def visible(self) -> list:
        return [i for i in self.gid if i is not None]

    def global_id(self, j) -> int:
        return j[1] if isinstance(j, tuple) else self.gid[j]

    def _users(self):
        used = [False] * len(self.nodes)
        for n in self.nodes:
            for a in n.args:
                if not isinstance(a, tuple):
                    used[a] = True
        return used

    def emit(self, op, args, expr, shape, dtype=U32):
        """A key's node: a statement at once, outside the Generator's view; ("g", id)."""
        self.flush()
        i = self.g.new(Node(op, [self.global_id(a) for a in args], expr, shape,
                            np.dtype(dtype), 1.0), np.zeros(shape, dtype))
        self.block.append(i)
        return ("g", i)

    def add(self, op, args, expr, bound, disc=""):
        # Float comparisons and conversions through xp, where MarginNumpy sees them.
        if disc == "cmp":
            expr = re.sub(r"\{0\} (<=|>=|<|>) \{1\}",
                          lambda m: f"xp.{_CMP[m.group(1)]}({{0}}, {{1}})", expr)
        expr = re.sub(r"\{0\}\.astype\((\w)\)", r"xp.astype({0}, \1)", expr)
        try:
            i = super().add(op, args, expr, bound, disc)
        except ValueError:      # a reduction of an empty result (a loop of 0 steps)
            raise _Reject from None
        self.gid.append(None)
        return i

    def put(self, op, args, expr, shape, dtype, bound=1.0) -> int:
        """A node that ``add`` cannot evaluate (random numbers)."""
        self.nodes.append(Node(op, list(args), expr, tuple(shape), np.dtype(dtype),
                               float(bound)))
        self.vals.append(np.zeros(shape, dtype))
        self.used.append(False)
        self.gid.append(None)
        return len(self.nodes) - 1

    def flush(self):
        """Makes the new nodes the program's, as statements of this block."""
        for j in range(self.emitted, len(self.nodes)):
            if self.gid[j] is None:
                n = self.nodes[j]
                node = dataclasses.replace(n, args=[self.global_id(a) for a in n.args])
                self.gid[j] = self.g.new(node, self.vals[j])
                self.block.append(self.gid[j])
        self.emitted = len(self.nodes)

    def grow(self, n_ops):
        kinds = list(self.KINDS)
        weights = np.array([self.KINDS[k] for k in kinds], float)
        weights /= weights.sum()
        added = tries = 0
        while added < n_ops and tries < 100:
            tries += 1
            n_before = len(self.nodes)
            try:
                getattr(self, "gen_" + kinds[int(self.rng.choice(len(kinds), p=weights))])()
                added += 1
            except _Reject:
                del self.nodes[n_before:], self.vals[n_before:], self.gid[n_before:]
                self.used = self._users()

    def gen_rows(self):
        """A stack of rows, and rows sliced back out of it."""
        x = self.pick(lambda i: len(self.shape(i)) == 1)
        same = [i for i in range(len(self.nodes))
                if self.shape(i) == self.shape(x) and self.dtype(i) == self.dtype(x)]
        parts = [x] + [self.choice(same) for _ in range(1 + self.r(2))]
        names = ", ".join("{%d}" % k for k in range(len(parts)))
        st = self.add("stack", parts, f"xp.stack([{names}], axis=0)",
                      max(self.bound(p) for p in parts))
        k = len(parts)
        j = self.r(k)
        sl = self.choice([f"{j}", f"{j - k}", f"{j}:{j + 1 + self.r(k - j)}"])
        self.add("slice", [st], "{0}[%s]" % sl, self.bound(st))

    def gen_sincos(self):
        x = self.pick(lambda i: self.dtype(i) == F32)
        self.add("sin", [x], "xp.sin({0})", 1)
        self.add("cos", [x], "xp.cos({0})", 1)

    def gen_mask(self):
        """One mask read by two wheres."""
        self.gen_compare()
        m = len(self.nodes) - 1
        for _ in range(2):
            a = self.partner(m, self.choice([F32, F32, I32]))
            s = _bshape(self.shape(m), self.shape(a))
            b = self.partner(s, self.dtype(a))
            self.add("where", [m, a, b], "xp.where({0}, {1}, {2})",
                     max(self.bound(a), self.bound(b)))

    def update(self, p, role, mask) -> int:
        """The new value of carry leaf ``p`` (a local id), tamed so that T steps stay
        bounded: tanh, clip, a leaky mix, sin(old + tanh(new)), a reset where ``mask``
        holds, or ``p`` itself."""
        shape, d = self.shape(p), self.dtype(p)
        if role == "counter":
            return self.add("add", [p], "{0} + I(1)", self.bound(p) + 1)
        cands = [j for j in range(len(self.nodes)) if self.dtype(j) == d and j != p
                 and _bshape(self.shape(j), shape) == shape]
        fresh = [j for j in cands if j >= self.n_closed]
        if not cands or self.chance(0.06):
            return p
        v = self.choice(fresh[-4:] if fresh and self.chance(0.8) else cands)

        def fit(e):
            return e if self.shape(v) == shape else f"xp.broadcast_to({e}, {_lit(shape)})"
        if d == F32:
            # sin(old + ...) keeps a record of every step (the contracting forms forget).
            expr = self.choice([fit("xp.tanh({0})"), fit("xp.clip({0}, F(-2.0), F(2.0))"),
                                "F(0.5) * {1} + F(0.5) * xp.tanh({0})",
                                "xp.sin({1} + F(0.5) * xp.tanh({0}))",
                                "xp.sin({1} + F(0.5) * xp.tanh({0}))"])
            bound = max(FBOUND, self.bound(p))
        elif d == I32:
            expr = self.choice([fit("xp.clip({0}, I(-9), I(9))"),
                                "xp.clip({0} + {1}, I(-9), I(9))"])
            bound = max(IBOUND, self.bound(p))
        else:
            expr, bound = self.choice(["xp.logical_or({0}, {1})", "xp.logical_and({0}, {1})"]), 1
        args = [v, p]
        if (mask is not None and _bshape(self.shape(mask), shape) == shape
                and self.chance(0.4)):
            reset = self.choice(["{1}", "{1}", "F(0.0)" if d == F32 else "{0}"])
            expr, args = f"xp.where({{2}}, {reset}, {expr})", [v, p, mask]
        try:
            j = self.add("update", args, expr, bound)
        except _Reject:
            return p
        assert self.shape(j) == shape and self.dtype(j) == d, (expr, self.shape(j), shape)
        return j

    def ys(self, n) -> list:
        """Up to ``n`` per-step outputs of different shapes (reductions among them)."""
        if n == 0:
            return []
        try:
            masks = [j for j in range(self.n_closed, len(self.nodes))
                     if self.dtype(j) == BOOL and self.shape(j)]
            if masks and self.chance(0.5):
                self.add("sum", [masks[-1]], "xp.sum({0}, dtype=I)", 1 << 20)
            lanes = [j for j in range(self.n_closed, len(self.nodes))
                     if self.dtype(j) == F32 and self.shape(j)]
            if lanes and self.chance(0.6):
                self.add("reduce", [lanes[-1]], "xp.%s({0})" % self.choice(["max", "min", "mean"]),
                         self.bound(lanes[-1]))
        except _Reject:
            pass
        cands = [j for j in range(self.n_closed, len(self.nodes)) if self.dtype(j) != U32]
        self.rng.shuffle(cands)
        out, shapes = [], set()
        for j in sorted(cands, key=lambda j: -j * self.chance(0.7)):
            if len(out) < n and self.shape(j) not in shapes:
                out.append(j)
                shapes.add(self.shape(j))
        return out


class LoopGenerator(fp.Generator):
    """Builds one loops-tier program: the program's nodes, its inputs, its loops."""

    def __init__(self, rng, seed=None):
        super().__init__(rng, seed)
        self.n_loops = 0
        self.lane = 1 + self.r(70) if self.chance(0.85) else 2048 + self.r(2953)
        self.k = 2 + self.r(3)
        self.max_size = max(2048, 4 * self.lane)

    def new(self, node, val) -> int:
        self.nodes.append(node)
        self.vals.append(val)
        return len(self.nodes) - 1

    def new_input(self, shape, dtype) -> int:
        if dtype == U32:
            a = self.rng.integers(0, 1 << 32, size=shape, dtype=np.uint32)
        else:
            a = self.input_data(shape, dtype)
        self.data.append(a)
        b = 2.0 if dtype == F32 else 4.0 if dtype == I32 else 1.0
        return self.new(Node("input", [], "", tuple(shape), np.dtype(dtype), b), a)

    def resample(self, data) -> list:
        return [self.rng.integers(0, 1 << 32, size=a.shape, dtype=np.uint32) if a.dtype == U32
                else self.input_data(a.shape, a.dtype) for a in data]

    def lane_shape(self):
        return (self.lane,) if self.chance(0.7) else (self.k, self.lane)

    def make_inputs(self):
        for _ in range(1 + self.r(3)):
            u = self.rng.random()
            self.new_input(self.lane_shape(), F32 if u < 0.75 else I32 if u < 0.9 else BOOL)
        for _ in range(self.r(3)):
            self.new_input(self.choice([(), (2,), (3,)]), F32)
        self.new_input((), I32)
        if self.chance(0.35):
            self.new_input((2,), U32)

    def steps(self, depth) -> int:
        if depth:
            return self.r(5)
        u = self.rng.random()
        return 0 if u < 0.06 else 1 if u < 0.14 else 2 if u < 0.22 else 3 + self.r(38)

    def carry(self, sc, depth, counter):
        """(local ids, roles) of a new loop's initial carry leaves in scope ``sc``."""
        lanes = {(self.lane,), (self.k, self.lane)}
        n = len(sc.nodes)
        if depth == 0:
            pool = [j for j in range(n) if sc.shape(j) in lanes and sc.dtype(j) != U32]
        else:
            pool = [j for j in range(n) if sc.dtype(j) in (F32, I32) and sc.shape(j)]
        if not pool:
            raise _Reject
        ids = [sc.choice(pool) for _ in range(1 + self.r(3 if depth == 0 else 2))]
        ids = list(dict.fromkeys(ids))
        roles = ["lane"] * len(ids)
        small = [j for j in range(n) if sc.dtype(j) == F32 and sc.shape(j) in ((), (2,), (3,))]
        for _ in range(self.r(3) if depth == 0 else 0):
            if small and self.chance(0.7):
                ids.append(sc.choice(small))
            else:
                shape = _lit(self.choice([(2,), (3,)]))
                ids.append(sc.add("const", [], f"xp.zeros({shape}, F)", 0))
            roles.append("uniform")
        if counter or self.chance(0.7):     # a counter shows the trip count exactly
            ints = [j for j in range(n) if sc.dtype(j) == I32 and sc.shape(j) == ()]
            ids.append(sc.choice(ints) if ints and self.chance(0.6) else
                       sc.add("const", [], "I(0)", 0))
            roles.append("counter")
        if sc.keys and self.chance(0.7):
            ids.append(("g", sc.keys[-1]))
            roles.append("key")
        return ids, roles

    def body(self, outer, init, roles, extra, n_ys, depth, counter_limit=None):
        """A body over the carry leaves ``init`` (program ids) and ``extra`` parameters
        (shape, dtype, bound): (params, statements, results)."""
        vis = outer.visible()
        closed = list(dict.fromkeys(vis[self.r(len(vis))] for _ in range(self.r(3))))
        sc = Scope(self, closed)
        params, local = [], []
        specs = [(self.nodes[i].shape, self.nodes[i].dtype, self._carry_bound(i, r))
                 for i, r in zip(init, roles)] + list(extra)
        for shape, dtype, bound in specs:
            params.append(self.new(Node("param", [], "", shape, dtype, bound),
                                   np.zeros(shape, dtype)))
            local.append(sc.take(params[-1]))
        sc.n_closed = len(closed)
        if counter_limit is not None:      # a while loop's condition
            n = local[roles.index("counter")]
            c = sc.add("compare", [n], "xp.less({0}, I(%d))" % counter_limit, 1)
            floats = [j for j, r in zip(local, roles) if r == "lane" and sc.dtype(j) == F32]
            if floats and self.chance(0.4):
                th = round(float(self.rng.uniform(0.5, 2.2)), 2)
                d = sc.add("compare", [floats[0]], f"xp.less(xp.max({{0}}), F({th}))", 1)
                c = sc.add("and", [c, d], "xp.logical_and({0}, {1})", 1)
            sc.flush()
            return params, sc.block, [sc.global_id(c)]
        new_key = None
        if "key" in roles:
            ks = sc.emit("split", [local[roles.index("key")]], "R.split({0})", (2, 2))
            new_key = sc.emit("index", [ks], "{0}[0]", (2,))
            sub = sc.emit("index", [ks], "{0}[1]", (2,))
            s = self.lane_shape()
            if self.chance(0.75):
                sc.put("uniform", [sub], f"xp.asarray(R.uniform({{0}}, {_lit(s)}), F)", s, F32)
            if self.chance(0.5):
                p = self.choice([0.1, 0.3, 0.5])
                sc.put("bernoulli", [sub], f"R.bernoulli({{0}}, {p}, {_lit(s)})", s, BOOL)
        sc.grow(2 + self.r(7))
        if depth < MAX_DEPTH and self.chance(0.2):
            sc.flush()
            try:
                self.loop(sc, depth + 1)
            except _Reject:
                pass
            sc.grow(self.r(3))
        masks = [j for j in range(sc.n_closed, len(sc.nodes)) if sc.dtype(j) == BOOL]
        mask = masks[-1] if masks else None
        res = [new_key if r == "key" else sc.update(j, r, mask)
               for j, r in zip(local, roles)]
        res += sc.ys(n_ys)
        sc.flush()
        return params, sc.block, [sc.global_id(j) for j in res]

    def _carry_bound(self, i, role):
        b = self.nodes[i].bound
        if role == "lane" or role == "uniform":
            return max(b, FBOUND if self.nodes[i].dtype == F32 else IBOUND)
        return 100.0 if role == "counter" else b

    def loop(self, sc, depth, same=None) -> Loop:
        """A loop at the end of scope ``sc``, its results visible there; ``same``: a loop
        whose initial carry it starts from."""
        kinds = (["scan"] * 10 + ["fori"] * 3 + ["while"] * 3 + ["cond"] * 2 + ["switch"] * 2
                 if depth == 0 else ["scan"] * 2 + ["fori", "cond"])
        kind = self.choice(kinds if same is None else ["scan", "fori"])
        if same is not None:
            init, roles, keys = same.init, same.roles, same.keys
        else:
            ids, roles = self.carry(sc, depth, counter=kind == "while")
            sc.flush()
            init = [sc.global_id(j) for j in ids]
            names = {"lane": "x", "uniform": "u", "counter": "n", "key": "key"}
            keys = ([f"{names[r]}{j}" for j, r in enumerate(roles)] if self.chance(0.4)
                    else None)
        self.n_loops += 1
        lp = Loop(kind, f"f{self.n_loops}", list(init), keys, [], [], [], [])
        lp.roles = roles
        t = self.steps(depth)
        if kind == "scan":
            xs = []
            if depth == 0 and self.chance(0.65):
                for _ in range(1 + self.r(2)):
                    s = self.choice([self.lane_shape(), (), (2,)])
                    xs.append(self.new_input((t,) + s, self.choice([F32, F32, F32, I32, BOOL])))
            elif depth > 0 and self.chance(0.4):
                rows = [j for j in range(len(sc.nodes)) if len(sc.shape(j)) >= 1
                        and sc.shape(j)[0] <= 8 and sc.dtype(j) != U32]
                if rows:
                    xs = [sc.gid[sc.choice(rows)]]
                    t = self.nodes[xs[0]].shape[0]
            extra = [(self.nodes[x].shape[1:], self.nodes[x].dtype, self.nodes[x].bound)
                     for x in xs]
            p, b, r = self.body(sc, init, roles, extra, self.choice([0, 1, 1, 2, 2, 3]), depth)
            lp.params, lp.bodies, lp.results = [p], [b], [r]
            lp.xs, lp.length, lp.reverse = xs, t, self.chance(0.25)
            if self.chance(0.3):
                lp.unroll = self.choice([2, 3, 4, 8, max(t, 1)])
        elif kind == "fori":
            lp.lo, lp.length = self.r(3), t
            p, b, r = self.body(sc, init, roles, [((), I32, float(lp.lo + t))], 0, depth)
            lp.params, lp.bodies, lp.results = [p], [b], [r]
            if self.chance(0.25):
                lp.unroll = self.choice([2, 3, 4])
        elif kind == "while":
            lp.length = self.r(25)
            for limit in (lp.length, None):
                p, b, r = self.body(sc, init, roles, [], 0, depth, limit)
                lp.params.append(p)
                lp.bodies.append(b)
                lp.results.append(r)
            lp.params.reverse()
            lp.bodies.reverse()
            lp.results.reverse()
        else:
            lp.pred = self.predicate(sc, kind)
            for _ in range(2 if kind == "cond" else 2 + self.r(2)):
                p, b, r = self.body(sc, init, roles, [], 0, depth)
                lp.params.append(p)
                lp.bodies.append(b)
                lp.results.append(r)
        nc = len(init)
        for j, i in enumerate(lp.results[0]):
            shape = self.nodes[i].shape if j < nc else (lp.length,) + self.nodes[i].shape
            lp.outs.append(self.new(Node("out", [], "", shape, self.nodes[i].dtype,
                                         self.nodes[init[j] if j < nc else i].bound),
                                    np.zeros(shape, self.nodes[i].dtype)))
        sc.block.append(lp)
        for o in lp.outs:
            sc.take(o)
        sc.emitted = len(sc.nodes)
        return lp

    def predicate(self, sc, kind) -> int:
        """A traced predicate (cond) or index (switch) at the end of scope ``sc``."""
        n = len(sc.nodes)
        fl = [j for j in range(n) if sc.dtype(j) == F32 and sc.shape(j)]
        ints = [j for j in range(n) if sc.dtype(j) in (I32, BOOL) and sc.shape(j)]
        if not fl and not ints:
            raise _Reject
        if kind == "cond":
            if ints and (self.chance(0.5) or not fl):
                j = sc.add("pred", [sc.choice(ints)], "xp.sum({0}, dtype=I) > I(0)", 1)
            else:
                j = sc.add("pred", [sc.choice(fl)], "xp.greater(xp.mean({0}), F(0.0))", 1)
        elif ints and (self.chance(0.5) or not fl):
            j = sc.add("index", [sc.choice(ints)], "xp.sum({0}, dtype=I) %% I(%d)"
                       % (2 + self.r(4)), 8)
        else:
            j = sc.add("index", [sc.choice(fl)],
                       "xp.astype(xp.floor(xp.mean({0}) * F(2.0)), I)", 8, "floor")
        sc.flush()
        return sc.gid[j]

    def build(self) -> LoopProgram:
        self.make_inputs()
        top = Scope(self, range(len(self.nodes)))
        top.grow(self.r(4))
        top.flush()
        first = self.loop(top, 0)
        if self.chance(0.35):
            top.grow(self.r(3))
            top.flush()
            self.loop(top, 0, same=first if self.chance(0.3) else None)
        outs = [i for lp in top.block if isinstance(lp, Loop) for i in lp.outs]
        for i in outs:          # results read by rows
            if len(self.nodes[i].shape) >= 2 and self.nodes[i].shape[0] and self.chance(0.4):
                top.add("slice", [top.gid.index(i)], "{0}[%s]" % self.choice(["0", "-1", "1:"]),
                        self.nodes[i].bound)
        top.grow(self.r(3))
        top.flush()
        post = [i for i in top.block if isinstance(i, int) and i > max(outs)]
        pool = outs + post
        outputs = list(dict.fromkeys(self.choice(pool) for _ in range(1 + self.r(4))))
        for lp in top.block:    # most loops' results are read (a dead loop now and then)
            if isinstance(lp, Loop) and not set(outputs) & set(lp.outs) and self.chance(0.9):
                outputs.append(self.choice(lp.outs))
            if isinstance(lp, Loop) and "counter" in lp.roles and self.chance(0.5):
                outputs.append(lp.outs[lp.roles.index("counter")])
        outputs = list(dict.fromkeys(outputs))
        if not set(outputs) & set(outs):
            outputs.append(self.choice(outs))
        prog = LoopProgram(self.seed, self.nodes, outputs, self.data, top=top.block)
        for lp in _loops(prog.top):
            del lp.roles
        fp._condition(prog, self, tries=5)
        return prog
