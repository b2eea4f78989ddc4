"""lax.top_k: the runtime's top-k kernel (one pass over each row) in JAX's order, bit for
bit: the IEEE total order for floats (+NaN, the larger payload first, > +inf > ... > +0.0 >
-0.0 > ... > -inf > -NaN; bf16's NaNs as their sign's canonical NaN, as JAX returns them),
equal entries by the lower index first; its values through a gather, so that vmap and grad
work as JAX's; rows split over threads in any way."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fusionjit
from fusionjit import lax
from conftest import requires_jax
from test_reliability import run_script

_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_SIGNED = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}


def reference(x, k):
    """NumPy's stable sort by the total order, descending: (values, indices); bf16 NaNs
    first made their sign's canonical NaN (XLA:CPU's bf16 top_k)."""
    x = np.asarray(x)
    d = x.dtype
    if d == ml_dtypes.bfloat16:
        bits = x.view(np.uint16)
        nan = (bits & 0x7FFF) > 0x7F80
        x = np.where(nan, ((bits & 0x8000) | 0x7FC0).astype(np.uint16), bits).view(d)
    if d.kind == "f" or d == ml_dtypes.bfloat16:
        signed = x.view(_SIGNED[d.itemsize]).astype(np.int64)
        width = 8 * d.itemsize
        key = np.where(signed < 0, signed ^ ((1 << (width - 1)) - 1), signed)
    else:
        key = x.astype(np.uint64 if d.kind == "u" else np.int64)
    order = np.argsort(~key, axis=-1, kind="stable")[..., :k].astype(np.int32)
    return np.take_along_axis(x, order, -1), order


def special_rows(dtype, shape, seed):
    """Rows of ties, signed zeros, infinities, and NaNs of both signs with several payloads,
    among normal values."""
    rng = np.random.default_rng(seed)
    x = (np.round(rng.standard_normal(shape) * 2) / 2).astype(dtype)
    # (No signalling NaN in f16: where a kernel computes f16 in f32, the emulated GPU's or
    # a CPU's without F16C, a gather quiets it; f32's and f64's are copied as they are.)
    bits = {np.dtype(np.float16): [0x7e00, 0x7e01, 0xfe00, 0xfe01, 0xffff, 0x7fff],
            np.dtype(ml_dtypes.bfloat16): [0x7fc0, 0x7fc1, 0x7f81, 0xffc0, 0xffff, 0x7fff],
            np.dtype(np.float32): [0x7fc00000, 0x7fc00001, 0x7f800001, 0xffc00000, 0xffffffff,
                                   0x7fffffff],
            np.dtype(np.float64): [0x7ff8000000000000, 0x7ff8000000000001, 0x7ff0000000000001,
                                   0xfff8000000000000, 0xffffffffffffffff, 0x7fffffffffffffff]}
    nans = np.array(bits[np.dtype(dtype)], _BITS[np.dtype(dtype).itemsize]).view(dtype)
    specials = np.concatenate([np.array([0.0, -0.0, np.inf, -np.inf], dtype), nans])
    flat = x.reshape(-1)
    where = rng.random(flat.size) < 0.3
    flat[where] = specials[rng.integers(0, len(specials), where.sum())]
    return x


def assert_bitwise_equal(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    same = got.view(_BITS[got.dtype.itemsize]) == want.view(_BITS[want.dtype.itemsize])
    assert same.all(), f"{np.argwhere(~same)[:5]}: {got[~same][:5]} != {want[~same][:5]}"


def check(x, k, jax_top_k=None):
    """top_k of ``x`` jitted, against the reference and JAX's, bit for bit."""
    got = fusionjit.jit(lambda a: lax.top_k(a, k))(x)
    for g, w in zip(got, reference(x, k)):
        assert_bitwise_equal(g, w)
    if jax_top_k is not None:
        for g, w in zip(got, jax_top_k(x, k)):
            assert_bitwise_equal(g, w)


KS = (1, 4, 16, 17, 50)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
@requires_jax
def test_floats_match_jax_in_the_total_order(dtype):
    # Before: -0.0 counted as +0.0 and every NaN as one +NaN (jnp.sort's order): a row's
    # -0.0 came before a later +0.0, -NaN came first and NaN payloads in index order.
    import jax
    for n in (200, 1000):  # k = 50: a selection of 200, one pass over 1000
        x = special_rows(dtype, (2, 3, n), seed=n)
        for k in KS + (n,):
            check(x, k, jax.lax.top_k)


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8, np.int16, np.uint16,
                                   np.uint32, np.bool_])
