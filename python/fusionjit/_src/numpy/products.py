"""dot and matmul with NumPy's semantics."""

from __future__ import annotations

from fusionjit._src.lax import lax
from fusionjit._src.numpy.util import (aval, broadcast_shapes, broadcast_to_shape,
                                       check_arraylike, fail, promote_dtypes)


def dot(a, b, *, precision=None, preferred_element_type=None):
    """NumPy's ``dot``: scalars multiply; otherwise contract the last axis of ``a`` with
    the second-to-last of ``b`` (the only axis if ``b`` is 1-D). ``preferred_element_type``
    as ``lax.dot_general``'s, here and in the other products."""
    check_arraylike("dot", a, b)
    a, b = promote_dtypes(a, b)
    sa, sb = aval(a).shape, aval(b).shape
    if len(sa) == 0 or len(sb) == 0:
        from fusionjit._src.numpy.ufuncs import multiply
        return _converted(multiply(a, b), preferred_element_type)
    a_axis = len(sa) - 1
    b_axis = 0 if len(sb) == 1 else len(sb) - 2
    if sa[a_axis] != sb[b_axis]:
        fail(f"dot: shapes {sa} and {sb} not aligned: {sa[a_axis]} (dim {a_axis}) != "
             f"{sb[b_axis]} (dim {b_axis})", ValueError)
    # dot_general orders the result as a's free dims, then b's: NumPy's order too.
    return lax.dot_general(a, b, (((a_axis,), (b_axis,)), ((), ())),
                           preferred_element_type=preferred_element_type)


def matmul(a, b, *, precision=None, preferred_element_type=None):
    """NumPy's ``matmul`` (``@``): batched matrix products with broadcast batch dims."""
    check_arraylike("matmul", a, b)
    a, b = promote_dtypes(a, b)
    sa, sb = aval(a).shape, aval(b).shape
    if len(sa) == 0 or len(sb) == 0:
        fail("matmul: input operand does not have enough dimensions (scalars are not allowed)",
             ValueError)
    a_vec, b_vec = len(sa) == 1, len(sb) == 1
    if a_vec:
        a = lax.expand_dims(a, (0,))
    if b_vec:
        b = lax.expand_dims(b, (1,))
    sa, sb = aval(a).shape, aval(b).shape
    if sa[-1] != sb[-2]:
        fail(f"matmul: input operand 1 has a mismatch in its core dimension 0 ({sb[-2]} is "
             f"different from {sa[-1]}); shapes {sa} and {sb}", ValueError)
    if len(sb) == 2:
        # x @ w with x [..., M, K]: one product over x's last dimension, as JAX writes it
        # (broadcasting w to x's batch would copy it once per batch element).
        out = lax.dot_general(a, b, (((len(sa) - 1,), (0,)), ((), ())),
                              preferred_element_type=preferred_element_type)
        if a_vec:
            out = lax.squeeze(out, (len(sa) - 2,))
        return lax.squeeze(out, (aval(out).ndim - 1,)) if b_vec else out
    batch = broadcast_shapes(sa[:-2], sb[:-2])
    a = broadcast_to_shape(a, batch + sa[-2:])
    b = broadcast_to_shape(b, batch + sb[-2:])
    nb = len(batch)
    bdims = tuple(range(nb))
    out = lax.dot_general(a, b, (((nb + 1,), (nb,)), (bdims, bdims)),
                          preferred_element_type=preferred_element_type)
    if a_vec:
        out = lax.squeeze(out, (nb,))
    if b_vec:
        out = lax.squeeze(out, (aval(out).ndim - 1,))
    return out


def vdot(a, b, *, precision=None, preferred_element_type=None):
    from fusionjit._src.numpy.shapes import ravel
    return dot(ravel(a), ravel(b), preferred_element_type=preferred_element_type)


def inner(a, b, *, precision=None, preferred_element_type=None):
    check_arraylike("inner", a, b)
    a, b = promote_dtypes(a, b)
    sa, sb = aval(a).shape, aval(b).shape
    if not sa or not sb:
        from fusionjit._src.numpy.ufuncs import multiply
        return _converted(multiply(a, b), preferred_element_type)
    return lax.dot_general(a, b, (((len(sa) - 1,), (len(sb) - 1,)), ((), ())),
                           preferred_element_type=preferred_element_type)


def _converted(x, d):
    from fusionjit._src import dtypes as dt
    return x if d is None else lax.convert_element_type(x, dt.canonicalize(d))


def outer(a, b):
    from fusionjit._src.numpy.shapes import ravel
    a, b = promote_dtypes(ravel(a), ravel(b))
    return lax.dot_general(a, b, (((), ()), ((), ())))

