"""fusionjit: a JAX-style just-in-time compiler for numerical Python.

    import fusionjit
    import fusionjit.numpy as fnp

    @fusionjit.jit
    def f(x, y):
        return fnp.sin(x) * y + 1.0

fusionjit traces ``f`` into a program, optimises and fuses it in C++, and generates native
code with LLVM.
"""

from fusionjit import _core
from fusionjit._src.config import config
from fusionjit._src import array as _array  # noqa: F401 (side effect: registers Array in core)
from fusionjit._src import dispatch as _dispatch  # noqa: F401 (side effect: sets eager dispatch)
from fusionjit._src.numpy import array_methods as _array_methods
from fusionjit._src import interop as _interop
from fusionjit._src.interop import device_get, device_put
from fusionjit._src.api import (Compiled, Lowered, ShapeDtypeStruct, clear_caches, disable_jit, jit,
                                make_ir, make_jaxpr)
from fusionjit._src.explain import Explanation, explain
from fusionjit._src.profiler import Profile, profile
from fusionjit._src.api_util import (default_backend, device_count, eval_shape,
                                     local_device_count, named_scope, process_count,
                                     process_index)
from fusionjit._src.array import Array
from fusionjit._src.autodiff import (checkpoint, custom_jvp, custom_vjp, grad, hessian, jacfwd,
                                     jacrev, jvp, linearize, remat, value_and_grad, vjp)
from fusionjit._src.autodiff import jacrev as jacobian  # jax.jacobian is jacrev
from fusionjit._src.batching import vmap
from fusionjit._src.api_extras import (checkpoint_policies, closure_convert, custom_gradient,
                                       default_matmul_precision, ensure_compile_time_eval,
                                       linear_transpose, named_call, print_environment_info,
                                       typeof)
from fusionjit._src.errors import (ConcretizationTypeError, TracerArrayConversionError,
                                   TracerBoolConversionError, TracerIntegerConversionError,
                                   UnexpectedTracerError)
from fusionjit import tree_util
from fusionjit import tree  # noqa: F401 (fusionjit.tree, as jax.tree)
from fusionjit import numpy
from fusionjit import lax
from fusionjit import random
from fusionjit import nn
from fusionjit import testing
from fusionjit import dlpack
from fusionjit import scipy  # noqa: F401 (fusionjit.scipy, as jax.scipy)
from fusionjit import dtypes  # noqa: F401 (fusionjit.dtypes, as jax.dtypes)
from fusionjit import debug  # noqa: F401 (fusionjit.debug, as jax.debug)
from fusionjit import experimental  # noqa: F401 (io_callback, as jax.experimental's)
from fusionjit._src.callbacks import pure_callback
from fusionjit import flatten_util  # noqa: F401 (as jax.flatten_util)
from fusionjit import ops  # noqa: F401 (fusionjit.ops, as jax.ops)

_array_methods.install_all()
_interop.install()

__version__ = "0.1.0"


DeviceError = _core.DeviceError


def block_until_ready(x):
    """Waits until every array in the pytree ``x`` is computed (GPU work runs
    asynchronously; CPU work is done when a call returns); returns ``x``."""
    for leaf in tree_util.tree_leaves(x):
        if isinstance(leaf, Array):
            leaf.block_until_ready()
    return x


def devices(backend: str | None = None):
    """The devices fusionjit can run on (of ``backend``: "cpu", "gpu", "gpu_emulated"), as
    descriptions: the CPU, the GPU where there is one with its driver, and the GPU
    emulation (which runs the GPU's kernels on the CPU, for testing)."""
    found = {"cpu": [f"cpu:0 ({_core.host_cpu()}, {_core.num_threads()} threads, "
                     f"{_core.host_vector_lanes()} x 32-bit SIMD lanes)"],
             "gpu": [] if _core.gpu_unavailable_reason() else [_core.gpu_description()],
             "gpu_emulated": [_core.gpu_emulated_description()]}
    if backend is not None:
        if backend not in found:
            raise ValueError(f"unknown backend {backend!r}; the backends are "
                             f"{', '.join(repr(b) for b in found)}")
        return found[backend]
    return [d for ds in found.values() for d in ds]


def gpu_unavailable_reason() -> str:
    """Why no GPU can be used ("" when one can): no driver, no device, a driver too old."""
    return _core.gpu_unavailable_reason()


__all__ = [
    "Array", "Compiled", "ConcretizationTypeError", "Explanation", "Lowered", "ShapeDtypeStruct",
    "Profile", "TracerArrayConversionError", "TracerBoolConversionError",
    "TracerIntegerConversionError",
    "UnexpectedTracerError", "DeviceError", "block_until_ready", "checkpoint", "clear_caches",
    "config", "custom_jvp", "custom_vjp", "debug", "default_backend", "device_count", "device_get",
    "device_put",
    "devices", "disable_jit", "dlpack", "eval_shape", "explain", "gpu_unavailable_reason", "grad",
    "dtypes", "flatten_util", "hessian", "jacfwd", "jacobian", "jacrev", "jit", "jvp", "lax",
    "linearize", "local_device_count", "make_ir", "make_jaxpr", "named_scope", "nn", "numpy",
    "ops", "process_count", "profile", "pure_callback", "experimental",
    "process_index", "random", "remat", "scipy", "testing", "tree", "tree_util",
    "value_and_grad", "vjp", "vmap", "checkpoint_policies", "closure_convert", "custom_gradient",
    "default_matmul_precision", "ensure_compile_time_eval", "linear_transpose", "named_call",
    "print_environment_info", "typeof",
]
