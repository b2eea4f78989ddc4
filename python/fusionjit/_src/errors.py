"""User-facing errors. Each message names the user's file and line: the innermost stack
frame outside fusionjit's own package."""

from __future__ import annotations

import os
import sys

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _is_internal(filename: str) -> bool:
    return filename.startswith(_PACKAGE_DIR) or filename.startswith("<frozen")


def user_frame(skip: int = 1):
    """The innermost frame not inside fusionjit (or None)."""
    frame = sys._getframe(skip)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def user_location(skip: int = 1) -> str:
    """"file.py:12 (function)" for the user's innermost frame."""
    frame = user_frame(skip + 1)
    if frame is None:
        return "<unknown location>"
    return f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name})"


def located(message: str, location: str | None = None) -> str:
    return f"{location or user_location(2)}: {message}"


class FusionJitTypeError(TypeError):
    """A value of the wrong kind, dtype or shape was passed to a fusionjit operation."""


class ConcretizationTypeError(TypeError):
    """A traced value was used where a concrete Python value is needed."""


class TracerBoolConversionError(ConcretizationTypeError):
    """``bool()`` / ``if`` on a traced value."""


class TracerArrayConversionError(TypeError):
    """A traced value was converted to a NumPy array."""


class TracerIntegerConversionError(TypeError):
    """A traced value was used as a Python int (an index, a shape)."""


class NonConcreteBooleanIndexError(ConcretizationTypeError):
    """A boolean mask index on a traced value (its result's shape depends on the values)."""


class UnexpectedTracerError(Exception):
    """A traced value escaped the function being traced (e.g. stored in a global)."""


def raise_type_error(message: str, exc_type: type = TypeError):
    raise exc_type(located(message, user_location(2)))
