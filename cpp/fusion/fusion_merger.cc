// The fusion merger (see fusion_merger.h), after legacy XLA's heuristic version (2022).
#include "fusion/fusion_merger.h"

#include <algorithm>
#include <cstdio>
#include <unordered_set>

#include "fusion/fusible.h"
#include "fusion/fusion_utils.h"

namespace fj {
namespace {

std::string Name(const Instruction* i) { return "%" + ValueOp(i)->name(); }

// Bytes the producer reads (a parameter read only through slices counts the sliced part).
double BytesRead(const Instruction* producer) {
  double r = 0;
  const Computation* fused = producer->fused_computation();
  for (int i = 0; i < producer->operand_count(); ++i) {
    const Instruction* p = fused->parameter(i);
    bool all_slices = !p->users().empty();
    double sliced = 0;
    for (const Instruction* u : p->users()) {
      if (u->opcode() == Opcode::kSlice || u->opcode() == Opcode::kDynamicSlice) {
        sliced += u->shape().ByteSize();
      } else {
        all_slices = false;
      }
    }
    r += all_slices ? sliced : producer->operand(i)->shape().ByteSize();
  }
  return r;
}

}  // namespace

FusionDecision FusionMergerPass::ShouldMerge(const Instruction* producer) const {
  std::vector<const Instruction*> users(producer->users().begin(), producer->users().end());
  if (users.empty()) return FusionDecision::No("no-users", "nothing uses it");
  if (producer->IsRoot()) return FusionDecision::No("program-output", Name(producer) + " is the program's result");
  for (const Instruction* u : users) {
    if (u->opcode() == Opcode::kTuple && u->IsRoot()) {
      return FusionDecision::No("program-output",
                                Name(producer) + " is a result of the program: it must be written to memory, and the "
                                                 "merger fuses a kernel into all of its users or none");
    }
    if (!IsFusibleConsumer(u) || u->opcode() == Opcode::kDot) {
      return FusionDecision::No("user-not-fusible",
                                Name(u) + " (" + std::string(OpcodeName(ValueOp(u)->opcode())) +
                                    ") cannot take fused producers, and the merger fuses into all users or none");
    }
    if (IsReduction(u) || (u->opcode() == Opcode::kFusion && u->fusion_kind() == FusionKind::kInput)) {
      // Merging into a reduction is fine unless the producer moves data around.
      for (const Instruction* i : producer->fused_computation()->MakePostOrder()) {
        if (i->opcode() == Opcode::kTranspose) {
          return FusionDecision::No("transpose-into-reduction",
                                    Name(producer) + " transposes data; XLA does not merge it into a reduction");
        }
      }
    }
  }
  if (!profile_.cost_model) {
    for (const Instruction* u : users) {
      if (const Instruction* c = ConcatLikeOutputWithTooManyUsers(producer, profile_, u)) {
        return FusionDecision::No("concat-multi-user",
                                  std::string(OpcodeName(c->opcode())) + " %" + c->name() + " is read " +
                                      std::to_string(std::max(producer->user_count(), EmittedCountOfProducer(producer, u))) +
                                      " times; the " + profile_.name + " profile fuses a " +
                                      std::string(OpcodeName(c->opcode())) + " only where it is read at most " +
                                      std::to_string(c->opcode() == Opcode::kConcatenate ? profile_.concat_max_users : 1) +
                                      " times (code duplication)");
      }
    }
  }
  int n = static_cast<int>(users.size());
  double r = BytesRead(producer);
  double w = static_cast<double>(producer->shape().ByteSize());
  double current = r + w * (n + 1);
  double merged = r * n;
  double ratio = merged / std::max(1.0, current);
  FusionDecision d;
  d.bytes_unfused = current;
  d.bytes_fused = merged;
  for (const Instruction* u : users) {
    int operands = FusedOperandsAndOutputs(producer, u);
    if (operands > profile_.max_operands_and_outputs) {
      return FusionDecision::No("size-budget", "merging into " + Name(u) + " would make " + std::to_string(operands) +
                                                   " operands and outputs, over the budget of " +
                                                   std::to_string(profile_.max_operands_and_outputs));
    }
    int emitted = EmittedCountOfProducer(producer, u);
    int duplication = CodeDuplication(producer, emitted);
    if (duplication >= static_cast<int>(kEmittedCountCap)) {
      return FusionDecision::No("code-size", "an op of " + Name(producer) + " would be emitted " +
                                                 std::to_string(duplication) + " or more times per element of " +
                                                 Name(u) + " (the code would grow as much)");
    }
    if (emitted > profile_.max_emitted) {
      d = FusionDecision::No("code-duplication", Name(producer) + " would be emitted " + std::to_string(emitted) +
                                                     " times in " + Name(u));
      return d;
    }
  }
  if (profile_.cost_model) {
    // XLA's own rules first: what they merge, the fusionjit profile merges too. Not a
    // kernel with a reduction in it (a row fusion): XLA's merger takes loop fusions only,
    // and merged into a consumer whose rows are laid out otherwise (a reshape to [B*T, D]
    // after a layer norm's gradient over [B, T, D]), its row reductions are computed again
    // for every element (a transformer block's gradient: 3.9 s estimated for that kernel,
    // and the whole plan refused for XLA's).
    FusionProfile xla = profile_;
    xla.cost_model = false;
    FusionDecision rules = FusionMergerPass(xla, nullptr).ShouldMerge(producer);
    const std::vector<Instruction*> ops = producer->fused_computation()->MakePostOrder();
    bool reduces = std::any_of(ops.begin(), ops.end(), [](const Instruction* i) { return IsReduction(i); });
    if (rules.fuse && !reduces) return rules;
    double unfused = cost_.TimeUs(EstimateKernel(producer));
    double fused = 0;
    KernelCost cp = EstimateKernel(producer);
    for (const Instruction* u : users) {
      KernelCost cu = EstimateKernel(u);
      unfused += cost_.TimeUs(cu);
      KernelCost f = cu;
      f.bytes_read += cp.bytes_read - w;
      double evals = 0;
      for (int i = 0; i < u->operand_count(); ++i) {
        if (u->operand(i) == producer) evals += OperandEvaluations(u, i);
      }
      f.flops += FlopsPerElementIn(producer, RowSpaceOf(u)) * evals;
      f.row_steps += cp.row_steps;
      fused += cost_.TimeUs(f);
    }
    d.cost_unfused_us = unfused;
    d.cost_fused_us = fused;
    char buf[200];
    std::snprintf(buf, sizeof(buf), "the cost model estimates %.3g us merged into its %d users against %.3g us apart",
                  fused, n, unfused);
    d.rule = "cost-model";
    d.reason = buf;
    d.fuse = fused <= unfused;
    if (!d.fuse) d.reason = rules.reason + "; " + d.reason;
    return d;
  }
  if (ratio > profile_.merger_max_bytes_ratio) {
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "merging %s into its %d users would move %.0f bytes instead of %.0f (ratio %.2f > %.2f)",
                  Name(producer).c_str(), n, merged, current, ratio, profile_.merger_max_bytes_ratio);
    d.rule = "bytes-ratio";
    d.reason = buf;
    return d;
  }
  bool reuses = false;
  for (const Instruction* u : users) {
    for (int i = 0; i < u->operand_count(); ++i) {
      if (u->operand(i) == producer && ReusesOperandElements(u, i)) reuses = true;
    }
  }
  bool expensive_ok = (n == 1 || (ratio < 0.3 && current > 1024)) && !reuses;
  if (!expensive_ok && IsExpensive(producer)) {
    d.rule = "expensive-duplication";
    d.reason = Name(producer) + " contains expensive ops and would be computed by each of its " +
               std::to_string(n) + " users";
    return d;
  }
  d.fuse = true;
  d.rule = "bytes-ratio";
  char buf[128];
  std::snprintf(buf, sizeof(buf), "bytes moved ratio %.2f <= %.2f", ratio, profile_.merger_max_bytes_ratio);
  d.reason = buf;
  return d;
}

