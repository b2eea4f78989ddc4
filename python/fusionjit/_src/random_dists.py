"""More of ``jax.random``'s distributions, each JAX's formula on fusionjit's uniform, normal
and exponential draws (whose bits match JAX's), so values agree with JAX to the few ulp of
the float functions between (tan, pow, log, erf)."""

from __future__ import annotations

import functools
import math

import numpy as np

from fusionjit._src import dtypes as dt
from fusionjit._src import special
from fusionjit._src.lax import lax
from fusionjit._src.numpy import linalg, math_ufuncs, reductions, shapes, ufuncs
from fusionjit._src.numpy.util import aval, fail, shape_arg, to_array
from fusionjit._src.eager import eager_jit
from fusionjit._src.random import (_float_dtype, _is_value, batched_keys, exponential, normal,
                                   rademacher, split, uniform)


def _param(x, d):
    """A distribution parameter converted to the sample's dtype, as JAX converts it."""
    return lax.convert_element_type(x, d) if _is_value(x) else to_array(x, d, False)


def _shape(name: str, shape, *params) -> tuple:
    """The sample shape: the parameters' broadcast shape if ``shape`` is None, else
    ``shape``, which the parameters must broadcast to."""
    param_shapes = [tuple(np.shape(p)) if not _is_value(p) else aval(p).shape for p in params]
    if shape is None:
        return tuple(np.broadcast_shapes(*param_shapes)) if param_shapes else ()
    shape = shape_arg(shape, name)
    try:
        ok = np.broadcast_shapes(shape, *param_shapes) == shape
    except ValueError:
        ok = False
    if not ok:
        fail(f"{name}(): the parameters' shapes {param_shapes} do not broadcast to shape "
             f"{shape}", ValueError)
    return shape


@eager_jit("shape", "dtype")
def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normal floats truncated to (lower, upper): sqrt(2) erf^-1(u) for u uniform
    between erf(lower / sqrt(2)) and erf(upper / sqrt(2)), clipped inside the open interval,
    as JAX."""
    d = _float_dtype("truncated_normal", dtype)
    shape = _shape("truncated_normal", shape, lower, upper)
    lower, upper = _param(lower, d), _param(upper, d)
    sqrt2 = math.sqrt(2.0)
    a = special.erf(ufuncs.divide(lower, sqrt2))
    b = special.erf(ufuncs.divide(upper, sqrt2))
    u = uniform(key, shape, d, a, b)
    out = ufuncs.multiply(special.erf_inv(u), sqrt2)
    lo = math_ufuncs.nextafter(lower, to_array(np.inf, d, False))
    hi = math_ufuncs.nextafter(upper, to_array(-np.inf, d, False))
    return ufuncs.clip(out, lo, hi)


def cauchy(key, shape=(), dtype=None):
    """Standard Cauchy floats: tan(pi (u - 1/2)) for u uniform in [eps, 1), as JAX."""
    d = _float_dtype("cauchy", dtype)
    u = uniform(key, shape_arg(shape, "cauchy"), d, float(dt.finfo(d).eps), 1.0)
    return ufuncs.tan(ufuncs.multiply(ufuncs.subtract(u, 0.5), math.pi))


def pareto(key, b, shape=None, dtype=None):
    """Pareto floats of shape ``b``: exp(e / b) for e exponential, as JAX."""
    d = _float_dtype("pareto", dtype)
    shape = _shape("pareto", shape, b)
    return ufuncs.exp(ufuncs.divide(exponential(key, shape, d), _param(b, d)))


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull floats: (-log1p(-u)) ** (1 / concentration) * scale, as JAX."""
    d = _float_dtype("weibull_min", dtype)
    u = uniform(key, shape_arg(shape, "weibull_min"), d)
    e = ufuncs.negative(ufuncs.log1p(ufuncs.negative(u)))
    return ufuncs.multiply(ufuncs.power(e, ufuncs.divide(1.0, _param(concentration, d))),
                           _param(scale, d))


def lognormal(key, sigma=1.0, shape=None, dtype=None):
    """exp(sigma * normal), as JAX."""
    d = _float_dtype("lognormal", dtype)
    shape = _shape("lognormal", shape, sigma)
    return ufuncs.exp(ufuncs.multiply(normal(key, shape, d), _param(sigma, d)))


