"""NumPy-style operators and methods, attached to fusionjit.Array and to tracers so that
the same code runs eagerly and under jit."""

from __future__ import annotations

from fusionjit._src import core
from fusionjit._src.numpy import indexing, products, reductions, shapes, ufuncs


def _defer(op, reflected=False):
    def method(self, other):
        if isinstance(other, complex):
            from fusionjit._src import dtypes
            dtypes.scalar_info(other)  # raises: complex numbers are not supported
        # Let NumPy arrays of objects and unknown types decide for themselves.
        if not ufuncs.isscalar(other) and not _is_arraylike(other):
            return NotImplemented
        return op(other, self) if reflected else op(self, other)
    return method


def _is_arraylike(x) -> bool:
    import numpy as np
    return isinstance(x, (core.Tracer, np.ndarray, np.generic)) or core.is_concrete_array(x)


def _reshape(self, *shape, order="C"):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return shapes.reshape(self, shape, order)


def _transpose(self, *axes):
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = axes[0]
    return shapes.transpose(self, axes or None)


def _forward(name):
    """The method `x.name(...)` as `fusionjit.numpy.name(x, ...)`, as JAX's Array has it."""
    def method(self, *args, **kwargs):
        from fusionjit import numpy as fnp
        return getattr(fnp, name)(self, *args, **kwargs)
    method.__name__ = name
    method.__doc__ = f"Same as ``fusionjit.numpy.{name}(self, ...)``."
    return method


def _compress(self, condition, axis=None, **kwargs):
    from fusionjit import numpy as fnp
    return fnp.compress(condition, self, axis, **kwargs)


