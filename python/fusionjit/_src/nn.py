"""``fusionjit.nn``: the activations and normalisations of ``jax.nn``, with JAX's formulas
(so values match JAX's to the last bits where the ops are the same), written with
``fusionjit.numpy`` so that they fuse into the kernels around them."""

from __future__ import annotations

import operator

import numpy as np

from fusionjit._src import dtypes as dt
from fusionjit._src import special
from fusionjit._src.autodiff import custom_jvp, with_jvp
from fusionjit._src.eager import eager_jit
from fusionjit._src.numpy import math_ufuncs, reductions, shapes, ufuncs
from fusionjit._src.numpy.util import (aval, canonical_axes, canonical_axis, check_arraylike, fail,
                                       to_array)


def _float(x, name):
    check_arraylike(name, x)
    x = to_array(x)
    if not dt.is_float(aval(x).dtype):
        x = x.astype(dt.default_float())
    return x


def _passes(g, where):
    """g where ``where`` holds, else 0 (also where g is NaN or inf), as JAX's rules select."""
    return ufuncs.where(where, g, 0)


# relu and relu6 as JAX defines them: slope 0 at 0 (and at 6), not the half of each side
# that max and min give a tie.
_relu = custom_jvp(lambda x: ufuncs.maximum(x, 0))
_relu.defjvps(lambda g, ans, x: _passes(g, ufuncs.greater(x, 0)))
_relu6 = custom_jvp(lambda x: ufuncs.minimum(ufuncs.maximum(x, 0), 6))
_relu6.defjvps(lambda g, ans, x: _passes(g, ufuncs.logical_and(ufuncs.greater(x, 0),
                                                               ufuncs.less(x, 6))))


@eager_jit()
def relu(x):
    """max(x, 0), with slope 0 at 0 (JAX's)."""
    check_arraylike("relu", x)
    return _relu(to_array(x))


@eager_jit()
def relu6(x):
    """min(max(x, 0), 6), with slope 0 at 0 and 6 (JAX's)."""
    check_arraylike("relu6", x)
    return _relu6(to_array(x))


# JAX's logistic: its slope is ans * (1 - ans), 0 where exp(-x) overflows (not inf / inf).
_sigmoid = with_jvp(lambda x: 1 / (1 + ufuncs.exp(-x)), lambda x, ans: ans * (1 - ans))


@eager_jit()
def sigmoid(x):
    """1 / (1 + exp(-x)), as JAX's logistic."""
    return _sigmoid(_float(x, "sigmoid"))


@eager_jit()
def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x)."""
    return -softplus(-_float(x, "log_sigmoid"))


@eager_jit()
def softplus(x):
    """log(1 + exp(x)), as JAX's logaddexp(x, 0) (and its slope, 1/2 at 0)."""
    x = _float(x, "softplus")
    return math_ufuncs.logaddexp(x, shapes.zeros_like(x))


@eager_jit()
def silu(x):
    """x * sigmoid(x) (swish)."""
    x = _float(x, "silu")
    return x * sigmoid(x)


swish = silu


@eager_jit("approximate")
def gelu(x, approximate: bool = True):
    """The Gaussian error linear unit: the tanh approximation by default (as JAX), or exact
    with ``approximate=False``."""
    x = _float(x, "gelu")
    if approximate:
        c = np.sqrt(2 / np.pi).astype(aval(x).dtype)
        return 0.5 * x * (1 + ufuncs.tanh(c * (x + 0.044715 * (x * x * x))))
    return x * (1 + special.erf(x / np.sqrt(2).astype(aval(x).dtype))) / 2


@eager_jit()
def elu(x, alpha=1.0):
    """x where x > 0, else alpha * (exp(x) - 1)."""
    x = _float(x, "elu")
    return ufuncs.where(x > 0, x, alpha * ufuncs.expm1(ufuncs.where(x > 0, 0, x)))


@eager_jit()
def celu(x, alpha=1.0):
    """max(x, 0) + alpha * (exp(min(x, 0) / alpha) - 1)."""
    x = _float(x, "celu")
    return ufuncs.maximum(x, 0) + alpha * ufuncs.expm1(ufuncs.minimum(x, 0) / alpha)


@eager_jit()
def selu(x):
    """The scaled ELU of Klambauer et al. (JAX's constants)."""
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    return scale * elu(x, alpha)


@eager_jit()
def leaky_relu(x, negative_slope=1e-2):
    """x where x >= 0, else negative_slope * x."""
    x = _float(x, "leaky_relu")
    return ufuncs.where(x >= 0, x, negative_slope * x)


@eager_jit()
def hard_tanh(x):
    """x clipped to [-1, 1] (slope 1 at -1 and 1, as JAX's)."""
    x = _float(x, "hard_tanh")
    return ufuncs.where(x > 1, 1, ufuncs.where(x < -1, -1, x))


