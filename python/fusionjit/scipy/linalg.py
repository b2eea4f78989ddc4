"""Linear algebra, as ``jax.scipy.linalg`` (the functions fusionjit has)."""

from fusionjit._src.numpy.decompositions import det, inv, solve_triangular  # noqa: F401
from fusionjit._src.scipy import cho_factor, cho_solve, cholesky, qr, solve  # noqa: F401
