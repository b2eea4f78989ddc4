// Reducing a loop's stacked output row by row inside the loop (see loop_output_reduction.h).
#include "passes/loop_output_reduction.h"

#include "analysis/loop_analysis.h"
#include "passes/loop_rewrite.h"

namespace fj {
namespace {

// The one reduce that reads element k of `loop`'s result, if it reduces every dimension but
// the leading (step) one from a constant init; else null.
Instruction* RowReduction(const Instruction* loop, int64_t k) {
  Instruction* reduce = nullptr;
  for (Instruction* u : loop->users()) {
    if (u->opcode() != Opcode::kGetTupleElement) return nullptr;
    if (u->tuple_index() != k) continue;
    if (reduce || u->user_count() != 1 || u->IsRoot()) return nullptr;
    reduce = u->users()[0];
  }
  if (!reduce || reduce->opcode() != Opcode::kReduce || reduce->operand_count() != 2 ||
      reduce->operand(1)->opcode() != Opcode::kConstant) {
    return nullptr;
  }
  const int rank = reduce->operand(0)->shape().rank();
  std::vector<int64_t> rows;
  for (int d = 1; d < rank; ++d) rows.push_back(d);
  return rank >= 2 && reduce->dimensions() == rows ? reduce : nullptr;
}

// Whether body root element k writes one row per step into the element itself: a
// dynamic-update-slice of the parameter's element k by a [1, ...] update at (i, 0, ...).
const Instruction* RowWrite(const Computation& body, int64_t k) {
  const Instruction* r = body.root()->operand(static_cast<int>(k));
  if (r->opcode() != Opcode::kDynamicUpdateSlice) return nullptr;
  const Instruction* buffer = r->operand(0);
  if (buffer->opcode() != Opcode::kGetTupleElement || buffer->tuple_index() != k ||
      buffer->operand(0)->opcode() != Opcode::kParameter || buffer->user_count() != 1) {
    return nullptr;
  }
  if (r->operand(1)->shape().dim(0) != 1) return nullptr;
  for (int s = 3; s < r->operand_count(); ++s) {
    if (IntegerConstant(r->operand(s)) != 0) return nullptr;
  }
  return r;
}

bool ReduceRowsInLoop(Instruction* loop) {
  Instruction* init = loop->operand(0);
  const Computation& body = *loop->while_body();
  if (init->opcode() != Opcode::kTuple || body.root()->opcode() != Opcode::kTuple) return false;
  const int n = init->operand_count();
  for (int k = 0; k < n; ++k) {
    Instruction* reduce = RowReduction(loop, k);
    if (!reduce || !RowWrite(body, k)) continue;
    Builder b(loop->parent());
    // Rows the loop does not write keep the initial value's rows, reduced the same way.
    Instruction* first = b.Add(Opcode::kReduce, {init->operand(k), reduce->operand(1)}, reduce->attrs(),
                               reduce->called_computations());
    std::vector<Instruction*> elems(init->operands().begin(), init->operands().end());
    elems.push_back(first);
    Instruction* state = b.Tuple(elems);
    // The old state is the new one's first n elements; each step also reduces the row it
    // writes to element k whole, into the new element (the old one is then dead).
    Unpack unpack = [&](Builder& nb, Instruction* p) {
      std::vector<Instruction*> old;
      for (int j = 0; j < n; ++j) old.push_back(nb.GetTupleElement(p, j));
      return old;
    };
    Repack repack = [&](Builder& nb, Instruction* p, Instruction* root) {
      Instruction* write = root->operand(k);
      Instruction* update = write->operand(1);
      std::vector<int64_t> all(update->shape().rank());
      for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int64_t>(d);
      Instruction* row = nb.Reduce(update, nb.Constant(reduce->operand(1)->literal()), all, reduce->to_apply());
      row->set_metadata(reduce->metadata());
      std::vector<Instruction*> next(root->operands().begin(), root->operands().end());
      next.push_back(nb.Add(Opcode::kDynamicUpdateSlice, {nb.GetTupleElement(p, n), nb.Reshape(row, {1}), write->operand(2)}));
      return nb.Tuple(next);
    };
    Instruction* rewritten = RebuildLoop(loop, state, unpack, repack);
    ReplaceLoop(loop, [&](Builder& pb, int64_t j) { return pb.GetTupleElement(rewritten, j); });
    // `reduce` read the old rows (now through a get-tuple-element of the new loop).
    Instruction* old_rows = reduce->operand(0);
    reduce->ReplaceAllUsesWith(b.GetTupleElement(rewritten, n));
    reduce->parent()->RemoveInstruction(reduce);
    old_rows->parent()->RemoveInstruction(old_rows);
    return true;
  }
  return false;
}

}  // namespace

bool LoopOutputReductionPass::Run(Module& module) {
  // One output of each loop per run (the loop is rebuilt); the pipeline runs to a fixed point.
  return RewriteLoops(module, ReduceRowsInLoop);
}

}  // namespace fj
