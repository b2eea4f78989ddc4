// Constant folding (see constant_folding.h), with the evaluator in analysis/.
#include "passes/constant_folding.h"

#include "analysis/evaluator.h"
#include "ir/builder.h"

namespace fj {
namespace {

// Large results stay computed: a big literal is memory traffic that fusion cannot remove.
constexpr int64_t kMaxFoldedElements = 1024;

bool ShouldFold(const Instruction* instr) {
  if (IsStructural(instr->opcode())) return false;
  switch (instr->opcode()) {
    case Opcode::kConstant:
    case Opcode::kFusion:
      return false;
    case Opcode::kBroadcast:
    case Opcode::kIota:
      if (instr->shape().NumElements() > 1) return false;
      break;
    default:
      break;
  }
  if (!instr->shape().IsArray() || instr->shape().NumElements() > kMaxFoldedElements) {
    return false;
  }
  for (const Instruction* op : instr->operands()) {
    if (op->opcode() != Opcode::kConstant) return false;
  }
  return true;
}

}  // namespace

bool ConstantFoldingPass::Run(Module& module) {
  bool changed = false;
  for (Computation* c : module.computations()) {
    if (c->IsFusionComputation()) continue;
    for (Instruction* instr : c->MakePostOrder()) {
      if (!ShouldFold(instr)) continue;
      std::vector<const Literal*> operands;
      for (const Instruction* op : instr->operands()) operands.push_back(&op->literal());
      std::optional<Literal> value = EvaluateInstruction(*instr, operands);
      if (!value) continue;
      Instruction* folded = Builder(c).Constant(std::move(*value));
      folded->set_metadata(instr->metadata());
      instr->ReplaceAllUsesWith(folded);
      c->RemoveInstruction(instr);
      changed = true;
    }
  }
  return changed;
}

}  // namespace fj
