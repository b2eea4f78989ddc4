// Multi-output and horizontal fusion (see multi_output_fusion.h).
#include "fusion/multi_output_fusion.h"

#include <algorithm>
#include <unordered_set>

#include "fusion/fusible.h"
#include "fusion/fusion_utils.h"

namespace fj {
namespace {

std::string Name(const Instruction* i) { return "%" + ValueOp(i)->name(); }

bool IsKernel(const Instruction* i) {
  if (i->opcode() == Opcode::kFusion) return i->fusion_kind() != FusionKind::kOutput;
  return NeedsKernel(i) && IsFusibleConsumer(i) && i->opcode() != Opcode::kDot;
}

// A kernel whose users read it directly (multi-output kernels are read through
// get-tuple-element, which this simple pass leaves alone).
bool IsMofCandidate(const Instruction* i) {
  return IsKernel(i) && i->shape().IsArray() && !i->users().empty();
}

const Instruction* HeroOf(const Instruction* k) {
  if (k->opcode() == Opcode::kFusion) return ReductionHero(*k->fused_computation());
  return IsReduction(k) ? k : nullptr;
}

FusionDecision ShapesCompatible(const Instruction* a, const Instruction* b) {
  const Shape& la = LoopShape(a);
  const Shape& lb = LoopShape(b);
  if (!la.IsArray() || !lb.IsArray() || la.dims() != lb.dims()) {
    return FusionDecision::No("loop-shapes", Name(a) + " iterates over " + la.ToString() + " but " + Name(b) +
                                                 " over " + lb.ToString() + "; a multi-output kernel needs equal loop shapes");
  }
  const Instruction* ha = HeroOf(a);
  const Instruction* hb = HeroOf(b);
  if (ha && hb && ha->dimensions() != hb->dimensions()) {
    return FusionDecision::No("reduction-dims", "the reductions " + Name(ha) + " and " + Name(hb) +
                                                    " reduce different dimensions");
  }
  if (static_cast<bool>(ha) != static_cast<bool>(hb)) {
    return FusionDecision::No("reduction-and-loop", "one of " + Name(a) + " and " + Name(b) +
                                                        " is a reduction kernel and the other is not");
  }
  return FusionDecision::Yes("compatible");
}

int MergedOperandsAndOutputs(const Instruction* a, const Instruction* b) {
  std::unordered_set<const Instruction*> ops(a->operands().begin(), a->operands().end());
  ops.insert(b->operands().begin(), b->operands().end());
  ops.erase(a);
  ops.erase(b);
  return static_cast<int>(ops.size()) + 2;
}

}  // namespace

bool MultiOutputFusionPass::FuseSiblings(Computation* comp) {
  bool changed = false;
  // Each fusion removes instructions: start over from a fresh post order after it.
  bool restart = true;
  while (restart) {
    restart = false;
  for (Instruction* parent : comp->MakePostOrder()) {
    if (!parent->shape().IsArray() || parent->shape().NumElements() <= 1) continue;
    bool again = true;
    while (again && !restart) {
      again = false;
      std::vector<Instruction*> candidates;
      for (Instruction* u : parent->users()) {
        if (IsMofCandidate(u)) candidates.push_back(u);
      }
      // Fusions first: they are the kernels that will absorb the others.
      std::stable_sort(candidates.begin(), candidates.end(), [](Instruction* x, Instruction* y) {
        return (x->opcode() == Opcode::kFusion) > (y->opcode() == Opcode::kFusion);
      });
      for (size_t i = 0; i < candidates.size() && !again; ++i) {
        for (size_t j = i + 1; j < candidates.size() && !again; ++j) {
          Instruction* a = candidates[i];
          Instruction* b = candidates[j];
          FusionDecision d = ShapesCompatible(a, b);
          if (d.fuse && (Reachable(a, b) || Reachable(b, a))) {
            d = FusionDecision::No("cycle", "one of " + Name(a) + " and " + Name(b) +
                                                " depends on the other; fusing them would create a cycle");
          }
          if (d.fuse && MergedOperandsAndOutputs(a, b) > profile_.max_operands_and_outputs) {
            d = FusionDecision::No("size-budget", "the merged kernel would exceed the operand budget");
          }
          if (d.fuse) {
            d = FusionDecision::Yes("sibling", Name(a) + " and " + Name(b) + " both read " + Name(parent) +
                                                   ": one kernel reads it once");
          }
          if (log_) log_->Record("multi-output-fusion(sibling)", a, b, d);
          if (!d.fuse) continue;
          FuseInstructions({a, b});
          again = changed = restart = true;
        }
      }
    }
    if (restart) break;
  }
  }
  return changed;
}

bool MultiOutputFusionPass::FuseProducerConsumer(Computation* comp) {
  bool changed = false;
  bool again = true;
  while (again) {
    again = false;
    for (Instruction* producer : comp->MakePostOrder()) {
      if (!IsMofCandidate(producer) || producer->user_count() < 2) continue;
      if (producer->opcode() == Opcode::kFusion && producer->fusion_kind() != FusionKind::kLoop) continue;
      if (HeroOf(producer)) continue;
      for (Instruction* consumer : producer->users()) {
        if (consumer->opcode() != Opcode::kFusion || !IsMofCandidate(consumer)) continue;
        FusionDecision d = ShapesCompatible(producer, consumer);
        if (d.fuse) {
          for (const Instruction* op : consumer->operands()) {
            if (op != producer && Reachable(producer, op)) {
              d = FusionDecision::No("cycle", "another operand of " + Name(consumer) + " depends on " +
                                                  Name(producer) + "; fusing them would create a cycle");
              break;
            }
          }
        }
        if (d.fuse && MergedOperandsAndOutputs(producer, consumer) > profile_.max_operands_and_outputs) {
          d = FusionDecision::No("size-budget", "the merged kernel would exceed the operand budget");
        }
        if (d.fuse) {
          d = FusionDecision::Yes("producer-consumer",
                                  Name(producer) + " joins " + Name(consumer) +
                                      "'s kernel as an extra output: its other users read that output");
        }
        if (log_) log_->Record("multi-output-fusion(producer-consumer)", producer, consumer, d);
        if (!d.fuse) continue;
        FuseInstructions({producer, consumer});
        again = changed = true;
        break;
      }
      if (again) break;
    }
  }
  return changed;
}

bool MultiOutputFusionPass::Run(Module& module) {
  if (!profile_.enabled || !profile_.multi_output) return false;
  Computation* comp = module.entry();
  bool changed = FuseSiblings(comp);
  changed = FuseProducerConsumer(comp) || changed;
  return changed;
}

bool HorizontalFusionPass::Run(Module& module) {
  if (!profile_.enabled || !profile_.horizontal) return false;
  Computation* comp = module.entry();
  const Instruction* root = comp->root();
  // Small kernels used only by the program's result.
  constexpr int64_t kMaxElements = 128 * 2048;
  constexpr int kMaxInstructions = 30;
  constexpr size_t kMaxGroup = 32;
  std::vector<Instruction*> group;
  for (Instruction* k : comp->MakePostOrder()) {
    if (!IsKernel(k) || !k->shape().IsArray() || HeroOf(k)) continue;
    bool only_root = !k->users().empty();
    for (const Instruction* u : k->users()) only_root = only_root && u == root;
    if (!only_root || k->shape().NumElements() > kMaxElements) continue;
    if (k->opcode() == Opcode::kFusion && k->fused_computation()->instruction_count() > kMaxInstructions) continue;
    if (group.size() < kMaxGroup) group.push_back(k);
  }
  if (group.size() < 2) return false;
  for (size_t i = 1; i < group.size(); ++i) {
    if (log_) {
      log_->Record("horizontal-fusion", group[0], group[i],
                   FusionDecision::Yes("horizontal", "independent small kernels producing program outputs run as one launch"));
    }
  }
  FuseInstructions(group);
  return true;
}

}  // namespace fj
