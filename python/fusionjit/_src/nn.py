"""``fusionjit.nn``: the activations and normalisations of ``jax.nn``, with JAX's formulas
(so values match JAX's to the last bits where the ops are the same), written with
``fusionjit.numpy`` so that they fuse into the kernels around them."""

from __future__ import annotations

import operator

import numpy as np

from fusionjit._src import dtypes as dt
from fusionjit._src.numpy import reductions, shapes, ufuncs
from fusionjit._src.numpy.util import aval, canonical_axis, check_arraylike, fail, to_array


def _float(x, name):
    check_arraylike(name, x)
    x = to_array(x)
    if not dt.is_float(aval(x).dtype):
        x = x.astype(dt.default_float())
    return x


def relu(x):
    """max(x, 0)."""
    x = to_array(x)
    return ufuncs.maximum(x, 0)


def relu6(x):
    """min(max(x, 0), 6)."""
    return ufuncs.minimum(relu(x), 6)


def sigmoid(x):
    """1 / (1 + exp(-x)), as JAX's logistic."""
    x = _float(x, "sigmoid")
    return 1 / (1 + ufuncs.exp(-x))


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x)."""
    return -softplus(-_float(x, "log_sigmoid"))


def softplus(x):
    """log(1 + exp(x)), as JAX's logaddexp(x, 0)."""
    x = _float(x, "softplus")
    return ufuncs.maximum(x, 0) + ufuncs.log1p(ufuncs.exp(-ufuncs.absolute(x)))


def silu(x):
    """x * sigmoid(x) (swish)."""
    x = _float(x, "silu")
    return x * sigmoid(x)


swish = silu


def gelu(x, approximate: bool = True):
    """The Gaussian error linear unit: the tanh approximation by default (as JAX), or exact
    with ``approximate=False``."""
    x = _float(x, "gelu")
    if approximate:
        c = np.sqrt(2 / np.pi).astype(aval(x).dtype)
        return 0.5 * x * (1 + ufuncs.tanh(c * (x + 0.044715 * (x * x * x))))
    return x * (1 + _erf(x / np.sqrt(2).astype(aval(x).dtype))) / 2


def _erf(x):
    """erf to float32 accuracy: its Taylor series below |x| = 0.5, else 1 - erfc(|x|) by the
    Chebyshev fit of Numerical Recipes (fractional error < 1.2e-7)."""
    z = ufuncs.absolute(x)
    z2 = x * x
    series = x * (2 / np.sqrt(np.pi)) * (1 + z2 * (-1 / 3 + z2 * (1 / 10 + z2 * (
        -1 / 42 + z2 * (1 / 216 + z2 * (-1 / 1320 + z2 / 9360))))))
    t = 1 / (1 + 0.5 * z)
    poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    erfc = t * ufuncs.exp(-z2 + poly)
    return ufuncs.where(z < 0.5, series, ufuncs.sign(x) * (1 - erfc))


def elu(x, alpha=1.0):
    """x where x > 0, else alpha * (exp(x) - 1)."""
    x = _float(x, "elu")
    return ufuncs.where(x > 0, x, alpha * ufuncs.expm1(ufuncs.where(x > 0, 0, x)))


def celu(x, alpha=1.0):
    """max(x, 0) + alpha * min(exp(x / alpha) - 1, 0)."""
    x = _float(x, "celu")
    return ufuncs.maximum(x, 0) + alpha * ufuncs.minimum(ufuncs.expm1(x / alpha), 0)


def selu(x):
    """The scaled ELU of Klambauer et al. (JAX's constants)."""
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    return scale * elu(x, alpha)


def leaky_relu(x, negative_slope=1e-2):
    """x where x >= 0, else negative_slope * x."""
    x = _float(x, "leaky_relu")
    return ufuncs.where(x >= 0, x, negative_slope * x)


def hard_tanh(x):
    """x clipped to [-1, 1]."""
    return ufuncs.clip(_float(x, "hard_tanh"), -1, 1)


def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False,
              where=None):
    """log(sum(b * exp(a))) along ``axis``, computed stably (the maximum taken out first;
    -inf where every term is zero); ``where`` leaves terms out."""
    a = _float(a, "logsumexp")
    if b is not None:
        b = to_array(b)
        a = a + ufuncs.log(ufuncs.absolute(b).astype(aval(a).dtype))
    if where is not None:
        a = reductions.masked(a, where, -np.inf)
    m = reductions.max(a, axis=axis, keepdims=True)
    m = ufuncs.where(ufuncs.isfinite(m), m, 0)
    terms = ufuncs.exp(a - m)
    if b is not None:
        terms = terms * ufuncs.sign(b).astype(aval(a).dtype)
    s = reductions.sum(terms, axis=axis, keepdims=True)
    out = ufuncs.log(ufuncs.absolute(s)) + m
    sign = ufuncs.sign(s)
    if not keepdims:
        axes = tuple(range(aval(a).ndim)) if axis is None else axis
        out = shapes.squeeze(out, axis=axes)
        sign = shapes.squeeze(sign, axis=axes)
    if return_sign:
        return out, sign
    if b is not None:
        out = ufuncs.where(sign < 0, np.nan, out)
    return out


def softmax(x, axis=-1, where=None):
    """exp(x - max) / sum(exp(x - max)) along ``axis``; ``where`` masks entries out (0)."""
    x = _float(x, "softmax")
    if where is not None:
        x = ufuncs.where(where, x, -np.inf)
    e = ufuncs.exp(x - reductions.max(x, axis=axis, keepdims=True))
    if where is not None:
        e = ufuncs.where(where, e, 0)
    return e / reductions.sum(e, axis=axis, keepdims=True)


def log_softmax(x, axis=-1, where=None):
    """x - max - log(sum(exp(x - max))) along ``axis``."""
    x = _float(x, "log_softmax")
    if where is not None:
        x = ufuncs.where(where, x, -np.inf)
    shifted = x - reductions.max(x, axis=axis, keepdims=True)
    e = ufuncs.exp(shifted)
    if where is not None:
        e = ufuncs.where(where, e, 0)
    return shifted - ufuncs.log(reductions.sum(e, axis=axis, keepdims=True))


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None):
    """(x - mean) / sqrt(variance + epsilon) along ``axis`` (JAX's normalize)."""
    x = _float(x, "standardize")
    if mean is None:
        mean = reductions.mean(x, axis=axis, keepdims=True, where=where)
    if variance is None:
        variance = reductions.mean(ufuncs.square(x - mean), axis=axis, keepdims=True,
                                   where=where)
    return (x - mean) / ufuncs.sqrt(variance + epsilon)


def one_hot(x, num_classes: int, *, dtype=None, axis=-1):
    """x's integers as one-hot vectors of ``num_classes`` along a new ``axis`` (entries
    outside [0, num_classes) give all zeros)."""
    x = to_array(x)
    if not dt.is_int(aval(x).dtype):
        fail(f"one_hot: x must be integers, got {aval(x).dtype}")
    num_classes = operator.index(num_classes)
    d = dt.default_float() if dtype is None else dt.canonicalize(dtype)
    out_ndim = aval(x).ndim + 1
    axis = canonical_axis(axis, out_ndim, "one_hot")
    classes = shapes.arange(num_classes)
    shape = [1] * out_ndim
    shape[axis] = num_classes
    hit = ufuncs.equal(shapes.expand_dims(x, axis),
                       shapes.reshape(classes, shape).astype(aval(x).dtype))
    return hit.astype(d)
