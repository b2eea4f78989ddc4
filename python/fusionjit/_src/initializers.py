"""``fusionjit.nn.initializers``: JAX's initialisers. Each factory returns
``init(key, shape, dtype=dtype)``; the draws are fusionjit.random's, so the weights are
JAX's for the same key (to the few ulp random_dists.py states)."""

from __future__ import annotations

import math

from fusionjit._src import dtypes as dt
from fusionjit._src import random, random_dists
from fusionjit._src.numpy import shapes, ufuncs
from fusionjit._src.numpy.util import fail, shape_arg, to_array


def _dtype(dtype):
    return dt.default_float() if dtype is None else dt.canonicalize(dtype)


def zeros(key, shape, dtype=None):
    """An array of zeros (the key is not used)."""
    return shapes.zeros(shape_arg(shape, "zeros"), _dtype(dtype))


def ones(key, shape, dtype=None):
    """An array of ones (the key is not used)."""
    return shapes.ones(shape_arg(shape, "ones"), _dtype(dtype))


def constant(value, dtype=None):
    def init(key, shape, dtype=dtype):
        return shapes.broadcast_to(to_array(value, _dtype(dtype), False),
                                   shape_arg(shape, "constant"))
    return init


def uniform(scale=1e-2, dtype=None):
    """Uniform in [0, scale)."""
    def init(key, shape, dtype=dtype):
        d = _dtype(dtype)
        return ufuncs.multiply(random.uniform(key, shape, d), to_array(scale, d, False))
    return init


def normal(stddev=1e-2, dtype=None):
    """Normal with standard deviation ``stddev``."""
    def init(key, shape, dtype=dtype):
        d = _dtype(dtype)
        return ufuncs.multiply(random.normal(key, shape, d), to_array(stddev, d, False))
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """``stddev`` times a standard normal truncated to (lower, upper)."""
    def init(key, shape, dtype=dtype):
        d = _dtype(dtype)
        draws = random_dists.truncated_normal(key, lower, upper, shape, d)
        return ufuncs.multiply(draws, to_array(stddev, d, False))
    return init


def _fans(shape, in_axis, out_axis, batch_axis):
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        fail(f"Can't compute input and output sizes of a {len(shape)}-dimensional weights "
             "tensor with default in_axis. Must be at least 2D or specify in_axis explicitly.",
             ValueError)

    def size(axes):
        return shape[axes] if isinstance(axes, int) else math.prod(shape[i] for i in axes)
    in_size, out_size, batch_size = size(in_axis), size(out_axis), size(batch_axis)
    receptive = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive, out_size * receptive


def variance_scaling(scale, mode: str, distribution: str, in_axis=-2, out_axis=-1,
                     batch_axis=(), dtype=None):
    """Draws with variance ``scale / n``, n the fan-in, fan-out, their mean or geometric
    mean (``mode``), from a truncated normal, a normal or a uniform (``distribution``)."""
    if mode not in ("fan_in", "fan_out", "fan_avg", "fan_geo_avg"):
        fail(f"invalid mode for variance scaling initializer: {mode}", ValueError)
    if distribution not in ("truncated_normal", "normal", "uniform"):
        fail(f"invalid distribution for variance scaling initializer: {distribution}",
             ValueError)

    def init(key, shape, dtype=dtype):
        shape = shape_arg(shape, "variance_scaling")
        d = _dtype(dtype)
        fan_in, fan_out = _fans(shape, in_axis, out_axis, batch_axis)
        denominator = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
                       "fan_geo_avg": (fan_in * fan_out) ** 0.5}[mode]
        variance = to_array(scale / denominator, d, False)
        if distribution == "truncated_normal":
            # The standard deviation of a standard normal truncated to (-2, 2).
            stddev = ufuncs.divide(ufuncs.sqrt(variance), to_array(.87962566103423978, d, False))
            return ufuncs.multiply(random_dists.truncated_normal(key, -2, 2, shape, d), stddev)
        if distribution == "normal":
            return ufuncs.multiply(random.normal(key, shape, d), ufuncs.sqrt(variance))
        return ufuncs.multiply(random.uniform(key, shape, d, -1),
                               ufuncs.sqrt(ufuncs.multiply(variance, 3.0)))
    return init


def _scaling(scale, mode, distribution, doc):
    def factory(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
        return variance_scaling(scale, mode, distribution, in_axis, out_axis, batch_axis, dtype)
    factory.__doc__ = doc
    return factory


glorot_uniform = _scaling(1.0, "fan_avg", "uniform", "Glorot (Xavier) uniform.")
glorot_normal = _scaling(1.0, "fan_avg", "truncated_normal", "Glorot (Xavier) normal.")
lecun_uniform = _scaling(1.0, "fan_in", "uniform", "LeCun uniform.")
lecun_normal = _scaling(1.0, "fan_in", "truncated_normal", "LeCun normal.")
he_uniform = _scaling(2.0, "fan_in", "uniform", "He (Kaiming) uniform.")
he_normal = _scaling(2.0, "fan_in", "truncated_normal", "He (Kaiming) normal.")
xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


def orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """``scale`` times a matrix with orthonormal rows or columns (the columns along
    ``column_axis``, every other axis flattened into rows), as JAX."""
    def init(key, shape, dtype=dtype):
        shape = shape_arg(shape, "orthogonal")
        d = _dtype(dtype)
        if len(shape) < 2:
            fail("orthogonal initializer requires at least a 2D shape", ValueError)
        if any(s == 0 for s in shape):
            return shapes.zeros(shape, d)
        n_cols = shape[column_axis]
        n_rows = math.prod(shape) // n_cols
        q = random_dists.orthogonal(key, n_rows, (), d, n_cols)
        rest = tuple(s for i, s in enumerate(shape) if i != column_axis % len(shape))
        q = shapes.moveaxis(shapes.reshape(q, rest + (n_cols,)), -1, column_axis)
        return ufuncs.multiply(to_array(scale, d, False), q)
    return init


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """Convolution kernels (3-D to 5-D) that are zero but at the centre tap, an orthogonal
    matrix there (Xiao et al. 2018), as JAX."""
    def init(key, shape, dtype=dtype):
        shape = shape_arg(shape, "delta_orthogonal")
        d = _dtype(dtype)
        if len(shape) not in (3, 4, 5):
            fail("Delta orthogonal initializer requires a 3D, 4D or 5D shape.", ValueError)
        if shape[-1] < shape[-2]:
            fail("`fan_in` must be less or equal than `fan_out`. ", ValueError)
        centre = orthogonal(scale, column_axis, d)(key, shape[-2:])
        w = shapes.zeros(shape, d)
        index = tuple((k - 1) // 2 for k in shape[:-2])
        return w.at[index].set(centre)
    return init
