"""Interop with other array libraries: DLPack export and import, device_put, pickling, and
``__array_namespace__``. Installed on fusionjit.Array (and tracers) at import time, next to
the methods of array.py rather than inside it.

Export is zero-copy: a DLPack capsule (versioned, read-only) of the NumPy view of the
Array's buffer, which keeps the buffer alive. Import copies once: the C++ Array owns its
buffer and cannot adopt foreign memory yet."""

from __future__ import annotations

import numpy as np

from fusionjit._src import array as array_mod
from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src import errors
from fusionjit._src.array import Array

_KDLCPU = 1


def _dlpack(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    if dl_device is not None and tuple(dl_device) != (_KDLCPU, 0):
        raise BufferError(errors.located(
            f"fusionjit arrays live on the CPU (DLPack device (1, 0)); cannot export to "
            f"{tuple(dl_device)}"))
    view = np.asarray(self)
    if max_version is not None and tuple(max_version) >= (1, 0) and not copy:
        return view.__dlpack__(max_version=max_version, copy=False)
    # A consumer of the legacy (unversioned) protocol cannot be told the memory is
    # read-only, so it gets a private copy; copy=False cannot be honoured then.
    if copy is False:
        raise BufferError(errors.located(
            "a zero-copy DLPack export of a fusionjit array is read-only, which needs a "
            "consumer of DLPack 1.0 or later (max_version >= (1, 0)); pass copy=None or "
            "True to export a copy"))
    return np.array(view).__dlpack__(max_version=max_version)


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
    try:
        view = np.from_dlpack(x)
    except (BufferError, RuntimeError, TypeError) as e:
        raise BufferError(errors.located(f"from_dlpack: cannot import this array: {e}")) \
            from None
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
