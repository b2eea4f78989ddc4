"""Dtypes and JAX's type promotion, with weak-typed Python scalars.

fusionjit supports bool, int8/16/32/64, uint8/16/32/64, float16, bfloat16 (the ``ml_dtypes``
package's, as JAX uses; available when ml_dtypes is installed), float32 and float64; complex
numbers are not supported. With ``fusionjit_enable_x64`` off (the default, as in JAX) 64-bit
types are canonicalised to their 32-bit counterparts. Promotion follows JAX's lattice
(https://jax.readthedocs.io/en/latest/type_promotion.html) without the complex types:
Python ints and floats are *weak*: they take the dtype of the array they meet.
"""

from __future__ import annotations

import numpy as np

from fusionjit._src import errors
from fusionjit._src.config import config

try:
    import ml_dtypes
except ImportError:  # pragma: no cover - ml_dtypes comes with fusionjit's dependencies
    ml_dtypes = None

bool_ = np.dtype(np.bool_)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
uint8 = np.dtype(np.uint8)
uint16 = np.dtype(np.uint16)
uint32 = np.dtype(np.uint32)
uint64 = np.dtype(np.uint64)
float16 = np.dtype(np.float16)
# None without ml_dtypes: bfloat16 is then not supported.
bfloat16 = np.dtype(ml_dtypes.bfloat16) if ml_dtypes is not None else None
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)

SUPPORTED = tuple(d for d in (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                              float16, bfloat16, float32, float64) if d is not None)
_IR_NAMES = {bool_: "pred", int8: "s8", int16: "s16", int32: "s32", int64: "s64",
             uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
             float16: "f16", float32: "f32", float64: "f64"}
_SHORT = {bool_: "bool", int8: "i8", int16: "i16", int32: "i32", int64: "i64",
          uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
          float16: "f16", float32: "f32", float64: "f64"}
if bfloat16 is not None:
    _IR_NAMES[bfloat16] = "bf16"
    _SHORT[bfloat16] = "bf16"
_FROM_IR = {v: k for k, v in _IR_NAMES.items()}
_FLOATS = frozenset(d for d in (float16, bfloat16, float32, float64) if d is not None)


def x64_enabled() -> bool:
    return bool(config.fusionjit_enable_x64)


def supported_names() -> str:
    return ", ".join(str(d) for d in SUPPORTED)


def dtype(x) -> np.dtype:
    """The (uncanonicalised) NumPy dtype of a dtype-like or a value."""
    if isinstance(x, np.dtype):
        return x
    if isinstance(x, type) and issubclass(x, np.generic):
        return np.dtype(x)
    if x is bool:
        return bool_
    if x is int:
        return int64 if x64_enabled() else int32
    if x is float:
        return float64 if x64_enabled() else float32
    if isinstance(x, str):
        if x == "bfloat16" and bfloat16 is not None:
            return bfloat16
        return np.dtype(x)
    if hasattr(x, "dtype"):
        return np.dtype(x.dtype)
    return np.dtype(x)


def canonicalize(d) -> np.dtype:
    """The dtype fusionjit uses for ``d``: 64-bit types become 32-bit without x64.

    Raises TypeError for dtypes fusionjit does not support. Non-native byte order (``>f4``
    on x86) maps to the native dtype: arrays are converted, as NumPy and JAX do."""
    d = dtype(d)
    if not d.isnative:
        d = d.newbyteorder("=")
    if not x64_enabled():
        if d == int64:
            d = int32
        elif d == uint64:
            d = uint32
        elif d == float64:
            d = float32
    if d not in _IR_NAMES:
        hint = (" (bfloat16 needs the ml_dtypes package: pip install ml_dtypes)"
                if d.name == "bfloat16" else "")
        raise TypeError(errors.located(
            f"fusionjit does not support dtype {d}{hint}; supported: {supported_names()}. "
            f"Convert first, e.g. x.astype(numpy.float32) or x.astype(numpy.int32)"))
    return d


def ir_name(d: np.dtype) -> str:
    return _IR_NAMES[np.dtype(d)]


def from_ir_name(name: str) -> np.dtype:
    return _FROM_IR[name]


def short_name(d: np.dtype) -> str:
    return _SHORT.get(np.dtype(d), str(d))


# The dtype of the gradient of an integer or boolean input (``grad(allow_int=True)``), as
# ``jax.dtypes.float0``: no bits per element.
float0 = np.dtype([("float0", np.void, 0)])


def default_int() -> np.dtype:
    return int64 if x64_enabled() else int32


def default_uint() -> np.dtype:
    return uint64 if x64_enabled() else uint32


def default_float() -> np.dtype:
    return float64 if x64_enabled() else float32


def to_inexact(d) -> np.dtype:
    """``d`` if it is a float, else the float its values are computed in, as JAX's: 64-bit
    integers in float64 (present with x64 only), other integers and bools in float32 (an
    int32 mean is float32 with x64 too)."""
    d = np.dtype(d)
    if is_float(d):
        return d
    return canonicalize(float64) if d.itemsize == 8 else float32


def is_float(d) -> bool:
    """True for every floating dtype, bfloat16 included (NumPy calls its kind 'V')."""
    d = np.dtype(d)
    return d.kind == "f" or d in _FLOATS


def computation_float(d) -> np.dtype:
    """The dtype JAX computes a mean, a variance or a running sum of ``d`` in: float32 for
    float16 and bfloat16 (their sums overflow or stop growing), else ``d`` itself."""
    return float32 if is_low_precision(d) else np.dtype(d)


