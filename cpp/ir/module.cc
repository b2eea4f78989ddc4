// Modules: computations, unique names, cloning.
#include "ir/module.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

#include "ir/parser.h"
#include "support/error.h"
#include "support/flags.h"

namespace fj {

Computation* Module::AddComputation(const std::string& name_hint) {
  computations_.push_back(
      std::make_unique<Computation>(UniqueComputationName(name_hint), this));
  return computations_.back().get();
}

void Module::RemoveComputation(Computation* c) {
  FJ_CHECK(c != entry_, "removing the entry computation");
  auto it = std::find_if(computations_.begin(), computations_.end(),
                         [&](const auto& p) { return p.get() == c; });
  FJ_CHECK(it != computations_.end());
  removed_.push_back(std::move(*it));
  computations_.erase(it);
}

void Module::ReleaseRemoved() {
  removed_.clear();
  for (const auto& c : computations_) c->ReleaseRemoved();
}

std::vector<Computation*> Module::computations() const {
  std::vector<Computation*> out;
  for (const auto& c : computations_) out.push_back(c.get());
  return out;
}

Computation* Module::FindComputation(const std::string& name) const {
  for (const auto& c : computations_) {
    if (c->name() == name) return c.get();
  }
  return nullptr;
}

std::vector<Computation*> Module::MakeComputationPostOrder() const {
  std::vector<Computation*> order;
  std::unordered_set<Computation*> visited;
  std::function<void(Computation*)> visit = [&](Computation* c) {
    if (!visited.insert(c).second) return;
    for (Instruction* instr : c->MakePostOrder()) {
      for (Computation* callee : instr->called_computations()) visit(callee);
    }
    order.push_back(c);
  };
  // Unreachable computations first (in creation order), so that printing keeps them.
  for (const auto& c : computations_) {
    if (c.get() != entry_) visit(c.get());
  }
  if (entry_) {
    // The entry must come last even if something else was visited after it.
    order.erase(std::remove(order.begin(), order.end(), entry_), order.end());
    visited.erase(entry_);
    visit(entry_);
  }
  return order;
}

std::vector<Computation*> Module::ControlFlowComputations() const {
  std::vector<Computation*> order;
  std::unordered_set<Computation*> visited;
  std::function<void(Computation*)> visit = [&](Computation* c) {
    if (!visited.insert(c).second) return;
    for (Instruction* instr : c->MakePostOrder()) {
      if (instr->opcode() == Opcode::kWhile || instr->opcode() == Opcode::kConditional) {
        for (Computation* callee : instr->called_computations()) visit(callee);
      }
    }
    order.push_back(c);
  };
  if (entry_) visit(entry_);
  return order;
}

void Module::RemoveUnreachableComputations() {
  if (!entry_) return;
  std::unordered_set<Computation*> reachable;
  std::function<void(Computation*)> visit = [&](Computation* c) {
    if (!reachable.insert(c).second) return;
    for (Instruction* instr : c->MakePostOrder()) {
      for (Computation* callee : instr->called_computations()) visit(callee);
    }
  };
  visit(entry_);
  auto dead = std::stable_partition(computations_.begin(), computations_.end(),
                                    [&](const auto& c) { return reachable.count(c.get()) != 0; });
  for (auto it = dead; it != computations_.end(); ++it) removed_.push_back(std::move(*it));
  computations_.erase(dead, computations_.end());
}

std::string Module::UniqueComputationName(const std::string& hint) {
  return computation_names_.Uniquify(hint);
}

void Module::set_donated_parameters(std::vector<int64_t> parameters) {
  std::sort(parameters.begin(), parameters.end());
  parameters.erase(std::unique(parameters.begin(), parameters.end()), parameters.end());
  donated_ = std::move(parameters);
}

bool Module::IsDonated(int64_t parameter) const {
  return std::binary_search(donated_.begin(), donated_.end(), parameter);
}

std::unique_ptr<Module> Module::Clone() const {
  // Computations and instructions are created in the order the text form lists them, so
  // the copy gets the same names and the same relative ids as a parse of ToString() (the
  // passes' decisions do not depend on which way a module was copied). Literals are
  // immutable and shared. Dead instructions (unreachable from their computation's root)
  // are not copied.
  auto copy = std::make_unique<Module>(name_);
  copy->donated_ = donated_;
  copy->held_ = held_;
  std::unordered_map<const Computation*, Computation*> computation_map;
  std::vector<Instruction*> callers;  // copies whose called computations are the originals'
  for (const Computation* c : MakeComputationPostOrder()) {
    Computation* cc = copy->AddComputation(c->name());
    FJ_CHECK(cc->name() == c->name(), "cloning computation ", c->name());
    computation_map[c] = cc;
    if (c == entry_) copy->set_entry(cc);
    std::unordered_map<const Instruction*, Instruction*> map;
    for (const Instruction* instr : c->MakePostOrder()) {
      std::vector<Instruction*> operands;
      operands.reserve(instr->operand_count());
      for (const Instruction* op : instr->operands()) operands.push_back(map.at(op));
      Instruction* added = cc->AddInstruction(instr->CloneWithNewOperands(instr->shape(), std::move(operands)),
                                              instr->name());
      map[instr] = added;
      if (!instr->called_computations().empty()) callers.push_back(added);
    }
    if (c->root()) cc->set_root(map.at(c->root()));
  }
  for (Instruction* instr : callers) {
    std::vector<Computation*> called = instr->called_computations();
    for (Computation*& callee : called) callee = computation_map.at(callee);
    instr->set_called_computations(called);
    if (instr->opcode() == Opcode::kFusion) called[0]->set_fusion_instruction(instr);
  }
  if (GetDebugFlags().checks) {
    // The text form round-trips, and prints the copy as the original.
    std::string text = ToString();
    FJ_CHECK(ParseModule(text)->ToString() == text, "module ", name_, " does not round-trip through its text");
    FJ_CHECK(copy->ToString() == text, "the copy of module ", name_, " differs from it");
  }
  return copy;
}

}  // namespace fj