def rayleigh(key, scale, shape=None, dtype=None):
    """scale * sqrt(-2 log u), as JAX."""
    d = _float_dtype("rayleigh", dtype)
    shape = _shape("rayleigh", shape, scale)
    u = uniform(key, shape, d)
    scale = shapes.broadcast_to(_param(scale, d), shape)
    return ufuncs.multiply(scale, ufuncs.sqrt(ufuncs.multiply(ufuncs.log(u), -2.0)))


def maxwell(key, shape=(), dtype=None):
    """The norm of three standard normals, as JAX."""
    d = _float_dtype("maxwell", dtype)
    shape = shape_arg(shape, "maxwell")
    return linalg.norm(normal(key, shape + (3,), d), axis=-1)


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """A Maxwell draw with a random sign, scaled and shifted; the sample shape is ``shape``
    followed by the parameters' broadcast shape, as JAX's."""
    d = _float_dtype("double_sided_maxwell", dtype)
    params = tuple(np.broadcast_shapes(*[tuple(np.shape(p)) if not _is_value(p)
                                         else aval(p).shape for p in (loc, scale)]))
    shape = shape_arg(shape, "double_sided_maxwell")
    shape = (shape or params) + params
    k_maxwell, k_sign = split(key)
    m = maxwell(k_maxwell, shape, d)
    sign = rademacher(k_sign, shape, d)
    return ufuncs.add(ufuncs.multiply(ufuncs.multiply(sign, m), _param(scale, d)),
                      _param(loc, d))


def triangular(key, left, mode, right, shape=None, dtype=None):
    """Triangular floats by inverting the CDF at u, as JAX."""
    d = _float_dtype("triangular", dtype)
    shape = _shape("triangular", shape, left, mode, right)
    left, mode, right = (shapes.broadcast_to(_param(p, d), shape) for p in (left, mode, right))
    width = ufuncs.subtract(right, left)
    fc = ufuncs.divide(ufuncs.subtract(mode, left), width)
    u = uniform(key, shape, d)
    out1 = ufuncs.add(left, ufuncs.sqrt(ufuncs.multiply(ufuncs.multiply(u, width),
                                                        ufuncs.subtract(mode, left))))
    out2 = ufuncs.subtract(right, ufuncs.sqrt(ufuncs.multiply(
        ufuncs.multiply(ufuncs.subtract(1.0, u), width), ufuncs.subtract(right, mode))))
    return lax.select(ufuncs.less(u, fc), out1, out2)


def geometric(key, p, shape=None, dtype=None):
    """The number of Bernoulli(p) trials up to the first success (integers), as JAX."""
    d = dt.default_int() if dtype is None else dt.canonicalize(dtype)
    if not dt.is_int(d):
        fail(f"geometric(): dtype must be an integer dtype, got {d}", ValueError)
    shape = _shape("geometric", shape, p)
    p = to_array(p)
    if not dt.is_float(aval(p).dtype):
        p = lax.convert_element_type(p, dt.default_float())
    u = uniform(key, shape, aval(p).dtype)
    u = ufuncs.where(ufuncs.equal(u, 0.0), 1.0, u)
    log_q = shapes.broadcast_to(ufuncs.log1p(ufuncs.negative(p)), shape)
    g = ufuncs.add(ufuncs.floor(ufuncs.divide(ufuncs.log(u), log_q)), 1.0)
    return lax.convert_element_type(g, d)


def wald(key, mean, shape=None, dtype=None):
    """Inverse Gaussian floats of mean ``mean`` (Michael, Schucany and Haas), as JAX."""
    d = _float_dtype("wald", dtype)
    shape = _shape("wald", shape, mean)
    k1, k2 = split(key, 2)
    mean = shapes.broadcast_to(_param(mean, d), shape)
    v = normal(k1, shape, d)
    z = uniform(k2, shape, d)
    y = lax.integer_pow(v, 2)
    y_sq = lax.integer_pow(y, 2)
    mean_sq = lax.integer_pow(mean, 2)
    sqrt_term = ufuncs.sqrt(ufuncs.add(ufuncs.multiply(ufuncs.multiply(mean, 4.0), y),
                                       ufuncs.multiply(mean_sq, y_sq)))
    x = ufuncs.subtract(ufuncs.add(mean, ufuncs.divide(ufuncs.multiply(mean_sq, y), 2.0)),
                        ufuncs.multiply(ufuncs.divide(mean, 2.0), sqrt_term))
    take_x = ufuncs.less_equal(z, ufuncs.divide(mean, ufuncs.add(mean, x)))
    return lax.select(take_x, x, ufuncs.divide(mean_sq, x))



