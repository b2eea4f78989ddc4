// What the cost model knows of the runtime's custom calls (runtime/custom_calls.cc): their
// kernels are opaque, so their algorithms' costs are stated here.
#pragma once

#include "analysis/cost_model.h"

namespace fj {

// Completes `c`, the generic estimate of custom call `call` (its bytes, and half a lane-op
// per output element): its work counts its operands' elements as well (top_k's few outputs
// per long row are much work), and targets with a known algorithm get its figures.
void PriceCustomCall(const Instruction* call, KernelCost& c);

}  // namespace fj
