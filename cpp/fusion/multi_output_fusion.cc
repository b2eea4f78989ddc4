// Multi-output and horizontal fusion (see multi_output_fusion.h).
#include "fusion/multi_output_fusion.h"

#include <algorithm>
#include <unordered_set>

#include "analysis/cost_model.h"
#include "fusion/fusible.h"
#include "fusion/fusion_utils.h"
#include "fusion/instruction_fusion.h"

namespace fj {
namespace {

std::string Name(const Instruction* i) { return "%" + ValueOp(i)->name(); }

bool IsKernel(const Instruction* i) {
  if (i->opcode() == Opcode::kFusion) {
    return i->fusion_kind() != FusionKind::kOutput && i->fusion_kind() != FusionKind::kWholeLoop &&
           i->fusion_kind() != FusionKind::kScatter;
  }
  return NeedsKernel(i) && IsFusibleConsumer(i) && i->opcode() != Opcode::kDot;
}

bool IsMultiOutput(const Instruction* i) { return i->opcode() == Opcode::kFusion && i->shape().IsTuple(); }

// A kernel that updates a slice of its operand's buffer in place (a dynamic-update-slice,
// fused or not): with another output it would write its whole buffer (a copy of the stacked
// outputs of a scan at every step).
bool UpdatesInPlace(const Instruction* i) {
  const Instruction* root = i->opcode() == Opcode::kFusion ? i->fused_computation()->root() : i;
  return root->opcode() == Opcode::kDynamicUpdateSlice;
}

// XLA's IsFusibleAsMultiOutputFusionRoot: a kernel with users; a multi-output kernel only if
// everything reads it through get-tuple-element. As in XLA's LegalToFuse and
// IsProducerMultiOutputFusible, not an in-place update.
bool IsMofCandidate(const Instruction* i) {
  if (!IsKernel(i) || i->users().empty() || i->IsRoot() || UpdatesInPlace(i)) return false;
  if (i->shape().IsTuple()) {
    if (!IsMultiOutput(i)) return false;
    for (const Instruction* u : i->users()) {
      if (u->opcode() != Opcode::kGetTupleElement) return false;
    }
  }
  return true;
}

// XLA's order of preference when choosing what absorbs the others: multi-output kernels,
// then fusions, then single ops.
int MofPriority(const Instruction* i) { return IsMultiOutput(i) ? 2 : i->opcode() == Opcode::kFusion ? 1 : 0; }

// True if a value of `consumer`'s operands (other than those computed by `producer`) depends
// on `producer`: fusing them would make a cycle through that operand.
bool OtherOperandDependsOn(const Instruction* producer, const Instruction* consumer) {
  for (const Instruction* op : consumer->operands()) {
    if (op == producer) continue;
    if (op->opcode() == Opcode::kGetTupleElement && op->operand(0) == producer) continue;
    if (Reachable(producer, op)) return true;
  }
  return false;
}

bool ContainsReduction(const Instruction* k) {
  if (k->opcode() != Opcode::kFusion) return IsReduction(k);
  for (const Instruction* i : k->fused_computation()->MakePostOrder()) {
    if (IsReduction(i)) return true;
  }
  return false;
}

const Instruction* HeroOf(const Instruction* k) {
  if (k->opcode() == Opcode::kFusion) return ReductionHero(*k->fused_computation());
  return IsReduction(k) ? k : nullptr;
}

// A reduction of its operand's last dimensions: its loop walks the operand in order, so a
// loop kernel over the same elements can store its outputs from that loop.
bool ReducesLastDimensions(const Instruction* hero) {
  if (hero->opcode() != Opcode::kReduce || hero->dimensions().empty()) return false;
  const std::vector<int64_t>& r = hero->dimensions();
  int rank = hero->operand(0)->shape().rank();
  for (size_t k = 0; k < r.size(); ++k) {
    if (r[r.size() - 1 - k] != rank - 1 - static_cast<int64_t>(k)) return false;
  }
  return true;
}

FusionDecision ShapesCompatible(const Instruction* a, const Instruction* b, const FusionProfile& profile) {
  const Shape& la = LoopShape(a);
  const Shape& lb = LoopShape(b);
  const Instruction* ha = HeroOf(a);
  const Instruction* hb = HeroOf(b);
  if (profile.reduction_epilogue && (ha == nullptr) != (hb == nullptr)) {
    // Beyond XLA: a loop kernel joins a reduction over the same elements as side outputs
    // stored by the reduction's loop (the reset count of a CartPole step beside its state).
    const Instruction* hero = ha ? ha : hb;
    const Instruction* loop = ha ? b : a;
    if (ContainsReduction(loop)) {
      // A row-fused kernel (a softmax) computes its rows' reductions once per row of its
      // own loop; stored from another reduction's loop, each element would compute them
      // again (large-tier fuzz seed 215689: minutes).
      return FusionDecision::No("reduction-side-outputs", Name(loop) + " computes reductions of its own rows; as side "
                                                          "outputs of " + Name(hero) + "'s loop each element would "
                                                          "recompute them");
    }
    if (ReducesLastDimensions(hero) && la.IsArray() && lb.IsArray() && la.NumElements() == lb.NumElements()) {
      // Rows shorter than a vector are combined one element at a time, and the side
      // outputs are computed there too, out of vectors (a classifier's log-softmax over 6
      // classes beside its sum of exp: 53 us, where its own kernel takes 3).
      int64_t row = hero->operand(0)->shape().NumElements() / std::max<int64_t>(1, hero->shape().NumElements());
      if (row < kMaxBlockLanes) {
        return FusionDecision::No("reduction-side-outputs",
                                  Name(hero) + " combines rows of " + std::to_string(row) +
                                      " elements one at a time; as its side outputs, " + Name(loop) +
                                      " would be computed one element at a time too");
      }
      return FusionDecision::Yes("reduction-side-outputs");
    }
  }
  if (!la.IsArray() || !lb.IsArray() || la.dims() != lb.dims()) {
    return FusionDecision::No("loop-shapes", Name(a) + " iterates over " + la.ToString() + " but " + Name(b) +
                                                 " over " + lb.ToString() + "; a multi-output kernel needs equal loop shapes");
  }
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

// Beyond XLA (a profile with row fusion): a kernel that is only a row reduction (a
// logsumexp's max) joins a kernel built around another reduction of the same rows that
// reads it (the sum of exp(x - max)), as an extra output. The kernel walks a row at a time
// and computes both reductions once per row (codegen's unit reductions), the second pass
// reading the row from cache, where two kernels read it from memory twice. The producer's
// other users (the max added back) read the extra output.
bool RowReductionJoins(const Instruction* producer, const Instruction* consumer, const FusionProfile& profile) {
  if (!profile.row_fusion || !profile.cost_model) return false;
  const Instruction* hp = HeroOf(producer);
  const Instruction* hc = HeroOf(consumer);
  if (!hp || !hc || hp->opcode() != Opcode::kReduce || !IsRowReduction(hp) || !IsRowReduction(hc) ||
      hp->dimensions().size() != 1 || hc->dimensions() != hp->dimensions()) {
    return false;
  }
  const Shape& rows = hp->operand(0)->shape();
  if (!rows.SameDims(hc->operand(0)->shape()) || !producer->shape().IsArray() ||
      !producer->shape().SameDims(hp->shape()) || !consumer->shape().IsArray() ||
      !consumer->shape().SameDims(hc->shape())) {
    return false;
  }
  if (producer->opcode() == Opcode::kFusion && producer->fused_computation()->root() != hp) return false;
  int64_t length = rows.dims().back();
  return length <= InstructionFusionPass::kRowFusionMaxRow &&
         rows.NumElements() / std::max<int64_t>(length, 1) >= InstructionFusionPass::kRowFusionMinRows;
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
  // Fuses pairs of `parent`'s users until no pair fuses; true if one did.
  auto fuse_users_of = [&](Instruction* parent) {
    bool fused = false;
    bool again = true;
    while (again) {
      again = false;
      std::vector<Instruction*> candidates;
      for (Instruction* u : parent->users()) {
        if (IsMofCandidate(u)) candidates.push_back(u);
      }
      // Multi-output kernels first, then fusions: they absorb the others.
      std::stable_sort(candidates.begin(), candidates.end(), [](Instruction* x, Instruction* y) {
        return MofPriority(x) > MofPriority(y);
      });
      for (size_t i = 0; i < candidates.size() && !again; ++i) {
        for (size_t j = i + 1; j < candidates.size() && !again; ++j) {
          Instruction* a = candidates[i];
          Instruction* b = candidates[j];
          FusionDecision d = ShapesCompatible(a, b, profile_);
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
          again = fused = true;
        }
      }
    }
    return fused;
  };
  // Sweeps over the values until one fuses nothing. A sweep goes on past a fusion: the
  // post order it walks may then name instructions fused away (skipped), and the merged
  // kernels it lacks are users of values it visits. (Starting over after each fusion made
  // the pass quadratic in the fusions it makes.)
  bool changed = false;
  for (bool sweep = true; sweep;) {
    sweep = false;
    for (Instruction* parent : comp->MakePostOrder()) {
      if (!comp->Contains(parent) || !parent->shape().IsArray() || parent->shape().NumElements() <= 1) continue;
      if (fuse_users_of(parent)) changed = sweep = true;
    }
  }
  return changed;
}

bool MultiOutputFusionPass::FuseProducerConsumer(Computation* comp) {
  bool changed = false;
  bool again = true;
  while (again) {  // sweeps as FuseSiblings's
    again = false;
    for (Instruction* producer : comp->MakePostOrder()) {
      if (!comp->Contains(producer)) continue;
      // XLA's IsProducerMultiOutputFusible: a loop kernel (or an op a loop kernel could
      // compute), not built around a reduction. XLA also leaves multi-output producers alone
      // (its emitter could not merge them); here they merge like any other loop kernel, or a
      // sibling fusion of two producers would end fusion for both (the CartPole step would
      // stay two kernels where XLA makes one).
      if (!IsMofCandidate(producer)) continue;
      const bool row_reduction = HeroOf(producer) != nullptr;
      if (producer->opcode() == Opcode::kFusion && producer->fusion_kind() != FusionKind::kLoop && !row_reduction) continue;
      std::vector<Instruction*> consumers;
      auto add_consumer = [&](Instruction* u) {
        bool kind_ok = row_reduction ? RowReductionJoins(producer, u, profile_)
                                     : u->opcode() == Opcode::kFusion || IsElementwise(u->opcode()) ||
                                           (profile_.reduction_epilogue && IsReduction(u));
        if (IsMofCandidate(u) && kind_ok &&
            std::find(consumers.begin(), consumers.end(), u) == consumers.end()) {
          consumers.push_back(u);
        }
      };
      for (Instruction* u : producer->users()) {
        if (u->opcode() != Opcode::kGetTupleElement) {
          add_consumer(u);
          continue;
        }
        for (Instruction* uu : u->users()) add_consumer(uu);
      }
      // XLA checks the merged kernel's code duplication here too: a concatenate with several
      // users stays a kernel of its own (the paper's boundary), also as an extra output.
      const Instruction* c = profile_.cost_model ? nullptr : ConcatLikeOutputWithTooManyUsers(producer, profile_);
      for (size_t k = 0; !c && !profile_.cost_model && k < consumers.size(); ++k) {
        c = ConcatLikeOutputWithTooManyUsers(producer, profile_, consumers[k]);
      }
      if (c) {
        if (log_) {
          FusionDecision d = FusionDecision::No(
              "concat-multi-user", std::string(OpcodeName(c->opcode())) + " %" + c->name() + " has several users; the " +
                                       profile_.name + " profile does not fuse it with them, as an extra output either");
          for (Instruction* u : consumers) log_->Record("multi-output-fusion(producer-consumer)", producer, u, d);
        }
        continue;
      }
      if (row_reduction && consumers.empty()) continue;
      // A producer with one user that is not a multi-output kernel is regular fusion's case.
      if (!row_reduction && !IsMultiOutput(producer) && producer->user_count() < 2 &&
          (consumers.empty() || !IsMultiOutput(consumers[0]))) {
        continue;
      }
      std::stable_sort(consumers.begin(), consumers.end(), [](Instruction* x, Instruction* y) {
        return MofPriority(x) > MofPriority(y);
      });
      for (Instruction* consumer : consumers) {
        FusionDecision d = ShapesCompatible(producer, consumer, profile_);
        if (d.fuse && OtherOperandDependsOn(producer, consumer)) {
          d = FusionDecision::No("cycle", "another operand of " + Name(consumer) + " depends on " +
                                              Name(producer) + "; fusing them would create a cycle");
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
    }
  }
  return changed;
}

bool MultiOutputFusionPass::Run(Module& module) {
  if (!profile_.enabled || !profile_.multi_output) return false;
  // Kernels are built anew or grown in place (FuseIntoFusion, which updates these) and
  // freed when the pass ends.
  EmittedCountCache counts;
  KernelCostCache costs;
  bool changed = false;
  for (Computation* comp : module.ControlFlowComputations()) {
    changed = FuseSiblings(comp) || changed;
    changed = FuseProducerConsumer(comp) || changed;
  }
  return changed;
}

bool HorizontalFusionPass::Run(Module& module) {
  if (!profile_.enabled || !profile_.horizontal) return false;
  bool changed = FuseOutputKernels(module.entry(), /*loop_step=*/false);
  // Beyond XLA (fusionjit profile): a loop body's small independent kernels that only make
  // the next state (the counter's increment beside the step's work) share a launch too.
  if (profile_.cost_model) {
    std::vector<Computation*> bodies;
    for (Computation* c : module.ControlFlowComputations()) {
      for (const Instruction* i : c->MakePostOrder()) {
        if (i->opcode() == Opcode::kWhile) bodies.push_back(i->while_body());
      }
    }
    for (Computation* body : bodies) changed = FuseOutputKernels(body, /*loop_step=*/true) || changed;
  }
  return changed;
}

bool HorizontalFusionPass::FuseOutputKernels(Computation* comp, bool loop_step) {
  const Instruction* root = comp->root();
  // Small kernels used only by the computation's result.
  constexpr int64_t kMaxElements = 128 * 2048;
  constexpr int kMaxInstructions = 30;
  constexpr size_t kMaxGroup = 32;
  constexpr int64_t kMaxIndexedElements = 64;
  std::vector<Instruction*> group;
  for (Instruction* k : comp->MakePostOrder()) {
    if (!IsKernel(k) || !k->shape().IsArray() || HeroOf(k)) continue;
    if (UpdatesInPlace(k)) continue;
    bool only_root = !k->users().empty();
    for (const Instruction* u : k->users()) only_root = only_root && u == root;
    if (!only_root || k->shape().NumElements() > kMaxElements) continue;
    if (k->opcode() == Opcode::kFusion && k->fused_computation()->instruction_count() > kMaxInstructions) continue;
    // A horizontal kernel walks its outputs element by element: one that needs the
    // dimensions of its elements' indices (a broadcast, a slice) derives them from the
    // position for every element, where on its own it walks rows (an RNN gradient's
    // [128, 128] weight update beside the step counter's increment: 11.8 us a step, alone
    // 1.1). In a loop's step, saving a launch does not pay for more than a few vectors of
    // that. (The program's results are joined as XLA joins them.)
    bool flat = k->opcode() == Opcode::kFusion ? IsFlat(*k->fused_computation(), k->shape().NumElements())
                                                : IsElementwise(k->opcode());
    if (loop_step && !flat && k->shape().NumElements() > kMaxIndexedElements) continue;
    if (group.size() < kMaxGroup) group.push_back(k);
  }
  if (group.size() < 2) return false;
  for (size_t i = 1; i < group.size(); ++i) {
    if (log_) {
      log_->Record("horizontal-fusion", group[0], group[i],
                   FusionDecision::Yes("horizontal", "independent small kernels producing the results of their "
                                                     "program or loop step run as one launch"));
    }
  }
  FuseInstructions(group);
  return true;
}

}  // namespace fj
