"""Configuration: ``fusionjit.config.update(name, value)``; every option is also settable by
its upper-cased environment variable (``FUSIONJIT_ENABLE_X64=1``), as in JAX."""

from __future__ import annotations

import os
from typing import Any, Callable

from fusionjit import _core


def _parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"cannot read {text!r} as a boolean (use 1/0, true/false)")


class _Option:
    def __init__(self, name: str, default: Any, parse: Callable[[str], Any], doc: str,
                 affects_tracing: bool = True, validate: Callable[[Any], Any] | None = None):
        self.name, self.default, self.parse, self.doc = name, default, parse, doc
        self.affects_tracing = affects_tracing
        self.validate = validate or (lambda v: v)


_OPTIONS = {
    o.name: o
    for o in [
        _Option("fusionjit_enable_x64", False, _parse_bool,
                "64-bit types (int64, uint64, float64); off: they become 32-bit, as in JAX."),
        _Option("fusionjit_opt_level", 2, int, "LLVM optimisation level (0-3).",
                validate=lambda v: int(v) if 0 <= int(v) <= 3 else _bad("opt_level", v, "0 to 3")),
        _Option("fusionjit_vector_width", 0, int,
                "CPU SIMD lanes per step: 0 the host's (16 with AVX-512, 8 with AVX2), 1 no SIMD.",
                validate=lambda v: int(v) if int(v) in (0, 1, 2, 4, 8, 16) else
                _bad("vector_width", v, "0 (the host's), 1, 2, 4, 8 or 16")),
        _Option("fusionjit_fusion_profile", "fusionjit", str,
                "Fusion rules: 'fusionjit' (cost model, the default), 'xla' (legacy XLA as the "
                "paper studied it), 'xla+concat' (the paper's patched XLA), 'none'.",
                validate=lambda v: _check_profile(v)),
        _Option("fusionjit_threefry_partitionable", True, _parse_bool,
                "JAX's jax_threefry_partitionable: True (JAX's default since 0.5.0) or False "
                "(the original mode, as in the paper's era); changes the random streams."),
        _Option("fusionjit_threefry_lowering", "fused", str,
                "'fused': threefry as integer ops that fuse; 'custom_call': an opaque kernel "
                "and fusion barrier, as XLA's cuda_threefry2x32.",
                validate=lambda v: v if v in ("fused", "custom_call") else
                _bad("threefry_lowering", v, "'fused' or 'custom_call'")),
        _Option("fusionjit_default_backend", "cpu", str,
                "Where jitted functions and eager operations run: 'cpu', 'gpu' (an NVIDIA GPU "
                "through the CUDA driver) or 'gpu_emulated' (the GPU's kernels run on the CPU, "
                "for testing); jit(f, backend=...) chooses per function.",
                validate=lambda v: _check_backend(v)),
        _Option("fusionjit_gpu_arch", "", str,
                "The PTX target of GPU code ('sm_80', 'sm_90'); '' for the GPU's own (sm_80 "
                "where there is no GPU).",
                validate=lambda v: _check_gpu_arch(v)),
        _Option("fusionjit_log_compiles", False, _parse_bool,
                "Log each trace and compilation with its time.", affects_tracing=False),
        _Option("fusionjit_disable_jit", False, _parse_bool,
                "Run jitted functions eagerly, op by op (for debugging).", affects_tracing=False),
        _Option("fusionjit_cache_size", 1024, int,
                "Compiled signatures kept per jitted function (least recently used evicted), "
                "and eager primitives kept compiled.", affects_tracing=False,
                validate=lambda v: int(v) if int(v) >= 1 else _bad("cache_size", v, ">= 1")),
        _Option("fusionjit_checks", False, _parse_bool,
                "Run the IR verifier after every C++ pass (also FJ_CHECKS=1).",
                affects_tracing=False),
    ]
}


def _check_profile(value: Any) -> str:
    names = list(_core.fusion_profiles())
    if value not in names:
        raise ValueError(f"unknown fusion profile {value!r}; known profiles: {', '.join(names)}")
    return value


BACKENDS = ("cpu", "gpu", "gpu_emulated")


def _check_backend(value: Any) -> str:
    if value not in BACKENDS:
        raise ValueError(f"unknown backend {value!r}; the backends are "
                         f"{', '.join(repr(b) for b in BACKENDS)}")
    return value


def _check_gpu_arch(value: Any) -> str:
    if value == "" or (str(value).startswith("sm_") and str(value)[3:].isdigit()):
        return value
    _bad("gpu_arch", value, "'' or 'sm_<number>', e.g. 'sm_90'")


def _bad(name: str, value: Any, allowed: str):
    raise ValueError(f"fusionjit_{name} must be {allowed}, got {value!r}")


class Config:
    """The option values. Read them as attributes: ``config.fusionjit_enable_x64``."""

    def __init__(self):
        self._values: dict[str, Any] = {}
        for option in _OPTIONS.values():
            env = os.environ.get(option.name.upper())
            value = option.default
            if env is not None:
                try:
                    value = option.validate(option.parse(env))
                except ValueError as e:
                    raise ValueError(f"environment variable {option.name.upper()}: {e}") from None
            self._values[option.name] = value
        if os.environ.get("FJ_CHECKS"):
            self._values["fusionjit_checks"] = _parse_bool(os.environ["FJ_CHECKS"])
        self._apply_all()

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_values"][name]
        except KeyError:
            raise AttributeError(f"fusionjit has no config option {name!r}") from None

    def update(self, name: str, value: Any) -> None:
        """Sets option ``name`` (e.g. ``"fusionjit_enable_x64"``) to ``value``."""
        if name not in _OPTIONS:
            known = ", ".join(sorted(_OPTIONS))
            raise AttributeError(f"unknown config option {name!r}; known options: {known}")
        option = _OPTIONS[name]
        if isinstance(value, str) and option.parse is _parse_bool:
            value = _parse_bool(value)
        self._values[name] = option.validate(value)
        self._apply(name)

    def options(self) -> dict[str, str]:
        """Every option with its documentation."""
        return {name: o.doc for name, o in _OPTIONS.items()}

    def _apply(self, name: str) -> None:
        if name == "fusionjit_enable_x64":
            _core.set_enable_x64(bool(self._values[name]))
        elif name == "fusionjit_checks":
            _core.set_checks(bool(self._values[name]))
        elif name == "fusionjit_disable_jit":
            _core.set_disable_jit(bool(self._values[name]))
        elif name == "fusionjit_cache_size":
            _core.set_cache_capacity(int(self._values[name]))
        if _OPTIONS[name].affects_tracing:
            _core.bump_config_epoch()
            _EPOCH[0] += 1

    def _apply_all(self) -> None:
        for name in _OPTIONS:
            self._apply(name)

    @property
    def epoch(self) -> int:
        """Changes whenever an option that changes traced or compiled programs changes (part
        of every compilation cache key)."""
        return _EPOCH[0]


_EPOCH = [0]
config = Config()
