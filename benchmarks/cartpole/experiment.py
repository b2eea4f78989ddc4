"""The paper's CartPole experiment, measured: every variant under every fusion profile and
threefry lowering, the peers on the same inputs in the same run, the trajectories compared,
the sweep over the number of environments, and the goals as ratios of this run.

`run(Settings(...))` returns a `Results`; benchmarks/cartpole/run.py is its command line and
report.py writes its tables and figures.
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from benchmarks.cartpole import cartpole as cp
from benchmarks.cartpole import peers as peer_registry

PROFILES = ("xla", "xla+concat", "fusionjit")
LOWERINGS = ("custom_call", "fused")
DEFAULT_PROFILE, DEFAULT_LOWERING = "fusionjit", "fused"
# The paper's XLA on its Fig. 2 code: the row every speed-up is measured against.
REFERENCE = ("fusionjit", "baseline", "xla", "custom_call")
# The paper's Fig. 5 normalises to its "concat (baseline)" bar: Fig. 2 with the random
# numbers precomputed (our `pool`) under XLA's rules.
FIG5_REFERENCE = ("fusionjit", "pool", "xla", "-")
# Variants that compute the same thing (random actions, reset states); `policy` differs.
SAME_WORKLOAD = ("baseline", "pool", "no_concat", "unroll", "vmapped")
SWEEP = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536)
SWEEP_LINES = (("fusionjit", "no_concat", DEFAULT_PROFILE), ("fusionjit", "baseline",
               DEFAULT_PROFILE), ("jax", "no_concat", "-"), ("c++ hand", "no_concat", "-"))


@dataclass
class Settings:
    envs: int = 2048
    steps: int = 1000
    repeats: int = 5
    min_time: float = 0.2          # seconds each repeat lasts at least (calls are repeated)
    pool_rows: int | None = 16     # reset rows in the pool; None: one per step (= baseline)
    backend: str = "cpu"
    variants: tuple = tuple(cp.VARIANTS)
    profiles: tuple = PROFILES
    lowerings: tuple = LOWERINGS
    peers: tuple | None = None     # None: every registered peer
    sweep: tuple = SWEEP
    sweep_env_steps: int = 2_000_000   # env-steps per sweep point (steps = this / envs)
    sweep_steps: tuple = (100, 2000)   # the fewest and most steps of a sweep point
    kernel_counts: bool = True
    progress: bool = True
    seed: int = 0


@dataclass
class Row:
    impl: str
    backend: str
    variant: str
    profile: str
    lowering: str
    envs: int
    steps: int
    seconds: float                 # median per rollout
    env_steps_per_s: float
    compile_s: float | None = None
    kernels_per_step: float | None = None
    resets: int | None = None
    trajectories: str = ""
    x_baseline: float | None = None   # throughput over REFERENCE
    x_fig5: float | None = None       # throughput over FIG5_REFERENCE
    note: str = ""

    @property
    def key(self) -> tuple:
        return (self.impl, self.variant, self.profile, self.lowering)


@dataclass
class Results:
    settings: dict
    machine: dict
    rows: list = field(default_factory=list)
    sweep: list = field(default_factory=list)
    skipped: dict = field(default_factory=dict)
    errors: list = field(default_factory=list)   # measurements that failed, with the error
    goals: list = field(default_factory=list)
    wall_s: float = 0.0


# --- timing -------------------------------------------------------------------------------

def median_seconds(call, repeats: int, min_time: float) -> float:
    """Median over `repeats` of the time per call; each repeat runs the call as often as
    fills `min_time` (estimated from one timed call). Python's garbage collector is off while
    timing, as in `timeit`."""
    start = time.perf_counter()
    call()
    once = time.perf_counter() - start
    calls = max(1, int(min_time / max(once, 1e-9)))
    samples = []
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(calls):
                call()
            samples.append((time.perf_counter() - start) / calls)
    finally:
        if enabled:
            gc.enable()
    return statistics.median(samples)


def jit_options(profile: str, backend: str) -> dict:
    """fusionjit.jit's options; `backend` is passed only off the CPU (the GPU backend's)."""
    options = {"fusion": profile}
    if backend != "cpu":
        options["backend"] = backend
    return options


def gpu_missing() -> str | None:
    """Why fusionjit cannot run on a GPU here, or None."""
    import fusionjit
    devices = [str(d) for d in fusionjit.devices()]
    # A real GPU ("gpu:0 (NVIDIA H200, ...)"); the emulator ("gpu_emulated:0") does not count.
    if any(d.startswith("gpu:") for d in devices):
        return None
    return ("fusionjit has no GPU backend here: fusionjit.devices() lists only "
            f"{devices}; run with --backend cpu")


def fusionjit_runner(variant, inputs, backend, profile, lowering, kernel_counts=True):
    import fusionjit
    fusionjit.config.update("fusionjit_threefry_lowering",
                            DEFAULT_LOWERING if lowering == "-" else lowering)
    rollout = cp.VARIANTS[variant](cp.fusionjit_lib(), inputs.steps)
    jitted = fusionjit.jit(rollout, **jit_options(profile, backend))
    args = inputs.args(variant)
    start = time.perf_counter()
    jitted.lower(*args).compile()
    compile_s = time.perf_counter() - start
    kernels = None
    if kernel_counts and backend == "cpu":
        counts = fusionjit.testing.launch_counts(rollout, fusion=profile)(*args)
        kernels = counts["per_call"] / inputs.steps
    return peer_registry.Runner(lambda: fusionjit.block_until_ready(jitted(*args)), compile_s,
                                kernels)


def measure(runner, impl, backend, variant, profile, lowering, inputs, s: Settings):
    out = runner.call()
    seconds = median_seconds(runner.call, s.repeats, s.min_time)
    row = Row(impl, backend, variant, profile, lowering, inputs.envs, inputs.steps, seconds,
              inputs.envs * inputs.steps / seconds, runner.compile_s, runner.kernels_per_step,
              int(np.asarray(out[1]).sum()), note=runner.note)
    return row, (np.asarray(out[0]), np.asarray(out[1]))


def measure_one(impl: str, variant: str, inputs, profile: str = DEFAULT_PROFILE,
                lowering: str = "-", backend: str = "cpu", repeats: int = 3,
                min_time: float = 0.1, kernel_counts: bool = True) -> Row:
    """One row, measured on its own (for notebooks): `impl` is "fusionjit" or a peer's name;
    the threefry lowering is restored afterwards."""
    import fusionjit
    saved = fusionjit.config.fusionjit_threefry_lowering
    s = Settings(repeats=repeats, min_time=min_time, backend=backend)
    try:
        if impl == "fusionjit":
            runner = fusionjit_runner(variant, inputs, backend, profile, lowering, kernel_counts)
        else:
            runner, profile = peer_registry.PEERS[impl].prepare(variant, inputs, backend,
                                                                lowering), "-"
        return measure(runner, impl, backend, variant, profile, lowering, inputs, s)[0]
    finally:
        fusionjit.config.update("fusionjit_threefry_lowering", saved)


def compare(out, ref) -> str:
    """How a rollout's outputs agree with the reference's on the same inputs."""
    (state, resets), (ref_state, ref_resets) = out, ref
    if state.shape != ref_state.shape:
        return "shapes differ"
    if state.dtype == ref_state.dtype and np.array_equal(state, ref_state) and \
            np.array_equal(resets, ref_resets):
        return "identical"
    agree = np.all(np.abs(state.astype(np.float64) - ref_state) <= 1e-4, axis=0).mean()
    return (f"{agree:.0%} of envs within 1e-4, resets {int(resets.sum() - ref_resets.sum()):+d}"
            f"{'' if np.array_equal(resets, ref_resets) else ' (per step differ)'}")


# --- the experiment -----------------------------------------------------------------------

def plan(s: Settings, runnable) -> list:
    """(impl, variant, profile, lowering, peer) for every measurement of the main table."""
    tasks = []
    for variant in s.variants:
        for profile in s.profiles:
            lowerings = s.lowerings if cp.DRAWS_IN_LOOP[variant] else ("-",)
            for lowering in lowerings:
                tasks.append(("fusionjit", variant, profile, lowering, None))
    for peer in runnable:
        for variant in peer.variants:
            if variant in s.variants or (variant == "no_concat" and "unroll" in s.variants):
                for setting in peer.settings(variant, s.backend):
                    tasks.append((peer.name, variant, "-", setting, peer))
    return tasks


def reference_of(variant: str) -> tuple:
    return ("fusionjit", variant if variant in ("baseline", "policy") else "pool", "xla",
            "custom_call" if cp.DRAWS_IN_LOOP.get(variant) else "-")


def run(s: Settings) -> Results:
    """Runs the experiment; restores fusionjit's threefry lowering afterwards."""
    import fusionjit
    if s.backend not in ("cpu", "gpu"):
        raise ValueError(f"backend must be 'cpu' or 'gpu', got {s.backend!r}")
    if s.backend == "gpu" and gpu_missing():
        raise RuntimeError(gpu_missing())
    saved = fusionjit.config.fusionjit_threefry_lowering
    started = time.perf_counter()
    try:
        results = Results(asdict(s), machine_info())
        runnable, results.skipped = peer_registry.available(s.peers, s.backend)
        inputs = cp.inputs(s.envs, s.steps, s.pool_rows, s.seed)
        tasks = plan(s, runnable)
        sweep_tasks = sweep_plan(s, runnable)
        bar = _progress(len(tasks) + len(sweep_tasks), s.progress)
        outputs = {}
        for impl, variant, profile, lowering, peer in tasks:
            name = f"{impl} {variant} {profile} {lowering}".replace(" -", "")
            bar.set_description(name)
            measured = _guarded(results, name, _measure_task, impl, variant, profile, lowering,
                                peer, inputs, s)
            if measured is not None:
                row, out = measured
                outputs[row.key] = out
                results.rows.append(row)
            bar.update()
        _compare_all(results.rows, outputs, peer_registry.PEERS)
        add_ratios(results.rows)
        for n, steps, line, peer in sweep_tasks:
            name = f"sweep {n} envs: {line[0]} {line[1]}"
            bar.set_description(name)
            point = _guarded(results, name, _sweep_point, n, steps, line, peer, s)
            if point is not None:
                results.sweep.append(point)
            bar.update()
        bar.close()
        results.goals = goals(results.rows)
    finally:
        fusionjit.config.update("fusionjit_threefry_lowering", saved)
    results.wall_s = time.perf_counter() - started
    return results


