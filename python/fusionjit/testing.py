"""Helpers for tests and notebooks."""

from fusionjit._src.explain import count_kernels, launch_counts  # noqa: F401
