"""JAX's type promotion with weak types, for fusionjit's dtypes (bool, int8/16/32/64,
uint8/16/32/64, bfloat16, float16, float32, float64) and Python scalars:
``fnp.promote_types``, ``fnp.result_type`` and the dtype and weak type of ``x + y``, with
64-bit types off and on.

The expected answers are hard-coded from JAX's documented promotion table
(https://jax.readthedocs.io/en/latest/type_promotion.html); when JAX is installed they are
also checked against JAX live."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusionjit
import fusionjit.numpy as fnp
from conftest import HAVE_JAX, requires_jax

T = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "bfloat16", "float16", "float32", "float64"]
PAIRS = [(a, b) for a in T for b in T]

# JAX's promotion table (64-bit types enabled), without the complex types, in short names
# (_LONG). "i*" and "f*" are the weak types of Python ints and floats. Order: COLS.
COLS = T + ["i*", "f*"]
_TABLE_TEXT = """
     b1   i8   i16  i32  i64  u8   u16  u32  u64  bf16 f16  f32  f64  i*   f*
b1   b1   i8   i16  i32  i64  u8   u16  u32  u64  bf16 f16  f32  f64  i*   f*
i8   i8   i8   i16  i32  i64  i16  i32  i64  f*   bf16 f16  f32  f64  i8   f*
i16  i16  i16  i16  i32  i64  i16  i32  i64  f*   bf16 f16  f32  f64  i16  f*
i32  i32  i32  i32  i32  i64  i32  i32  i64  f*   bf16 f16  f32  f64  i32  f*
i64  i64  i64  i64  i64  i64  i64  i64  i64  f*   bf16 f16  f32  f64  i64  f*
u8   u8   i16  i16  i32  i64  u8   u16  u32  u64  bf16 f16  f32  f64  u8   f*
u16  u16  i32  i32  i32  i64  u16  u16  u32  u64  bf16 f16  f32  f64  u16  f*
u32  u32  i64  i64  i64  i64  u32  u32  u32  u64  bf16 f16  f32  f64  u32  f*
u64  u64  f*   f*   f*   f*   u64  u64  u64  u64  bf16 f16  f32  f64  u64  f*
bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16 f32  f32  f64  bf16 bf16
f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f32  f16  f32  f64  f16  f16
f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f64  f32  f32
f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64
i*   i*   i8   i16  i32  i64  u8   u16  u32  u64  bf16 f16  f32  f64  i*   f*
f*   f*   f*   f*   f*   f*   f*   f*   f*   f*   bf16 f16  f32  f64  f*   f*
"""


_LONG = {"b1": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
         "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "bf16": "bfloat16",
         "f16": "float16", "f32": "float32", "f64": "float64", "i*": "i*", "f*": "f*"}


def _parse_table():
    rows = [[_LONG[w] for w in line.split()] for line in _TABLE_TEXT.strip().splitlines()]
    header, body = rows[0], rows[1:]
    assert header == COLS
    table = {}
    for row in body:
        for col, entry in zip(COLS, row[1:]):
            table[row[0], col] = entry
    return table


TABLE = _parse_table()

_CANONICAL_32 = {"int64": "int32", "uint64": "uint32", "float64": "float32"}


def canon(name: str, x64: bool) -> str:
    """The dtype fusionjit (and JAX) really uses for ``name``."""
    return name if x64 or name not in _CANONICAL_32 else _CANONICAL_32[name]


def expected(a: str, b: str, x64: bool) -> tuple[np.dtype, bool]:
    """(dtype, weak_type) of combining values of types a and b ("i*"/"f*" for Python
    scalars; "bool" for Python bools, which are not weak in JAX)."""
    node = TABLE[canon(a, x64), canon(b, x64)]
    if node == "i*":
        return np.dtype("int64" if x64 else "int32"), True
    if node == "f*":
        return np.dtype("float64" if x64 else "float32"), True
    return np.dtype(canon(node, x64)), False


def fmt(dtype, weak) -> str:
    return f"{np.dtype(dtype).name}{'*' if weak else ''}"


PY_SCALARS = {"bool": True, "i*": 1, "f*": 1.0}


# --- x64 modes --------------------------------------------------------------------------

@pytest.fixture(scope="module", autouse=True)
def _restore_x64_at_the_end():
    saved = fusionjit.config.fusionjit_enable_x64
    jax_saved = _jax_x64() if HAVE_JAX else None
    yield
    if fusionjit.config.fusionjit_enable_x64 != saved:
        fusionjit.config.update("fusionjit_enable_x64", saved)
    if HAVE_JAX:
        import jax
        jax.config.update("jax_enable_x64", jax_saved)


def _jax_x64() -> bool:
    import jax
    return bool(jax.config.jax_enable_x64)


def set_x64(on: bool) -> None:
    """Sets 64-bit mode in fusionjit (and JAX, when installed) only when it changes, so that
    the compilation caches survive between tests of the same mode."""
    if fusionjit.config.fusionjit_enable_x64 != on:
        fusionjit.config.update("fusionjit_enable_x64", on)
    if HAVE_JAX and _jax_x64() != on:
        import jax
        jax.config.update("jax_enable_x64", on)


X64_MODES = [pytest.param(False, id="x32"), pytest.param(True, id="x64")]


# --- the table itself -------------------------------------------------------------------

def test_table_is_symmetric_and_a_join():
    for a in COLS:
        assert TABLE[a, a] == a
        for b in COLS:
            assert TABLE[a, b] == TABLE[b, a]
            for c in COLS:  # associative, as a lattice join must be
                assert TABLE[TABLE[a, b], c] == TABLE[a, TABLE[b, c]]


# --- promote_types and result_type ------------------------------------------------------

@pytest.mark.parametrize("x64", X64_MODES)
def test_promote_types(x64):
    set_x64(x64)
    wrong = []
    for a, b in PAIRS:
        want = expected(a, b, x64)[0]
        for got in (fnp.promote_types(a, b), fnp.promote_types(np.dtype(a), np.dtype(b).type)):
            if np.dtype(got) != want:
                wrong.append(f"promote_types({a}, {b}) = {got}, expected {want}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("x64", X64_MODES)
def test_result_type_of_dtypes(x64):
    set_x64(x64)
    wrong = []
    for a, b in PAIRS:
        want = expected(a, b, x64)[0]
        got = fnp.result_type(a, b)
        if np.dtype(got) != want:
            wrong.append(f"result_type({a}, {b}) = {got}, expected {want}")
    for a in T:
        if fnp.result_type(a) != np.dtype(canon(a, x64)):
            wrong.append(f"result_type({a}) = {fnp.result_type(a)}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("x64", X64_MODES)
def test_result_type_with_python_scalars(x64):
    set_x64(x64)
    wrong = []
    for a in T:
        x = fnp.ones(2, a)
        for kind, s in PY_SCALARS.items():
            want = expected(a, kind, x64)[0]
            for args in ((x, s), (s, x), (a, s)):
                got = fnp.result_type(*args)
                if np.dtype(got) != want:
                    wrong.append(f"result_type{args!r} = {got}, expected {want}")
    for k1, s1 in PY_SCALARS.items():
        for k2, s2 in PY_SCALARS.items():
            want = expected(k1, k2, x64)[0]
            if fnp.result_type(s1, s2) != want:
                wrong.append(f"result_type({s1!r}, {s2!r}) = {fnp.result_type(s1, s2)}")
    assert not wrong, "\n".join(wrong)


# --- x + y --------------------------------------------------------------------------------

def _add(mode):
    if mode == "jit":
        return fusionjit.jit(lambda x, y: x + y)
    return lambda x, y: x + y


@pytest.mark.parametrize("mode", ["eager", "jit"])
@pytest.mark.parametrize("x64", X64_MODES)
def test_add_arrays(x64, mode):
    set_x64(x64)
    add = _add(mode)
    wrong = []
    for a, b in PAIRS:
        x, y = fnp.ones(2, a), np.ones(2, b) if mode == "jit" else fnp.ones(2, b)
        out = add(x, y)
        want = expected(a, b, x64)
        if (out.dtype, out.weak_type) != want:
            wrong.append(f"{a} + {b} = {fmt(out.dtype, out.weak_type)}, expected {fmt(*want)}")
        elif not np.array_equal(np.asarray(out), np.full(2, 2 if a != b or a != "bool" else True)):
            wrong.append(f"{a} + {b} = {np.asarray(out)}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("mode", ["eager", "jit", "jit-constant"])
@pytest.mark.parametrize("x64", X64_MODES)
def test_add_array_and_python_scalar(x64, mode):
    set_x64(x64)
    wrong = []
    for a in T:
        x = fnp.ones(2, a)
        for kind, s in PY_SCALARS.items():
            want = expected(a, kind, x64)
            if mode == "eager":
                outs = [x + s, s + x, fnp.add(x, s), fnp.add(s, x)]
            elif mode == "jit":
                f = fusionjit.jit(lambda p, q: p + q)
                outs = [f(x, s), f(s, x)]
            else:
                outs = [fusionjit.jit(lambda p: p + s)(x), fusionjit.jit(lambda p: s + p)(x)]
            for out in outs:
                if (out.dtype, out.weak_type) != want:
                    wrong.append(f"{a} + {s!r} = {fmt(out.dtype, out.weak_type)}, "
                                 f"expected {fmt(*want)}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("x64", X64_MODES)
def test_add_python_scalars_under_jit(x64):
    set_x64(x64)
    f = fusionjit.jit(lambda p, q: p + q)
    wrong = []
    for k1, s1 in PY_SCALARS.items():
        for k2, s2 in PY_SCALARS.items():
            out = f(s1, s2)
            want = expected(k1, k2, x64)
            value = np.array(s1 + s2).astype(want[0]).item()  # True + True is True
            if (out.dtype, out.weak_type) != want or out.item() != value:
                wrong.append(f"{s1!r} + {s2!r} = {out!r} ({fmt(out.dtype, out.weak_type)}), "
                             f"expected {fmt(*want)}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("x64", X64_MODES)
def test_weak_typed_arrays_promote_like_python_scalars(x64):
    set_x64(x64)
    weak_float = fusionjit.jit(lambda v: v)(1.0)
    weak_int = fusionjit.jit(lambda v: v)(1)
    assert weak_float.weak_type and weak_int.weak_type
    wrong = []
    for a in T:
        x = fnp.ones(2, a)
        for kind, w in (("f*", weak_float), ("i*", weak_int)):
            want = expected(a, kind, x64)
            for out in (x + w, w + x, fusionjit.jit(lambda p, q: p + q)(x, w)):
                if (out.dtype, out.weak_type) != want:
                    wrong.append(f"{a} + weak {kind} array = {fmt(out.dtype, out.weak_type)}, "
                                 f"expected {fmt(*want)}")
    out = weak_int + weak_float
    if (out.dtype, out.weak_type) != expected("i*", "f*", x64):
        wrong.append(f"weak int + weak float = {fmt(out.dtype, out.weak_type)}")
    assert not wrong, "\n".join(wrong)


def _numpy_scalar_cases():
    # np.float64 matters most: it subclasses Python's float, but it is strongly typed.
    for x64 in (False, True):
        for b in T:
            yield pytest.param(x64, b, id=f"{'x64' if x64 else 'x32'}-np.{b}")


@pytest.mark.parametrize("x64,b", list(_numpy_scalar_cases()))
def test_add_array_and_numpy_scalar(x64, b):
    """NumPy scalars are strongly typed: they promote like arrays of their dtype."""
    set_x64(x64)
    s = np.dtype(b).type(1)
    f = fusionjit.jit(lambda p, q: p + q)
    wrong = []
    for a in T:
        x = fnp.ones(2, a)
        want = expected(a, b, x64)
        for out in (x + s, fnp.add(s, x), f(x, s), f(s, x)):
            if (out.dtype, out.weak_type) != want:
                wrong.append(f"{a} + np.{b} = {fmt(out.dtype, out.weak_type)}, "
                             f"expected {fmt(*want)}")
        got = fnp.result_type(x, s)
        if np.dtype(got) != want[0]:
            wrong.append(f"result_type({a} array, np.{b}) = {got}, expected {want[0]}")
    assert not wrong, "\n".join(wrong)


def _numpy_array_operand_cases(weak_result: bool):
    """(a, b) pairs with b a NumPy array dtype or a Python scalar kind whose expected result
    is (or is not) weakly typed."""
    return [(a, b) for a in T for b in T + list(PY_SCALARS)
            if expected(a, b, x64=False)[1] == weak_result
            or expected(a, b, x64=True)[1] == weak_result]


def _check_numpy_array_operands(x64, weak_result):
    set_x64(x64)
    wrong = []
    for a, b in _numpy_array_operand_cases(weak_result):
        want = expected(a, b, x64)
        if want[1] != weak_result:
            continue
        x = np.ones(2, a)  # a NumPy array, not a fusionjit.Array
        y = PY_SCALARS[b] if b in PY_SCALARS else np.ones(2, b)
        for name, out in (("fnp.add", fnp.add(x, y)), ("fnp.add swapped", fnp.add(y, x)),
                          ("Array +", fnp.asarray(y) + x if b not in PY_SCALARS else None)):
            if out is None:
                continue
            if (out.dtype, out.weak_type) != want:
                wrong.append(f"{name}: np {a} array + {b} = {fmt(out.dtype, out.weak_type)}, "
                             f"expected {fmt(*want)}")
    return wrong


@pytest.mark.parametrize("x64", X64_MODES)
def test_numpy_array_operands_strong_results(x64):
    wrong = _check_numpy_array_operands(x64, weak_result=False)
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("x64", X64_MODES)
def test_numpy_array_operands_weak_results(x64):
    wrong = _check_numpy_array_operands(x64, weak_result=True)
    assert not wrong, "\n".join(wrong)


def test_promotion_keeps_values():
    set_x64(False)
    out = fnp.asarray(np.array([5], np.uint32)) + fnp.asarray(np.array([-7], np.int32))
    assert out.dtype == np.int32 and out.item() == -2  # uint32 + int32 -> int32 without x64
    out = fnp.asarray(np.array([3], np.int32)) + 0.5
    assert out.dtype == np.float32 and out.weak_type and out.item() == 3.5
    set_x64(True)
    out = fnp.asarray(np.array([2 ** 32 - 1], np.uint32)) + fnp.asarray(np.array([1], np.int32))
    assert out.dtype == np.int64 and out.item() == 2 ** 32  # int64: nothing wraps
    out = fnp.asarray(np.array([2 ** 53], np.uint64)) + fnp.asarray(np.array([1], np.int64))
    assert out.dtype == np.float64 and out.weak_type  # uint64 + int64 -> weak float64
    assert out.item() == float(2 ** 53)


# --- against JAX, live --------------------------------------------------------------------

def _jax_pair_result(jnp, a, b):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "int64 is not available" without x64
        out = jnp.ones(2, a) + jnp.ones(2, b)
    return np.dtype(out.dtype), bool(out.weak_type)


@requires_jax
@pytest.mark.parametrize("x64", X64_MODES)
def test_hard_coded_table_matches_jax(x64):
    import jax.numpy as jnp
    set_x64(x64)
    wrong = []
    for a, b in PAIRS:
        want = expected(a, b, x64)
        got = _jax_pair_result(jnp, a, b)
        if got != want:
            wrong.append(f"JAX: {a} + {b} = {fmt(*got)}, table says {fmt(*want)}")
    assert not wrong, "\n".join(wrong)


@requires_jax
@pytest.mark.parametrize("x64", X64_MODES)
def test_promote_types_matches_jax(x64):
    import jax.numpy as jnp
    set_x64(x64)
    wrong = []
    for a, b in PAIRS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # jnp.promote_types does not canonicalise its inputs; without x64,
            # fnp.promote_types does (as jnp.result_type does), so compare with that.
            want = jnp.promote_types(a, b) if x64 else jnp.result_type(a, b)
        got = fnp.promote_types(a, b)
        if np.dtype(got) != np.dtype(want):
            wrong.append(f"promote_types({a}, {b}): fusionjit {got}, JAX {want}")
    assert not wrong, "\n".join(wrong)


@requires_jax
@pytest.mark.parametrize("x64", X64_MODES)
def test_result_type_matches_jax(x64):
    import jax.numpy as jnp
    set_x64(x64)
    wrong = []
    for a, b in PAIRS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = jnp.result_type(a, b)
        if np.dtype(fnp.result_type(a, b)) != np.dtype(want):
            wrong.append(f"result_type({a}, {b}): fusionjit {fnp.result_type(a, b)}, JAX {want}")
    for s1 in PY_SCALARS.values():
        for s2 in list(PY_SCALARS.values()) + T:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = jnp.result_type(s1, s2)
            if np.dtype(fnp.result_type(s1, s2)) != np.dtype(want):
                wrong.append(f"result_type({s1!r}, {s2!r}): fusionjit "
                             f"{fnp.result_type(s1, s2)}, JAX {want}")
    assert not wrong, "\n".join(wrong)


@requires_jax
@pytest.mark.parametrize("x64", X64_MODES)
def test_add_matches_jax(x64):
    import jax
    import jax.numpy as jnp
    set_x64(x64)
    wrong = []
    for a, b in PAIRS:
        got = fnp.ones(2, a) + fnp.ones(2, b)
        want = _jax_pair_result(jnp, a, b)
        if (got.dtype, got.weak_type) != want:
            wrong.append(f"{a} + {b}: fusionjit {fmt(got.dtype, got.weak_type)}, JAX {fmt(*want)}")
    f, jf = fusionjit.jit(lambda p, q: p + q), jax.jit(lambda p, q: p + q)
    for a in T:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            jx = jnp.ones(2, a)
        x = fnp.ones(2, a)
        for s in PY_SCALARS.values():
            for got, want in ((x + s, jx + s), (s + x, s + jx), (f(x, s), jf(jx, s))):
                if (got.dtype, got.weak_type) != (want.dtype, want.weak_type):
                    wrong.append(f"{a} + {s!r}: fusionjit {fmt(got.dtype, got.weak_type)}, "
                                 f"JAX {fmt(want.dtype, want.weak_type)}")
    for s1 in PY_SCALARS.values():
        for s2 in PY_SCALARS.values():
            got, want = f(s1, s2), jf(s1, s2)
            if (got.dtype, got.weak_type) != (want.dtype, want.weak_type):
                wrong.append(f"{s1!r} + {s2!r}: fusionjit {fmt(got.dtype, got.weak_type)}, "
                             f"JAX {fmt(want.dtype, want.weak_type)}")
    assert not wrong, "\n".join(wrong)


@requires_jax
@pytest.mark.parametrize("x64,b", list(_numpy_scalar_cases()))
def test_numpy_scalars_match_jax(x64, b):
    import jax
    import jax.numpy as jnp
    set_x64(x64)
    s = np.dtype(b).type(1)
    f, jf = fusionjit.jit(lambda p, q: p + q), jax.jit(lambda p, q: p + q)
    wrong = []
    for a in T:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            jx = jnp.ones(2, a)
            pairs = [(fnp.ones(2, a) + s, jx + s), (f(fnp.ones(2, a), s), jf(jx, s))]
        for got, want in pairs:
            if (got.dtype, got.weak_type) != (want.dtype, want.weak_type):
                wrong.append(f"{a} + np.{b}: fusionjit {fmt(got.dtype, got.weak_type)}, "
                             f"JAX {fmt(want.dtype, want.weak_type)}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32"])
@pytest.mark.parametrize("x64", X64_MODES)
def test_sums_and_products_of_narrow_integers_are_promoted_as_jax(x64, dtype):
    set_x64(x64)
    # An image of uint8 pixels summed: in the default (unsigned) integer, not wrapped in
    # uint8 (a silent wrong answer before); promote_integers=False keeps the dtype.
    a = np.full((300,), 1 if dtype == "bool" else 100, dtype)
    wide = {"bool": "int", "int8": "int", "int16": "int", "int32": "int",
            "uint8": "uint", "uint16": "uint", "uint32": "uint"}[dtype]
    want = np.dtype(f"{wide}64" if x64 else f"{wide}32")
    for mode in ("eager", "jit"):
        f = fnp.sum if mode == "eager" else fusionjit.jit(fnp.sum)
        got = f(a)
        assert got.dtype == want, (mode, got.dtype)
        assert int(got) == a.astype(np.int64).sum()
    assert fnp.prod(a[:3]).dtype == want
    assert fnp.sum(a, promote_integers=False).dtype == (want if dtype == "bool" else a.dtype)
    assert fnp.sum(a.reshape(3, 100), axis=1, where=a.reshape(3, 100) > 0).dtype == want
    if HAVE_JAX:
        import jax.numpy as jnp
        assert fnp.sum(a).dtype == jnp.sum(a).dtype


def test_python_ints_out_of_a_narrow_types_range_as_jax():
    # int8_array + 200: the int is the default integer type's, wrapped into int8 (-56) as
    # JAX does; it raised OverflowError. Out of the default type's range it still raises.
    # An explicit dtype for a Python int out of range raises (array(300, int8) was 44);
    # full() converts as a cast (44), as JAX.
    set_x64(False)
    i8, u8 = np.array([1, 2], np.int8), np.array([1, 2], np.uint8)
    np.testing.assert_array_equal(fnp.asarray(i8) + 200, np.array([-55, -54], np.int8))
    np.testing.assert_array_equal(fusionjit.jit(lambda x: x + 200)(i8), [-55, -54])
    np.testing.assert_array_equal(300 + fnp.asarray(u8), np.array([45, 46], np.uint8))
    np.testing.assert_array_equal(fnp.asarray(u8) * 256, [0, 0])
    np.testing.assert_array_equal(fnp.array([1], fnp.uint32) + -1, [0])
    assert (fnp.asarray(i8) + 200).dtype == np.int8
    with pytest.raises(OverflowError, match="3000000000"):
        fnp.asarray(i8) - 3000000000
    with pytest.raises(OverflowError, match="out of bounds for int8"):
        fnp.array(300, dtype=fnp.int8)
    with pytest.raises(OverflowError, match="out of bounds for uint8"):
        fnp.array([1, 256], dtype=fnp.uint8)
    np.testing.assert_array_equal(fnp.full(3, 300, fnp.int8), [44, 44, 44])
    np.testing.assert_array_equal(fnp.full(2, -1, fnp.uint8), [255, 255])
    if HAVE_JAX:
        import jax.numpy as jnp
        np.testing.assert_array_equal(fnp.asarray(i8) + 200, jnp.asarray(i8) + 200)
        np.testing.assert_array_equal(fnp.full(3, 300, fnp.int8), jnp.full(3, 300, jnp.int8))


def test_scalar_types_convert_as_jax_and_stand_for_numpy_types():
    # fnp.float32 was NumPy's type: calling it on a tracer failed, and scalars computed
    # with NumPy's promotion (uint8(3) * 2.0 in float64). Hunt 6.
    assert fnp.float32(3).dtype == np.float32 and isinstance(fnp.float32(3), fusionjit.Array)
    assert (fnp.uint8(3) * 2.0).dtype == np.float32
    assert (fnp.bfloat16(1.5) * 1.0).dtype == fnp.bfloat16
    out = fusionjit.jit(lambda done, x: fnp.float32(done) * x + fnp.int32(x > 1))(True, 2.0)
    assert float(out) == 3.0
    # as dtypes: NumPy's
    assert np.dtype(fnp.float32) == np.float32 and fnp.float32 == np.float32
    assert {np.int8: "i8"}[fnp.int8] == "i8" and isinstance(np.float16(1), fnp.float16)
    assert np.issubdtype(fnp.float32, np.floating) and fnp.issubdtype(fnp.uint16, fnp.integer)
    assert fnp.zeros(2, fnp.bfloat16).dtype == fnp.bfloat16
    assert np.zeros(2, fnp.int16).dtype == np.int16 and fnp.iinfo(fnp.int8).max == 127


# --- inexact results of integers ----------------------------------------------------------

@pytest.mark.parametrize("x64", X64_MODES)
def test_integers_become_the_float_of_their_width_as_jax(x64):
    # JAX makes bools and integers of up to 32 bits float32 and 64-bit ones float64, x64 or
    # not (an int32 mean is float32 with x64); fusionjit made them all the default float.
    set_x64(x64)
    ops = {"divide": lambda m, a: m.asarray(a) / m.asarray(a), "mean": lambda m, a: m.mean(a),
           "sqrt": lambda m, a: m.sqrt(a), "var": lambda m, a: m.var(a),
           "arctan2": lambda m, a: m.arctan2(a, a), "median": lambda m, a: m.median(a),
           "interp": lambda m, a: m.interp(a, a, a)}
    dtypes = [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.bool_, np.float16]
    if x64:
        dtypes += [np.int64, np.uint64]
    for d in dtypes:
        a = np.arange(1, 4).astype(d)
        want = np.float64 if np.dtype(d).itemsize == 8 else d if d == np.float16 else np.float32
        for name, f in ops.items():
            assert np.asarray(f(fnp, a)).dtype == want, (name, d)
        pmean = fusionjit.vmap(lambda v: fusionjit.lax.pmean(v, "i"), axis_name="i")(a)
        assert np.asarray(pmean).dtype == want, ("pmean", d)
    # A bool and a Python int make the default int: its float.
    assert np.asarray(fnp.asarray([True]) / 2).dtype == (np.float64 if x64 else np.float32)
