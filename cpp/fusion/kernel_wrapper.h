// Kernel formation for whatever fusion left unfused: every remaining instruction that
// computes data becomes a single-instruction fusion, so codegen only ever sees kernels (as
// XLA's FusionWrapper does). With fusion disabled this is the whole story.
#pragma once

#include "passes/pass.h"

namespace fj {

class KernelWrapperPass : public Pass {
 public:
  std::string_view name() const override { return "kernel-wrapper"; }
  bool Run(Module& module) override;
};

}  // namespace fj
