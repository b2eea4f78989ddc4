"""``fusionjit.flatten_util``, as ``jax.flatten_util``: ``ravel_pytree``."""

from fusionjit._src.flatten_util import ravel_pytree

__all__ = ["ravel_pytree"]
