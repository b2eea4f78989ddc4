// Cloning and inlining (see clone.h).
#include "ir/clone.h"

#include "support/error.h"

namespace fj {
namespace {

// The computations an instruction's copy calls: copies of loops', branches' and fusions'
// computations, the same combiners.
std::vector<Computation*> CalledCopies(const Instruction* instr) {
  std::vector<Computation*> called = instr->called_computations();
  bool owns = instr->opcode() == Opcode::kWhile || instr->opcode() == Opcode::kConditional ||
              instr->opcode() == Opcode::kFusion;
  if (!owns) return called;
  for (Computation*& c : called) c = CloneComputation(*c, c->name());
  return called;
}

Instruction* CopyInto(const Instruction* instr, Computation* into, std::vector<Instruction*> operands) {
  std::unique_ptr<Instruction> copy = instr->CloneWithNewOperands(instr->shape(), std::move(operands));
  copy->set_called_computations(CalledCopies(instr));
  Instruction* added = into->AddInstruction(std::move(copy), instr->name());
  if (added->opcode() == Opcode::kFusion) added->fused_computation()->set_fusion_instruction(added);
  return added;
}

}  // namespace

Computation* CloneComputation(const Computation& c, const std::string& name_hint) {
  Module* module = c.parent();
  Computation* copy = module->AddComputation(name_hint);
  std::unordered_map<const Instruction*, Instruction*> map;
  for (const Instruction* instr : c.MakePostOrder()) {
    std::vector<Instruction*> ops;
    for (const Instruction* op : instr->operands()) ops.push_back(map.at(op));
    map[instr] = CopyInto(instr, copy, std::move(ops));
  }
  copy->set_root(map.at(c.root()));
  return copy;
}

Instruction* InlineComputation(const Computation& callee, Computation* into,
                               const std::vector<Instruction*>& arguments,
                               std::unordered_map<const Instruction*, Instruction*>* map_out) {
  FJ_CHECK(static_cast<int>(arguments.size()) == callee.num_parameters(), "inlining ", callee.name());
  std::unordered_map<const Instruction*, Instruction*> map;
  for (int i = 0; i < callee.num_parameters(); ++i) map[callee.parameter(i)] = arguments[i];
  for (const Instruction* instr : callee.MakePostOrder()) {
    if (instr->opcode() == Opcode::kParameter) continue;
    std::vector<Instruction*> ops;
    for (const Instruction* op : instr->operands()) ops.push_back(map.at(op));
    map[instr] = CopyInto(instr, into, std::move(ops));
  }
  if (map_out) *map_out = map;
  return map.at(callee.root());
}

}  // namespace fj
