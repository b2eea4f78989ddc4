"""fusionjit.explain: which kernels a function compiles to, and why every boundary between
them exists, in plain words, with the figures behind each decision."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Callable

from fusionjit._src import errors


@dataclass
class Kernel:
    name: str
    kind: str
    ops: list
    inputs: list
    outputs: list
    bytes_read: int
    bytes_written: int
    loop: str = ""           # the loop whose body launches it every step ("": once a call)

    @property
    def opcodes(self) -> list:
        return [op["opcode"] for op in self.ops]


@dataclass
class Boundary:
    """A value one kernel writes to memory and another reads."""

    producer: str            # the op whose value crosses (e.g. "cat")
    producer_opcode: str
    producer_kernel: str
    consumer_kernel: str
    consumers: list          # the ops in the consumer kernel that read it
    rule: str
    reason: str
    figures: str = ""
    source: str = ""
    bytes: int = 0

    def __str__(self) -> str:
        text = (f"%{self.producer} ({self.producer_opcode}) -> "
                f"{', '.join('%' + c for c in self.consumers)}: {self.reason} [{self.rule}]")
        if self.figures:
            text += f" ({self.figures})"
        return text


@dataclass
class Explanation:
    """What ``fusionjit.explain(f)(*args)`` returns."""

    function: str
    profile: str
    kernels: list
    boundaries: list
    decisions: list = field(repr=False)
    before_dot: str = field(repr=False, default="")
    after_dot: str = field(repr=False, default="")
    before_text: str = field(repr=False, default="")
    after_text: str = field(repr=False, default="")
    # One line per donated argument: the output that takes its buffer over, or why none.
    donations: list = field(default_factory=list)

    @property
    def num_kernels(self) -> int:
        return len(self.kernels)

    @property
    def loops(self) -> list:
        """Each loop's fate: ``{"name", "source", "decisions": [reason, ...]}`` -- whether it
        runs as one kernel (whole-loop fusion) or step by step, and its unroll factor with
        who chose it."""
        found: dict = {}
        for d in self.decisions:
            if d["pass"] not in ("whole-loop-fusion", "while-unroll"):
                continue
            loop = found.setdefault(d["producer"], {"name": d["producer"],
                                                    "source": d["source"], "decisions": []})
            loop["decisions"].append(d["reason"])
        return list(found.values())

    def __str__(self) -> str:
        lines = [f"{self.function} with fusion profile '{self.profile}': "
                 f"{self.num_kernels} kernel{'s' if self.num_kernels != 1 else ''} per call"]
        for i, k in enumerate(self.kernels, 1):
            ops = ", ".join(f"{op['opcode']} %{op['name']}" for op in k.ops)
            where = f", every step of loop %{k.loop}" if k.loop else ""
            lines.append(f"  kernel {i}: {k.name} ({k.kind}{where}) reads "
                         f"{_bytes(k.bytes_read)}, writes {_bytes(k.bytes_written)}")
            lines.append(f"    ops: {ops}")
        for loop in self.loops:
            where = f" ({loop['source']})" if loop["source"] else ""
            lines.append(f"loop %{loop['name']}{where}:")
            lines.extend(f"  {reason}" for reason in loop["decisions"])
        for d in self.decisions:
            if d["rule"] == "plan-selection":
                lines.append(f"plan: {d['reason']}")
        if self.boundaries:
            lines.append("boundaries kept (values written to memory by one kernel, read by "
                         "another):")
            number = {k.name: i for i, k in enumerate(self.kernels, 1)}
            for b in self.boundaries:
                lines.append(f"  kernel {number.get(b.producer_kernel, '?')} -> "
                             f"{number.get(b.consumer_kernel, '?')}: {b}")
                if b.source:
                    lines.append(f"    ({b.producer} defined at {b.source})")
        else:
            lines.append("no boundaries between kernels")
        if self.donations:
            lines.append("donated arguments:")
            lines.extend(f"  {d}" for d in self.donations)
        return "\n".join(lines)

    __repr__ = __str__

    def dot(self, stage: str = "after") -> str:
        """Graphviz DOT of the program before or after fusion (kernels drawn as clusters)."""
        if stage not in ("before", "after"):
            raise ValueError("stage must be 'before' or 'after'")
        return self.after_dot if stage == "after" else self.before_dot

    def render(self, path: str, stage: str = "after") -> str:
        """Writes the graph to ``path``: .dot always works; .svg and .png need Graphviz's
        ``dot`` program. Returns the path written."""
        text = self.dot(stage)
        ext = os.path.splitext(path)[1].lower()
        if ext in ("", ".dot", ".gv"):
            with open(path, "w") as f:
                f.write(text)
            return path
        if ext not in (".svg", ".png", ".pdf"):
            raise ValueError(f"unsupported format {ext!r}: use .dot, .svg, .png or .pdf")
        exe = shutil.which("dot")
        if exe is None:
            raise RuntimeError("rendering to SVG/PNG needs Graphviz's 'dot' program "
                               "(apt-get install graphviz); write a .dot file instead")
        subprocess.run([exe, f"-T{ext[1:]}", "-o", path], input=text.encode(), check=True)
        return path


def _bytes(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.1f} KiB"
    return f"{n} B"


def _explain_boundary(inp: dict, producer_kernel: str, consumer_kernel: str, log: list,
                      profile: str, opcode_of: dict, consumer_ops: set) -> Boundary:
    producer = inp["from_op"]
    readers = list(inp["readers"])
    opcode = opcode_of.get(producer, "")
    if profile == "none":
        return Boundary(producer, opcode, producer_kernel, consumer_kernel, readers,
                        "fusion-disabled", "fusion is off (profile 'none'): every op is a kernel",
                        bytes=inp["bytes"])
    # The last refusal recorded for this producer and an op of the consumer kernel (a
    # later pass has the final word); "left to the merger" only if nothing else was said.
    # Fused copies share names: a decision is about this kernel if all the ops its consumer
    # had then are in this kernel (else, failing that, if one of its readers is).
    def last_refusal(about_this_kernel):
        best = None
        for entry in log:
            if entry["fuse"] or entry["producer"] != producer:
                continue
            if not any(c in consumer_ops for c in entry["consumer"].split(",")):
                continue
            if not about_this_kernel(entry):
                continue
            if (best is None or best["rule"] == "merger-decides"
                    or entry["rule"] != "merger-decides"):
                best = entry
        return best

    best = (last_refusal(lambda e: set(e["consumer_kernel_ops"]) <= consumer_ops)
            or last_refusal(lambda e: True))
    if best is None:
        for entry in log:
            if not entry["fuse"] and entry["producer"] == producer:
                best = entry
    if best is None:
        return Boundary(producer, opcode, producer_kernel, consumer_kernel, readers, "no-decision",
                        "no fusion pass considered this pair", bytes=inp["bytes"])
    return Boundary(producer, best["producer_opcode"], producer_kernel, consumer_kernel, readers,
                    best["rule"], best["reason"], best["figures"], best["source"], inp["bytes"])


def explain(fun: Callable, *, fusion: str | None = None, static_argnums=None,
            static_argnames=None) -> Callable:
    """``explain(f, fusion=...)(*args)``: compiles ``f`` for these arguments and returns an
    Explanation: the kernels with their ops, and every kernel boundary with the rule that
    kept it and the figures behind the decision."""
    from fusionjit._src.api import Jitted

    def explained(*args, **kwargs) -> Explanation:
        jitted = fun if isinstance(fun, Jitted) and fusion is None else Jitted(
            getattr(fun, "_fun", fun), static_argnums, static_argnames, fusion)
        entry, _ = jitted._entry(args, kwargs)
        comp = entry.compilation
        graph = comp.kernel_graph
        log = comp.fusion_log
        from fusionjit._src.config import config
        profile = jitted._fusion or str(config.fusionjit_fusion_profile)
        kernels, boundaries = [], []
        opcode_of = {op["name"]: op["opcode"] for k in graph for op in k["ops"]}
        for k in graph:
            kernels.append(Kernel(k["name"], k["kind"], k["ops"], k["inputs"], k["outputs"],
                                  k.get("bytes_read", sum(i["bytes"] for i in k["inputs"])),
                                  k["bytes_written"],
                                  k.get("loop", "")))
            for inp in k["inputs"]:
                if inp["kind"] != "kernel":
                    continue
                consumer_ops = {op["name"] for op in k["ops"]} | set(inp["readers"])
                boundaries.append(_explain_boundary(inp, inp["from"], k["name"], log, profile,
                                                    opcode_of, consumer_ops))
        return Explanation(jitted._name, profile, kernels, boundaries, log,
                           comp.before_fusion_dot, comp.optimized_dot,
                           comp.before_fusion_text, comp.optimized_text,
                           _donations(jitted, entry, args, kwargs))

    return explained


def _donations(jitted, entry, args, kwargs) -> list:
    """explain's lines on donated arguments (flat leaves, numbered as the program's
    parameters): the output each buffer goes to, or that none can take it."""
    donated = jitted._donated_leaves(args, kwargs)
    exe = entry.compilation.executable
    taken = {a[0]: (k, a[1]) for k, a in enumerate(exe.output_aliases) if a is not None}
    lines = []
    for p, d in enumerate(donated):
        if not d:
            continue
        aval = entry.avals[p]
        shape = str(list(aval.shape)).replace(" ", "")
        what = f"argument {p} ({aval.dtype}{shape})"
        if p in taken:
            k, updated = taken[p]
            how = ("updated in place where it is" if updated
                   else "written over it once its last reader ran")
            lines.append(f"{what}: output {k} takes its buffer ({how})")
        elif exe.backend != "cpu":
            lines.append(f"{what}: kept (the {exe.backend} backend takes no donation yet)")
        else:
            lines.append(f"{what}: kept: no output can take its buffer (none has its shape "
                         f"and dtype, or the old value is read after the new one would be "
                         f"written)")
    return lines


def count_kernels(fun: Callable, *, fusion: str | None = None, static_argnums=None,
                  static_argnames=None) -> Callable:
    """``count_kernels(f, fusion=...)(*args)``: kernel launches per call of ``f``."""

    def counted(*args, **kwargs) -> int:
        return explain(fun, fusion=fusion, static_argnums=static_argnums,
                       static_argnames=static_argnames)(*args, **kwargs).num_kernels

    return counted


_ = errors


def launch_counts(fun: Callable, *, fusion: str | None = None, static_argnums=None,
                  static_argnames=None, backend: str | None = None) -> Callable:
    """``launch_counts(f, fusion=...)(*args)``: the kernel launches of one call of ``f``, as
    the executable recorded them (the paper's metric): ``{"per_call": n, "kernels": k,
    "loops": [{"name", "parent", "iterations", "launches_per_iteration"}]}``. ``kernels``
    is the number of distinct kernels compiled; a loop's launches per iteration count the
    kernels of its body and of the loops nested in it."""
    from fusionjit._src.api import Jitted

    def counted(*args, **kwargs) -> dict:
        jitted = Jitted(fun, static_argnums, static_argnames, fusion, backend=backend)
        compiled = jitted.lower(*args, **kwargs).compile()
        compiled(*args, **kwargs)
        exe = compiled._entry.compilation.executable
        kernels = exe.kernels
        loops = exe.loops
        iterations = dict(zip([lp["name"] for lp in loops], exe.last_loop_iterations()))
        parent = {lp["name"]: lp["parent"] for lp in loops}

        def runs(loop: str) -> int:
            return 1 if not loop else iterations.get(loop, 0)

        per_call = sum(runs(k["loop"]) for k in kernels)
        out_loops = []
        for lp in loops:
            name = lp["name"]
            inside = [k for k in kernels if _within(k["loop"], name, parent)]
            launches = sum(runs(k["loop"]) for k in inside)
            n = iterations.get(name, 0)
            out_loops.append({"name": name, "parent": lp["parent"], "iterations": n,
                              "launches_per_iteration": launches / n if n else 0.0})
        return {"per_call": per_call, "kernels": len(kernels), "loops": out_loops}

    return counted


def _within(loop: str, outer: str, parent: dict) -> bool:
    while loop:
        if loop == outer:
            return True
        loop = parent.get(loop, "")
    return False
