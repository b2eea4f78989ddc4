// Frontend repair (beyond XLA): a slice that reads inside one operand of a concatenate
// reads that operand instead. Code that packs values with concatenate (np.array([...]))
// and unpacks them with slices then no longer goes through the concatenate, which XLA's
// rules keep as a fusion boundary when it has several users (the paper's limitation 1).
#pragma once

#include "passes/pass.h"

namespace fj {

class SliceOfConcatForwardingPass : public Pass {
 public:
  std::string_view name() const override { return "slice-of-concat-forwarding"; }
  bool Run(Module& module) override;
};

}  // namespace fj
