// Algebraic simplification (see simplify.h). Each rule rewrites one instruction into an
// existing value or a simpler instruction; DCE cleans up what becomes dead.
#include "passes/simplify.h"

#include <algorithm>

#include "ir/builder.h"

namespace fj {
namespace {

// The scalar value of a constant, or of a broadcast of a scalar constant, if it is a
// splat equal to `value`.
bool IsConstantValue(const Instruction* i, double value) {
  while (i->opcode() == Opcode::kBroadcast || i->opcode() == Opcode::kReshape) i = i->operand(0);
  if (i->opcode() != Opcode::kConstant) return false;
  return i->literal().IsAll(value);
}

// The start indices of a dynamic slice or update (operands from `first` on), clamped as
// the op clamps them, if every one is a constant; empty otherwise.
std::vector<int64_t> ConstantStarts(const Instruction* op, int first, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> starts;
  const Shape& x = op->operand(0)->shape();
  for (int k = 0; k < x.rank(); ++k) {
    const Instruction* i = op->operand(first + k);
    if (i->opcode() != Opcode::kConstant) return {};
    starts.push_back(std::min(std::max<int64_t>(i->literal().GetInt64(0), 0), x.dim(k) - sizes[k]));
  }
  return starts;
}

// Whether the slice `s` of a `shape` array reads the box [starts, starts + sizes):
// kNone, kAll (it reads nothing else) or kSome.
enum class Overlap { kNone, kAll, kSome };
Overlap SliceOverlap(const SliceConfig& s, const Shape& shape, const std::vector<int64_t>& starts,
                     const std::vector<int64_t>& sizes) {
  bool all = true;
  for (int k = 0; k < shape.rank(); ++k) {
    int64_t count = shape.dim(k);
    if (count == 0) return Overlap::kSome;  // reads nothing: leave it to other rules
    int64_t first = s.starts[k];
    int64_t last = first + (count - 1) * s.strides[k];
    int64_t lo = starts[k];
    int64_t hi = lo + sizes[k];  // exclusive
    // The first index the slice reads at or after lo.
    int64_t next = first >= lo ? first : first + (lo - first + s.strides[k] - 1) / s.strides[k] * s.strides[k];
    if (next >= hi || next > last) return Overlap::kNone;
    all = all && first >= lo && last < hi;
  }
  return all ? Overlap::kAll : Overlap::kSome;
}

// slice(dynamic-update-slice(x, u, constant starts)): a slice that reads none of the update
// reads x, one that reads only the update reads u. Unrolled scans stack their outputs with
// chains of such updates; a program that then reads one step's output no longer computes
// (and fuses) every step's.
Instruction* SliceOfUpdate(Instruction* slice, Builder& b) {
  Instruction* x = slice->operand(0);
  const SliceConfig& s = slice->attrs().slice;
  while (x->opcode() == Opcode::kDynamicUpdateSlice && x->shape().rank() > 0) {
    Instruction* update = x->operand(1);
    std::vector<int64_t> starts = ConstantStarts(x, 2, update->shape().dims());
    if (starts.empty()) break;
    Overlap overlap = SliceOverlap(s, slice->shape(), starts, update->shape().dims());
    if (overlap == Overlap::kSome) break;
    if (overlap == Overlap::kNone) {
      x = x->operand(0);
      continue;
    }
    InstructionAttrs a = slice->attrs();
    for (int k = 0; k < x->shape().rank(); ++k) {
      a.slice.starts[k] -= starts[k];
      a.slice.limits[k] = std::min(a.slice.limits[k] - starts[k], update->shape().dim(k));
    }
    return b.Add(Opcode::kSlice, {update}, a);
  }
  return x == slice->operand(0) ? nullptr : b.Add(Opcode::kSlice, {x}, slice->attrs());
}

bool IsIdentityPermutation(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// Whether transpose `t` keeps the order of its operand's dimensions larger than one: then
// it only renames dimensions (moves ones) and the element order is unchanged, a reshape.
bool MovesOnlyUnitDims(const Instruction* t) {
  const Shape& in = t->operand(0)->shape();
  int64_t last = -1;
  for (int64_t d : t->dimensions()) {
    if (in.dim(static_cast<int>(d)) == 1) continue;
    if (d < last) return false;
    last = d;
  }
  return true;
}

// Whether transposing `x` costs nothing: x is a transpose (the two compose), a broadcast or
// an iota (each takes the permutation into its dimensions), or an elementwise op read by
// `reader` alone whose array operands all transpose for nothing. A transpose of such a value
// is then pushed into its leaves, so that a kernel reads the data in the order it writes it
// (an outer product computed in one order and transposed, as a dot without contracting
// dimensions is, becomes a product of broadcasts in the result's order).
bool TransposesForNothing(const Instruction* x, const Instruction* reader, int depth) {
  Opcode o = x->opcode();
  if (o == Opcode::kTranspose || o == Opcode::kBroadcast || o == Opcode::kIota) return true;
  if (!IsElementwise(o) || depth == 0 || !x->called_computations().empty()) return false;
  for (const Instruction* u : x->users()) {
    if (u != reader) return false;
  }
  for (const Instruction* op : x->operands()) {
    if (!op->shape().IsScalar() && !TransposesForNothing(op, x, depth - 1)) return false;
  }
  return true;
}

Instruction* PushTransposeInto(Builder& b, Instruction* x, const std::vector<int64_t>& perm);

// transpose(x, perm) for an x that TransposesForNothing: result dimension k is x's
// dimension perm[k]. What it builds carries x's source.
Instruction* PushTranspose(Builder& b, Instruction* x, const std::vector<int64_t>& perm) {
  Instruction* r = PushTransposeInto(b, x, perm);
  bool built = x->operand_count() == 0 || r != x->operand(0);  // not the transpose's operand, met again
  if (built && r->metadata().empty()) r->set_metadata(x->metadata());
  return r;
}

Instruction* PushTransposeInto(Builder& b, Instruction* x, const std::vector<int64_t>& perm) {
  const int rank = static_cast<int>(perm.size());
  std::vector<int64_t> dims(rank), inverse(rank);
  for (int k = 0; k < rank; ++k) {
    dims[k] = x->shape().dim(static_cast<int>(perm[k]));
    inverse[perm[k]] = k;
  }
  Shape shape(x->dtype(), dims);
  InstructionAttrs a = x->attrs();
  switch (x->opcode()) {
    case Opcode::kTranspose: {
      a.dimensions.clear();
      for (int64_t d : perm) a.dimensions.push_back(x->dimensions()[d]);
      return IsIdentityPermutation(a.dimensions) ? x->operand(0)
                                                 : b.Add(Opcode::kTranspose, {x->operand(0)}, a);
    }
    case Opcode::kBroadcast: {
      // Operand dimension i lands on result dimension inverse[d_i]; the broadcast's
      // dimensions must increase, so the (smaller) operand is transposed where they do not.
      const std::vector<int64_t>& bd = x->dimensions();
      std::vector<int64_t> order(bd.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
      std::sort(order.begin(), order.end(),
                [&](int64_t i, int64_t j) { return inverse[bd[i]] < inverse[bd[j]]; });
      Instruction* op = x->operand(0);
      if (!IsIdentityPermutation(order)) {
        InstructionAttrs t;
        t.dimensions = order;
        op = b.Add(Opcode::kTranspose, {op}, t);
        op->set_metadata(x->metadata());
      }
      std::vector<int64_t> out_dims;
      for (int64_t i : order) out_dims.push_back(inverse[bd[i]]);
      return b.Broadcast(op, dims, out_dims);
    }
    case Opcode::kIota:
      a.dimensions = {inverse[x->dimensions()[0]]};
      return b.Add(Opcode::kIota, {}, a, {}, &shape);
    default: {
      std::vector<Instruction*> ops;
      for (Instruction* op : x->operands()) {
        ops.push_back(op->shape().IsScalar() ? op : PushTranspose(b, op, perm));
      }
      return b.Add(x->opcode(), ops, a, {}, &shape);
    }
  }
}

// Returns the value `instr` can be replaced with, or null. May add new instructions.
// A sum of zero-padded pieces of one array that cover disjoint runs of one dimension (the
// gradient of a split, or of slices: each slice's transpose is a pad) as the concatenate of
// the pieces, zeros in the gaps. Summed, every element of the output computed every
// piece: an LSTM's gate gradients 3 times over, and 1.5-3.6x JAX's time. At the root of the
// sum only (an add whose user is another add is part of its user's sum).
Instruction* ConcatenateOfPads(Instruction* add, Builder& b) {
  if (add->users().size() == 1 && add->users()[0]->opcode() == Opcode::kAdd) return nullptr;
  std::vector<Instruction*> pads;
  std::vector<Instruction*> work = {add};
  while (!work.empty()) {
    Instruction* x = work.back();
    work.pop_back();
    if (x->opcode() == Opcode::kAdd && (x == add || x->users().size() == 1)) {
      work.push_back(x->operand(0));
      work.push_back(x->operand(1));
    } else if (x->opcode() == Opcode::kPad && IsConstantValue(x->operand(1), 0)) {
      pads.push_back(x);
    } else {
      return nullptr;
    }
  }
  if (pads.size() < 2 || pads.size() > 64) return nullptr;
  int dim = -1;
  for (const Instruction* p : pads) {
    const std::vector<PadDim>& pd = p->attrs().padding;
    for (int k = 0; k < static_cast<int>(pd.size()); ++k) {
      if (pd[k].interior != 0 || pd[k].low < 0 || pd[k].high < 0) return nullptr;
      if (pd[k].low == 0 && pd[k].high == 0) continue;
      if (dim >= 0 && dim != k) return nullptr;
      dim = k;
    }
  }
  if (dim < 0) return nullptr;
  std::sort(pads.begin(), pads.end(), [dim](const Instruction* a, const Instruction* c) {
    return a->attrs().padding[dim].low < c->attrs().padding[dim].low;
  });
  const Shape& shape = add->shape();
  std::vector<Instruction*> pieces;
  int64_t at = 0;
  auto zeros = [&](int64_t n) {
    std::vector<int64_t> dims = shape.dims();
    dims[dim] = n;
    return b.Broadcast(b.ScalarConstant(shape.dtype(), 0), dims, {});
  };
  for (Instruction* p : pads) {
    int64_t low = p->attrs().padding[dim].low;
    if (low < at) return nullptr;  // (overlapping pieces add up)
    if (low > at) pieces.push_back(zeros(low - at));
    pieces.push_back(p->operand(0));
    at = low + p->operand(0)->shape().dim(dim);
  }
  if (at < shape.dim(dim)) pieces.push_back(zeros(shape.dim(dim) - at));
  InstructionAttrs attrs;
  attrs.dimensions = {dim};
  return b.Add(Opcode::kConcatenate, pieces, attrs);
}

Instruction* Simplify(Instruction* instr) {
  Computation* c = instr->parent();
  Builder b(c);
  const Shape& shape = instr->shape();
  auto same_shape = [&](Instruction* x) { return x->shape() == shape ? x : nullptr; };
  Instruction* x = instr->operand_count() > 0 ? instr->operand(0) : nullptr;
  Instruction* y = instr->operand_count() > 1 ? instr->operand(1) : nullptr;
  switch (instr->opcode()) {
    case Opcode::kAdd:
      if (IsConstantValue(y, 0)) return same_shape(x);
      if (IsConstantValue(x, 0)) return same_shape(y);
      return ConcatenateOfPads(instr, b);
    case Opcode::kSubtract:
      return IsConstantValue(y, 0) ? same_shape(x) : nullptr;
    case Opcode::kMultiply:
      if (IsConstantValue(y, 1)) return same_shape(x);
      if (IsConstantValue(x, 1)) return same_shape(y);
      return nullptr;
    case Opcode::kDivide:
      return IsConstantValue(y, 1) ? same_shape(x) : nullptr;
    case Opcode::kMaximum:
    case Opcode::kMinimum:
    case Opcode::kAnd:
    case Opcode::kOr:
      return x == y ? x : nullptr;  // idempotent (max(NaN, NaN) is NaN)
    case Opcode::kNegate:
    case Opcode::kNot:
      return x->opcode() == instr->opcode() ? x->operand(0) : nullptr;
    case Opcode::kConvert:
    case Opcode::kCopy:
      return same_shape(x);
    case Opcode::kReshape:
      if (x->shape() == shape) return x;
      if (x->opcode() == Opcode::kReshape) {
        Instruction* inner = x->operand(0);
        return inner->shape() == shape ? inner : b.Reshape(inner, shape.dims());
      }
      return nullptr;
    case Opcode::kTranspose: {
      if (IsIdentityPermutation(instr->dimensions())) return x;
      if (MovesOnlyUnitDims(instr)) return b.Reshape(x, shape.dims());
      if (x->opcode() == Opcode::kTranspose) {
        std::vector<int64_t> perm;
        for (int64_t d : instr->dimensions()) perm.push_back(x->dimensions()[d]);
        InstructionAttrs a;
        a.dimensions = perm;
        return b.Add(Opcode::kTranspose, {x->operand(0)}, a);
      }
      if (TransposesForNothing(x, instr, 8)) return PushTranspose(b, x, instr->dimensions());
      return nullptr;
    }
    case Opcode::kBroadcast: {
      if (x->shape() == shape && IsIdentityPermutation(instr->dimensions())) return x;
      if (x->opcode() == Opcode::kBroadcast) {
        std::vector<int64_t> dims;
        for (int64_t d : x->dimensions()) dims.push_back(instr->dimensions()[d]);
        return b.Broadcast(x->operand(0), shape.dims(), dims);
      }
      return nullptr;
    }
    case Opcode::kSlice: {
      if (x->opcode() == Opcode::kDynamicUpdateSlice) return SliceOfUpdate(instr, b);
      if (x->opcode() == Opcode::kTranspose) {
        // The slice of the transposed array is the transposed slice of the array.
        const std::vector<int64_t>& perm = x->dimensions();
        const SliceConfig& s = instr->attrs().slice;
        InstructionAttrs a;
        a.slice.starts.resize(perm.size());
        a.slice.limits.resize(perm.size());
        a.slice.strides.resize(perm.size());
        for (size_t d = 0; d < perm.size(); ++d) {
          a.slice.starts[perm[d]] = s.starts[d];
          a.slice.limits[perm[d]] = s.limits[d];
          a.slice.strides[perm[d]] = s.strides[d];
        }
        InstructionAttrs t;
        t.dimensions = perm;
        return b.Add(Opcode::kTranspose, {b.Add(Opcode::kSlice, {x->operand(0)}, a)}, t);
      }
      const SliceConfig& s = instr->attrs().slice;
      for (int i = 0; i < x->shape().rank(); ++i) {
        if (s.starts[i] != 0 || s.limits[i] != x->shape().dim(i) || s.strides[i] != 1) return nullptr;
      }
      return x;
    }
    case Opcode::kDynamicSlice: {
      if (x->opcode() == Opcode::kTranspose) {
        // As a slice: the array's own dynamic slice, transposed (each start and size goes
        // to the dimension it indexes; the clamping is per dimension either way).
        const std::vector<int64_t>& perm = x->dimensions();
        std::vector<Instruction*> operands(perm.size() + 1);
        operands[0] = x->operand(0);
        InstructionAttrs a;
        a.dimensions.resize(perm.size());
        for (size_t d = 0; d < perm.size(); ++d) {
          operands[perm[d] + 1] = instr->operand(static_cast<int>(d) + 1);
          a.dimensions[perm[d]] = shape.dim(static_cast<int>(d));
        }
        InstructionAttrs t;
        t.dimensions = perm;
        return b.Add(Opcode::kTranspose, {b.Add(Opcode::kDynamicSlice, operands, a)}, t);
      }
      // At constant starts (an unrolled loop's counter), a static slice.
      std::vector<int64_t> starts = ConstantStarts(instr, 1, shape.dims());
      if (starts.empty()) return nullptr;
      InstructionAttrs a;
      a.slice.starts = starts;
      for (int k = 0; k < shape.rank(); ++k) a.slice.limits.push_back(starts[k] + shape.dim(k));
      a.slice.strides.assign(shape.rank(), 1);
      return b.Add(Opcode::kSlice, {x}, a);
    }
    case Opcode::kConcatenate:
      return instr->operand_count() == 1 ? x : nullptr;
    case Opcode::kSelect: {
      if (instr->operand(1) == instr->operand(2)) return instr->operand(1);
      if (IsConstantValue(x, 1)) return instr->operand(1);
      if (IsConstantValue(x, 0)) return instr->operand(2);
      return nullptr;
    }
    case Opcode::kGetTupleElement:
      if (x->opcode() == Opcode::kTuple) return x->operand(instr->tuple_index());
      return nullptr;
    case Opcode::kPad: {
      for (const PadDim& p : instr->attrs().padding) {
        if (p.low != 0 || p.high != 0 || p.interior != 0) return nullptr;
      }
      return x;
    }
    default:
      return nullptr;
  }
}

}  // namespace

bool SimplifyPass::Run(Module& module) {
  bool changed = false;
  for (Computation* c : module.computations()) {
    if (c->IsFusionComputation()) continue;  // fused bodies were simplified before fusion
    for (Instruction* instr : c->MakePostOrder()) {
      if (instr->opcode() == Opcode::kParameter) continue;
      Instruction* replacement = Simplify(instr);
      if (replacement && replacement != instr) {
        replacement->set_metadata(replacement->metadata().empty() ? instr->metadata()
                                                                  : replacement->metadata());
        instr->ReplaceAllUsesWith(replacement);
        if (instr->users().empty() && instr != c->root()) c->RemoveInstruction(instr);
        changed = true;
      }
    }
  }
  return changed;
}

}  // namespace fj
