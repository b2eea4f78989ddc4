"""Helpers for tests and notebooks."""

from fusionjit._src.explain import count_kernels, launch_counts  # noqa: F401
from fusionjit._src.gpu_tools import find_ptxas, gpu_ptx, ptxas  # noqa: F401
