// Computation: a graph of instructions with numbered parameters and one root. Modules hold
// an entry computation and nested ones (combiners, loop bodies, fused kernels).
#pragma once

#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/instruction.h"
#include "ir/names.h"

namespace fj {

class Module;

class Computation {
 public:
  Computation(std::string name, Module* parent) : name_(std::move(name)), parent_(parent) {}

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  Module* parent() const { return parent_; }

  // Takes ownership; names it uniquely within this computation (from `name_hint`, else the
  // opcode; a fused copy of an instruction keeps its name), registers it
  // with its operands and, for a parameter, in the parameter list at its number.
  Instruction* AddInstruction(std::unique_ptr<Instruction> instruction,
                              const std::string& name_hint = "");
  // Removes an instruction that has no users and is not the root. Its memory is kept until
  // ReleaseRemoved() (the pass pipeline calls it after every pass), so a pass that walks a
  // snapshot of the instructions never reads freed memory: a removed instruction is one
  // that Contains() no longer finds.
  void RemoveInstruction(Instruction* instruction);
  void ReleaseRemoved() { removed_.clear(); }
  // Puts the parameters in the order of `params` (a permutation of them), renumbered (the
  // caller reorders the operands of the instruction that calls this to match).
  void ReorderParameters(const std::vector<Instruction*>& params);
  // Gives `instruction` a new name, unique in this computation, from `hint`.
  void Rename(Instruction* instruction, const std::string& hint);
  // Removes parameter `i`, which has no users; later parameters are renumbered one down
  // (the caller removes the matching operand of the instruction that calls this).
  void RemoveParameter(int i);
  // Removes `instruction` and every operand that becomes dead, recursively (not parameters).
  void RemoveInstructionAndUnusedOperands(Instruction* instruction);

  Instruction* root() const { return root_; }
  void set_root(Instruction* root) { root_ = root; }
  const std::vector<Instruction*>& parameters() const { return parameters_; }
  Instruction* parameter(int i) const { return parameters_[i]; }
  int num_parameters() const { return static_cast<int>(parameters_.size()); }

  // All instructions, every operand before its users; unreachable ones included.
  std::vector<Instruction*> MakePostOrder() const;
  // All instructions in the order they were added: for walks whose result does not depend
  // on the order (a fifth of MakePostOrder's cost, which sorts them).
  std::vector<const Instruction*> Instructions() const;
  int64_t instruction_count() const { return static_cast<int64_t>(instructions_.size()); }
  bool Contains(const Instruction* instruction) const { return index_.count(instruction) != 0; }

  // For a fused computation: the fusion instruction that calls it.
  Instruction* fusion_instruction() const { return fusion_instruction_; }
  void set_fusion_instruction(Instruction* f) { fusion_instruction_ = f; }
  bool IsFusionComputation() const { return fusion_instruction_ != nullptr; }

  // "%name (p: f32[4]) -> f32[4] {\n  ...\n}"
  std::string ToString(bool is_entry = false, const LiteralText* literal_text = nullptr) const;
  // A text two computations share exactly when they compute alike: instructions numbered
  // by position instead of named, no source locations, called computations written out,
  // constants over 256 bytes named by the literal they share (copies of one computation
  // share their constants). Identical kernels are generated once by it.
  std::string StructuralText() const;

 private:
  std::string name_;
  Module* parent_;
  std::list<std::unique_ptr<Instruction>> instructions_;
  std::unordered_map<const Instruction*, std::list<std::unique_ptr<Instruction>>::iterator>
      index_;
  std::vector<std::unique_ptr<Instruction>> removed_;
  std::vector<Instruction*> parameters_;
  Instruction* root_ = nullptr;
  Instruction* fusion_instruction_ = nullptr;
  NameSet names_;
};

}  // namespace fj
