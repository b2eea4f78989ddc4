// Frontend repair of a loop-invariant array the loop only slices, that was transposed before
// the loop (the fusionjit profile only). vmap puts the batch axis first: a vmapped
// environment's reset pool [R, 4, N] becomes [N, R, 4], and each step's slice of it,
// [N, 1, 1] for one state value of every environment, reads N elements R * 4 apart (a
// gather per vector of lanes). The loop instead carries the array as it was and slices it
// there ([1, 1, N], contiguous); the slice is transposed back, which for a slice whose
// other dimensions are ones only renames its dimensions.
#pragma once

#include "passes/pass.h"

namespace fj {

class LoopInvariantLayoutPass : public Pass {
 public:
  std::string_view name() const override { return "loop-invariant-layout"; }
  bool Run(Module& module) override;
};

}  // namespace fj
