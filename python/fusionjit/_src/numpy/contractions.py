"""Contractions beyond dot/matmul: einsum, tensordot, vecdot, matrix_transpose, kron and
cross, each lowered to dot_general, transposes, diagonals and sums."""

from __future__ import annotations

import string

import numpy as np

from fusionjit._src import dtypes as dt
from fusionjit._src.lax import lax
from fusionjit._src.numpy.util import (aval, broadcast_shapes, broadcast_to_shape,
                                       canonical_axis, check_arraylike, fail, promote_dtypes,
                                       to_array)


def matrix_transpose(x, /):
    """Swaps the last two axes."""
    check_arraylike("matrix_transpose", x)
    x = to_array(x)
    ndim = aval(x).ndim
    if ndim < 2:
        fail(f"matrix_transpose needs an array of at least 2 dimensions, got shape "
             f"{aval(x).shape}", ValueError)
    return lax.transpose(x, list(range(ndim - 2)) + [ndim - 1, ndim - 2])


def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None):
    """Sums products over the last ``axes`` axes of ``a`` and the first of ``b`` (an int),
    or over the axes listed in ``axes = (a_axes, b_axes)``."""
    check_arraylike("tensordot", a, b)
    a, b = promote_dtypes(to_array(a), to_array(b))
    sa, sb = aval(a).shape, aval(b).shape
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > min(len(sa), len(sb)):
            fail(f"tensordot: axes={n} does not fit shapes {sa} and {sb}", ValueError)
        ca, cb = list(range(len(sa) - n, len(sa))), list(range(n))
    else:
        try:
            ca, cb = axes
        except (TypeError, ValueError):
            fail(f"tensordot: axes must be an int or a pair of axis lists, got {axes!r}")
        ca = [ca] if isinstance(ca, (int, np.integer)) else list(ca)
        cb = [cb] if isinstance(cb, (int, np.integer)) else list(cb)
        if len(ca) != len(cb):
            fail(f"tensordot: {len(ca)} axes of a paired with {len(cb)} axes of b", ValueError)
        ca = [canonical_axis(x, len(sa)) for x in ca]
        cb = [canonical_axis(x, len(sb)) for x in cb]
    for i, j in zip(ca, cb):
        if sa[i] != sb[j]:
            fail(f"tensordot: shape mismatch, axis {i} of a has size {sa[i]} but axis {j} of "
                 f"b has size {sb[j]}", ValueError)
    out = lax.dot_general(a, b, ((tuple(ca), tuple(cb)), ((), ())),
                          preferred_element_type=preferred_element_type)
    return _preferred(out, preferred_element_type)


def _preferred(x, d):
    return x if d is None else lax.convert_element_type(x, dt.canonicalize(d))


def vecdot(x1, x2, /, *, axis: int = -1, precision=None, preferred_element_type=None):
    """The dot product of vectors along ``axis``, broadcasting the other dimensions."""
    check_arraylike("vecdot", x1, x2)
    x1, x2 = promote_dtypes(to_array(x1), to_array(x2))
    s1, s2 = aval(x1).shape, aval(x2).shape
    if not s1 or not s2:
        fail("vecdot needs arrays of at least 1 dimension", ValueError)
    a1, a2 = canonical_axis(axis, len(s1)), canonical_axis(axis, len(s2))
    if s1[a1] != s2[a2]:
        fail(f"vecdot: axis {axis} has size {s1[a1]} in x1 but {s2[a2]} in x2", ValueError)
    x1 = lax.transpose(x1, [i for i in range(len(s1)) if i != a1] + [a1])
    x2 = lax.transpose(x2, [i for i in range(len(s2)) if i != a2] + [a2])
    n = s1[a1]
    batch = broadcast_shapes(aval(x1).shape[:-1], aval(x2).shape[:-1])
    x1 = broadcast_to_shape(x1, batch + (n,))
    x2 = broadcast_to_shape(x2, batch + (n,))
    nb = len(batch)
    dims = tuple(range(nb))
    out = lax.dot_general(x1, x2, (((nb,), (nb,)), (dims, dims)),
                          preferred_element_type=preferred_element_type)
    return _preferred(out, preferred_element_type)


def kron(a, b):
    """The Kronecker product."""
    check_arraylike("kron", a, b)
    a, b = promote_dtypes(to_array(a), to_array(b))
    sa, sb = aval(a).shape, aval(b).shape
    nd = max(len(sa), len(sb))
    sa, sb = (1,) * (nd - len(sa)) + sa, (1,) * (nd - len(sb)) + sb
    a, b = lax.reshape(a, sa), lax.reshape(b, sb)
    inter = tuple(v for pair in zip(sa, sb) for v in pair)
    ea = lax.broadcast_in_dim(a, inter, tuple(range(0, 2 * nd, 2)))
    eb = lax.broadcast_in_dim(b, inter, tuple(range(1, 2 * nd, 2)))
    from fusionjit._src.numpy.ufuncs import multiply
    return lax.reshape(multiply(ea, eb), tuple(x * y for x, y in zip(sa, sb)))


