"""fusionjit.random: JAX-compatible threefry2x32 random numbers with explicit keys.

Streams are bit-exact with JAX's for keys, split, fold_in, bits, uniform, bernoulli,
rademacher, randint, choice and permutation, in both of JAX's modes
(``jax_threefry_partitionable`` True, JAX's default since 0.5.0, and False, the mode of the
paper's era), selected by ``fusionjit.config.update("fusionjit_threefry_partitionable",
...)``. ``normal``, ``categorical``, ``gumbel``, ``exponential``, ``laplace`` and
``logistic`` go through float functions (erf_inv, log, log1p) and agree with JAX to a few
ulp of those functions (``normal``: 99% of float32 values bit-exact, the rest within 3 ulp;
the log-based ones about 96%). Like XLA's CPU and
GPU backends, ``uniform``'s scale-and-shift and erf_inv's polynomial round once (``lax.fma``):
without that, uniform(minval, maxval) differs from JAX by an ulp in some values.

threefry2x32 is a primitive with two lowerings (``fusionjit_threefry_lowering``): "fused",
20 rounds of plain 32-bit integer ops that fuse with their producers and consumers, and
"custom_call", an opaque kernel and fusion barrier, as XLA's cuda_threefry2x32 was.
"""

from __future__ import annotations

import contextlib
import math
from typing import Sequence

import numpy as np

from fusionjit._src import core
from fusionjit._src import dtypes as dt
from fusionjit._src.config import config
from fusionjit._src.lax import lax
from fusionjit._src.lax.slicing import take_along
from fusionjit._src.lax.sorting import top_k
from fusionjit._src.lowering import register
from fusionjit._src.numpy import reductions, shapes, ufuncs
from fusionjit._src.numpy.util import aval, fail, shape_arg, to_array
from fusionjit._src.eager import eager_jit
from fusionjit._src.special import erf_inv as _erf_inv

U32 = np.dtype(np.uint32)


# --- the threefry2x32 primitive -------------------------------------------------------

threefry2x32_p = core.Primitive("threefry2x32", multiple_results=True)


@threefry2x32_p.def_abstract_eval
def _threefry_abstract_eval(k0, k1, x0, x1):
    for a in (k0, k1, x0, x1):
        if a.dtype != U32 or a.shape != x0.shape:
            fail(f"threefry2x32 needs uint32 operands of one shape, got {a.str_short()}")
    out = core.ShapedArray(x0.shape, U32, False)
    return [out, out]


_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


@register(threefry2x32_p)
def _threefry_lower(ctx, avals_in, avals_out, k0, k1, x0, x1):
    shape = avals_out[0].shape
    if config.fusionjit_threefry_lowering == "custom_call":
        return ctx.computation.custom_call("threefry2x32", [k0, k1, x0, x1],
                                           [("u32", list(shape))] * 2, ctx.source)

    def const(v):
        return ctx.op("broadcast", [ctx.scalar(np.uint32(v), U32)], dtype=U32, dims=shape,
                      dimensions=[])

    def rotl(x, r):
        return ctx.op("or", [ctx.op("shift-left", [x, const(r)]),
                             ctx.op("shift-right-logical", [x, const(32 - r)])])

    ks = [k0, k1, ctx.op("xor", [ctx.op("xor", [k0, k1]), const(0x1BD11BDA)])]
    x0 = ctx.op("add", [x0, ks[0]])
    x1 = ctx.op("add", [x1, ks[1]])
    for block in range(5):
        for r in _ROTATIONS[block % 2]:
            x0 = ctx.op("add", [x0, x1])
            x1 = ctx.op("xor", [rotl(x1, r), x0])
        x0 = ctx.op("add", [x0, ks[(block + 1) % 3]])
        x1 = ctx.op("add", [x1, ctx.op("add", [ks[(block + 2) % 3], const(block + 1)])])
    return [x0, x1]


def threefry2x32(k0, k1, x0, x1):
    """The Threefry-2x32 block function (20 rounds) on uint32 arrays, broadcast together."""
    args = [to_array(a, U32) for a in (k0, k1, x0, x1)]
    shape = np.broadcast_shapes(*(aval(a).shape for a in args))
    args = [shapes.broadcast_to(a, shape) for a in args]
    return threefry2x32_p.bind(*args)


# --- sort_key_val (for permutations) --------------------------------------------------

sort_key_val_p = core.Primitive("sort_key_val", multiple_results=True)


@sort_key_val_p.def_abstract_eval
def _sort_abstract_eval(keys, values):
    if keys.dtype != U32 or keys.shape != values.shape or keys.ndim != 2:
        fail("sort_key_val needs uint32 keys and values of one 2-D shape")
    return [keys, values]