def _max_kept(x, axis):
    """The max along ``axis`` with its dimensions kept: -inf where the axis is empty (a
    softmax of no entries is empty and their logsumexp -inf, as in JAX)."""
    shape = aval(x).shape
    empty = any(shape[i] == 0 for i in canonical_axes(axis, len(shape)))
    return reductions.max(x, axis=axis, keepdims=True, initial=-np.inf if empty else None)


@eager_jit("axis", "keepdims", "return_sign")
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
    m = _max_kept(a, axis)
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


@eager_jit("axis")
def softmax(x, axis=-1, where=None):
    """exp(x - max) / sum(exp(x - max)) along ``axis``; ``where`` masks entries out (0)."""
    x = _float(x, "softmax")
    if where is not None:
        x = ufuncs.where(where, x, -np.inf)
    e = ufuncs.exp(x - _max_kept(x, axis))
    if where is not None:
        e = ufuncs.where(where, e, 0)
    return e / reductions.sum(e, axis=axis, keepdims=True)


@eager_jit("axis")
def log_softmax(x, axis=-1, where=None):
    """x - max - log(sum(exp(x - max))) along ``axis``."""
    x = _float(x, "log_softmax")
    if where is not None:
        x = ufuncs.where(where, x, -np.inf)
    shifted = x - _max_kept(x, axis)
    e = ufuncs.exp(shifted)
    if where is not None:
        e = ufuncs.where(where, e, 0)
    return shifted - ufuncs.log(reductions.sum(e, axis=axis, keepdims=True))


@eager_jit("axis")
def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None):
    """(x - mean) / sqrt(variance + epsilon) along ``axis`` (JAX's normalize)."""
    x = _float(x, "standardize")
    if mean is None:
        mean = reductions.mean(x, axis=axis, keepdims=True, where=where)
    if variance is None:
        variance = reductions.mean(ufuncs.square(x - mean), axis=axis, keepdims=True,
                                   where=where)
    return (x - mean) / ufuncs.sqrt(variance + epsilon)


@eager_jit("num_classes", "dtype", "axis")
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


# --- the rest of jax.nn's activations ---------------------------------------------------------

def identity(x):
    """x itself (as an array)."""
    check_arraylike("identity", x)
    return to_array(x)


def tanh(x):
    return ufuncs.tanh(x)


@eager_jit()
def hard_sigmoid(x):
    """relu6(x + 3) / 6."""
    return relu6(_float(x, "hard_sigmoid") + 3.0) / 6.0


@eager_jit()
def hard_silu(x):
    """x * hard_sigmoid(x)."""
    x = _float(x, "hard_silu")
    return x * hard_sigmoid(x)


hard_swish = hard_silu


@eager_jit()
def mish(x):
    """x * tanh(softplus(x))."""
    x = _float(x, "mish")
    return x * ufuncs.tanh(softplus(x))


@eager_jit()
def soft_sign(x):
    """x / (|x| + 1)."""
    x = _float(x, "soft_sign")
    return x / (ufuncs.absolute(x) + 1)


@eager_jit()
def squareplus(x, b=4):
    """(x + sqrt(x**2 + b)) / 2."""
    x = _float(x, "squareplus")
    return (x + ufuncs.sqrt(ufuncs.square(x) + b)) / 2


@eager_jit()
def sparse_plus(x):
    """0 below -1, x above 1, (x + 1)**2 / 4 between."""
    x = _float(x, "sparse_plus")
    return ufuncs.where(x <= -1.0, 0.0, ufuncs.where(x >= 1.0, x, (x + 1.0) ** 2 / 4))


@eager_jit()
def sparse_sigmoid(x):
    """clip(x + 1, 0, 2) / 2."""
    return 0.5 * ufuncs.clip(_float(x, "sparse_sigmoid") + 1.0, 0.0, 2.0)


_log1mexp = with_jvp(lambda x: ufuncs.where(x < np.log(2.0), ufuncs.log(-ufuncs.expm1(-x)),
                                             ufuncs.log1p(-ufuncs.exp(-x))),
                     lambda x, ans: 1 / ufuncs.expm1(x))


@eager_jit()
def log1mexp(x):
    """log(1 - exp(-x)) for x > 0, accurate on both sides of log(2); slope 1 / expm1(x)."""
    return _log1mexp(_float(x, "log1mexp"))


@eager_jit("axis", "keepdims")
def logmeanexp(x, axis=None, where=None, keepdims: bool = False):
    """logsumexp minus the log of the number of terms (those ``where`` keeps)."""
    x = _float(x, "logmeanexp")
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    ones = shapes.ones_like(x)
    if where is not None:
        ones = ufuncs.where(where, ones, 0.0)
    count = reductions.sum(ones, axis=axis, keepdims=keepdims).astype(aval(lse).dtype)
    return lse - ufuncs.log(count)


