"""Interop with other array libraries: DLPack export and import, device_put, pickling, and
``__array_namespace__``. Installed on fusionjit.Array (and tracers) at import time, next to
the methods of array.py rather than inside it.

Export is zero-copy: a DLPack capsule (versioned, read-only) of the NumPy view of the
Array's buffer, which keeps the buffer alive. Import copies once: the C++ Array owns its
buffer and cannot adopt foreign memory yet."""

from __future__ import annotations

import ctypes

import numpy as np

from fusionjit._src import array as array_mod
from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src import errors
from fusionjit._src.array import Array

_KDLCPU = 1


# --- bfloat16 through DLPack ----------------------------------------------------------------
# NumPy's DLPack knows no bfloat16 (an ml_dtypes type to it). fusionjit passes bfloat16 data
# through NumPy as uint16 and tags the capsule's DLTensor with DLPack's own bfloat16 code
# (kDLBfloat) on the way out, and the other way on the way in. The structs are DLPack's
# stable C ABI (dlpack.h, versions 0.x and 1.x).

class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):  # capsule "dltensor"
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):  # capsule "dltensor_versioned"
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_KDLUINT, _KDLBFLOAT = 1, 4
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype, _capsule_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _retag16(capsule, code_from: int, code_to: int) -> bool:
    """Changes a not yet consumed DLPack capsule's 16-bit dtype code from `code_from` to
    `code_to`; whether it had that code."""
    name = _capsule_name(capsule)
    kinds = {b"dltensor_versioned": _DLManagedTensorVersioned, b"dltensor": _DLManagedTensor}
    kind = kinds.get(name)
    if kind is None:
        return False
    dtype = kind.from_address(_capsule_pointer(capsule, name)).dl_tensor.dtype
    if (dtype.code, dtype.bits, dtype.lanes) != (code_from, 16, 1):
        return False
    dtype.code = code_to
    return True


class _BfloatAsUint16:
    """Exports `x`'s bfloat16 data as uint16, for NumPy's from_dlpack."""

    def __init__(self, x):
        self._x = x

    def __dlpack_device__(self):
        return self._x.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        capsule = self._x.__dlpack__(**kwargs)
        if not _retag16(capsule, _KDLBFLOAT, _KDLUINT):
            raise BufferError("not a bfloat16 array")
        return capsule


def _bfloat16_capsule(view: np.ndarray, **kwargs):
    capsule = view.view(np.uint16).__dlpack__(**kwargs)
    _retag16(capsule, _KDLUINT, _KDLBFLOAT)
    return capsule


def _export(view: np.ndarray, **kwargs):
    if dt.bfloat16 is not None and view.dtype == dt.bfloat16:
        return _bfloat16_capsule(view, **kwargs)
    return view.__dlpack__(**kwargs)


def _import(x) -> np.ndarray:
    """NumPy's view of `x`'s DLPack data (bfloat16 included)."""
    try:
        return np.from_dlpack(x)
    except (BufferError, RuntimeError, TypeError) as e:
        if dt.bfloat16 is not None:
            try:
                return np.from_dlpack(_BfloatAsUint16(x)).view(dt.bfloat16)
            except (BufferError, RuntimeError, TypeError):
                pass
        raise BufferError(errors.located(f"from_dlpack: cannot import this array: {e}")) \
            from None


