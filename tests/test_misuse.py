"""What a JAX user's slips get, as in JAX (found by running 221 misuse programs under both):
a boolean mask of the wrong length, a Python number as a loop's initial carry, jit's static
arguments that the function does not take, fori_loop's bounds of two types, softmax over no
entries, and a jitted function that returns something that is not an array. (A batch of
PRNG keys: test_random.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
from fusionjit import lax

from conftest import requires_jax


def test_a_boolean_mask_must_match_the_dimensions_it_indexes():
    adv = fnp.array([1.0, -1.0, 2.0])
    # NumPy and JAX raise; the mask's true entries were taken as positions ([1.] and [2. 2.]).
    for mask in ([True, False], np.array([False, False, True, True])):
        with pytest.raises(IndexError, match=r"test_misuse.py:\d+.*boolean index did not match "
                                             r"shape of indexed array in index 0"):
            adv[mask]
        with pytest.raises(IndexError, match="boolean index did not match"):
            adv.at[np.asarray(mask)].set(0.0)
        with pytest.raises(IndexError, match="boolean index did not match"):
            fusionjit.jit(lambda a: a[np.asarray(mask)])(adv)
    x = fnp.arange(24.0).reshape(2, 3, 4)
    with pytest.raises(IndexError, match=r"got \(3,\), expected \(4,\)"):
        x[..., np.array([True, False, True])]
    with pytest.raises(IndexError, match=r"got \(2, 4\), expected \(2, 3\)"):
        x[np.ones((2, 4), bool)]
    # Masks that fit, before and after an ellipsis and beside slices, still index as NumPy.
    xn = np.arange(24.0).reshape(2, 3, 4)
    for index in ((slice(None), np.array([True, False, True])),
                  (Ellipsis, np.array([True, False, False, True])),
                  (np.array([False, True]), Ellipsis, 1),
                  (np.ones((2, 3), bool),)):
        np.testing.assert_array_equal(np.asarray(x[index]), xn[index])


def test_a_python_number_as_initial_carry_takes_the_bodys_type():
    r = fnp.arange(5.0)
    # JAX widens the weakly typed 0 to the float the body makes of it.
    got = fusionjit.jit(lambda r: lax.fori_loop(0, 5, lambda i, acc: acc * 0.99 + r[i], 0))(r)
    want = 0.0
    for i in range(5):
        want = want * 0.99 + float(i)
    assert got.dtype == np.float32 and got.shape == ()
    np.testing.assert_allclose(float(got), want, rtol=1e-6)
    carry, ys = lax.scan(lambda c, x: (c + x, c), 0, r)
    assert carry.dtype == np.float32 and ys.dtype == np.float32
    np.testing.assert_allclose(np.asarray(ys), [0, 0, 1, 3, 6])
    out = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + r[c[0]]), (0, 0))
    assert out[1].dtype == np.float32 and float(out[1]) == 3.0
    # A strongly typed carry still may not change type.
    with pytest.raises(TypeError, match="changes carry component"):
        lax.fori_loop(0, 5, lambda i, acc: acc * 0.5, np.int32(0))


@requires_jax
def test_a_python_number_as_initial_carry_matches_jax():
    import jax
    r = np.arange(5.0, dtype=np.float32)

    def f(lax_, r):
        return lax_.fori_loop(0, 5, lambda i, acc: acc * 0.99 + r[i], 0)
    got, want = fusionjit.jit(lambda r: f(lax, r))(r), jax.jit(lambda r: f(jax.lax, r))(r)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(float(got), float(want), rtol=1e-6)


def test_static_arguments_the_function_does_not_take_are_refused():
    def f(x, n):
        return x * n
    with pytest.raises(ValueError, match=r"test_misuse.py:\d+.*static_argnums=\(3,\), but f "
                                         r"takes 2 positional arguments"):
        fusionjit.jit(f, static_argnums=3)
    with pytest.raises(ValueError, match=r"static_argnames \['horizon'\], which f does not take"):
        fusionjit.jit(f, static_argnames="horizon")
    # Beyond the named parameters, *args and **kwargs take them.
    assert float(fusionjit.jit(lambda *a: a[0] * a[1], static_argnums=1)(2.0, 3)) == 6.0
    assert float(fusionjit.jit(lambda x, **kw: x * kw["n"], static_argnames="n")(2.0, n=3)) == 6.0
    assert float(fusionjit.jit(f, static_argnums=-1)(2.0, 3)) == 6.0


def test_fori_loop_bounds_of_two_types_are_refused_and_float_bounds_count_as_jax():
    with pytest.raises(TypeError, match=r"test_misuse.py:\d+.*fori_loop: lower and upper must "
                                        r"have equal types, got int32 and float32"):
        lax.fori_loop(0, 5.0, lambda i, c: c + 1, 0)
    # JAX counts int(4.5) - int(0.0) = 4 steps, i = 0.0, 1.0, ...
    steps, last = lax.fori_loop(0.0, 4.5, lambda i, c: (c[0] + 1, i), (0, 0.0))
    assert int(steps) == 4 and float(last) == 3.0


def test_softmax_and_logsumexp_over_no_entries():
    x = fnp.zeros((4, 0))
    assert fusionjit.nn.softmax(x, axis=-1).shape == (4, 0)
    assert fusionjit.nn.log_softmax(x, axis=-1).shape == (4, 0)
    np.testing.assert_array_equal(np.asarray(fusionjit.nn.logsumexp(x, axis=-1)), [-np.inf] * 4)
    np.testing.assert_array_equal(np.asarray(fusionjit.scipy.special.logsumexp(x, axis=1)),
                                  [-np.inf] * 4)


def test_a_jitted_function_returning_a_string_names_the_function_and_the_output():
    @fusionjit.jit
    def step(x):
        return x * 2, "done"
    with pytest.raises(TypeError, match=r"jit\(step\): the function \(.*test_misuse.py:\d+\) "
                                        r"returned a value of type str as output leaf 1"):
        step(fnp.ones(2))
