"""fusionjit.numpy: NumPy's API on fusionjit arrays (``import fusionjit.numpy as fnp``)."""

import numpy as _np

from fusionjit._src.array import Array as ndarray  # noqa: F401
from fusionjit._src.numpy.indexing import getitem as _getitem  # noqa: F401
from fusionjit._src.numpy.products import dot, inner, matmul, outer, vdot  # noqa: F401
from fusionjit._src.numpy.reductions import (  # noqa: F401
    all, amax, amin, any, argmax, argmin, max, mean, min, prod, sum)
from fusionjit._src.numpy.shapes import (  # noqa: F401
    arange, array, asarray, astype, broadcast_arrays, broadcast_to, concatenate, expand_dims,
    eye, flip, full, full_like, identity, linspace, moveaxis, ndim, ones, ones_like, ravel,
    reshape, shape, size, split, squeeze, stack, swapaxes, transpose, zeros, zeros_like)
from fusionjit._src.numpy.ufuncs import (  # noqa: F401
    abs, absolute, add, arctan2, around, bitwise_and, bitwise_not, bitwise_or, bitwise_xor,
    ceil, clip, cos, divide, divmod, equal, exp, exp2, expm1, floor, floor_divide, greater,
    greater_equal, invert, isfinite, isinf, isnan, isscalar, left_shift, less, less_equal, log,
    log1p, log2, log10, logical_and, logical_not, logical_or, logical_xor, maximum, minimum,
    mod, multiply, negative, not_equal, positive, power, reciprocal, remainder, right_shift,
    round, sign, sin, sqrt, square, subtract, tan, tanh, true_divide, where)

bool_ = _np.bool_
int32 = _np.int32
int64 = _np.int64
uint32 = _np.uint32
uint64 = _np.uint64
float32 = _np.float32
float64 = _np.float64
dtype = _np.dtype
finfo = _np.finfo
iinfo = _np.iinfo
pi = _np.pi
e = _np.e
inf = _np.inf
nan = _np.nan
newaxis = None


def promote_types(a, b):
    from fusionjit._src import dtypes as _dt
    return _dt.promote_dtypes(a, b)


def result_type(*args):
    from fusionjit._src import core as _core_mod
    from fusionjit._src import dtypes as _dt
    pairs = []
    for a in args:
        if isinstance(a, (type, _np.dtype, str)):
            pairs.append((_dt.canonicalize(a), False))
        else:
            av = _core_mod.get_aval(a)
            pairs.append((av.dtype, av.weak_type))
    return _dt.promote(pairs)[0]