@register(sort_key_val_p)
def _sort_lower(ctx, avals_in, avals_out, keys, values):
    n = avals_in[0].shape[1]
    d = avals_in[1].dtype
    width = np.dtype(d).itemsize
    count = ctx.scalar(np.int64(n), np.dtype(np.int64)) if dt.x64_enabled() else \
        ctx.computation.constant(np.asarray(n, np.int64))
    return ctx.computation.custom_call(
        f"sort_key_val.{width}", [keys, values, count],
        [("u32", list(avals_in[0].shape)), (dt.ir_name(d), list(avals_in[1].shape))], ctx.source)


def sort_key_val(keys, values, axis: int = -1):
    """Stable sort of ``values`` by uint32 ``keys`` along ``axis`` (JAX's is_stable=True)."""
    keys, values = to_array(keys, U32), to_array(values)
    ndim = aval(keys).ndim
    axis = axis % ndim
    perm = [d for d in range(ndim) if d != axis] + [axis]
    kt, vt = lax.transpose(keys, perm), lax.transpose(values, perm)
    moved = aval(kt).shape
    rows = int(np.prod(moved[:-1], dtype=np.int64))
    k2 = lax.reshape(kt, (rows, moved[-1]))
    v2 = lax.reshape(vt, (rows, moved[-1]))
    sk, sv = sort_key_val_p.bind(k2, v2)
    inverse = [perm.index(d) for d in range(ndim)]
    return (lax.transpose(lax.reshape(sk, moved), inverse),
            lax.transpose(lax.reshape(sv, moved), inverse))


# --- keys -----------------------------------------------------------------------------

class PRNGKeyArray:
    """Typed keys (``fusionjit.random.key``): an array of threefry2x32 keys, each two
    uint32 words. A pytree node, so keys pass through jit like arrays."""

    __slots__ = ("_data",)

    def __init__(self, data):
        self._data = data

    @property
    def shape(self) -> tuple:
        return tuple(self._data.shape[:-1])

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> str:
        return "key<fry>"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of an unbatched key")
        return self.shape[0]

    def __getitem__(self, index):
        if not isinstance(index, tuple):
            index = (index,)
        return PRNGKeyArray(self._data[index + (slice(None),)])

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"Array({self.shape}, dtype=key<fry>) overlaying:\n{self._data!r}"


def map_key_data(fn, *operands):
    """``fn`` applied to the operands with each typed key array replaced by its data (its
    words in a trailing dimension of 2), as a typed key array: where, select, stack and
    concatenate of keys (auto-resetting environments keep ``where(done, new_key, key)``)."""
    return PRNGKeyArray(fn(*[x._data if isinstance(x, PRNGKeyArray) else x for x in operands]))


def any_key(*xs) -> bool:
    return any(isinstance(x, PRNGKeyArray) for x in xs)


def _flatten_key(k):
    return [k._data], None


def _unflatten_key(aux, children):
    return PRNGKeyArray(children[0])


def _register():
    from fusionjit import tree_util
    tree_util.register_pytree_node(PRNGKeyArray, _flatten_key, _unflatten_key)


_register()


def _seed_words(seed):
    """(hi, lo) uint32 words of a seed, as JAX: the seed is canonicalised (int32 without
    x64, so only its low 32 bits survive) and split into its high and low words."""
    if isinstance(seed, (bool, np.bool_)):
        fail("a PRNG seed must be an integer, not a boolean")
    if isinstance(seed, (float, np.floating)):
        fail(f"a PRNG seed must be an integer, got the float {seed!r}")
    if isinstance(seed, (int, np.integer)):
        s = int(seed)
        if not -(2**63) <= s < 2**64:
            fail(f"seed {s} does not fit in 64 bits", OverflowError)
        if dt.x64_enabled():
            s &= (1 << 64) - 1
            return np.uint32(s >> 32), np.uint32(s & 0xFFFFFFFF)
        return np.uint32(0), np.uint32(s & 0xFFFFFFFF)
    seed = to_array(seed)
    a = aval(seed)
    if not dt.is_int(a.dtype) or a.shape != ():
        fail(f"a PRNG seed must be an integer scalar, got {a.str_short()} "
             f"(floats and arrays are not valid seeds)")
    if a.dtype.itemsize == 8:
        hi = lax.convert_element_type(lax.shift_right_logical(
            seed, to_array(32, a.dtype, False)), U32)
    else:
        hi = to_array(0, U32, False)
    return hi, lax.convert_element_type(seed, U32)


def PRNGKey(seed) -> core.Tracer:  # noqa: N802 (JAX's name)
    """A legacy key: a uint32[2] array."""
    hi, lo = _seed_words(seed)
    return shapes.stack([to_array(hi, U32), to_array(lo, U32)])