# --- the gamma family -----------------------------------------------------------------------

def _gamma_lanes(keys, alpha, log_space: bool):
    """JAX's _gamma_one (Marsaglia and Tsang's rejection method) for every lane at once:
    lane i draws with keys[i] (uint32 (n, 2)) and alpha[i] exactly what JAX's lane draws,
    each lane's loops stepping only while that lane has not accepted (as JAX's batched
    while loop does)."""
    from fusionjit._src.lax.control_flow import while_loop
    d = aval(alpha).dtype
    n = aval(alpha).shape
    zero, one = lax.full(n, 0.0, d), lax.full(n, 1.0, d)
    boost = ufuncs.greater_equal(alpha, 1.0)
    alpha_orig = alpha
    alpha = ufuncs.where(boost, alpha, ufuncs.add(alpha, 1.0))
    dd = ufuncs.subtract(alpha, 1.0 / 3.0)
    c = ufuncs.divide(1.0 / 3.0, ufuncs.sqrt(dd))

    def rejects(X, V, U):
        squeeze = ufuncs.greater_equal(U, ufuncs.subtract(1.0, ufuncs.multiply(
            0.0331, ufuncs.multiply(X, X))))
        log_test = ufuncs.greater_equal(ufuncs.log(U), ufuncs.add(
            ufuncs.multiply(X, 0.5),
            ufuncs.multiply(dd, ufuncs.add(ufuncs.subtract(1.0, V), ufuncs.log(V)))))
        return ufuncs.logical_and(squeeze, log_test)

    def pick(mask, new, old):
        if aval(new).ndim > aval(mask).ndim:
            mask = lax.broadcast_in_dim(mask, aval(new).shape, (0,))
        return ufuncs.where(mask, new, old)

    def normal_until_positive(carry):
        key, x, v = carry
        more = ufuncs.less_equal(v, 0.0)
        pair = split(key)
        x_new = normal(pair[:, 1], (), d)
        v_new = ufuncs.add(1.0, ufuncs.multiply(x_new, c))
        return pick(more, pair[:, 0], key), pick(more, x_new, x), pick(more, v_new, v)

    def attempt(carry):
        key, X, V, U = carry
        more = rejects(X, V, U)
        three = split(key, 3)
        _, x, v = while_loop(lambda kxv: reductions.any(ufuncs.less_equal(kxv[2], 0.0)),
                             normal_until_positive, (three[:, 1], zero, ufuncs.negative(one)))
        X_new = ufuncs.multiply(x, x)
        V_new = ufuncs.multiply(ufuncs.multiply(v, v), v)
        U_new = uniform(three[:, 2], (), d)
        return (pick(more, three[:, 0], key), pick(more, X_new, X), pick(more, V_new, V),
                pick(more, U_new, U))

    pair = split(keys)
    key, subkey = pair[:, 0], pair[:, 1]
    _, _, V, _ = while_loop(lambda carry: reductions.any(rejects(*carry[1:])), attempt,
                            (key, zero, one, lax.full(n, 2.0, d)))
    if log_space:
        log_samples = ufuncs.negative(exponential(subkey, (), d))
        log_boost = ufuncs.where(ufuncs.logical_or(boost, ufuncs.equal(log_samples, 0.0)),
                                 0.0, ufuncs.multiply(log_samples,
                                                      ufuncs.divide(1.0, alpha_orig)))
        return ufuncs.add(ufuncs.add(ufuncs.log(dd), ufuncs.log(V)), log_boost)
    samples = ufuncs.subtract(1.0, uniform(subkey, (), d))
    scale = ufuncs.where(boost, 1.0, ufuncs.power(samples, ufuncs.divide(1.0, alpha_orig)))
    return ufuncs.multiply(ufuncs.multiply(dd, V), scale)


def _gamma(name: str, key, a, shape, dtype, log_space: bool):
    d = _float_dtype(name, dtype)
    shape = _shape(name, shape, a)
    a = shapes.broadcast_to(_param(a, d), shape)
    if int(np.prod(shape, dtype=np.int64)) == 0:
        return a
    return _GAMMA_DRAWS[log_space](key, a)