def cross(a, b, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis=None):
    """The cross product of 3-vectors (or the z component for 2-vectors) along the given
    axes, broadcasting the others."""
    check_arraylike("cross", a, b)
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = promote_dtypes(to_array(a), to_array(b))
    a = _move_last(a, axisa)
    b = _move_last(b, axisb)
    na, nb = aval(a).shape[-1], aval(b).shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        fail(f"cross: incompatible dimensions for cross product (dimension must be 2 or 3), "
             f"got {na} and {nb}", ValueError)

    def comp(x, i):
        n = aval(x).shape[-1]
        if i >= n:
            return lax.full(aval(x).shape[:-1], 0, aval(x).dtype)
        return lax.squeeze(lax.slice_in_dim(x, i, i + 1, 1, aval(x).ndim - 1),
                           (aval(x).ndim - 1,))

    from fusionjit._src.numpy.ufuncs import multiply, subtract
    a0, a1, a2 = (comp(a, i) for i in range(3))
    b0, b1, b2 = (comp(b, i) for i in range(3))
    z = subtract(multiply(a0, b1), multiply(a1, b0))
    if na == 2 and nb == 2:
        return z
    x = subtract(multiply(a1, b2), multiply(a2, b1))
    y = subtract(multiply(a2, b0), multiply(a0, b2))
    parts = [x, y, z]
    shape = broadcast_shapes(*[aval(p).shape for p in parts])
    parts = [lax.expand_dims(broadcast_to_shape(p, shape), (len(shape),)) for p in parts]
    out = lax.concatenate(parts, len(shape))
    return _move_from_last(out, axisc)


def _move_last(x, axis):
    nd = aval(x).ndim
    ax = canonical_axis(axis, nd)
    return lax.transpose(x, [i for i in range(nd) if i != ax] + [ax])


def _move_from_last(x, axis):
    nd = aval(x).ndim
    ax = canonical_axis(axis, nd)
    perm = list(range(nd - 1))
    perm.insert(ax, nd - 1)
    return lax.transpose(x, perm)


# --- einsum ------------------------------------------------------------------------------

def _parse(subscripts: str, shapes_):
    """Input label lists and the output list, '...' expanded to fresh labels (right-aligned
    across operands) and the implicit output (labels seen once, sorted) filled in."""
    spec = subscripts.replace(" ", "")
    if "->" in spec:
        ins, out = spec.split("->")
        explicit = True
    else:
        ins, out, explicit = spec, "", False
    ins = ins.split(",")
    if len(ins) != len(shapes_):
        fail(f"einsum: {len(ins)} operand specs in {subscripts!r} for {len(shapes_)} operands",
             ValueError)
    used = set(spec) - set(".,->")
    fresh = [c for c in string.ascii_letters if c not in used]
    ell_rank = 0
    for term, shape in zip(ins, shapes_):
        if "..." in term:
            ell_rank = max(ell_rank, len(shape) - (len(term) - 3))
    ell = fresh[:ell_rank]
    labels = []
    for term, shape in zip(ins, shapes_):
        if "..." in term:
            k = len(shape) - (len(term) - 3)
            if k < 0:
                fail(f"einsum: {term!r} has more labels than operand dimensions", ValueError)
            term = term.replace("...", "".join(ell[ell_rank - k:]))
        if len(term) != len(shape):
            fail(f"einsum: operand spec {term!r} has {len(term)} labels for an operand of "
                 f"rank {len(shape)}", ValueError)
        for c in term:
            if not c.isalpha():
                fail(f"einsum: invalid subscript character {c!r}", ValueError)
        labels.append(list(term))
    if explicit:
        out = out.replace("...", "".join(ell))
        for c in out:
            if not any(c in lab for lab in labels):
                fail(f"einsum: output label {c!r} appears in no operand", ValueError)
    else:
        counts: dict = {}
        for lab in labels:
            for c in lab:
                counts[c] = counts.get(c, 0) + 1
        out = "".join(ell) + "".join(sorted(c for c, n in counts.items()
                                            if n == 1 and c not in ell))
    return labels, list(out)


def _diagonal_labels(x, lab):
    """Takes the diagonal over repeated labels of one operand."""
    while len(set(lab)) != len(lab):
        c = next(c for c in lab if lab.count(c) > 1)
        i = lab.index(c)
        j = lab.index(c, i + 1)
        from fusionjit._src.numpy.manipulation import diagonal
        x = diagonal(x, 0, i, j)
        lab = [c2 for k, c2 in enumerate(lab) if k not in (i, j)] + [c]
    return x, lab


