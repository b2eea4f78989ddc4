// Algebraic simplification (see simplify.h). Each rule rewrites one instruction into an
// existing value or a simpler instruction; DCE cleans up what becomes dead.
#include "passes/simplify.h"

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

bool IsIdentityPermutation(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// Returns the value `instr` can be replaced with, or null. May add new instructions.
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
      return nullptr;
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
      if (x->opcode() == Opcode::kReshape) return b.Reshape(x->operand(0), shape.dims());
      return nullptr;
    case Opcode::kTranspose: {
      if (IsIdentityPermutation(instr->dimensions())) return x;
      if (x->opcode() == Opcode::kTranspose) {
        std::vector<int64_t> perm;
        for (int64_t d : instr->dimensions()) perm.push_back(x->dimensions()[d]);
        InstructionAttrs a;
        a.dimensions = perm;
        return b.Add(Opcode::kTranspose, {x->operand(0)}, a);
      }
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
      const SliceConfig& s = instr->attrs().slice;
      for (int i = 0; i < x->shape().rank(); ++i) {
        if (s.starts[i] != 0 || s.limits[i] != x->shape().dim(i) || s.strides[i] != 1) return nullptr;
      }
      return x;
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
