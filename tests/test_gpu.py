"""The GPU backend without a GPU: every kernel kind compiled to PTX and assembled by ptxas
for sm_80 and sm_90, and run by the GPU emulation (the same kernels compiled for the host,
threads and warps stepped by the emulator) against NumPy and the CPU backend; the CUDA
driver's error paths through a fake driver. Tests marked ``gpu`` run on a real GPU and
skip elsewhere with the reason."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
from fusionjit import lax, random
from fusionjit.testing import find_ptxas, gpu_ptx, launch_counts, ptxas

from conftest import assert_close
from test_reliability import run_script

HAVE_PTXAS = find_ptxas() is not None
GPU_REASON = fusionjit.gpu_unavailable_reason()
requires_gpu = pytest.mark.skipif(bool(GPU_REASON), reason=f"no GPU: {GPU_REASON}")


def check_gpu(fun, *args, rtol=None, atol=None, fusion=None, ptx=True, **kwargs):
    """Runs ``fun`` on the emulated GPU and on the CPU and compares; assembles its PTX for
    sm_80 and sm_90 with ptxas (where the toolkit is). Returns the emulated result."""
    want = fusionjit.jit(fun, fusion=fusion, backend="cpu")(*args, **kwargs)
    got = fusionjit.jit(fun, fusion=fusion, backend="gpu_emulated")(*args, **kwargs)
    for w, g in zip(fusionjit.tree_util.tree_leaves(want), fusionjit.tree_util.tree_leaves(got)):
        assert_close(g, w, rtol=rtol, atol=atol)
    if ptx and HAVE_PTXAS:
        for arch in ("sm_80", "sm_90"):
            code = gpu_ptx(fun, *args, arch=arch, fusion=fusion, **kwargs)
            assert f".target {arch}" in code
            ptxas(code, arch)
    return got


def rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# --- kernel kinds -----------------------------------------------------------------------

def test_elementwise_loop_kernel_with_transcendentals():
    x, y = rand(1000), rand(1000, seed=1)
    check_gpu(lambda x, y: fnp.sin(x) * y + fnp.exp(fnp.tanh(y)) - fnp.log1p(x * x), x, y)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint32, np.bool_])
def test_elementwise_dtypes(dtype):
    x = (rand(257) * 100).astype(dtype)
    y = (rand(257, seed=2) * 100).astype(dtype)
    if dtype == np.bool_:
        check_gpu(lambda x, y: (x & ~y) | (x ^ y), x, y)
    else:
        check_gpu(lambda x, y: fnp.maximum(x, y) - fnp.minimum(x, y) * 3, x, y)


def test_float64(x64):
    x = rand(300, dtype=np.float64)
    check_gpu(lambda x: fnp.sin(x * 1e3) + fnp.cos(x) ** 3 + x ** 2.5, fnp.abs(x))


def test_large_arguments_of_sin_use_libdevice():
    # Beyond the emitter's argument reduction the kernels call the C library's sinf: on the
    # GPU it is libdevice's __nv_sinf.
    x = np.float32([1e5, -3e7, 1e30, 0.5])
    check_gpu(lambda x: fnp.sin(x) + fnp.cos(x), x, rtol=1e-5, atol=1e-6)
    # libdevice is linked in and internalized: the PTX calls nothing outside itself.
    ptx = gpu_ptx(lambda x: fnp.sin(x), x)
    assert ".entry" in ptx and ".extern" not in ptx and "sinf" not in ptx


def test_broadcast_transpose_slice_concat_pad():
    x, y = rand(33, 65), rand(65, seed=3)
    check_gpu(lambda x, y: fnp.concatenate([(x + y).T[::2], x.T[1:3] * 2], axis=0), x, y)
    check_gpu(lambda x: lax.pad(x, 0.0, [(1, 2, 1), (-3, 4, 0)]), x)


@pytest.mark.parametrize("shape,axis", [((64, 1000), 1), ((1000, 64), 0), ((8, 16), 1),
                                        ((4, 5, 300), (0, 2)), ((1 << 18,), 0)])
def test_reductions(shape, axis):
    x = rand(*shape)
    check_gpu(lambda x: (fnp.sum(x, axis=axis), fnp.max(x, axis=axis)), x, rtol=1e-5, atol=1e-4)


def test_argmax_and_integer_sums():
    x = (rand(100, 77) * 10).astype(np.int32)
    check_gpu(lambda x: (fnp.argmax(x, axis=1), fnp.sum(x, axis=0), fnp.argmin(x, axis=0)), x)


def test_softmax_is_one_row_kernel_with_a_warp_per_row():
    x = rand(300, 1000)

    def softmax(x):
        e = fnp.exp(x - fnp.max(x, axis=-1, keepdims=True))
        return e / fnp.sum(e, axis=-1, keepdims=True)

    check_gpu(softmax, x, rtol=1e-5, atol=1e-7)
    compiled = fusionjit.jit(softmax, backend="gpu_emulated").lower(x).compile()
    assert [k["threads_per_unit"] for k in compiled.kernels] == [32]
    assert "shfl.sync.bfly.b32" in gpu_ptx(softmax, x)


def test_layer_norm_and_row_reduction_epilogue():
    x, g = rand(128, 384), rand(384, seed=4)

    def layer_norm(x, g):
        mean = fnp.mean(x, axis=-1, keepdims=True)
        var = fnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
        return (x - mean) / fnp.sqrt(var + 1e-5) * g

    check_gpu(layer_norm, x, g, rtol=1e-4, atol=1e-5)
    check_gpu(lambda x: fnp.sqrt(fnp.sum(x * x, axis=1)) + 1.0, x, rtol=1e-5)


def test_matmul_mlp():
    x, w1, w2 = rand(64, 32), rand(32, 64, seed=5), rand(64, 10, seed=6)
    check_gpu(lambda x, w1, w2: fnp.tanh(x @ w1) @ w2, x, w1, w2, rtol=1e-4, atol=1e-5)


def test_multi_output_and_horizontal_kernels():
    x, y = rand(500), rand(20, 30)
    check_gpu(lambda x, y: (x * 2, fnp.exp(x), y.T + 1, fnp.sum(y)), x, y, rtol=1e-5)


def test_dynamic_slice_and_in_place_update():
    x = rand(10, 40)

    def f(x, i):
        row = lax.dynamic_slice(x, (i, 0), (1, 40))
        return lax.dynamic_update_slice(x, row * 2, (i + 3, 0))

    for i in (0, 4, 9):
        check_gpu(f, x, np.int32(i))


# --- loops, branches, whole-loop kernels --------------------------------------------------

def test_scan_fori_while_and_cond():
    xs = rand(50, 128)

    def f(xs):
        def step(c, x):
            c = c * 0.9 + x
            return c, fnp.sum(c)
        c, ys = lax.scan(step, fnp.zeros(128, np.float32), xs)
        n = lax.while_loop(lambda s: s[0] < 7, lambda s: (s[0] + 1, s[1] * 1.5), (0, c))
        return lax.cond(ys[-1] > 0, lambda v: v + 1, lambda v: v - 1, n[1]), ys

    check_gpu(f, xs, rtol=1e-5, atol=1e-4)


def test_whole_loop_kernel_with_per_step_reduction():
    # The CartPole pattern: lane state in registers for all steps; each step's reduction over
    # the lanes combined per warp (shuffles) into the warp's block of partial results.
    n, t = 1000, 64
    x0 = rand(n)
    kicks = rand(t, n, seed=7)

    def rollout(x0, kicks):
        def step(x, k):
            x = x + 0.1 * fnp.sin(x) + k
            done = fnp.abs(x) > 2.0
            x = fnp.where(done, 0.0, x)
            return x, fnp.sum(done.astype(np.int32))
        return lax.scan(step, x0, kicks)

    check_gpu(rollout, x0, kicks, rtol=1e-5, atol=1e-5)
    compiled = fusionjit.jit(rollout, backend="gpu_emulated").lower(x0, kicks).compile()
    assert [k["kind"] for k in compiled.kernels if k["loop"] == ""][:1] == ["kWholeLoop"]
    counts = launch_counts(rollout, backend="gpu_emulated")(x0, kicks)
    assert counts["per_call"] <= 2  # the loop kernel, and the partial sums' combination


def test_step_loop_launches_from_the_host():
    # Under the xla rules the loop stays: its body's kernels launch from the host each step.
    xs = rand(30, 256)

    def f(xs):
        return lax.scan(lambda c, x: (fnp.tanh(c + x), c.sum()), fnp.zeros(256, np.float32), xs)

    check_gpu(f, xs, fusion="xla", rtol=1e-5, atol=1e-5)
    counts = launch_counts(f, fusion="xla", backend="gpu_emulated")(xs)
    assert counts["loops"][0]["iterations"] == 30
    assert counts["loops"][0]["launches_per_iteration"] >= 1


def test_kernels_that_compute_alike_are_one_kernel_of_the_module():
    # A fully unrolled loop under the xla rules: each step's kernels are copies of the first
    # step's, launched from each place but generated (and assembled) once.
    import re
    x = rand(512) * 0.01 + 0.02

    def f(x):
        def step(c, _):
            c = fnp.tanh(c) * np.float32(1.5) + fnp.mean(c)
            return c, fnp.max(c)
        return lax.scan(step, x, None, length=6, unroll=6)

    check_gpu(f, x, fusion="xla", rtol=1e-5, atol=1e-6)
    counts = launch_counts(f, fusion="xla", backend="gpu_emulated")(x)
    entries = re.findall(r"^\.visible \.entry ", gpu_ptx(f, x, fusion="xla"), re.M)
    launches = counts["per_call"]
    assert launches >= 12 and len(entries) <= launches // 2, (launches, len(entries))


# --- random numbers ---------------------------------------------------------------------

@pytest.mark.parametrize("lowering", ["fused", "custom_call"])
def test_threefry_bits_are_exact_in_both_lowerings(lowering):
    fusionjit.config.update("fusionjit_threefry_lowering", lowering)
    try:
        key = random.PRNGKey(42)
        got = check_gpu(lambda k: (random.bits(k, (1000,)), random.uniform(k, (7, 9))), key)
    finally:
        fusionjit.config.update("fusionjit_threefry_lowering", "fused")
    want = fusionjit.jit(lambda k: random.bits(k, (1000,)))(key)
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want))


def test_custom_call_without_a_gpu_form_runs_on_the_host():
    key = random.PRNGKey(0)
    f = fusionjit.jit(lambda k: random.permutation(k, 50), backend="gpu_emulated")
    np.testing.assert_array_equal(np.asarray(f(key)), np.asarray(fusionjit.jit(
        lambda k: random.permutation(k, 50))(key)))


# --- arrays on the device, API ----------------------------------------------------------

def test_results_stay_on_the_device_until_read():
    f = fusionjit.jit(lambda x: x * 2, backend="gpu_emulated")
    y = f(np.arange(10, dtype=np.float32))
    assert y.device.startswith("gpu_emulated")
    z = f(y)  # an array already there is passed as it is
    assert fusionjit.block_until_ready(z) is z
    np.testing.assert_array_equal(np.asarray(z), np.arange(10) * 4)
    # The CPU backend reads a device array through its host copy.
    on_cpu = fusionjit.jit(lambda x: x + 1)(z)
    np.testing.assert_array_equal(np.asarray(on_cpu), np.arange(10) * 4 + 1)


def test_default_backend_config_and_errors():
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        fusionjit.jit(lambda x: x, backend="tpu")
    with pytest.raises(ValueError, match="unknown backend"):
        fusionjit.config.update("fusionjit_default_backend", "tpu")
    fusionjit.config.update("fusionjit_default_backend", "gpu_emulated")
    try:
        y = fusionjit.jit(lambda x: x + 1)(np.ones(3, np.float32))
        assert y.device.startswith("gpu_emulated")
    finally:
        fusionjit.config.update("fusionjit_default_backend", "cpu")
    assert fusionjit.devices("gpu_emulated")
    assert fusionjit.devices()[0].startswith("cpu:0")


def test_ptx_of_a_cpu_function_and_kernel_marking():
    ptx = fusionjit.jit(lambda x: x * 3).lower(np.ones(4, np.float32)).as_text("ptx")
    # The GPU's own target where there is one, else sm_80.
    assert ".visible .entry" in ptx and ".target sm_" in ptx
    if HAVE_PTXAS:
        ptxas(ptx, "sm_80")


@pytest.mark.skipif(not HAVE_PTXAS, reason="ptxas (CUDA toolkit) not found")
def test_ptxas_failure_names_the_file_and_command():
    with pytest.raises(AssertionError, match="reproduce with: .*ptxas -arch=sm_80"):
        ptxas(".version 7.0\n.target sm_80\n.address_size 64\nnot ptx", "sm_80")


# --- the CUDA driver, through a fake ------------------------------------------------------

@pytest.fixture(scope="module")
def fake_cuda(tmp_path_factory):
    out = tmp_path_factory.mktemp("fake_cuda") / "libfake_cuda.so"
    src = os.path.join(os.path.dirname(__file__), "fake_cuda", "fake_cuda.c")
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", src, "-o", str(out)], check=True)
    return str(out)


GPU_CALL = """
import numpy as np, fusionjit, fusionjit.numpy as fnp
f = fusionjit.jit(lambda x: fnp.sin(x) + 1, backend="gpu")
try:
    y = f(np.ones(100, np.float32))  # line 5
    print("RESULT", y.device, np.asarray(y).shape)
