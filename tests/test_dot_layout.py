"""Dots of every layout: the forms the dot-layout pass gives them (a tiled product after
transposes and reshapes, a row or column reduction, an elementwise outer product), checked
against NumPy's definition of lax.dot_general and, for tiled products, bit for bit against
the sequential sums of the canonical 2-D product."""

from __future__ import annotations

import numpy as np
import pytest

from fusionjit import lax
from test_ops import _sequential_matmul


def _numpy_dot_general(a, b, contracting, batch):
    """lax.dot_general's definition in NumPy, in float64 (ints and bools in int64)."""
    (lc, rc), (lb, rb) = contracting, batch
    wide = np.float64 if a.dtype.kind == "f" else np.int64
    a, b = a.astype(wide), b.astype(wide)
    lf = [d for d in range(a.ndim) if d not in lc + lb]
    rf = [d for d in range(b.ndim) if d not in rc + rb]
    lhs = a.transpose(list(lb) + lf + list(lc))
    rhs = b.transpose(list(rb) + list(rc) + rf)
    bs = lhs.shape[:len(lb)]
    m = int(np.prod(lhs.shape[len(lb):len(lb) + len(lf)]))
    n = int(np.prod(rhs.shape[len(rb) + len(rc):]))
    k = int(np.prod([a.shape[d] for d in lc]))
    out = lhs.reshape(bs + (m, k)) @ rhs.reshape(bs + (k, n))
    return out.reshape(bs + tuple(a.shape[d] for d in lf) + tuple(b.shape[d] for d in rf))


# (lhs shape, rhs shape, ((lhs contracting, rhs contracting), (lhs batch, rhs batch)), the
# form the dot-layout pass gives it: "tiled" (a [batch.., M, K] x [batch.., K, N] dot),
# "row" (a matrix-vector product: a reduction over the lhs rows), "column" (vector-matrix:
# over the rhs rows) or "outer" (no sums: an elementwise product).
_DOT_FORMS = [
    ((37, 64), (64, 48), (((1,), (0,)), ((), ())), "tiled"),           # already canonical
    ((5, 9, 64), (64, 40), (((2,), (0,)), ((), ())), "tiled"),         # x @ w with x [B, T, D]
    ((33, 4, 8), (4, 8, 40), (((1, 2), (0, 1)), ((), ())), "tiled"),   # two contracting dims
    ((33, 8, 4), (4, 8, 40), (((2, 1), (0, 1)), ((), ())), "tiled"),   # ... paired crosswise
    ((64, 33), (64, 40), (((0,), (0,)), ((), ())), "tiled"),           # A^T B
    ((200, 90), (200, 20), (((0,), (0,)), ((), ())), "tiled"),         # g^T x: lhs as [K, M]
    ((200, 6), (200, 90), (((0,), (0,)), ((), ())), "tiled"),          # ... computed transposed
    ((3, 50, 33), (3, 50, 40), (((1,), (1,)), ((0,), (0,))), "tiled"), # batched A^T B
    ((90, 20), (40, 90), (((0,), (1,)), ((), ())), "tiled"),           # A^T B^T
    ((33, 3, 16), (3, 16, 40), (((2,), (1,)), ((1,), (0,))), "tiled"), # batch not leading
    ((33, 3, 16), (16, 3, 40), (((2,), (0,)), ((1,), (1,))), "tiled"),
    ((4, 6, 5, 7), (5, 4, 7, 9), (((3,), (2,)), ((0, 2), (1, 0))), "tiled"),  # two batch dims
    ((300, 70), (70, 1), (((1,), (0,)), ((), ())), "row"),             # a value head
    ((300, 70), (70,), (((1,), (0,)), ((), ())), "row"),               # matvec
    ((70, 300), (70,), (((0,), (0,)), ((), ())), "row"),               # A^T v
    ((3, 50, 70), (3, 70), (((2,), (1,)), ((0,), (0,))), "row"),       # batched matvec
    ((32, 10, 40), (32, 10), (((1,), (1,)), ((0,), (0,))), "row"),     # bkh,bk->bh: in place
    ((5000,), (5000,), (((0,), (0,)), ((), ())), "row"),               # inner product
    ((70,), (70, 300), (((0,), (0,)), ((), ())), "column"),            # vecmat
    ((1, 70), (300, 70), (((1,), (1,)), ((), ())), "column"),          # one row times w^T
    ((3, 70), (3, 70, 50), (((1,), (1,)), ((0,), (0,))), "column"),
    ((30,), (40,), (((), ()), ((), ())), "outer"),                     # np.outer
    ((30, 1), (1, 40), (((1,), (0,)), ((), ())), "outer"),             # k = 1
    ((3, 20), (3, 30), (((), ()), ((0,), (0,))), "outer"),             # batched outer
]


