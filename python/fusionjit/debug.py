"""``fusionjit.debug``, as ``jax.debug``: ``print`` and ``callback`` (for values known when
they run: outside ``jit`` or under ``disable_jit``; inside a traced function they raise)."""

from fusionjit._src.debugging import callback, print  # noqa: A004

__all__ = ["callback", "print"]