except Exception as e:
    print("ERROR", type(e).__name__, e)
"""


def _run_fake(library, mode, code=GPU_CALL):
    p = run_script(code, env={"FUSIONJIT_CUDA_LIBRARY": library, "FAKE_CUDA": mode})
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_no_driver_library_is_a_clear_error():
    out = _run_fake("/nonexistent/libcuda.so.1", "")
    assert "ERROR DeviceError" in out and "no GPU" in out and "/nonexistent/libcuda.so.1" in out
    assert "<string>:5" in out  # the user's line
    p = run_script("import fusionjit; print(fusionjit.devices()); "
                   "print(fusionjit.gpu_unavailable_reason())",
                   env={"FUSIONJIT_CUDA_LIBRARY": "/nonexistent/libcuda.so.1"})
    assert "gpu:0" not in p.stdout and "could not be loaded" in p.stdout


def test_driver_that_fails_to_start(fake_cuda):
    out = _run_fake(fake_cuda, "init_fails")
    assert "ERROR DeviceError" in out and "cuInit failed with CUDA_ERROR_NO_DEVICE" in out
    out = _run_fake(fake_cuda, "no_device")
    assert "ERROR DeviceError" in out and "found no GPU" in out


def test_fake_gpu_runs_copies_and_reports_itself(fake_cuda):
    code = """