def _gamma_grad(a, sample, log_space: bool):
    """d sample / d a (of log sample with ``log_space``), by implicit reparameterisation."""
    from fusionjit._src import special_gamma_grad as sgg
    return (sgg.random_loggamma_grad if log_space else sgg.random_gamma_grad)(a, sample)


def _draws_with_grad(log_space: bool):
    """The jitted draws as a function of (key, a) whose derivative by ``a`` is JAX's
    (``random_gamma_grad`` at the sample): the rejection loop itself has none."""
    from fusionjit._src.autodiff import with_jvp
    draws, grad = _jitted(_gamma_draws, "log_space"), _jitted(_gamma_grad, "log_space")
    return with_jvp(lambda key, a: draws(key, a, log_space=log_space), None,
                    lambda key, a, sample: grad(a, sample, log_space=log_space))


def _gamma_draws(key, a, log_space: bool):
    size = int(np.prod(aval(a).shape, dtype=np.int64))
    keys = split(key, size)
    if not _is_value(keys):  # a typed key array: its raw words
        keys = keys._data
    with batched_keys():
        flat = _gamma_lanes(keys, lax.reshape(a, (size,)), log_space)
    return lax.reshape(flat, aval(a).shape)


@functools.lru_cache(maxsize=None)
def _jitted(fn, *static_argnames):
    """``fn`` as one jitted function (as JAX's random functions are): called eagerly, its
    loops compile once per shape and dtype instead of once per call."""
    from fusionjit._src.api import jit
    return jit(fn, static_argnames=static_argnames)


_GAMMA_DRAWS = {False: _draws_with_grad(False), True: _draws_with_grad(True)}


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) floats by Marsaglia and Tsang's method, each element with its own key
    split from ``key``: JAX's draws (to the ulps of normal, log and pow between). Their
    gradient by ``a`` is JAX's implicit one (``lax.random_gamma_grad``)."""
    return _gamma("gamma", key, a, shape, dtype, False)


def loggamma(key, a, shape=None, dtype=None):
    """log of Gamma(a, 1) floats, computed in log space (accurate for small ``a``), as JAX."""
    return _gamma("loggamma", key, a, shape, dtype, True)


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) floats from two log-gamma draws, as JAX."""
    d = _float_dtype("beta", dtype)
    shape = _shape("beta", shape, a, b)
    k_a, k_b = split(key)
    log_a = loggamma(k_a, shapes.broadcast_to(_param(a, d), shape), shape, d)
    log_b = loggamma(k_b, shapes.broadcast_to(_param(b, d), shape), shape, d)
    log_max = ufuncs.maximum(log_a, log_b)
    ga = ufuncs.exp(ufuncs.subtract(log_a, log_max))
    gb = ufuncs.exp(ufuncs.subtract(log_b, log_max))
    return ufuncs.divide(ga, ufuncs.add(ga, gb))


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) vectors (the last axis of ``alpha``): softmax of log-gamma draws."""
    from fusionjit._src import nn
    d = _float_dtype("dirichlet", dtype)
    alpha_shape = tuple(np.shape(alpha)) if not _is_value(alpha) else aval(alpha).shape
    if len(alpha_shape) < 1:
        fail(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == {len(alpha_shape)}",
             ValueError)
    shape = _shape("dirichlet", shape, np.zeros(alpha_shape[:-1]))
    return nn.softmax(loggamma(key, _param(alpha, d), shape + alpha_shape[-1:], d), -1)


def chisquare(key, df, shape=None, dtype=None):
    """Chi-square floats: 2 exp(loggamma(df / 2)), as JAX."""
    d = _float_dtype("chisquare", dtype)
    shape = _shape("chisquare", shape, df)
    half = ufuncs.divide(_param(df, d), 2.0)
    return ufuncs.multiply(ufuncs.exp(loggamma(key, half, shape, d)), 2.0)


def t(key, df, shape=None, dtype=None):
    """Student's t floats: normal * sqrt(df / 2 / gamma(df / 2)), as JAX."""
    d = _float_dtype("t", dtype)
    shape = _shape("t", shape, df)
    k_n, k_g = split(key)
    n = normal(k_n, shape, d)
    half = ufuncs.divide(_param(df, d), 2.0)
    g = gamma(k_g, half, shape, d)
    return ufuncs.multiply(n, ufuncs.sqrt(ufuncs.divide(half, g)))


