// Frontend repair of a loop's stacked output that is only reduced (the fusionjit profile
// only): a scan writes a row per step ([T, N]: a vmapped environment's reward or done flag)
// and the program then reduces each row after the loop (rewards.sum(axis=1)). The loop
// instead reduces each row as it computes it and writes one value per step ([T]), so the
// [T, N] array is neither written nor read back, and a loop that runs as one kernel sums
// the row over its lanes as it goes.
#pragma once

#include "passes/pass.h"

namespace fj {

class LoopOutputReductionPass : public Pass {
 public:
  std::string_view name() const override { return "loop-output-reduction"; }
  bool Run(Module& module) override;
};

}  // namespace fj
