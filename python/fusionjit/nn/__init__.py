"""fusionjit.nn: activations and normalisations, as ``jax.nn``."""

from fusionjit._src.nn import (  # noqa: F401
    celu, dot_product_attention, elu, gelu, glu, hard_sigmoid, hard_silu, hard_swish,
    hard_tanh, identity, leaky_relu, log1mexp, log_sigmoid, log_softmax, logmeanexp, logsumexp,
    mish, one_hot, relu, relu6, selu, sigmoid, silu, soft_sign, softmax, softplus, sparse_plus,
    sparse_sigmoid, squareplus, standardize, swish, tanh)
from fusionjit.nn import initializers  # noqa: F401
