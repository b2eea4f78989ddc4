// Computations: adding and removing instructions, post order.
#include "ir/computation.h"

#include <algorithm>
#include <unordered_set>

#include "ir/module.h"
#include "support/error.h"

namespace fj {

Instruction* Computation::AddInstruction(std::unique_ptr<Instruction> instruction,
                                         const std::string& name_hint) {
  Instruction* instr = instruction.get();
  FJ_CHECK(instr->parent_ == nullptr, "instruction added twice");
  for (Instruction* op : instr->operands_) {
    FJ_CHECK(op->parent_ == this, "operand ", op->name(), " of a new instruction lives in ",
             op->parent_ ? op->parent_->name() : std::string("no computation"), ", not ",
             name_);
  }
  instr->parent_ = this;
  instr->id_ = parent_->NextId();
  std::string hint = name_hint.empty() ? std::string(OpcodeName(instr->opcode())) : name_hint;
  instr->name_ = names_.Uniquify(hint);
  for (Instruction* op : instr->operands_) op->AddUser(instr);
  if (instr->opcode() == Opcode::kParameter) {
    int64_t n = instr->parameter_number();
    if (n < 0 || n > 100000) ThrowInvalidArgument("bad parameter number ", n);
    if (static_cast<int64_t>(parameters_.size()) <= n) parameters_.resize(n + 1, nullptr);
    if (parameters_[n] != nullptr) {
      ThrowInvalidArgument("computation ", name_, " has two parameters numbered ", n);
    }
    parameters_[n] = instr;
  }
  instructions_.push_back(std::move(instruction));
  index_[instr] = std::prev(instructions_.end());
  return instr;
}

void Computation::RemoveInstruction(Instruction* instruction) {
  FJ_CHECK(instruction->users().empty(), "removing ", instruction->name(), " which has users");
  FJ_CHECK(instruction != root_, "removing the root ", instruction->name());
  FJ_CHECK(instruction->opcode() != Opcode::kParameter, "removing a parameter");
  auto it = index_.find(instruction);
  FJ_CHECK(it != index_.end(), "removing ", instruction->name(), " not in ", name_);
  instruction->DropAllOperands();
  removed_.push_back(std::move(*it->second));
  instructions_.erase(it->second);
  index_.erase(it);
}

void Computation::ReorderParameters(const std::vector<Instruction*>& params) {
  FJ_CHECK(params.size() == parameters_.size() &&
               std::is_permutation(params.begin(), params.end(), parameters_.begin()),
           "not a reordering of the parameters of ", name_);
  parameters_ = params;
  for (int k = 0; k < num_parameters(); ++k) parameters_[k]->mutable_attrs().index = k;
}

void Computation::Rename(Instruction* instruction, const std::string& hint) {
  FJ_CHECK(Contains(instruction), "renaming ", instruction->name(), " outside ", name_);
  instruction->name_ = names_.Uniquify(hint);
}

void Computation::RemoveParameter(int i) {
  Instruction* param = parameters_.at(i);
  FJ_CHECK(param->users().empty() && param != root_, "removing parameter ", param->name(), " which is used");
  parameters_.erase(parameters_.begin() + i);
  for (int k = i; k < num_parameters(); ++k) parameters_[k]->mutable_attrs().index = k;
  auto it = index_.find(param);
  removed_.push_back(std::move(*it->second));
  instructions_.erase(it->second);
  index_.erase(it);
}

void Computation::RemoveInstructionAndUnusedOperands(Instruction* instruction) {
  std::vector<Instruction*> operands = instruction->operands();
  RemoveInstruction(instruction);
  std::unordered_set<Instruction*> seen;
  for (Instruction* op : operands) {
    if (!seen.insert(op).second) continue;
    if (op->users().empty() && op != root_ && op->opcode() != Opcode::kParameter &&
        Contains(op)) {
      RemoveInstructionAndUnusedOperands(op);
    }
  }
}

std::vector<const Instruction*> Computation::Instructions() const {
  std::vector<const Instruction*> all;
  all.reserve(instructions_.size());
  for (const auto& instr : instructions_) all.push_back(instr.get());
  return all;
}

std::vector<Instruction*> Computation::MakePostOrder() const {
  std::vector<Instruction*> order;
  order.reserve(instructions_.size());
  std::unordered_set<const Instruction*> visited;
  // Iterative DFS: operands first, in operand order.
  auto visit = [&](Instruction* start) {
    if (visited.count(start)) return;
    std::vector<std::pair<Instruction*, int>> stack{{start, 0}};
    visited.insert(start);
    while (!stack.empty()) {
      auto& [instr, next] = stack.back();
      if (next < instr->operand_count()) {
        Instruction* op = instr->operand(next++);
        if (!visited.count(op)) {
          visited.insert(op);
          stack.push_back({op, 0});
        }
      } else {
        order.push_back(instr);
        stack.pop_back();
      }
    }
  };
  for (Instruction* p : parameters_) {
    if (p) visit(p);
  }
  for (const auto& instr : instructions_) {
    if (instr.get() != root_) visit(instr.get());
  }
  if (root_) visit(root_);
  return order;
}

}  // namespace fj
