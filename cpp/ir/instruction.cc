// Instructions: creation, cloning and graph edits (printing is in printer.cc).
#include "ir/instruction.h"

#include <algorithm>

#include "ir/computation.h"
#include "support/error.h"

namespace fj {

bool InstructionAttrs::operator==(const InstructionAttrs& o) const {
  if (!(dimensions == o.dimensions && slice == o.slice && dot == o.dot && gather == o.gather && scatter == o.scatter &&
        padding == o.padding && direction == o.direction && index == o.index &&
        fusion_kind == o.fusion_kind && custom_call_target == o.custom_call_target &&
        custom_call_config == o.custom_call_config && unroll == o.unroll &&
        trip_count == o.trip_count)) {
    return false;
  }
  if (static_cast<bool>(literal) != static_cast<bool>(o.literal)) return false;
  return !literal || *literal == *o.literal;
}

std::unique_ptr<Instruction> Instruction::Create(Opcode opcode, Shape shape,
                                                 std::vector<Instruction*> operands,
                                                 InstructionAttrs attrs,
                                                 std::vector<Computation*> called) {
  std::unique_ptr<Instruction> instr(new Instruction());
  instr->opcode_ = opcode;
  instr->shape_ = std::move(shape);
  instr->operands_ = std::move(operands);
  instr->attrs_ = std::move(attrs);
  instr->called_ = std::move(called);
  return instr;
}

std::unique_ptr<Instruction> Instruction::CloneWithNewOperands(
    const Shape& shape, std::vector<Instruction*> operands) const {
  auto clone = Create(opcode_, shape, std::move(operands), attrs_, called_);
  clone->metadata_ = metadata_;
  return clone;
}

bool Instruction::IsRoot() const { return parent_ && parent_->root() == this; }

Computation* Instruction::to_apply() const {
  FJ_CHECK(opcode_ == Opcode::kReduce || opcode_ == Opcode::kCall || opcode_ == Opcode::kScatter, name_);
  return called_.at(0);
}
Computation* Instruction::fused_computation() const {
  FJ_CHECK(opcode_ == Opcode::kFusion, name_);
  return called_.at(0);
}
Computation* Instruction::while_condition() const {
  FJ_CHECK(opcode_ == Opcode::kWhile, name_);
  return called_.at(0);
}
Computation* Instruction::while_body() const {
  FJ_CHECK(opcode_ == Opcode::kWhile, name_);
  return called_.at(1);
}

void Instruction::AddUser(Instruction* user) {
  if (std::find(users_.begin(), users_.end(), user) == users_.end()) users_.push_back(user);
}

void Instruction::RemoveUser(Instruction* user) {
  auto it = std::find(users_.begin(), users_.end(), user);
  if (it != users_.end()) users_.erase(it);
}

void Instruction::ReplaceOperandWith(int i, Instruction* new_operand) {
  Instruction* old = operands_[i];
  if (old == new_operand) return;
  operands_[i] = new_operand;
  if (std::find(operands_.begin(), operands_.end(), old) == operands_.end()) {
    old->RemoveUser(this);
  }
  new_operand->AddUser(this);
}

void Instruction::ReplaceAllUsesWith(Instruction* replacement) {
  FJ_CHECK(replacement != this);
  std::vector<Instruction*> users = users_;
  for (Instruction* user : users) {
    for (int i = 0; i < user->operand_count(); ++i) {
      if (user->operand(i) == this) user->ReplaceOperandWith(i, replacement);
    }
  }
  if (parent_ && parent_->root() == this) parent_->set_root(replacement);
}

void Instruction::AppendOperand(Instruction* operand) {
  operands_.push_back(operand);
  if (parent_) operand->AddUser(this);
}

void Instruction::RemoveOperand(int i) {
  Instruction* old = operands_[i];
  operands_.erase(operands_.begin() + i);
  if (std::find(operands_.begin(), operands_.end(), old) == operands_.end()) old->RemoveUser(this);
}

void Instruction::DropAllOperands() {
  for (Instruction* op : operands_) op->RemoveUser(this);
  operands_.clear();
}

bool HasSideEffects(const Instruction* instr) {
  if (instr->opcode() == Opcode::kCustomCall) {
    return instr->attrs().custom_call_target.rfind(kHostCallbackPrefix, 0) == 0;
  }
  for (const Computation* c : instr->called_computations()) {
    for (const Instruction* i : c->Instructions()) {
      if (HasSideEffects(i)) return true;
    }
  }
  return false;
}

bool Instruction::IdenticalIgnoringOperands(const Instruction& other) const {
  return opcode_ == other.opcode_ && shape_ == other.shape_ && attrs_ == other.attrs_ &&
         called_ == other.called_;
}

}  // namespace fj
