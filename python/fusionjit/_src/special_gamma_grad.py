"""The derivative of a Gamma(a, 1) sample with respect to its concentration ``a``, by implicit
reparameterisation (``jax.lax.random_gamma_grad``): a sample x solves P(a, x) = u for a
uniform u that does not depend on a (P the regularised lower incomplete gamma function), so

    dx/da = -(dP/da) / (dP/dx),   dP/dx = x^(a-1) e^-x / Gamma(a).

With P = e^h S for the series (h = a log x - x - lgamma(a), S = sum_n x^n / (a (a+1) ..
(a+n))) and Q = 1 - P = e^h F for the continued fraction F (Legendre's, evaluated by the
recurrence of Cephes' igamc), the factor e^h cancels:

    dx/da / x = -(S (log x - digamma(a)) + dS/da)        (series: x <= 1 or x <= a)
    dx/da / x =   F (log x - digamma(a)) + dF/da          (continued fraction: otherwise)

dS/da and dF/da are carried along the sum and the recurrence (forward-mode by hand). Both
are computed for every lane of a while loop that stops when every lane has converged to the
working precision (float32 for 16-bit floats). Working with x / x keeps the log-space
derivative (loggamma, beta, dirichlet) accurate where exp(log x) underflows."""

from __future__ import annotations

import numpy as np

from fusionjit._src import dtypes as dt
from fusionjit._src.lax import lax
from fusionjit._src.numpy import reductions, ufuncs
from fusionjit._src.numpy.util import aval, fail, to_array

_MAX_STEPS = 10000  # enough for a up to ~1e7 in float32 (the series needs ~sqrt(a) steps)


def _series(a, x, eps: float, active, derivative: bool = True):
    """S and dS/da (see the module's docstring), summed until each active lane's next
    terms are below ``eps`` relative (S's alone without ``derivative``)."""
    from fusionjit._src.lax.control_flow import while_loop
    t = ufuncs.divide(1.0, a)
    dt_ = ufuncs.negative(ufuncs.multiply(t, t))

    def step(c):
        k, n, t, dt_, s, ds, _ = c
        n = ufuncs.add(n, 1.0)
        r = ufuncs.divide(x, ufuncs.add(a, n))
        t = ufuncs.multiply(t, r)
        # d(t_n)/da = d(t_{n-1})/da r - t_n / (a + n), as dr/da = -r / (a + n).
        dt_ = ufuncs.subtract(ufuncs.multiply(dt_, r), ufuncs.divide(t, ufuncs.add(a, n)))
        s, ds = ufuncs.add(s, t), ufuncs.add(ds, dt_)
        live = ufuncs.greater(ufuncs.abs(t), ufuncs.multiply(ufuncs.abs(s), eps))
        if derivative:
            live = ufuncs.logical_or(live, ufuncs.greater(ufuncs.abs(dt_),
                                                          ufuncs.multiply(ufuncs.abs(ds), eps)))
        return k + 1, n, t, dt_, s, ds, ufuncs.logical_and(active, live)

    init = (to_array(0, dt.int32, False), ufuncs.multiply(a, 0.0), t, dt_, t, dt_, active)
    out = while_loop(_more, step, init)
    return out[4], out[5]


def _more(c):
    """Whether a loop (step count first, lanes still converging last) goes on."""
    return ufuncs.logical_and(reductions.any(c[-1]), ufuncs.less(c[0], _MAX_STEPS))


def _continued_fraction(a, x, eps: float, tiny: float, active, derivative: bool = True):
    """F and dF/da (see the module's docstring): Legendre's continued fraction
    F = 1/(b_0 + a_1/(b_1 + a_2/(b_2 + ...))), b_i = x + 1 - a + 2i, a_i = -i (i - a), by
    the modified Lentz method with the derivatives of its factors by a carried along (the
    convergents' numerators and denominators lose float32 precision as they go; Lentz's
    factors, near 1, do not). Without ``derivative`` only F's convergence is waited for."""
    from fusionjit._src.lax.control_flow import while_loop
    b = ufuncs.add(ufuncs.subtract(x, a), 1.0)
    d = ufuncs.divide(1.0, b)
    dd = ufuncs.multiply(d, d)  # db/da = -1
    c = ufuncs.add(ufuncs.multiply(a, 0.0), 1.0 / tiny)  # "infinity": a_1 / c = 0
    dc = ufuncs.multiply(a, 0.0)

    def guard(v):
        return ufuncs.where(ufuncs.less(ufuncs.abs(v), tiny), tiny, v)

    def step(carry):
        k, i, b, c, dc, d, dd, h, dh, _ = carry
        i = ufuncs.add(i, 1.0)
        an = ufuncs.multiply(ufuncs.negative(i), ufuncs.subtract(i, a))  # d(an)/da = i
        b = ufuncs.add(b, 2.0)
        pre = guard(ufuncs.add(ufuncs.multiply(an, d), b))
        dpre = ufuncs.subtract(ufuncs.add(ufuncs.multiply(i, d), ufuncs.multiply(an, dd)), 1.0)
        d = ufuncs.divide(1.0, pre)
        dd = ufuncs.negative(ufuncs.multiply(ufuncs.multiply(d, d), dpre))
        c_new = guard(ufuncs.add(b, ufuncs.divide(an, c)))
        dc = ufuncs.subtract(ufuncs.subtract(ufuncs.divide(i, c), 1.0),
                             ufuncs.divide(ufuncs.multiply(an, dc), ufuncs.multiply(c, c)))
        c = c_new
        delta = ufuncs.multiply(d, c)
        ddelta = ufuncs.add(ufuncs.multiply(dd, c), ufuncs.multiply(d, dc))
        step_dh = ufuncs.multiply(h, ddelta)
        dh = ufuncs.add(ufuncs.multiply(dh, delta), step_dh)
        h = ufuncs.multiply(h, delta)
        live = ufuncs.greater(ufuncs.abs(ufuncs.subtract(delta, 1.0)), eps)
        if derivative:
            live = ufuncs.logical_or(live, ufuncs.greater(
                ufuncs.abs(step_dh), ufuncs.multiply(ufuncs.abs(dh), eps)))
        return k + 1, i, b, c, dc, d, dd, h, dh, ufuncs.logical_and(active, live)

    init = (to_array(0, dt.int32, False), ufuncs.multiply(a, 0.0), b, c, dc, d, dd, d, dd,
            active)
    out = while_loop(_more, step, init)
    return out[7], out[8]


