// Module: the unit of compilation: an entry computation and the computations it calls.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/computation.h"
#include "ir/names.h"

namespace fj {

class Module {
 public:
  explicit Module(std::string name) : name_(std::move(name)) {}
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& name() const { return name_; }

  // Creates an empty computation named uniquely from `name_hint`.
  Computation* AddComputation(const std::string& name_hint);
  Computation* entry() const { return entry_; }
  void set_entry(Computation* c) { entry_ = c; }
  // Removed computations (and instructions removed from any computation) stay in memory
  // until ReleaseRemoved(), which the pass pipeline calls after every pass.
  void RemoveComputation(Computation* c);
  void ReleaseRemoved();
  // Drops computations that neither the entry nor anything it calls refers to.
  void RemoveUnreachableComputations();

  // Callees before callers; the entry last.
  std::vector<Computation*> MakeComputationPostOrder() const;
  // The computations that run as program code: the entry and, recursively, the conditions
  // and bodies of its while loops and the branches of its conditionals (callees first, the
  // entry last). Fused computations and reduction combiners are not among them.
  std::vector<Computation*> ControlFlowComputations() const;
  std::vector<Computation*> computations() const;
  Computation* FindComputation(const std::string& name) const;

  // Unique computation names ("fused", "fused.1", ...) and module-wide instruction ids.
  // (Instruction names are unique per computation: see Computation::AddInstruction.)
  std::string UniqueComputationName(const std::string& hint);
  int64_t NextId() { return next_id_++; }

  std::string ToString(const LiteralText* literal_text = nullptr) const;
  // A deep copy, named and ordered as a parse of ToString() would be (under FJ_CHECKS it
  // also checks that the text form round-trips).
  std::unique_ptr<Module> Clone() const;

 private:

  std::string name_;
  std::vector<std::unique_ptr<Computation>> computations_;
  std::vector<std::unique_ptr<Computation>> removed_;
  Computation* entry_ = nullptr;
  NameSet computation_names_;
  int64_t next_id_ = 0;
};

}  // namespace fj
