// The fusion pipeline of a profile, as XLA's (legacy) GPU fusion pipeline: instruction
// fusion without and with duplication, the fusion merger, multi-output fusion, then
// horizontal fusion; kernel formation wraps whatever is left.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fusion/fusion_decision.h"
#include "fusion/profile.h"
#include "passes/pass.h"
#include "support/target.h"

namespace fj {

// Adds the passes for `profile` on `target` (logging into `log`, which must outlive the
// pipeline).
void AddFusionPasses(Pipeline& pipeline, const FusionProfile& profile, FusionLog* log,
                     const Target& target = Target());

struct FusionPlan {
  std::unique_ptr<Module> before;  // the module the plan was built from
  std::unique_ptr<Module> module;
  FusionLog log;
  std::vector<PassRecord> records;
  std::string rules;  // the profile whose rules built it
  double estimated_us = 0;
  int kernels = 0;
};

// Forms the kernels of `module` under `profile`. A profile with a cost model decides each
// fusion locally, and a local decision can leave a kernel that a later pass would have
// merged away; so it also builds the plans of XLA's rules ("xla", "xla+concat") and keeps
// the one the cost model estimates fastest (fewer kernels on a tie, its own plan on a full
// tie): never worse than XLA's rules by its own measure. XLA's rules see `baseline` if given
// (the module before the profile's frontend repair), else `module`. The plan's log ends
// with an entry "plan-selection" naming the candidates and their estimates.
FusionPlan FormKernels(const Module& module, const FusionProfile& profile, const Target& target = Target(),
                       const Module* baseline = nullptr);

}  // namespace fj
