// The fusion pipeline (see fusion_pipeline.h).
#include "fusion/fusion_pipeline.h"

#include "fusion/fusion_merger.h"
#include "fusion/instruction_fusion.h"
#include "fusion/kernel_wrapper.h"
#include "fusion/multi_output_fusion.h"
#include "passes/cse.h"
#include "passes/dce.h"

namespace fj {

void AddFusionPasses(Pipeline& pipeline, const FusionProfile& profile, FusionLog* log) {
  if (profile.enabled) {
    // Repeated until nothing changes, as XLA's HloPassFix around its fusion passes.
    Pipeline& fix = pipeline.AddPass<Pipeline>("fusion-fixed-point");
    fix.set_fixed_point(8);
    fix.AddPass<InstructionFusionPass>(profile, log, /*may_duplicate=*/false);
    fix.AddPass<InstructionFusionPass>(profile, log, /*may_duplicate=*/true);
    fix.AddPass<FusionMergerPass>(profile, log);
    fix.AddPass<MultiOutputFusionPass>(profile, log);
    fix.AddPass<DcePass>();
    pipeline.AddPass<HorizontalFusionPass>(profile, log);
    pipeline.AddPass<DcePass>();
  }
  pipeline.AddPass<KernelWrapperPass>();
}

}  // namespace fj