bool FusionMergerPass::Run(Module& module) {
  if (!profile_.enabled || !profile_.fusion_merger) return false;
  // Kernels are built anew or grown in place (FuseIntoFusion, which updates these) and
  // freed when the pass ends.
  EmittedCountCache counts;
  KernelCostCache costs;
  bool changed = false;
  for (Computation* comp : module.ControlFlowComputations()) changed = RunOn(comp) || changed;
  return changed;
}

bool FusionMergerPass::RunOn(Computation* comp) {
  bool changed = false;
  std::vector<Instruction*> order = comp->MakePostOrder();
  std::unordered_set<const Instruction*> removed;
  for (Instruction* producer : order) {
    // Merging removes instructions: only look at ones still in the computation.
    if (removed.count(producer) || !comp->Contains(producer)) continue;
    if (producer->opcode() != Opcode::kFusion) continue;
    if (producer->fusion_kind() != FusionKind::kLoop || producer->shape().IsTuple()) {
      // Reduction kernels are final; instruction fusion already said why (no epilogue).
      if (log_ && producer->shape().IsTuple()) {
        FusionDecision d = producer->shape().IsTuple()
            ? FusionDecision::No("multi-output-producer",
                                 Name(producer) + "'s kernel has several outputs; XLA's fusion merger leaves multi-output fusions alone")
            : FusionDecision::No("input-fusion-final",
                                 Name(producer) + "'s kernel is built around a reduction; XLA does not merge it into its users");
        for (const Instruction* u : producer->users()) {
          // Users read a multi-output kernel through get-tuple-element.
          if (u->opcode() == Opcode::kGetTupleElement) {
            const Instruction* value = producer->fused_computation()->root()->operand(u->tuple_index());
            for (const Instruction* uu : u->users()) log_->Record("fusion-merger", value, uu, d);
          } else {
            log_->Record("fusion-merger", producer, u, d);
          }
        }
      }
      continue;
    }
    FusionDecision d = ShouldMerge(producer);
    if (log_) {
      for (const Instruction* u : producer->users()) log_->Record("fusion-merger", producer, u, d);
    }
    if (!d.fuse) continue;
    std::vector<Instruction*> users = producer->users();
    for (size_t k = 0; k < users.size(); ++k) {
      bool last = k + 1 == users.size();
      std::unordered_set<const Instruction*> dup;
      if (!last) dup.insert(producer);
      removed.insert(users[k]);
      FuseInstructions({producer, users[k]}, dup);
    }
    removed.insert(producer);
    changed = true;
  }
  return changed;
}

}  // namespace fj
