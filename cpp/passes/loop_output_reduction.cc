// Reducing a loop's stacked output row by row inside the loop (see loop_output_reduction.h).
#include "passes/loop_output_reduction.h"

#include "analysis/loop_analysis.h"
#include "ir/builder.h"
#include "ir/clone.h"

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

// A copy of `c` (a loop's body or condition) whose state has one more element; with
// `write` (the body), the new element takes each step's row written to element k, reduced
// like `reduce` reduces the rows after the loop.
Computation* WithReducedRows(const Computation& c, const Shape& state, int64_t k,
                             const Instruction* reduce, bool write) {
  Computation* out = c.parent()->AddComputation(c.name());
  Builder b(out);
  Instruction* p = b.Parameter(0, state, "p");
  const int n = static_cast<int>(state.tuple_shapes().size()) - 1;
  std::vector<Instruction*> old;
  for (int j = 0; j < n; ++j) old.push_back(b.GetTupleElement(p, j));
  Instruction* root = InlineComputation(c, out, {b.Tuple(old)});
  if (write) {
    Instruction* dus = root->operand(static_cast<int>(k));
    Instruction* update = dus->operand(1);
    std::vector<int64_t> all(update->shape().rank());
    for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int64_t>(d);
    Instruction* init = b.Constant(reduce->operand(1)->literal());
    Instruction* row = b.Reduce(update, init, all, reduce->to_apply());
    row->set_metadata(reduce->metadata());
    Instruction* next = b.Add(Opcode::kDynamicUpdateSlice,
                              {b.GetTupleElement(p, n), b.Reshape(row, {1}), dus->operand(2)});
    std::vector<Instruction*> elems(root->operands().begin(), root->operands().end());
    elems.push_back(next);
    root = b.Tuple(elems);
  }
  out->set_root(root);
  return out;
}

bool ReduceRowsInLoop(Instruction* loop) {
  Instruction* init = loop->operand(0);
  const Computation& body = *loop->while_body();
  if (init->opcode() != Opcode::kTuple || body.root()->opcode() != Opcode::kTuple) return false;
  for (int64_t k = 0; k < init->operand_count(); ++k) {
    Instruction* reduce = RowReduction(loop, k);
    if (!reduce || !RowWrite(body, k)) continue;
    Computation* parent = loop->parent();
    Builder b(parent);
    // Rows the loop does not write keep the initial value's rows, reduced the same way.
    Instruction* first = b.Add(Opcode::kReduce, {init->operand(static_cast<int>(k)), reduce->operand(1)},
                               reduce->attrs(), reduce->called_computations());
    std::vector<Instruction*> elems(init->operands().begin(), init->operands().end());
    elems.push_back(first);
    Instruction* state = b.Tuple(elems);
    Computation* cond = WithReducedRows(*loop->while_condition(), state->shape(), k, reduce, false);
    Computation* new_body = WithReducedRows(body, state->shape(), k, reduce, true);
    Instruction* rewritten = b.Add(Opcode::kWhile, {state}, loop->attrs(), {cond, new_body});
    rewritten->set_metadata(loop->metadata());
    for (Instruction* u : std::vector<Instruction*>(loop->users())) {
      Instruction* g = b.GetTupleElement(rewritten, u->tuple_index());
      u->ReplaceAllUsesWith(g);
      parent->RemoveInstruction(u);
    }
    Instruction* sums = b.GetTupleElement(rewritten, init->operand_count());
    // `reduce` read the old element k through a get-tuple-element, now of the new loop.
    Instruction* old_rows = reduce->operand(0);
    reduce->ReplaceAllUsesWith(sums);
    parent->RemoveInstruction(reduce);
    parent->RemoveInstruction(old_rows);
    parent->RemoveInstruction(loop);
    return true;
  }
  return false;
}

}  // namespace

bool LoopOutputReductionPass::Run(Module& module) {
  bool changed = false;
  for (Computation* c : module.ControlFlowComputations()) {
    std::vector<Instruction*> loops;
    for (Instruction* i : c->MakePostOrder()) {
      if (i->opcode() == Opcode::kWhile) loops.push_back(i);
    }
    // One output of each loop per run (the loop is rebuilt); the pipeline runs to a fixed
    // point.
    for (Instruction* loop : loops) changed = ReduceRowsInLoop(loop) || changed;
  }
  return changed;
}

}  // namespace fj
