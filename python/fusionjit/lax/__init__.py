"""fusionjit.lax: strict primitives, as ``jax.lax``."""

from fusionjit._src.lax.control_flow import (  # noqa: F401
    cond, fori_loop, map, scan, switch, while_loop)
from fusionjit._src.lax.lax import (  # noqa: F401
    abs, add, argmax, argmin, atan2, bitcast_convert_type, bitwise_and, bitwise_not, bitwise_or,
    bitwise_xor, broadcast, broadcast_in_dim, broadcasted_iota, ceil, clamp, concatenate,
    convert_element_type, cos, div, dot, dot_general, dynamic_index_in_dim, dynamic_slice,
    dynamic_slice_in_dim, dynamic_update_index_in_dim, dynamic_update_slice,
    dynamic_update_slice_in_dim, eq, exp, expand_dims, expm1, floor, fma, full, gather,
    GatherDimensionNumbers, ge, gt, index_in_dim, integer_pow, iota, is_finite, le, log, log1p,
    lt, max, min, mul, ne, neg, pad, population_count, pow, reciprocal, reduce_and, reduce_max,
    reduce_min, reduce_or, reduce_prod, reduce_sum, rem, reshape, rev, round, RoundingMethod,
    rsqrt, scatter, scatter_add, scatter_max, scatter_min, scatter_mul, ScatterDimensionNumbers,
    select, select_n, shift_left, shift_right_arithmetic, shift_right_logical, sign, sin, slice,
    slice_in_dim, sqrt, square, squeeze, stop_gradient, sub, tan, tanh, transpose)
from fusionjit._src.lax.common import Precision  # noqa: F401
from fusionjit._src.lax.linear_solve import custom_linear_solve, custom_root  # noqa: F401
from fusionjit._src.lax.misc import (  # noqa: F401
    approx_max_k, approx_min_k, batch_matmul, broadcast_like, broadcast_shapes, broadcast_to_rank,
    clz, collapse, conv_general_dilated_patches, conv_general_permutations,
    conv_general_shape_tuple, conv_shape_tuple, conv_transpose_shape_tuple, dtype, empty,
    full_like, index_take, mulhi, nextafter, optimization_barrier, reduce_window_shape_tuple,
    scatter_apply, scatter_sub, split, stack, tile, unstack)
from fusionjit._src.lax.reduce_ops import reduce, reduce_precision, reduce_xor  # noqa: F401,A004
from fusionjit._src.lax.scans import (  # noqa: F401
    associative_scan, cumlogsumexp, cummax, cummin, cumprod, cumsum)
from fusionjit._src.lax.sorting import sort, sort_key_val, top_k  # noqa: F401
from fusionjit._src.special import (  # noqa: F401
    lax_digamma as digamma, lax_erf as erf, lax_erf_inv as erf_inv, lax_erfc as erfc,
    lax_lgamma as lgamma)
from fusionjit._src.nn import sigmoid as logistic  # noqa: F401
from fusionjit._src.lax.convolution import (  # noqa: F401
    ConvDimensionNumbers, conv, conv_dimension_numbers, conv_general_dilated,
    conv_with_general_padding, padtype_to_pads, reduce_window)
from fusionjit._src.lax.conv_transpose import conv_transpose  # noqa: F401
from fusionjit._src.special_gamma_grad import random_gamma_grad  # noqa: F401
from fusionjit._src.special_igamma import (  # noqa: F401
    igamma, igamma_grad_a, igammac, lax_betainc as betainc)
from fusionjit._src.special_bessel import (  # noqa: F401
    lax_bessel_i0e as bessel_i0e, lax_bessel_i1e as bessel_i1e)
from fusionjit._src.special_zeta import lax_polygamma as polygamma, lax_zeta as zeta  # noqa: F401
from fusionjit._src.collectives import (  # noqa: F401
    all_gather, axis_index, axis_size, pmax, pmean, pmin, psum)


def _strict_float(name: str, fn):
    """``jax.lax.<name>``: as ``fusionjit.numpy``'s, on floating-point operands only (lax
    promotes nothing)."""
    from fusionjit._src import dtypes as _dt, errors as _errors
    from fusionjit._src.numpy.util import aval as _aval, to_array as _to_array

    def op(x):
        x = _to_array(x)
        if not _dt.is_float(_aval(x).dtype):
            raise TypeError(_errors.located(
                f"lax.{name} does not accept dtype {_aval(x).dtype}: it takes floating-point "
                f"operands (fusionjit.numpy.{fn.__name__} converts integers first)"))
        return fn(x)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``jax.lax.{name}``: {fn.__name__} of a floating-point operand, elementwise."
    return op


def _strict_floats():
    from fusionjit._src.numpy import math_ufuncs as _m, ufuncs as _u
    pairs = {"sinh": _m.sinh, "cosh": _m.cosh, "asin": _m.arcsin, "acos": _m.arccos,
             "atan": _m.arctan, "asinh": _m.arcsinh, "acosh": _m.arccosh, "atanh": _m.arctanh,
             "cbrt": _m.cbrt, "exp2": _u.exp2}
    return {name: _strict_float(name, fn) for name, fn in pairs.items()}


globals().update(_strict_floats())
