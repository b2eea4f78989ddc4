// Fusion building blocks (see fusion_utils.h).
#include "fusion/fusion_utils.h"

#include <unordered_map>

#include "ir/builder.h"
#include "support/error.h"

namespace fj {

FusionKind KernelKindFor(const Instruction* instr) {
  switch (instr->opcode()) {
    case Opcode::kReduce:
    case Opcode::kArgMax:
    case Opcode::kArgMin:
      return FusionKind::kInput;
    case Opcode::kDot:
      return FusionKind::kOutput;
    default:
      return FusionKind::kLoop;
  }
}

bool NeedsKernel(const Instruction* instr) {
  switch (instr->opcode()) {
    case Opcode::kParameter:
    case Opcode::kConstant:
    case Opcode::kTuple:
    case Opcode::kGetTupleElement:
    case Opcode::kReshape:  // row-major buffers: a reshape is a bitcast, no data moves
    case Opcode::kFusion:
    case Opcode::kWhile:
    case Opcode::kConditional:
    case Opcode::kCall:
    case Opcode::kCustomCall:
      return false;
    default:
      return true;
  }
}

Instruction* WrapInFusion(Instruction* instr, FusionKind kind) {
  Computation* parent = instr->parent();
  Module* module = parent->parent();
  Computation* fused = module->AddComputation("fused_" + std::string(OpcodeName(instr->opcode())));
  Builder fb(fused);
  std::vector<Instruction*> fusion_operands;
  std::unordered_map<Instruction*, Instruction*> param_for;
  std::vector<Instruction*> new_operands;
  for (Instruction* op : instr->operands()) {
    auto it = param_for.find(op);
    if (it == param_for.end()) {
      Instruction* p = fb.Parameter(static_cast<int64_t>(fusion_operands.size()), op->shape(),
                                    "param_" + std::to_string(fusion_operands.size()));
      it = param_for.emplace(op, p).first;
      fusion_operands.push_back(op);
    }
    new_operands.push_back(it->second);
  }
  Instruction* clone =
      fused->AddInstruction(instr->CloneWithNewOperands(instr->shape(), new_operands), instr->name());
  fused->set_root(clone);

  InstructionAttrs attrs;
  attrs.fusion_kind = kind;
  Instruction* fusion = Builder(parent).Add(Opcode::kFusion, fusion_operands, attrs, {fused},
                                            nullptr, instr->name() + "_fusion");
  fusion->set_metadata(instr->metadata());
  instr->ReplaceAllUsesWith(fusion);
  parent->RemoveInstruction(instr);
  return fusion;
}

}  // namespace fj
