// Kernel formation (see kernel_wrapper.h).
#include "fusion/kernel_wrapper.h"

#include "fusion/fusion_utils.h"

namespace fj {

bool KernelWrapperPass::Run(Module& module) {
  bool changed = false;
  // Kernels live in the entry, loop conditions and bodies and branches, never in combiners
  // or fused bodies.
  for (Computation* c : module.ControlFlowComputations()) {
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