def _dlpack(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    if dl_device is not None and tuple(dl_device) != (_KDLCPU, 0):
        raise BufferError(errors.located(
            f"fusionjit arrays live on the CPU (DLPack device (1, 0)); cannot export to "
            f"{tuple(dl_device)}"))
    view = np.asarray(self)
    if max_version is not None and tuple(max_version) >= (1, 0) and not copy:
        return _export(view, max_version=max_version, copy=False)
    # A consumer of the legacy (unversioned) protocol cannot be told the memory is
    # read-only, so it gets a private copy; copy=False cannot be honoured then.
    if copy is False:
        raise BufferError(errors.located(
            "a zero-copy DLPack export of a fusionjit array is read-only, which needs a "
            "consumer of DLPack 1.0 or later (max_version >= (1, 0)); pass copy=None or "
            "True to export a copy"))
    return _export(np.array(view), max_version=max_version)


def _dlpack_device(self):
    return (_KDLCPU, 0)


def from_dlpack(x, /, *, device=None, copy=None):
    """An Array from any object with ``__dlpack__`` (NumPy, PyTorch CPU tensors, ...) or a
    fusionjit Array (returned as is unless ``copy``), as ``jax.dlpack.from_dlpack``.

    Zero copy (the Array shares the exporter's memory and keeps it alive) when the data is
    C-contiguous, 64-byte aligned and of a dtype fusionjit keeps as it is; otherwise copied
    once (e.g. float64 without x64, or NumPy's 16-byte aligned small arrays), and
    ``copy=False`` raises BufferError then. ``copy=True`` always copies. As in JAX, writing
    to the exporter's memory afterwards changes a zero-copy Array: fusionjit assumes it does
    not."""
    if device is not None and not str(device).startswith("cpu"):
        raise ValueError(errors.located(f"from_dlpack: unknown device {device!r}; fusionjit "
                                        f"runs on 'cpu'"))
    if core.is_concrete_array(x):
        return x.copy() if copy else x
    if not hasattr(x, "__dlpack__"):
        raise TypeError(errors.located(
            f"from_dlpack needs an object with __dlpack__, got {type(x).__name__}"))
    view = _import(x)
    if not copy:
        kept = dt.canonicalize(view.dtype)
        shared = array_mod.view_of_numpy(view) if kept == view.dtype else None
        if shared is not None:
            return shared
        if copy is False:
            why = (f"its dtype becomes {kept}" if kept != view.dtype else
                   "it is not C-contiguous" if not view.flags.c_contiguous else
                   "its data is not 64-byte aligned")
            raise BufferError(errors.located(
                f"from_dlpack(copy=False): cannot share this array's memory ({why}); "
                f"pass copy=None to copy it"))
    return array_mod.from_numpy(view)


def device_put(x, device=None, *, src=None, donate: bool = False, may_alias=None):
    """Every array of the pytree ``x`` as a fusionjit Array on ``device`` (the CPU):
    Arrays stay as they are, NumPy arrays and scalars are copied in."""
    if device is not None and not str(device).startswith("cpu"):
        raise ValueError(errors.located(f"device_put: unknown device {device!r}; fusionjit "
                                        f"runs on 'cpu'"))
    from fusionjit._src.numpy.shapes import asarray
    from fusionjit._src.tree_util import tree_map

    def put(leaf):
        if core.is_concrete_array(leaf):
            return leaf
        if isinstance(leaf, core.Tracer):
            return leaf
        if hasattr(leaf, "__dlpack__") and not isinstance(leaf, np.ndarray):
            return from_dlpack(leaf)
        return asarray(leaf)

    return tree_map(put, x)


def device_get(x):
    """The pytree ``x`` with each fusionjit Array as a NumPy array (waiting for it to be
    computed, copied from the GPU where it lives there), as ``jax.device_get``; other
    leaves stay as they are."""
    from fusionjit._src.tree_util import tree_map

    def get(leaf):
        if isinstance(leaf, core.Tracer):
            raise TypeError(errors.located(
                "device_get of a traced value: inside jit, values have no contents yet"))
        return np.asarray(leaf) if core.is_concrete_array(leaf) else leaf

    return tree_map(get, x)


def _rebuild(value: np.ndarray, weak_type: bool):
    return array_mod.from_numpy(value, weak_type=weak_type)


def _reduce(self):
    return _rebuild, (np.array(self), bool(self.weak_type))


def _array_namespace(self, /, *, api_version=None):
    if api_version not in (None, "2021.12", "2022.12", "2023.12"):
        raise ValueError(errors.located(f"unsupported array API version {api_version!r}"))
    import fusionjit.numpy
    return fusionjit.numpy


def install() -> None:
    Array.__dlpack__ = _dlpack
    Array.__dlpack_device__ = _dlpack_device
    Array.__reduce__ = _reduce
    Array.__array_namespace__ = _array_namespace
    core.Tracer.__array_namespace__ = _array_namespace
    from fusionjit._src.numpy.scatter import at_property
    Array.at = at_property
    core.Tracer.at = at_property
