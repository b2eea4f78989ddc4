// Kernel formation (see kernel_wrapper.h).
#include "fusion/kernel_wrapper.h"

#include "fusion/fusion_utils.h"

namespace fj {

bool KernelWrapperPass::Run(Module& module) {
  bool changed = false;
  for (Computation* c : module.MakeComputationPostOrder()) {
    // Kernels live in the entry and in loop bodies, never in combiners or fused bodies.
    if (c->IsFusionComputation() || c != module.entry()) continue;
    for (Instruction* instr : c->MakePostOrder()) {
      if (NeedsKernel(instr)) {
        WrapInFusion(instr);
        changed = true;
      }
    }
  }
  return changed;
}

}  // namespace fj
