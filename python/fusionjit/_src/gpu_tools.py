"""GPU code without a GPU: a function's PTX for a chosen target, and ``ptxas`` (the CUDA
toolkit's PTX assembler) to check that it assembles."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Callable

from fusionjit._src import dispatch


def gpu_ptx(fun: Callable, *args, arch: str = "sm_80", fusion: str | None = None,
            static_argnums=None, static_argnames=None, **kwargs) -> str:
    """The PTX of ``fun``'s GPU kernels for these arguments, for target ``arch`` ("sm_80",
    "sm_90"); compiling needs no GPU."""
    from fusionjit._src.api import Jitted
    jitted = Jitted(fun, static_argnums, static_argnames, fusion, backend="cpu")
    entry, _ = jitted._entry(args, kwargs)
    compilation = dispatch.compile_module(entry.module, jitted._name, fusion=fusion,
                                          backend="gpu", gpu_arch=arch)
    return compilation.ptx


def find_ptxas() -> str | None:
    """ptxas on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin; None if there is none."""
    found = shutil.which("ptxas")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.exists(os.path.join(root, "bin", "ptxas")):
            return os.path.join(root, "bin", "ptxas")
    return None


def ptxas(ptx: str, arch: str, keep_dir: str | None = None) -> None:
    """Assembles ``ptx`` for ``arch`` with ptxas. A failure raises AssertionError with
    ptxas' message, where the PTX was saved and the command that reproduces it."""
    tool = find_ptxas()
    if tool is None:
        raise FileNotFoundError("ptxas not found (the CUDA toolkit's bin/; set CUDA_HOME)")
    directory = keep_dir or tempfile.mkdtemp(prefix="fusionjit-ptx-")
    path = os.path.join(directory, f"kernels_{arch}.ptx")
    with open(path, "w") as f:
        f.write(ptx)
    cmd = [tool, f"-arch={arch}", path, "-o", os.devnull]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode == 0 and keep_dir is None:
        shutil.rmtree(directory, ignore_errors=True)
    if done.returncode != 0:
        raise AssertionError(f"ptxas rejected the PTX for {arch}:\n{done.stderr}\n"
                             f"PTX saved at {path}; reproduce with: {' '.join(cmd)}")
