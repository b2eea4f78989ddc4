// The fusion pipeline of a profile, as XLA's (legacy) GPU fusion pipeline: instruction
// fusion without and with duplication, the fusion merger, multi-output fusion, then
// horizontal fusion; kernel formation wraps whatever is left.
#pragma once

#include "fusion/fusion_decision.h"
#include "fusion/profile.h"
#include "passes/pass.h"

namespace fj {

// Adds the passes for `profile` (logging into `log`, which must outlive the pipeline).
void AddFusionPasses(Pipeline& pipeline, const FusionProfile& profile, FusionLog* log);

}  // namespace fj