@requires_jax
def test_integers_match_jax(dtype):
    import jax
    rng = np.random.default_rng(5)
    info = np.iinfo(dtype) if dtype != np.bool_ else None
    if info is None:
        x = rng.integers(0, 2, (3, 300)).astype(dtype)
    else:
        x = rng.integers(max(info.min, -4), min(info.max, 4), (3, 300), endpoint=True)
        x = x.astype(dtype)
        x[0, :] = info.min   # no sentinel: the type's lowest value is kept as any other
        x[1, ::7] = info.max
    for k in KS + (300,):
        check(x, k, jax.lax.top_k)


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.uint64])
def test_64_bit_keys_match_the_total_order(x64, dtype):
    if np.dtype(dtype).kind == "f":
        x = special_rows(dtype, (3, 500), seed=1)
    else:
        info = np.iinfo(dtype)
        x = np.random.default_rng(2).integers(info.min, info.max, (3, 500), dtype=dtype)
        x[0, ::3] = x[0, 0]   # ties
    for k in KS + (500,):
        check(x, k)
    try:
        import jax
    except ImportError:
        return
    with jax.enable_x64(True):
        check(x, 17, jax.lax.top_k)


@requires_jax
def test_eager_top_k_is_a_list_as_jax():
    import jax
    x = special_rows(np.float32, (4, 100), seed=3)
    got = lax.top_k(x, 5)
    assert isinstance(got, list)
    for g, w in zip(got, jax.lax.top_k(x, 5)):
        assert_bitwise_equal(g, w)
    for g in lax.top_k(x, 0):
        assert np.asarray(g).shape == (4, 0)


@requires_jax
@pytest.mark.parametrize("in_axes", [0, 1])
def test_vmap_of_top_k_matches_jax(in_axes):
    import jax
    x = special_rows(np.float32, (5, 6, 300), seed=4)
    got = fusionjit.jit(fusionjit.vmap(lambda a: lax.top_k(a, 17), in_axes=in_axes))(x)
    want = jax.vmap(lambda a: jax.lax.top_k(a, 17), in_axes=in_axes)(x)
    for g, w in zip(got, want):
        assert_bitwise_equal(g, w)


@requires_jax
def test_gradients_reach_the_values_taken():
    import jax
    x = np.round(np.random.default_rng(6).standard_normal((4, 500)) * 2).astype(np.float32)
    w = np.arange(1.0, 18.0, dtype=np.float32)

    def loss(top_k):
        return lambda a: (top_k(a, 17)[0] ** 2 * w).sum()

    got = fusionjit.jit(fusionjit.grad(loss(lax.top_k)))(x)
    assert_bitwise_equal(got, jax.grad(loss(jax.lax.top_k))(x))


@pytest.mark.cpu_only
@pytest.mark.parametrize("shape,k", [((64, 32768), 64), ((8, 32000), 4), ((256, 1000), 10)])
def test_top_k_is_one_parallel_pass_over_the_rows(shape, k):
    # Before: rows fully sorted by one single-threaded custom call (k > 16), or picked one
    # by one by 2k reductions (k <= 16); 15-30x slower than JAX. Now one custom call, run
    # in parallel because its rows, not its few outputs, are its work.
    x = np.zeros(shape, np.float32)
    kernels = fusionjit.jit(lambda a: lax.top_k(a, k)).lower(x).compile().kernels
    calls = [c for c in kernels if c["kind"] == "custom-call"]
    assert [c["name"] for c in calls] == ["custom-call.top_k.f32"], kernels
    assert calls[0]["parallel"], calls
    assert len(kernels) == 2, kernels   # and the gather of the values


def test_top_k_does_not_depend_on_the_thread_count():
    code = """
import hashlib, numpy as np, fusionjit
from fusionjit import lax
x = np.round(np.random.default_rng(0).standard_normal((37, 3000)) * 4).astype(np.float32)
for k in (5, 40, 600):   # one pass; a selection of the row
    v, i = fusionjit.jit(lambda a: lax.top_k(a, k))(x)
    print(k, hashlib.sha1(np.asarray(i).tobytes() + np.asarray(v).tobytes()).hexdigest())
"""
    outs = [run_script(code, env={"FUSIONJIT_NUM_THREADS": t}) for t in ("1", "2", "3")]
    for p in outs:
        assert p.returncode == 0, p.stderr[-2000:]
    assert outs[0].stdout == outs[1].stdout == outs[2].stdout
