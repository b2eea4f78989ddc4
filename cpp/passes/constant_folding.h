// Constant folding: an instruction whose operands are all constants becomes a constant,
// unless that would turn a cheap generator (broadcast, iota) into a large literal.
#pragma once

#include "passes/pass.h"

namespace fj {

class ConstantFoldingPass : public Pass {
 public:
  std::string_view name() const override { return "constant-folding"; }
  bool Run(Module& module) override;
};

}  // namespace fj
