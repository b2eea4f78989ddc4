"""Large-shape tier of the random-program fuzzer (``fuzz_programs.py --tier large``).

The small tier (tests/fuzz_programs.py) keeps every node under 2048 elements, so it never
reaches what users run on large arrays. A seed here gives a program of 4-13 ops over 1-3
inputs of one large base shape (up to 2M elements per node, 16M elements over all nodes, at
most 10 nodes of >= 65536 elements), picked from shape families that hit the runtime's
thresholds:

- flat vectors of 30k-2M elements (65535/65536/65537, 2^20, primes) and 3-D/4-D blocks:
  kernels with >= 65536 elements of work run on the thread pool (FUSIONJIT_NUM_THREADS);
- rows (R, L) or (B, R, L), L in 16, 17, 31-33, 63-65, 100, 127-129, 255, 257, 1000,
  1024, 1025, 2047, 4096, 4099, 8191, 16384, 16385, 20000, 70001 (a few under 16): row
  loops with 8 or 16 lanes, full vectors and a tail, row buffers up to 64 KiB and past it;
- few long rows (1-8 x 20k-262k), tall arrays (10k-300k x 1-9) and a long middle
  dimension (2-8 x 4k-60k x 2-9): reductions of >= 65536 elements with fewer than 32
  outputs, which the tree-reduction pass splits into blocks (row sums of long rows, column
  sums, a reduced middle dimension between kept ones, whole-array sums);
- 10% of base shapes stay under 65536 elements (the serial side of both thresholds).

Dtypes: one per program, float32 (45%), float64 (20%; the program runs with
``fusionjit_enable_x64`` on, restored afterwards), uint32 (17%; wrap-around add/sub/mul,
shifts, and/or/xor/not, //, % and popcount, exact) or int32 (18%; bounded so nothing
overflows, floor // and %, arithmetic and logical shifts); other inputs and astype nodes
mix in the others and bool (10% of the integer programs have float64 floats). Float inputs
are uniform in [-2, 2], [-8, 8] or [0.5, 2], or multiples of 1/16 in [-2, 2] (35%: sums of
those are exact in any order). Each program also picks the vector width it compiles with
(``fusionjit_vector_width`` 0 = the host's, 16 with AVX-512, or 8: 30%), and each input is
passed as a fusionjit array or as users pass them, a NumPy array in C or Fortran order or a
strided view.

Ops: the small tier's elementwise ops, where, compare, clip, astype (all pairs of f/i/u/b,
float->int only where bounded), reductions (sum/max/min/mean/any/all over the last axis, the
first, a middle one, a contiguous run, a non-contiguous set, everything; keepdims or not),
softmax / log-softmax / layer norm (with gamma and beta) / RMS norm / "x op reduce(x,
axis, keepdims)" over the last axis (or another one), which the fusionjit profile fuses
into one row kernel; ``fnp.dot`` / ``fnp.matmul`` / ``@`` (matrix-vector, vector-matrix,
matrix-matrix with up to 64 columns, batched); ``fusionjit.lax.pad`` (fusionjit.numpy has
no ``pad``; low/high padding, negative too, interior padding); ``lax.dynamic_slice`` and
``lax.dynamic_update_slice`` whose start indices are traced (computed in the program from
an int32 input, often out of range: clamped as XLA clamps them); static slices with steps,
concatenate, reshape, transpose, broadcast_to, expand_dims. (fusionjit has no cumsum.)

Comparisons, floor and float->int/bool conversions of large nodes are generated only on
values computed exactly (inputs, and adds, products, sums, max/min, selections and moves of
multiple-of-2^e values that fit float32's 24 bits): over a million arbitrary elements some
always lie within rounding distance of the jump. Nodes of <= 256 elements (whole-array
reductions) may be inexact: conditioning checks them.

Tolerances. A program is evaluated with NumPy in float64 (the reference) and in float32
with its sums (sum, mean, dot, matmul) accumulated in four orders: NumPy's pairwise, one
sequential chain (row-major over the reduced dimensions, what a scalar reduction loop
does), the same chain reversed, and 64 strided accumulators combined in order (a 16-lane,
4x unrolled row loop). For float output i, ``dev_i`` is the largest difference of those
from the reference (a float64 program: the largest difference of its own float64 orderings
from the pairwise one, plus the float32 one scaled by 2^-29, plus the difference made by
moving every exp, expm1, log, sin, cos and tanh result one ulp at random: ``UlpNumpy``). A
result passes if ``|got - ref| <= atol + rtol * |ref| + 4 * dev_i`` elementwise, with rtol
= atol = 1e-4 (float32, as the small tier) or 1e-9 (float64): the slack follows the
reduction length and the size of the summed terms, since a sequential float32 chain over
10^6 terms is the worst legitimate order and fusionjit's own (blocked, multi-accumulator)
orders are more accurate. Profiles are compared with profile none with the same formula but
``dev_i`` from the orderings' differences among themselves (the order-dependent part only):
profiles may legitimately sum in different orders (a row reduction in a kernel walked with
vector lanes accumulates sequentially, one in its own kernel with 16-lane accumulators),
but they share every rounding that does not depend on order. Integer, uint32 and bool
results are exact (sums of ints are exact in any order, so the tree reduction's blocks and
padding are checked exactly by the int32/uint32 programs and by max/min). A program is
fragile (its results' dtypes and shapes are checked, not their values; inputs are redrawn
twice first) when a float result is not finite, an int or bool result differs between the
orderings, a floor / comparison / float->int conversion lies within 4 * dev (or 1e-4
relative) of its jump, or 4 * dev exceeds 1% of a result's magnitude.

Run it for hours::

    python3 tests/fuzz_programs.py --tier large --start 0 --count 1000000 --jobs 2 \\
        --keep-going --time-limit 14400 --shrink
    python3 tests/fuzz_programs.py --tier large --show SEED     # print a program
    python3 tests/fuzz_programs.py --tier large --stats --start 0 --count 200
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass, field

import numpy as np

import fuzz_programs as fp
from fuzz_programs import BOOL, F32, I32, U32, Node, Program, _lit, _Reject, _size

PARALLEL_MIN = 65536    # kernels with this much work run on the thread pool
TREE_BLOCK = 32768      # tree reduction: >= 2 blocks of this many elements ...
TREE_UNITS = 32         # ... when the reduction has fewer parallel units than this
MAX_ELEMS = 1 << 21     # elements per node
MAX_WORK = 1 << 24      # elements over all nodes
MAX_BIG = 10            # nodes of >= PARALLEL_MIN elements
MAX_DOT = 1 << 23       # multiply-adds of one dot (the sequential NumPy orders expand them)
FMAX = 1e6              # bound on |float values|
IMAX = 1 << 30          # bound on |int32 values|
K_DEV = 4.0             # the slack: K_DEV times the orderings' largest deviation
RTOL64 = ATOL64 = 1e-9  # float64 programs (float32: fp.RTOL, fp.ATOL)
MARGIN = 1e-4           # a jump closer than this (relative) is fragile, as in the small tier
ILL = 1e-2              # K_DEV * dev above this fraction of a result's size: fragile
F64_SCALE = 2.0 ** -29  # float64 / float32 rounding

ROW_LENGTHS = [16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 255, 257, 1000, 1024, 1025,
               2047, 4096, 4099, 8191, 16384, 16385, 20000, 70001]
SHORT_ROWS = [1, 3, 7, 8, 15]
FLAT_SIZES = [65535, 65536, 65537, 100000, 131071, 131089, 250000, 1 << 20, 1000003,
              (1 << 21) - 5]


# --- NumPy stand-ins ---------------------------------------------------------------------

class NumpyLax:
    """NumPy versions of the fusionjit.lax functions the programs use (the specs' ``L``)."""

    @staticmethod
    def pad(x, padding_value, padding_config):
        x = np.asarray(x)
        value = np.asarray(padding_value, x.dtype)
        for d, (lo, hi, interior) in enumerate(padding_config):
            n = x.shape[d]
            if interior and n > 1:
                shape = list(x.shape)
                shape[d] = n + (n - 1) * interior
                y = np.full(shape, value, x.dtype)
                idx = [slice(None)] * x.ndim
                idx[d] = slice(0, shape[d], interior + 1)
                y[tuple(idx)] = x
                x = y
            parts = []
            if lo > 0:
                parts.append(np.full(x.shape[:d] + (lo,) + x.shape[d + 1:], value, x.dtype))
            idx = [slice(None)] * x.ndim
            idx[d] = slice(max(-lo, 0), x.shape[d] + min(hi, 0))
            parts.append(x[tuple(idx)])
            if hi > 0:
                parts.append(np.full(x.shape[:d] + (hi,) + x.shape[d + 1:], value, x.dtype))
            x = np.concatenate(parts, axis=d)
        return x

    @staticmethod
    def _starts(shape, sizes, starts):
        # JAX: a negative start counts from the end; then XLA clamps each start so that the
        # slice fits: 0 <= start <= dim - size.
        return [int(np.clip(int(s) + d if int(s) < 0 else int(s), 0, d - z))
                for s, d, z in zip(starts, shape, sizes)]

    @staticmethod
    def dynamic_slice(x, start_indices, slice_sizes):
        x = np.asarray(x)
        st = NumpyLax._starts(x.shape, slice_sizes, start_indices)
        return x[tuple(slice(s, s + z) for s, z in zip(st, slice_sizes))].copy()

    @staticmethod
    def dynamic_update_slice(x, update, start_indices):
        x, update = np.array(x), np.asarray(update)
        st = NumpyLax._starts(x.shape, update.shape, start_indices)
        x[tuple(slice(s, s + z) for s, z in zip(st, update.shape))] = update
        return x

    @staticmethod
    def population_count(x):
        return np.bitwise_count(x).astype(x.dtype)

    @staticmethod
    def shift_right_logical(x, y):
        x = np.asarray(x)
        u = np.dtype(f"uint{x.dtype.itemsize * 8}")
        return (x.view(u) >> np.asarray(y).astype(u)).view(x.dtype)


class OrderedNumpy:
    """numpy whose float sums (sum, mean, dot, matmul) accumulate in a given order: "seq"
    (one chain, row-major over the reduced dimensions), "rev" (that chain backwards) or
    "lanes" (64 strided accumulators, then combined in order)."""

    LANES = 64

    def __init__(self, order: str):
        self.order = order

    def __getattr__(self, name):
        return getattr(np, name)

    def _acc(self, x):
        """x summed over its last axis, in x's dtype, in this order."""
        n = x.shape[-1]
        if self.order == "rev":
            x = x[..., ::-1]
        elif self.order == "lanes" and n >= 2 * self.LANES:
            m = -(-n // self.LANES) * self.LANES
            y = np.zeros(x.shape[:-1] + (m,), x.dtype)
            y[..., :n] = x
            y = y.reshape(x.shape[:-1] + (m // self.LANES, self.LANES))
            x = np.cumsum(y, axis=-2, dtype=x.dtype)[..., -1, :]
        return np.cumsum(x, axis=-1, dtype=x.dtype)[..., -1]

    def _sum(self, a, axis, out):
        axes = tuple(range(a.ndim)) if axis is None else (
            (axis,) if isinstance(axis, int) else tuple(axis))
        axes = sorted(ax % a.ndim for ax in axes) if a.ndim else []
        if not axes or a.size == 0:
            return out
        kept = [d for d in range(a.ndim) if d not in axes]
        x = np.transpose(a, kept + axes).reshape([a.shape[d] for d in kept] + [-1])
        return self._acc(x).reshape(out.shape)

    def sum(self, a, axis=None, keepdims=False, dtype=None):
        out = np.sum(a, axis=axis, keepdims=keepdims, dtype=dtype)
        if out.dtype.kind != "f":
            return out
        return self._sum(np.asarray(a).astype(out.dtype), axis, out)

    def mean(self, a, axis=None, keepdims=False):
        a = np.asarray(a)
        out = np.mean(a, axis=axis, keepdims=keepdims)
        if a.dtype.kind != "f" or a.size == 0:
            return out
        n = a.size // max(out.size, 1)
        return (np.asarray(self._sum(a, axis, out)) / n).astype(out.dtype)

    def matmul(self, a, b):
        a, b = np.asarray(a), np.asarray(b)
        out = np.matmul(a, b)
        if out.dtype.kind != "f":
            return out
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        prod = a2[..., :, :, None] * b2[..., None, :, :]          # [..., M, K, N]
        return self._acc(np.moveaxis(prod, -2, -1)).reshape(out.shape)

    def dot(self, a, b):
        if 1 <= np.ndim(a) <= 2 and 1 <= np.ndim(b) <= 2:
            return self.matmul(a, b)
        return np.dot(a, b)


ORDERS = {name: OrderedNumpy(name) for name in ("seq", "rev", "lanes")}


class UlpNumpy:
    """numpy whose inexact elementwise functions (exp, expm1, log, sin, cos, tanh) are off by
    one ulp, up or down at random (a fixed seed), per element: float64 programs take this
    evaluation's deviation as the part of their slack that the math library's last bit
    moves. fusionjit's polynomials and NumPy's C library each round within an ulp or so, and
    a program like cos(sin(tanh(x) * 1e6) * 1e6) amplifies that bit a millionfold twice
    (seed 649046): its float32 evaluation, saturated, cannot say by how much."""

    FUNCTIONS = ("exp", "expm1", "log", "sin", "cos", "tanh")

    def __init__(self):
        self.rng = np.random.default_rng(0)

    def __getattr__(self, name):
        f = getattr(np, name)
        if name not in self.FUNCTIONS:
            return f

        def off_by_one_ulp(x):
            y = np.asarray(f(x))
            if y.dtype.kind != "f":
                return y
            up = self.rng.random(y.shape) < 0.5
            return np.where(up, np.nextafter(y, np.inf), np.nextafter(y, -np.inf)).astype(y.dtype)
        return off_by_one_ulp


# --- programs ----------------------------------------------------------------------------

@dataclass
class _Cond:
    """What condition() found: per output, the reference, its dtype and the deviations."""
    ref: list           # float64 NumPy results (ints and bools: exact NumPy results)
    dtypes: list        # the dtype each result must have
    dev: list           # largest deviation of the orderings from the reference
    dev_order: list     # largest difference among the orderings (in the program's dtype)
    why: str = ""       # why the program is fragile ("" if it is not)


@dataclass
class LargeProgram(Program):
    fdtype: str = "f32"     # what F (the float inputs and nodes) is: "f32" or "f64" (x64 on)
    width: int = 0          # fusionjit_vector_width (0: the host's)
    _cond: object = field(default=None, init=False, repr=False)
    data_file: str = field(default="", init=False)  # where a shrunk program's inputs are

    tier = "large"
    numpy_lax = NumpyLax

    @property
    def float_dtype(self):
        return np.float64 if self.fdtype == "f64" else np.float32

    def meta(self) -> dict:
        return {"fdtype": self.fdtype, "width": self.width}

    def jit_args(self):
        """The inputs as fusionjit arrays or, as users pass them, NumPy arrays: C-ordered,
        Fortran-ordered or strided views (chosen per seed and input)."""
        import zlib

        import fusionjit.numpy as fnp
        args = []
        for k, a in enumerate(self.data):
            a = a.astype(self.float_dtype) if a.dtype == F32 else a
            how = zlib.crc32(f"{self.seed!r}/{k}".encode()) % 5 if a.ndim else 0
            if how == 2:
                a = np.asfortranarray(a)
            elif how == 3:
                wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
                wide[..., ::2] = a
                a = wide[..., ::2]
            elif how == 4:
                a = a[::-1].copy()[::-1]
            args.append(fnp.asarray(a) if how == 0 else a)
        return args

    @contextlib.contextmanager
    def config(self):
        import fusionjit
        old = (fusionjit.config.fusionjit_enable_x64, fusionjit.config.fusionjit_vector_width)
        fusionjit.config.update("fusionjit_enable_x64", self.fdtype == "f64")
        fusionjit.config.update("fusionjit_vector_width", self.width)
        try:
            yield
        finally:
            fusionjit.config.update("fusionjit_enable_x64", old[0])
            fusionjit.config.update("fusionjit_vector_width", old[1])

    # -- conditioning and tolerances --------------------------------------------------
    def condition(self) -> bool:
        self._cond = _conditioning(self)
        return bool(self._cond.why)

    def cond(self) -> _Cond:
        if self._cond is None:
            self.condition()
        return self._cond

    def reference(self):
        return self.cond().ref

    def compare(self, i, got, want, what, against="numpy"):
        c = self.cond()
        got, want = np.asarray(got), np.asarray(want)
        if got.dtype != c.dtypes[i]:
            return f"{what}: dtype {got.dtype}, expected {c.dtypes[i]}"
        if got.shape != want.shape:
            return f"{what}: shape {got.shape}, expected {want.shape}"
        if self.fragile:    # rounding may move a jump: profiles may legitimately differ
            return None
        if got.dtype.kind in "biu":
            return fp.exact_mismatch(got, want, what)
        dev = c.dev[i] if against == "numpy" else c.dev_order[i]
        source = "the summation orders" + (
            " and the math library's last bit" if against == "numpy" and self.fdtype == "f64"
            else "")
        rtol, atol = (fp.RTOL, fp.ATOL) if self.fdtype == "f32" else (RTOL64, ATOL64)
        g, w = got.astype(np.float64), want.astype(np.float64)
        err = np.abs(g - w)
        tol = atol + rtol * np.abs(w) + K_DEV * dev
        bad = ~(err <= tol)
        if not bad.any():
            return None
        k = np.unravel_index(int(np.argmax(np.where(bad, err - tol, -np.inf))), got.shape)
        return (f"{what}: {int(bad.sum())} of {got.size} elements differ; worst at "
                f"{tuple(int(j) for j in k)}: got {g[k]!r}, expected {w[k]!r}, |diff| "
                f"{err[k]:.3g} > tol {tol[k]:.3g} (atol {atol:g} + rtol {rtol:g} * |expected| "
                f"+ {K_DEV:g} * dev {dev:.3g}, dev from {source})")

    # -- shrinking and printing -------------------------------------------------------
    def simpler(self, k):
        a = self.data[k]
        if a.ndim == 0 or a.dtype == BOOL:
            yield from fp._simpler(a)
            return
        if a.dtype == F32:
            yield np.ones_like(a)
            yield _pattern(a.shape, a.dtype)
        elif a.dtype in (I32, U32):
            yield np.ones_like(a)
            yield _pattern(a.shape, a.dtype)

    def dt_short(self, dtype) -> str:
        if dtype == F32 and self.fdtype == "f64":
            return "f64"
        return fp._DT_SHORT[dtype]

    def data_source(self, k, a, with_data):
        desc = f"  # {self.dt_short(a.dtype)}{list(a.shape)}"
        conv = ".astype(F)" if a.dtype == F32 else ""
        if np.array_equal(a, np.ones_like(a)):
            return f"np.ones({_lit(a.shape)}, {fp._DT_NAME[a.dtype]}){conv}"
        if a.ndim and np.array_equal(a, _pattern(a.shape, a.dtype)):
            return f"fuzz_large._pattern({_lit(a.shape)}, {fp._DT_NAME[a.dtype]}){conv}"
        if a.size <= 64 and (with_data or self.note == "shrunk"):
            return f"np.array({a.tolist()!r}, dtype={fp._DT_NAME[a.dtype]}){conv}"
        if self.note == "shrunk":
            if self.data_file:
                return (f"fuzz_programs.load_program({self.data_file!r}).data[{k}]{conv}"
                        f"{desc}")
            return (f"None  # {self.dt_short(a.dtype)}{list(a.shape)}: a cut node's value; "
                    f"fuzz_programs.save_program() keeps it")
        return f"fuzz_large.generate({self.seed!r}).data[{k}]{conv}{desc}"

    def source_head(self) -> list:
        f = "np.float64" if self.fdtype == "f64" else "np.float32"
        head = ["import numpy as np", "import fusionjit", "import fusionjit.numpy as fnp",
                "import fusionjit.lax as lax",
                "from fuzz_large import NumpyLax  # tests/fuzz_large.py", "",
                f"F, I, B, U = {f}, np.int32, np.bool_, np.uint32"]
        if self.fdtype == "f64":
            head.append('fusionjit.config.update("fusionjit_enable_x64", True)')
        if self.width:
            head.append(f'fusionjit.config.update("fusionjit_vector_width", {self.width})')
        return head + [""]

    def source(self, with_data=None) -> str:
        text = super().source(with_data)
        if "fuzz_large._pattern(" in text and "import fuzz_large " not in text:
            text = "import fuzz_large  # tests/fuzz_large.py\n" + text
        if "fuzz_programs.load_program(" in text and "import fuzz_programs " not in text:
            text = "import fuzz_programs  # tests/fuzz_programs.py\n" + text
        return text

    def source_tail(self, lax: bool) -> list:
        return ["expected = [np.asarray(r) for r in program(*args, xp=np, L=NumpyLax)]",
                "for p in ('none', 'xla', 'xla+concat', 'fusionjit'):",
                "    got = fusionjit.jit(program, fusion=p)(*args)",
                "    print(p, fusionjit.testing.count_kernels(program, fusion=p)(*args), "
                "'max |got - numpy| per result:',",
                "          [float(np.max(np.abs(np.asarray(g, np.float64) - e))) "
                "for g, e in zip(got, expected)])"]


def _pattern(shape, dtype):
    """A simple input: 0, 1, 2, 3, 4, 0, ... (floats: -1, -0.5, 0, 0.5, 1, -1, ...)."""
    v = (np.arange(_size(shape)) % 5).reshape(shape)
    return (v * 0.5 - 1).astype(dtype) if np.dtype(dtype) == F32 else v.astype(dtype)


def _disc_nodes(prog: Program):
    """{node id of an operand of a discontinuity: the discontinuity nodes reading it}."""
    out = {}
    for i, n in enumerate(prog.nodes):
        if n.disc:
            for a in (n.args[:2] if n.disc == "cmp" else n.args[:1]):
                out.setdefault(a, []).append(i)
    return out


def _finite_max(a) -> float:
    a = np.abs(np.asarray(a, np.float64))
    return float(a.max()) if a.size else 0.0


def _conditioning(prog: LargeProgram) -> _Cond:
    """Evaluates the program in float64 and in float32 (float64 programs: also in float64)
    with four summation orders, and derives the references, the deviations and whether the
    program is fragile."""
    watch = _disc_nodes(prog)
    rec64 = []
    ref = prog.numpy(np.float64, record=rec64)
    watched64 = {a: np.asarray(rec64[a]) for a in watch}
    del rec64
    n_out = len(ref)
    is_float = [r.dtype.kind == "f" for r in ref]
    why = ""

    def run(dtype, xp):
        rec = []
        out = prog.numpy(dtype, record=rec, xp=xp)
        watched = {a: np.asarray(rec[a]) for a in watch}
        return out, watched

    def node_dev(watched, base):
        return {a: _finite_max(np.asarray(v, np.float64) - base[a]) if v.dtype.kind == "f"
                else 0.0 for a, v in watched.items()}

    # float32, in every order
    out32, w32 = {}, {}
    for name, xp in [("pair", np)] + list(ORDERS.items()):
        out32[name], w = run(np.float32, xp)
        w32[name] = node_dev(w, watched64)
    dtype_of = [o.dtype for o in out32["pair"]]
    dev32 = [max(_finite_max(out32[v][i].astype(np.float64) - ref[i]) for v in out32)
             if is_float[i] else 0.0 for i in range(n_out)]
    nd32 = {a: max(w[a] for w in w32.values()) for a in watch}
    evals = list(out32.values())
    if prog.fdtype == "f32":
        dev = dev32
        dev_order = [max(_finite_max(out32[v][i].astype(np.float64) - out32["pair"][i])
                         for v in ORDERS) if is_float[i] else 0.0 for i in range(n_out)]
        node_tol = nd32
    else:
        out64, w64 = {}, {}
        for name, xp in ORDERS.items():
            out64[name], w = run(np.float64, xp)
            w64[name] = node_dev(w, watched64)
            evals.append(out64[name])
        dtype_of = [r.dtype for r in ref]
        dev_order = [max(_finite_max(out64[v][i] - ref[i]) for v in ORDERS)
                     if is_float[i] else 0.0 for i in range(n_out)]
        out_ulp, w = run(np.float64, UlpNumpy())
        evals.append(out_ulp)
        w_ulp = node_dev(w, watched64)
        dev = [d + d32 * F64_SCALE + (_finite_max(u - r) if f else 0.0)
               for d, d32, u, r, f in zip(dev_order, dev32, out_ulp, ref, is_float)]
        node_tol = {a: max(w[a] for w in w64.values()) + nd32[a] * F64_SCALE + w_ulp[a]
                    for a in watch}
    evals.append(ref)
    refs = []
    for i in range(n_out):
        if is_float[i]:
            refs.append(ref[i].astype(np.float64))
            if not all(np.all(np.isfinite(e[i])) for e in evals):
                why = why or f"result {i} is not finite"
            elif K_DEV * dev[i] > ILL * max(1.0, _finite_max(ref[i])):
                why = why or f"result {i} is ill-conditioned (dev {dev[i]:.3g})"
        else:
            want = out32["pair"][i] if prog.fdtype == "f32" else ref[i]
            refs.append(want)
            if not all(np.array_equal(e[i], want) for e in evals):
                why = why or f"result {i} ({want.dtype}) depends on the rounding"
    if not why:
        why = _jumps(prog, watch, watched64, node_tol)
    return _Cond(refs, dtype_of, dev, dev_order, why)


def _jumps(prog, watch, vals64, node_tol) -> str:
    """Why a discontinuity is too close to its jump for the deviations, or "". Operands
    that every evaluation computes exactly alike (no deviation from float64 at all: exact
    values) are computed exactly by fusionjit too: no margin for them."""
    for i, n in enumerate(prog.nodes):
        if not n.disc or all(node_tol[a] == 0 for a in n.args[:2 if n.disc == "cmp" else 1]):
            continue
        if n.disc == "cmp":
            a, b = np.broadcast_arrays(np.asarray(vals64[n.args[0]], np.float64),
                                       np.asarray(vals64[n.args[1]], np.float64))
            d = np.abs(a - b)
            scale = np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)))
            tol = K_DEV * (node_tol[n.args[0]] + node_tol[n.args[1]])
        else:
            x = np.asarray(vals64[n.args[0]], np.float64)
            d = np.abs(x) if n.disc == "nonzero" else np.abs(x - np.round(x))
            scale = np.maximum(1.0, np.abs(x))
            tol = K_DEV * node_tol[n.args[0]]
        close = (d < tol) | ((d > 0) & (d < MARGIN * scale))
        if close.any():
            return f"v{i} ({n.disc}) is within rounding distance of its jump"
    return ""


# --- generation --------------------------------------------------------------------------

class LargeGenerator(fp.Generator):
    """Builds one large-tier program (see the module docstring)."""

    KINDS = {"unary": 12, "binary": 14, "bitwise": 5, "where": 5, "compare": 3, "clip": 2,
             "astype": 4, "reduce": 14, "rownorm": 12, "rowcombine": 8, "dot": 5, "pad": 4,
             "dynamic_slice": 4, "dynamic_update_slice": 3, "slice": 3, "concatenate": 2,
             "reshape": 3, "transpose": 2, "broadcast_to": 3, "expand_dims": 1}
    max_size, max_rank = MAX_ELEMS, 4

    def __init__(self, rng, seed=None):
        super().__init__(rng, seed)
        self.makers = []        # per input: (kind, dtype) to draw its values again
        self.fdtype, self.width, self.main = "f32", 0, F32
        self.index_input = None     # the int32 input the traced start indices come from
        # Per node: (computed exactly: no rounding anywhere, in any order; the exponent e
        # with every value a multiple of 2^e, or None). Comparisons, floor and float->int
        # conversions of a large node are only generated on exact values: for a million
        # arbitrary elements some always lie within rounding distance of the jump.
        self.exinfo = []

    # -- values -----------------------------------------------------------------------
    def draw(self, shape, dtype, kind):
        rng = self.rng
        if kind == "index":
            return np.asarray(rng.integers(-20, 400), np.int32).reshape(shape)
        if dtype == F32:
            if kind == "grid":
                return (rng.integers(-32, 33, size=shape) / 16).astype(np.float32)
            lo, hi = {"pm2": (-2, 2), "pm8": (-8, 8), "pos": (0.5, 2)}[kind]
            return rng.uniform(lo, hi, size=shape).astype(np.float32)
        if dtype == I32:
            m = 4 if kind == "small" else 1000
            return rng.integers(-m, m + 1, size=shape).astype(np.int32)
        if dtype == U32:
            top = 256 if kind == "small" else 1 << 32
            return rng.integers(0, top, size=shape, dtype=np.uint64).astype(np.uint32)
        return rng.random(size=shape) < 0.5

    def kind_for(self, dtype):
        if dtype == F32:
            u = self.rng.random()
            return "grid" if u < 0.35 else "pm2" if u < 0.75 else "pm8" if u < 0.85 else "pos"
        if dtype in (I32, U32):
            return "small" if self.chance(0.5) else "wide"
        return "bool"

    @staticmethod
    def bound_of(dtype, kind):
        if kind == "index":
            return 400.0
        return {"grid": 2.0, "pm2": 2.0, "pm8": 8.0, "pos": 2.0,
                "small": 256.0 if dtype == U32 else 4.0,
                "wide": 2.0 ** 32 if dtype == U32 else 1000.0, "bool": 1.0}[kind]

    def new_input(self, shape, dtype, kind=None):
        kind = kind or self.kind_for(dtype)
        a = self.draw(tuple(shape), dtype, kind)
        self.data.append(a)
        del self.makers[len(self.data) - 1:]
        self.makers.append((kind, dtype))
        del self.exinfo[len(self.nodes):]
        self.exinfo.append((True, -4 if kind == "grid" else None if dtype == F32 else 0))
        self.nodes.append(Node("input", [], "", tuple(shape), dtype, self.bound_of(dtype, kind)))
        self.vals.append(a)
        self.used.append(False)
        return len(self.nodes) - 1

    def resample(self, data):
        return [self.draw(a.shape, a.dtype, kind) for a, (kind, _) in zip(data, self.makers)]

    # -- nodes ------------------------------------------------------------------------
    def add(self, op, args, expr, bound, disc="", ex=None):
        node = Node(op, list(args), expr, (), F32, float(bound), disc)
        env = {"xp": np, "F": np.float32, "I": np.int32, "B": np.bool_, "U": np.uint32,
               "L": NumpyLax}
        for a in args:
            env[f"v{a}"] = self.vals[a]
        with np.errstate(all="ignore"):
            v = np.asarray(eval(node.render({a: f"v{a}" for a in args}), env))
        if v.size > MAX_ELEMS or v.ndim > self.max_rank or v.size == 0:
            raise _Reject
        if v.dtype not in (F32, I32, BOOL, U32):
            raise AssertionError(f"generator made dtype {v.dtype}: {node.expr}")
        if v.dtype == F32 and bound > FMAX or v.dtype == I32 and bound > IMAX:
            raise _Reject
        sizes = [_size(n.shape) for n in self.nodes] + [v.size]
        if sum(sizes) > MAX_WORK or sum(s >= PARALLEL_MIN for s in sizes) > MAX_BIG:
            raise _Reject
        node.shape, node.dtype = tuple(v.shape), v.dtype
        if v.dtype == BOOL:
            node.bound = 1.0
        elif v.dtype == U32:
            node.bound = 2.0 ** 32
        del self.exinfo[len(self.nodes):]
        self.exinfo.append((True, 0) if v.dtype != F32 else ex or (False, None))
        self.nodes.append(node)
        self.vals.append(v)
        self.used.append(False)
        for a in args:
            self.used[a] = True
        return len(self.nodes) - 1

    def rank(self, i):
        return len(self.shape(i))

    # -- exactness (see exinfo) -------------------------------------------------------
    def exact(self, i):
        return self.exinfo[i][0]

    def disc_ok(self, *ids):
        """Whether a comparison / floor / conversion may read these nodes: exact, or few
        elements (conditioning then checks their distance from the jump)."""
        return all(self.exact(i) or self.size(i) <= 256 for i in ids)

    def ex_struct(self, *ids, e_lit=None):
        """Exactness of an op that only moves or selects values (and literals 2^e_lit)."""
        ok = all(self.exact(i) for i in ids)
        es = [self.exinfo[i][1] for i in ids if self.dtype(i) == F32]
        es += [] if e_lit is None else [e_lit]
        return ok, (None if not es or any(e is None for e in es) else min(es))

    def ex_arith(self, ids, e, bound):
        """Exactness of a sum or product of exact nodes ``ids``: every partial result a
        multiple of 2^e below ``bound``, so it fits float32's 24 bits."""
        if e is None or not all(self.exact(i) for i in ids) or bound > 2.0 ** (24 + e):
            return False, None
        return True, e

    def e(self, i):
        return self.exinfo[i][1]

    def e_sum(self, *ids):
        es = [self.e(i) for i in ids]
        return None if any(e is None for e in es) else sum(es)

    def e_min(self, *ids):
        es = [self.e(i) for i in ids]
        return None if any(e is None for e in es) else min(es)

    def size(self, i):
        return _size(self.shape(i))

    def pick_big(self, pred=None):
        """A node, preferring the large ones."""
        if self.chance(0.6):
            try:
                return self.pick(lambda i: self.size(i) >= 4096 and (pred is None or pred(i)))
            except _Reject:
                pass
        return self.pick(pred)

    def lit(self, dtype, value) -> str:
        return f"{fp._DT_NAME[dtype]}({value!r})"

    def astype(self, x, dtype):
        src, b = self.dtype(x), self.bound(x)
        if src == dtype:
            return x
        if src == F32 and dtype != F32 and not self.disc_ok(x):
            raise _Reject
        if src == F32 and dtype == I32:
            if b > IMAX:
                raise _Reject
            return self.add("astype", [x], "{0}.astype(I)", b, "trunc")
        if src == F32 and dtype == U32:
            if b > IMAX:
                raise _Reject
            return self.add("astype", [x], "xp.abs({0}).astype(U)", b, "trunc")
        if src == F32 and dtype == BOOL:
            return self.add("astype", [x], "{0}.astype(B)", 1, "nonzero")
        if src == U32 and dtype in (F32, I32):
            s = 12 + self.r(20) if dtype == F32 else 2 + self.r(30)
            return self.add("astype", [x], "({0} >> U(%d)).astype(%s)" % (
                s, fp._DT_NAME[dtype]), 2.0 ** (32 - s), ex=(True, 0))
        if dtype == F32 and b > FMAX:
            raise _Reject
        return self.add("astype", [x], "{0}.astype(%s)" % fp._DT_NAME[dtype],
                        1.0 if dtype == BOOL else b, ex=(b <= 2.0 ** 24, 0))

    def gen_astype(self):
        x = self.pick()
        d = self.dtype(x)
        return self.astype(x, self.choice([t for t in (F32, I32, U32, BOOL) if t != d]))

    def gen_unary(self):
        x = self.pick_big(lambda i: self.dtype(i) != BOOL or self.chance(0.3))
        d, b = self.dtype(x), self.bound(x)
        if d == BOOL:
            return self.add("logical_not", [x], "xp.logical_not({0})", 1)
        if d == U32:
            op = self.choice(["invert", "negative", "square", "popcount"])
            if op == "popcount":
                return self.add(op, [x], "L.population_count({0})", 32)
            return self.add(op, [x], "xp.%s({0})" % op, b)
        if d == I32:
            op = self.choice(["negative", "abs", "square", "invert"])
            nb = b * b if op == "square" else b + 1
            return self.add(op, [x], "xp.%s({0})" % op, nb)
        ops = ["negative", "abs", "sqrt", "log", "recip", "square"]
        if self.disc_ok(x):
            ops += ["floor", "floor"]
        if b <= 100:
            ops += ["exp", "expm1", "sin", "cos", "tanh", "tanh", "trig_wide"]
        op = self.choice(ops)
        if op == "trig_wide":
            # Arguments across the vector math's reduction ranges (float32: |x| <= 128,
            # float64: |x| <= 2^20; the lanes past them call the C library).
            c = self.choice([20.0, 100.0] + ([3.0e5, 1.0e6] if self.fdtype == "f64" else []))
            f = self.choice(["sin", "cos"])
            return self.add(op, [x], "xp.%s({0} * F(%r))" % (f, c), 1)
        if op == "exp":
            return self.add(op, [x], "xp.exp(xp.clip({0}, F(-4.0), F(4.0)))", math.exp(4))
        if op == "expm1":
            return self.add(op, [x], "xp.expm1(xp.clip({0}, F(-4.0), F(4.0)))", math.exp(4))
        if op == "log":
            return self.add(op, [x], "xp.log(xp.abs({0}) + F(1.0))", math.log1p(b))
        if op == "sqrt":
            return self.add(op, [x], "xp.sqrt(xp.abs({0}))", math.sqrt(b))
        if op == "recip":
            return self.add(op, [x], "F(1.0) / (xp.abs({0}) + F(0.5))", 2)
        if op == "floor":
            return self.add(op, [x], "xp.floor({0})", b + 1, "floor",
                            (True, 0) if self.exact(x) else None)
        if op == "square":
            return self.add(op, [x], "xp.square({0})", b * b,
                            ex=self.ex_arith([x], self.e_sum(x, x), b * b))
        if op in ("negative", "abs"):
            return self.add(op, [x], "xp.%s({0})" % op, b, ex=self.ex_struct(x))
        return self.add(op, [x], "xp.%s({0})" % op, 1)

    def gen_binary(self):
        x = self.pick_big()
        d = self.dtype(x)
        y = self.partner(x, d)
        if self.chance(0.5):
            x, y = y, x
        bx, by = self.bound(x), self.bound(y)
        if d == BOOL:
            op = self.choice(["logical_and", "logical_or", "logical_xor", "not_equal"])
            return self.add(op, [x, y], "xp.%s({0}, {1})" % op, 1)
        if d == U32:
            op = self.choice(["add", "subtract", "multiply", "maximum", "minimum", "bitwise_and",
                              "bitwise_or", "bitwise_xor", "fdiv", "mod", "shl", "shr"])
            expr = {"fdiv": "{0} // ({1} | U(1))", "mod": "{0} % ({1} | U(1))",
                    "shl": "{0} << ({1} & U(31))", "shr": "{0} >> ({1} & U(31))"}.get(
                        op, "xp.%s({0}, {1})" % op)
            return self.add(op, [x, y], expr, 2.0 ** 32)
        if d == I32:
            op = self.choice(["add", "subtract", "multiply", "maximum", "minimum", "fdiv",
                              "mod", "bitwise_and", "bitwise_or", "bitwise_xor"])
            if op == "fdiv":
                return self.add(op, [x, y], "{0} // (xp.abs({1}) + I(1))", bx)
            if op == "mod":
                return self.add(op, [x, y], "{0} % (xp.abs({1}) + I(1))", by)
            nb = {"add": bx + by, "subtract": bx + by, "multiply": bx * by}.get(op, max(bx, by))
            if op.startswith("bitwise"):
                nb = 2.0 ** math.ceil(math.log2(max(bx, by) + 1))
            return self.add(op, [x, y], "xp.%s({0}, {1})" % op, nb)
        op = self.choice(["add", "sub", "mul", "div", "maximum", "minimum"])
        if op in ("add", "sub"):
            return self.add(op, [x, y], "{0} %s {1}" % "+-"[op == "sub"], bx + by,
                            ex=self.ex_arith([x, y], self.e_min(x, y), bx + by))
        if op == "mul":
            return self.add(op, [x, y], "{0} * {1}", bx * by,
                            ex=self.ex_arith([x, y], self.e_sum(x, y), bx * by))
        if op == "div":
            c = self.choice([0.5, 1.0, 2.0])
            return self.add(op, [x, y], "{0} / (xp.abs({1}) + F(%r))" % c, bx / c)
        return self.add(op, [x, y], "xp.%s({0}, {1})" % op, max(bx, by),
                        ex=self.ex_struct(x, y))

    def gen_bitwise(self):
        x = self.pick_big(lambda i: self.dtype(i) in (I32, U32))
        d, b = self.dtype(x), self.bound(x)
        k = self.r(32)
        if d == U32:
            forms = [("shl", "{0} << U(%d)" % k), ("shr", "{0} >> U(%d)" % k),
                     ("xor", "{0} ^ U(%d)" % self.rng.integers(1 << 32)),
                     ("and", "{0} & U(%d)" % self.rng.integers(1 << 32)),
                     ("or", "{0} | U(%d)" % self.rng.integers(1 << 31)),
                     ("hash", "({0} * U(2654435761)) ^ ({0} >> U(%d))" % (1 + self.r(31)))]
            op, expr = self.choice(forms)
            return self.add(op, [x], expr, 2.0 ** 32)
        forms = [("sar", "{0} >> I(%d)" % k, b), ("and", "{0} & I(%d)" % self.r(1 << 16), b),
                 ("srl", "L.shift_right_logical({0}, I(%d))" % max(k, 2), 2.0 ** 30)]
        if b * 2 ** (k % 8) <= IMAX:
            forms.append(("shl", "{0} << I(%d)" % (k % 8), b * 2 ** (k % 8)))
        op, expr, nb = self.choice(forms)
        return self.add(op, [x], expr, nb)

    def _cmp_op(self, d):
        return self.choice(["<", "<=", ">", ">="] if d == F32 else
                           ["<", "<=", ">", ">=", "==", "!="])

    def gen_compare(self):
        x = self.pick_big(lambda i: self.dtype(i) != BOOL and self.disc_ok(i))
        y = self.partner(x, self.dtype(x))
        if self.dtype(x) == F32 and not self.disc_ok(y):
            raise _Reject
        return self.add("compare", [x, y], "{0} %s {1}" % self._cmp_op(self.dtype(x)), 1,
                        "cmp" if self.dtype(x) == F32 else "")

    def gen_where(self):
        c = self.pick_big()
        d = self.dtype(c)
        e = self.partner(c, d)
        s = fp._bshape(self.shape(c), self.shape(e))
        ex = self.ex_struct(c, e)
        if self.chance(0.3):
            cond = self.partner(s, BOOL, convert=False)
            return self.add("where", [cond, c, e], "xp.where({0}, {1}, {2})",
                            max(self.bound(c), self.bound(e)), ex=ex)
        a = self.partner(s)
        if self.dtype(a) == BOOL:
            a = self.astype(a, self.choice([I32, F32, U32]))
        s = fp._bshape(s, self.shape(a))
        b = self.partner(s, self.dtype(a))
        if self.dtype(a) == F32 and not self.disc_ok(a, b):
            raise _Reject
        return self.add("where", [a, b, c, e],
                        "xp.where({0} %s {1}, {2}, {3})" % self._cmp_op(self.dtype(a)),
                        max(self.bound(c), self.bound(e)), "cmp" if self.dtype(a) == F32 else "",
                        ex)

    def gen_clip(self):
        x = self.pick_big(lambda i: self.dtype(i) != BOOL)
        d = self.dtype(x)
        if d == F32:
            lo, hi = -(1 + self.r(12)) / 4, (1 + self.r(12)) / 4
            return self.add("clip", [x], f"xp.clip({{0}}, F({lo!r}), F({hi!r}))", max(-lo, hi),
                            ex=self.ex_struct(x, e_lit=-2))
        if d == U32:
            lo, hi = int(self.rng.integers(1 << 20)), int(self.rng.integers(1 << 20, 1 << 32))
            return self.add("clip", [x], f"xp.clip({{0}}, U({lo}), U({hi}))", 2.0 ** 32)
        lo, hi = -self.r(50), self.r(50)
        return self.add("clip", [x], f"xp.clip({{0}}, I({lo}), I({hi}))", max(-lo, hi))

    # -- reductions -------------------------------------------------------------------
    def reduce_axes(self, r):
        """(the axis argument as written, the reduced axes)."""
        u = self.rng.random()
        if r == 0 or u < 0.2:
            return None, tuple(range(r))
        if u < 0.45 or r == 1:
            return -1, (r - 1,)
        if u < 0.6:
            return 0, (0,)
        if u < 0.7 and r >= 3:
            a = 1 + self.r(r - 2)
            return a, (a,)
        if u < 0.8:
            k = 2 + self.r(r - 1)
            lo = self.r(r - k + 1)
            return tuple(range(lo, lo + k)), tuple(range(lo, lo + k))
        if r >= 3 and u < 0.9:
            axes = (0, r - 1) if self.chance(0.5) else (0, 2) if r > 3 else (0, 2)
            return axes, axes
        return self._axes(r)

    def reduce_expr(self, x, axis, kd):
        """(op, expression with {0} for x, bound) of a reduction of node x."""
        d, b = self.dtype(x), self.bound(x)
        axes = range(self.rank(x)) if axis is None else (
            [axis] if isinstance(axis, int) else axis)
        count = _size([self.shape(x)[a] for a in axes])
        args = f"axis={axis!r}, keepdims={kd}"
        if d == BOOL:
            op = self.choice(["any", "all", "sumI", "sumU"])
            if op.startswith("sum"):
                return "sum", f"xp.sum({{0}}, {args}, dtype={op[-1]})", count
            return op, f"xp.{op}({{0}}, {args})", 1
        ops = ["sum", "sum", "max", "min"] + (["mean", "mean"] if d == F32 else [])
        if (axis is None or isinstance(axis, int)) and (d != F32 or self.exact(x)):
            ops += ["argmax", "argmin"]     # near-ties of inexact floats would be fragile
        op = self.choice(ops)
        if op in ("argmax", "argmin"):
            kd = kd and axis is not None
            return op, f"xp.{op}({{0}}, axis={axis!r}, keepdims={kd}).astype(I)", count
        if op == "sum" and d == F32 and b * count > FMAX:
            op = "mean"
        if op == "sum" and d == I32 and b * count > IMAX:
            op = self.choice(["max", "min"])
        if op == "sum":
            return op, f"xp.sum({{0}}, {args}, dtype={fp._DT_NAME[d]})", b * count
        return op, f"xp.{op}({{0}}, {args})", b

    def gen_reduce(self):
        x = self.pick_big(lambda i: self.rank(i) >= 1 or self.chance(0.1))
        axis, _ = self.reduce_axes(self.rank(x))
        op, expr, bound = self.reduce_expr(x, axis, self.chance(0.5))
        return self.add(op, [x], expr, bound, ex=self.reduce_ex(x, op, bound))

    def reduce_ex(self, x, op, bound):
        if op in ("max", "min"):
            return self.ex_struct(x)
        if op == "sum":
            return self.ex_arith([x], self.e(x), bound)
        return None

    def row_axis(self, x):
        r = self.rank(x)
        if r == 1 or self.chance(0.8):
            return -1
        return self.r(r) - (r if self.chance(0.3) else 0)

    def gen_rownorm(self):
        def rows(i):
            return (self.dtype(i) == F32 and self.rank(i) >= 1 and self.shape(i)[-1] >= 2
                    and self.bound(i) <= 1e3)
        if self.chance(0.6):    # the longest rows of an input (what a model's layer reads)
            cands = [i for i in range(len(self.nodes)) if rows(i) and self.rank(i) >= 2
                     and self.nodes[i].op == "input"] or [
                i for i in range(len(self.nodes)) if rows(i)]
            if not cands:
                raise _Reject
            x = max(cands, key=lambda i: (self.shape(i)[-1], i))
        else:
            x = self.pick_big(rows)
        ax = self.row_axis(x)
        n, b = self.shape(x)[ax], self.bound(x)
        kind = self.choice(["softmax", "softmax", "log_softmax", "layernorm", "rmsnorm"])
        kd = f"axis={ax}, keepdims=True"
        if kind in ("softmax", "log_softmax"):
            if self.chance(0.7):
                m = self.add("max", [x], f"xp.max({{0}}, {kd})", b)
                z = self.add("sub", [x, m], "{0} - {1}", 2 * b)
            else:
                m = self.add("max", [x], f"xp.max({{0}}, axis={ax})", b)
                z = self.add("sub", [x, m], f"{{0}} - xp.expand_dims({{1}}, {ax})", 2 * b)
            e = self.add("exp", [z], "xp.exp({0})", 1)
            s = self.add("sum", [e], f"xp.sum({{0}}, {kd}, dtype=F)", n)
            if kind == "softmax":
                return self.add("div", [e, s], "{0} / {1}", 1)
            return self.add("sub", [z, s], "{0} - xp.log({1})", 2 * b + math.log(n))
        if kind == "rmsnorm":
            ms = self.add("mean", [x], f"xp.mean(xp.square({{0}}), {kd})", b * b)
            return self.add("mul", [x, ms], "{0} * (F(1.0) / xp.sqrt({1} + F(1e-6)))",
                            math.sqrt(n))
        mu = self.add("mean", [x], f"xp.mean({{0}}, {kd})", b)
        dd = self.add("sub", [x, mu], "{0} - {1}", 2 * b)
        var = self.add("mean", [dd], f"xp.mean({{0}} * {{0}}, {kd})", 4 * b * b)
        y = self.add("div", [dd, var], "{0} / xp.sqrt({1} + F(1e-5))", math.sqrt(n) + 1)
        if ax != -1 or self.chance(0.4):
            return y
        g = self.new_input((n,), F32, "pos")
        beta = self.new_input((n,), F32, "pm2")
        return self.add("affine", [y, g, beta], "{0} * {1} + {2}", 2 * math.sqrt(n) + 4)

    def gen_rowcombine(self):
        x = self.pick_big(lambda i: self.rank(i) >= 1 and self.dtype(i) != BOOL)
        ax, d, b = self.row_axis(x), self.dtype(x), self.bound(x)
        n = self.shape(x)[ax]
        kd = f"axis={ax}, keepdims=True"
        if d == F32:
            if self.chance(0.3):
                return self.add("rowcombine", [x], "{0} - xp.max({0}, %s)" % kd, 2 * b,
                                ex=self.ex_arith([x], self.e(x), 2 * b))
            forms = [("{0} - xp.max({0}, %s)" % kd, 2 * b),
                     ("{0} * xp.mean({0}, %s)" % kd, b * b),
                     ("{0} / (xp.sum(xp.abs({0}), %s, dtype=F) + F(1.0))" % kd, 1),
                     ("xp.maximum({0}, xp.mean({0}, %s))" % kd, b),
                     ("{0} - xp.expand_dims(xp.min({0}, axis=%d), %d)" % (ax, ax), 2 * b)]
        elif d == I32:
            forms = [("{0} - xp.max({0}, %s)" % kd, 2 * b),
                     ("{0} + xp.sum({0}, %s, dtype=I)" % kd, b * (n + 1)),
                     ("xp.where({0} == xp.min({0}, %s), I(1), I(0))" % kd, 1)]
        else:
            forms = [("{0} ^ xp.max({0}, %s)" % kd, 0), ("{0} - xp.min({0}, %s)" % kd, 0),
                     ("{0} + xp.sum({0}, %s, dtype=U)" % kd, 0)]
        expr, nb = self.choice(forms)
        return self.add("rowcombine", [x], expr, nb)

    # -- products, padding, dynamic slices ---------------------------------------------
    def gen_dot(self):
        x = self.pick_big(lambda i: self.dtype(i) in (F32, I32, U32) and 2 <= self.rank(i) <= 3
                          and self.shape(i)[-1] <= 8192)
        d, s = self.dtype(x), self.shape(x)
        k = s[-1]
        form = self.choice(["mv", "mv", "vm", "mm", "bmm"] if len(s) == 2 else ["mv", "bmm"])
        if form == "vm":
            k = s[-2]
            v = self.operand((k,), d)
            out_k = (x, v), "xp.dot({1}, {0})", s[-1], k
        elif form == "mv":
            v = self.operand((k,), d)
            expr = self.choice(["xp.dot({0}, {1})", "xp.matmul({0}, {1})", "{0} @ {1}"])
            if len(s) == 3:
                expr = self.choice(["xp.matmul({0}, {1})", "{0} @ {1}"])
            out_k = (x, v), expr, _size(s[:-1]), k
        else:
            n = 1 + self.r(64)
            wshape = (s[0], k, n) if form == "bmm" and len(s) == 3 and self.chance(0.5) else (k, n)
            w = self.operand(wshape, d)
            out_k = (x, w), self.choice(["xp.matmul({0}, {1})", "{0} @ {1}"]), _size(s[:-1]) * n, k
        (a, b), expr, outs, k = out_k
        if outs * k > MAX_DOT:
            raise _Reject
        bound = self.bound(a) * self.bound(b) * k
        if d == U32:
            bound = 2.0 ** 32
        return self.add("dot", [a, b], expr, bound,
                        ex=self.ex_arith([a, b], self.e_sum(a, b), bound))

    def operand(self, shape, dtype):
        """An existing node of this shape and dtype, or a new input."""
        same = [i for i in range(len(self.nodes))
                if self.shape(i) == tuple(shape) and self.dtype(i) == dtype]
        if same and self.chance(0.5):
            return self.choice(same)
        return self.new_input(shape, dtype)

    def gen_pad(self):
        x = self.pick_big(lambda i: self.rank(i) >= 1)
        d = self.dtype(x)
        cfg = []
        for n in self.shape(x):
            interior = self.choice([1, 2]) if n <= 4096 and self.chance(0.1) else 0
            full = n + (n - 1) * interior
            lo = self.choice([0, 0, 0, 1, 2, 3, 5, 16, -1, -2, -7])
            hi = self.choice([0, 0, 0, 1, 2, 4, 17, -1, -3])
            if -min(lo, 0) - min(hi, 0) >= full:   # XLA may cut only what is there
                lo, hi = 0, 0
            cfg.append((lo, hi, interior))
        value = {F32: "F(%r)" % self.choice([0.0, 1.5, -2.0]), I32: "I(%d)" % (self.r(9) - 4),
                 U32: "U(%d)" % self.choice([0, 7, 4294967295]),
                 BOOL: "B(%r)" % self.chance(0.5)}[d]
        return self.add("pad", [x], f"L.pad({{0}}, {value}, {_lit(cfg)})", max(self.bound(x), 4),
                        ex=self.ex_struct(x, e_lit=-1))

    def index_node(self, room):
        """A traced rank-0 int32 start index computed from the index input; the values
        spread over [-room/4 - 20, room + 20] and beyond, so that clamping happens."""
        k = None
        if self.index_input is not None:
            k = next((i for i, nd in enumerate(self.nodes) if nd is self.index_input), None)
        if k is None:
            k = self.new_input((), I32, "index")
            self.index_input = self.nodes[k]
        a = self.choice([1, 1, 2, 3, -1, max(1, room // 300)])
        c = int(self.rng.integers(-20, max(room, 0) + 21))
        if self.chance(0.2):
            return self.add("index", [k], f"xp.clip({{0}} * I({a}) + I({c}), I(-5), I({room}))",
                            max(room, 5))
        return self.add("index", [k], f"{{0}} * I({a}) + I({c})", 400 * abs(a) + abs(c))

    def starts(self, dims, sizes, first):
        """Start index expressions (the traced ones as {first}, {first + 1}, ...
        placeholders) and their nodes."""
        texts, nodes = [], []
        for n, z in zip(dims, sizes):
            if self.chance(0.6):
                texts.append("{%d}" % (first + len(nodes)))
                nodes.append(self.index_node(n - z))
            else:
                texts.append("I(%d)" % int(self.rng.integers(-3, n - z + 4)))
        return "(" + "".join(t + ", " for t in texts) + ")", nodes

    def gen_dynamic_slice(self):
        x = self.pick_big(lambda i: self.rank(i) >= 1)
        dims = self.shape(x)
        sizes = [self.choice([n, max(1, n - 1 - self.r(8)), 1 + self.r(n), max(1, n // 2)])
                 for n in dims]
        text, idx = self.starts(dims, sizes, 1)
        return self.add("dynamic_slice", [x] + idx,
                        f"L.dynamic_slice({{0}}, {text}, {_lit(sizes)})", self.bound(x),
                        ex=self.ex_struct(x))

    def gen_dynamic_update_slice(self):
        x = self.pick_big(lambda i: self.rank(i) >= 1)
        dims, d = self.shape(x), self.dtype(x)
        fits = [i for i in range(len(self.nodes)) if i != x and self.dtype(i) == d
                and self.rank(i) == len(dims) and all(a <= b for a, b in zip(self.shape(i), dims))]
        if fits and self.chance(0.6):
            u = self.choice(fits)
        else:
            u = self.new_input(tuple(self.choice([n, 1 + self.r(n), 1]) for n in dims), d)
        text, idx = self.starts(dims, self.shape(u), 2)
        return self.add("dynamic_update_slice", [x, u] + idx,
                        f"L.dynamic_update_slice({{0}}, {{1}}, {text})",
                        max(self.bound(x), self.bound(u)), ex=self.ex_struct(x, u))

    # -- shapes -----------------------------------------------------------------------
    def _slice_large(self, n):
        for _ in range(20):
            step = self.choice([1, 1, 1, 2, 3, -1, -1, -2, None, 16, 17])
            start = self.choice([None, None, 0, 1, 5, n // 3, -7, n - 1, -1])
            stop = self.choice([None, None, n, n - 3, -2, n // 2, n + 5])
            if len(range(*slice(start, stop, step).indices(n))) > 0:
                return slice(start, stop, step)
        return slice(None, None, self.choice([None, -1]))

    def gen_slice(self):
        x = self.pick_big(lambda i: self.rank(i) >= 1)
        parts = [self._slice_large(n) for n in self.shape(x)]
        while len(parts) > 1 and parts[-1] == slice(None) and self.chance(0.5):
            parts.pop()
        text = ", ".join(self._slice_text(p) for p in parts)
        if len(parts) == 1:
            text += ","
        return self.add("slice", [x], f"{{0}}[{text}]", self.bound(x), ex=self.ex_struct(x))

    def gen_concatenate(self):
        x = self.pick_big(lambda i: self.rank(i) >= 1)
        s, d = self.shape(x), self.dtype(x)
        ax = self.r(len(s))
        cands = [i for i in range(len(self.nodes)) if self.dtype(i) == d
                 and self.rank(i) == len(s)
                 and all(self.shape(i)[k] == s[k] for k in range(len(s)) if k != ax)]
        parts = [x, self.choice(cands)]
        self.rng.shuffle(parts)
        return self.add("concatenate", parts, f"xp.concatenate([{{0}}, {{1}}], axis={ax})",
                        max(self.bound(p) for p in parts), ex=self.ex_struct(*parts))

    def gen_reshape(self):
        x = self.pick_big()
        s = list(self.shape(x))
        u = self.rng.random()
        if not s or u < 0.2:
            dims = [-1] if s else [1]
        elif u < 0.5 and len(s) >= 2:
            k = self.r(len(s) - 1)
            dims = s[:k] + [s[k] * s[k + 1]] + s[k + 2:]
        elif u < 0.85:
            k = self.r(len(s))
            divs = [f for f in (2, 3, 4, 5, 8, 16, 17, 64) if s[k] % f == 0 and s[k] > f]
            if not divs or len(s) >= self.max_rank:
                raise _Reject
            f = self.choice(divs)
            dims = s[:k] + [f, s[k] // f] + s[k + 1:]
        else:
            if len(s) >= self.max_rank:
                raise _Reject
            k = self.r(len(s) + 1)
            dims = s[:k] + [1] + s[k:]
        if dims != [-1] and self.chance(0.2):
            dims[self.r(len(dims))] = -1
        return self.add("reshape", [x], f"xp.reshape({{0}}, {_lit(dims)})", self.bound(x),
                        ex=self.ex_struct(x))

    def gen_transpose(self):
        x = self.pick_big(lambda i: self.rank(i) >= 2)
        perm = self.rng.permutation(self.rank(x)).tolist()
        if perm == sorted(perm):
            perm = perm[::-1]
        return self.add("transpose", [x], f"xp.transpose({{0}}, {_lit(perm)})", self.bound(x),
                        ex=self.ex_struct(x))

    def gen_broadcast_to(self):
        x = self.pick(lambda i: self.size(i) <= MAX_ELEMS // 4)
        s = list(self.shape(x))
        grow = [k for k, n in enumerate(s) if n == 1]
        for k in grow:
            s[k] = self.choice([2, 3, 16, 17, 100, 1000])
        if not grow or len(s) < self.max_rank and self.chance(0.5):
            s.insert(0, max(2, min(4099, MAX_ELEMS // max(_size(s), 1) // (1 + self.r(4)))))
        return self.add("broadcast_to", [x], f"xp.broadcast_to({{0}}, {_lit(s)})",
                        self.bound(x), ex=self.ex_struct(x))

    def gen_expand_dims(self):
        x = self.pick(lambda i: self.rank(i) < self.max_rank)
        r = self.rank(x)
        ax = self.r(2 * r + 2) - (r + 1)
        return self.add("expand_dims", [x], f"xp.expand_dims({{0}}, {ax})", self.bound(x),
                        ex=self.ex_struct(x))

    # -- whole programs ---------------------------------------------------------------
    def base_shape(self):
        rng, u = self.rng, self.rng.random()

        def target():
            if self.chance(0.1):
                return int(np.exp(rng.uniform(np.log(4096), np.log(65535))))
            return int(np.exp(rng.uniform(np.log(65536), np.log(1_800_000))))
        if u < 0.15:
            n = self.choice(FLAT_SIZES) if self.chance(0.5) else target()
            return (n,)
        if u < 0.5:
            L = self.choice(ROW_LENGTHS) if self.chance(0.9) else self.choice(SHORT_ROWS)
            R = max(1, target() // L)
            if self.chance(0.3) and R >= 8:
                b = self.choice([2, 3, 4, 8])
                return (b, max(1, R // b), L)
            return (R, L)
        if u < 0.62:
            return (1 + self.r(8), int(rng.integers(20000, 262148)))
        if u < 0.74:
            return (int(rng.integers(10000, 300000)), 1 + self.r(9))
        if u < 0.86:
            a, c = 2 + self.r(7), 2 + self.r(8)
            return (a, int(rng.integers(4000, 60000)), c)
        if self.chance(0.3):
            return tuple(int(v) for v in (2 + self.r(3), rng.integers(16, 65),
                                          rng.integers(16, 65), rng.integers(16, 131)))
        return tuple(int(v) for v in rng.integers(16, 200, size=3))

    def make_inputs(self):
        u = self.rng.random()
        self.main = F32 if u < 0.65 else U32 if u < 0.82 else I32
        self.fdtype = "f64" if (u >= 0.45 and u < 0.65) or self.chance(0.1) else "f32"
        self.width = 8 if self.chance(0.3) else 0
        base = list(self.base_shape())
        while _size(base) > MAX_ELEMS or _size(base) > MAX_ELEMS // 2 and self.chance(0.5):
            k = 0 if len(base) > 1 and base[0] > 1 else int(np.argmax(base))
            base[k] = max(1, base[k] // 2)
        for k in range(1 + self.r(3)):
            s = list(base)
            if k > 0:
                v = self.rng.random()
                if v < 0.2:
                    s = s[self.r(len(s)):]
                elif v < 0.45:
                    s = [1 if self.chance(0.5) else n for n in s]
                elif v < 0.5:
                    s = []
            dtype = self.main if k == 0 or self.chance(0.8) else self.choice(
                [F32, I32, U32, BOOL])
            self.new_input(tuple(s), dtype)

    def n_ops(self) -> int:
        return 4 + self.r(10)

    def finish(self, outputs):
        prog = LargeProgram(self.seed, self.nodes, outputs, self.data, fdtype=self.fdtype,
                            width=self.width)
        fp._condition(prog, self, tries=3)
        return prog


def generate(seed) -> LargeProgram:
    """The large-tier program of ``seed`` (an int, or a tuple of ints)."""
    rng = np.random.default_rng([0x1A26E] + ([seed] if isinstance(seed, int) else list(seed)))
    return LargeGenerator(rng, seed).build()


# --- what the programs reach (--stats) -------------------------------------------------

def _reductions_traced(text: str) -> int:
    return len(re.findall(r"\breduce_(?:sum|max|min|and|or|prod)\[", text))


def kernel_stats(prog: Program, profile: str = "fusionjit") -> dict:
    """What ``prog`` compiles to under ``profile``: kernels, parallel kernels, vector widths,
    row kernels (a loop kernel with a reduction inside: fusionjit's row fusion) and tree
    reductions (more reductions after the passes than traced)."""
    import fusionjit
    with prog.config():
        fn = prog.function()
        args = prog.jit_args()
        compiled = fusionjit.jit(fn, fusion=profile).lower(*args).compile()
        text = compiled.as_text()
        traced = _reductions_traced(str(fusionjit.make_ir(fn)(*args)))
    kernels = compiled.kernels
    comps, name = {}, None
    for line in text.splitlines():
        m = re.match(r"%(\S+) \(", line)
        if m:
            name = m.group(1)
            comps[name] = []
        elif name is not None:
            comps[name].append(line)
    loops = re.findall(r"kind=kLoop, calls=%(\S+?)[,\s]", text)
    rows = sum(any(" reduce(" in line for line in comps.get(c, [])) for c in loops)
    compiled_reduces = sum(1 for lines in comps.values() for line in lines
                           if " reduce(" in line)
    return {"kernels": len(kernels), "parallel": sum(bool(k["parallel"]) for k in kernels),
            "widths": sorted({k["width"] for k in kernels}),
            "max_units": max((k["units"] for k in kernels), default=0),
            "row_kernels": rows, "tree": max(0, compiled_reduces - traced)}


def _clamps(prog: Program):
    """(dynamic slice starts clamped, starts in range) in the NumPy evaluation."""
    seen = [0, 0]
    if prog.numpy_lax is None:
        return seen
    starts = NumpyLax._starts

    def counting(shape, sizes, given):
        out = starts(shape, sizes, given)
        for s, o in zip(given, out):
            seen[int(s) == o] += 1
        return out
    NumpyLax._starts = staticmethod(counting)
    try:
        prog.numpy(np.float32)
    finally:
        NumpyLax._starts = staticmethod(starts)
    return seen


def print_stats(seeds, tier: str = "large"):
    """Prints, over ``seeds``, how many programs reach each threshold and which ops and
    dtypes they use."""
    import collections
    import time
    t0 = time.time()
    count = collections.Counter()
    ops = collections.Counter()
    sizes = []
    n = 0
    for seed in seeds:
        prog = fp.generate(seed, tier)
        n += 1
        st = kernel_stats(prog)
        fd = getattr(prog, "fdtype", "f32")
        count["fragile"] += bool(prog.fragile)
        count["parallel kernel"] += st["parallel"] > 0
        count["tree reduction"] += st["tree"] > 0
        count["row kernel"] += st["row_kernels"] > 0
        count[f"row kernel, F = {fd}"] += st["row_kernels"] > 0
        main = {nd.dtype for nd in prog.nodes if nd.op == "input" and nd.shape}
        for d in main:
            count[f"tree reduction, {prog.dt_short(d)} input"] += st["tree"] > 0
            count[f"parallel kernel, {prog.dt_short(d)} input"] += st["parallel"] > 0
        clamped = _clamps(prog)
        count["traced start clamped"] += clamped[0] > 0
        count["traced start in range"] += clamped[1] > 0
        for w in st["widths"]:
            count[f"kernel width {w}"] += 1
        dts = {prog.dt_short(nd.dtype) for nd in prog.nodes}
        for d in dts:
            count[f"has {d}"] += 1
        count[f"F = {getattr(prog, 'fdtype', 'f32')}"] += 1
        count[f"vector_width {getattr(prog, 'width', 0)}"] += 1
        for nd in prog.nodes:
            if nd.op != "input":
                ops[nd.op] += 1
        big = max(_size(nd.shape) for nd in prog.nodes)
        sizes.append(big)
        count["node >= 65536 elements"] += big >= PARALLEL_MIN
        count["node >= 1M elements"] += big >= 1 << 20
    print(f"[stats] {n} {tier}-tier programs in {time.time() - t0:.0f} s (generation and "
          f"fusion='fusionjit' compilation)")
    for k, v in sorted(count.items()):
        print(f"  {k:28s} {v:6d}  ({100.0 * v / max(n, 1):.0f}%)")
    print("  ops: " + ", ".join(f"{k} {v}" for k, v in ops.most_common()))
    if sizes:
        print(f"  largest node per program: median {int(np.median(sizes))}, max {max(sizes)}")
