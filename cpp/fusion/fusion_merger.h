// The fusion merger (XLA's FusionMerger, Fig. 1b): a loop fusion is merged into all of
// its users or none, and only if the bytes moved do not grow past the profile's ratio
// (legacy XLA: 1.10); the fusionjit profile asks the cost model instead.
#pragma once

#include "analysis/cost_model.h"
#include "fusion/fusion_decision.h"
#include "fusion/profile.h"
#include "passes/pass.h"

namespace fj {

class FusionMergerPass : public Pass {
 public:
  FusionMergerPass(FusionProfile profile, FusionLog* log, const Target& target = Target())
      : profile_(std::move(profile)), log_(log), cost_(target) {}
  std::string_view name() const override { return "fusion-merger"; }
  bool Run(Module& module) override;
  FusionDecision ShouldMerge(const Instruction* producer) const;

 private:
  bool RunOn(Computation* comp);
  FusionProfile profile_;
  FusionLog* log_;
  CostModel cost_;
};

}  // namespace fj