def _view(self, dtype=None, type=None):
    """The same bits read as `dtype`, as JAX's ``Array.view``: with a wider or narrower type
    the last axis shrinks or grows by the ratio of the widths (little-endian order)."""
    import numpy as np

    from fusionjit import lax
    from fusionjit._src import dtypes
    from fusionjit._src.numpy.util import fail
    if type is not None:
        fail("view: the 'type' argument is not supported (fusionjit has one array type)",
             NotImplementedError)
    if dtype is None:
        return self
    old, new = np.dtype(self.dtype), dtypes.canonicalize(dtype)
    if old == new:
        return self
    # bool is a byte, as in NumPy and JAX.
    if old == np.bool_:
        return _view(self.astype(np.uint8), new)
    if new == np.bool_:
        return _view(self, np.uint8) != 0
    if old.itemsize == new.itemsize:
        return lax.bitcast_convert_type(self, new)
    if self.ndim == 0:
        fail(f"view: a 0-d array of {old} cannot be viewed as {new} (a different width)",
             ValueError)
    unsigned = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
    small, large = sorted((old.itemsize, new.itemsize))
    wide, narrow, ratio, bits = unsigned[large], unsigned[small], large // small, 8 * small
    from fusionjit import numpy as fnp
    if old.itemsize > new.itemsize:   # each element splits into `ratio` narrower ones
        u = lax.bitcast_convert_type(self, wide)
        parts = [(u >> np.array(k * bits, wide)).astype(narrow) for k in range(ratio)]
        out = fnp.stack(parts, axis=-1).reshape(*self.shape[:-1], self.shape[-1] * ratio)
        return lax.bitcast_convert_type(out, new)
    if self.shape[-1] % ratio:
        fail(f"view: the last axis ({self.shape[-1]}) must be a multiple of {ratio} to view "
             f"{old} as {new}", ValueError)
    u = lax.bitcast_convert_type(self, narrow)
    u = u.reshape(*self.shape[:-1], self.shape[-1] // ratio, ratio)
    out = u[..., 0].astype(wide)
    for k in range(1, ratio):
        out = out | (u[..., k].astype(wide) << np.array(k * bits, wide))
    return lax.bitcast_convert_type(out, new)


def _tobytes(self, order="C"):
    import numpy as np
    return np.asarray(self).tobytes(order)


_METHODS = {
    "__add__": _defer(ufuncs.add), "__radd__": _defer(ufuncs.add, True),
    "__sub__": _defer(ufuncs.subtract), "__rsub__": _defer(ufuncs.subtract, True),
    "__mul__": _defer(ufuncs.multiply), "__rmul__": _defer(ufuncs.multiply, True),
    "__truediv__": _defer(ufuncs.true_divide), "__rtruediv__": _defer(ufuncs.true_divide, True),
    "__floordiv__": _defer(ufuncs.floor_divide), "__rfloordiv__": _defer(ufuncs.floor_divide, True),
    "__mod__": _defer(ufuncs.remainder), "__rmod__": _defer(ufuncs.remainder, True),
    "__divmod__": _defer(ufuncs.divmod), "__rdivmod__": _defer(ufuncs.divmod, True),
    "__pow__": _defer(ufuncs.power), "__rpow__": _defer(ufuncs.power, True),
    "__matmul__": _defer(products.matmul), "__rmatmul__": _defer(products.matmul, True),
    "__and__": _defer(ufuncs.bitwise_and), "__rand__": _defer(ufuncs.bitwise_and, True),
    "__or__": _defer(ufuncs.bitwise_or), "__ror__": _defer(ufuncs.bitwise_or, True),
    "__xor__": _defer(ufuncs.bitwise_xor), "__rxor__": _defer(ufuncs.bitwise_xor, True),
    "__lshift__": _defer(ufuncs.left_shift), "__rlshift__": _defer(ufuncs.left_shift, True),
    "__rshift__": _defer(ufuncs.right_shift), "__rrshift__": _defer(ufuncs.right_shift, True),
    "__eq__": _defer(ufuncs.equal), "__ne__": _defer(ufuncs.not_equal),
    "__lt__": _defer(ufuncs.less), "__le__": _defer(ufuncs.less_equal),
    "__gt__": _defer(ufuncs.greater), "__ge__": _defer(ufuncs.greater_equal),
    "__neg__": ufuncs.negative, "__pos__": ufuncs.positive, "__abs__": ufuncs.absolute,
    "__invert__": ufuncs.invert,
    "__getitem__": indexing.getitem,
    "astype": shapes.astype,
    "reshape": _reshape,
    "transpose": _transpose,
    "T": property(lambda self: shapes.transpose(self)),
    "swapaxes": shapes.swapaxes,
    "squeeze": shapes.squeeze,
    "ravel": shapes.ravel,
    "flatten": shapes.ravel,
    "sum": reductions.sum, "prod": reductions.prod, "max": reductions.max,
    "min": reductions.min, "mean": reductions.mean, "argmax": reductions.argmax,
    "argmin": reductions.argmin, "any": reductions.any, "all": reductions.all,
    "dot": products.dot, "clip": ufuncs.clip, "round": ufuncs.round,
    # The rest of JAX's Array methods (jax/_src/numpy/array_methods.py), each the function.
    **{name: _forward(name) for name in (
        "argpartition", "argsort", "choose", "conj", "conjugate", "cumprod", "cumsum",
        "diagonal", "nonzero", "ptp", "repeat", "searchsorted", "sort", "std", "take",
        "trace", "var")},
    "compress": _compress,
    "view": _view,
    "real": property(lambda self: _forward("real")(self)),
    "imag": property(lambda self: _forward("imag")(self)),
    "mT": property(lambda self: _forward("matrix_transpose")(self)),
}


def install(cls) -> None:
    for name, fn in _METHODS.items():
        setattr(cls, name, fn)


def install_all() -> None:
    from fusionjit._src.array import Array
    install(core.Tracer)
    install(Array)
    Array.tobytes = _tobytes   # concrete arrays only, as in JAX
    core.Tracer.copy = _forward("copy")
    Array.__hash__ = None
