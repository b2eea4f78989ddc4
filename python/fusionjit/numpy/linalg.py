"""fusionjit.numpy.linalg: the array-API linear algebra functions built from dot and
elementwise work, and ``qr`` (as ``jax.numpy.linalg``; no other decompositions or solvers
yet)."""

from fusionjit._src.numpy.decompositions import qr  # noqa: F401
from fusionjit._src.numpy.linalg import (  # noqa: F401
    cross, diagonal, matmul, matrix_norm, matrix_transpose, norm, outer, tensordot, trace,
    vecdot, vector_norm)
