"""The peers fusionjit's CartPole is measured against, in one registry: JAX (CPU; GPU where
JAX has one), NumPy, PyTorch eager and torch.compile, the hand-written C++ loop, the
hand-written CUDA kernel (a hook: benchmarks/cartpole/hand_cuda.py, when it exists) and
Gymnasium's vectorised CartPole. A peer that is not installed, or has no device for the
backend, is skipped with its reason.

A peer prepares one `Runner` per (variant, inputs, backend, setting): everything it needs
(device copies, compilation) is done in `prepare`, so that `Runner.call` is what is timed.
"""

from __future__ import annotations

import importlib
import os
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from benchmarks.cartpole import cartpole as cp
from benchmarks.cartpole import hand

POOL_FAMILY = ("pool", "no_concat", "unroll")


@dataclass
class Runner:
    """One prepared measurement: `call()` runs the rollout once, waits for it and returns
    its outputs (final state [4, N], resets per step [T], ...)."""

    call: Callable[[], Any]
    compile_s: float | None = None
    kernels_per_step: float | None = None
    note: str = ""


@dataclass
class Peer:
    name: str
    doc: str
    variants: tuple
    missing: Callable[[str], str | None]          # backend -> why it cannot run, or None
    prepare: Callable[..., Runner]                # (variant, inputs, backend, setting)
    settings: Callable[[str, str], tuple] = lambda variant, backend: ("-",)
    comparable: bool = True   # its trajectories are fusionjit's (same inputs, same semantics)
    backends: tuple = ("cpu",)


PEERS: dict[str, Peer] = {}


def register(peer: Peer) -> Peer:
    PEERS[peer.name] = peer
    return peer


def available(names=None, backend: str = "cpu") -> tuple[list[Peer], dict[str, str]]:
    """(the peers that can run, {name: why not} for the others)."""
    run, skipped = [], {}
    for name, peer in PEERS.items():
        if names is not None and name not in names:
            continue
        reason = None if backend in peer.backends else f"runs only on {'/'.join(peer.backends)}"
        reason = reason or peer.missing(backend)
        if reason:
            skipped[name] = reason
        else:
            run.append(peer)
    return run, skipped


def _module_missing(module: str, hint: str = "") -> str | None:
    try:
        importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 (any import failure means: skip the peer)
        return f"{module} is not installed ({type(e).__name__}: {e}){hint}"
    return None


def python_scan(stack: Callable, compile_step: Callable = lambda f: f):
    """A `lax` with scan as a Python loop: how NumPy and PyTorch users step CartPole."""

    class PythonLax:
        @staticmethod
        def scan(f, init, xs=None, length=None, unroll=1):
            step = compile_step(f)
            n = length if xs is None else len(xs)
            carry, ys = init, []
            for t in range(n):
                carry, y = step(carry, None if xs is None else xs[t])
                ys.append(y)
            return carry, stack(ys)
    return PythonLax


# --- JAX ----------------------------------------------------------------------------------

def jax_device(backend: str):
    import jax
    return jax.devices("gpu" if backend == "gpu" else "cpu")[0]


def _jax_missing(backend: str) -> str | None:
    reason = _module_missing("jax")
    if reason or backend == "cpu":
        return reason
    try:
        jax_device(backend)
    except RuntimeError as e:
        return f"JAX has no GPU here ({e})"
    return None


def jax_kernels_per_step(hlo: str, unroll: int) -> float | None:
    """Ops of XLA's compiled while loop (body and condition; fusions, custom calls, copies,
    anything but bookkeeping) per step: the kernels XLA runs per step."""
    bodies = []
    for line in hlo.splitlines():
        if " while(" in line and "body=" in line:
            for part in line.split(", "):
                if part.startswith(("body=", "condition=")):
                    bodies.append(part.split("=", 1)[1].strip().lstrip("%"))
    if not bodies:
        return None
    count, inside = 0, False
    for line in hlo.splitlines():
        if line and not line.startswith(" "):
            name = line.split(" ", 1)[0].lstrip("%")
            inside = name in bodies
            continue
        if inside and " = " in line:
            if _hlo_opcode(line.split(" = ", 1)[1]) not in _BOOKKEEPING:
                count += 1
    return count / unroll


