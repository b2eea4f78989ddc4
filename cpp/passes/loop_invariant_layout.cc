// Loop-invariant arrays carried untransposed (see loop_invariant_layout.h).
#include "passes/loop_invariant_layout.h"

#include "passes/loop_rewrite.h"

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

bool Untranspose(Instruction* loop) {
  Instruction* init = loop->operand(0);
  const Computation& body = *loop->while_body();
  const Instruction* root = body.root();
  if (init->opcode() != Opcode::kTuple || root->opcode() != Opcode::kTuple) return false;
  for (const Instruction* u : loop->users()) {
    if (u->opcode() != Opcode::kGetTupleElement) return false;
  }
  const int n = init->operand_count();
  for (int k = 0; k < n; ++k) {
    Instruction* t = init->operand(k);
    const Instruction* r = root->operand(k);
    bool invariant = r->opcode() == Opcode::kGetTupleElement && r->tuple_index() == k &&
                     r->operand(0)->opcode() == Opcode::kParameter;
    if (t->opcode() != Opcode::kTranspose || !invariant || !OnlySliced(body, k) ||
        !OnlySliced(*loop->while_condition(), k)) {
      continue;
    }
    Builder b(loop->parent());
    const std::vector<int64_t> perm = t->dimensions();
    auto transposed = [&](Builder& nb, Instruction* x) {
      InstructionAttrs a;
      a.dimensions = perm;
      return nb.Add(Opcode::kTranspose, {x}, a);
    };
    std::vector<Instruction*> elems(init->operands().begin(), init->operands().end());
    elems[k] = t->operand(0);
    Instruction* state = b.Tuple(elems);
    // The old element is the carried array transposed, which the slices that read it take
    // apart (simplification); the body passes the array on as it is.
    Unpack unpack = [&](Builder& nb, Instruction* p) {
      std::vector<Instruction*> old;
      for (int j = 0; j < n; ++j) {
        Instruction* e = nb.GetTupleElement(p, j);
        old.push_back(j == k ? transposed(nb, e) : e);
      }
      return old;
    };
    Repack repack = [&](Builder& nb, Instruction* p, Instruction* old_root) {
      std::vector<Instruction*> next(old_root->operands().begin(), old_root->operands().end());
      next[k] = nb.GetTupleElement(p, k);
      return nb.Tuple(next);
    };
    Instruction* rewritten = RebuildLoop(loop, state, unpack, repack);
    ReplaceLoop(loop, [&](Builder& pb, int64_t j) {
      Instruction* g = pb.GetTupleElement(rewritten, j);
      return j == k ? transposed(pb, g) : g;
    });
    return true;
  }
  return false;
}

}  // namespace

bool LoopInvariantLayoutPass::Run(Module& module) {
  // One element of each loop per run (the loop is rebuilt); the pipeline runs to a fixed
  // point.
  return RewriteLoops(module, Untranspose);
}

}  // namespace fj
