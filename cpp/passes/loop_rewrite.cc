// Helpers of the loop-state rewrites (see loop_rewrite.h).
#include "passes/loop_rewrite.h"

#include "ir/clone.h"

namespace fj {

bool RewriteLoops(Module& module, const std::function<bool(Instruction* loop)>& rewrite) {
  bool changed = false;
  for (Computation* c : module.ControlFlowComputations()) {
    std::vector<Instruction*> loops;
    for (Instruction* i : c->MakePostOrder()) {
      if (i->opcode() == Opcode::kWhile) loops.push_back(i);
    }
    for (Instruction* loop : loops) changed = rewrite(loop) || changed;
  }
  return changed;
}

Computation* WithNewState(const Computation& c, const Shape& state, const Unpack& unpack, const Repack& repack) {
  Computation* out = c.parent()->AddComputation(c.name());
  Builder b(out);
  Instruction* p = b.Parameter(0, state, "p");
  Instruction* root = InlineComputation(c, out, {b.Tuple(unpack(b, p))});
  out->set_root(repack ? repack(b, p, root) : root);
  return out;
}

Instruction* RebuildLoop(Instruction* loop, Instruction* init, const Unpack& unpack, const Repack& repack) {
  Computation* cond = WithNewState(*loop->while_condition(), init->shape(), unpack);
  Computation* body = WithNewState(*loop->while_body(), init->shape(), unpack, repack);
  Builder b(loop->parent());
  Instruction* rebuilt = b.Add(Opcode::kWhile, {init}, loop->attrs(), {cond, body});
  rebuilt->set_metadata(loop->metadata());
  return rebuilt;
}

void ReplaceLoop(Instruction* loop, const std::function<Instruction*(Builder& b, int64_t k)>& result) {
  Computation* parent = loop->parent();
  Builder b(parent);
  for (Instruction* u : std::vector<Instruction*>(loop->users())) {
    Instruction* value = result(b, u->tuple_index());
    value->set_metadata(u->metadata());
    u->ReplaceAllUsesWith(value);
    parent->RemoveInstruction(u);
  }
  parent->RemoveInstruction(loop);
}

}  // namespace fj
