"""lax: the primitives, each with its shape rule and lowering rule right below it.

Like jax.lax, these ops are strict: operands have equal dtypes and shapes (rank-0 operands
and Python scalars broadcast). ``fusionjit.numpy`` adds NumPy's promotion and broadcasting
on top.

The primitives live in common.py (operand conversion), elementwise.py, shapes.py and
reductions.py; this module is their one namespace, as ``jax.lax``.
"""

from fusionjit._src.lax.common import asarray_operand  # noqa: F401
from fusionjit._src.lax.elementwise import *  # noqa: F401,F403
from fusionjit._src.lax.reductions import *  # noqa: F401,F403
from fusionjit._src.lax.shapes import *  # noqa: F401,F403
from fusionjit._src.lax.slicing import (  # noqa: F401
    GatherDimensionNumbers, ScatterDimensionNumbers, gather, scatter, scatter_add, scatter_max,
    scatter_min, scatter_mul)
