"""fusionjit.numpy.linalg: the array-API linear algebra functions built from dot and
elementwise work, and ``qr``, ``cholesky``, ``solve``, ``inv``, ``det``, ``slogdet``
(written with fusionjit's own loops: decompositions.py), ``eigh`` and ``svd`` and what
builds on them (Jacobi rotations: eigen.py), as ``jax.numpy.linalg``; no ``eig`` (general,
complex) yet."""

from fusionjit._src.numpy.decompositions import (  # noqa: F401
    cholesky, det, inv, matrix_power, multi_dot, qr, slogdet, solve, tensorinv, tensorsolve)
from fusionjit._src.numpy.linalg import (  # noqa: F401
    cross, diagonal, matmul, matrix_norm, matrix_transpose, norm, outer, tensordot, trace,
    vecdot, vector_norm)
from fusionjit._src.numpy.eigen import (  # noqa: F401
    EighResult, SVDResult, cond, eigh, eigvalsh, lstsq, matrix_rank, pinv, svd, svdvals)

# Called eagerly, each function runs as one compiled program (eager.py).
from fusionjit._src.eager import eager_namespace as _eager_namespace  # noqa: E402

_eager_namespace(globals())
