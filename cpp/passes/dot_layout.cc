// Dot layout (see dot_layout.h).
#include "passes/dot_layout.h"

#include <algorithm>

#include "ir/builder.h"

namespace fj {

bool DotLayoutPass::Run(Module& module) {
  bool changed = false;
  for (Computation* c : module.ControlFlowComputations()) {
    for (Instruction* dot : c->MakePostOrder()) {
      if (dot->opcode() != Opcode::kDot) continue;
      DotDims& dd = dot->mutable_attrs().dot;
      Instruction* rhs = dot->operand(1);
      int rank = rhs->shape().rank();
      std::vector<int64_t> order = dd.rhs_batch;
      order.insert(order.end(), dd.rhs_contracting.begin(), dd.rhs_contracting.end());
      if (static_cast<int>(order.size()) == rank) continue;  // no free dimension: nothing to vectorise
      for (int d = 0; d < rank; ++d) {
        if (std::find(order.begin(), order.end(), d) == order.end()) order.push_back(d);
      }
      bool canonical = true;
      for (int d = 0; d < rank; ++d) canonical = canonical && order[d] == d;
      if (canonical) continue;
      InstructionAttrs attrs;
      attrs.dimensions = order;
      Instruction* t = Builder(c).Add(Opcode::kTranspose, {rhs}, attrs);
      t->set_metadata(dot->metadata());
      int batch = static_cast<int>(dd.rhs_batch.size());
      for (int k = 0; k < batch; ++k) dd.rhs_batch[k] = k;
      for (size_t k = 0; k < dd.rhs_contracting.size(); ++k) dd.rhs_contracting[k] = batch + static_cast<int64_t>(k);
      dot->ReplaceOperandWith(1, t);
      changed = true;
    }
  }
  return changed;
}

}  // namespace fj