import numpy as np, fusionjit
print(fusionjit.devices("gpu"))
f = fusionjit.jit(lambda x, y: (y, x), backend="gpu")  # no kernel: two copies
a, b = f(np.arange(5, dtype=np.float32), np.arange(3, dtype=np.int32))
print("RESULT", np.asarray(a).tolist(), np.asarray(b).tolist(), a.device)
"""
    out = _run_fake(fake_cuda, "", code)
    assert "Fake GPU, sm_90, 4 SMs" in out
    assert "RESULT [0, 1, 2] [0.0, 1.0, 2.0, 3.0, 4.0] gpu:0" in out


@pytest.mark.parametrize("mode,expected", [
    ("oom", "ERROR MemoryError GPU out of memory"),
    ("launch_fails", "CUDA error while launching kernel kernel_0"),
    ("load_fails", "ptxas fatal: fake failure"),
])
def test_driver_failures_become_python_errors(fake_cuda, mode, expected):
    out = _run_fake(fake_cuda, mode)
    assert expected in out, out


# --- on a real GPU ----------------------------------------------------------------------

@pytest.mark.gpu
@requires_gpu
def test_real_gpu_matches_the_cpu():
    x = rand(4096, 256)

    def f(x):
        e = fnp.exp(x - fnp.max(x, axis=-1, keepdims=True))
        return e / fnp.sum(e, axis=-1, keepdims=True), fnp.sum(fnp.sin(x)), x.T @ x[:, :16]

    want = fusionjit.jit(f)(x)
    got = fusionjit.jit(f, backend="gpu")(x)
    for g, w in zip(got, want):
        assert_close(g, w, rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
@requires_gpu
def test_real_gpu_random_bits_and_loops():
    key = random.PRNGKey(3)
    np.testing.assert_array_equal(
        np.asarray(fusionjit.jit(lambda k: random.bits(k, (10000,)), backend="gpu")(key)),
        np.asarray(fusionjit.jit(lambda k: random.bits(k, (10000,)))(key)))
    xs = rand(100, 2048)

    def f(xs):
        return lax.scan(lambda c, x: (c * 0.5 + fnp.cos(x), fnp.sum(c > 0)), fnp.zeros(2048), xs)

    for g, w in zip(fusionjit.jit(f, backend="gpu")(xs), fusionjit.jit(f)(xs)):
        assert_close(g, w, rtol=1e-5, atol=1e-5)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-v"]))
