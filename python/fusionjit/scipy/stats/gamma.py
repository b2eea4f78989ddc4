"""The gamma distribution, as ``jax.scipy.stats.gamma``."""

from fusionjit._src.scipy import gamma_dist as _d

logpdf = _d.logpdf
pdf = _d.pdf