def _guarded(results: Results, name: str, measure_fn, *args):
    """`measure_fn(*args)`, or None with the error recorded: one failing measurement does not
    end the run. Collects garbage first, so that one measurement's arrays and executables are
    freed before the next is timed."""
    gc.collect()
    try:
        return measure_fn(*args)
    except Exception as e:  # noqa: BLE001 (reported with the results, the run goes on)
        results.errors.append({"measurement": name, "error": f"{type(e).__name__}: {e}"})
        return None


def _measure_task(impl, variant, profile, lowering, peer, inputs, s):
    if peer is None:
        runner = fusionjit_runner(variant, inputs, s.backend, profile, lowering,
                                  s.kernel_counts)
    else:
        runner = peer.prepare(variant, inputs, s.backend, lowering)
    return measure(runner, impl, s.backend, variant, profile, lowering, inputs, s)


def _compare_all(rows, outputs, registry):
    for row in rows:
        peer = registry.get(row.impl)
        if peer is not None and not peer.comparable:
            row.trajectories = "not compared"
            continue
        ref = reference_of(row.variant)
        if ref == row.key:
            row.trajectories = "reference"
        elif ref in outputs:
            row.trajectories = compare(outputs[row.key], outputs[ref])


def add_ratios(rows):
    by_key = {r.key: r for r in rows}
    for field_name, ref in (("x_baseline", REFERENCE), ("x_fig5", FIG5_REFERENCE)):
        if ref in by_key:
            base = by_key[ref].env_steps_per_s
            for r in rows:
                setattr(r, field_name, r.env_steps_per_s / base)


