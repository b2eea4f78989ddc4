// CSE (see cse.h). Instructions are visited in post order, so operands are canonical
// before their users are hashed.
#include "passes/cse.h"

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

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

// Computations' structural texts (Computation::StructuralText), each written once.
class StructuralTexts {
 public:
  const std::string& Of(const Computation* c) {
    auto it = texts_.find(c);
    if (it == texts_.end()) it = texts_.emplace(c, c->StructuralText()).first;
    return it->second;
  }

 private:
  std::unordered_map<const Computation*, std::string> texts_;
};

// Whether `a` and `b` compute alike from the same operands: identical, or alike but for
// calling different computations that compute alike (two copies of one scan's loop:
// value_and_grad traced the forward scan once for the value and once for its residuals).
bool SameOp(const Instruction* a, const Instruction* b, StructuralTexts& texts) {
  if (a->IdenticalIgnoringOperands(*b)) return true;
  const std::vector<Computation*>& ca = a->called_computations();
  const std::vector<Computation*>& cb = b->called_computations();
  if (ca.empty() || ca.size() != cb.size() || a->opcode() != b->opcode() || !(a->shape() == b->shape()) ||
      !(a->attrs() == b->attrs())) {
    return false;
  }
  for (size_t k = 0; k < ca.size(); ++k) {
    if (ca[k] != cb[k] && texts.Of(ca[k]) != texts.Of(cb[k])) return false;
  }
  return true;
}

}  // namespace

bool CsePass::Run(Module& module) {
  bool changed = false;
  StructuralTexts texts;
  for (Computation* c : module.computations()) {
    std::unordered_multimap<size_t, Instruction*> seen;
    for (Instruction* instr : c->MakePostOrder()) {
      // (Two loops that each print print twice.)
      if (instr->opcode() == Opcode::kParameter || instr->opcode() == Opcode::kCustomCall || HasSideEffects(instr)) {
        continue;
      }
      // Fusions own their computation; two fusions are never identical in this sense.
      if (instr->opcode() == Opcode::kFusion) continue;
      size_t h = HashInstruction(instr);
      auto [begin, end] = seen.equal_range(h);
      Instruction* match = nullptr;
      for (auto it = begin; it != end; ++it) {
        Instruction* other = it->second;
        if (other->operands() == instr->operands() && SameOp(other, instr, texts)) {
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
