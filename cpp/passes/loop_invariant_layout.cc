// Loop-invariant arrays carried untransposed (see loop_invariant_layout.h).
#include "passes/loop_invariant_layout.h"

#include "ir/builder.h"
#include "ir/clone.h"

namespace fj {
namespace {

// Whether every read of state element k in `c` is a (dynamic) slice of it.
bool OnlySliced(const Computation& c, int64_t k) {
  for (const Instruction* i : c.MakePostOrder()) {
    if (i->opcode() == Opcode::kParameter) {
      for (const Instruction* u : i->users()) {
        if (u->opcode() != Opcode::kGetTupleElement) return false;
      }
      continue;
    }
    if (i->opcode() != Opcode::kGetTupleElement || i->tuple_index() != k ||
        i->operand(0)->opcode() != Opcode::kParameter) {
      continue;
    }
    for (const Instruction* u : i->users()) {
      bool sliced = (u->opcode() == Opcode::kSlice || u->opcode() == Opcode::kDynamicSlice) && u->operand(0) == i;
      if (!sliced && !(u->IsRoot() && c.root()->opcode() == Opcode::kTuple &&
                       c.root()->operand(static_cast<int>(k)) == i)) {
        return false;
      }
    }
  }
  return true;
}

// A copy of `c` whose state element k holds `y` (the untransposed array): the old element is
// `y` transposed by `perm`, which the slices that read it then take apart (simplification).
Computation* Untransposed(const Computation& c, const Shape& state, int64_t k,
                          const std::vector<int64_t>& perm, bool body) {
  Computation* out = c.parent()->AddComputation(c.name());
  Builder b(out);
  Instruction* p = b.Parameter(0, state, "p");
  std::vector<Instruction*> old;
  const int n = static_cast<int>(state.tuple_shapes().size());
  for (int j = 0; j < n; ++j) {
    Instruction* e = b.GetTupleElement(p, j);
    if (j == k) {
      InstructionAttrs a;
      a.dimensions = perm;
      e = b.Add(Opcode::kTranspose, {e}, a);
    }
    old.push_back(e);
  }
  Instruction* root = InlineComputation(c, out, {b.Tuple(old)});
  if (body) {
    // The element is passed on unchanged: as the untransposed array.
    std::vector<Instruction*> elems(root->operands().begin(), root->operands().end());
    elems[k] = b.GetTupleElement(p, k);
    root = b.Tuple(elems);
  }
  out->set_root(root);
  return out;
}

bool Untranspose(Instruction* loop) {
  Instruction* init = loop->operand(0);
  const Computation& body = *loop->while_body();
  const Instruction* root = body.root();
  if (init->opcode() != Opcode::kTuple || root->opcode() != Opcode::kTuple) return false;
  for (const Instruction* u : loop->users()) {
    if (u->opcode() != Opcode::kGetTupleElement) return false;
  }
  for (int k = 0; k < init->operand_count(); ++k) {
    Instruction* t = init->operand(k);
    const Instruction* r = root->operand(k);
    bool invariant = r->opcode() == Opcode::kGetTupleElement && r->tuple_index() == k &&
                     r->operand(0)->opcode() == Opcode::kParameter;
    if (t->opcode() != Opcode::kTranspose || !invariant || !OnlySliced(body, k) ||
        !OnlySliced(*loop->while_condition(), k)) {
      continue;
    }
    Computation* parent = loop->parent();
    Builder b(parent);
    std::vector<Instruction*> elems(init->operands().begin(), init->operands().end());
    elems[k] = t->operand(0);
    Instruction* state = b.Tuple(elems);
    const std::vector<int64_t> perm = t->dimensions();
    Computation* cond = Untransposed(*loop->while_condition(), state->shape(), k, perm, false);
    Computation* new_body = Untransposed(body, state->shape(), k, perm, true);
    Instruction* rewritten = b.Add(Opcode::kWhile, {state}, loop->attrs(), {cond, new_body});
    rewritten->set_metadata(loop->metadata());
    for (Instruction* u : std::vector<Instruction*>(loop->users())) {
      Instruction* g = b.GetTupleElement(rewritten, u->tuple_index());
      if (u->tuple_index() == k) {
        InstructionAttrs a;
        a.dimensions = perm;
        g = b.Add(Opcode::kTranspose, {g}, a);
      }
      u->ReplaceAllUsesWith(g);
      parent->RemoveInstruction(u);
    }
    parent->RemoveInstruction(loop);
    return true;
  }
  return false;
}

}  // namespace

bool LoopInvariantLayoutPass::Run(Module& module) {
  bool changed = false;
  for (Computation* c : module.ControlFlowComputations()) {
    std::vector<Instruction*> loops;
    for (Instruction* i : c->MakePostOrder()) {
      if (i->opcode() == Opcode::kWhile) loops.push_back(i);
    }
    // One element of each loop per run (the loop is rebuilt); the pipeline runs to a fixed
    // point.
    for (Instruction* loop : loops) changed = Untranspose(loop) || changed;
  }
  return changed;
}

}  // namespace fj