def f(key, dfnum, dfden, shape=None, dtype=None):
    """F floats: the ratio of two chi-squares over their degrees of freedom, as JAX."""
    d = _float_dtype("f", dtype)
    shape = _shape("f", shape, dfnum, dfden)
    dfnum, dfden = _param(dfnum, d), _param(dfden, d)
    k_den, k_num = split(key)
    num = ufuncs.divide(chisquare(k_num, dfnum, shape, d), dfnum)
    den = ufuncs.divide(chisquare(k_den, dfden, shape, d), dfden)
    return ufuncs.divide(num, den)


@eager_jit("n", "shape", "dtype", "m")
def orthogonal(key, n: int, shape=(), dtype=None, m: int | None = None):
    """Matrices (shape + (n, m), m = n by default) with orthonormal columns (or rows when
    n < m): the Q of a Gaussian matrix's QR decomposition, its columns' signs fixed by R's
    diagonal (Haar-distributed), as JAX."""
    from fusionjit._src.numpy import decompositions, linalg
    d = _float_dtype("orthogonal", dtype)
    m = n if m is None else m
    shape = shape_arg(shape, "orthogonal")
    z = normal(key, shape + (max(n, m), min(n, m)), d)
    q, r = decompositions.qr(z)
    signs = ufuncs.sign(linalg.diagonal(r))
    x = ufuncs.multiply(q, shapes.expand_dims(signs, -2))
    return shapes.swapaxes(x, -1, -2) if n < m else x


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method: str = "cholesky"):
    """Normal vectors of mean ``mean`` (..., n) and covariance ``cov`` (..., n, n):
    mean + L z for the Cholesky factor L (the default and only ``method``), as JAX."""
    from fusionjit._src.numpy import decompositions
    if method != "cholesky":
        fail(f"multivariate_normal(): method {method!r} is not supported (only 'cholesky')",
             NotImplementedError)
    d = _float_dtype("multivariate_normal", dtype)
    mean, cov = _param(mean, d), _param(cov, d)
    m_shape, c_shape = aval(mean).shape, aval(cov).shape
    if len(m_shape) < 1:
        fail(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == {len(m_shape)}",
             ValueError)
    if len(c_shape) < 2:
        fail(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == {len(c_shape)}",
             ValueError)
    n = m_shape[-1]
    if c_shape[-2:] != (n, n):
        fail(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, but got "
             f"cov.shape == {c_shape}.", ValueError)
    shape = _shape("multivariate_normal", shape, np.zeros(m_shape[:-1]), np.zeros(c_shape[:-2]))
    factor = decompositions.cholesky(cov)
    z = normal(key, shape + (n,), d)
    # einsum('...ij,...j->...i'): a product and a sum over j, broadcast over the batch.
    lz = reductions.sum(ufuncs.multiply(factor, shapes.expand_dims(z, -2)), axis=-1)
    return ufuncs.add(mean, lz)



# --- Poisson ------------------------------------------------------------------------------------

def _poisson_knuth(key, lam, d):
    """Knuth's method for every element at once (JAX's loop: one key for the whole array,
    every element stepping until its product of uniforms falls below exp(-lam))."""
    from fusionjit._src.lax.control_flow import while_loop
    shape = aval(lam).shape
    f32 = np.dtype(np.float32)
    limit = int(np.iinfo(d).max)

    def body(carry):
        i, k, rng, log_prod = carry
        pair = split(rng)
        k = ufuncs.where(ufuncs.greater(log_prod, ufuncs.negative(lam)), ufuncs.add(k, 1), k)
        u = uniform(pair[1], shape, f32)
        return ufuncs.add(i, 1), k, pair[0], ufuncs.add(log_prod, ufuncs.log(u))

    def cond(carry):
        i, _, _, log_prod = carry
        going = reductions.any(ufuncs.greater(log_prod, ufuncs.negative(lam)))
        return ufuncs.logical_and(going, ufuncs.less(i, limit))

    init = (to_array(0, np.dtype(np.int32), False), lax.full(shape, 0, d), key,
            lax.full(shape, 0.0, f32))
    k = while_loop(cond, body, init)[1]
    return ufuncs.subtract(k, to_array(1, d, False))


