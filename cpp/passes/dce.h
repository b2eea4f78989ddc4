// Dead code elimination: drops instructions nothing uses and computations nothing calls.
#pragma once

#include "passes/pass.h"

namespace fj {

class DcePass : public Pass {
 public:
  std::string_view name() const override { return "dce"; }
  bool Run(Module& module) override;
};

}  // namespace fj
