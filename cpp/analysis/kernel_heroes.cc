// Kernel heroes (see kernel_heroes.h).
#include "analysis/kernel_heroes.h"

namespace fj {

std::vector<const Instruction*> KernelRoots(const Computation& fused) {
  const Instruction* root = fused.root();
  if (root->opcode() == Opcode::kTuple) return {root->operands().begin(), root->operands().end()};
  return {root};
}

bool IsReduction(const Instruction* instr) {
  Opcode op = instr->opcode();
  return op == Opcode::kReduce || op == Opcode::kArgMax || op == Opcode::kArgMin;
}

bool IsRowReduction(const Instruction* instr) {
  if (instr->opcode() != Opcode::kReduce || instr->dimensions().empty()) return false;
  return instr->dimensions().back() == instr->operand(0)->shape().rank() - 1;
}

const Instruction* ReductionHero(const Computation& fused, bool (*is_hero)(const Instruction*)) {
  for (const Instruction* r : KernelRoots(fused)) {
    const Instruction* x = r;
    while (!is_hero(x) && IsElementwise(x->opcode()) && x->opcode() != Opcode::kParameter) {
      // Follow the operand that has the root's shape (an epilogue keeps the output shape).
      const Instruction* next = nullptr;
      for (const Instruction* op : x->operands()) {
        if (op->shape().IsArray() && op->shape().SameDims(x->shape()) &&
            op->opcode() != Opcode::kParameter && op->opcode() != Opcode::kConstant) {
          next = op;
          if (is_hero(op)) break;
        }
      }
      if (!next) break;
      x = next;
    }
    if (is_hero(x)) return x;
  }
  return nullptr;
}

const Instruction* SideOutputHero(const Computation& fused) {
  const Instruction* hero = ReductionHero(fused, IsReduce);
  if (!hero || hero->dimensions().empty()) return nullptr;
  const Shape& in = hero->operand(0)->shape();
  const std::vector<int64_t>& rdims = hero->dimensions();
  for (size_t k = 0; k < rdims.size(); ++k) {
    if (rdims[rdims.size() - 1 - k] != in.rank() - 1 - static_cast<int64_t>(k)) return nullptr;
  }
  bool side = false;
  for (const Instruction* r : KernelRoots(fused)) {
    if (r->shape().SameDims(hero->shape())) continue;
    if (r->shape().NumElements() != in.NumElements()) return nullptr;
    side = true;
  }
  return side ? hero : nullptr;
}

const Shape& KernelShape(const Computation& fused) {
  const Instruction* hero = SideOutputHero(fused);
  return hero ? hero->shape() : KernelRoots(fused)[0]->shape();
}

const Shape* RowSpace(const Computation& fused) {
  const Instruction* hero = SideOutputHero(fused);
  const Shape& shape = hero ? hero->shape() : KernelRoots(fused)[0]->shape();
  if (!hero && shape.IsArray() && shape.rank() == 1) {
    // Rows reduced one output at a time: the row reduction the kernel is built around.
    const Instruction* row = ReductionHero(fused, IsReduce);
    if (!row || !IsRowReduction(row)) {
      row = nullptr;
      for (const Instruction* r : KernelRoots(fused)) {
        if (!row && IsReduce(r) && IsRowReduction(r)) row = r;
      }
    }
    for (const Instruction* r : KernelRoots(fused)) {
      if (!r->shape().SameDims(shape)) return nullptr;
    }
    bool one_dim = row && row->dimensions().size() == 1 && row->shape().SameDims(shape);
    return one_dim ? &row->operand(0)->shape() : nullptr;
  }
  if (!shape.IsArray() || shape.rank() < 2) return nullptr;
  for (const Instruction* r : KernelRoots(fused)) {
    bool side = hero && !r->shape().SameDims(shape);
    if (!side && !r->shape().SameDims(shape)) return nullptr;
  }
  return &shape;
}

bool ReadOnlyAtOwnPositions(const Instruction* value) {
  std::vector<const Instruction*> work = {value};
  while (!work.empty()) {
    const Instruction* v = work.back();
    work.pop_back();
    for (const Instruction* u : v->users()) {
      if (!IsElementwise(u->opcode()) || !u->shape().SameDims(value->shape())) return false;
      work.push_back(u);
    }
  }
  return true;
}

}  // namespace fj