def _relative_grad(a, x, log_x):
    """d x / d a divided by x, for samples x (and their logs) of Gamma(a, 1); NaN where a <= 0
    or x < 0 (or either is NaN), as JAX's."""
    from fusionjit._src.special import digamma
    d = aval(a).dtype
    eps = float(dt.finfo(d).eps)
    # x = 0 with a finite log (exp underflowed) is fine: the series is then 1/a.
    ok = ufuncs.logical_and(ufuncs.greater(a, 0.0), ufuncs.greater_equal(x, 0.0))
    ok = ufuncs.logical_and(ok, ufuncs.isfinite(log_x))
    use_cf = ufuncs.logical_and(ufuncs.greater(x, 1.0), ufuncs.greater(x, a))
    # Lanes that do not take a branch run it on harmless values (a = x = 1, or a = 1, x = 2).
    a_s = ufuncs.where(ufuncs.logical_and(ok, ufuncs.logical_not(use_cf)), a, 1.0)
    x_s = ufuncs.where(ufuncs.logical_and(ok, ufuncs.logical_not(use_cf)), x, 1.0)
    a_c = ufuncs.where(ufuncs.logical_and(ok, use_cf), a, 1.0)
    x_c = ufuncs.where(ufuncs.logical_and(ok, use_cf), x, 2.0)
    s, ds = _series(a_s, x_s, eps, ufuncs.logical_and(ok, ufuncs.logical_not(use_cf)))
    f, df = _continued_fraction(a_c, x_c, eps, float(dt.finfo(d).tiny),
                                ufuncs.logical_and(ok, use_cf))
    dlog = ufuncs.subtract(log_x, digamma(ufuncs.where(ok, a, 1.0)))
    low = ufuncs.negative(ufuncs.add(ufuncs.multiply(s, dlog), ds))
    high = ufuncs.add(ufuncs.multiply(f, dlog), df)
    out = ufuncs.where(use_cf, high, low)
    bad = ufuncs.logical_or(ufuncs.less_equal(a, 0.0), ufuncs.less(x, 0.0))
    bad = ufuncs.logical_or(bad, ufuncs.logical_or(ufuncs.isnan(a), ufuncs.isnan(x)))
    out = ufuncs.where(ok, out, 0.0)
    return ufuncs.where(bad, to_array(np.nan, d, False), out)


def _operands(name: str, a, x):
    a, x = to_array(a), to_array(x)
    da, dx = aval(a).dtype, aval(x).dtype
    if not (dt.is_float(da) and dt.is_float(dx)) or da != dx:
        fail(f"{name} takes two floating-point arrays of one dtype, got {aval(a).str_short()} "
             f"and {aval(x).str_short()}")
    if aval(a).shape != aval(x).shape:
        fail(f"{name}: a and x must have the same shape, got {aval(a).shape} and "
             f"{aval(x).shape}", ValueError)
    return a, x


def _working(fn, *args):
    d = aval(args[0]).dtype
    if dt.is_low_precision(d):
        args = [lax.convert_element_type(v, dt.float32) for v in args]
        return lax.convert_element_type(fn(*args), d)
    return fn(*args)


def random_gamma_grad(a, x):
    """``jax.lax.random_gamma_grad``: the derivative of a Gamma(a, 1) sample ``x`` with
    respect to ``a`` (0 at x = 0; NaN where a <= 0 or x < 0)."""
    a, x = _operands("lax.random_gamma_grad", a, x)

    def grad(a, x):
        g = ufuncs.multiply(x, _relative_grad(a, x, ufuncs.log(x)))
        return ufuncs.where(ufuncs.equal(x, 0.0), 0.0, g)
    return _working(grad, a, x)


def random_loggamma_grad(a, log_x):
    """The derivative of log(x) for a Gamma(a, 1) sample x given by its log ``log_x`` (what
    ``random.loggamma`` draws), with respect to ``a``."""
    a, log_x = _operands("random_loggamma_grad", a, log_x)
    return _working(lambda a, lx: _relative_grad(a, ufuncs.exp(lx), lx), a, log_x)
