"""fusionjit.dlpack: DLPack interop, as ``jax.dlpack``."""

from fusionjit._src.interop import from_dlpack  # noqa: F401
