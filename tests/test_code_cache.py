"""Compiling again: the process's cache of generated code (compiler/code_cache.h), exact
constants (a module is copied structurally, not through its text), code generation at each
optimisation level, and ``fusionjit.clear_caches``."""

import contextlib

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
from fusionjit import _core, lax


def assert_allclose(got, want, **tol):
    np.testing.assert_allclose(np.asarray(got), want, **tol)


def _compilation(jf, *args):
    return jf.lower(*args).compile()._entry.compilation


def _mlp(w1, b1, w2):
    def mlp(x):
        return fnp.tanh(x @ w1 + b1) @ w2
    return mlp


def _layer_norm(x):
    mean = fnp.mean(x, axis=-1, keepdims=True)
    var = fnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / fnp.sqrt(var + 1e-5)


def _softmax(x):
    e = fnp.exp(x - fnp.max(x, axis=-1, keepdims=True))
    return e / fnp.sum(e, axis=-1, keepdims=True)


def _sin_affine():
    def f(x):
        return fnp.sin(x) * 2.0 + 1.0
    return f


def test_a_function_defined_anew_reuses_the_machine_code(capsys):
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    fusionjit.clear_caches()
    first = _compilation(fusionjit.jit(_sin_affine()), x)
    again = _compilation(fusionjit.jit(_sin_affine()), x)   # a new function: traced, fused
    assert not first.code_cache_hit and again.code_cache_hit
    assert again is not first and again.executable is first.executable
    with _config(fusionjit_log_compiles=True):
        out = fusionjit.jit(_sin_affine())(x)
    assert "machine code reused" in capsys.readouterr().err
    np.testing.assert_array_equal(np.asarray(out), np.asarray(fusionjit.jit(_sin_affine())(x)))
    assert_allclose(out, np.sin(x) * 2 + 1, rtol=1e-6, atol=1e-6)


def test_a_function_jitted_anew_shares_its_compilations():
    # jit(f)(x) written in a loop traces once, as in JAX (whose caches are keyed by the
    # function); other options, or another function, compile apart.
    from fusionjit._src.dispatch import stats
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    f = _sin_affine()
    fusionjit.clear_caches()
    traces = stats.traces
    outs = [np.asarray(fusionjit.jit(f)(x)) for _ in range(5)]
    assert stats.traces == traces + 1
    assert all(np.array_equal(o, outs[0]) for o in outs)
    first = _compilation(fusionjit.jit(f), x)
    assert _compilation(fusionjit.jit(f), x) is first
    assert _compilation(fusionjit.jit(f, fusion="xla"), x) is not first
    assert _compilation(fusionjit.jit(f, backend="cpu"), x) is not first
    fusionjit.jit(f).clear_cache()             # shared: every jit of f compiles again
    assert _compilation(fusionjit.jit(f), x) is not first
    second = _compilation(fusionjit.jit(f), x)
    fusionjit.clear_caches()                   # also when no jit object of f is alive
    assert _compilation(fusionjit.jit(f), x) is not second


def test_jit_objects_and_their_compilations_are_freed():
    # A jit object was never freed (its C++ half held a bound method of it: a cycle the
    # garbage collector could not see), so jit(f)(x) in a loop leaked one per call. Now it
    # dies with its last reference, and the compilations shared by function die with f.
    import gc
    import weakref

    from fusionjit._src import api
    x = np.ones(8, np.float32)
    f = _sin_affine()
    jf = fusionjit.jit(f)
    jf(x)
    jitted = weakref.ref(jf)
    del jf
    assert jitted() is None                     # no cycle: freed without a collection
    entry = _compilation(fusionjit.jit(f), x)
    alive = weakref.ref(entry)
    assert f in api._BY_FUNCTION
    del f, entry
    gc.collect()
    assert alive() is None


def test_callables_that_cannot_be_weakly_referenced_still_jit():
    # A builtin-like callable without __weakref__ gets a cache of its own.
    class Scale:
        __slots__ = ()

        def __call__(self, x):
            return x * 3.0

    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(fusionjit.jit(Scale())(x)), x * 3)
    np.testing.assert_array_equal(np.asarray(fusionjit.jit(Scale())(x)), x * 3)


