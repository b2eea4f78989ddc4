// Common subexpression elimination: identical instructions over the same operands (and
// equal constants) are merged, per computation.
#pragma once

#include "passes/pass.h"

namespace fj {

class CsePass : public Pass {
 public:
  std::string_view name() const override { return "cse"; }
  bool Run(Module& module) override;
};

}  // namespace fj
