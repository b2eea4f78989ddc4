// Constant folding (see constant_folding.h), with the evaluator in analysis/.
#include "passes/constant_folding.h"

#include "analysis/evaluator.h"
#include "ir/builder.h"

namespace fj {
namespace {

// Large results stay computed: a big literal is memory traffic that fusion cannot remove.
constexpr int64_t kMaxFoldedElements = 1024;

// Whether the evaluator computes exactly the bits compiled code computes, so that a
// program gives the same result whether or not its inputs were constants. IEEE's exactly
// rounded operations (+ - * / sqrt fma, conversions, comparisons) and integer ops do; the
// transcendental functions (the evaluator calls libm, codegen its own polynomials) and
// floating-point sums and products (codegen's order of summation differs) do not, so they
// are left to run compiled: they are scalars or small, and LLVM hoists them out of loops.
bool FoldsExactly(const Instruction* instr) {
  Opcode op = instr->opcode();
  auto is_float = [](const Instruction* i) { return i->shape().IsArray() && IsFloat(i->dtype()); };
  if (IsTranscendental(op) && op != Opcode::kSqrt && op != Opcode::kRsqrt) {
    for (const Instruction* o : instr->operands()) {
      if (is_float(o)) return false;
    }
  }
  if (op == Opcode::kDot && is_float(instr)) return false;
  if (op == Opcode::kReduce && is_float(instr)) {
    Opcode combiner = instr->to_apply()->root()->opcode();
    if (combiner != Opcode::kMaximum && combiner != Opcode::kMinimum) return false;
  }
  return true;
}

bool ShouldFold(const Instruction* instr) {
  if (IsStructural(instr->opcode())) return false;
  if (!FoldsExactly(instr)) return false;
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
