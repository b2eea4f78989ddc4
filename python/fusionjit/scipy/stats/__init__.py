"""Distributions, as ``jax.scipy.stats``: each a module of functions."""

from fusionjit.scipy.stats import beta, gamma, norm, uniform  # noqa: F401