_BOOKKEEPING = ("parameter", "get-tuple-element", "tuple", "constant", "bitcast")


def _hlo_opcode(rhs: str) -> str:
    """The opcode of an HLO instruction's right-hand side `shape opcode(operands)`."""
    depth, i = 0, 0
    if rhs.startswith("("):   # a tuple shape: skip to its closing parenthesis
        for i, ch in enumerate(rhs):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                break
    rest = rhs[i + 1:] if rhs.startswith("(") else rhs.split(" ", 1)[-1]
    return rest.strip().split("(", 1)[0].strip()


def _jax_prepare(variant, inputs, backend, setting) -> Runner:
    import jax
    import fusionjit
    jax.config.update("jax_threefry_partitionable",
                      bool(fusionjit.config.fusionjit_threefry_partitionable))
    if backend == "gpu":
        jax.config.update("jax_threefry_gpu_kernel_lowering", setting == "custom_call")
    args = jax.device_put(inputs.args(variant), jax_device(backend))
    start = time.perf_counter()
    compiled = jax.jit(cp.VARIANTS[variant](cp.jax_lib(), inputs.steps)).lower(*args).compile()
    compile_s = time.perf_counter() - start
    unroll = cp.UNROLL if variant == "unroll" else 1
    return Runner(lambda: jax.block_until_ready(compiled(*args)), compile_s,
                  jax_kernels_per_step(compiled.as_text(), unroll))


register(Peer(
    "jax", "jax.jit, the same variant code with jax.numpy/lax/random", tuple(cp.VARIANTS),
    _jax_missing, _jax_prepare, backends=("cpu", "gpu"),
    settings=lambda v, b: (("custom_call", "fused") if b == "gpu" and cp.DRAWS_IN_LOOP[v]
                           else ("hlo",) if cp.DRAWS_IN_LOOP[v] else ("-",))))


# --- NumPy --------------------------------------------------------------------------------

def numpy_lib() -> cp.Lib:
    return cp.Lib("numpy", np, python_scan(np.array), None)


def _numpy_prepare(variant, inputs, backend, setting) -> Runner:
    rollout = cp.VARIANTS[variant](numpy_lib(), inputs.steps)
    args = inputs.args(variant)
    return Runner(lambda: rollout(*args), note="NumPy's promotion: the force is float64")


register(Peer("numpy", "NumPy, the same variant code stepped in a Python loop",
              ("pool", "no_concat", "policy"), lambda b: None, _numpy_prepare))


# --- PyTorch ------------------------------------------------------------------------------

class TorchNumpy:
    """The few numpy names the variants use, on torch tensors."""

    def __init__(self, torch):
        self._torch = torch

    def __getattr__(self, name):
        return getattr(self._torch, name)

    def array(self, xs):
        return self._torch.stack(list(xs))

    def stack(self, xs, axis=0):
        return self._torch.stack(list(xs), dim=axis)

    def argmax(self, x, axis):
        return self._torch.argmax(x, dim=axis)


def _torch_missing(backend: str) -> str | None:
    hint = (" - optional: PyPI's torch wheel is large; FJ_TORCH=1 ./scripts/run.sh "
            "installs it (or pip install torch)")
    reason = _module_missing("torch", hint)
    if reason or backend == "cpu":
        return reason
    import torch
    return None if torch.cuda.is_available() else "torch sees no CUDA device"


