// Tree reduction (see tree_reduction.h).
#include "passes/tree_reduction.h"

#include <algorithm>

#include "ir/builder.h"

namespace fj {

bool TreeReductionPass::Run(Module& module) {
  bool changed = false;
  for (Computation* c : module.computations()) {
    if (c->IsFusionComputation()) continue;
    for (Instruction* reduce : c->MakePostOrder()) {
      if (reduce->opcode() != Opcode::kReduce || !reduce->shape().IsArray() || reduce->shape().rank() != 0) continue;
      Instruction* x = reduce->operand(0);
      Instruction* init = reduce->operand(1);
      int64_t n = x->shape().NumElements();
      if (n < 2 * kBlockElements) continue;
      int64_t blocks = std::min(kMaxBlocks, n / kBlockElements);
      int64_t per_block = (n + blocks - 1) / blocks;
      Builder b(c);
      const std::string& source = reduce->metadata();
      auto tagged = [&](Instruction* i) {
        i->set_metadata(source);
        return i;
      };
      Instruction* flat = x->shape().rank() == 1 ? x : tagged(b.Reshape(x, {n}));
      if (blocks * per_block != n) {
        // The init value is the combiner's identity: padding with it changes nothing.
        InstructionAttrs a;
        a.padding = {PadDim{0, blocks * per_block - n, 0}};
        flat = tagged(b.Add(Opcode::kPad, {flat, init}, a));
      }
      Instruction* rows = tagged(b.Reshape(flat, {blocks, per_block}));
      Instruction* partial = tagged(b.Reduce(rows, init, {1}, reduce->to_apply()));
      Instruction* total = tagged(b.Reduce(partial, init, {0}, reduce->to_apply()));
      reduce->ReplaceAllUsesWith(total);
      c->RemoveInstruction(reduce);
      changed = true;
    }
  }
  return changed;
}

}  // namespace fj
