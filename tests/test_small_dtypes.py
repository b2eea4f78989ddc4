"""The 8- and 16-bit dtypes: int8, int16, uint8, uint16, float16 and bfloat16 (ml_dtypes).

Integers wrap as NumPy's do. 16-bit floats are computed in float32 and rounded to 16 bits
after every operation (the low-precision pass), so elementwise arithmetic is bit-exact with
NumPy's float16 and ml_dtypes' bfloat16 (which do the same), transcendental functions within
one ulp of rounding NumPy's float32 result; reductions and dots accumulate in float32.
Conversions to and from 16-bit floats round to nearest even, in compiled code and in
constant folding alike."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fusionjit
import fusionjit.lax as lax
import fusionjit.numpy as fnp
import fusionjit.random as fr
from conftest import requires_jax

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
FLOATS16 = [pytest.param(F16, id="float16"), pytest.param(BF16, id="bfloat16")]
INTS = [np.dtype(t) for t in (np.int8, np.int16, np.uint8, np.uint16)]
INT_PARAMS = [pytest.param(d, id=d.name) for d in INTS]


def bits(x):
    return np.asarray(x).view(np.uint16)


def same_floats(got, want):
    """Bit-identical, except that any NaN matches any NaN."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    np.testing.assert_array_equal(bits(got)[~nan], bits(want)[~nan])


def ulps(got, want):
    """Distance in units in the last place of 16-bit floats of one sign."""
    g = bits(got).astype(np.int32)
    w = bits(want).astype(np.int32)
    g = np.where(g & 0x8000, -(g & 0x7fff), g)
    w = np.where(w & 0x8000, -(w & 0x7fff), w)
    return np.abs(g - w)


def every_16_bit_float(dtype):
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)


