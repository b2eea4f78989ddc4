"""``fusionjit.dtypes``, as ``jax.dtypes``: ``float0`` (the dtype of the gradient of an
integer or boolean input under ``grad(..., allow_int=True)``), ``canonicalize_dtype`` and
``issubdtype``."""

import numpy as np

from fusionjit._src.dtypes import canonicalize as canonicalize_dtype, float0

issubdtype = np.issubdtype

__all__ = ["canonicalize_dtype", "float0", "issubdtype"]
