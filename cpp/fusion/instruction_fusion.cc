// Instruction fusion (see instruction_fusion.h). The order of checks follows legacy
// XLA:GPU's GpuInstructionFusion::ShouldFuse; where the profile has a cost model, the
// rules that only guard against duplicated work are decided by it instead.
#include "fusion/instruction_fusion.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "analysis/kernel_heroes.h"
#include "fusion/fusible.h"
#include "fusion/fusion_utils.h"

namespace fj {
namespace {

std::string Name(const Instruction* i) { return "%" + ValueOp(i)->name(); }
std::string Op(const Instruction* i) { return std::string(OpcodeName(ValueOp(i)->opcode())); }
std::string Describe(const Instruction* i) { return Op(i) + " " + Name(i); }

int OtherUsers(const Instruction* producer, const Instruction* consumer) {
  int n = 0;
  for (const Instruction* u : producer->users()) n += u != consumer;
  return n + (producer->IsRoot() ? 1 : 0);
}

bool IsConcatLike(const Instruction* i) {
  Opcode op = ValueOp(i)->opcode();
  return op == Opcode::kConcatenate || op == Opcode::kPad || op == Opcode::kDynamicUpdateSlice;
}

double Bytes(const Instruction* i) { return static_cast<double>(i->shape().ByteSize()); }

}  // namespace

FusionDecision CostModelDecision(const CostModel& model, const Instruction* producer,
                                 const Instruction* consumer, const std::string& overridden) {
  KernelCost cp = EstimateKernel(producer);
  KernelCost cc = EstimateKernel(consumer);
  bool stays = OtherUsers(producer, consumer) > 0;
  KernelCost fused = cc;
  std::unordered_set<const Instruction*> consumer_ops(consumer->operands().begin(), consumer->operands().end());
  fused.bytes_read -= Bytes(producer);
  for (const Instruction* op : producer->operands()) {
    if (!consumer_ops.count(op)) {
      fused.bytes_read += Bytes(op);
      consumer_ops.insert(op);
    }
  }
  double producer_elements = std::max<double>(1.0, static_cast<double>(producer->shape().NumElements()));
  double evaluations = 0;
  for (int i = 0; i < consumer->operand_count(); ++i) {
    if (consumer->operand(i) != producer) continue;
    double e = OperandEvaluations(consumer, i);
    // A costly producer read by a row of a row-fused consumer is computed once per element
    // and kept for the row (the emitter's row buffer), however often the row reads it.
    if (consumer->opcode() == Opcode::kFusion && HasTranscendental(producer)) {
      const Computation& c = *consumer->fused_computation();
      const Shape* rows = RowSpace(c);
      if (rows && IsRowValueSlot(c.parameter(i), *rows)) e = std::min(e, producer_elements);
    }
    evaluations += e;
  }
  fused.flops += FlopsPerElementIn(producer, RowSpaceOf(consumer)) * evaluations;
  fused.row_steps += cp.row_steps;
  double unfused_us = model.TimeUs(cp) + model.TimeUs(cc);
  double fused_us = model.TimeUs(fused) + (stays ? model.TimeUs(cp) : 0.0);
  FusionDecision d;
  d.bytes_unfused = cp.bytes() + cc.bytes();
  d.bytes_fused = fused.bytes() + (stays ? cp.bytes() : 0.0);
  d.cost_unfused_us = unfused_us;
  d.cost_fused_us = fused_us;
  d.emitted = static_cast<int>(std::max(1.0, evaluations / producer_elements));
  d.rule = "cost-model";
  char buf[256];
  if (fused_us <= unfused_us) {
    d.fuse = true;
    std::snprintf(buf, sizeof(buf), "the cost model estimates the fused kernel at %.3g us against %.3g us for two kernels",
                  fused_us, unfused_us);
    d.reason = buf;
    if (!overridden.empty()) d.reason += " (it overrides the XLA rule: " + overridden + ")";
  } else {
    std::snprintf(buf, sizeof(buf), "the cost model estimates the fused kernel at %.3g us, slower than %.3g us for two kernels",
                  fused_us, unfused_us);
    d.reason = buf;
    if (!overridden.empty()) d.reason = overridden + "; " + d.reason;
  }
  return d;
}

FusionDecision InstructionFusionPass::RowFusion(const Instruction* producer, const Instruction* consumer) const {
  if (!profile_.row_fusion) return {};
  const Instruction* reduce = producer;
  if (producer->opcode() == Opcode::kFusion) reduce = producer->fused_computation()->root();
  if (!consumer->shape().IsArray() || !IsPerRowReduction(reduce, consumer->shape())) return {};
  const Shape& rows = consumer->shape();
  int64_t row_length = rows.dims().back();
  int64_t num_rows = rows.NumElements() / std::max<int64_t>(row_length, 1);
  std::string what = "reduction " + Name(producer) + " over the rows of " + Name(consumer);
  if (OtherUsers(producer, consumer) > 0) {
    return FusionDecision::No("row-fusion", what + " has other users; in a row fusion it would be computed once more per kernel");
  }
  // A consumer built around a reduction of longer rows (a tree reduction's first level,
  // [8, 10, 5000] into [8, 10]) would read the row's value inside that reduction's loop,
  // where it is not kept: computed again per element (an argmax by max and min over 8 rows
  // of 50,000 took 4.9 s).
  if (consumer->opcode() == Opcode::kFusion) {
    const Instruction* hero = ReductionHero(*consumer->fused_computation(), IsReduce);
    if (hero && !hero->operand(0)->shape().SameDims(rows)) {
      return FusionDecision::No("row-fusion", what + ": its kernel reduces rows of " + hero->operand(0)->shape().ToString() +
                                                  ", inside which the row's value would be computed again per element");
    }
  }
  // Rows are the threads' units, and a row is read again from cache by each pass over it.
  if (num_rows < kRowFusionMinRows || row_length > kRowFusionMaxRow) {
    return FusionDecision::No("row-fusion", what + ": " + std::to_string(num_rows) + " rows of " + std::to_string(row_length) +
                                                " elements; a row fusion needs at least " + std::to_string(kRowFusionMinRows) +
                                                " rows (the threads' units) of at most " + std::to_string(kRowFusionMaxRow) +
                                                " elements (a row stays in cache between passes)");
  }
  return FusionDecision::Yes("row-fusion", what + ": computed once per row inside its consumer's row loop (row fusion)");
}

FusionDecision InstructionFusionPass::ShouldFuse(const Instruction* producer,
                                                 const Instruction* consumer) const {
  if (!profile_.enabled) return FusionDecision::No("fusion-disabled", "fusion is off (profile none)");
  if (producer->opcode() == Opcode::kCustomCall) {
    return FusionDecision::No("custom-call-barrier",
                              "custom call " + Name(producer) + " (" + producer->attrs().custom_call_target +
                                  ") is an opaque kernel; custom calls are fusion barriers");
  }
  if (producer->opcode() == Opcode::kConstant) {
    if (producer->shape().NumElements() == 1) return FusionDecision::Yes("scalar-constant");
    return FusionDecision::No("large-constant",
                              "constant " + Name(producer) + " has " + std::to_string(producer->shape().NumElements()) +
                                  " elements; constants larger than a scalar stay in memory instead of being copied into each kernel");
  }
  if (producer->opcode() == Opcode::kDot || (producer->opcode() == Opcode::kFusion && producer->fusion_kind() == FusionKind::kOutput)) {
    // Beyond XLA (a cost-model profile): the dot's kernel computes its elementwise epilogue
    // (bias, activation) from the product's sums, so the product is not written and read
    // back. Only as the product's one reader, at the product's own positions.
    if (profile_.cost_model && producer->user_count() == 1 && ReadsOnlyElementwise(producer, consumer)) {
      return FusionDecision::Yes("dot-epilogue", Describe(consumer) + " is computed in the kernel of " + Name(producer) +
                                                     " from the product's sums, at the product's own positions");
    }
    if (profile_.cost_model && producer->user_count() == 1 && producer->opcode() == Opcode::kDot) {
      // Which of the consumer's ops read the product (through a fusion's parameter).
      bool sliced = consumer->opcode() == Opcode::kSlice;
      if (consumer->opcode() == Opcode::kFusion) {
        for (int i = 0; i < consumer->operand_count(); ++i) {
          if (consumer->operand(i) != producer) continue;
          for (const Instruction* u : consumer->fused_computation()->parameter(i)->users()) {
            sliced = sliced || u->opcode() == Opcode::kSlice;
          }
        }
      }
      return FusionDecision::No("dot-kernel", "dot " + Name(producer) + " is computed by a kernel of its own, and " +
                                                  Describe(consumer) + " reads the product at other positions than its own" +
                                                  (sliced ? " (a slice: where the product's columns were padded to whole "
                                                            "vectors, the slice takes them back)"
                                                          : "") +
                                                  ", which the dot's epilogue cannot compute");
    }
    return FusionDecision::No("dot-kernel", "dot " + Name(producer) + " is computed by a kernel of its own (in XLA a library call)");
  }
  for (const Instruction* s : {producer, consumer}) {
    if (s->opcode() == Opcode::kScatter || (s->opcode() == Opcode::kFusion && s->fusion_kind() == FusionKind::kScatter)) {
      return FusionDecision::No("scatter-kernel", "scatter " + Name(s) +
                                                      " is a kernel of its own: it updates its operand's buffer in place "
                                                      "(or a copy of it) one update at a time, so that repeated indices "
                                                      "combine in order; its operands and result live in memory");
    }
  }
  if (producer->opcode() == Opcode::kReshape && consumer->opcode() == Opcode::kReshape) {
    return FusionDecision::No("bitcasts", "reshapes " + Name(producer) + " and " + Name(consumer) +
                                              " only reinterpret a buffer and need no kernel; fused, they would "
                                              "make a kernel that copies it");
  }
  // A reshape of a value that is written to memory anyway (it has other readers, or is a
  // result) is that buffer reinterpreted; fused, it would be a kernel copying it.
  if (consumer->opcode() == Opcode::kReshape &&
      (producer->user_count() > 1 || (producer->parent() && producer->parent()->root() == producer))) {
    return FusionDecision::No("bitcasts", "reshape " + Name(consumer) + " only reinterprets the buffer of " + Name(producer) +
                                              ", which is written anyway for its other readers; fused, the reshape "
                                              "would be a kernel that copies it");
  }
  // XLA leaves fusion-into-fusion to the fusion merger (into all users or none); with a cost
  // model a loop kernel may also be copied into just the users where that pays, which keeps
  // the result independent of the order in which the passes happened to build kernels.
  bool producer_is_loop_fusion = producer->opcode() == Opcode::kFusion && producer->fusion_kind() == FusionKind::kLoop;
  if (producer_is_loop_fusion && !profile_.cost_model) {
    return FusionDecision::No("merger-decides", "fusing a fusion into another is the fusion merger's decision");
  }
  bool producer_is_reduction = IsReduction(producer) ||
                               (producer->opcode() == Opcode::kFusion && producer->fusion_kind() == FusionKind::kInput);
  if (!producer_is_reduction && !IsLoopFusibleProducer(producer)) {
    return FusionDecision::No("not-fusible", Describe(producer) + " cannot be computed inside another kernel");
  }
  if (consumer->opcode() == Opcode::kFusion && consumer->fusion_kind() == FusionKind::kWholeLoop) {
    return FusionDecision::No("whole-loop-kernel",
                              "loop " + Name(consumer) + " runs all its steps in one kernel, which reads the values computed "
                              "before it from memory (fused in, " + Name(producer) + " would be computed again in every step)");
  }
  if (consumer->opcode() == Opcode::kFusion && consumer->fusion_kind() == FusionKind::kOutput) {
    const Instruction* dot = nullptr;
    for (const Instruction* i : consumer->fused_computation()->MakePostOrder()) {
      if (i->opcode() == Opcode::kDot) dot = i;
    }
    // A value only the epilogue reads (a bias broadcast along the rows) is computed there,
    // at the product's positions, as it is when it joined the epilogue before the dot did:
    // the kernels then do not depend on the order the passes met the two.
    bool feeds_dot = false;
    for (int i = 0; i < consumer->operand_count(); ++i) {
      if (consumer->operand(i) != producer) continue;
      const Instruction* p = consumer->fused_computation()->parameter(i);
      feeds_dot = feeds_dot || !dot || dot->operand(0) == p || dot->operand(1) == p;
    }
    // A broadcast (or iota) is computed from its index alone, so each kernel that reads it
    // may have its own copy (XLA duplicates them into every user).
    bool duplicable = producer->user_count() == 1 || IsAlwaysDuplicable(producer);
    if (profile_.cost_model && !feeds_dot && duplicable && !producer_is_reduction &&
        producer->opcode() != Opcode::kParameter) {
      if (producer->user_count() > 1) {
        return FusionDecision::Yes("dot-epilogue", "the epilogue of dot %" + dot->name() + " computes its own copy of " +
                                                       Describe(producer) + " at the product's positions");
      }
      return FusionDecision::Yes("dot-epilogue", Describe(producer) + " is read only by the epilogue of dot %" + dot->name() +
                                                     ", which computes it at the product's positions");
    }
    return FusionDecision::No("dot-kernel", "the kernel of dot " + (dot ? "%" + dot->name() : Name(consumer)) +
                                                " reads its operands from memory");
  }
  if (consumer->opcode() == Opcode::kCustomCall) {
    return FusionDecision::No("custom-call-barrier",
                              "custom call " + Name(consumer) + " (" + consumer->attrs().custom_call_target +
                                  ") is an opaque kernel: it reads its operands from memory");
  }
  if (!IsFusibleConsumer(consumer)) {
    return FusionDecision::No("consumer-not-fusible",
                              Describe(consumer) + " cannot take fused producers (it is a kernel of its own)");
  }
  if (consumer->opcode() == Opcode::kDot) {
    return FusionDecision::No("dot-kernel", "dot " + Name(consumer) + " reads its operands from memory");
  }
  int slot = -1;
  for (int i = 0; i < consumer->operand_count(); ++i) {
    if (consumer->operand(i) == producer) slot = i;
  }
  bool consumer_has_reduction = IsReduction(consumer) ||
                                (consumer->opcode() == Opcode::kFusion && consumer->fusion_kind() == FusionKind::kInput);
  if (producer_is_reduction) {
    if (FusionDecision row = RowFusion(producer, consumer); row.fuse || !row.rule.empty()) return row;
    if (!profile_.reduction_epilogue) {
      return FusionDecision::No("reduction-epilogue",
                                "reduction " + Name(producer) + " ends its kernel: the " + profile_.name +
                                    " profile does not fuse consumers into a reduction's kernel (no epilogue fusion)");
    }
    if (consumer_has_reduction) {
      return FusionDecision::No("reduce-into-reduce",
                                "both " + Name(producer) + " and " + Name(consumer) +
                                    " are reductions; one kernel holds one reduction loop nest");
    }
    if (OtherUsers(producer, consumer) > 0) {
      return FusionDecision::No("reduction-epilogue",
                                "reduction " + Name(producer) + " has other users; it would be computed twice");
    }
    if (!IsElementwise(ValueOp(consumer)->opcode()) || ReusesOperandElements(consumer, slot) ||
        !consumer->shape().IsArray() || !consumer->shape().SameDims(producer->shape())) {
      return FusionDecision::No("reduction-reuse",
                                Describe(consumer) + " reads the result of reduction " + Name(producer) +
                                    " at other positions (e.g. broadcast back over the reduced axis): fused, the reduction would be recomputed for each element");
    }
    return FusionDecision::Yes("reduction-epilogue", "elementwise epilogue of reduction " + Name(producer));
  }

  // Rules that only protect against duplicated work: the cost model may override them.
  std::string soft;
  std::string soft_rule;
  if (IsExpensive(producer) && ReusesOperandElements(consumer, slot)) {
    soft_rule = "expensive-reuse";
    soft = Describe(producer) + " is expensive and " + Name(consumer) +
           " reads each of its elements several times; fused, it would be recomputed each time";
  }
  int others = OtherUsers(producer, consumer);
  if (soft.empty() && others > 0 && !IsAlwaysDuplicable(producer) &&
      (!may_duplicate_ || IsExpensive(producer))) {
    soft_rule = may_duplicate_ ? "expensive-duplication" : "no-duplication";
    soft = Describe(producer) + " has " + std::to_string(others + 1) + " users; " +
           (may_duplicate_ ? "XLA does not duplicate expensive ops into several kernels"
                           : "the first fusion pass does not duplicate producers");
  }
  int emitted = EmittedCountOfProducer(producer, consumer);
  if (soft.empty() && emitted > profile_.max_emitted) {
    soft_rule = "code-duplication";
    soft = Describe(producer) + " would be emitted " + std::to_string(emitted) + " times in " + Name(consumer) +
           " (more than " + std::to_string(profile_.max_emitted) + ")";
  }
  if (soft.empty() && IsConcatLike(producer)) {
    int users = others + 1;
    int allowed = ValueOp(producer)->opcode() == Opcode::kConcatenate ? profile_.concat_max_users : 1;
    if (users > allowed || emitted > 1) {
      soft_rule = "concat-multi-user";
      soft = Op(producer) + " " + Name(producer) + " has " + std::to_string(users) + " users; the " + profile_.name +
             " profile does not fuse " + (ValueOp(producer)->opcode() == Opcode::kConcatenate ? "a concatenate" : "a " + Op(producer)) +
             " with more than " + std::to_string(allowed) + (allowed == 1 ? " user" : " users") + " (code duplication)";
    }
  }
  int operands = FusedOperandsAndOutputs(producer, consumer);
  if (operands > profile_.max_operands_and_outputs) {
    return FusionDecision::No("size-budget",
                              "the fused kernel would have " + std::to_string(operands) +
                                  " operands and outputs, more than the budget of " +
                                  std::to_string(profile_.max_operands_and_outputs));
  }
  int duplication = CodeDuplication(producer, emitted);
  if (duplication >= static_cast<int>(kEmittedCountCap)) {
    // A hard limit, also for the cost model, which prices the work, not the code: a
    // 16-element cumsum of sin(x) fused whole took 14 s of LLVM.
    return FusionDecision::No("code-size", "an op of " + Name(producer) + " would be emitted " +
                                               std::to_string(duplication) + " or more times per element of " +
                                               Name(consumer) + " (the code would grow as much)");
  }
  if (profile_.cost_model) {
    // Never fuse what XLA's rules allow only to refuse it on cost: the cost model decides
    // the soft rules, and confirms the rest is not harmful.
    FusionDecision d = CostModelDecision(cost_, producer, consumer, soft);
    if (soft.empty() && !d.fuse && !producer_is_loop_fusion) {
      // XLA would fuse: so do we (the fusionjit profile is never more conservative).
      d.fuse = true;
      d.rule = "fusible";
      d.reason = "fusible (XLA's rules allow it)";
    }
    d.emitted = emitted;
    return d;
  }
  if (!soft.empty()) {
    FusionDecision d = FusionDecision::No(soft_rule, soft);
    d.emitted = emitted;
    return d;
  }
  FusionDecision d = FusionDecision::Yes("fusible");
  d.emitted = emitted;
  return d;
}

bool InstructionFusionPass::Run(Module& module) {
  if (!profile_.enabled) return false;
  // Kernels are built anew or grown in place (FuseIntoFusion, which updates these) and
  // freed when the pass ends.
  EmittedCountCache counts;
  KernelCostCache costs;
  questions_ = 0;
  bool changed = false;
  for (Computation* comp : module.ControlFlowComputations()) changed = RunOn(comp) || changed;
  return changed;
}

bool InstructionFusionPass::RunOn(Computation* comp) {
  bool changed = false;
  std::vector<Instruction*> order = comp->MakePostOrder();
  std::unordered_map<const Instruction*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  std::unordered_set<const Instruction*> removed;
  for (size_t idx = order.size(); idx-- > 0;) {
    Instruction* consumer = order[idx];
    // Fusing removes instructions: only look at ones still in the computation.
    if (removed.count(consumer) || !comp->Contains(consumer)) continue;
    if (!IsFusibleConsumer(consumer)) {
      // A kernel of its own (a dot, a scatter, a loop fused whole): say so for each of its
      // producers, for explain.
      bool own_kernel = consumer->opcode() == Opcode::kDot || consumer->opcode() == Opcode::kScatter ||
                        consumer->opcode() == Opcode::kCustomCall ||
                        (consumer->opcode() == Opcode::kFusion && (consumer->fusion_kind() == FusionKind::kWholeLoop ||
                                                                   consumer->fusion_kind() == FusionKind::kScatter));
      if (log_ && own_kernel) {
        for (Instruction* op : consumer->operands()) {
          if (NeedsKernel(op) || op->opcode() == Opcode::kFusion) log_->Record(std::string(name()), op, consumer, ShouldFuse(op, consumer));
        }
      }
      continue;
    }
    // Producers latest in the post order first, each asked once per sweep. A fusion only
    // brings in producers earlier in the post order (the fused producer's operands), so the
    // same sweep meets them; sweeps repeat while one fuses, asking again the producers it
    // refused before the kernel grew. (Restarting after each fusion instead asked every
    // refused producer again after every fusion: quadratic in a kernel's operands, 260,000
    // questions for a 32-step unrolled scan.)
    for (bool fused_in_sweep = true; fused_in_sweep;) {
      fused_in_sweep = false;
      std::set<std::pair<size_t, Instruction*>, std::greater<>> pending;
      for (Instruction* op : consumer->operands()) pending.insert({position[op], op});
      while (!pending.empty()) {
        auto [at, producer] = *pending.begin();
        pending.erase(pending.begin());
        Opcode op = producer->opcode();
        if (op == Opcode::kGetTupleElement && producer->operand(0)->opcode() == Opcode::kCustomCall) {
          // A custom call's outputs are read through get-tuple-element: still a barrier.
          if (log_) log_->Record(std::string(name()), producer->operand(0), consumer,
                                 ShouldFuse(producer->operand(0), consumer));
          continue;
        }
        if (op == Opcode::kParameter || op == Opcode::kGetTupleElement || op == Opcode::kTuple) continue;
        FusionDecision d = ShouldFuse(producer, consumer);
        ++questions_;
        if (log_) log_->Record(std::string(name()), producer, consumer, d);
        if (!d.fuse) continue;
        bool duplicate = OtherUsers(producer, consumer) > 0;
        std::unordered_set<const Instruction*> dup;
        if (duplicate) dup.insert(producer);
        // In place where the consumer is a kernel already (linear in the kernel's size
        // over all its producers); else a new kernel of the two.
        Instruction* fusion = consumer->opcode() == Opcode::kFusion && producer->shape().IsArray()
                                  ? FuseIntoFusion(producer, consumer, duplicate)
                                  : nullptr;
        if (!fusion) fusion = FuseInstructions({producer, consumer}, dup);
        if (fusion != consumer) removed.insert(consumer);
        if (!duplicate) removed.insert(producer);
        position[fusion] = idx;
        consumer = fusion;
        fused_in_sweep = changed = true;
        // Its operands, now the kernel's, come earlier in the post order: still ahead.
        for (Instruction* o : fusion->operands()) {
          if (position[o] < at) pending.insert({position[o], o});
        }
      }
    }
  }
  return changed;
}

}  // namespace fj
