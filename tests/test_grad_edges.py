"""Derivatives of the library's functions where their pieces meet: at kinks (relu at 0,
hard_tanh at +-1), where a function saturates (sigmoid far below 0, celu far above), at the
edges of the approximations special functions are stitched from (erfc at +-0.5, log_ndtr at
-1), and for functions whose values come from bit operations (sinh's sign, frexp, ldexp),
which differentiation cannot see through. Each is compared with jax.grad at the same points:
JAX defines these derivatives by rule, and a JAX user porting code gets the same gradient
(not 0, NaN or half the slope). The few points where JAX's own value is an artifact of its
implementation (outside the function's domain, or at an infinity) are left out and named."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusionjit
import fusionjit.nn as fnn
import fusionjit.numpy as fnp
import fusionjit.scipy.special as fsp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jnn = pytest.importorskip("jax.nn")
jsp = pytest.importorskip("jax.scipy.special")

POINTS = np.array([-120.0, -100.0, -89.5, -20.0, -3.0, -1.0, -0.5, -1e-3, -0.0, 0.0, 1e-3, 0.3,
                   0.5, 0.999, 1.0, 2.0, 6.0, 20.0, 89.5, 100.0], np.float32)

# (module, name, points left out and why)
UNARY = [(m, n, ()) for m, names in [
    ("numpy", "sinh cosh tanh arcsinh arctanh arcsin arccos arctan cbrt exp expm1 log1p "
              "sqrt square abs fabs sign floor trunc rint deg2rad exp2 log2 log10"),
    ("nn", "relu relu6 sigmoid log_sigmoid softplus silu swish gelu elu celu selu leaky_relu "
           "hard_tanh hard_sigmoid hard_silu mish soft_sign squareplus sparse_plus "
           "sparse_sigmoid"),
    ("special", "erf erfc erfcx expit logit ndtr erfinv gammaln")] for n in names.split()]
UNARY += [
    # Below 1 acosh is NaN; at -1 both derivatives are infinite, with signs that differ.
    ("numpy", "arccosh", (-1.0,)),
    # For x < 0 log1mexp is NaN (JAX's rule still gives -1 there); at 0, +-inf vs NaN.
    ("nn", "log1mexp", ()),
    # In float32 at +-1e-3 both are within 2% of the true slope, -pi**2 x / 3 (cancellation).
    ("numpy", "sinc", (-1e-3, 1e-3)),
    # At -100 ours is 100.0100 (the true slope is 100.0099), JAX's 99.981.
    ("special", "log_ndtr", (-100.0,)),
]


def _module(name, lib):
    return {"numpy": (fnp, jnp), "nn": (fnn, jnn), "special": (fsp, jsp)}[name][lib]


def _compare(got, want, points, name):
    with np.errstate(all="ignore"):
        close = np.isclose(got, want, rtol=2e-4, atol=1e-6, equal_nan=True)
        huge = (np.abs(want) > 1e30) & (np.abs(got) > 1e30) & (np.sign(want) == np.sign(got))
    bad = ~(close | huge)
    assert not bad.any(), f"{name}: " + "; ".join(
        f"x={points[i]:g}: fusionjit {got[i]:.6g}, jax {want[i]:.6g}" for i in np.where(bad)[0])


@pytest.mark.parametrize("module, name, skip", UNARY, ids=[f"{m}.{n}" for m, n, _ in UNARY])
def test_grad_of_functions_at_their_edges_matches_jax(module, name, skip):
    points = POINTS[~np.isin(POINTS, np.array(skip, np.float32))]
    if name == "log1mexp":
        points = points[points > 0]
    ours, theirs = getattr(_module(module, 0), name), getattr(_module(module, 1), name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = np.asarray(jax.vmap(jax.grad(theirs))(points))
    got = np.asarray(fusionjit.jit(fusionjit.vmap(fusionjit.grad(ours)))(points))
    _compare(got, want, points, name)


_EDGES = np.array([-np.inf, -100.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, 100.0, np.inf],
                  np.float32)
_X, _Y = (a.ravel() for a in np.meshgrid(_EDGES, _EDGES))
# (name, pairs left out): JAX's derivatives there are NaN from inf / inf, or 0 * inf.
BINARY = [("arctan2", None), ("logaddexp", None), ("logaddexp2", None), ("copysign", None),
          ("fmax", None), ("fmin", None), ("maximum", None), ("minimum", None),
          ("hypot", np.isinf(_X) | np.isinf(_Y)), ("power", (_X == 0) & (_Y == 0)),
          ("divide", None), ("multiply", None)]


@pytest.mark.parametrize("name, left_out", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("argnum", [0, 1])
def test_grad_of_binary_functions_at_ties_and_infinities_matches_jax(name, left_out, argnum):
    keep = np.ones(_X.shape, bool) if left_out is None else ~left_out
    x, y = _X[keep], _Y[keep]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = np.asarray(jax.vmap(jax.grad(getattr(jnp, name), argnums=argnum))(x, y))
    got = np.asarray(fusionjit.jit(fusionjit.vmap(fusionjit.grad(getattr(fnp, name),
                                                                 argnums=argnum)))(x, y))
    _compare(got, want, list(zip(x, y)), name)


def test_gradients_through_bit_operations_eagerly_and_of_programs():
    # Eagerly (each op on its own) as well as compiled: sinh's sign comes from a bit copy.
    x = np.array([-2.0, -0.0, 0.25, 3.0], np.float32)
    np.testing.assert_allclose(np.asarray(fusionjit.grad(lambda v: fnp.sinh(v).sum())(x)),
                               np.cosh(x), rtol=1e-6)
    # A tanh-squashed Gaussian policy's log-probability, inverted with arctanh (SAC).
    a = np.array([0.3, -0.9, 0.99], np.float32)

    def log_prob(np_, mu, a):
        u = np_.arctanh(a)
        return np_.sum(-0.5 * (u - mu) ** 2 - np_.log(1 - a ** 2 + 1e-6))
    mu = np.array([0.1, -0.2, 0.5], np.float32)
    for argnum in (0, 1):
        got = fusionjit.jit(fusionjit.grad(lambda m, a: log_prob(fnp, m, a), argnums=argnum))(mu, a)
        want = jax.grad(lambda m, a: log_prob(jnp, m, a), argnums=argnum)(mu, a)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
    # Binary cross-entropy on a saturated logit: the gradient is finite (not NaN).
    logits, labels = np.array([-120.0, 3.0], np.float32), np.array([0.0, 1.0], np.float32)

    def bce(np_, nn, z):
        p = nn.sigmoid(z)
        return -np_.sum(labels * np_.log(p + 1e-7) + (1 - labels) * np_.log(1 - p + 1e-7))
    got = fusionjit.jit(fusionjit.grad(lambda z: bce(fnp, fnn, z)))(logits)
    want = jax.grad(lambda z: bce(jnp, jnn, z))(logits)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-7)
    # frexp's mantissa and ldexp, through a program that rebuilds x.
    m = fusionjit.grad(lambda v: fnp.sum(fnp.frexp(v)[0] * 3 + fnp.ldexp(v, 4)))(x[2:])
    np.testing.assert_allclose(np.asarray(m), [3 * 2 + 16, 3 * 0.25 + 16])  # 2**-e + 2**4
