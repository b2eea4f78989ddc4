// Multi-output fusion (XLA's MultiOutputFusion, Fig. 1c): sibling fusion first (kernels that
// read the same operand become one kernel with several outputs, reading it once), then
// producer-consumer fusion (a producer with several users joins one consumer's kernel as
// an extra output). Never creates a cycle; loop shapes must match.
#pragma once

#include "fusion/fusion_decision.h"
#include "fusion/profile.h"
#include "passes/pass.h"

namespace fj {

class MultiOutputFusionPass : public Pass {
 public:
  MultiOutputFusionPass(FusionProfile profile, FusionLog* log) : profile_(std::move(profile)), log_(log) {}
  std::string_view name() const override { return "multi-output-fusion"; }
  bool Run(Module& module) override;

 private:
  bool FuseSiblings(Computation* comp);
  bool FuseProducerConsumer(Computation* comp);
  FusionProfile profile_;
  FusionLog* log_;
};

// Horizontal fusion (Fig. 1d): independent small kernels whose results are only program
// outputs run as one kernel, also when their shapes differ.
class HorizontalFusionPass : public Pass {
 public:
  HorizontalFusionPass(FusionProfile profile, FusionLog* log) : profile_(std::move(profile)), log_(log) {}
  std::string_view name() const override { return "horizontal-fusion"; }
  bool Run(Module& module) override;

 private:
  bool FuseOutputKernels(Computation* comp, bool loop_step);
  FusionProfile profile_;
  FusionLog* log_;
};

}  // namespace fj
