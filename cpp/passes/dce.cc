// Dead code elimination (see dce.h).
#include "passes/dce.h"

#include <algorithm>

namespace fj {

bool DcePass::Run(Module& module) {
  bool changed = false;
  for (Computation* c : module.MakeComputationPostOrder()) {
    // Reverse post order visits users before operands, so one sweep removes whole chains.
    std::vector<Instruction*> order = c->MakePostOrder();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Instruction* instr = *it;
      if (instr->users().empty() && instr != c->root() &&
          instr->opcode() != Opcode::kParameter && !HasSideEffects(instr)) {
        c->RemoveInstruction(instr);
        changed = true;
      }
    }
  }
  size_t before = module.computations().size();
  module.RemoveUnreachableComputations();
  return changed || module.computations().size() != before;
}

}  // namespace fj