def test_profiles_that_form_the_same_kernels_share_code():
    x = np.linspace(-1, 1, 4096, dtype=np.float32).reshape(64, 64)
    fusionjit.clear_caches()
    xla = _compilation(fusionjit.jit(_softmax, fusion="xla"), x)
    concat = _compilation(fusionjit.jit(_softmax, fusion="xla+concat"), x)
    assert xla.optimized_text == concat.optimized_text
    assert concat.code_cache_hit and concat.executable is xla.executable
    none = _compilation(fusionjit.jit(_softmax, fusion="none"), x)   # other kernels
    assert not none.code_cache_hit


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_programs_that_differ_in_one_element_of_a_large_constant_do_not_share_code(where):
    # A constant past the key's inline size is named by its hash; a hit compares it whole.
    rng = np.random.default_rng(0)
    w1, b1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((16, 64), (64,), (64, 4)))
    x = rng.standard_normal((8, 16)).astype(np.float32)
    i = {"first": 0, "middle": 500, "last": w1.size - 1}[where]
    w1b = w1.copy()
    w1b.flat[i] += 1.0
    fusionjit.clear_caches()
    a = fusionjit.jit(_mlp(w1, b1, w2))(x)
    b = fusionjit.jit(_mlp(w1b, b1, w2))(x)
    assert _compilation(fusionjit.jit(_mlp(w1b, b1, w2)), x).executable is not (
        _compilation(fusionjit.jit(_mlp(w1, b1, w2)), x).executable)
    want_a = np.tanh(x @ w1 + b1) @ w2
    want_b = np.tanh(x @ w1b + b1) @ w2
    assert not np.allclose(want_a, want_b, atol=1e-3)
    assert_allclose(a, want_a, rtol=1e-4, atol=1e-4)
    assert_allclose(b, want_b, rtol=1e-4, atol=1e-4)


def test_closed_over_weights_reuse_code_and_stay_exact():
    rng = np.random.default_rng(1)
    w1, b1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((256, 512), (512,), (512, 2)))
    x = rng.standard_normal((4, 256)).astype(np.float32)
    fusionjit.clear_caches()
    first = _compilation(fusionjit.jit(_mlp(w1, b1, w2)), x)
    again = _compilation(fusionjit.jit(_mlp(w1.copy(), b1.copy(), w2.copy())), x)
    assert again.code_cache_hit   # equal weights, other arrays: compared, not assumed
    assert_allclose(fusionjit.jit(_mlp(w1, b1, w2))(x), np.tanh(x @ w1 + b1) @ w2,
                    rtol=1e-4, atol=1e-4)
    assert not first.code_cache_hit


def _nan_bits(dtype):
    if dtype == "bfloat16":
        import ml_dtypes
        return ml_dtypes.bfloat16, np.uint16, [0x7fc1, 0xffc0]
    return {np.float32: (np.float32, np.uint32, [0x7fc00001, 0xffc00000]),
            np.float16: (np.float16, np.uint16, [0x7e01, 0xfe00])}[dtype]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
@pytest.mark.parametrize("shape", [(2,), ()])
def test_constants_keep_their_nan_payload_and_sign(dtype, shape):
    # Before the copy was structural, a module was copied through its text, where every NaN
    # printed as "nan": a closed-over NaN lost its payload and sign (JAX keeps both).
    dt, bits_dt, bits = _nan_bits(dtype)
    c = np.array(bits, bits_dt).view(dt)
    if shape == ():
        c = c[1]
    x = np.ones(shape, dt)

    def f(x):
        return lax.bitcast_convert_type(fnp.where(x > 0, c, x), bits_dt)
    want = np.asarray(c).view(bits_dt)
    for fusion in ("none", "fusionjit"):
        np.testing.assert_array_equal(np.asarray(fusionjit.jit(f, fusion=fusion)(x)), want)


def test_the_text_form_writes_a_nan_by_its_bits_and_reads_it_back():
    c = np.array([0x7fc00001, 0x7fc00000, 0xffc00000], np.uint32).view(np.float32)
    module = fusionjit.jit(lambda x: x + c).lower(np.ones(3, np.float32)).compile()._entry.module
    text = str(module)
    assert "nan_0x7fc00001" in text and "nan_0xffc00000" in text and "nan, " in text
    assert str(_core.parse_module(text)) == text


