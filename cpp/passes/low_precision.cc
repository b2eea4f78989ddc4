// Low-precision float normalization (see low_precision.h).
#include "passes/low_precision.h"

#include "ir/builder.h"
#include "support/error.h"

namespace fj {
namespace {

bool IsLowArray(const Instruction* i) { return i->shape().IsArray() && IsLowPrecisionFloat(i->dtype()); }

// A scatter whose combiner keeps the update ("set") only moves bits.
bool SetsOnly(const Instruction* instr) {
  return instr->opcode() == Opcode::kScatter && instr->to_apply()->root()->opcode() == Opcode::kParameter;
}

bool ComputesOnLowPrecision(const Instruction* instr) {
  if (MovesBitsOnly(instr->opcode()) || SetsOnly(instr)) return false;
  if (IsLowArray(instr)) return true;
  for (const Instruction* o : instr->operands()) {
    if (IsLowArray(o)) return true;
  }
  return false;
}

// The f32 combiner that replaces a 16-bit reduction's (or scatter's) "(a, b) -> op(a, b)".
Computation* F32Combiner(Module& module, const Instruction& reduce) {
  const Instruction* root = reduce.to_apply()->root();
  if (root->operand_count() != 2 || root->operand(0)->opcode() != Opcode::kParameter ||
      root->operand(1)->opcode() != Opcode::kParameter) {
    ThrowUnimplemented("reduce over ", DTypeName(reduce.dtype()), " with the combiner ",
                       reduce.to_apply()->name(), " (only a single binary operation is supported)");
  }
  return MakeScalarCombiner(module, root->opcode(), DType::kF32);
}

void Rewrite(Module& module, Computation* c, Instruction* instr) {
  Builder b(c);
  std::vector<Instruction*> operands;
  for (Instruction* o : instr->operands()) operands.push_back(IsLowArray(o) ? b.Convert(o, DType::kF32) : o);
  for (Instruction* o : operands) {
    if (o->opcode() == Opcode::kConvert) o->set_metadata(instr->metadata());
  }
  Shape shape = IsLowArray(instr) ? instr->shape().WithDType(DType::kF32) : instr->shape();
  Instruction* wide = c->AddInstruction(instr->CloneWithNewOperands(shape, operands), instr->name());
  wide->set_metadata(instr->metadata());
  if (instr->opcode() == Opcode::kReduce || instr->opcode() == Opcode::kScatter) {
    wide->set_called_computation(0, F32Combiner(module, *instr));
  }
  Instruction* result = wide;
  if (IsLowArray(instr)) {
    result = b.Convert(wide, instr->dtype());
    result->set_metadata(instr->metadata());
  }
  instr->ReplaceAllUsesWith(result);
  c->RemoveInstruction(instr);
}

}  // namespace

bool LowPrecisionPass::Run(Module& module) {
  bool changed = false;
  // Reduction combiners are not visited: their reductions get f32 combiners of their own.
  for (Computation* c : module.ControlFlowComputations()) {
    for (Instruction* instr : c->MakePostOrder()) {
      if (!ComputesOnLowPrecision(instr)) continue;
      Rewrite(module, c, instr);
      changed = true;
    }
  }
  return changed;
}

}  // namespace fj
