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

// How a program's output uses a donated parameter's buffer (analysis/buffer_assignment.h
// decides, runtime/executable.h honours it).
struct OutputAlias {
  int64_t parameter = -1;  // -1: none
  // The program changes the parameter's elements in place to make the output (an update,
  // a loop's state, the parameter itself): the output's buffer must hold the parameter
  // when the program starts, and the program reads the parameter from it. Otherwise the
  // output only may share the parameter's buffer: it is written after the parameter's last
  // read, or by the lanes that read it, at their own positions.
  bool updated = false;
};

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

  // Entry parameters the caller donates (jit's donate_argnums): an output of their shape
  // may take over such a parameter's buffer (BufferAssignment), as with XLA's
  // input_output_alias. Sorted, each once. Printed in the module's header line.
  const std::vector<int64_t>& donated_parameters() const { return donated_; }
  void set_donated_parameters(std::vector<int64_t> parameters);
  bool IsDonated(int64_t parameter) const;

  // What the program calls outside itself and must outlive it: the front end's host
  // callbacks (runtime/host_callback.h), opaque here. Copies hold them too.
  void Hold(std::shared_ptr<const void> held) { held_.push_back(std::move(held)); }

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
  std::vector<int64_t> donated_;
  std::vector<std::shared_ptr<const void>> held_;
};

}  // namespace fj
