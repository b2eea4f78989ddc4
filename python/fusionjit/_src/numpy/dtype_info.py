"""Data type functions of the array API with JAX's answers: can_cast, isdtype, finfo, iinfo,
and ``__array_namespace_info__`` (devices and default dtypes)."""

from __future__ import annotations

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.numpy.util import fail

_KINDS = {
    "bool": lambda d: dt.is_bool(d),
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: d.kind == "u",
    "integral": lambda d: d.kind in "iu",
    "real floating": lambda d: dt.is_float(d),
    "complex floating": lambda d: d.kind == "c",
    "numeric": lambda d: d.kind in "iufc" or dt.is_float(d),
}


def _as_dtype(x, name):
    if isinstance(x, core.Tracer) or core.is_concrete_array(x) or isinstance(x, np.ndarray):
        return np.dtype(x.dtype)
    try:
        return dt.dtype(x)
    except TypeError:
        fail(f"{name}: expected a dtype or an array, got {x!r}")


def can_cast(from_, to, casting: str = "safe") -> bool:
    """Whether ``from_`` (a dtype or an array) can be cast to ``to`` under ``casting``
    (NumPy's rules; the array API's default 'safe')."""
    return bool(np.can_cast(_as_dtype(from_, "can_cast"), _as_dtype(to, "can_cast"), casting))


def isdtype(dtype, kind) -> bool:
    """Whether ``dtype`` is of ``kind``: a dtype, a kind name ('bool', 'signed integer',
    'unsigned integer', 'integral', 'real floating', 'complex floating', 'numeric'), or a
    tuple of these."""
    d = _as_dtype(dtype, "isdtype")
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str):
            if k not in _KINDS:
                fail(f"isdtype: unknown kind {k!r}; kinds: {', '.join(_KINDS)}", ValueError)
            if _KINDS[k](d):
                return True
        elif d == _as_dtype(k, "isdtype"):
            return True
    return False


def finfo(dtype):
    """Machine limits of a float dtype (or of an array's dtype)."""
    d = _as_dtype(dtype, "finfo")
    if not dt.is_float(d):
        fail(f"finfo needs a floating-point dtype, got {d}", ValueError)
    return dt.finfo(d)


def iinfo(int_type):
    """Machine limits of an integer dtype (or of an array's dtype)."""
    d = _as_dtype(int_type, "iinfo")
    if d.kind not in "iu":
        fail(f"iinfo needs an integer dtype, got {d}", ValueError)
    return np.iinfo(d)


class _NamespaceInfo:
    """What ``__array_namespace_info__()`` reports: one CPU device, and the dtypes as the
    current x64 setting makes them."""

    def capabilities(self):
        return {"boolean indexing": False, "data-dependent shapes": False,
                "max dimensions": 64}

    def default_device(self):
        return "cpu"

    def devices(self):
        return ["cpu"]

    def default_dtypes(self, *, device=None):
        return {"real floating": dt.default_float(), "complex floating": None,
                "integral": dt.default_int(), "indexing": dt.default_int()}

    def dtypes(self, *, device=None, kind=None):
        names = {"bool": dt.bool_, "int8": dt.int8, "int16": dt.int16, "int32": dt.int32,
                 "uint8": dt.uint8, "uint16": dt.uint16, "uint32": dt.uint32,
                 "float32": dt.float32}
        if dt.x64_enabled():
            names.update(int64=dt.int64, uint64=dt.uint64, float64=dt.float64)
        if kind is None:
            return names
        return {n: d for n, d in names.items() if isdtype(d, kind)}


def __array_namespace_info__():
    return _NamespaceInfo()
