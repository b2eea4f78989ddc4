// Whole-loop fusion (beyond XLA; what the hand-written CUDA CartPole does): a counted loop
// whose every step is elementwise over one index space (the lanes) becomes ONE kernel. Each
// lane (a vector of lanes on the CPU) keeps its state in registers for all steps, reading
// its xs and writing its ys step by step; the lanes are split over the thread pool, the
// step loop runs inside. Per-step reductions across lanes (the reset count of each step)
// are accumulated per block of lanes and combined after, in block order. Uniform state
// (a PRNG key) is recomputed by every lane block. See ir/whole_loop.h for the layout.
#pragma once

#include <string>

#include "fusion/fusion_decision.h"
#include "fusion/profile.h"
#include "passes/pass.h"
#include "support/target.h"

namespace fj {

class WholeLoopFusionPass : public Pass {
 public:
  // `target` fixes the lanes per block of partial results (a GPU warp), if it does.
  WholeLoopFusionPass(FusionProfile profile, FusionLog* log, const Target& target = Target())
      : profile_(std::move(profile)), log_(log), block_lanes_(target.whole_loop_block_lanes) {}
  std::string_view name() const override { return "whole-loop-fusion"; }
  bool Run(Module& module) override;

 private:
  FusionProfile profile_;
  FusionLog* log_;
  int64_t block_lanes_;
};

// Why `loop` (a while instruction, unfused) cannot run as one kernel, or "" if it can.
std::string WholeLoopRefusal(const Instruction* loop);

}  // namespace fj