def key(seed) -> PRNGKeyArray:
    """A typed key (``key<fry>``) from an integer seed."""
    return PRNGKeyArray(PRNGKey(seed))


def key_data(keys):
    """The uint32 words of typed keys (``(..., 2)``); raw keys are returned as they are."""
    if isinstance(keys, PRNGKeyArray):
        return keys._data
    return keys


def wrap_key_data(data) -> PRNGKeyArray:
    return PRNGKeyArray(to_array(data, U32))


_BATCHED_KEYS = [0]  # > 0 while fusionjit's own code draws with a batch of raw keys


@contextlib.contextmanager
def batched_keys():
    """Within it, the functions below take a batch of raw keys (batch + (2,)) and draw for
    each key: fusionjit's own samplers (gamma's lanes, each with its key) use that."""
    _BATCHED_KEYS[0] += 1
    try:
        yield
    finally:
        _BATCHED_KEYS[0] -= 1


def _key(name: str, k):
    """(raw key data of shape (2,), typed?) of a single key: as in JAX, the API draws with
    one key; a batch of keys goes through vmap, where each draw sees one key. (A batch
    passed as it is would combine every key with every row of the other arguments:
    categorical(keys, logits) would draw each environment's logits with every key.)"""
    typed = isinstance(k, PRNGKeyArray)
    if typed:
        data = k._data
    else:
        if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            fail(f"{name}() needs a PRNG key, got the integer {k}; make one with "
                  f"fusionjit.random.key({k})")
        data = to_array(k)
        a = aval(data)
        if a.dtype != U32 or not a.shape or a.shape[-1] != 2:
            fail(f"{name}() needs a PRNG key (a typed key, or uint32 words of shape (2,)), "
                  f"got {a.str_short()}")
    batch = aval(data).shape[:-1]
    if batch and not _BATCHED_KEYS[0]:
        shape = batch if typed else batch + (2,)
        fail(f"{name}() accepts a single key, but was given a key array of shape {shape}; "
             f"use fusionjit.vmap for a batch of keys (vmap(lambda k: {name}(k, ...))(keys))",
             ValueError)
    return data, typed


def _words(data):
    """The two words of each key: data[..., 0], data[..., 1]."""
    return data[..., 0], data[..., 1]


def _tf(k0, k1, x0, x1):
    """threefry2x32 with key words broadcast over the counters (batch dims first)."""
    return threefry2x32(k0, k1, x0, x1)


def _partitionable() -> bool:
    return bool(config.fusionjit_threefry_partitionable)


def _batch_expand(word, batch_ndim: int, shape: tuple):
    """A per-key word shaped batch + (1,)*len(shape), to broadcast against counters."""
    return lax.reshape(word, tuple(aval(word).shape) + (1,) * len(shape))


def _counters(shape: tuple):
    """Row-major flat index of every element of `shape`, as (hi, lo) uint32 words."""
    n = int(np.prod(shape, dtype=np.int64))
    if n >= 2**32:
        fail(f"cannot draw more than 2**32 - 1 random values at once (shape {shape})",
              ValueError)
    if not shape:
        return to_array(0, U32, False), to_array(0, U32, False)
    flat = lax.iota(U32, n)
    return lax.full(shape, 0, U32), lax.reshape(flat, shape)


def _hash_pairs(data, counts):
    """JAX's threefry_2x32(key, counts): pairs the first half of the (even-padded) flat
    counts with the second half and returns [all y0, all y1], truncated to len(counts)."""
    k0, k1 = _words(data)
    n = aval(counts).shape[-1]
    batch = aval(k0).shape
    if n % 2:
        counts = lax.concatenate([counts, lax.full(batch + (1,), 0, U32)], len(batch))
    m = (n + 1) // 2
    x0 = lax.slice_in_dim(counts, 0, m, axis=len(batch))
    x1 = lax.slice_in_dim(counts, m, 2 * m, axis=len(batch))
    y0, y1 = _tf(_batch_expand(k0, len(batch), (m,)), _batch_expand(k1, len(batch), (m,)), x0, x1)
    out = lax.concatenate([y0, y1], len(batch))
    return lax.slice_in_dim(out, 0, n, axis=len(batch))


def _partitionable_blocks(data, shape: tuple):
    """Partitionable mode: threefry of each key with the element's 64-bit index (hi, lo)."""
    k0, k1 = _words(data)
    batch = aval(k0).shape
    hi, lo = _counters(shape)
    if batch:
        dims = tuple(range(len(batch), len(batch) + len(shape)))
        hi = lax.broadcast_in_dim(to_array(hi), batch + shape, dims)
        lo = lax.broadcast_in_dim(to_array(lo), batch + shape, dims)
    return _tf(_batch_expand(k0, len(batch), shape), _batch_expand(k1, len(batch), shape), hi, lo)