def sweep_steps(n: int, s: Settings) -> int:
    lo, hi = s.sweep_steps
    steps = int(min(hi, max(lo, s.sweep_env_steps // max(n, 1))))
    return max(cp.UNROLL, steps // cp.UNROLL * cp.UNROLL)


def sweep_plan(s: Settings, runnable) -> list:
    names = {p.name: p for p in runnable}
    backends = ("cpu", "gpu") if s.backend == "gpu" else ("cpu",)
    tasks = []
    for n in s.sweep:
        for backend in backends:
            for line in SWEEP_LINES:
                impl = line[0]
                if impl == "fusionjit":
                    tasks.append((n, sweep_steps(n, s), line + (backend,), None))
                elif impl in names and backend in names[impl].backends:
                    tasks.append((n, sweep_steps(n, s), line + (backend,), names[impl]))
    return tasks


def _sweep_point(n, steps, line, peer, s):
    impl, variant, profile, backend = line
    inputs = cp.inputs(n, steps, s.pool_rows, s.seed)
    if peer is None:
        runner = fusionjit_runner(variant, inputs, backend, profile, DEFAULT_LOWERING, False)
    else:
        runner = peer.prepare(variant, inputs, backend, "hlo" if variant == "baseline" else "-")
    point = Settings(**{**asdict(s), "repeats": max(1, min(s.repeats, 3)),
                        "min_time": min(s.min_time, 0.1)})
    row, _ = measure(runner, impl, backend, variant, profile,
                     DEFAULT_LOWERING if peer is None else "-", inputs, point)
    return asdict(row)


# --- goals --------------------------------------------------------------------------------

def _best(rows, impl):
    cands = [r for r in rows if r.impl == impl and r.variant in SAME_WORKLOAD]
    return max(cands, key=lambda r: r.env_steps_per_s) if cands else None


def _find(rows, impl, variant, profile="-", lowering="-"):
    return next((r for r in rows if r.key == (impl, variant, profile, lowering)), None)


def _describe(r: Row) -> str:
    parts = [r.impl, r.variant] + [p for p in (r.profile, r.lowering) if p != "-"]
    return " ".join(parts)


def goals(rows) -> list:
    """The issue's goals, as ratios measured in this run (each None where a side is absent)."""
    fj, jax_best, hand = _best(rows, "fusionjit"), _best(rows, "jax"), _best(rows, "c++ hand")
    base = _find(rows, "fusionjit", "baseline", DEFAULT_PROFILE, DEFAULT_LOWERING)
    fj_unroll = _find(rows, "fusionjit", "unroll", DEFAULT_PROFILE)
    jax_unroll = _find(rows, "jax", "unroll")
    out = []

    def goal(name, value, target, detail, higher=True):
        met = None if value is None else (value >= target if higher else value <= target)
        out.append({"goal": name, "value": value, "op": ">=" if higher else "<=",
                    "target": target, "met": met, "detail": detail})

    goal("fusionjit's best / JAX's best", fj and jax_best and
         fj.env_steps_per_s / jax_best.env_steps_per_s, 2.0,
         f"{_describe(fj) if fj else '-'} vs {_describe(jax_best) if jax_best else '-'}")
    goal("fusionjit's best / hand-written C++", fj and hand and
         fj.env_steps_per_s / hand.env_steps_per_s, 0.8,
         f"{_describe(fj) if fj else '-'} vs {_describe(hand) if hand else '-'}")
    goal("fusionjit on the unmodified baseline (default profile) / fusionjit's best",
         base and fj and base.env_steps_per_s / fj.env_steps_per_s, 0.8,
         f"{_describe(base) if base else '-'} vs {_describe(fj) if fj else '-'}")
    goal("compile time of `unroll`: fusionjit / JAX",
         fj_unroll and jax_unroll and fj_unroll.compile_s / jax_unroll.compile_s, 0.5,
         f"{fj_unroll.compile_s if fj_unroll else float('nan'):.2f} s vs "
         f"{jax_unroll.compile_s if jax_unroll else float('nan'):.2f} s", higher=False)
    return out


# --- the machine --------------------------------------------------------------------------

def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except Exception:  # noqa: BLE001 (absent or broken: no version)
        return None


def machine_info() -> dict:
    import fusionjit
    try:
        gxx = subprocess.run(["g++", "--version"], capture_output=True, text=True,
                             timeout=10).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        gxx = None
    versions = {"python": platform.python_version(), "fusionjit": fusionjit.__version__,
                "numpy": np.__version__, "g++": gxx}
    for module in ("jax", "jaxlib", "gymnasium", "torch"):
        versions[module] = _version(module)
    return {"host": platform.node(), "cpu": _cpu_model(), "cores": os.cpu_count(),
            "os": platform.platform(), "devices": [str(d) for d in fusionjit.devices()],
            "versions": versions, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "command": " ".join(sys.argv)}


class _NoProgress:
    def set_description(self, text):
        pass

    def update(self, n=1):
        pass

    def close(self):
        pass


def _progress(total: int, enabled: bool):
    if not enabled:
        return _NoProgress()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _NoProgress()
    return tqdm(total=total, unit="run", dynamic_ncols=True)
