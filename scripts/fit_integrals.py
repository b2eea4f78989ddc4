#!/usr/bin/env python3
"""Fits the polynomials of fusionjit's exponential, sine and cosine integrals, Dawson's
integral, Spence's function and the Fresnel integrals
(python/fusionjit/_src/special_integrals.py) with mpmath, by scripts/fit_special.py's
method (the Chebyshev fit of the lowest degree whose relative error, sampled at 400 points
at 40 digits, is under 1e-17 for float64 and 1e-8 for float32), and writes them to
python/fusionjit/_src/special_integrals_coeffs.py.

Pieces (polynomials in u in [-1, 1] on their intervals):

- ein: Ein(x) / x = (E1(x) + gamma + log x) / x on [-1/2, 1/2] (E1 below 1/2), and
  ein_neg: Ein(-x) / -x on [0, 2] (Ei(x) = gamma + log x - Ein(-x));
- ei_zero: Ei(x) / (x - x0) on [1/4, 1/2] around Ei's zero x0 = 0.3725...;
- e1: x e^x E1(x) on [1/2, 1] ... [8, 16], e1_tail: the same in s = 1/x on [0, 1/16];
- ei: x e^-x Ei(x) on [2, 4] ... [16, 32], ei_tail: in s = 1/x on [0, 1/32];
- dawsn_small: D(x) / x in t = x**2 on [0, 1]; dawsn: D(x) on [1, 2], [2, 4], [4, 8];
  dawsn_tail: 2 x D(x) in s = 1/x**2 on [0, 1/64];
- li2: Li2(x) / x on [0, 1/2]; spence: spence(x) / (1 - x) on [1/2, 1] and [1, 2];
- si: Si(x) / x and cin: Cin(x) / x**2 = (gamma + log x - Ci(x)) / x**2 in t = x**2 on
  [0, 4]; ci_zero: Ci(x) / (x - c0) on [1/2, 3/4] around Ci's first zero c0 = 0.6165...;
- aux_f, aux_g: x f(x) and x**2 g(x), the auxiliary functions of Si and Ci (Si = pi/2 -
  f cos x - g sin x, Ci = f sin x - g cos x) on [2, 4] ... [16, 32], and aux_f_tail,
  aux_g_tail: the same in s = 1/x**2 on [0, 1/1024].

Run: python3 scripts/fit_integrals.py (needs mpmath; a few minutes).
"""

import os

import mpmath as mp

from fit_special import fit, write

mp.mp.dps = 40
OUT = os.path.join(os.path.dirname(__file__), "..", "python", "fusionjit", "_src",
                   "special_integrals_coeffs.py")
EI_ZERO = mp.findroot(mp.ei, 0.37)
CI_ZERO = mp.findroot(mp.ci, 0.62)


def ein_over_x(x):
    return mp.hyp2f2(1, 1, 2, 2, -x)


def e1_scaled(x):
    return x * mp.exp(x) * mp.e1(x)


def ei_scaled(x):
    return x * mp.exp(-x) * mp.ei(x)


def in_s(f, limit, power=1):
    """f(1 / s**(1/power)) with its limit at s = 0."""
    return lambda s: limit if s == 0 else f(1 / mp.root(s, power))


def near_zero(f, x0):
    return lambda x: mp.diff(f, x0) if x == x0 else f(x) / (x - x0)


def dawsn(x):
    return mp.sqrt(mp.pi) / 2 * mp.exp(-x * x) * mp.erfi(x)


def spence(x):
    return mp.polylog(2, 1 - x)


def aux(x):
    si, ci, s, c = mp.si(x), mp.ci(x), mp.sin(x), mp.cos(x)
    return ci * s + (mp.pi / 2 - si) * c, (mp.pi / 2 - si) * s - ci * c


def fresnel_aux(x):
    a = mp.pi * x * x / 2
    c, s = mp.fresnelc(x) - mp.mpf(1) / 2, mp.mpf(1) / 2 - mp.fresnels(x)
    return c * mp.sin(a) + s * mp.cos(a), s * mp.sin(a) - c * mp.cos(a)