@eager_jit("axis")
def glu(x, axis: int = -1):
    """The gated linear unit: the first half of ``axis`` times the sigmoid of the second."""
    check_arraylike("glu", x)
    x = to_array(x)
    axis = canonical_axis(axis, aval(x).ndim)
    size = aval(x).shape[axis]
    if size % 2:
        fail(f"glu(): the size of axis {axis} must be even, got {size}", ValueError)
    x1, x2 = shapes.split(x, 2, axis)
    return x1 * sigmoid(x2)


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal: bool = False, query_seq_lengths=None,
                          key_value_seq_lengths=None, local_window_size=None,
                          implementation=None):
    """Scaled dot-product attention, as ``jax.nn.dot_product_attention`` (its XLA
    implementation): query [B, T, N, H], key and value [B, S, K, H] (N a multiple of K: query
    head n reads key/value head n // (N // K)), or the same without B; logits scaled by
    ``scale`` (1/sqrt(H)), plus ``bias``, masked (``mask``, causal, a local window, sequence
    lengths) with a large negative number, softmax in float32. Returns [B, T, N, H]."""
    from fusionjit._src.numpy import contractions, manipulation
    if implementation not in (None, "xla"):
        fail(f"dot_product_attention: implementation {implementation!r} is not available; "
             f"fusionjit has 'xla' (or None)", ValueError)
    check_arraylike("dot_product_attention", query, key, value)
    query, key, value = to_array(query), to_array(key), to_array(value)
    out_shape = aval(query).shape

    def four_d(t):
        t = to_array(t)
        return shapes.expand_dims(t, tuple(range(4 - aval(t).ndim))) if aval(t).ndim < 4 else t

    q, k, v = four_d(query), four_d(key), four_d(value)
    bias = None if bias is None else four_d(bias)
    mask = None if mask is None else four_d(mask)
    B, S, K, H = aval(k).shape
    if aval(v).shape != (B, S, K, H) or aval(v).dtype != aval(k).dtype:
        fail(f"dot_product_attention: value {aval(v).str_short()} must have key's shape and "
             f"dtype {aval(k).str_short()}", ValueError)
    qs = aval(q).shape
    if qs[0] != B or qs[3] != H or aval(q).dtype != aval(k).dtype:
        fail(f"dot_product_attention: query {aval(q).str_short()} must be [{B}, T, N, {H}] "
             f"of key's dtype {aval(k).dtype}", ValueError)
    if mask is not None and aval(mask).dtype != np.bool_:
        fail(f"dot_product_attention: mask must be boolean, got {aval(mask).dtype}", ValueError)
    T, N = qs[1], qs[2]
    if N % K:
        fail(f"dot_product_attention: the number of query heads must be a multiple of "
             f"key/value heads, but got {N} vs {K}", ValueError)
    if N != K:
        k, v = manipulation.repeat(k, N // K, axis=2), manipulation.repeat(v, N // K, axis=2)
    scale = 1.0 / np.sqrt(H) if scale is None else scale
    logits_dtype = dt.promote_dtypes(aval(q).dtype, np.float32)
    logits = contractions.einsum("BTNH,BSNH->BNTS", q, k, preferred_element_type=logits_dtype)
    logits = ufuncs.multiply(logits, to_array(scale, logits_dtype, False))
    if bias is not None:
        logits = ufuncs.add(logits, bias).astype(logits_dtype)
    keep = [] if mask is None else [mask]
    t_pos = _positions(T)[:, None]
    s_pos = _positions(S)[None, :]
    if is_causal:
        keep.append(ufuncs.greater_equal(t_pos, s_pos)[None, None])
    if local_window_size is not None:
        left, right = ((local_window_size, local_window_size)
                       if isinstance(local_window_size, int) else local_window_size)
        keep.append(ufuncs.logical_and(ufuncs.less_equal(t_pos, s_pos + left),
                                       ufuncs.greater_equal(t_pos, s_pos - right))[None, None])
    if query_seq_lengths is not None:
        keep.append(ufuncs.less(t_pos[None], to_array(query_seq_lengths)[:, None, None])[:, None])
    if key_value_seq_lengths is not None:
        keep.append(ufuncs.less(s_pos[None],
                                to_array(key_value_seq_lengths)[:, None, None])[:, None])
    if keep:
        combined = keep[0]
        for m in keep[1:]:
            combined = ufuncs.logical_and(combined, m)
        big = -0.7 * min(float(dt.finfo(logits_dtype).max), float(np.finfo(np.float32).max))
        logits = ufuncs.where(combined, logits, to_array(big, logits_dtype, False))
    probs = softmax(logits.astype(np.float32), axis=-1).astype(aval(k).dtype)
    encoded = contractions.einsum("BNTS,BSNH->BTNH", probs, v)
    if query_seq_lengths is not None:
        valid = ufuncs.less(_positions(T)[None, :], to_array(query_seq_lengths)[:, None])
        encoded = ufuncs.multiply(encoded, valid[:, :, None, None].astype(aval(encoded).dtype))
    return shapes.reshape(encoded, out_shape)


def _positions(n: int):
    """0, 1, ..., n - 1 as int32."""
    return shapes.arange(n, dtype=np.int32)