def _random_bits32(data, shape: tuple):
    """32 random bits per element of `shape`, for each key in `data` (batch + (2,))."""
    if _partitionable():
        return lax.bitwise_xor(*_partitionable_blocks(data, shape))
    batch = aval(data).shape[:-1]
    n = int(np.prod(shape, dtype=np.int64))
    counts = lax.iota(U32, n)
    if batch:
        counts = lax.broadcast_in_dim(counts, batch + (n,), (len(batch),))
    bits = _hash_pairs(data, counts)
    return lax.reshape(bits, batch + shape)


def _random_bits64(data, shape: tuple):
    batch = aval(data).shape[:-1]
    u64 = np.dtype(np.uint64)
    if _partitionable():
        y0, y1 = _partitionable_blocks(data, shape)
    else:
        n = int(np.prod(shape, dtype=np.int64))
        counts = lax.iota(U32, 2 * n)
        if batch:
            counts = lax.broadcast_in_dim(counts, batch + (2 * n,), (len(batch),))
        words = _hash_pairs(data, counts)
        y0 = lax.reshape(lax.slice_in_dim(words, 0, n, axis=len(batch)), batch + shape)
        y1 = lax.reshape(lax.slice_in_dim(words, n, 2 * n, axis=len(batch)), batch + shape)
    y0 = lax.convert_element_type(y0, u64)
    y1 = lax.convert_element_type(y1, u64)
    return lax.bitwise_or(lax.shift_left(y0, to_array(32, u64, False)), y1)


