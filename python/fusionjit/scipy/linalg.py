"""Linear algebra, as ``jax.scipy.linalg`` (the functions fusionjit has)."""

from fusionjit._src.numpy.decompositions import (  # noqa: F401
    det, inv, qr, solve, solve_triangular)
from fusionjit._src.scipy import cho_factor, cho_solve, cholesky  # noqa: F401
