// Builder: adds shape-checked instructions to a computation. The Python lowering and the
// passes build IR through it; every method throws fj::Error on invalid input.
#pragma once

#include <string>
#include <vector>

#include "ir/module.h"

namespace fj {

class Builder {
 public:
  explicit Builder(Computation* computation) : comp_(computation) {}
  Computation* computation() const { return comp_; }

  // The general form: infers the shape (see shape_inference.h for when `requested` is
  // needed) and adds the instruction.
  Instruction* Add(Opcode opcode, std::vector<Instruction*> operands,
                   InstructionAttrs attrs = {}, std::vector<Computation*> called = {},
                   const Shape* requested = nullptr, const std::string& name_hint = "");

  Instruction* Parameter(int64_t number, const Shape& shape, const std::string& name = "");
  Instruction* Constant(Literal literal, const std::string& name = "");
  Instruction* ScalarConstant(DType dtype, double value);
  Instruction* Unary(Opcode op, Instruction* x);
  Instruction* Binary(Opcode op, Instruction* a, Instruction* b);
  Instruction* Compare(ComparisonDirection dir, Instruction* a, Instruction* b);
  Instruction* Select(Instruction* pred, Instruction* on_true, Instruction* on_false);
  Instruction* Convert(Instruction* x, DType dtype);
  Instruction* Broadcast(Instruction* x, const std::vector<int64_t>& out_dims,
                         const std::vector<int64_t>& broadcast_dims);
  Instruction* Reshape(Instruction* x, const std::vector<int64_t>& dims);
  Instruction* Tuple(std::vector<Instruction*> elements);
  Instruction* GetTupleElement(Instruction* tuple, int64_t index);
  Instruction* Reduce(Instruction* x, Instruction* init, const std::vector<int64_t>& dims,
                      Computation* combiner);

 private:
  Computation* comp_;
};

// A scalar combiner computation "(a: T[], b: T[]) -> T[] { op(a, b) }" for reductions.
Computation* MakeScalarCombiner(Module& module, Opcode op, DType dtype);

}  // namespace fj