def _from_sublists(args):
    """NumPy's interleaved form ``einsum(op0, sublist0, op1, sublist1, ..., [out])`` as a
    subscripts string and the operands. The labels (ints, or other hashable objects that
    compare with each other) become letters in their sorted order, so the implicit output
    comes out sorted by label, as NumPy's and JAX's; Ellipsis is '...'."""
    args = list(args)
    out = args.pop() if len(args) % 2 else None
    ops, subs = args[0::2], args[1::2]
    if not ops:
        fail("einsum needs at least one operand", ValueError)
    lists = subs + ([out] if out is not None else [])
    for sub in lists:
        if isinstance(sub, str) or not isinstance(sub, (list, tuple)):
            fail(f"einsum: in the operand-list form each operand is followed by a list of "
                 f"labels (ints or Ellipsis), got {sub!r}", TypeError)
    labels = {x for sub in lists for x in sub if x is not Ellipsis}
    try:
        order = sorted(labels)
    except TypeError:
        fail(f"einsum: the labels of the operand-list form must be ints (or other objects "
             f"that compare with each other), got {sorted(map(repr, labels))}", TypeError)
    letters = string.ascii_uppercase + string.ascii_lowercase  # in sorted order
    if len(order) > len(letters):
        fail(f"einsum: {len(order)} distinct labels; at most {len(letters)} are supported",
             ValueError)
    symbol = {x: letters[k] for k, x in enumerate(order)}

    def spec(sub):
        return "".join("..." if x is Ellipsis else symbol[x] for x in sub)

    subscripts = ",".join(spec(sub) for sub in subs)
    if out is not None:
        subscripts += "->" + spec(out)
    return subscripts, tuple(ops)


def einsum(subscripts, *operands, out=None, optimize="auto", precision=None,
           preferred_element_type=None, _use_xeinsum=False):
    """Einstein summation over the labelled axes of ``operands`` (NumPy's subscripts, with
    '...' and implicit outputs, or the operand-list form ``einsum(a, [0, 1], b, [1, 2],
    [0, 2])``), contracted pairwise from left to right with dot_general."""
    if out is not None:
        fail("einsum(out=...) is not supported: fusionjit arrays are immutable",
             NotImplementedError)
    if not isinstance(subscripts, str):
        subscripts, operands = _from_sublists((subscripts,) + operands)
    if not operands:
        fail("einsum needs at least one operand", ValueError)
    check_arraylike("einsum", *operands)
    ops = promote_dtypes(*[to_array(o) for o in operands])
    labels, out_labels = _parse(subscripts, [aval(o).shape for o in ops])
    sizes: dict = {}
    for o, lab in zip(ops, labels):
        for c, n in zip(lab, aval(o).shape):
            if sizes.get(c, 1) != 1 and n != 1 and sizes[c] != n:
                fail(f"einsum: label {c!r} has sizes {sizes[c]} and {n}", ValueError)
            sizes[c] = n if sizes.get(c, 1) == 1 else sizes[c]
    terms = []
    for o, lab in zip(ops, labels):
        # Size-1 dimensions broadcast against the label's size elsewhere.
        want = tuple(sizes[c] for c in lab)
        if aval(o).shape != want:
            o = lax.broadcast_in_dim(o, want, tuple(range(len(want))))
        terms.append(_diagonal_labels(o, lab))
    x, lab = terms[0]
    x, lab = _sum_unneeded(x, lab, out_labels, terms[1:])
    for k in range(1, len(terms)):
        y, ylab = terms[k]
        y, ylab = _sum_unneeded(y, ylab, out_labels + lab, terms[k + 1:])
        later = set(out_labels)
        for _, rest_lab in terms[k + 1:]:
            later |= set(rest_lab)
        shared = [c for c in lab if c in ylab]
        batch = [c for c in shared if c in later]
        contract = [c for c in shared if c not in later]
        dn = ((tuple(lab.index(c) for c in contract), tuple(ylab.index(c) for c in contract)),
              (tuple(lab.index(c) for c in batch), tuple(ylab.index(c) for c in batch)))
        x = lax.dot_general(x, y, dn, preferred_element_type=preferred_element_type)
        lab = batch + [c for c in lab if c not in shared] + [c for c in ylab if c not in shared]
    x, lab = _sum_unneeded(x, lab, out_labels, [])
    x = lax.transpose(x, [lab.index(c) for c in out_labels])
    return _preferred(x, preferred_element_type)


def _sum_unneeded(x, lab, keep, rest):
    """Sums the axes whose label is neither kept nor in a later operand."""
    needed = set(keep)
    for _, other in rest:
        needed |= set(other)
    axes = [i for i, c in enumerate(lab) if c not in needed]
    if not axes:
        return x, lab
    d = aval(x).dtype
    if dt.is_bool(d):
        x = lax.reduce_or(x, axes)
    else:
        x = lax.reduce_sum(x, axes)
    return x, [c for i, c in enumerate(lab) if i not in axes]
