// Modules: computations, unique names, cloning.
#include "ir/module.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

#include "ir/parser.h"
#include "support/error.h"

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

std::unique_ptr<Module> Module::Clone() const { return ParseModule(ToString()); }

}  // namespace fj
