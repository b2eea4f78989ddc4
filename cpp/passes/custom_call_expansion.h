// Custom calls whose work IR ops can express are rewritten, for targets that cannot call
// the runtime's C++ kernels (the GPU), into a kernel of their own: a loop fusion computing
// the same values (threefry2x32). It runs after kernel formation, so it stays one kernel
// and a fusion boundary, as the custom call was; the fusion keeps the custom call's target
// (attrs.custom_call_target) so that launches still read as the custom call.
#pragma once

#include <string>

#include "passes/pass.h"

namespace fj {

class CustomCallExpansionPass : public Pass {
 public:
  std::string_view name() const override { return "custom-call-expansion"; }
  bool Run(Module& module) override;
};

// Whether custom calls to `target` have an IR expansion.
bool HasIrExpansion(const std::string& target);

}  // namespace fj
