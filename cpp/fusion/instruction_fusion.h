// Instruction fusion (XLA's InstructionFusion, Fig. 1a of the paper): producers are fused
// into their consumers, visiting consumers in reverse post order. The rules come from the
// profile; every pair considered is logged with its decision.
#pragma once

#include "analysis/cost_model.h"
#include "fusion/fusion_decision.h"
#include "fusion/profile.h"
#include "passes/pass.h"

namespace fj {

class InstructionFusionPass : public Pass {
 public:
  // XLA runs the pass twice: first without duplicating producers, then allowing cheap
  // producers to be duplicated into several consumers.
  InstructionFusionPass(FusionProfile profile, FusionLog* log, bool may_duplicate,
                        const Target& target = Target())
      : profile_(std::move(profile)), log_(log), may_duplicate_(may_duplicate), cost_(target) {}
  std::string_view name() const override {
    return may_duplicate_ ? "instruction-fusion-dup" : "instruction-fusion";
  }
  bool Run(Module& module) override;

  // The decision for fusing `producer` into `consumer` (exposed for tests).
  FusionDecision ShouldFuse(const Instruction* producer, const Instruction* consumer) const;

  // How many producer-consumer pairs the last Run decided (for tests of its complexity).
  int64_t questions() const { return questions_; }

  // Row fusion needs rows enough for the threads, each short enough to stay in cache.
  static constexpr int64_t kRowFusionMinRows = 8;
  static constexpr int64_t kRowFusionMaxRow = 1 << 16;

 private:
  bool RunOn(Computation* comp);
  // The fusionjit profile's row fusion of a reduction into the kernel that reads it back
  // along its rows; an empty rule when it does not apply.
  FusionDecision RowFusion(const Instruction* producer, const Instruction* consumer) const;

  FusionProfile profile_;
  FusionLog* log_;
  bool may_duplicate_;
  CostModel cost_;
  int64_t questions_ = 0;
};

// The cost model's view of fusing `producer` into `consumer` (`producer` stays if it has
// other users): figures filled in, fuse iff the fused estimate is not slower.
FusionDecision CostModelDecision(const CostModel& model, const Instruction* producer,
                                 const Instruction* consumer, const std::string& overridden);

}  // namespace fj
