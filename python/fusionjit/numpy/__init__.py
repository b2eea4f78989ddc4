"""fusionjit.numpy: NumPy's API on fusionjit arrays (``import fusionjit.numpy as fnp``)."""

import numpy as _np

from fusionjit._src.numpy.scalar_types import scalar_type as _scalar_type

from fusionjit._src.array import Array as ndarray  # noqa: F401
from fusionjit._src.interop import from_dlpack  # noqa: F401
from fusionjit.numpy import linalg  # noqa: F401
from fusionjit._src.numpy.contractions import (  # noqa: F401
    cross, einsum, kron, matrix_transpose, tensordot, vecdot)
from fusionjit._src.numpy.dtype_info import (  # noqa: F401
    __array_namespace_info__, can_cast, finfo, iinfo, isdtype)
from fusionjit._src.numpy.extras import (  # noqa: F401
    bincount, bool, diff, digitize, double, ediff1d, float_, floating, generic, geomspace,
    inexact, int_, integer, interp, isin, issubdtype, ix_, logspace, nanargmax, nanargmin, number,
    put_along_axis, signedinteger, single, trapezoid, uint, unsignedinteger, vander)
from fusionjit._src.numpy.functional import (  # noqa: F401
    apply_along_axis, apply_over_axes, fromfunction, matvec, vecmat, vectorize)
from fusionjit._src.numpy.gather import take, take_along_axis  # noqa: F401
from fusionjit._src.numpy.histograms import (  # noqa: F401
    histogram, histogram2d, histogram_bin_edges, histogramdd)
from fusionjit._src.numpy.index_tricks import (  # noqa: F401
    block, c_, index_exp, mask_indices, mgrid, ogrid, r_, s_)
from fusionjit._src.numpy.indexing import getitem as _getitem  # noqa: F401
from fusionjit._src.numpy.manipulation import (  # noqa: F401
    append, array_equal, array_equiv, array_split, atleast_1d, atleast_2d, atleast_3d,
    broadcast_shapes, column_stack, concat, copy, delete, diag, diag_indices,
    diag_indices_from, diagflat, diagonal, dsplit, dstack, empty, empty_like, fill_diagonal,
    fliplr, flipud, hsplit, hstack, indices, insert, meshgrid, permute_dims, piecewise,
    ravel_multi_index, repeat, resize, roll, rollaxis, rot90, select, tile, trace, tri, tril,
    tril_indices, tril_indices_from, triu, triu_indices, triu_indices_from, unravel_index,
    unstack, vsplit, vstack)
from fusionjit._src.numpy.math_ufuncs import (  # noqa: F401
    acos, acosh, allclose, angle, arccos, arccosh, arcsin, arcsinh, arctan, arctanh, asin,
    asinh, atan, atan2, atanh, bitwise_count, cbrt, conj, conjugate, copysign, cosh, deg2rad,
    degrees, fabs, fix, float_power, fmax, fmin, fmod, frexp, gcd, heaviside, hypot, imag,
    iscomplex, iscomplexobj, isclose, isneginf, isposinf, isreal, isrealobj, lcm, ldexp,
    logaddexp, logaddexp2, modf, nan_to_num, nextafter, rad2deg, radians, real, rint, signbit,
    sinc, sinh, trunc)
from fusionjit._src.numpy.nanquantiles import (  # noqa: F401
    nanmedian, nanpercentile, nanquantile)
from fusionjit._src.numpy.numerical import (  # noqa: F401
    convolve, corrcoef, correlate, cov, gradient, spacing, unwrap)
from fusionjit._src.numpy.numpy_io import (  # noqa: F401
    array_repr, array_str, character, flexible, frombuffer, fromfile, fromiter, fromstring,
    get_printoptions, iterable, load, object_, printoptions, save, savez, set_printoptions)
from fusionjit._src.numpy.padding import pad  # noqa: F401
from fusionjit._src.numpy.polynomials import (  # noqa: F401
    poly, polyadd, polyder, polydiv, polyfit, polyint, polymul, polysub, polyval)
from fusionjit._src.numpy.products import dot, inner, matmul, outer, vdot  # noqa: F401
from fusionjit._src.numpy.selection import (  # noqa: F401
    argpartition, choose, compress, extract, packbits, partition, place, put, trim_zeros,
    unpackbits)
from fusionjit._src.numpy.setops import (  # noqa: F401
    intersect1d, setdiff1d, setxor1d, union1d)
from fusionjit._src.numpy.sorting import (  # noqa: F401
    argsort, argwhere, flatnonzero, lexsort, nonzero, searchsorted, sort, unique, unique_all,
    unique_counts, unique_inverse, unique_values)
from fusionjit._src.numpy.statistics import (  # noqa: F401
    average, count_nonzero, cumprod, cumsum, cumulative_prod, cumulative_sum, median, nancumprod,
    nancumsum, nanmax, nanmean, nanmin, nanprod, nanstd, nansum, nanvar, percentile, ptp,
    quantile, std, var)
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
from fusionjit._src.numpy.windows import (  # noqa: F401
    bartlett, blackman, hamming, hanning, i0, kaiser)

# Called eagerly, these run as one compiled program each (eager.py; cumsum, var, pad and
# the like are so where they are defined, the ufuncs through one_program). Not those whose
# result's shape depends on values (unique, nonzero, the set operations), nor the
# constructors, nor those that take functions.
from fusionjit._src.eager import eager_namespace as _eager_namespace  # noqa: E402

_eager_namespace(globals(), [
    "angle", "append", "argpartition", "array_split", "average", "choose", "column_stack",
    "concat", "concatenate", "convolve", "corrcoef", "correlate", "count_nonzero", "cov",
    "cross", "diagflat", "digitize", "dstack", "ediff1d", "frexp", "gradient", "heaviside",
    "histogram", "histogram2d", "histogram_bin_edges", "hstack", "i0", "interp", "isin",
    "kaiser", "kron", "lexsort", "matvec", "median", "modf", "nanargmax", "nanargmin",
    "nanmax", "nanmean", "nanmedian", "nanmin", "nanpercentile", "nanprod", "nanquantile",
    "nanstd", "nansum", "nanvar", "outer", "packbits", "partition", "percentile", "polyadd",
    "polyder", "polyfit", "polyint", "polymul", "polysub", "polyval", "ptp", "quantile",
    "searchsorted", "sinc", "spacing", "split", "stack", "tensordot", "trace", "trapezoid",
    "unpackbits", "unstack", "unwrap", "vander", "vdot", "vecdot", "vecmat", "vstack"])

# The array API's names for NumPy's functions.
bitwise_left_shift = left_shift
bitwise_right_shift = right_shift
bitwise_invert = invert
pow = power  # noqa: A001

bool_ = _scalar_type(_np.bool_)
int8 = _scalar_type(_np.int8)
int16 = _scalar_type(_np.int16)
int32 = _scalar_type(_np.int32)
int64 = _scalar_type(_np.int64)
uint8 = _scalar_type(_np.uint8)
uint16 = _scalar_type(_np.uint16)
uint32 = _scalar_type(_np.uint32)
uint64 = _scalar_type(_np.uint64)
float16 = _scalar_type(_np.float16)
float32 = _scalar_type(_np.float32)
float64 = _scalar_type(_np.float64)
try:
    from ml_dtypes import bfloat16 as _bfloat16
    bfloat16 = _scalar_type(_bfloat16)  # (as jax.numpy.bfloat16)
except ImportError:  # pragma: no cover
    pass
dtype = _np.dtype
__array_api_version__ = "2023.12"
pi = _np.pi
e = _np.e
euler_gamma = _np.euler_gamma
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
