"""Accuracy of the vectorised transcendental functions (cpp/codegen/math.cc), in ulps
against float64 (for float32) or high-precision (for float64) references, over each code
path (small arguments, double-precision reduction, the C-library fallback), and the IEEE
special values."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp


def max_ulp(got, ref, dtype) -> float:
    got = np.asarray(got).astype(np.float64)
    ref = np.asarray(ref, np.float64)
    spacing = np.spacing(np.abs(ref).astype(dtype)).astype(np.float64)
    ok = np.isfinite(ref) & np.isfinite(spacing) & (np.abs(ref) >= np.finfo(dtype).tiny)
    assert ok.any()
    return float(np.max(np.abs(got[ok] - ref[ok]) / spacing[ok]))


# name, fusionjit, float64 reference, sampler, ulp bound for f32
F32_CASES = [
    ("exp", fnp.exp, np.exp, lambda r, n: r.uniform(-103, 88, n), 1.5),
    ("log", fnp.log, np.log, lambda r, n: np.exp(r.uniform(-87, 88, n)), 1.5),
    ("log_denormal", fnp.log, np.log, lambda r, n: r.uniform(1e-45, 1e-38, n), 1.5),
    ("log1p", fnp.log1p, np.log1p, lambda r, n: r.uniform(-0.999, 100, n), 3.0),
    ("log1p_tiny", fnp.log1p, np.log1p, lambda r, n: r.uniform(-1e-3, 1e-3, n), 3.0),
    ("expm1", fnp.expm1, np.expm1, lambda r, n: r.uniform(-30, 30, n), 4.0),
    ("expm1_tiny", fnp.expm1, np.expm1, lambda r, n: r.uniform(-0.4, 0.4, n), 3.0),
    ("sin", fnp.sin, np.sin, lambda r, n: r.uniform(-128, 128, n), 2.0),
    ("cos", fnp.cos, np.cos, lambda r, n: r.uniform(-128, 128, n), 2.0),
    ("sin_medium", fnp.sin, np.sin, lambda r, n: r.uniform(-5e5, 5e5, n), 2.0),
    ("cos_medium", fnp.cos, np.cos, lambda r, n: r.uniform(-5e5, 5e5, n), 2.0),
    ("sin_huge", fnp.sin, np.sin, lambda r, n: r.uniform(-1e30, 1e30, n), 1.0),
    ("cos_huge", fnp.cos, np.cos, lambda r, n: r.choice([-1, 1], n) * r.uniform(1e6, 1e9, n), 1.0),
    ("tan_medium", fnp.tan, np.tan, lambda r, n: r.uniform(-5e5, 5e5, n), 4.0),
    ("tan", fnp.tan, np.tan, lambda r, n: r.uniform(-20, 20, n), 4.0),
    ("tanh", fnp.tanh, np.tanh, lambda r, n: r.uniform(-12, 12, n), 4.0),
    ("tanh_tiny", fnp.tanh, np.tanh, lambda r, n: r.uniform(-1e-3, 1e-3, n), 3.0),
]


@pytest.mark.parametrize("name,f,ref,sample,bound", F32_CASES, ids=[c[0] for c in F32_CASES])
def test_float32_accuracy(name, f, ref, sample, bound):
    rng = np.random.default_rng(zlib.crc32(name.encode()))  # not hash(): salted per process
    x = sample(rng, 200_003).astype(np.float32)  # odd size: vector and scalar tails
    got = fusionjit.jit(f)(x)
    assert max_ulp(got, ref(x.astype(np.float64)), np.float32) <= bound


def test_float32_atan2_and_pow():
    rng = np.random.default_rng(7)
    y = (rng.standard_normal(100_001) * np.exp(rng.uniform(-5, 5, 100_001))).astype(np.float32)
    x = (rng.standard_normal(100_001) * np.exp(rng.uniform(-5, 5, 100_001))).astype(np.float32)
    got = fusionjit.jit(fnp.arctan2)(y, x)
    assert max_ulp(got, np.arctan2(y.astype(np.float64), x.astype(np.float64)), np.float32) <= 4
    base = rng.uniform(0, 10, 100_001).astype(np.float32)
    expo = rng.uniform(-8, 8, 100_001).astype(np.float32)
    got = fusionjit.jit(fnp.power)(base, expo)
    assert max_ulp(got, np.power(base.astype(np.float64), expo.astype(np.float64)), np.float32) <= 1


def _mp(fn_name, xs):
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.prec = 120
    fn = getattr(mpmath, fn_name)
    return np.array([float(fn(mpmath.mpf(float(v)))) for v in xs])


F64_CASES = [
    ("exp", fnp.exp, lambda r, n: r.uniform(-740, 709, n), 1.5),
    ("log", fnp.log, lambda r, n: np.exp(r.uniform(-700, 700, n)), 1.5),
    ("log1p", fnp.log1p, lambda r, n: r.uniform(-0.9, 10, n), 3.0),
    ("expm1", fnp.expm1, lambda r, n: r.uniform(-5, 5, n), 4.0),
    ("sin", fnp.sin, lambda r, n: r.uniform(-1e5, 1e5, n), 2.5),
    ("cos", fnp.cos, lambda r, n: r.uniform(-100, 100, n), 2.5),
    ("sin_huge", fnp.sin, lambda r, n: r.uniform(-1e12, 1e12, n), 1.0),
    ("tan", fnp.tan, lambda r, n: r.uniform(-3, 3, n), 4.0),
    ("tanh", fnp.tanh, lambda r, n: r.uniform(-5, 5, n), 4.0),
]


@pytest.mark.parametrize("name,f,sample,bound", F64_CASES, ids=[c[0] for c in F64_CASES])
def test_float64_accuracy(name, f, sample, bound, x64):
    rng = np.random.default_rng(zlib.crc32(name.encode()))  # not hash(): salted per process
    x = sample(rng, 3001).astype(np.float64)
    got = fusionjit.jit(f)(x)
    assert np.asarray(got).dtype == np.float64
    assert max_ulp(got, _mp(name.split("_")[0], x), np.float64) <= bound


def test_float64_atan2(x64):
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.prec = 120
    rng = np.random.default_rng(8)
    y, x = rng.standard_normal(2001), rng.standard_normal(2001)
    ref = np.array([float(mpmath.atan2(mpmath.mpf(float(a)), mpmath.mpf(float(b))))
                    for a, b in zip(y, x)])
    assert max_ulp(fusionjit.jit(fnp.arctan2)(y, x), ref, np.float64) <= 4


SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 88.72, -103.9, 1e30,
                     -1e30, 1.0, -1.0, 0.5, 2.0], np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh"])
def test_special_values(name, dtype, request):
    if dtype == np.float64:
        request.getfixturevalue("x64")
    x = SPECIALS.astype(dtype)
    with np.errstate(all="ignore"):
        ref = getattr(np, name)(x)
    got = np.asarray(fusionjit.jit(getattr(fnp, name))(x))
    same = ((got == ref) | (np.isnan(got) & np.isnan(ref))
            | (np.abs(got - ref) <= 4e-7 * np.abs(ref)))
    assert same.all(), f"{name}: {x[~same]} -> {got[~same]}, expected {ref[~same]}"
    # Signed zeros are kept where the function is odd.
    if name in ("sin", "tan", "tanh", "expm1", "log1p"):
        assert math.copysign(1, got[1]) == -1


def test_pow_special_cases():
    x = np.array([-2, -2, -2, -0.0, -0.0, 0, 1, np.nan, -1, -1, 2, 0.5, -np.inf, -np.inf],
                 np.float32)
    y = np.array([3, 2, 0.5, -1, 3, -2, np.nan, 0, np.inf, -np.inf, -np.inf, np.inf, 3, 2],
                 np.float32)
    with np.errstate(all="ignore"):
        ref = np.power(x, y)
    got = np.asarray(fusionjit.jit(fnp.power)(x, y))
    numbers = ~np.isnan(ref)
    np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(ref[numbers]))
    np.testing.assert_allclose(got, ref, rtol=1e-6, equal_nan=True)


def test_atan2_special_cases():
    y = np.array([0, -0.0, 0, -0.0, 1, -1, np.inf, np.inf, -np.inf, 1, np.nan, 0], np.float32)
    x = np.array([0, 0, -0.0, -0.0, np.inf, -np.inf, np.inf, -np.inf, 1, 0, 1, np.nan],
                 np.float32)
    ref = np.arctan2(y, x)
    got = np.asarray(fusionjit.jit(fnp.arctan2)(y, x))
    numbers = ~np.isnan(ref)
    np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(ref[numbers]))
    np.testing.assert_allclose(got, ref, rtol=4e-7, equal_nan=True)


@pytest.mark.cpu_only
def test_generated_code_has_no_libm_calls_on_the_fast_path():
    """exp and log are straight-line vector code: the optimised LLVM IR calls nothing."""
    x = np.ones(1024, np.float32)
    ir = fusionjit.jit(lambda a: fnp.log(fnp.exp(a))).lower(x).as_text("llvm")
    assert "call float @expf" not in ir and "call float @logf" not in ir
    assert f"<{fusionjit._core.host_vector_lanes()} x float>" in ir


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_argument_paths_are_one_function_per_module(dtype, request):
    """sin/cos/tan's rare paths (f32 beyond 128, f64 beyond 2^20: the C library) are one cold
    function per function, module and vector width, called from every use: inlined into
    every use and into the vector and the tail loops, they made a 100-op trig chain take
    6 s to compile (2 s now)."""
    if dtype == np.float64:
        request.getfixturevalue("x64")
    x = np.linspace(-300, 300, 1001).astype(dtype)

    def f(a):
        return sum(fnp.sin(a * k) + fnp.cos(a * k) for k in range(1, 7)) + fnp.tan(a * 0.5)

    jitted = fusionjit.jit(f)
    ir = jitted.lower(x).as_text("llvm")
    suffix = "f32" if dtype == np.float32 else "f64"
    for name in ("sin", "cos", "tan"):
        defined = [ln for ln in ir.splitlines()
                   if ln.startswith("define") and f"@fj.{name}.wide.{suffix}" in ln]
        assert 1 <= len(defined) <= 2, defined      # the vector and the scalar (tail) form
    libm_calls = [ln for ln in ir.split("define")[1:] if "@sinf(" in ln or "@sin(" in ln]
    assert all("@fj.sin.wide" in fn.splitlines()[0] for fn in libm_calls)
    want = sum(np.sin(x * k) + np.cos(x * k) for k in range(1, 7)) + np.tan(x * 0.5)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(np.asarray(jitted(x)), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fma_rounds_once(dtype, request):
    """lax.fma(a, b, c) is a*b + c with one rounding, in a kernel and in constant folding."""
    if dtype == np.float64:
        request.getfixturevalue("x64")
    eps = np.finfo(dtype).eps
    a = np.full(9, 1 + eps, dtype)          # a*a = 1 + 2 eps + eps^2: eps^2 is lost by a*a
    c = np.full(9, -1 - 2 * eps, dtype)
    want = np.full(9, eps * eps, dtype)
    assert (a * a + c == 0).all()           # what an unfused multiply-add gives
    kernel = fusionjit.jit(fusionjit.lax.fma)(a, a, c)
    folded = fusionjit.jit(
        lambda: fusionjit.lax.fma(fnp.asarray(a), fnp.asarray(a), fnp.asarray(c)))()
    np.testing.assert_array_equal(np.asarray(kernel), want)
    np.testing.assert_array_equal(np.asarray(folded), want)
    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal(1000).astype(dtype) for _ in range(3))
    np.testing.assert_allclose(np.asarray(fusionjit.lax.fma(x, y, z)), x * y + z,
                               rtol=0, atol=8 * eps)


def test_fma_rejects_integers_and_mismatched_shapes():
    with pytest.raises(TypeError, match="fma"):
        fusionjit.lax.fma(np.int32(1), np.int32(2), np.int32(3))
    with pytest.raises(TypeError, match="fma needs equal shapes"):
        fusionjit.lax.fma(np.ones(3, np.float32), np.ones(2, np.float32), np.ones(3, np.float32))
