"""The hand-written C++ CartPole (cartpole_hand.cc), compiled for this machine on first use
(g++ -O3 -march=native, vectorised sin/cos from glibc's libmvec) and called through ctypes.
It runs the pool_no_concat rollout of cartpole.py: the limit fusionjit is measured against."""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile

import numpy as np

_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cartpole_hand.cc")
# -fno-tree-sink: GCC's code sinking moves the reset rows' loads into a branch on `done`,
# and a loop with control flow is not vectorised without AVX-512's masked loads.
_FLAGS = ["-O3", "-march=native", "-fopenmp-simd", "-fno-math-errno", "-fno-tree-sink", "-shared",
          "-fPIC"]
_LIB = [None]


def library() -> ctypes.CDLL:
    """The compiled library (built once per source and flags, cached in the temp dir)."""
    if _LIB[0] is None:
        with open(_SOURCE, "rb") as f:
            digest = hashlib.sha256(f.read() + " ".join(_FLAGS).encode()).hexdigest()[:16]
        path = os.path.join(tempfile.gettempdir(), f"fusionjit_cartpole_hand_{digest}.so")
        if not os.path.exists(path):
            tmp = path + f".{os.getpid()}.tmp"
            subprocess.run(["g++", *_FLAGS, "-o", tmp, _SOURCE, "-lmvec", "-lm", "-lpthread"],
                           check=True)
            os.replace(tmp, path)
        lib = ctypes.CDLL(path)
        f32 = np.ctypeslib.ndpointer(np.float32, flags="C_CONTIGUOUS")
        lib.cartpole_rollout.argtypes = [
            f32, f32, f32, f32, np.ctypeslib.ndpointer(np.uint8, flags="C_CONTIGUOUS"), f32,
            ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
            np.ctypeslib.ndpointer(np.int32, flags="C_CONTIGUOUS"), ctypes.c_int]
        lib.cartpole_rollout.restype = None
        _LIB[0] = lib
    return _LIB[0]


def rollout(state, actions, resets, threads: int | None = None):
    """pool_no_concat's rollout in C++: (final state [4, N], resets per step [T])."""
    lib = library()
    s = [np.ascontiguousarray(state[i], np.float32).copy() for i in range(4)]
    steps, envs = actions.shape
    a = np.ascontiguousarray(actions, np.uint8)
    r = np.ascontiguousarray(resets, np.float32)
    counts = np.zeros(steps, np.int32)
    lib.cartpole_rollout(*s, a, r, r.shape[0], envs, steps, counts, threads or os.cpu_count() or 1)
    return np.stack(s), counts
