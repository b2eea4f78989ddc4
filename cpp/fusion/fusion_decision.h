// Fusion decisions with their reasons, and the log of every decision a pass takes. The log
// is what fusionjit.explain shows: for each kept kernel boundary, the rule that kept it and
// the figures behind it.
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

namespace fj {

class Instruction;

struct FusionDecision {
  bool fuse = false;
  std::string rule;    // a short identifier, e.g. "concat-multi-user", "cost-model"
  std::string reason;  // plain words for users
  // Figures behind the decision (negative: not computed).
  double bytes_unfused = -1;
  double bytes_fused = -1;
  double cost_unfused_us = -1;
  double cost_fused_us = -1;
  int emitted = -1;  // how often the producer would be emitted in the consumer

  static FusionDecision Yes(std::string rule, std::string reason = "") {
    FusionDecision d;
    d.fuse = true;
    d.rule = std::move(rule);
    d.reason = std::move(reason);
    return d;
  }
  static FusionDecision No(std::string rule, std::string reason) {
    FusionDecision d;
    d.rule = std::move(rule);
    d.reason = std::move(reason);
    return d;
  }
  explicit operator bool() const { return fuse; }
  std::string Figures() const;  // "bytes 1024 -> 512, cost 1.2 -> 0.8 us, emitted 3x"
};

struct FusionLogEntry {
  std::string pass;
  // Names of the instructions as users see them: the producer's op (a fusion is named by
  // its root op) and the consumer op(s) that read it.
  std::string producer;
  std::string producer_opcode;
  std::string consumer;
  std::string consumer_opcode;
  // Ops of the consumer's kernel at the time, from its root back, at most kKernelOpsInLog
  // (fused copies share names, so this tells which of the final kernels the decision was
  // about; all ops, for every decision about a kernel that grows to thousands of ops, made
  // the log quadratic in time and memory).
  static constexpr size_t kKernelOpsInLog = 32;
  std::vector<std::string> consumer_kernel_ops;
  std::string producer_source;  // "file.py:12 (f)"
  FusionDecision decision;
};

class FusionLog {
 public:
  void Record(const std::string& pass, const Instruction* producer, const Instruction* consumer,
              const FusionDecision& decision);
  // A decision about the whole program rather than one pair (producer and consumer empty).
  void Note(const std::string& pass, const FusionDecision& decision);
  const std::vector<FusionLogEntry>& entries() const { return entries_; }
  std::string ToString() const;

 private:
  std::vector<FusionLogEntry> entries_;
  std::unordered_set<std::string> seen_;  // a fixed-point pipeline repeats its questions
};

// The op a user recognises as the value of `instr`: a fusion's root op (or the first root
// of a multi-output fusion), else the instruction itself.
const Instruction* ValueOp(const Instruction* instr);

}  // namespace fj
