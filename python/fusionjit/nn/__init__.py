"""fusionjit.nn: activations and normalisations, as ``jax.nn``."""

from fusionjit._src.nn import (  # noqa: F401
    celu, elu, gelu, hard_tanh, leaky_relu, log_sigmoid, log_softmax, logsumexp, one_hot, relu,
    relu6, selu, sigmoid, silu, softmax, softplus, standardize, swish)
from fusionjit.nn import initializers  # noqa: F401
