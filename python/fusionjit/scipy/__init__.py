"""fusionjit.scipy: ``jax.scipy.special`` and some of ``jax.scipy.stats``."""

from fusionjit.scipy import special, stats  # noqa: F401