@pytest.mark.parametrize("lhs, rhs, dims, form", _DOT_FORMS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_dot_forms_agree_with_numpy(lhs, rhs, dims, form, dtype):
    # Every dot_general is computed in one of the forms the CPU does well (dot_layout.h):
    # a tiled [batch.., M, K] x [batch.., K, N] product after transposes and reshapes, a
    # row or column reduction, or an elementwise product. Regression: other layouts were an
    # element at a time with a gather per lane and step (x @ w over a [B, T, D] x 3x, two
    # contracting dimensions 7x, a value head 16x slower than the tiled or reduced form).
    import fusionjit
    rng = np.random.default_rng(len(lhs) * 7 + len(rhs))
    if dtype == np.int32:
        a, b = rng.integers(-9, 9, lhs, dtype), rng.integers(-9, 9, rhs, dtype)
    else:
        a, b = rng.standard_normal(lhs).astype(dtype), rng.standard_normal(rhs).astype(dtype)
    f = fusionjit.jit(lambda a, b: lax.dot_general(a, b, dims))
    got = np.asarray(f(a, b))
    want = _numpy_dot_general(a, b, *dims)
    assert got.shape == want.shape and got.dtype == a.dtype
    if dtype == np.float32:
        k = max(1, int(np.prod([a.shape[d] for d in dims[0][0]])))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6 * np.sqrt(k))
    else:
        np.testing.assert_array_equal(got, want)
    text = f.lower(a, b).compile().as_text()
    has_dot = " dot(" in text
    has_reduce = " reduce(" in text
    assert has_dot == (form == "tiled") and has_reduce == (form in ("row", "column")), text
    if form == "tiled" and dtype == np.float32 and fusionjit.default_backend() == "cpu":
        # The CPU's tiled kernel (4 columns at least: 8 rows of 4-lane vectors and more).
        assert "dot.rows" in f.lower(a, b).as_text("llvm")
    if form != "tiled" or dtype != np.float32:
        return
    # The sums keep their order: with fused multiply-adds over k as the pairs run, the
    # same bits as the canonical 2-D product of the transposed operands.
    (lc, rc), (lb, rb) = dims
    lf = [d for d in range(a.ndim) if d not in lc + lb]
    rf = [d for d in range(b.ndim) if d not in rc + rb]
    ca = a.transpose(list(lb) + lf + list(lc))
    cb = b.transpose(list(rb) + list(rc) + rf)
    bs, k = ca.shape[:len(lb)], int(np.prod([a.shape[d] for d in lc]))
    ca = ca.reshape(bs + (-1, k))
    cb = cb.reshape(bs + (k, -1))
    np.testing.assert_array_equal(got.reshape(bs + (ca.shape[-2], cb.shape[-1])),
                                  _sequential_matmul(ca, cb))


@pytest.mark.cpu_only
def test_a_weighted_sum_over_a_middle_axis_is_summed_where_it_lies():
    # einsum('bkh,bk->bh') (a weighted sum over a few rows, as in a meta-gradient's
    # per-task products) is a matrix-vector product whose contracting axis lies before a
    # run of free elements: on a CPU with vector lanes, summed where it lies, a reduction
    # over the middle axis vectorised along h (the GPU's layout is left as it was).
    # Regression: transposed to rows of k first, rows of 10 after a tanh went one element
    # at a time (107 us against 27).
    import fusionjit
    import fusionjit.numpy as fnp
    rng = np.random.default_rng(5)
    a = rng.standard_normal((32, 10, 40)).astype(np.float32)
    x = rng.standard_normal((32, 10)).astype(np.float32)
    f = fusionjit.jit(lambda a, x: fnp.einsum("bkh,bk->bh", 1 - fnp.tanh(a) ** 2, x))
    want = np.einsum("bkh,bk->bh", 1 - np.tanh(a.astype(np.float64)) ** 2, x)
    np.testing.assert_allclose(np.asarray(f(a, x)), want, rtol=1e-5, atol=1e-5)
    text = f.lower(a, x).compile().as_text()
    assert " transpose(" not in text and "dimensions={1}" in text, text


@pytest.mark.cpu_only
def test_a_dot_of_any_layout_runs_in_tiles_as_fast_as_the_2d_product():
    # x @ w with x [B, T, D] and a product over two contracting dimensions were computed an
    # element at a time (2.8x and 7.5x the time of the same work as a 2-D product; matmul
    # also copied w once per batch element); now they are the 2-D product after a reshape
    # (and a transpose for the second).
    import fusionjit
    x = np.ones((8, 32, 64), np.float32)
    w = np.ones((64, 128), np.float32)
    text = fusionjit.jit(lambda x, w: x @ w).lower(x, w).compile().as_text()
    (dot,) = [line for line in text.splitlines() if " dot(" in line]
    assert "f32[256,128]" in dot and " transpose(" not in text, text
    two = fusionjit.jit(lambda a, b: lax.dot_general(a, b, (((1, 2), (0, 1)), ((), ()))))
    a, b = np.ones((40, 8, 8), np.float32), np.ones((8, 8, 128), np.float32)
    kernels = two.lower(a, b).compile().kernels
    assert len(kernels) == 1 and kernels[0]["kind"] == "kOutput", kernels


