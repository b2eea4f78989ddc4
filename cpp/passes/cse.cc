// CSE (see cse.h). Instructions are visited in post order, so operands are canonical
// before their users are hashed.
#include "passes/cse.h"

#include <functional>
#include <unordered_map>

namespace fj {
namespace {

size_t HashInstruction(const Instruction* i) {
  size_t h = std::hash<int>()(static_cast<int>(i->opcode()));
  auto mix = [&](size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  const Shape& shape = i->shape();
  if (shape.IsArray()) {  // no string per instruction: CSE runs after every fusion round
    mix(static_cast<size_t>(shape.dtype()));
    for (int64_t d : shape.dims()) mix(std::hash<int64_t>()(d));
  } else {
    mix(std::hash<std::string>()(shape.ToString()));
  }
  for (const Instruction* op : i->operands()) mix(std::hash<const void*>()(op));
  for (int64_t d : i->dimensions()) mix(std::hash<int64_t>()(d));
  if (i->opcode() == Opcode::kConstant) mix(i->literal().Hash());
  return h;
}

}  // namespace

bool CsePass::Run(Module& module) {
  bool changed = false;
  for (Computation* c : module.computations()) {
    std::unordered_multimap<size_t, Instruction*> seen;
    for (Instruction* instr : c->MakePostOrder()) {
      if (instr->opcode() == Opcode::kParameter || instr->opcode() == Opcode::kCustomCall) {
        continue;
      }
      // Fusions own their computation; two fusions are never identical in this sense.
      if (instr->opcode() == Opcode::kFusion) continue;
      size_t h = HashInstruction(instr);
      auto [begin, end] = seen.equal_range(h);
      Instruction* match = nullptr;
      for (auto it = begin; it != end; ++it) {
        Instruction* other = it->second;
        if (other->operands() == instr->operands() && other->IdenticalIgnoringOperands(*instr)) {
          match = other;
          break;
        }
      }
      if (match) {
        instr->ReplaceAllUsesWith(match);
        if (instr != c->root()) c->RemoveInstruction(instr);
        changed = true;
      } else {
        seen.emplace(h, instr);
      }
    }
  }
  return changed;
}

}  // namespace fj
