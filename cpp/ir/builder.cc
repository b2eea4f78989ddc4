// Builder (see builder.h).
#include "ir/builder.h"

#include "ir/shape_inference.h"
#include "support/error.h"

namespace fj {

Instruction* Builder::Add(Opcode opcode, std::vector<Instruction*> operands,
                          InstructionAttrs attrs, std::vector<Computation*> called,
                          const Shape* requested, const std::string& name_hint) {
  std::vector<const Shape*> shapes;
  for (Instruction* op : operands) {
    if (op == nullptr) ThrowInvalidArgument(OpcodeName(opcode), ": null operand");
    if (op->parent() != comp_) {
      ThrowInvalidArgument(OpcodeName(opcode), ": operand %", op->name(),
                           " belongs to another computation");
    }
    shapes.push_back(&op->shape());
  }
  Shape shape = InferShape(opcode, shapes, attrs, called, requested);
  auto instr = Instruction::Create(opcode, shape, std::move(operands), std::move(attrs),
                                   std::move(called));
  Instruction* added = comp_->AddInstruction(std::move(instr), name_hint);
  if (opcode == Opcode::kFusion) added->fused_computation()->set_fusion_instruction(added);
  return added;
}

Instruction* Builder::Parameter(int64_t number, const Shape& shape, const std::string& name) {
  InstructionAttrs a;
  a.index = number;
  return Add(Opcode::kParameter, {}, a, {}, &shape, name.empty() ? "p" + std::to_string(number) : name);
}

Instruction* Builder::Constant(Literal literal, const std::string& name) {
  InstructionAttrs a;
  a.literal = std::make_shared<Literal>(std::move(literal));
  return Add(Opcode::kConstant, {}, a, {}, nullptr, name);
}

Instruction* Builder::ScalarConstant(DType dtype, double value) {
  return Constant(Literal::Scalar(dtype, value));
}

Instruction* Builder::Unary(Opcode op, Instruction* x) { return Add(op, {x}); }

Instruction* Builder::Binary(Opcode op, Instruction* a, Instruction* b) { return Add(op, {a, b}); }

Instruction* Builder::Compare(ComparisonDirection dir, Instruction* a, Instruction* b) {
  InstructionAttrs attrs;
  attrs.direction = dir;
  return Add(Opcode::kCompare, {a, b}, attrs);
}

Instruction* Builder::Select(Instruction* pred, Instruction* on_true, Instruction* on_false) {
  return Add(Opcode::kSelect, {pred, on_true, on_false});
}

Instruction* Builder::Convert(Instruction* x, DType dtype) {
  Shape s = x->shape().WithDType(dtype);
  return Add(Opcode::kConvert, {x}, {}, {}, &s);
}

Instruction* Builder::Broadcast(Instruction* x, const std::vector<int64_t>& out_dims,
                                const std::vector<int64_t>& broadcast_dims) {
  InstructionAttrs a;
  a.dimensions = broadcast_dims;
  Shape s(x->dtype(), out_dims);
  return Add(Opcode::kBroadcast, {x}, a, {}, &s);
}

Instruction* Builder::Reshape(Instruction* x, const std::vector<int64_t>& dims) {
  Shape s(x->dtype(), dims);
  return Add(Opcode::kReshape, {x}, {}, {}, &s);
}

Instruction* Builder::Tuple(std::vector<Instruction*> elements) {
  return Add(Opcode::kTuple, std::move(elements));
}

Instruction* Builder::GetTupleElement(Instruction* tuple, int64_t index) {
  InstructionAttrs a;
  a.index = index;
  return Add(Opcode::kGetTupleElement, {tuple}, a);
}

Instruction* Builder::Reduce(Instruction* x, Instruction* init, const std::vector<int64_t>& dims,
                             Computation* combiner) {
  InstructionAttrs a;
  a.dimensions = dims;
  return Add(Opcode::kReduce, {x, init}, a, {combiner});
}

Computation* MakeScalarCombiner(Module& module, Opcode op, DType dtype) {
  std::string name = std::string(OpcodeName(op)) + "_" + std::string(DTypeName(dtype));
  Computation* c = module.AddComputation(name);
  Builder b(c);
  Shape scalar = Shape::Scalar(dtype);
  Instruction* lhs = b.Parameter(0, scalar, "lhs");
  Instruction* rhs = b.Parameter(1, scalar, "rhs");
  c->set_root(b.Binary(op, lhs, rhs));
  return c;
}

}  // namespace fj
