"""fusionjit.profile: where a compiled function's time goes, kernel by kernel, measured beside
the cost model's estimate of each kernel (the figures ``explain`` gives for its decisions)."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from fusionjit._src import array as array_mod
from fusionjit._src import core, dispatch, errors


@dataclass
class KernelProfile:
    """One kernel's measured time in a call (medians over the runs)."""

    number: int              # its place in the program (as explain numbers it, from 1)
    name: str                # the fusion (or custom call) it computes
    kind: str
    ops: list                # opcodes
    loop: str                # the loop whose steps launch it ("" : once a call)
    launches: float          # per call
    us: float                # time in its launches, per call
    estimated_us: float | None  # the cost model's estimate for one launch
    bytes: int               # bytes read and written by one launch

    @property
    def us_per_launch(self) -> float:
        return self.us / self.launches if self.launches else 0.0

    @property
    def gb_per_s(self) -> float:
        """Bytes the kernel reads and writes over its measured time (GB/s)."""
        return self.bytes / (self.us_per_launch * 1e3) if self.launches and self.us else 0.0

    @property
    def model_ratio(self) -> float | None:
        """Measured over estimated time per launch (above 1: slower than the model says)."""
        if not self.estimated_us or not self.launches:
            return None
        return self.us_per_launch / self.estimated_us


@dataclass
class Profile:
    """What ``fusionjit.profile(f)(*args)`` returns: per-call times of the whole call and of
    each kernel, medians of several runs."""

    function: str
    kernels: list            # KernelProfile, in program order
    call_us: float           # one call, as the caller sees it (profiled code)
    calls: int               # calls per run
    runs: int

    @property
    def kernel_us(self) -> float:
        return sum(k.us for k in self.kernels)

    def top(self, n: int = 10) -> list:
        return sorted(self.kernels, key=lambda k: -k.us)[:n]

    def __str__(self) -> str:
        outside = max(self.call_us - self.kernel_us, 0.0)
        lines = [f"{self.function}: {self.call_us:.1f} us per call ({len(self.kernels)} kernels: "
                 f"{self.kernel_us:.1f} us; outside them {outside:.1f} us: dispatch, copies, "
                 f"loop control), medians of {self.runs} runs of {self.calls} calls",
                 f"  {'#':>3} {'kernel':34} {'kind':9} {'launches':>8} {'us/call':>9} {'share':>6} "
                 f"{'us/launch':>10} {'model us':>9} {'meas/model':>10} {'GB/s':>6}  ops"]
        total = self.call_us or 1.0
        for k in self.top(len(self.kernels)):
            ratio = k.model_ratio
            ops = ", ".join(dict.fromkeys(k.ops))
            if len(ops) > 60:
                ops = ops[:57] + "..."
            lines.append(
                f"  {k.number:>3} {k.name[:34]:34} {k.kind[:9]:9} {k.launches:>8.4g} {k.us:>9.1f} "
                f"{100 * k.us / total:>5.1f}% {k.us_per_launch:>10.2f} "
                f"{'' if k.estimated_us is None else format(k.estimated_us, '.2f'):>9} "
                f"{'' if ratio is None else format(ratio, '.2f'):>10} {k.gb_per_s:>6.1f}  {ops}")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))


def profile(fun: Callable, *, fusion: str | None = None, backend: str | None = None,
            static_argnums=None, static_argnames=None, runs: int = 5,
            min_time: float = 0.05) -> Callable:
    """``profile(f, fusion=...)(*args)``: compiles ``f`` for these arguments with a clock read
    around every kernel launch, runs it ``runs`` times for at least ``min_time`` seconds each,
    and returns a Profile: per kernel, launches and time per call, the cost model's estimate
    beside the measurement, and the time outside the kernels. Kernels are numbered and named
    as ``explain`` names them. The CPU backend only."""
    from fusionjit._src.api import Jitted

    def profiled(*args, **kwargs) -> Profile:
        jitted = fun if isinstance(fun, Jitted) and fusion is None and backend is None else Jitted(
            getattr(fun, "_fun", fun), static_argnums, static_argnames, fusion, backend=backend)
        chosen = dispatch.compile_options(backend=jitted._backend)["backend"]
        if chosen != "cpu":
            raise NotImplementedError(errors.located(
                f"fusionjit.profile times kernels on the CPU backend only; {jitted._name} is "
                f"compiled for {chosen!r}. Pass backend='cpu'"))
        # Traced and compiled once, profiled (the plain compilation is not needed).
        _, leaves, avals, traced = jitted._call_key(args, kwargs)
        program, module, _ = jitted._lower(traced)
        donated = jitted._donated_leaves(args, kwargs)
        module.donated_parameters = [i for i, d in enumerate(donated) if d]
        comp = dispatch.compile_module(module, jitted._name, fusion=jitted._fusion,
                                       backend="cpu", profile=True)
        exe = comp.executable
        argv = [dispatch.to_argument(x, a) for x, a in zip(leaves, avals)]
        out_weak = [a.weak_type for a in program.out_avals]
        # A donated program runs as in a training loop: each output that takes a donated
        # argument's buffer is that argument in the next call. (The caller's own arrays
        # are copied first: profiling deletes none of them.)
        aliases = [(k, a[0]) for k, a in enumerate(exe.output_aliases) if a is not None]
        for _, p in aliases:
            if core.is_concrete_array(argv[p]):
                argv[p] = array_mod.from_numpy(np.array(argv[p]), avals[p].dtype,
                                               avals[p].weak_type)

        def call():
            outs = exe(argv, out_weak, donate=True)
            for k, p in aliases:
                argv[p] = outs[k]

        call()
        call()
        start = time.perf_counter()
        call()
        once = max(time.perf_counter() - start, 1e-7)
        calls = max(1, int(min_time / once))
        walls, counters = [], []
        for _ in range(max(1, runs)):
            exe.reset_profile()
            start = time.perf_counter()
            for _ in range(calls):
                call()
            walls.append((time.perf_counter() - start) / calls)
            counters.append(exe.profile())
        # Kernel names are unique within a computation: a loop's body and the code after it
        # may both have a loop_add_fusion. Each name's kernels pair up in program order.
        described: dict = {}
        for k in comp.kernel_graph:
            described.setdefault(k["name"], []).append(k)
        kernels = []
        for i, info in enumerate(exe.kernels):
            ns = statistics.median(c[i][0] for c in counters)
            launches = statistics.median(c[i][1] for c in counters)
            name = info["fusion"]
            same = described.get(name) or [{}]
            graph = same.pop(0) if len(same) > 1 else same[0]
            kernels.append(KernelProfile(
                i + 1, name, info["kind"], [op["opcode"] for op in graph.get("ops", [])] or
                [info["kind"]], info["loop"], launches / calls, ns / calls / 1e3,
                graph.get("estimated_us"), info["bytes_read"] + info["bytes_written"]))
        return Profile(jitted._name, kernels, statistics.median(walls) * 1e6, calls, max(1, runs))

    return profiled