def _torch_prepare(compiled: bool):
    def prepare(variant, inputs, backend, setting) -> Runner:
        import torch
        device = "cuda" if backend == "gpu" else "cpu"
        compile_step = torch.compile if compiled else (lambda f: f)
        cache: dict = {}

        def compile_once(f):   # one compiled step per variant, not per call
            if f.__code__ not in cache:
                cache[f.__code__] = compile_step(f)
            return cache[f.__code__]

        lib = cp.Lib("torch", TorchNumpy(torch), python_scan(torch.stack, compile_once), None)
        rollout = cp.VARIANTS[variant](lib, inputs.steps)
        args = tuple(torch.as_tensor(a, device=device) if isinstance(a, np.ndarray)
                     else tuple(torch.as_tensor(p, device=device) for p in a)
                     for a in inputs.args(variant))

        def call():
            with torch.no_grad():
                out = rollout(*args)
            if device == "cuda":
                torch.cuda.synchronize()
            return tuple(o.cpu().numpy() for o in out)

        start = time.perf_counter()
        call()
        first = time.perf_counter() - start
        return Runner(call, first if compiled else None,
                      note="compile time: the first call" if compiled else "")
    return prepare


TORCH_VARIANTS = ("pool", "no_concat", "policy")
register(Peer("torch eager", "PyTorch eager, the same variant code in a Python loop",
              TORCH_VARIANTS, _torch_missing, _torch_prepare(False), backends=("cpu", "gpu")))
register(Peer("torch.compile", "PyTorch 2 torch.compile of the step, Python loop over steps",
              TORCH_VARIANTS, _torch_missing, _torch_prepare(True), backends=("cpu", "gpu")))


# --- hand-written kernels -----------------------------------------------------------------

def _hand_missing(backend: str) -> str | None:
    try:
        start = time.perf_counter()
        hand.library()
        _HAND_BUILD[0] = time.perf_counter() - start
    except Exception as e:  # noqa: BLE001 (no compiler, no libmvec: skip the peer)
        return f"the hand-written C++ does not build here ({type(e).__name__}: {e})"
    return None


_HAND_BUILD = [None]


def _hand_prepare(variant, inputs, backend, setting) -> Runner:
    args = inputs.args("no_concat")
    threads = os.cpu_count() or 1
    return Runner(lambda: hand.rollout(*args, threads=threads),
                  note=f"g++ -O3 -march=native, {threads} threads, libmvec sin/cos")


register(Peer("c++ hand", "the hand-written C++ loop (hand.py, cartpole_hand.cc)",
              ("no_concat",), _hand_missing, _hand_prepare))

HAND_CUDA_MODULE = "benchmarks.cartpole.hand_cuda"


def _hand_cuda_missing(backend: str) -> str | None:
    """The hook for the hand-written CUDA kernel: a module `hand_cuda.py` beside this one
    with `missing() -> str | None` (why it cannot run here, or None) and
    `rollout(state, actions, resets) -> (state [4, N], resets per step [T])` (NumPy in and
    out, the `no_concat` semantics, as hand.rollout)."""
    try:
        module = importlib.import_module(HAND_CUDA_MODULE)
    except ImportError as e:
        return f"no hand-written CUDA kernel yet ({HAND_CUDA_MODULE}: {e})"
    return module.missing() if hasattr(module, "missing") else None


def _hand_cuda_prepare(variant, inputs, backend, setting) -> Runner:
    module = importlib.import_module(HAND_CUDA_MODULE)
    args = inputs.args("no_concat")
    return Runner(lambda: module.rollout(*args))


register(Peer("cuda hand", "a hand-written CUDA kernel for all steps (hook: hand_cuda.py)",
              ("no_concat",), _hand_cuda_missing, _hand_cuda_prepare, backends=("gpu",)))


# --- Gymnasium ----------------------------------------------------------------------------

def _gym_prepare(variant, inputs, backend, setting) -> Runner:
    from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
    env = CartPoleVectorEnv(num_envs=inputs.envs, max_episode_steps=inputs.steps + 1)
    actions = inputs.actions.astype(np.int64)

    def call():
        env.reset(seed=0)
        resets = np.zeros(inputs.steps, np.int32)
        for t in range(inputs.steps):
            _, _, terminated, _, _ = env.step(actions[t])
            resets[t] = terminated.sum()
        return env.state.astype(np.float32), resets

    return Runner(call, note="its own resets (next-step autoreset, float64): for scale only")


register(Peer("gymnasium vector", "Gymnasium's CartPoleVectorEnv stepped with the same actions",
              ("pool",), lambda b: _module_missing("gymnasium"), _gym_prepare,
              comparable=False))

