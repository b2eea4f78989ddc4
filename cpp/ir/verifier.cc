// The verifier (see verifier.h): every instruction's shape follows the shape rules, the
// graph is acyclic and its users lists are consistent, computations are well formed.
#include "ir/verifier.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/shape_inference.h"
#include "support/error.h"

namespace fj {
namespace {

[[noreturn]] void Reject(const Computation& c, const Instruction* instr, const std::string& why) {
  ThrowInvalidArgument("IR verification failed in %", c.name(),
                       instr ? " at " + instr->ToString() : std::string(), ": ", why);
}

void VerifyComputation(const Module& module, const Computation& c,
                       const std::unordered_set<const Computation*>& computations) {
  if (!c.root()) Reject(c, nullptr, "no root instruction");
  if (!c.Contains(c.root())) Reject(c, c.root(), "root is not in the computation");
  for (int i = 0; i < c.num_parameters(); ++i) {
    if (!c.parameter(i)) Reject(c, nullptr, StrCat("parameter ", i, " is missing"));
    if (c.parameter(i)->parameter_number() != i) Reject(c, c.parameter(i), "parameter number mismatch");
  }

  std::vector<Instruction*> order = c.MakePostOrder();
  std::unordered_map<const Instruction*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  if (static_cast<int64_t>(order.size()) != c.instruction_count()) {
    Reject(c, nullptr, "instructions are not all reachable from the graph walk");
  }

  for (Instruction* instr : order) {
    if (instr->parent() != &c) Reject(c, instr, "instruction has a different parent");
    for (Instruction* op : instr->operands()) {
      if (!c.Contains(op)) Reject(c, instr, "operand %" + op->name() + " is not in this computation");
      if (position[op] >= position[instr]) Reject(c, instr, "the graph has a cycle");
      const auto& users = op->users();
      if (std::find(users.begin(), users.end(), instr) == users.end()) {
        Reject(c, instr, "operand %" + op->name() + " does not list it as a user");
      }
    }
    for (Instruction* user : instr->users()) {
      const auto& ops = user->operands();
      if (!c.Contains(user) || std::find(ops.begin(), ops.end(), instr) == ops.end()) {
        Reject(c, instr, "stale user %" + user->name());
      }
    }
    for (Computation* callee : instr->called_computations()) {
      if (!callee || !computations.count(callee)) Reject(c, instr, "calls a computation outside the module");
      if (callee == &c) Reject(c, instr, "calls its own computation");
    }
    if (instr->opcode() == Opcode::kFusion) {
      if (instr->fused_computation()->fusion_instruction() != instr) {
        Reject(c, instr, "fused computation does not point back at its fusion");
      }
    }
    if (instr->opcode() == Opcode::kParameter) {
      int64_t n = instr->parameter_number();
      if (n >= c.num_parameters() || c.parameter(n) != instr) Reject(c, instr, "unregistered parameter");
    }
    std::vector<const Shape*> operand_shapes;
    for (Instruction* op : instr->operands()) operand_shapes.push_back(&op->shape());
    try {
      InferShape(instr->opcode(), operand_shapes, instr->attrs(), instr->called_computations(),
                 &instr->shape());
    } catch (const Error& e) {
      Reject(c, instr, e.what());
    }
  }
  (void)module;
}

}  // namespace

void VerifyModule(const Module& module) {
  if (!module.entry()) ThrowInvalidArgument("IR verification failed: module has no entry");
  std::unordered_set<const Computation*> computations;
  for (Computation* c : module.computations()) computations.insert(c);
  if (!computations.count(module.entry())) {
    ThrowInvalidArgument("IR verification failed: entry is not in the module");
  }
  for (Computation* c : module.computations()) VerifyComputation(module, *c, computations);
  // A fused computation belongs to exactly one fusion instruction.
  std::unordered_map<const Computation*, int> fusion_callers;
  for (Computation* c : module.computations()) {
    for (Instruction* instr : c->MakePostOrder()) {
      if (instr->opcode() == Opcode::kFusion) {
        if (++fusion_callers[instr->fused_computation()] > 1) {
          ThrowInvalidArgument("IR verification failed: %", instr->fused_computation()->name(),
                               " is called by two fusions");
        }
      }
    }
  }
}

}  // namespace fj
