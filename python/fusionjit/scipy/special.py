"""Special functions, as ``jax.scipy.special`` (accuracy: the docstrings of
fusionjit/_src/special.py, special_igamma.py, special_bessel.py, special_gamma_family.py,
special_integrals.py)."""

from fusionjit._src.scipy import (  # noqa: F401
    betaln, dawsn, digamma, entr, erf, erfc, erfcx, erfinv, exp1, expi, expit, gamma, gammaln,
    i0, i0e, i1, i1e, kl_div, log_ndtr, log_softmax, logit, logsumexp, ndtr, ndtri, psi, rel_entr,
    softmax, spence, xlog1py, xlogy)
from fusionjit._src.special_integrals import expn, fresnel, sici  # noqa: F401
from fusionjit._src.special_zeta import polygamma, zeta  # noqa: F401
from fusionjit._src.special_igamma import betainc, gammainc, gammaincc  # noqa: F401
from fusionjit._src.special_gamma_family import (  # noqa: F401
    bernoulli, beta, boxcox, boxcox1p, comb, factorial, gammasgn, loggamma, multigammaln, poch)

# Called eagerly, each function runs as one compiled program (eager.py).
from fusionjit._src.eager import eager_namespace as _eager_namespace  # noqa: E402

_eager_namespace(globals())