def random_f32(n, seed=0):
    """f32 values that exercise rounding to 16 bits: random bit patterns (all exponents,
    NaN and inf included), values on and next to the halfway points of f16 and bf16, and
    f16's subnormal and overflow ranges."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    halves = (rng.integers(0, 1 << 16, n, dtype=np.uint32) << 16) | 0x8000
    f16_ties = (rng.integers(0x3000, 0x4800, n, dtype=np.uint32) << 13) | 0x1000
    near = np.concatenate([halves, f16_ties])
    near = np.concatenate([near, near + 1, near - 1])
    small = rng.uniform(-7e-5, 7e-5, n).astype(np.float32).view(np.uint32)
    big = rng.uniform(65000, 66000, n).astype(np.float32).view(np.uint32)
    return np.concatenate([raw, near, small, big]).view(np.float32)


# --- conversions, bit for bit -------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS16)
def test_every_16_bit_float_converts_to_float32_exactly(dtype):
    x = every_16_bit_float(dtype)
    got = np.asarray(fusionjit.jit(lambda a: a.astype(np.float32))(x))
    want = x.astype(np.float32)
    nan = np.isnan(want)  # (hardware conversions quiet signalling NaNs: payloads not promised)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])


@pytest.mark.parametrize("dtype", FLOATS16)
def test_float32_rounds_to_16_bits_to_nearest_even(dtype):
    x = random_f32(40_000)
    with np.errstate(over="ignore"):
        want = x.astype(dtype)
    same_floats(fusionjit.jit(lambda a: a.astype(dtype))(x), want)


@pytest.mark.parametrize("dtype", FLOATS16)
def test_float64_rounds_through_float32_as_xla(dtype):
    # Halfway points of the 16-bit type nudged by much less than a float32 ulp: XLA (and so
    # JAX) converts float64 -> float32 -> 16 bits, rounding twice; NumPy's float16 rounds
    # once and differs exactly here. fusionjit follows XLA, folded or compiled.
    fusionjit.config.update("fusionjit_enable_x64", True)
    try:
        base = every_16_bit_float(dtype).astype(np.float64)
        base = base[np.isfinite(base) & (np.abs(base) < 1e4) & (base != 0)]
        nxt = np.nextafter(base.astype(dtype), np.array(np.inf, dtype)).astype(np.float64)
        mid = (base + nxt) / 2
        x = np.concatenate([mid + np.abs(mid) * 2.0 ** -40, mid - np.abs(mid) * 2.0 ** -40, mid])
        x = x[np.isfinite(x)]
        got = fusionjit.jit(lambda a: a.astype(dtype))(x)
        want = x.astype(np.float32).astype(dtype)
        same_floats(got, want)
        folded = fusionjit.jit(lambda: fnp.asarray(x[:64]).astype(dtype))()
        same_floats(folded, want[:64])
    finally:
        fusionjit.config.update("fusionjit_enable_x64", False)


@pytest.mark.parametrize("dtype", FLOATS16)
def test_constant_folding_gives_the_compiled_bits(dtype):
    x = random_f32(2_000, seed=3)
    compiled = fusionjit.jit(lambda a: a.astype(dtype))(x)
    folded = fusionjit.jit(lambda: fnp.asarray(x).astype(dtype))()
    same_floats(folded, compiled)
    h = np.asarray(compiled)
    up_compiled = fusionjit.jit(lambda a: a.astype(np.float32))(h)
    up_folded = fusionjit.jit(lambda: fnp.asarray(h).astype(np.float32))()
    a, b = np.asarray(up_folded), np.asarray(up_compiled)
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))  # NaN payloads: not promised
    np.testing.assert_array_equal(a.view(np.uint32)[~np.isnan(a)], b.view(np.uint32)[~np.isnan(b)])


@pytest.mark.parametrize("dtype", FLOATS16)
@pytest.mark.parametrize("to", INT_PARAMS + [pytest.param(np.dtype(np.int32), id="int32")])
def test_16_bit_floats_to_integers_saturate(dtype, to):
    info = np.iinfo(to)
    x = np.array([0.0, 1.5, -1.5, 100.7, -100.7, 3e4, -3e4, np.inf, -np.inf, np.nan], dtype)
    got = np.asarray(fusionjit.jit(lambda a: a.astype(to))(x))
    f = x.astype(np.float64)
    want = np.where(np.isnan(f), 0, np.clip(np.trunc(np.nan_to_num(f, posinf=1e30, neginf=-1e30)),
                                           info.min, info.max)).astype(to)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", FLOATS16)
def test_integers_and_bools_to_16_bit_floats(dtype):
    i = np.array([0, 1, -7, 255, 2049, 65504, 65520, 70000, -2 ** 31], np.int32)
    same_floats(fusionjit.jit(lambda a: a.astype(dtype))(i),
                i.astype(np.float32).astype(dtype) if dtype == BF16 else i.astype(dtype))
    b = np.array([True, False])
    same_floats(fusionjit.jit(lambda a: a.astype(dtype))(b), b.astype(dtype))
    same_floats(fusionjit.jit(lambda a: a.astype(BF16 if dtype == F16 else F16))(
        every_16_bit_float(dtype)), every_16_bit_float(dtype).astype(np.float32).astype(
        BF16 if dtype == F16 else F16))


# --- arithmetic ---------------------------------------------------------------------------

BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
          "divide": np.divide, "maximum": np.maximum, "minimum": np.minimum}
UNARY = ["exp", "log", "sin", "cos", "tanh", "sqrt", "expm1", "log1p", "arctan", "floor",
         "negative", "abs", "sign"]


@pytest.mark.parametrize("dtype", FLOATS16)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_arithmetic_is_bit_exact(dtype, name):
    rng = np.random.default_rng(1)
    a = (rng.standard_normal(4099) * 50).astype(dtype)
    b = (rng.standard_normal(4099) * 3).astype(dtype)
    got = fusionjit.jit(getattr(fnp, name))(a, b)
    with np.errstate(all="ignore"):
        want = BINARY[name](a.astype(np.float32), b.astype(np.float32)).astype(dtype)
    same_floats(got, want)


@pytest.mark.parametrize("dtype", FLOATS16)
@pytest.mark.parametrize("name", UNARY)
def test_unary_functions_within_an_ulp(dtype, name):
    x = every_16_bit_float(dtype)
    x = x[np.isfinite(x.astype(np.float32))]
    got = np.asarray(fusionjit.jit(getattr(fnp, name))(x))
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x.astype(np.float32)).astype(dtype)
    assert got.dtype == dtype
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    assert ulps(got[~nan], want[~nan]).max() <= 1
    assert np.mean(bits(got[~nan]) == bits(want[~nan])) > 0.99


@pytest.mark.parametrize("dtype", FLOATS16)
def test_each_operation_rounds_inside_a_fused_kernel(dtype):
    # a * a = 1 + 2 eps + eps^2 rounds to 1 + 2 eps; minus (1 + 2 eps) is then exactly 0.
    # Without rounding after the multiply the result would be eps^2.
    eps = float(fusionjit.numpy.finfo(dtype).eps)
    a = np.full(8, 1 + eps, dtype)
    c = np.full(8, -(1 + 2 * eps), dtype)
    f = fusionjit.jit(lambda a, c: a * a + c)
    same_floats(f(a, c), (a * a + c))
    assert not np.asarray(f(a, c)).astype(np.float32).any()
    assert len(f.lower(a, c).compile().kernels) == 1


@pytest.mark.parametrize("dtype", FLOATS16)
def test_weak_python_scalars_keep_the_16_bit_dtype(dtype):
    x = np.array([1.0, 2.5, -3.0], dtype)
    out = fusionjit.jit(lambda a: a * 3 + 0.1)(x)
    assert out.dtype == dtype
    want = ((x.astype(np.float32) * 3).astype(dtype).astype(np.float32)
            + np.float32(np.asarray(0.1, dtype))).astype(dtype)
    same_floats(out, want)
    assert (fnp.asarray(x) + fnp.asarray(np.float32(1))).dtype == np.float32
    assert (fnp.asarray(x) + fnp.ones(3, F16 if dtype == BF16 else BF16)).dtype == np.float32


@pytest.mark.parametrize("dtype", FLOATS16)
def test_reductions_and_dot_accumulate_in_float32(dtype):
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 1, (64, 300)).astype(dtype)
    w = rng.uniform(-1, 1, (300, 16)).astype(dtype)
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    s = np.asarray(fusionjit.jit(lambda a: fnp.sum(a, axis=1))(x))
    assert s.dtype == dtype
    assert ulps(s, x32.sum(axis=1).astype(dtype)).max() <= 1
    # 300 additions rounded to 16 bits each would be off by tens of ulps.
    m = np.asarray(fusionjit.jit(fnp.max)(x))
    assert m == x32.max().astype(dtype)
    d = np.asarray(fusionjit.jit(lambda a, b: a @ b)(x, w))
    assert d.dtype == dtype
    assert ulps(d, (x32 @ w32).astype(dtype)).max() <= 1
    mean = np.asarray(fusionjit.jit(fnp.mean)(x))
    assert abs(float(mean.astype(np.float32)) - x32.mean()) < 4e-3


@pytest.mark.parametrize("dtype", FLOATS16)
def test_means_variances_and_running_sums_are_computed_in_float32(dtype):
    # As JAX: a float16 sum of 2048 hundreds overflows (inf), so the mean, the variance and
    # a layer norm built on them were inf and NaN; a running sum in 16 bits stops growing.
    x = np.full(2048, 100, dtype)
    for f in (fnp.mean, fnp.var, fnp.std, fusionjit.jit(fnp.var)):
        r = np.asarray(f(x))
        assert r.dtype == dtype and np.isfinite(r.astype(np.float32))
    assert float(fnp.mean(x)) == 100 and float(fnp.var(x)) == 0
    y = x + (np.arange(2048) % 7).astype(dtype)
    ln = fusionjit.jit(lambda a: (a - a.mean(-1, keepdims=True))
                       / fnp.sqrt(a.var(-1, keepdims=True) + 1e-5))(y)
    y32 = y.astype(np.float32)
    np.testing.assert_allclose(np.asarray(ln).astype(np.float32),
                               (y32 - y32.mean()) / np.sqrt(y32.var() + 1e-5), atol=0.02)
    assert abs(float(fnp.mean(fnp.full(3000, 0.1, dtype))) - 0.1) < 1e-3
    for f in (fnp.cumsum, fusionjit.jit(fnp.cumsum)):
        c = np.asarray(f(np.full(3000, 0.5, dtype)))
        assert c.dtype == dtype
        np.testing.assert_array_equal(c.astype(np.float32),
                                      (0.5 * np.arange(1, 3001)).astype(dtype).astype(np.float32))


@pytest.mark.parametrize("dtype", FLOATS16)
def test_layer_norm_and_softmax_in_16_bits(dtype):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((32, 128)).astype(dtype)

    def layer_norm(x):
        mu = fnp.mean(x, axis=-1, keepdims=True)
        var = fnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return (x - mu) / fnp.sqrt(var + 1e-5)

    def softmax(x):
        e = fnp.exp(x - fnp.max(x, axis=-1, keepdims=True))
        return e / fnp.sum(e, axis=-1, keepdims=True)

    x32 = x.astype(np.float32)
    ln = np.asarray(fusionjit.jit(layer_norm)(x)).astype(np.float32)
    want = (x32 - x32.mean(-1, keepdims=True)) / np.sqrt(x32.var(-1, keepdims=True) + 1e-5)
    tol = 0.02 if dtype == F16 else 0.1
    np.testing.assert_allclose(ln, want, atol=tol, rtol=tol)
    sm = np.asarray(fusionjit.jit(softmax)(x)).astype(np.float32)
    e = np.exp(x32 - x32.max(-1, keepdims=True))
    np.testing.assert_allclose(sm, e / e.sum(-1, keepdims=True), atol=tol / 10, rtol=tol)


@pytest.mark.parametrize("dtype", FLOATS16)
def test_loops_carry_16_bit_floats(dtype):
    def f(x):
        return lax.fori_loop(0, 10, lambda i, c: c * 0.5 + 1.0, x)
    x = np.array([0.0, 3.0, -7.0], dtype)
    want = x.copy()
    for _ in range(10):
        want = (want.astype(np.float32) * 0.5).astype(dtype)
        want = (want.astype(np.float32) + 1).astype(dtype)
    out = fusionjit.jit(f)(x)
    assert out.dtype == dtype
    same_floats(out, want)


@pytest.mark.parametrize("dtype", FLOATS16)
def test_sorting_and_comparisons(dtype):
    x = np.array([3.5, -0.0, np.nan, -2.0, np.inf, 0.0, -np.inf, 1e-3], dtype)
    want = np.sort(x.astype(np.float32), kind="stable").astype(dtype)
    same_floats(fusionjit.jit(fnp.sort)(x), want)
    np.testing.assert_array_equal(fusionjit.jit(lambda a: a > 0)(x), x.astype(np.float32) > 0)
    np.testing.assert_array_equal(fusionjit.jit(fnp.argmax)(x), np.argmax(x.astype(np.float32)))


def test_finfo_and_iinfo_of_every_small_dtype():
    assert float(fnp.finfo(BF16).eps) == 2.0 ** -7
    assert float(fnp.finfo(fnp.float16).max) == 65504.0
    assert fnp.iinfo(fnp.int8).min == -128 and fnp.iinfo(fnp.uint16).max == 65535
    assert fnp.isdtype(BF16, "real floating") and not fnp.isdtype(BF16, "integral")
    # (as jax.numpy's: a scalar type that converts, and stands for ml_dtypes' as a dtype)
    assert fnp.bfloat16 == ml_dtypes.bfloat16 and np.dtype(fnp.bfloat16) == ml_dtypes.bfloat16


# --- integers -----------------------------------------------------------------------------

INT_BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
              "maximum": np.maximum, "minimum": np.minimum, "bitwise_and": np.bitwise_and,
              "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
              "floor_divide": np.floor_divide, "remainder": np.remainder}


@pytest.mark.parametrize("dtype", INT_PARAMS)
@pytest.mark.parametrize("name", list(INT_BINARY))
def test_integer_arithmetic_wraps_as_numpy(dtype, name):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(5)
    a = rng.integers(info.min, info.max, 1000, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, 1000, endpoint=True).astype(dtype)
    if name in ("floor_divide", "remainder"):
        b[b == 0] = 1
        if info.min < 0:  # NumPy's INT_MIN // -1 is undefined; skip it
            b[(a == info.min) & (b == -1)] = 1
    got = fusionjit.jit(getattr(fnp, name))(a, b)
    with np.errstate(all="ignore"):
        want = INT_BINARY[name](a, b)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", INT_PARAMS)
def test_integer_unary_shifts_reductions_and_conversions(dtype):
    info = np.iinfo(dtype)
    a = np.array([info.min, info.min + 1, -1 if info.min else 0, 0, 1, 77, info.max], dtype)
    np.testing.assert_array_equal(fusionjit.jit(fnp.negative)(a), np.negative(a))
    np.testing.assert_array_equal(fusionjit.jit(fnp.invert)(a), np.invert(a))
    np.testing.assert_array_equal(fusionjit.jit(lambda x: x << 3)(a), a << np.array(3, dtype))
    np.testing.assert_array_equal(fusionjit.jit(lambda x: x >> 2)(a), a >> np.array(2, dtype))
    np.testing.assert_array_equal(fusionjit.jit(fnp.max)(a), a.max())
    # Sums wrap in the dtype as NumPy's with dtype=... do (JAX: the same dtype out).
    np.testing.assert_array_equal(fusionjit.jit(lambda x: fnp.sum(x, dtype=dtype))(a),
                                  a.sum(dtype=dtype))
    to = fusionjit.jit(lambda x: x.astype(dtype))
    np.testing.assert_array_equal(fusionjit.jit(lambda x: x.astype(np.int32))(a),
                                  a.astype(np.int32))
    wide = np.array([70000, -70000, 300, -300, 2 ** 31 - 1], np.int32)
    np.testing.assert_array_equal(to(wide), wide.astype(dtype))
    f = np.array([1e9, -1e9, 3.7, -3.7, np.nan], np.float32)
    saturated = np.clip(np.trunc(np.nan_to_num(f)), info.min, info.max)
    np.testing.assert_array_equal(to(f), np.where(np.isnan(f), 0, saturated).astype(dtype))


def test_small_integer_promotion_values():
    i8 = np.array([-128, 127], np.int8)
    u8 = np.array([255, 1], np.uint8)
    out = fusionjit.jit(lambda a, b: a + b)(i8, u8)
    assert out.dtype == np.int16
    np.testing.assert_array_equal(out, i8.astype(np.int16) + u8.astype(np.int16))
    out = fusionjit.jit(lambda a: a + 1)(u8)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, u8 + np.uint8(1))
    # A Python int beyond int8 wraps into it, as JAX (300 is 44).
    np.testing.assert_array_equal(fnp.asarray(i8) + 300, np.array([-84, -85], np.int8))
    with pytest.raises(OverflowError):
        fnp.asarray(i8) + 2 ** 40


def test_images_as_uint8_normalised_in_float16():
    img = np.random.default_rng(6).integers(0, 256, (4, 8, 8, 3), dtype=np.uint8)
    f = fusionjit.jit(lambda x: (x.astype(fnp.float16) / 255 - 0.5) * 2)
    want = ((img.astype(np.float16) / np.float16(255) - np.float16(0.5)) * np.float16(2))
    same_floats(f(img), want)


# --- random -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS16)
def test_uniform_16_bit_floats_in_range(dtype):
    u = np.asarray(fr.uniform(fr.key(0), (10_000,), dtype, -1.0, 2.0)).astype(np.float32)
    assert u.min() >= -1 and u.max() < 2 and abs(u.mean() - 0.5) < 0.05
    n = np.asarray(fr.normal(fr.key(1), (10_000,), dtype)).astype(np.float32)
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05


@requires_jax
@pytest.mark.parametrize("partitionable", [True, False], ids=["partitionable", "original"])
def test_random_bits_of_small_dtypes_match_jax(partitionable):
    import jax
    saved_j = jax.config.jax_threefry_partitionable
    saved_f = fusionjit.config.fusionjit_threefry_partitionable
    jax.config.update("jax_threefry_partitionable", partitionable)
    fusionjit.config.update("fusionjit_threefry_partitionable", partitionable)
    try:
        for d in (np.uint8, np.uint16):
            for shape in [(1,), (5,), (3, 7)]:
                np.testing.assert_array_equal(fr.bits(fr.key(3), shape, d),
                                              jax.random.bits(jax.random.key(3), shape, d))
        for d in (F16, BF16):
            for lo, hi in [(0.0, 1.0), (-2.0, 3.0), (0.1, 0.7)]:
                np.testing.assert_array_equal(
                    bits(fr.uniform(fr.key(5), (257,), d, lo, hi)),
                    bits(jax.random.uniform(jax.random.key(5), (257,), d, lo, hi)))
            np.testing.assert_array_equal(bits(fr.normal(fr.key(6), (257,), d)),
                                          bits(jax.random.normal(jax.random.key(6), (257,), d)))
    finally:
        jax.config.update("jax_threefry_partitionable", saved_j)
        fusionjit.config.update("fusionjit_threefry_partitionable", saved_f)


@requires_jax
@pytest.mark.parametrize("dtype", FLOATS16)
def test_16_bit_programs_match_jax(dtype):
    import jax
    import jax.numpy as jnp
    rng = np.random.default_rng(7)
    x = rng.standard_normal((16, 64)).astype(dtype)
    w = (rng.standard_normal((64, 8)) * 0.1).astype(dtype)

    def mlp(np_, x, w):
        h = np_.tanh(x @ w)
        return np_.exp(h) * 2 - 1.5, np_.sum(h * h, axis=0)

    got = fusionjit.jit(lambda x, w: mlp(fnp, x, w))(x, w)
    want = jax.jit(lambda x, w: mlp(jnp, x, w))(x, w)
    for g, j in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(j).dtype == dtype
        assert ulps(g, j).max() <= 2


@pytest.mark.parametrize("dtype", [np.float16, BF16])
def test_sign_bit_functions_of_16_bit_floats(dtype):
    # Before: copysign, nextafter, signbit and frexp bitcast 2-byte floats to a 4-byte
    # unsigned type and raised TypeError.
    x = np.array([1.5, -2.0, 0.0, -0.0, 3e-5, np.inf, -np.inf, 7.0], dtype)
    y = np.array([-1, 1, -1, 1, -2, 1, 2, -3], dtype)
    f32 = np.float32
    got = np.asarray(fusionjit.jit(fnp.copysign)(x, y))
    np.testing.assert_array_equal(got.view(np.uint16), np.copysign(x.astype(f32), y.astype(f32))
                                  .astype(dtype).view(np.uint16))
    np.testing.assert_array_equal(np.asarray(fnp.signbit(x)), np.signbit(x.astype(f32)))
    m, e = fusionjit.jit(fnp.frexp)(x)
    m_want, e_want = np.frexp(x.astype(f32))
    np.testing.assert_array_equal(np.asarray(m).astype(f32), m_want)
    np.testing.assert_array_equal(np.asarray(e), e_want)
    after = np.asarray(fusionjit.jit(fnp.nextafter)(x, y)).view(np.uint16)
    bits = x.view(np.uint16).astype(np.int64)
    towards = np.where((y.astype(f32) > x.astype(f32)) == (x.astype(f32) > 0), 1, -1)
    want = np.where(x.astype(f32) == 0, (y.view(np.uint16) & 0x8000) | 1, bits + towards)
    np.testing.assert_array_equal(after, want.astype(np.uint16))


def test_preferred_element_type_sums_in_the_preferred_type():
    # It was applied after the contraction: int8 products summed in int8 wrapped (an einsum
    # of [[100, 100]] and [[2], [2]] gave -112 for 400), and matmul, dot, vdot, inner,
    # lax.dot and lax.dot_general refused the keyword (hunt 6).
    a = fnp.array([[100, 100]], fnp.int8)
    b = fnp.array([[2], [2]], fnp.int8)
    i32 = fnp.int32
    for out in (fnp.einsum("ij,jk->ik", a, b, preferred_element_type=i32),
                fnp.matmul(a, b, preferred_element_type=i32),
                fnp.linalg.matmul(a, b, preferred_element_type=i32),
                fnp.dot(a, b, preferred_element_type=i32),
                fnp.tensordot(a, b, 1, preferred_element_type=i32),
                fusionjit.lax.dot(a, b, preferred_element_type=i32),
                fusionjit.lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                          preferred_element_type=i32),
                fusionjit.jit(lambda a, b: a @ b.astype(i32))(a, b)):
        assert out.dtype == np.int32 and np.asarray(out).tolist() == [[400]]
    assert int(fnp.vdot(a, a, preferred_element_type=i32)) == 20000
    assert fnp.inner(a, a, preferred_element_type=i32).tolist() == [[20000]]
    assert fnp.linalg.vecdot(a, a, preferred_element_type=i32).tolist() == [20000]
    conv = fnp.convolve(fnp.array([100] * 3, fnp.int8), fnp.array([100] * 2, fnp.int8),
                        preferred_element_type=i32)
    assert conv.tolist() == [10000, 20000, 20000, 10000]
    # a narrower preferred type: computed in the operands' and converted
    f = fnp.matmul(np.ones((2, 3), np.float32), np.ones((3, 2), np.float32),
                   preferred_element_type=fnp.bfloat16)
    assert f.dtype == fnp.bfloat16 and np.asarray(f, np.float32).tolist() == [[3, 3], [3, 3]]
