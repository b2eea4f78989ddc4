"""The beta distribution, as ``jax.scipy.stats.beta``."""

from fusionjit._src.scipy import beta as _d

logpdf = _d.logpdf
pdf = _d.pdf
