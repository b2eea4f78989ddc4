"""Shared test helpers: dtype-aware comparison with NumPy (JAX's default tolerances), an
x64 fixture, an ``rng`` fixture (random data of each test's own), and Hypothesis profiles
(derandomised in CI)."""

from __future__ import annotations

import os
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import fusionjit

# The IR verifier after every pass that changes a module, in every test (FJ_CHECKS=0 turns it
# off): a pass that leaves an invalid graph fails where it happens.
if "FJ_CHECKS" not in os.environ:
    fusionjit.config.update("fusionjit_checks", True)

settings.register_profile(
    "ci", max_examples=int(os.environ.get("FJ_HYPOTHESIS_EXAMPLES", "25")), deadline=None,
    derandomize=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=200, deadline=None)
settings.load_profile(os.environ.get("FJ_HYPOTHESIS_PROFILE", "ci"))



def pytest_collection_modifyitems(config, items):
    """Under FUSIONJIT_DEFAULT_BACKEND=gpu_emulated (the GPU's kernels run on the CPU) the
    suite checks GPU code; tests that assert the CPU backend's own plan or code step aside."""
    backend = fusionjit.config.fusionjit_default_backend
    if backend == "cpu":
        return
    skip = pytest.mark.skip(reason=f"asserts the CPU backend's plan or code ({backend} run)")
    for item in items:
        if "cpu_only" in item.keywords:
            item.add_marker(skip)


# JAX's test tolerances (jax._src.public_test_util), per dtype.
TOLERANCE = {np.dtype(np.bool_): 0, np.dtype(np.int32): 0, np.dtype(np.int64): 0,
             np.dtype(np.uint32): 0, np.dtype(np.uint64): 0, np.dtype(np.float32): 1e-6,
             np.dtype(np.float64): 1e-15}


def assert_close(actual, expected, rtol=None, atol=None, check_dtype=True):
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if check_dtype:
        assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    tol = TOLERANCE.get(expected.dtype, 1e-6)
    rtol = tol if rtol is None else rtol
    atol = tol if atol is None else atol
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)


@pytest.fixture
def x64():
    fusionjit.config.update("fusionjit_enable_x64", True)
    try:
        yield
    finally:
        fusionjit.config.update("fusionjit_enable_x64", False)


def seed_of(nodeid: str) -> int:
    """A seed from a test's id (its file's name, its name and its parameters): the same in
    every run, process and order. Not hash(), which is salted per process."""
    path, _, name = nodeid.partition("::")
    return zlib.crc32(f"{os.path.basename(path)}::{name}".encode())


@pytest.fixture
def rng(request):
    """A NumPy Generator of the test's own, seeded from its id: its data does not depend on
    which tests ran before it in the same process (pytest-xdist's workers share tests in an
    order that changes from run to run), as it did with a generator at module level."""
    return np.random.default_rng(seed_of(request.node.nodeid))


@pytest.fixture
def stats():
    from fusionjit._src.dispatch import stats as s
    s.reset()
    return s


try:
    import jax  # noqa: F401
    HAVE_JAX = True
except ImportError:  # pragma: no cover - JAX is an optional peer
    HAVE_JAX = False

requires_jax = pytest.mark.skipif(not HAVE_JAX, reason="JAX is not installed (optional peer)")
