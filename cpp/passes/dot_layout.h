// Dot layout (as XLA's DotDecomposer canonicalises dots): a dot whose rhs is not laid out
// [batch..., contracting..., free...] reads it through a transpose of it into that layout.
// The kernels walk a dot's output with vectors along its last dimension, which is the rhs's
// last free one: in this layout its lanes are consecutive in memory, where a rhs contracted
// over its last dimension (q @ k^T written as einsum('bqd,bkd->bqk')) needs a gather per
// lane and step, and the CPU cannot compute the product in tiles. The transpose is a kernel
// of its own (one pass over the rhs); the sums keep their order.
#pragma once

#include "passes/pass.h"

namespace fj {

class DotLayoutPass : public Pass {
 public:
  std::string_view name() const override { return "dot-layout"; }
  bool Run(Module& module) override;
};

}  // namespace fj
