"""fusionjit.scipy: ``jax.scipy.special`` and some of ``jax.scipy.stats``."""

from fusionjit.scipy import linalg, special, stats  # noqa: F401
