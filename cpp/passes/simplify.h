// Algebraic simplification: identities (x+0, x*1, double negation, no-op reshapes,
// transposes and broadcasts, composed reshapes/transposes/broadcasts), select with a
// constant predicate, and tuple / get-tuple-element forwarding.
#pragma once

#include "passes/pass.h"

namespace fj {

class SimplifyPass : public Pass {
 public:
  std::string_view name() const override { return "simplify"; }
  bool Run(Module& module) override;
};

}  // namespace fj
