"""fusionjit.random: JAX-compatible random numbers with explicit keys (threefry2x32)."""

from fusionjit._src.random import (  # noqa: F401
    PRNGKey, PRNGKeyArray, bernoulli, bits, categorical, choice, fold_in, gumbel, key,
    key_data, normal, permutation, randint, split, threefry2x32, uniform, wrap_key_data)
