"""The scalar types of ``fusionjit.numpy`` (``float32``, ``int8``, ``bfloat16``...), as JAX's:
calling one converts to an array of its dtype (a tracer too: ``fnp.float32(done)`` inside
``jit``), and everywhere a dtype is expected it is NumPy's type (``np.dtype(fnp.float32)``,
``x.dtype == fnp.float32``, ``isinstance(np.float32(1), fnp.float32)``, a dict keyed by
``np.float32``). NumPy's own types instead turned a tracer into a NumPy array (an error) and
computed with NumPy's promotion (``uint8(3) * 2.0`` in float64)."""

from __future__ import annotations

import numpy as np


class _ScalarMeta(type):
    def __hash__(cls) -> int:
        return hash(cls.dtype.type)

    def __eq__(cls, other) -> bool:
        return cls is other or cls.dtype.type == other

    def __ne__(cls, other) -> bool:
        return not cls == other

    def __call__(cls, x):
        from fusionjit._src.numpy.shapes import asarray
        return asarray(x, dtype=cls.dtype)

    def __instancecheck__(cls, instance) -> bool:
        return isinstance(instance, cls.dtype.type)


def scalar_type(np_type) -> type:
    """The ``fusionjit.numpy`` scalar type of NumPy's ``np_type``."""
    t = _ScalarMeta(np_type.__name__, (object,), {"dtype": np.dtype(np_type)})
    t.__module__ = "fusionjit.numpy"
    t.__doc__ = (f"A {np_type.__name__} scalar type: ``{np_type.__name__}(x)`` is "
                 f"``asarray(x, dtype={np_type.__name__})``; as a dtype it is NumPy's.")
    return t
