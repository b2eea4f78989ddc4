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

# Called eagerly, each function runs as one compiled program (eager.py).
from fusionjit._src.eager import eager_namespace as _eager_namespace  # noqa: E402

_eager_namespace(globals())
