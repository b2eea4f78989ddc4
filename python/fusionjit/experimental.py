"""``fusionjit.experimental``, as ``jax.experimental``: ``io_callback`` (a host callback
with effects: callbacks.py)."""

from fusionjit._src.callbacks import io_callback

__all__ = ["io_callback"]