def finfo(d):
    """``numpy.finfo`` that also knows bfloat16 (ml_dtypes' finfo covers every float)."""
    return ml_dtypes.finfo(d) if ml_dtypes is not None else np.finfo(d)


def is_low_precision(d) -> bool:
    """float16 and bfloat16: stored in 16 bits, each operation computed in float32."""
    d = np.dtype(d)
    return d.itemsize == 2 and is_float(d)


def is_int(d) -> bool:
    return np.dtype(d).kind in "iu"


def is_signed(d) -> bool:
    return np.dtype(d).kind == "i"


def is_bool(d) -> bool:
    return np.dtype(d) == bool_


def lowest(d):
    """The least value of dtype ``d`` (-inf for floats): the identity of a maximum."""
    if is_bool(d):
        return False
    return -np.inf if is_float(d) else np.iinfo(d).min


def highest(d):
    """The greatest value of dtype ``d`` (inf for floats): the identity of a minimum."""
    if is_bool(d):
        return True
    return np.inf if is_float(d) else np.iinfo(d).max


# --- promotion ------------------------------------------------------------------------
# The lattice: each node lists the nodes directly above it. "i*" and "f*" are the weak
# Python int and float.
_LATTICE = {
    "b1": ["i*"],
    "i*": ["u8", "i8"],
    "u8": ["i16", "u16"],
    "u16": ["i32", "u32"],
    "u32": ["i64", "u64"],
    "i8": ["i16"],
    "i16": ["i32"],
    "i32": ["i64"],
    "i64": ["f*"],
    "u64": ["f*"],
    "f*": ["bf16", "f16"],
    "bf16": ["f32"],
    "f16": ["f32"],
    "f32": ["f64"],
    "f64": [],
}
_NODE = {bool_: "b1", int8: "i8", int16: "i16", int32: "i32", int64: "i64", uint8: "u8",
         uint16: "u16", uint32: "u32", uint64: "u64", float16: "f16", float32: "f32",
         float64: "f64"}
if bfloat16 is not None:
    _NODE[bfloat16] = "bf16"


def _upper_set(node: str) -> set[str]:
    seen, todo = {node}, [node]
    while todo:
        for up in _LATTICE[todo.pop()]:
            if up not in seen:
                seen.add(up)
                todo.append(up)
    return seen


_UPPER = {n: _upper_set(n) for n in _LATTICE}


def _join(a: str, b: str) -> str:
    common = _UPPER[a] & _UPPER[b]
    # The least element of the common upper set is the one every other one is above.
    for c in common:
        if all(other in _UPPER[c] for other in common):
            return c
    raise TypeError(f"no common type for {a} and {b}")


def _node(d: np.dtype, weak: bool) -> str:
    d = np.dtype(d)
    if weak:
        if is_int(d):
            return "i*"
        if is_float(d):
            return "f*"
    return _NODE[d]


_PROMOTED: dict = {}  # promote's results by its pairs and x64 (few: reset when large)
_DTYPE_OF_NODE = {v: k for k, v in _NODE.items()}


def promote(pairs) -> tuple[np.dtype, bool]:
    """The result (dtype, weak_type) of combining values given as (dtype, weak) pairs."""
    key = (tuple(pairs), x64_enabled())
    found = _PROMOTED.get(key)
    if found is None:
        if len(_PROMOTED) > 4096:
            _PROMOTED.clear()
        found = _PROMOTED[key] = _promote(key[0])
    return found


def _promote(pairs) -> tuple[np.dtype, bool]:
    node = _node(*pairs[0])
    for d, w in pairs[1:]:
        node = _join(node, _node(d, w))
    if node == "i*":
        return default_int(), True
    if node == "f*":
        return default_float(), True
    return canonicalize(_DTYPE_OF_NODE[node]), False


def promote_dtypes(*dtypes) -> np.dtype:
    """``jnp.promote_types`` for strong dtypes."""
    return promote((canonicalize(d), False) for d in dtypes)[0]


def scalar_info(x):
    """(dtype, weak) for a Python or NumPy scalar, or None if ``x`` is not one."""
    # NumPy scalars first: np.float64 is a subclass of float, but it is strongly typed.
    if isinstance(x, np.generic):
        return canonicalize(x.dtype), False
    if isinstance(x, bool):
        return bool_, False
    if isinstance(x, int):
        return default_int(), True
    if isinstance(x, float):
        return default_float(), True
    if isinstance(x, complex):
        raise TypeError(errors.located(
            f"fusionjit does not support complex numbers; supported dtypes: {supported_names()}"))
    return None


def weak_int_value(value: int, d: np.dtype, location: str = ""):
    """A Python int taking integer dtype ``d`` as a weak operand (``int8_array + 200``), as
    JAX: it must fit the default integer type, and then wraps into ``d`` as a conversion
    would (-56 for int8)."""
    check_int_range(value, default_int(), location)
    return np.array(value, default_int()).astype(d)


def check_int_range(value: int, d: np.dtype, location: str = ""):
    info = np.iinfo(d)
    if not info.min <= value <= info.max:
        where = f"{location}: " if location else ""
        raise OverflowError(f"{where}Python int {value} is too large to convert to {d}"
                            + ("" if x64_enabled() else
                               "; enable 64-bit types with "
                               "fusionjit.config.update('fusionjit_enable_x64', True)"))
