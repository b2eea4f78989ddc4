"""The beta distribution, as ``jax.scipy.stats.beta``."""

from fusionjit._src.scipy import beta as _d

logpdf = _d.logpdf
pdf = _d.pdf

# Called eagerly, each function runs as one compiled program (eager.py).
from fusionjit._src.eager import eager_namespace as _eager_namespace  # noqa: E402

_eager_namespace(globals())