def _random_bits_narrow(data, shape: tuple, width: int):
    """8 or 16 random bits per element, as JAX: partitionable, the low bits of the 32-bit
    draw; otherwise each 32-bit word of ceil(width * n / 32) split into 32 / width parts,
    lowest bits first (``bits.view(uint8/uint16)``)."""
    d = np.dtype(f"uint{width}")
    if _partitionable():
        return lax.convert_element_type(_random_bits32(data, shape), d)
    batch = aval(data).shape[:-1]
    n = int(np.prod(shape, dtype=np.int64))
    parts = 32 // width
    words = -(-n * width // 32)
    counts = lax.iota(U32, words)
    if batch:
        counts = lax.broadcast_in_dim(counts, batch + (words,), (len(batch),))
    w = _hash_pairs(data, counts)
    mask = to_array(np.iinfo(d).max, U32, False)
    pieces = [lax.bitwise_and(lax.shift_right_logical(w, to_array(width * i, U32, False)), mask)
              for i in range(parts)]
    flat = lax.reshape(shapes.stack(pieces, axis=-1), batch + (words * parts,))
    flat = lax.slice_in_dim(flat, 0, n, axis=len(batch))
    return lax.reshape(lax.convert_element_type(flat, d), batch + shape)


def _rewrap(data, typed: bool):
    return PRNGKeyArray(data) if typed else data


# --- the API ---------------------------------------------------------------------------

@eager_jit("num")
def split(key, num: int | Sequence[int] = 2):
    """New keys, derived from `key`: `num` of them, or an array of keys of shape `num`."""
    data, typed = _key("split", key)
    shape = shape_arg(num, "split")
    k0, k1 = _words(data)
    batch = aval(k0).shape
    n = int(np.prod(shape, dtype=np.int64))
    if _partitionable():
        hi, lo = _counters(shape)
        if batch:
            dims = tuple(range(len(batch), len(batch) + len(shape)))
            hi = lax.broadcast_in_dim(to_array(hi), batch + shape, dims)
            lo = lax.broadcast_in_dim(to_array(lo), batch + shape, dims)
        y0, y1 = _tf(_batch_expand(k0, len(batch), shape), _batch_expand(k1, len(batch), shape),
                     hi, lo)
        out = shapes.stack([to_array(y0), to_array(y1)], axis=-1)
    else:
        counts = lax.iota(U32, 2 * n)
        if batch:
            counts = lax.broadcast_in_dim(counts, batch + (2 * n,), (len(batch),))
        out = lax.reshape(_hash_pairs(data, counts), batch + shape + (2,))
    return _rewrap(out, typed)


@eager_jit(uint32=("data",))
def fold_in(key, data):
    """A new key from `key` and an integer (or uint32 array of) `data`."""
    kd, typed = _key("fold_in", key)
    if isinstance(data, (int, np.integer)) and not isinstance(data, (bool, np.bool_)):
        # As JAX: a Python int is taken as a uint32 (all of [0, 2**32)).
        if not 0 <= int(data) < 2 ** 32:
            fail(f"fold_in(): data {int(data)} is out of bounds for uint32", OverflowError)
        data = np.uint32(data)
    d = to_array(data)
    if not dt.is_int(aval(d).dtype):
        fail(f"fold_in() needs integer data, got {aval(d).dtype}")
    d = lax.convert_element_type(d, U32)
    k0, k1 = _words(kd)
    y0, y1 = _tf(k0, k1, lax.full(aval(d).shape, 0, U32), d)
    return _rewrap(shapes.stack([to_array(y0), to_array(y1)], axis=-1), typed)


@eager_jit("shape", "dtype")
def bits(key, shape=(), dtype=None):
    """Random bits of an unsigned integer dtype (uint32 by default)."""
    data, _ = _key("bits", key)
    shape = shape_arg(shape, "bits")
    d = np.dtype(np.uint32) if dtype is None else np.dtype(dtype)
    if d in (np.dtype(np.uint8), np.dtype(np.uint16)):
        return _random_bits_narrow(data, shape, 8 * d.itemsize)
    if d not in (np.dtype(np.uint32), np.dtype(np.uint64)):
        fail(f"bits() supports uint8, uint16, uint32 and uint64 (uint64 with x64), got {d}")
    if d == np.dtype(np.uint64):
        if not dt.x64_enabled():
            fail("64-bit random bits need fusionjit_enable_x64")
        return _random_bits64(data, shape)
    return _random_bits32(data, shape)


def _float_dtype(name: str, dtype):
    d = dt.default_float() if dtype is None else dt.canonicalize(dtype)
    if not dt.is_float(d):
        fail(f"{name}(): dtype must be a float dtype, got {d}", ValueError)
    return d


@eager_jit("shape", "dtype")
def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform floats in [minval, maxval): 23 (52) random mantissa bits, as JAX."""
    data, _ = _key("uniform", key)
    shape = shape_arg(shape, "uniform")
    d = _float_dtype("uniform", dtype)
    batch = aval(data).shape[:-1]
    out_shape = batch + shape
    minval = (to_array(minval, d, False) if not _is_value(minval)
              else lax.convert_element_type(minval, d))
    maxval = (to_array(maxval, d, False) if not _is_value(maxval)
              else lax.convert_element_type(maxval, d))
    minval = shapes.broadcast_to(minval, out_shape)
    maxval = shapes.broadcast_to(maxval, out_shape)
    if d == dt.float64:
        u = _random_bits64(data, shape)
        udt, nbits, nmant = np.dtype(np.uint64), 64, 52
        one = np.array(1.0, np.float64).view(np.uint64)
    elif dt.is_low_precision(d):
        # JAX draws at least 8 bits more than the mantissa's: 16 for float16, 8 for bfloat16.
        udt, nmant = np.dtype(np.uint16), 10 if d == dt.float16 else 7
        rng_bits = 16 if nmant >= 8 else 8
        u = lax.convert_element_type(_random_bits_narrow(data, shape, rng_bits), udt)
        one = np.array(1.0, d).view(np.uint16)
        shift = to_array(rng_bits - nmant, udt, False)
        float_bits = lax.bitwise_or(lax.shift_right_logical(u, shift), to_array(one, udt, False))
        floats = lax.sub(lax.bitcast_convert_type(float_bits, d), to_array(1.0, d, False))
        # Rounded after the multiply and after the add, as XLA computes 16-bit floats.
        return lax.max(minval, lax.add(lax.mul(floats, lax.sub(maxval, minval)), minval))
    else:
        u = _random_bits32(data, shape)
        udt, nbits, nmant, one = U32, 32, 23, np.array(1.0, np.float32).view(np.uint32)
    float_bits = lax.bitwise_or(lax.shift_right_logical(u, to_array(nbits - nmant, udt, False)),
                                to_array(one, udt, False))
    floats = lax.sub(lax.bitcast_convert_type(float_bits, d), to_array(1.0, d, False))
    # XLA's CPU and GPU backends contract this multiply-add to an fma; so do we, to match JAX.
    return lax.max(minval, lax.fma(floats, lax.sub(maxval, minval), minval))


def _is_value(x) -> bool:
    return isinstance(x, core.Tracer) or core.is_concrete_array(x)


@eager_jit("shape")
def bernoulli(key, p=0.5, shape=None):
    """True with probability `p` (uniform(key, shape, dtype(p)) < p)."""
    p = to_array(p)
    if not dt.is_float(aval(p).dtype):
        fail(f"bernoulli(): p must have a float dtype, got {aval(p).dtype}")
    shape = aval(p).shape if shape is None else shape_arg(shape, "bernoulli")
    u = uniform(key, shape, aval(p).dtype)
    return lax.lt(u, shapes.broadcast_to(lax.convert_element_type(p, aval(p).dtype), aval(u).shape))


@eager_jit("shape", "dtype")
def randint(key, shape, minval, maxval, dtype=None):
    """Uniform integers in [minval, maxval), as JAX: 64 random bits per value reduced
    modulo the span (biased for spans that are not powers of two, like JAX's)."""
    data, _ = _key("randint", key)
    shape = shape_arg(shape, "randint")
    d = dt.default_int() if dtype is None else dt.canonicalize(dtype)
    if not dt.is_int(d):
        fail(f"randint(): dtype must be an integer dtype, got {d}")
    if d.itemsize < 4:
        # As JAX: 8- and 16-bit values are drawn as int32 in the dtype's range, then cast.
        info, i32 = np.iinfo(d), np.dtype(np.int32)

        def bound(v, hi):
            v = lax.convert_element_type(to_array(v), i32)
            return lax.clamp(to_array(int(info.min), i32, False), v, to_array(hi, i32, False))
        wide = randint(key, shape, bound(minval, int(info.max)), bound(maxval, int(info.max) + 1),
                       i32)
        return lax.convert_element_type(wide, d)
    batch = aval(data).shape[:-1]
    out_shape = batch + shape
    # Float bounds are truncated to the default integer type, as JAX's (a float maxval
    # failed on NumPy's iinfo of a float dtype).
    minval, maxval = (v if dt.is_int(aval(v).dtype) else
                      lax.convert_element_type(v, dt.default_int())
                      for v in (to_array(minval), to_array(maxval)))
    info = np.iinfo(d)

    def clip_to(v):
        v = to_array(v)
        vd = aval(v).dtype
        if not dt.is_int(vd):
            v = lax.convert_element_type(v, dt.default_int())
            vd = aval(v).dtype
        lo = max(int(info.min), int(np.iinfo(vd).min))
        hi = min(int(info.max), int(np.iinfo(vd).max))
        v = lax.clamp(to_array(lo, vd, False), v, to_array(hi, vd, False))
        return lax.convert_element_type(v, d)

    max_out_of_range = lax.gt(
        maxval, to_array(min(int(info.max), int(np.iinfo(aval(maxval).dtype).max)),
                         aval(maxval).dtype, False))
    lo_v = shapes.broadcast_to(clip_to(minval), out_shape)
    hi_v = shapes.broadcast_to(clip_to(maxval), out_shape)
    max_out_of_range = shapes.broadcast_to(max_out_of_range, out_shape)
    k1, k2 = split(data)[..., 0, :], split(data)[..., 1, :]
    # As JAX: twice the dtype's bits per value, reduced modulo the span in the unsigned type
    # of the dtype's width.
    nbits = 8 * d.itemsize
    unsigned = np.dtype(f"uint{nbits}")
    draw = _random_bits64 if nbits == 64 else _random_bits32
    higher, lower = draw(k1, shape), draw(k2, shape)
    span = lax.convert_element_type(lax.sub(hi_v, lo_v), unsigned)
    one = lax.full(out_shape, 1, unsigned)
    span = lax.select(lax.le(hi_v, lo_v), one, span)
    span = lax.select(lax.bitwise_and(max_out_of_range, lax.gt(hi_v, lo_v)), lax.add(span, one),
                      span)
    mult = lax.rem(lax.full(out_shape, 1 << (nbits // 2), unsigned), span)
    mult = lax.rem(lax.mul(mult, mult), span)
    offset = lax.add(lax.mul(lax.rem(higher, span), mult), lax.rem(lower, span))
    offset = lax.rem(offset, span)
    return lax.add(lo_v, lax.convert_element_type(offset, d))


@eager_jit("shape", "dtype")
def normal(key, shape=(), dtype=None):
    """Standard normal floats: sqrt(2) * erf_inv(u) for u uniform in (-1, 1), as JAX."""
    d = _float_dtype("normal", dtype)
    lo = np.nextafter(np.array(-1.0, d), np.array(0.0, d))
    u = uniform(key, shape, d, lo, 1.0)
    if dt.is_low_precision(d):
        # XLA computes erf_inv of 16-bit floats in float32 and rounds the result once.
        e = lax.convert_element_type(_erf_inv(lax.convert_element_type(u, dt.float32)), d)
    else:
        e = _erf_inv(u)
    return lax.mul(to_array(np.sqrt(2.0), d, False), e)


@eager_jit("shape", "dtype")
def gumbel(key, shape=(), dtype=None):
    d = _float_dtype("gumbel", dtype)
    u = uniform(key, shape, d, float(dt.finfo(d).tiny), 1.0)
    return ufuncs.negative(ufuncs.log(ufuncs.negative(ufuncs.log(u))))


@eager_jit("shape", "dtype")
def exponential(key, shape=(), dtype=None):
    """Exponential(1) floats: -log1p(-u) for u uniform in [0, 1), as JAX."""
    d = _float_dtype("exponential", dtype)
    u = uniform(key, shape, d)
    return ufuncs.negative(ufuncs.log1p(ufuncs.negative(u)))


@eager_jit("shape", "dtype")
def laplace(key, shape=(), dtype=None):
    """Laplace(0, 1) floats: sign(u) * log1p(-|u|) for u uniform in (-1, 1), as JAX."""
    d = _float_dtype("laplace", dtype)
    u = uniform(key, shape, d, -1.0 + float(dt.finfo(d).epsneg), 1.0)
    return ufuncs.multiply(ufuncs.sign(u), ufuncs.log1p(ufuncs.negative(ufuncs.absolute(u))))


@eager_jit("shape", "dtype")
def logistic(key, shape=(), dtype=None):
    """Standard logistic floats: log(x) - log1p(-x) for x uniform in (0, 1), as JAX."""
    d = _float_dtype("logistic", dtype)
    x = uniform(key, shape, d, float(dt.finfo(d).tiny), 1.0)
    return ufuncs.subtract(ufuncs.log(x), ufuncs.log1p(ufuncs.negative(x)))


@eager_jit("shape", "dtype")
def rademacher(key, shape=(), dtype=None):
    """-1 or 1 with equal probability (integers by default): 2 * bernoulli(0.5) - 1, as
    JAX, bit for bit."""
    d = dt.default_int() if dtype is None else dt.canonicalize(dtype)
    b = lax.convert_element_type(bernoulli(key, 0.5, shape), d)
    return lax.sub(lax.mul(to_array(2, d, False), b), to_array(1, d, False))


@eager_jit("axis", "shape", "replace")
def categorical(key, logits, axis: int = -1, shape=None, replace: bool = True):
    """Samples of category indices with log-probabilities `logits`: the Gumbel-max trick, or
    without replacement the Gumbel top-k trick (`shape`'s leading part is then the number of
    draws per distribution), as JAX, bit for bit. `shape` ends with a shape the logits'
    batch shape broadcasts to."""
    logits = to_array(logits)
    lshape = aval(logits).shape
    if not dt.is_float(aval(logits).dtype):
        logits = lax.convert_element_type(logits, dt.default_float())
    axis = axis % len(lshape) if lshape else 0
    batch_shape = tuple(d for i, d in enumerate(lshape) if i != axis)
    shape = batch_shape if shape is None else shape_arg(shape, "categorical")
    try:
        broadcast = np.broadcast_shapes(shape, batch_shape)
    except ValueError:
        broadcast = None
    if broadcast != shape:
        fail(f"categorical(): the logits' batch shape {batch_shape} must broadcast to shape "
             f"{shape}", ValueError)
    prefix = shape[:len(shape) - len(batch_shape)]
    neg_axis = axis - len(lshape)
    if not replace:
        k = int(np.prod(prefix, dtype=np.int64))
        if k > lshape[axis]:
            fail(f"categorical(): the number of samples without replacement ({k}) cannot "
                 f"exceed the number of categories ({lshape[axis]})", ValueError)
        if shape != prefix + batch_shape:
            fail(f"categorical(replace=False): shape {shape} must end with the logits' batch "
                 f"shape {batch_shape}", ValueError)
        g = ufuncs.add(logits, gumbel(key, lshape, aval(logits).dtype))
        _, indices = top_k(shapes.moveaxis(g, axis, -1), k)      # batch_shape + (k,)
        rank = len(aval(indices).shape)
        return lax.reshape(lax.transpose(indices, (rank - 1,) + tuple(range(rank - 1))), shape)
    lg_shape = list(shape[len(shape) - len(batch_shape):])
    lg_shape.insert(axis, lshape[axis])
    g = gumbel(key, prefix + tuple(lg_shape), aval(logits).dtype)
    expanded = lax.reshape(logits, (1,) * len(prefix) + lshape)
    return reductions.argmax(ufuncs.add(g, expanded), axis=neg_axis)


def _take(a, idx, axis: int):
    """a[idx] along `axis` for an integer idx array of any shape (in range), by a gather."""
    a, idx = to_array(a), to_array(idx)
    shape, ishape = aval(a).shape, aval(idx).shape
    flat = take_along(a, lax.reshape(idx, (int(np.prod(ishape, dtype=np.int64)),)), axis)
    return lax.reshape(flat, shape[:axis] + ishape + shape[axis + 1:])


def _shuffle(data, x, axis: int):
    x = to_array(x)
    size = aval(x).size
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        keys = split(data)
        data, sub = keys[..., 0, :], keys[..., 1, :]
        sort_keys = _random_bits32(sub, aval(x).shape)
        _, x = sort_key_val(sort_keys, x, axis)
    return x


@eager_jit("axis", "independent", static_if_int=("x",))
def permutation(key, x, axis: int = 0, independent: bool = False):
    """A random permutation of range(x) (an int) or of `x` along `axis`."""
    data, _ = _key("permutation", key)
    if aval(data).shape != (2,):
        fail("permutation() takes a single key")
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return _shuffle(data, shapes.arange(int(x)), 0)
    x = to_array(x)
    if aval(x).ndim == 0:
        fail("permutation(): x must be an integer or at least 1-dimensional")
    axis = axis % aval(x).ndim
    if independent or aval(x).ndim == 1:
        return _shuffle(data, x, axis)
    ind = _shuffle(data, shapes.arange(aval(x).shape[axis]), 0)
    return _take(x, ind, axis)


@eager_jit("shape", "replace", "axis", static_if_int=("a",))
def choice(key, a, shape=(), replace: bool = True, p=None, axis: int = 0):
    """Random samples from `a` (an int n: range(n); or an array along `axis`)."""
    data, _ = _key("choice", key)
    shape = shape_arg(shape, "choice")
    if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
        n_inputs, arr = int(a), None
    else:
        arr = to_array(a)
        if aval(arr).ndim == 0:
            n_inputs, arr = int(arr.item()) if core.is_concrete_array(arr) else fail(
                "choice(): a traced scalar `a` must be concrete"), None
        else:
            axis = axis % aval(arr).ndim
            n_inputs = aval(arr).shape[axis]
    n_draws = int(np.prod(shape, dtype=np.int64))
    out_dtype = dt.default_int() if arr is None else aval(arr).dtype
    if n_draws == 0:
        return shapes.zeros(shape, out_dtype)
    if n_inputs <= 0:
        fail("choice(): a must be greater than 0 unless no samples are taken", ValueError)
    if not replace and n_draws > n_inputs:
        fail(f"choice(): cannot take a larger sample (size {n_draws}) than population "
              f"(size {n_inputs}) when replace=False", ValueError)
    if p is None:
        if replace:
            ind = randint(data, shape, 0, n_inputs)
        else:
            ind = lax.slice_in_dim(permutation(data, n_inputs), 0, n_draws)
            if arr is not None and aval(arr).ndim:
                perm = permutation(data, arr, axis)
                return lax.reshape(lax.slice_in_dim(perm, 0, n_draws, axis=axis),
                                   aval(arr).shape[:axis] + shape + aval(arr).shape[axis + 1:])
    else:
        p = to_array(p)
        if not dt.is_float(aval(p).dtype):
            p = lax.convert_element_type(p, dt.default_float())
        if aval(p).shape != (n_inputs,):
            fail(f"choice(): p must be None or a 1D vector with the same size as a.shape[axis]; "
                  f"p has shape {aval(p).shape} and a.shape[axis] is {n_inputs}", ValueError)
        if not replace:
            # The Gumbel top-k trick, as JAX.
            g = ufuncs.add(gumbel(data, (n_inputs,), aval(p).dtype), ufuncs.log(p))
            ind = lax.reshape(top_k(g, n_draws)[1], shape)
        else:
            # cumsum by a triangular sum, then searchsorted (left) as a count of cdf < r.
            tri = lax.le(lax.broadcasted_iota(dt.default_int(), (n_inputs, n_inputs), 1),
                         lax.broadcasted_iota(dt.default_int(), (n_inputs, n_inputs), 0))
            pd = aval(p).dtype
            cdf = reductions.sum(ufuncs.where(tri, lax.broadcast_in_dim(p, (n_inputs, n_inputs),
                                                                        (1,)),
                                              to_array(0.0, pd, False)), axis=1)
            total = cdf[n_inputs - 1]
            r = ufuncs.multiply(total, ufuncs.subtract(to_array(1.0, pd, False),
                                                       uniform(data, shape, pd)))
            ind = reductions.sum(ufuncs.less(lax.reshape(cdf, (1,) * len(shape) + (n_inputs,)),
                                             lax.reshape(r, shape + (1,))), axis=-1)
        ind = lax.convert_element_type(ind, dt.default_int())
    if arr is None:
        return ind
    out = _take(arr, lax.reshape(ind, (n_draws,)), axis)
    return lax.reshape(out, aval(arr).shape[:axis] + shape + aval(arr).shape[axis + 1:])


_ = (math, core)
