"""Linear algebra, as ``jax.scipy.linalg`` (the functions fusionjit has)."""

from fusionjit._src.numpy.decompositions import det, inv, solve_triangular  # noqa: F401
from fusionjit._src.scipy import cho_factor, cho_solve, cholesky, qr, solve  # noqa: F401

# Called eagerly, each function runs as one compiled program (eager.py).
from fusionjit._src.eager import eager_namespace as _eager_namespace  # noqa: E402

_eager_namespace(globals())
