"""What every lax primitive module shares: operand conversion, error reporting, and the
kinds of element types an op accepts."""

from __future__ import annotations

import builtins
import enum
from typing import Sequence

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src import errors

Primitive = core.Primitive
ShapedArray = core.ShapedArray


def _fail(message: str, exc_type=TypeError):
    raise exc_type(errors.located(message, errors.user_location()))


def _weak_all(*avals) -> bool:
    return builtins.all(a.weak_type for a in avals)


# --- converting inputs ----------------------------------------------------------------

def _is_value(x) -> bool:
    return isinstance(x, core.Tracer) or core.is_concrete_array(x)


def asarray_operand(x, like_dtype=None):
    """A lax operand: tracers and Arrays as they are; scalars and NumPy arrays become
    arrays (a Python scalar takes ``like_dtype`` if given, staying weak)."""
    if _is_value(x):
        return x
    if isinstance(x, np.ndarray):
        from fusionjit._src import array as array_mod
        return array_mod.from_numpy(x)
    info = dt.scalar_info(x)
    if info is None:
        _fail(f"expected an array or a number, got {type(x).__name__}")
    d, weak = info
    if like_dtype is not None and weak:
        d = np.dtype(like_dtype)
    if isinstance(x, int) and not isinstance(x, bool) and dt.is_int(d):
        dt.check_int_range(x, d, errors.user_location())
    return _scalar_array(x, d, weak)


def _scalar_array(x, d, weak):
    from fusionjit._src import array as array_mod
    return array_mod.scalar(x, d, weak)


# --- kinds of element types -----------------------------------------------------------

_FLOAT = "float"
_INT = "int"
_BOOL = "bool"
_NUM = (_INT, _FLOAT)


def _kind(d) -> str:
    if dt.is_bool(d):
        return _BOOL
    return _FLOAT if dt.is_float(d) else _INT


def _check_kinds(name: str, d, allowed: Sequence[str]):
    if _kind(d) not in allowed:
        names = {_FLOAT: "floating-point", _INT: "integer", _BOOL: "boolean"}
        want = " or ".join(names[k] for k in allowed)
        _fail(f"{name} does not accept {d} values; it needs {want} inputs")


class Precision(enum.Enum):
    """A contraction's precision, as ``jax.lax.Precision`` (``precision=`` of ``dot``,
    ``dot_general``, ``conv_general_dilated``, ``einsum``...): DEFAULT, HIGH or HIGHEST, or
    JAX's strings for them. fusionjit computes every float contraction in its operands' own
    precision (float32 as float32: HIGHEST), so each is accepted and all are the same."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        names = {"default": cls.DEFAULT, "fastest": cls.DEFAULT, "bfloat16": cls.DEFAULT,
                 "high": cls.HIGH, "bfloat16_3x": cls.HIGH, "tensorfloat32": cls.HIGH,
                 "highest": cls.HIGHEST, "float32": cls.HIGHEST}
        if isinstance(value, str) and value.lower() in names:
            return names[value.lower()]
        return None

    def __str__(self) -> str:
        return self.name