@pytest.mark.cpu_only
@pytest.mark.parametrize("n", [3, 6, 18, 100])
def test_a_product_with_a_partial_vector_of_columns_is_padded_to_whole_vectors(n):
    # An RL policy's logits (3, 6 or 18 actions): the columns past the last whole vector
    # (and past the last whole tile span) were computed an element at a time, 4-6x slower
    # than the product padded with zero columns. The rhs is padded, the result sliced back;
    # the sums are those of the unpadded product, bit for bit.
    import fusionjit
    rng = np.random.default_rng(n)
    x = rng.standard_normal((300, 64)).astype(np.float32)
    w = rng.standard_normal((64, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    f = fusionjit.jit(lambda x, w, b: x @ w + b)
    text = f.lower(x, w, b).compile().as_text()
    (dot,) = [line for line in text.splitlines() if " dot(" in line]
    padded = int(dot.split("f32[300,")[1].split("]")[0])
    assert padded > n and " pad(" in text and " slice(" in text, text
    assert padded & (padded - 1) == 0 or padded % 8 == 0, padded
    np.testing.assert_array_equal(np.asarray(f(x, w, b)), _sequential_matmul(x, w) + b)
    # A small product (a loop step's) keeps its one kernel.
    small = fusionjit.jit(lambda x, w, b: x @ w + b).lower(x[:4], w, b).compile()
    assert small.num_kernels == 1, small.as_text()
    # explain says why the bias is not the dot's epilogue.
    why = str(fusionjit.explain(lambda x, w, b: x @ w + b)(x, w, b))
    assert "the product's columns were padded to whole vectors" in why, why


def _largest_transpose(text: str) -> int:
    """The most elements a transpose in a compiled module's text writes."""
    largest = 0
    for line in text.splitlines():
        if " transpose(" in line:
            dims = line.split("=")[1].split("[")[1].split("]")[0]
            largest = max(largest, int(np.prod([int(d) for d in dims.split(",") if d])))
    return largest


@pytest.mark.cpu_only
def test_weight_gradients_read_their_operands_where_they_lie():
    # The gradient of x @ w with respect to w is dot(g, x) over the batch. The tiled product
    # reads its lhs as [K, M] as well as [M, K], so neither g nor x is transposed by a kernel
    # of its own (a training step of a 64-256-6 classifier spent a fifth of its time
    # transposing g, [4096, 256]); a policy head's gradient, 6 rows one way, is computed
    # transposed, with its 256 rows shared among threads.
    import fusionjit
    import fusionjit.numpy as fnp
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 32)).astype(np.float32)
    w1 = (rng.standard_normal((32, 256)) * 0.2).astype(np.float32)
    w2 = (rng.standard_normal((256, 6)) * 0.2).astype(np.float32)

    def loss(w1, w2, x):
        return fnp.sum(fnp.tanh(fnp.maximum(x @ w1, 0.0) @ w2) ** 2)

    def step(w1, w2, x):
        g1, g2 = fusionjit.grad(loss, argnums=(0, 1))(w1, w2, x)
        return w1 - 0.1 * g1, w2 - 0.1 * g2

    f = fusionjit.jit(step)
    text = f.lower(w1, w2, x).compile().as_text()
    # Only weights are transposed (w2 for g @ w2^T, the gradients for their updates), never
    # an array with a row per example.
    assert _largest_transpose(text) <= 32 * 256, text
    dots = [line for line in text.splitlines() if " dot(" in line]
    assert sum("lhs_contracting_dims={0}" in d for d in dots) == 2, dots
    # Against NumPy's gradient in float64.
    h = np.maximum(x.astype(np.float64) @ w1, 0)
    z = h @ w2
    gz = 2 * np.tanh(z) * (1 - np.tanh(z) ** 2)
    g2 = h.T @ gz
    g1 = x.T @ ((gz @ w2.T) * (h > 0))
    n1, n2 = f(w1, w2, x)
    np.testing.assert_allclose(np.asarray(n1), w1 - 0.1 * g1, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(n2), w2 - 0.1 * g2, rtol=1e-4, atol=1e-4)


