"""Thin wrappers over NumPy, as ``jax.numpy`` has them: printing (array_repr, array_str,
the print options), files (load, save, savez), arrays from bytes and text (frombuffer,
fromstring; fromiter and fromfile refuse, as in JAX), ``iterable`` and NumPy's scalar type
names character, flexible and object_ (for ``issubdtype``; fusionjit has no such arrays)."""

from __future__ import annotations

import numpy as np

from fusionjit._src import dtypes as dt
from fusionjit._src.numpy import shapes
from fusionjit._src.numpy.util import fail

# NumPy's own functions: they read fusionjit arrays through ``__array__``.
array_repr = np.array_repr
array_str = np.array_str
get_printoptions = np.get_printoptions
printoptions = np.printoptions
set_printoptions = np.set_printoptions
save = np.save
savez = np.savez
iterable = np.iterable

character, flexible, object_ = np.character, np.flexible, np.object_


def _to_fusionjit(value: np.ndarray):
    """``value`` as a fusionjit array where its dtype is supported, else as it is."""
    if value.dtype.kind in "biuf" or dt.is_float(value.dtype):
        return shapes.asarray(value)
    return value


def load(file, *args, **kwargs):
    """``numpy.load``, arrays of supported dtypes returned as fusionjit arrays (an .npz
    archive comes back as NumPy's lazy mapping, as in JAX)."""
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray):
        if out.dtype == "V2" and dt.bfloat16 is not None:
            out = out.view(dt.bfloat16)  # how NumPy stores bfloat16
        return _to_fusionjit(out)
    return out


def frombuffer(buffer, dtype=float, count: int = -1, offset: int = 0):
    """A 1-D array of the ``dtype`` values in ``buffer`` (copied)."""
    return shapes.asarray(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset))


def fromstring(string: str, dtype=float, count: int = -1, *, sep: str):
    """A 1-D array of the numbers in ``string``, separated by ``sep``."""
    return shapes.asarray(np.fromstring(string, dtype=dtype, count=count, sep=sep))


def fromiter(*args, **kwargs):
    """Not implemented, as in JAX: consuming an iterator is a side effect that jit would run
    once, at trace time. Use ``fusionjit.numpy.asarray(numpy.fromiter(...))`` outside jit."""
    fail("fromiter is not implemented (as in JAX): consuming an iterator is a side effect "
         "that jit runs only once, while tracing; use fusionjit.numpy.asarray("
         "numpy.fromiter(...)) outside jit", NotImplementedError)


def fromfile(*args, **kwargs):
    """Not implemented, as in JAX: reading a file is a side effect that jit would run once,
    at trace time. Use ``fusionjit.numpy.asarray(numpy.fromfile(...))`` outside jit."""
    fail("fromfile is not implemented (as in JAX): reading a file is a side effect that jit "
         "runs only once, while tracing; use fusionjit.numpy.asarray(numpy.fromfile(...)) "
         "outside jit", NotImplementedError)