@pytest.mark.parametrize("level", [0, 1, 3])
def test_every_optimisation_level_computes_what_the_default_does(level):
    # Code generation runs at the level too (0: LLVM's fast instruction selection).
    rng = np.random.default_rng(2)
    w1, b1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((16, 64), (64,), (64, 4)))
    x = rng.standard_normal((33, 16)).astype(np.float32)
    programs = [_mlp(w1, b1, w2), _layer_norm, _softmax,
                lambda x: fnp.cumsum(fnp.abs(x), axis=0).max(axis=1)]
    want = [np.asarray(fusionjit.jit(p)(x)) for p in programs]
    with _config(fusionjit_opt_level=level):
        got = [np.asarray(fusionjit.jit(p)(x)) for p in programs]
    for g, w in zip(got, want):
        assert_allclose(g, w, rtol=2e-5, atol=2e-5)


@contextlib.contextmanager
def _config(**values):
    old = {k: getattr(fusionjit.config, k) for k in values}
    for k, v in values.items():
        fusionjit.config.update(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            fusionjit.config.update(k, v)


def test_clear_caches_clears_every_cache():
    x = np.ones(8, np.float32)
    f = fusionjit.jit(lambda x: x * 3.0)
    f(x)
    fnp.ones(3) + 1.0  # an eager primitive
    assert _core.code_cache_size() > 0
    fusionjit.clear_caches()
    assert _core.code_cache_size() == 0
    assert not f._entries._d and not fusionjit._src.dispatch._PRIMITIVE_JITS._d
    assert not _compilation(f, x).code_cache_hit
    np.testing.assert_array_equal(np.asarray(f(x)), x * 3)


def test_a_scalar_loops_iota_is_hidden_from_llvms_loop_strength_reduction():
    # Threefry's counters are iotas; in a scalar loop (a kernel's tail) LLVM's loop strength
    # reduction took each add of the 80-round chain for an induction variable: seconds of
    # code generation per kernel. An empty inline asm (no instruction) hides the index.
    key = fusionjit.random.PRNGKey(7)
    f = fusionjit.jit(lambda k: fusionjit.random.uniform(k, (13,)))
    ir = f.lower(key).as_text("llvm")
    assert 'asm ""' in ir
    np.testing.assert_array_equal(np.asarray(f(key)),
                                  np.asarray(fusionjit.jit(lambda k: fusionjit.random.uniform(
                                      k, (13,)), fusion="none")(key)))


def test_kernels_that_compute_alike_are_generated_once():
    # A fully unrolled loop under the xla profile: each step's kernels are copies of the
    # first step's (one LLVM function each), and kernels of one op on one shape under the
    # profile none are one function; kernels that differ in a constant's bits are not.
    import re

    def program(x):
        def step(c, _):
            c = fnp.tanh(c) * np.float32(1.5) + fnp.mean(c)
            return c, fnp.max(c)
        return lax.scan(step, x, None, length=6, unroll=6)

    x = np.linspace(0.01, 0.02, 256, dtype=np.float32)   # sums well away from 0
    f = fusionjit.jit(program, fusion="xla")
    kernels = _compilation(f, x).executable.num_kernels
    defined = re.findall(r"^define .*@kernel\.", f.lower(x).as_text("llvm"), re.M)
    assert kernels >= 12 and len(defined) <= kernels // 2, (kernels, len(defined))
    c, want_max = x.copy(), []
    for _ in range(6):
        c = np.tanh(c) * np.float32(1.5) + c.mean(dtype=np.float32)
        want_max.append(c.max())
    got_c, got_max = f(x)
    assert_allclose(got_c, c, rtol=1e-5)
    assert_allclose(got_max, np.array(want_max), rtol=1e-5)

    def constants(x):
        return x * np.float32(0.0), x * np.float32(-0.0), x * np.float32(0.0) + x
    g = fusionjit.jit(constants, fusion="none")
    zero, negative_zero, same = (np.asarray(o) for o in g(np.full(4, -1.0, np.float32)))
    assert np.all(np.signbit(zero)) and not np.any(np.signbit(negative_zero))
    assert_allclose(same, -np.ones(4))
    defined = re.findall(r"^define .*@kernel\.", g.lower(x).as_text("llvm"), re.M)
    assert len(defined) == 3   # the two multiplies by 0 and -0 apart, and the add