def _poisson_rejection(key, lam, d):
    """Hörmann's transformed rejection for every element at once, as JAX's loop."""
    from fusionjit._src.lax.control_flow import while_loop
    shape, fd = aval(lam).shape, aval(lam).dtype
    limit = int(np.iinfo(d).max)
    log_lam = ufuncs.log(lam)
    b = ufuncs.add(0.931, ufuncs.multiply(2.53, ufuncs.sqrt(lam)))
    a = ufuncs.add(-0.059, ufuncs.multiply(0.02483, b))
    inv_alpha = ufuncs.add(1.1239, ufuncs.divide(1.1328, ufuncs.subtract(b, 3.4)))
    v_r = ufuncs.subtract(0.9277, ufuncs.divide(3.6224, ufuncs.subtract(b, 2.0)))

    def body(carry):
        i, k_out, accepted, rng = carry
        three = split(rng, 3)
        u = ufuncs.subtract(uniform(three[1], shape, fd), 0.5)
        v = uniform(three[2], shape, fd)
        us = ufuncs.subtract(0.5, ufuncs.abs(u))
        k = ufuncs.floor(ufuncs.add(ufuncs.add(ufuncs.multiply(
            ufuncs.add(ufuncs.divide(ufuncs.multiply(2.0, a), us), b), u), lam), 0.43))
        s = ufuncs.log(ufuncs.divide(ufuncs.multiply(v, inv_alpha),
                                     ufuncs.add(ufuncs.divide(a, ufuncs.multiply(us, us)), b)))
        t = ufuncs.subtract(ufuncs.add(ufuncs.negative(lam), ufuncs.multiply(k, log_lam)),
                            special.lgamma(ufuncs.add(k, 1.0)))
        accept1 = ufuncs.logical_and(ufuncs.greater_equal(us, 0.07), ufuncs.less_equal(v, v_r))
        reject = ufuncs.logical_or(ufuncs.less(k, 0.0), ufuncs.logical_and(
            ufuncs.less(us, 0.013), ufuncs.greater(v, us)))
        accept = ufuncs.logical_or(accept1, ufuncs.logical_and(ufuncs.logical_not(reject),
                                                               ufuncs.less_equal(s, t)))
        return (ufuncs.add(i, 1), ufuncs.where(accept, k, k_out),
                ufuncs.logical_or(accepted, accept), three[0])

    def cond(carry):
        i, _, accepted, _ = carry
        return ufuncs.logical_and(reductions.any(ufuncs.logical_not(accepted)),
                                  ufuncs.less(i, limit))

    init = (to_array(0, np.dtype(np.int32), False), lax.full(shape, -1.0, fd),
            lax.full(shape, False, np.dtype(np.bool_)), key)
    return lax.convert_element_type(while_loop(cond, body, init)[1], d)


def _poisson_draws(key, lam, dtype_name: str):
    d = np.dtype(dtype_name)
    use_knuth = ufuncs.logical_or(ufuncs.isnan(lam), ufuncs.less(lam, 10.0))
    lam_knuth = ufuncs.where(use_knuth, lam, 0.0)
    lam_rejection = ufuncs.where(use_knuth, 1e5, lam)
    out = ufuncs.where(use_knuth, _poisson_knuth(key, lam_knuth, d),
                       _poisson_rejection(key, lam_rejection, d))
    return ufuncs.where(ufuncs.equal(lam, 0.0), to_array(0, d, False), out)


def poisson(key, lam, shape=None, dtype=None):
    """Poisson(lam) integers: Knuth's method below lam = 10, Hörmann's transformed rejection
    above, both as JAX's loops (one key for the whole array). Below 10 these are JAX's
    draws; above, lgamma's last-ulp differences from XLA's can flip an acceptance, and as
    every element keeps the last k it accepted until all have, that can move other
    elements too: the same distribution, not always the same draws."""
    d = dt.default_int() if dtype is None else dt.canonicalize(dtype)
    if not dt.is_int(d):
        fail(f"poisson(): dtype must be an integer dtype, got {d}", ValueError)
    shape = (tuple(np.shape(lam)) if not _is_value(lam) else aval(lam).shape) \
        if shape is None else shape_arg(shape, "poisson")
    lam = shapes.broadcast_to(_param(lam, np.dtype(np.float32)), shape)
    return _jitted(_poisson_draws, "dtype_name")(key, lam, dtype_name=d.name)