def pieces(target):
    octaves = [(0.5, 1), (1, 2), (2, 4), (4, 8), (8, 16), (16, 32)]
    return {
        "ein": fit(ein_over_x, -0.5, 0.5, target),
        "ein_neg": fit(lambda x: ein_over_x(-x), 0, 2, target),
        "ei_zero": fit(near_zero(mp.ei, EI_ZERO), 0.25, 0.5, target),
        "e1": [fit(e1_scaled, a, b, target) for a, b in octaves[:5]],
        "e1_tail": fit(in_s(e1_scaled, 1), 0, mp.mpf(1) / 16, target),
        "ei": [fit(ei_scaled, a, b, target) for a, b in octaves[2:]],
        "ei_tail": fit(in_s(ei_scaled, 1), 0, mp.mpf(1) / 32, target),
        "dawsn_small": fit(lambda t: dawsn(mp.sqrt(t)) / mp.sqrt(t) if t else mp.mpf(1),
                           0, 1, target),
        "dawsn": [fit(dawsn, a, b, target) for a, b in octaves[1:4]],
        "dawsn_tail": fit(in_s(lambda x: 2 * x * dawsn(x), 1, 2), 0, mp.mpf(1) / 64, target),
        "li2": fit(lambda x: mp.polylog(2, x) / x if x else mp.mpf(1), 0, 0.5, target),
        "spence": [fit(lambda x: spence(x) / (1 - x) if x != 1 else mp.mpf(1), a, b, target)
                   for a, b in [(0.5, 1), (1, 2)]],
        "si": fit(lambda t: mp.si(mp.sqrt(t)) / mp.sqrt(t) if t else mp.mpf(1), 0, 4, target),
        "cin": fit(lambda t: (mp.euler + mp.log(t) / 2 - mp.ci(mp.sqrt(t))) / t if t else
                   mp.mpf(1) / 4, 0, 4, target),
        "ci_zero": fit(near_zero(mp.ci, CI_ZERO), 0.5, 0.75, target),
        "aux_f": [fit(lambda x: x * aux(x)[0], a, b, target) for a, b in octaves[2:]],
        "aux_g": [fit(lambda x: x * x * aux(x)[1], a, b, target) for a, b in octaves[2:]],
        "aux_f_tail": fit(in_s(lambda x: x * aux(x)[0], 1, 2), 0, mp.mpf(1) / 1024, target),
        "aux_g_tail": fit(in_s(lambda x: x * x * aux(x)[1], 1, 2), 0, mp.mpf(1) / 1024, target),
        "fresnel_s": fit(lambda t: mp.fresnels(mp.root(t, 4)) / mp.root(t, 4) ** 3 if t else
                         mp.pi / 6, 0, 16, target),
        "fresnel_c": fit(lambda t: mp.fresnelc(mp.root(t, 4)) / mp.root(t, 4) if t else
                         mp.mpf(1), 0, 16, target),
        "fresnel_f": [fit(lambda x: mp.pi * x * fresnel_aux(x)[0], a, b, target)
                      for a, b in octaves[2:]],
        "fresnel_g": [fit(lambda x: mp.pi ** 2 * x ** 3 * fresnel_aux(x)[1], a, b, target)
                      for a, b in octaves[2:]],
        "fresnel_f_tail": fit(in_s(lambda x: mp.pi * x * fresnel_aux(x)[0], 1, 4), 0,
                              mp.mpf(1) / 32 ** 4, target),
        "fresnel_g_tail": fit(in_s(lambda x: mp.pi ** 2 * x ** 3 * fresnel_aux(x)[1], 1, 4), 0,
                              mp.mpf(1) / 32 ** 4, target),
    }


def main():
    write(OUT, ['"""Generated by scripts/fit_integrals.py: do not edit. Pieces (a, b, coefficients',
                'highest degree first) of polynomials in u = (x - (a + b) / 2) / ((b - a) / 2);',
                'the zeros of Ei and Ci, each as a head and a tail."""'],
          pieces, [f"EI_ZERO = {float(EI_ZERO)!r}, {float(EI_ZERO - float(EI_ZERO))!r}",
                   f"CI_ZERO = {float(CI_ZERO)!r}, {float(CI_ZERO - float(CI_ZERO))!r}", ""])


if __name__ == "__main__":
    main()
