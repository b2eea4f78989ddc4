"""The uniform distribution, as ``jax.scipy.stats.uniform``."""

from fusionjit._src.scipy import uniform as _d

cdf = _d.cdf
logpdf = _d.logpdf
pdf = _d.pdf
ppf = _d.ppf
