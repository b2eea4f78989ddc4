"""fusionjit.Array: the C++ array type, with NumPy-style operators and methods attached
here. Operations on Arrays outside jit run eagerly, one compiled primitive at a time."""

from __future__ import annotations

import numpy as np

from fusionjit import _core
from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src import errors

Array = _core.Array
core._ARRAY_TYPE[0] = Array


def from_numpy(x: np.ndarray, dtype=None, weak_type: bool = False) -> Array:
    """Copies a NumPy array into a new Array of the canonical dtype."""
    target = dt.canonicalize(x.dtype if dtype is None else dtype)
    if x.dtype != target:
        x = x.astype(target)
    if not x.flags.c_contiguous:
        x = x.copy()  # (np.ascontiguousarray would make a 0-d array 1-d)
    return _core.array_from_numpy(x, weak_type)


def view_of_numpy(x: np.ndarray) -> Array | None:
    """An Array sharing ``x``'s memory (zero copy; it keeps ``x`` alive) when ``x`` is
    C-contiguous, 64-byte aligned and of a supported dtype as it is; else None."""
    return _core.array_view_of_numpy(x, False)


def scalar(value, dtype, weak: bool) -> Array:
    return _core.array_from_numpy(np.asarray(value, dtype=dtype), weak)


def _repr(self) -> str:
    value = np.asarray(self)
    body = np.array2string(value, separator=", ", prefix="Array(")
    weak = ", weak_type=True" if self.weak_type else ""
    shape = f", shape={value.shape}" if value.size == 0 else ""  # ([] says nothing of it)
    return f"Array({body}{shape}, dtype={value.dtype}{weak})"


def _round(self, ndigits=None):
    """round(x), as JAX's: the nearest integer (half to even) as a Python int for an array
    of one element; with ``ndigits``, fusionjit.numpy.round(x, ndigits)."""
    if ndigits is None:
        return int(np.round(_scalar_value(self, float, "a Python int")))
    from fusionjit._src.numpy.ufuncs import round as round_
    return round_(self, ndigits)


def _str(self) -> str:
    return str(np.asarray(self))


def _scalar_value(self, convert, what):
    if self.size != 1:
        raise TypeError(errors.located(
            f"only arrays of size 1 can be converted to {what}; this one has shape {self.shape}"))
    return convert(np.asarray(self).reshape(()).item())


def _bool(self):
    if self.size != 1:
        raise ValueError(errors.located(
            f"the truth value of an array with {self.size} elements is ambiguous; use .any() "
            f"or .all()"))
    return bool(np.asarray(self).reshape(()).item())


def _index(self):
    if not dt.is_int(self.dtype) and not dt.is_bool(self.dtype):
        raise TypeError(errors.located(
            f"only integer arrays can be used as an index, not {self.dtype}"))
    return _scalar_value(self, int, "a Python int")


def _len(self):
    if not self.shape:
        raise TypeError(errors.located("len() of a 0-d array"))
    return self.shape[0]


def _iter(self):
    if not self.shape:
        raise TypeError(errors.located("iteration over a 0-d array"))
    return (self[i] for i in range(self.shape[0]))


def _install_python_methods() -> None:
    Array.__repr__ = _repr
    Array.__str__ = _str
    Array.__bool__ = _bool
    Array.__int__ = lambda self: _scalar_value(self, int, "a Python int")
    Array.__float__ = lambda self: _scalar_value(self, float, "a Python float")
    Array.__index__ = _index
    Array.__len__ = _len
    Array.__iter__ = _iter
    Array.__hash__ = None
    Array.__array_priority__ = 100
    # Where the elements are: "cpu", or the GPU's description (they stay there until NumPy
    # reads them).
    Array.device = property(lambda self: self._device)
    Array.devices = lambda self: {self._device}
    Array.__round__ = _round
    Array.item = lambda self, *args: np.asarray(self).item(*args)
    Array.tolist = lambda self: np.asarray(self).tolist()
    Array.copy = lambda self: from_numpy(np.array(self), weak_type=self.weak_type)
    Array.__format__ = lambda self, spec: (format(self.item(), spec) if self.shape == ()
                                          else format(str(self), spec))


_install_python_methods()
