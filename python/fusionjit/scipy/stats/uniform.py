"""The uniform distribution, as ``jax.scipy.stats.uniform``."""

from fusionjit._src.scipy import uniform as _d

cdf = _d.cdf
logpdf = _d.logpdf
pdf = _d.pdf
ppf = _d.ppf

# Called eagerly, each function runs as one compiled program (eager.py).
from fusionjit._src.eager import eager_namespace as _eager_namespace  # noqa: E402

_eager_namespace(globals())