@pytest.mark.cpu_only
def test_a_transposed_operand_is_folded_into_the_dot():
    # `a.T @ b` traced to a transpose and a canonical dot; the transpose was a kernel of its
    # own (5% of A^T B's time). Folded into the dot's dimension numbers (XLA's
    # TransposeFolding), the product reads a as [K, M] where it lies: one kernel, the same
    # sums in the same order.
    import fusionjit
    rng = np.random.default_rng(3)
    a = rng.standard_normal((96, 40)).astype(np.float32)
    b = rng.standard_normal((96, 64)).astype(np.float32)
    f = fusionjit.jit(lambda a, b: a.T @ b)
    text = f.lower(a, b).compile().as_text()
    assert " transpose(" not in text and len(f.lower(a, b).compile().kernels) == 1, text
    np.testing.assert_array_equal(np.asarray(f(a, b)),
                                  _sequential_matmul(np.ascontiguousarray(a.T), b))
    # A transpose that reorders an operand's free dimensions stays: they order the result.
    x = rng.standard_normal((4, 5, 16)).astype(np.float32)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    dims = (((2,), (0,)), ((), ()))
    g = fusionjit.jit(lambda x, w: lax.dot_general(x.transpose(1, 0, 2), w, dims))
    np.testing.assert_allclose(np.asarray(g(x, w)), x.transpose(1, 0, 2) @ w, rtol=1e-5, atol=1e-5)


def test_per_example_weight_gradients_are_written_in_their_own_order():
    # vmap of grad of x @ w: each example's gradient is the outer product of x and the
    # backpropagated error, a dot without contracting dimensions computed [b, 64, 32] and
    # transposed to w's [b, 32, 64]. The transpose was pushed into the broadcasts of the
    # product, so the kernel writes [b, 32, 64] in order, reading its rows where they lie
    # (it wrote 16 MiB a column strip at a time: 1.9 ms, now under 0.6; JAX takes 1.0).
    import fusionjit
    import fusionjit.numpy as fnp
    rng = np.random.default_rng(4)
    w1 = (rng.standard_normal((32, 64)) * 0.2).astype(np.float32)
    b1 = rng.standard_normal(64).astype(np.float32)
    w2 = (rng.standard_normal((64, 8)) * 0.2).astype(np.float32)
    x = rng.standard_normal((256, 32)).astype(np.float32)
    y = rng.standard_normal((256, 8)).astype(np.float32)

    def loss(w, x, y):
        return fnp.sum((fnp.tanh(x @ w + b1) @ w2 - y) ** 2)

    f = fusionjit.jit(fusionjit.vmap(fusionjit.grad(loss), in_axes=(None, 0, 0)))
    text = f.lower(w1, x, y).compile().as_text()
    assert not [line for line in text.splitlines()
                if " transpose(" in line and "[256,32,64]" in line], text
    h = np.tanh(x.astype(np.float64) @ w1 + b1)
    d = (2 * (h @ w2 - y) @ w2.T) * (1 - h ** 2)
    np.testing.assert_allclose(np.asarray(f(w1, x, y)), x[:, :, None] * d[:, None, :],
                               rtol=1e-4, atol=1e-5)
    # The same outer product written by hand and transposed.
    a = rng.standard_normal((8, 5)).astype(np.float32)
    b = rng.standard_normal((8, 7)).astype(np.float32)
    g = fusionjit.jit(lambda a, b: (a[:, :, None] * b[:, None, :] + 1.0).transpose(0, 2, 1))
    assert " transpose(" not in g.lower(a, b).compile().as_text()
    np.testing.assert_array_equal(np.asarray(g(a, b)),
                                  (a[:, :, None] * b[:, None, :] + 1.0).transpose(0, 2, 1))


@pytest.mark.cpu_only
def test_a_product_of_few_rows_is_computed_transposed_to_share_its_rows():
    # A DQN's fully connected layer over a batch of 32, [32, 3136] @ [3136, 512]: rows for
    # one thread's chunk only, so one thread computed it (1.4 ms). Computed transposed, its
    # 512 rows are shared; the transposes of x and of the result cost less than a thread's
    # share of the product. The sums are the same, in the same order: the same bits.
    import fusionjit
    rng = np.random.default_rng(6)
    x = rng.standard_normal((32, 784)).astype(np.float32)
    w = rng.standard_normal((784, 512)).astype(np.float32)
    f = fusionjit.jit(lambda x, w: fnp_relu(x @ w))
    text = f.lower(x, w).compile().as_text()
    (dot,) = [line for line in text.splitlines() if " dot(" in line]
    assert "f32[512,32]" in dot, text
    np.testing.assert_array_equal(np.asarray(f(x, w)), np.maximum(_sequential_matmul(x, w), 0))
    # A product with rows for several chunks stays as it is.
    y = rng.standard_normal((256, 784)).astype(np.float32)
    (dot,) = [line for line in f.lower(y, w).compile().as_text().splitlines() if " dot(" in line]
    assert "f32[256,512]" in dot


def fnp_relu(h):
    import fusionjit.numpy as fnp
    return fnp.maximum(h, 0.0)
