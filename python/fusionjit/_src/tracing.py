"""Tracing a Python function into a Program."""

from __future__ import annotations

from typing import Callable, Sequence

from fusionjit._src import core


def trace_to_program(flat_fun: Callable, in_avals: Sequence[core.ShapedArray],
                     name: str) -> core.Program:
    """Calls ``flat_fun`` on one tracer per aval and records what it does. ``flat_fun``
    returns a flat list of output values (tracers, arrays or scalars)."""
    trace = core.new_trace(name)
    try:
        tracers = [trace.new_arg(a) for a in in_avals]
        outs = flat_fun(*tracers)
        return trace.to_program(tracers, list(outs), name)
    finally:
        core.end_trace(trace)
