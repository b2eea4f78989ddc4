// The fusion decision log (see fusion_decision.h).
#include "fusion/fusion_decision.h"

#include <cstdio>
#include <unordered_set>
#include <vector>

#include "ir/computation.h"

namespace fj {

std::string FusionDecision::Figures() const {
  std::string out;
  char buf[160];
  if (bytes_unfused >= 0 && bytes_fused >= 0) {
    std::snprintf(buf, sizeof(buf), "bytes moved %.0f -> %.0f", bytes_unfused, bytes_fused);
    out += buf;
  }
  if (cost_unfused_us >= 0 && cost_fused_us >= 0) {
    std::snprintf(buf, sizeof(buf), "%sestimated time %.3g -> %.3g us", out.empty() ? "" : ", ",
                  cost_unfused_us, cost_fused_us);
    out += buf;
  }
  if (emitted >= 0) {
    std::snprintf(buf, sizeof(buf), "%semitted %dx", out.empty() ? "" : ", ", emitted);
    out += buf;
  }
  return out;
}

const Instruction* ValueOp(const Instruction* instr) {
  while (instr->opcode() == Opcode::kFusion) {
    const Instruction* root = instr->fused_computation()->root();
    instr = root->opcode() == Opcode::kTuple && root->operand_count() > 0 ? root->operand(0) : root;
  }
  return instr;
}

void FusionLog::Record(const std::string& pass, const Instruction* producer,
                       const Instruction* consumer, const FusionDecision& decision) {
  FusionLogEntry e;
  e.pass = pass;
  const Instruction* p = ValueOp(producer);
  e.producer = p->name();
  e.producer_opcode = std::string(OpcodeName(p->opcode()));
  e.producer_source = p->metadata();
  // Inside a consumer fusion, the ops that read the producer are the users of the fused
  // parameter bound to it.
  std::string consumers, opcodes;
  if (consumer->opcode() == Opcode::kFusion) {
    const Computation* fused = consumer->fused_computation();
    for (int i = 0; i < consumer->operand_count(); ++i) {
      if (consumer->operand(i) != producer) continue;
      for (const Instruction* u : fused->parameter(i)->users()) {
        consumers += (consumers.empty() ? "" : ",") + u->name();
        opcodes += (opcodes.empty() ? "" : ",") + std::string(OpcodeName(u->opcode()));
      }
    }
  }
  if (consumers.empty()) {
    const Instruction* c = ValueOp(consumer);
    consumers = c->name();
    opcodes = std::string(OpcodeName(c->opcode()));
  }
  e.consumer = consumers;
  e.consumer_opcode = opcodes;
  e.decision = decision;
  std::string key = e.pass + "|" + e.producer + "|" + e.consumer + "|" + (decision.fuse ? "1" : "0") + "|" +
                    decision.rule + "|" + decision.reason;
  if (!seen_.insert(key).second) return;  // before the walk below: decisions repeat often
  if (consumer->opcode() == Opcode::kFusion) {
    // Breadth first from the root: the ops nearest the kernel's outputs, which copies of a
    // duplicated producer do not share.
    std::vector<const Instruction*> queue = {consumer->fused_computation()->root()};
    std::unordered_set<const Instruction*> seen(queue.begin(), queue.end());
    for (size_t q = 0; q < queue.size() && e.consumer_kernel_ops.size() < FusionLogEntry::kKernelOpsInLog; ++q) {
      const Instruction* i = queue[q];
      if (i->opcode() != Opcode::kParameter && i->opcode() != Opcode::kTuple) e.consumer_kernel_ops.push_back(i->name());
      for (const Instruction* op : i->operands()) {
        if (seen.insert(op).second) queue.push_back(op);
      }
    }
  } else {
    e.consumer_kernel_ops.push_back(consumer->name());
  }
  entries_.push_back(std::move(e));
}

void FusionLog::Note(const std::string& pass, const FusionDecision& decision) {
  FusionLogEntry e;
  e.pass = pass;
  e.decision = decision;
  entries_.push_back(std::move(e));
}

std::string FusionLog::ToString() const {
  std::string out;
  for (const FusionLogEntry& e : entries_) {
    out += e.pass + ": " + (e.decision.fuse ? "fuse " : "keep ") + "%" + e.producer + " (" +
           e.producer_opcode + ") -> %" + e.consumer + " [" + e.decision.rule + "] " + e.decision.reason;
    std::string figures = e.decision.Figures();
    if (!figures.empty()) out += " (" + figures + ")";
    out += "\n";
  }
  return out;
}

}  // namespace fj
