"""The norm distribution, as ``jax.scipy.stats.norm``."""

from fusionjit._src.scipy import norm as _d

cdf = _d.cdf
isf = _d.isf
logcdf = _d.logcdf
logpdf = _d.logpdf
logsf = _d.logsf
pdf = _d.pdf
ppf = _d.ppf
sf = _d.sf
