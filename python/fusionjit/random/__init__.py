"""fusionjit.random: JAX-compatible random numbers with explicit keys (threefry2x32)."""

from fusionjit._src.random import (  # noqa: F401
    PRNGKey, PRNGKeyArray, bernoulli, bits, categorical, choice, exponential, fold_in, gumbel,
    key, key_data, laplace, logistic, normal, permutation, rademacher, randint, split,
    threefry2x32, uniform, wrap_key_data)
from fusionjit._src.random_dists import (  # noqa: F401
    beta, cauchy, chisquare, dirichlet, double_sided_maxwell, f, gamma, geometric, loggamma,
    lognormal, maxwell, multivariate_normal, orthogonal, pareto, poisson, rayleigh, t, triangular,
    truncated_normal, wald, weibull_min)
